"""The serving loop's graph buckets, one definition for the loop (calibrate/serving_loop.py, on the
GPU machine) and the simulator that prices it (roofline.pass_costs). Stdlib only."""

from __future__ import annotations


def capture_sizes(max_num_seqs: int) -> list[int]:
    """Decode buckets: 1, 2, 4, then powers of two and 1.5x powers of two from 8 (8, 16, 24, 32,
    48, 64, 96, 128, 192, ...), those below ``max_num_seqs``, and ``max_num_seqs`` itself."""
    sizes = {1, 2, 4}
    k = 8
    while k < max_num_seqs:
        sizes.add(k)
        if k >= 16 and k * 3 // 2 < max_num_seqs:
            sizes.add(k * 3 // 2)
        k *= 2
    return sorted(s for s in sizes if s < max_num_seqs) + [max_num_seqs]


def prefill_token_buckets(max_tokens: int) -> list[int]:
    """Prefill graphs' token buckets: 16, 32, ..., 512, then 768, 1024, 1536, 2048, ... (powers of
    two and 1.5 x powers of two from 512), those below ``max_tokens``, and ``max_tokens`` itself."""
    sizes = set()
    k = 16
    while k < max_tokens:
        sizes.add(k)
        if k >= 512 and k * 3 // 2 < max_tokens:
            sizes.add(k * 3 // 2)
        k *= 2
    return sorted(sizes) + [max_tokens]
