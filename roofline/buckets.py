"""The serving loop's graph buckets, one definition for the loop (calibrate/serving_loop.py, on the
GPU machine) and the simulator that prices it (roofline.pass_costs). Stdlib only."""

from __future__ import annotations


def _ladder(first: int, wide_from: int, limit: int) -> list[int]:
    """Powers of two from ``first``, and 1.5x powers of two from ``wide_from``, below ``limit``."""
    sizes = set()
    k = first
    while k < limit:
        sizes.add(k)
        if k >= wide_from and k * 3 // 2 < limit:
            sizes.add(k * 3 // 2)
        k *= 2
    return sorted(sizes)


def capture_sizes(max_num_seqs: int) -> list[int]:
    """Decode buckets: 1, 2, 4, then powers of two and 1.5x powers of two from 8 (8, 16, 24, 32,
    48, 64, 96, 128, 192, ...), those below ``max_num_seqs``, and ``max_num_seqs`` itself."""
    return [s for s in (1, 2, 4) if s < max_num_seqs] + _ladder(8, 16, max_num_seqs) + [max_num_seqs]


def prefill_token_buckets(max_tokens: int) -> list[int]:
    """Prefill graphs' token buckets: 16, 32, ..., 512, then 768, 1024, 1536, 2048, ... (powers of
    two and 1.5 x powers of two from 512), those below ``max_tokens``, and ``max_tokens`` itself."""
    return _ladder(16, 512, max_tokens) + [max_tokens]
