"""Probes: evidence for the attention and memory terms of the step model (issue 9) and the
matmul table the serving loop's prefill price reads (issue 14).

    python3 -m calibrate.probes --out DIR --what attention,memory,gemm,chunk,loop-attention,layers,prefill-attention,moe,kernels,masked-attention,prefill-kernels,attention-groups [--device cuda] [--budget-s 90]

Each probe writes one JSON file in DIR (rewritten atomically as it goes, so a time limit keeps
what was measured) and never stops the job: an error in one point, case or probe is recorded
in the file and the rest goes on. On the CPU the probes run tiny sizes (CI).

attention -> ``probe-attention.json``
    One layer's decode attention over a static cache, timed alone, over batch x cached tokens x
    the head shapes of five catalog models: the graph engine's exact ops (``graph_attention``:
    baddbmm of q K^T with the mask bias over the whole cache, softmax, bmm with V) and each piece
    alone (``graph_qk``, ``graph_softmax``, ``graph_pv``, and ``graph_cache_write``, the two
    index_copy_ of the new token's K and V); ``torch.nn.functional.scaled_dot_product_attention``
    with q_len 1 and ``enable_gqa=True`` (what hf-eager runs) under each backend
    (``sdpa_default``, ``sdpa_flash``, ``sdpa_efficient``, ``sdpa_math``, ``sdpa_cudnn``); and
    ``cat_append``, the dynamic cache's growth (two torch.cat of a (B, kv, T, d) cache with one
    new token). Every point records the KV bytes read, the bytes moved, FLOPs, score elements
    (batch x q_heads x T) and sequence-layers (batch), so per-byte, per-score-element and
    per-(sequence x layer) costs can be fitted. The calls are captured in one CUDA graph over
    enough copies of the cache to exceed L2 (as in a decode step, where other layers' weights
    and caches flush it); time per layer = graph replay / copies. Combinations whose K + V exceed
    16 GiB are skipped. ``dispatch`` records which kernel the default SDPA picks per shape.

memory -> ``probe-memory.json``
    Why the graph engine's peak at batch 1 sits ~1 GiB above the weights in some runs and
    ~0.05-0.2 GiB in others. Each case runs in a fresh Python process and records
    torch.cuda.memory_allocated / max_memory_allocated / memory_reserved, selected
    memory_stats and the largest live blocks after each stage: weights, static cache, eager SDPA
    prefill (with the kernels the profiler saw, hence the backend), CUDA-graph capture, cuBLAS
    workspaces cleared, and a whole runner point; with and without the ceilings first, with and
    without the cuDNN SDPA backend; the prefill under each SDPA backend; hf-eager with and without
    cuDNN. Models qwen2.5-0.5b (head_dim 64) and qwen2.5-1.5b (head_dim 128).

gemm -> ``probe-gemm.json``
    The card's bf16 matmul, ``torch.nn.functional.linear(x (M, K), W (N, K))`` (the graph engine's
    and the serving loop's every linear), timed alone over a grid of M (tokens: 1 to 65,536),
    N and K (128 to 65,536 and 256 to 32,768 on a 1 / 1.5 / 2 ladder); along M each (N, K)
    stops after the first shape over ``max_flop``, where the rate has long flattened. Calls over
    enough copies of W to exceed L2 are captured in one CUDA graph (a pass's other layers flush
    L2 too). Why: a prefill's matmuls at a few hundred to a few thousand tokens run far below
    the peak a large prefill reaches, and by how much depends on N and K (tiles, waves): the
    serving loop's prefill price reads this table (roofline.gemm).

chunk -> ``probe-chunk.json``
    The serving loop's prefill attention, one layer timed alone: a chunk graph's
    (``calibrate.serving_loop.chunk_attention``: the chunk's slot's T cache rows copied out and
    placed before the pass's own K/V, one varlen call with separate query and key offsets) and a
    prefill graph's (K/V heads repeated, one varlen call) on the same bucket of tokens: a chunk of
    t tokens after c cached ones, then one whole prompt of the bucket's other tokens, over
    buckets x t x c at the head shapes of the served models and the loop's cache (64 slots x
    1,280 rows, as the committed serving runs). Why: a chunk's queries sit in a few thread blocks
    that walk all c + t keys one block after another, so its time grows with c far beyond its
    FLOPs; the serving loop's price of a chunk graph reads this table.

loop-attention -> ``probe-loop-attention.json``
    The serving loop's prefill-graph attention exactly as its graphs call it: K/V repeated, one
    varlen call over max_num_seqs + 1 sequences (the pass's prompts, the padding, empty ones) at
    slot counts 1, 64 and 256, buckets 256-2,048, four prompt layouts (a lone prompt of 7/8 or 9/16
    of the bucket, prompts of 256, eight of an eighth), the served models' head shapes. Why: the
    chunk probe's prefill_s, which prices the loop's attention where its terms say so
    (``prefill_attention_measured``), has one or two sequences and buckets up to 1,024; this
    measures the rest (docs/serving.md, "The prefill graphs' attention").

layers -> ``probe-layers.json``
    Where a decode step's time goes, per layer and per step: the graph engine's own decode step
    (``calibrate.graph_engine.decode_step``, captured in one CUDA graph, as the engine runs it) of
    each model cut to 2, 4, 8 and 12 layers, at batches 1, 16 and 64 over a 256-token static cache
    (the calibration's prompt 128 / gen 128). The slope over the layer count is one layer's time,
    the intercept the step's own (embedding, final norm, LM head, argmax). Head-split variants
    keep every weight shape and change only how the same widths split into heads (qwen2.5-0.5b
    and llama-3.2-1b with 128-wide heads, qwen2.5-1.5b with 64-wide ones): what the head width
    alone costs a layer.

prefill-attention -> ``probe-prefill-attention.json``
    The graph engine's prefill attention alone (``calibrate.graph_engine._prefill_attention``: one
    causal SDPA call with grouped K/V heads, whatever backend torch picks by default -- cuDNN on the
    H200 with torch 2.11 -- as the engine's prefill runs it), at the served and held-out models'
    head shapes, prompts of 512 to 16,384 tokens, 32,768 tokens a call, in a CUDA graph over copies
    of Q, K, V. Why: the step model priced a prompt's attention pairs at the prefill matmuls' FLOP
    rate, and attention with 64-wide heads runs well below 128-wide ones' rate: the small models'
    long prompts came out fast.

moe -> ``probe-moe.json``
    Where a mixture-of-experts layer's time goes: each stage of the graph engine's MoE layer
    (``calibrate.graph_engine.moe_forward``: route, sort the (token, expert) rows by expert,
    gather them, the two grouped matmuls, the activation, the weighted ``index_add_`` back into
    the tokens, the shared experts) timed alone with its inputs computed once, and the whole layer
    in a CUDA graph and eagerly (as a prefill runs it), over 1-32,768 tokens at seven catalog MoE
    models' shapes, on random bf16 weights over three MoE layers timed in turn. Why: the MoE
    prefills ran ~2x their price; the gather and the atomic combine, per routed row, were not in
    the model (``expert_row_traffic_coeff``, read by ``roofline fit --moe-probe``).

kernels -> ``probe-kernels.json``
    What the graph engine's decode step runs, kernel by kernel: the step of a model cut to a few
    layers, at a batch and a cache length, profiled eagerly with torch.profiler (each kernel's
    device time per step, the longest ``top``), beside the step's eager and graph-replay time. Why:
    a held-out model off by tens of percent (phi-3-mini-4k at prompt 4,096) is a kernel the model
    does not know; this names it (there: cuBLAS GEMV kernels for a score row of odd length).

masked-attention -> ``probe-masked-attention.json``
    The graph engine's prefill attention on its masked path (``_prefill_attention`` with a window
    shorter than the prompt, or attention sinks: K/V repeated to every head, an explicit mask, SDPA
    computing every tile of the square), at generic shapes of head widths 64-256 and prompts of
    1,024-8,192. Why: windowed and sinks models' prefills were priced as the window's causal pairs at
    the causal kernel's rate and came out 25-67% fast; the calibration stores this path's rate
    (``masked_prefill_attention_flop_per_s``, ``roofline fit --masked-attention-probe``).

prefill-kernels -> ``probe-prefill-kernels.json``
    Where an eager prefill's time goes, kernel by kernel: the graph engine's ``prefill`` of a model
    cut to two and to six layers, at batches x ``prompt`` tokens, profiled with torch.profiler;
    the six-layer run minus the two-layer one is four layers' kernels (the embedding, final norm
    and LM head cancel). Generic shapes (a catalog config with its widths overridden: llama's,
    qwen3's with per-head q/k norms, gpt-neox's plain GELU MLP; hidden, query and KV widths and the
    intermediate varied one at a time) identify what each element of the layer's non-matmul work
    costs: the hidden width's norms and residual adds, the MLP activation (gated or plain), the
    queries' and keys' rope, the K/V cache writes, the attention output's copy, the q/k norms.
    Catalog models' cut layers are profiled too, as evidence only. Why: the step model priced a
    prompt's elementwise work as one coefficient on hidden + intermediate, fitted on models whose
    queries are as wide as the hidden state and that have no q/k norms; qk-norm and wide-query
    models' prefills came out 9-24% fast (``roofline fit --prefill-kernels-probe``).

attention-groups -> ``probe-attention-groups.json``
    The attention probe's ``graph_attention`` op alone at generic shapes whose query heads per KV
    head run from MHA's 1 to MQA's 64 (head widths 64 and 128), batches 1-256, 512-8,192 cached
    tokens. Why: the calibrated attention family was fitted on models of 4-8 query heads a KV
    head; falcon-7b (71 on one) came out 16% slow at batch 256 and the MHA phi-3-mini-4k ~10% fast.

index -> ``probe-index.json``
    PyTorch's row gathers and scatters (``index_select``, ``index_add_``) alone, as the graph engine's
    MoE layer runs them, at generic widths and 1-128 indices (``calibrate.index_probe``). Why: with at
    most 16 indices PyTorch runs small-index kernels whose time grows per index, and a decode step of
    few sequences on an MoE model runs five or seven of them a layer (``roofline fit --index-probe``).

The graph engine's attention is timed through the engine's own function,
``calibrate.graph_engine.decode_attention`` (what its decode step runs), so the probe measures
exactly the engine's kernels.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from roofline.units import GiB, MiB

#: every probe, in the order run_probes runs them (memory first: see there)
PROBES = ("memory", "attention", "gemm", "chunk", "layers", "prefill-attention", "moe", "kernels",
          "masked-attention", "prefill-kernels", "attention-groups", "layer-features", "attention-contexts",
          "attention-widths", "attention-batches", "attention-lengths", "attention-table", "sustained-matmul",
          "grouped-mm", "index", "loop-attention")
REPO_ROOT = Path(__file__).resolve().parent.parent


# ---- gemm ------------------------------------------------------------------------------------

def _ladder(lo: int, hi: int) -> tuple[int, ...]:
    """lo, 1.5 lo, 2 lo, 3 lo, 4 lo, ... up to hi (lo a power of two)."""
    out, k = [], lo
    while k <= hi:
        out.append(k)
        if k * 3 // 2 <= hi and k >= 2:
            out.append(k * 3 // 2)
        k *= 2
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class GemmGrid:
    ms: tuple[int, ...]
    ns: tuple[int, ...]
    ks: tuple[int, ...]
    max_flop: float  # along M, stop after the first shape over this
    rotate_bytes: int
    max_copies: int
    reps: int


FULL_GEMM = GemmGrid(ms=(1, 2, 4, 8) + _ladder(16, 65536), ns=_ladder(128, 65536), ks=_ladder(256, 32768),
                     max_flop=4e12, rotate_bytes=256 * MiB, max_copies=16, reps=5)
TINY_GEMM = GemmGrid(ms=(1, 16, 64), ns=(32, 64), ks=(32, 64), max_flop=1e7, rotate_bytes=0, max_copies=2, reps=2)


def gemm_probe(device: str, grid: GemmGrid, out_path: Path, deadline: float | None,
               progress: Callable[[str], None]) -> dict:
    """Time F.linear over ``grid``; writes ``out_path`` after each (N, K)."""
    import torch
    import torch.nn.functional as F

    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    result = _new_result("gemm", dev, grid, "F.linear(x (M, K), W (N, K)); calls over `copies` copies of W captured "
                         "in one CUDA graph (a plain loop on the CPU), median of reps replays / copies",
                         dtype=str(dtype).removeprefix("torch."))
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for n in grid.ns:
            for k in grid.ks:
                w_bytes = n * k * dtype.itemsize
                copies = max(1, min(grid.max_copies, math.ceil(grid.rotate_bytes / w_bytes)))
                ws = [torch.randn(n, k, device=dev, dtype=dtype, generator=gen) for _ in range(copies)]
                for m in grid.ms:
                    if _out_of_budget(deadline, result, out_path, progress, "gemm", f"N {n} K {k} M {m}"):
                        return result
                    flop = 2.0 * m * n * k
                    try:
                        x = torch.randn(m, k, device=dev, dtype=dtype, generator=gen)
                        seconds, info = _time_calls([lambda w=w: F.linear(x, w) for w in ws], dev, grid.reps)
                        result["points"].append({"m": m, "n": n, "k": k, "seconds": seconds, "flop": flop,
                                                 "weight_bytes": w_bytes, "copies": info["copies"],
                                                 "graph": info["graph"]})
                    except Exception as exc:  # noqa: BLE001 - record and go on
                        result["errors"].append({"m": m, "n": n, "k": k, "error": _short(exc)})
                    del x
                    if flop > grid.max_flop:
                        break
                del ws
                free_memory()
            _write(out_path, result)
            progress(f"gemm: N {n} done ({time.monotonic() - t0:.1f} s, {len(result['points'])} points)")
    return _finished(result, out_path, t0)


# ---- chunk attention (the serving loop's prefill) ----------------------------------------------

@dataclass(frozen=True)
class ChunkGrid:
    shapes: tuple[tuple[str, int, int, int], ...]  # (model, q_heads, kv_heads, head_dim)
    slots: int  # the loop's max_num_seqs (its cache has one spare slot more)
    rows: int  # the loop's max_model_len T
    buckets: tuple[int, ...]  # the pass's padded tokens
    fractions: tuple[float, ...]  # the chunk's share t / bucket (the rest: one whole prompt)
    cached: tuple[int, ...]  # c, the chunk's cached tokens (kept where c + t <= rows)
    copies: int  # distinct layer caches the calls cycle through (a pass's other work flushes L2)
    reps: int


FULL_CHUNK = ChunkGrid(
    shapes=(("qwen2.5-0.5b", 14, 2, 64), ("qwen2.5-1.5b", 12, 2, 128), ("qwen2.5-3b", 16, 2, 128),
            ("qwen2.5-7b", 28, 4, 128), ("llama-3.2-1b", 32, 8, 64), ("llama-3.2-3b", 24, 8, 128),
            ("mistral-7b-v0.3", 32, 8, 128)),
    slots=64, rows=1280, buckets=(64, 128, 256, 512, 1024), fractions=(0.25, 0.5, 1.0),
    cached=(0, 64, 256, 512, 768, 1024), copies=4, reps=5)
TINY_CHUNK = ChunkGrid(shapes=(("tiny-qwen2", 4, 2, 16),), slots=2, rows=48, buckets=(16,), fractions=(0.5, 1.0),
                       cached=(0, 8, 24), copies=2, reps=2)


def _repeated(t, group: int):
    """K or V (tokens, kv_heads, hd) repeated to every query head, as the loop's prefill graph does
    with grouped queries (calibrate.serving_loop ``_forward``); with one query head a K/V head (MHA)
    the loop copies nothing."""
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _varlen_calls(dev) -> tuple:
    """(varlen_kv(q, k, v, cu_q, cu_k, max_q, max_k), varlen(q, k, v, cu, max_len), the kernel or
    None) as the serving loop calls its varlen attention on ``dev``: torch's flash call on CUDA
    (K/V heads native for varlen_kv, repeated by the caller for varlen), else the SDPA loop
    (calibrate.serving_loop.sdpa_varlen_kv)."""
    from calibrate.serving_loop import sdpa_varlen_kv, varlen_kernel

    kernel = varlen_kernel() if dev.type == "cuda" else None
    if kernel is None:
        return sdpa_varlen_kv, lambda q, k, v, cu, max_len: sdpa_varlen_kv(q, k, v, cu, cu), None
    fn, causal, gqa = kernel

    def varlen_kv(q, k, v, cu_q, cu_k, max_q, max_k):
        return fn(q, k, v, cu_q, cu_k, max_q, max_k, **causal, **gqa)

    def varlen(q, k, v, cu, max_len):
        return fn(q, k, v, cu, cu, max_len, max_len, **causal)
    return varlen_kv, varlen, kernel


def chunk_probe(device: str, grid: ChunkGrid, out_path: Path, deadline: float | None,
                progress: Callable[[str], None]) -> dict:
    """Time one layer's chunk-graph and prefill-graph attention over ``grid``; writes ``out_path``
    after each head shape. On a CPU the varlen call is calibrate.serving_loop.sdpa_varlen_kv."""
    import torch

    from calibrate.serving_loop import chunk_attention
    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    varlen_kv, varlen, kernel = _varlen_calls(dev)
    result = _new_result("chunk", dev, grid, ("one layer's attention of a pass of `bucket` tokens: a chunk of t tokens after c "
                               "cached ones (in slot 0 of a (slots + 1, kv_heads, rows, head_dim) cache), then one "
                               "whole prompt of bucket - t tokens. chunk_s: chunk_attention (the chunk graph's); "
                               "prefill_s: K/V repeated per query head and one varlen call over [t, bucket - t] "
                               "(the prefill graph's, which runs only whole prompts: the same tokens without the "
                               "cache). Calls over `copies` layer caches captured in one CUDA graph (a plain loop "
                               "on the CPU), median of reps replays / copies"),
                         dtype=str(dtype).removeprefix("torch."),
                         kernel="torch.nn.attention.varlen.varlen_attn" if kernel else "sdpa_varlen_kv (SDPA loop)",
                         gqa="native" if kernel else "repeated by the SDPA loop")
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for model, heads, kv_heads, hd in grid.shapes:
            group = heads // kv_heads
            shape = (grid.slots + 1, kv_heads, grid.rows, hd)
            caches = [(torch.randn(shape, device=dev, dtype=dtype, generator=gen),
                       torch.randn(shape, device=dev, dtype=dtype, generator=gen)) for _ in range(grid.copies)]
            slot = torch.zeros(1, dtype=torch.long, device=dev)
            for bucket in grid.buckets:
                q = torch.randn(bucket, heads, hd, device=dev, dtype=dtype, generator=gen)
                k = torch.randn(bucket, kv_heads, hd, device=dev, dtype=dtype, generator=gen)
                v = torch.randn(bucket, kv_heads, hd, device=dev, dtype=dtype, generator=gen)
                for fraction in grid.fractions:
                    t = max(1, int(round(bucket * fraction)))
                    rest = bucket - t
                    cu = torch.tensor([0, t, bucket], device=dev, dtype=torch.int32)
                    krep, vrep = _repeated(k, group), _repeated(v, group)
                    for c in grid.cached:
                        if c + t > grid.rows:
                            continue
                        if _out_of_budget(deadline, result, out_path, progress, "chunk",
                                          f"{model} bucket {bucket} t {t} c {c}"):
                            return result
                        # the loop's offsets: the chunk, an empty sequence over the rest of the rows
                        # and the chunk's own fresh keys, the whole prompt
                        cu_q = torch.tensor([0, t, t, bucket], device=dev, dtype=torch.int32)
                        cu_k = torch.tensor([0, c + t, grid.rows + t, grid.rows + bucket], device=dev,
                                            dtype=torch.int32)
                        span = grid.rows + bucket
                        try:
                            chunk_s, info = _time_calls(
                                [lambda ck=ck, cv=cv: chunk_attention(varlen_kv, ck, cv, slot, q, k, v, cu_q, cu_k,
                                                                      bucket, span) for ck, cv in caches], dev, grid.reps)
                            prefill_s, _ = _time_calls(
                                [lambda: (_repeated(k, group), _repeated(v, group),
                                          varlen(q, krep, vrep, cu, bucket))] * grid.copies, dev, grid.reps)
                            result["points"].append({
                                "model": model, "q_heads": heads, "kv_heads": kv_heads, "head_dim": hd,
                                "bucket": bucket, "chunk_tokens": t, "prompt_tokens": rest, "cached": c,
                                "chunk_s": chunk_s, "prefill_s": prefill_s, "graph": info["graph"]})
                        except Exception as exc:  # noqa: BLE001 - record and go on
                            result["errors"].append({"model": model, "bucket": bucket, "t": t, "c": c,
                                                     "error": _short(exc)})
            del caches
            free_memory()
            _write(out_path, result)
            progress(f"chunk: {model} done ({time.monotonic() - t0:.1f} s, {len(result['points'])} points)")
    return _finished(result, out_path, t0)


# ---- the loop's prefill attention as its graphs call it ---------------------------------------

@dataclass(frozen=True)
class LoopAttentionGrid:
    shapes: tuple[tuple[str, int, int, int], ...]  # (model, q_heads, kv_heads, head_dim)
    slots: tuple[int, ...]  # the loop's max_num_seqs: its call holds max_num_seqs + 1 sequences
    buckets: tuple[int, ...]  # the pass's padded tokens (the call's max length)
    layouts: tuple[str, ...]  # LOOP_ATTENTION_LAYOUTS' keys
    copies: int  # distinct q/k/v sets the calls cycle through (a pass's other work flushes L2)
    reps: int


#: a pass's prompts in a bucket: a lone prompt of 7/8 of it (the padding an eighth), a lone prompt
#: of 13/16 (the loop's buckets 1,024 and 2,048 hold prompts over 3/4 of them, 768 and 1,536 between
#: them: a lone prompt fills 3/4 of its bucket or more there, half or more below 512), prompts of
#: 256 tokens filling it (device calls 96-99's graphs), eight prompts of an eighth filling it
LOOP_ATTENTION_LAYOUTS = {
    "one": lambda b: [b * 7 // 8],
    "most": lambda b: [b * 13 // 16],
    "256": lambda b: [256] * (b // 256) if b >= 256 else [],
    "eighths": lambda b: [b // 8] * 8 if b >= 8 else [],
}
FULL_LOOP_ATTENTION = LoopAttentionGrid(
    shapes=FULL_CHUNK.shapes + (("qwen2.5-14b", 40, 8, 128), ("pythia-6.9b", 32, 32, 128)), slots=(1, 64, 256),
    buckets=(256, 512, 1024, 2048),
    layouts=("one", "most", "256", "eighths"), copies=4, reps=5)
TINY_LOOP_ATTENTION = LoopAttentionGrid(shapes=(("tiny-qwen2", 4, 2, 16),), slots=(1, 4), buckets=(16, 32),
                                        layouts=("one", "eighths"), copies=2, reps=2)


def loop_attention_offsets(lens: list[int], bucket: int, slots: int) -> list[int]:
    """The int32 offsets the loop's prefill graph hands its varlen call (calibrate.serving_loop.
    ModelExecutor._stage_prefill): the prompts, the padding to ``bucket`` as one more sequence,
    then empty ones up to ``slots`` + 1 sequences."""
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return out + [bucket] * (slots + 1 - len(lens))


def loop_attention_probe(device: str, grid: LoopAttentionGrid, out_path: Path, deadline: float | None,
                         progress: Callable[[str], None]) -> dict:
    """Time one layer's prefill-graph attention exactly as the serving loop's graphs run it: K and
    V repeated to every query head, then one varlen call over the loop's ``slots`` + 1 sequences
    (the pass's prompts as ``grid.layouts`` lay them out, the padding, empty ones) with the bucket
    as the longest. The chunk probe's prefill_s has one or two sequences and buckets up to 1,024;
    the loop's call has max_num_seqs + 1 and buckets up to its token budget, and its empty
    sequences' query tiles cost time of their own (docs/serving.md, "The prefill graphs' empty
    attention tiles"). On a CPU the varlen call is calibrate.serving_loop.sdpa_varlen_kv."""
    import torch

    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    _, varlen, kernel = _varlen_calls(dev)
    result = _new_result("loop-attention", dev, grid, (
        "one layer's prefill-graph attention as the serving loop runs it: K/V repeated to every query head, then one "
        "varlen call over slots + 1 sequences (`lens`: the prompts; then the padding to `bucket`, then empty ones) "
        "with max length `bucket`; `pairs`: the causal pairs of the prompts and the padding. Calls over `copies` "
        "q/k/v sets captured in one CUDA graph (a plain loop on the CPU), median of reps replays / copies"),
        dtype=str(dtype).removeprefix("torch."),
        kernel="torch.nn.attention.varlen.varlen_attn" if kernel else "sdpa_varlen_kv (SDPA loop)")
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for model, heads, kv_heads, hd in grid.shapes:
            group = heads // kv_heads
            for bucket in grid.buckets:
                sets = [(torch.randn(bucket, heads, hd, device=dev, dtype=dtype, generator=gen),
                         torch.randn(bucket, kv_heads, hd, device=dev, dtype=dtype, generator=gen),
                         torch.randn(bucket, kv_heads, hd, device=dev, dtype=dtype, generator=gen))
                        for _ in range(grid.copies)]
                for slots in grid.slots:
                    for layout in grid.layouts:
                        lens = LOOP_ATTENTION_LAYOUTS[layout](bucket)
                        if not lens or len(lens) > slots or sum(lens) > bucket:
                            continue
                        if _out_of_budget(deadline, result, out_path, progress, "loop-attention",
                                          f"{model} bucket {bucket} slots {slots} {layout}"):
                            return result
                        cu = torch.tensor(loop_attention_offsets(lens, bucket, slots), device=dev, dtype=torch.int32)
                        pad = bucket - sum(lens)
                        try:
                            seconds, info = _time_calls(
                                [lambda q=q, k=k, v=v: varlen(q, _repeated(k, group), _repeated(v, group), cu,
                                                              bucket) for q, k, v in sets], dev, grid.reps)
                            result["points"].append({
                                "model": model, "q_heads": heads, "kv_heads": kv_heads, "head_dim": hd,
                                "slots": slots, "bucket": bucket, "layout": layout, "lens": lens,
                                "pairs": sum(n * (n + 1) // 2 for n in lens) + pad * (pad + 1) // 2,
                                "seconds": seconds, "graph": info["graph"]})
                        except Exception as exc:  # noqa: BLE001 - record and go on
                            result["errors"].append({"model": model, "bucket": bucket, "slots": slots,
                                                     "layout": layout, "error": _short(exc)})
                del sets
            free_memory()
            _write(out_path, result)
            progress(f"loop-attention: {model} done ({time.monotonic() - t0:.1f} s, {len(result['points'])} points)")
    return _finished(result, out_path, t0)


# ---- prefill attention -------------------------------------------------------------------------

@dataclass(frozen=True)
class PrefillAttentionGrid:
    shapes: tuple[tuple[str, int, int, int], ...]  # (model, q_heads, kv_heads, head_dim)
    prompts: tuple[int, ...]
    tokens: int  # batch x prompt of one call
    copies: int
    reps: int


FULL_PREFILL_ATTENTION = PrefillAttentionGrid(
    shapes=(("qwen2.5-0.5b", 14, 2, 64), ("llama-3.2-1b", 32, 8, 64), ("qwen2.5-1.5b", 12, 2, 128),
            ("qwen2.5-3b", 16, 2, 128), ("qwen2.5-7b", 28, 4, 128), ("llama-3.2-3b", 24, 8, 128),
            ("llama-3.1-8b", 32, 8, 128), ("qwen2.5-14b", 40, 8, 128)),
    prompts=(512, 1024, 2048, 4096, 8192, 16384), tokens=32768, copies=4, reps=5)
TINY_PREFILL_ATTENTION = PrefillAttentionGrid(shapes=(("tiny-qwen2", 4, 2, 16),), prompts=(8, 16), tokens=32,
                                              copies=2, reps=2)


def prefill_attention_probe(device: str, grid: PrefillAttentionGrid, out_path: Path, deadline: float | None,
                            progress: Callable[[str], None]) -> dict:
    """Time the graph engine's prefill attention over ``grid``; writes ``out_path`` after each shape."""
    import torch

    from calibrate.graph_engine import _prefill_attention
    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    result = _new_result("prefill-attention", dev, grid, ("calibrate.graph_engine._prefill_attention(q (B, H, P, d), k, v (B, kv, P, d)): causal "
                               "SDPA, grouped K/V, the default backend; B = tokens / P; calls over `copies` copies of "
                               "Q, K, V captured in one CUDA graph (a plain loop on the CPU), median of reps replays / "
                               "copies. flop: 4 x B x H x d x P (P + 1) / 2 (the causal pairs' two matmuls)"),
                         dtype=str(dtype).removeprefix("torch."))
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for model, heads, kv_heads, hd in grid.shapes:
            for prompt in grid.prompts:
                if _out_of_budget(deadline, result, out_path, progress, "prefill-attention", f"{model} P {prompt}"):
                    return result
                batch = max(1, grid.tokens // prompt)
                try:
                    qkv = [(torch.randn(batch, heads, prompt, hd, device=dev, dtype=dtype, generator=gen),
                            torch.randn(batch, kv_heads, prompt, hd, device=dev, dtype=dtype, generator=gen),
                            torch.randn(batch, kv_heads, prompt, hd, device=dev, dtype=dtype, generator=gen))
                           for _ in range(grid.copies)]
                    seconds, info = _time_calls([lambda q=q, k=k, v=v: _prefill_attention(q, k, v, None, 0)
                                                 for q, k, v in qkv], dev, grid.reps)
                    ops = profiled_op_names(lambda: _prefill_attention(*qkv[0], None, 0), dev, dev.type == "cuda")
                    flop = 4.0 * batch * heads * hd * prompt * (prompt + 1) / 2.0
                    result["points"].append({"model": model, "q_heads": heads, "kv_heads": kv_heads, "head_dim": hd,
                                             "prompt_tokens": prompt, "batch": batch, "seconds": seconds,
                                             "flop": flop, "flop_per_s": flop / seconds,
                                             "backend": sdpa_backend_from_ops(ops), "graph": info["graph"]})
                    del qkv
                except Exception as exc:  # noqa: BLE001 - record and go on
                    result["errors"].append({"model": model, "prompt_tokens": prompt, "error": _short(exc)})
                free_memory()
            _write(out_path, result)
            progress(f"prefill-attention: {model} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


# ---- masked prefill attention (the engine's windowed and sinks prefill) -------------------------

@dataclass(frozen=True)
class MaskedAttentionGrid:
    #: (label, q_heads, kv_heads, head_dim, window or 0, sinks): generic shapes by head width
    shapes: tuple[tuple[str, int, int, int, int, bool], ...]
    prompts: tuple[int, ...]
    tokens: int  # batch x prompt of one call (at most)
    max_mask_elements: int  # batch x heads x P x P of the expanded K/V scores' tiles: skip above
    copies: int
    reps: int


FULL_MASKED_ATTENTION = MaskedAttentionGrid(
    shapes=(("hd64 16/4 window 256", 16, 4, 64, 256, False), ("hd96 32/32 window 256", 32, 32, 96, 256, False),
            ("hd128 32/8 window 256", 32, 8, 128, 256, False), ("hd256 16/8 window 256", 16, 8, 256, 256, False),
            ("hd64 64/8 sinks", 64, 8, 64, 0, True), ("hd64 64/8 sinks window 128", 64, 8, 64, 128, True)),
    prompts=(1024, 2048, 4096, 8192), tokens=32768, max_mask_elements=2 ** 36, copies=2, reps=3)
TINY_MASKED_ATTENTION = MaskedAttentionGrid(
    shapes=(("hd16 4/2 window 4", 4, 2, 16, 4, False), ("hd16 4/2 sinks", 4, 2, 16, 0, True)),
    prompts=(8, 16), tokens=32, max_mask_elements=2 ** 20, copies=2, reps=2)


def masked_attention_probe(device: str, grid: MaskedAttentionGrid, out_path: Path, deadline: float | None,
                           progress: Callable[[str], None]) -> dict:
    """Time the graph engine's masked prefill attention (a window shorter than the prompt, or
    attention sinks) over ``grid``; writes ``out_path`` after each shape."""
    import torch

    from calibrate.graph_engine import _prefill_attention, aligned
    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    result = _new_result("masked-attention", dev, grid, (
        "calibrate.graph_engine._prefill_attention(q (B, H, P, d), k, v (B, kv, P, d), window, sinks) where it "
        "takes its masked path (a window shorter than P, or sinks): K/V repeated to every head, an explicit (P, P "
        "[+1]) mask, SDPA with the default backend, which computes every tile of the square; B = tokens / P; calls "
        "over `copies` copies captured in one CUDA graph (a plain loop on the CPU), median of reps replays / "
        "copies. computed_flop: 4 x B x H x d' x P x P' with d' the head width as computed (sinks: padded to a "
        "multiple of 8 past d + 1) and P' = P (+ 1 with sinks): what the kernel computes"),
                         dtype=str(dtype).removeprefix("torch."))
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        for label, heads, kv_heads, hd, window, sinks in grid.shapes:
            computed = aligned(hd + 1) if sinks else hd  # the engine pads a sinks head past d + 1
            for prompt in grid.prompts:
                if window and window >= prompt:
                    continue
                batch = max(1, grid.tokens // prompt)
                if batch * heads * prompt * prompt > grid.max_mask_elements:
                    continue
                if _out_of_budget(deadline, result, out_path, progress, "masked-attention", f"{label} P {prompt}"):
                    return result
                try:
                    sink = torch.randn(heads, device=dev, dtype=dtype, generator=gen) if sinks else None
                    s = _SinkScale(hd)
                    qkv = [(torch.randn(batch, heads, prompt, hd, device=dev, dtype=dtype, generator=gen),
                            torch.randn(batch, kv_heads, prompt, hd, device=dev, dtype=dtype, generator=gen),
                            torch.randn(batch, kv_heads, prompt, hd, device=dev, dtype=dtype, generator=gen))
                           for _ in range(grid.copies)]
                    seconds, info = _time_calls([lambda q=q, k=k, v=v: _prefill_attention(q, k, v, s, window, sink)
                                                 for q, k, v in qkv], dev, grid.reps)
                    ops = profiled_op_names(lambda: _prefill_attention(*qkv[0], s, window, sink), dev,
                                            dev.type == "cuda")
                    keys = prompt + (1 if sinks else 0)
                    flop = 4.0 * batch * heads * computed * prompt * keys
                    result["points"].append({"shape": label, "q_heads": heads, "kv_heads": kv_heads, "head_dim": hd,
                                             "window": window, "sinks": sinks, "prompt_tokens": prompt,
                                             "batch": batch, "seconds": seconds, "computed_head_dim": computed,
                                             "computed_flop": flop, "flop_per_s": flop / seconds,
                                             "backend": sdpa_backend_from_ops(ops), "graph": info["graph"]})
                    del qkv
                except Exception as exc:  # noqa: BLE001 - record and go on
                    result["errors"].append({"shape": label, "prompt_tokens": prompt, "error": _short(exc)})
                free_memory()
            _write(out_path, result)
            progress(f"masked-attention: {label} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


class _SinkScale:
    """The one field of Shapes the masked path reads (its softmax scale)."""

    def __init__(self, hd: int):
        self.scale = hd ** -0.5


# ---- layers (where a decode step's time goes) --------------------------------------------------

@dataclass(frozen=True)
class LayersGrid:
    #: (catalog model, variant label, config overrides): a head-split variant keeps every weight shape
    models: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...]
    layers: tuple[int, ...]
    batches: tuple[int, ...]
    context: int  # the static cache's positions (prompt + gen)
    reps: int
    warmup: int = 1  # untimed replays before the timed ones


FULL_LAYERS = LayersGrid(
    models=(("qwen2.5-0.5b", "", ()),
            ("qwen2.5-0.5b", "heads 7/1 x 128", (("num_attention_heads", 7), ("num_key_value_heads", 1),
                                                 ("head_dim", 128))),
            ("llama-3.2-1b", "", ()),
            ("llama-3.2-1b", "heads 16/4 x 128", (("num_attention_heads", 16), ("num_key_value_heads", 4),
                                                  ("head_dim", 128))),
            ("qwen2.5-1.5b", "", ()),
            ("qwen2.5-1.5b", "heads 24/4 x 64", (("num_attention_heads", 24), ("num_key_value_heads", 4),
                                                 ("head_dim", 64))),
            ("qwen2.5-3b", "", ()), ("llama-3.2-3b", "", ()), ("qwen2.5-7b", "", ()), ("llama-3.1-8b", "", ())),
    layers=(2, 4, 8, 12), batches=(1, 16, 64), context=256, reps=30)
TINY_LAYERS = LayersGrid(models=(("tiny-qwen2", "", ()), ("tiny-qwen2", "heads 2/1 x 32",
                                                           (("num_attention_heads", 2), ("num_key_value_heads", 1),
                                                            ("head_dim", 32)))),
                         layers=(1, 2), batches=(1, 2), context=16, reps=2)
#: the layer-features probe: the layers probe with one architecture feature of the graph engine's
#: decode layer switched on at a fitted model's shape (q/k norms: model_type qwen3; one KV head per
#: query head; 96-wide heads), each cut to two layer counts: the difference is what the feature adds
#: per layer, at each batch (evidence for the decode step's per-layer terms, not read by the fit)
_DEEPSEEK_LAYER = (("model_type", "deepseek_v2"), ("kv_lora_rank", 512), ("qk_rope_head_dim", 64),
                   ("qk_nope_head_dim", 128), ("v_head_dim", 128), ("q_lora_rank", None), ("num_key_value_heads", 32),
                   ("n_routed_experts", 128), ("first_k_dense_replace", 0), ("moe_layer_freq", 1),
                   ("topk_method", "greedy"), ("routed_scaling_factor", 1.0))
FULL_LAYER_FEATURES = LayersGrid(
    models=(("llama-3.1-8b", "", ()),
            ("llama-3.1-8b", "qk_norm", (("model_type", "qwen3"),)),
            ("llama-3.1-8b", "heads 32/32 x 128", (("num_key_value_heads", 32),)),
            ("llama-3.1-8b", "heads 32/32 x 128 qk_norm", (("num_key_value_heads", 32), ("model_type", "qwen3"))),
            ("llama-3.1-8b", "heads 32/8 x 96", (("head_dim", 96),)),
            ("llama-3.1-8b", "heads 32/32 x 96", (("num_key_value_heads", 32), ("head_dim", 96))),
            ("qwen2.5-1.5b", "", ()),
            ("qwen2.5-1.5b", "qk_norm", (("model_type", "qwen3"),)),
            ("qwen2.5-1.5b", "heads 12/12 x 128", (("num_key_value_heads", 12),)),
            # the fitted MoE model's layer with gpt-oss's features: sinks, router and expert biases,
            # the clamped SwiGLU, top-k then softmax (and without qwen3's q/k norms)
            ("qwen3-30b-a3b", "", ()),
            # (gpt-oss's config reader takes intermediate_size as an expert's width: set to the engine's)
            ("qwen3-30b-a3b", "gpt_oss", (("model_type", "gpt_oss"), ("num_local_experts", 128),
                                          ("intermediate_size", 768))),
            # ... with deepseek-v2's absorbed MLA decode (32 heads of 128 + 64 rope, a latent of 512,
            # values of 128) and its router, without and with two shared experts
            ("qwen3-30b-a3b", "mla", _DEEPSEEK_LAYER + (("n_shared_experts", 0),)),
            ("qwen3-30b-a3b", "mla shared", _DEEPSEEK_LAYER + (("n_shared_experts", 2),))),
    layers=(2, 6), batches=(1, 4, 16, 64, 256), context=2048, reps=20, warmup=5)
TINY_LAYER_FEATURES = LayersGrid(models=(("tiny-qwen2", "", ()), ("tiny-qwen2", "qk_norm", (("model_type", "qwen3"),))),
                                 layers=(1, 2), batches=(1, 2), context=16, reps=2)


def layers_probe(device: str, grid: LayersGrid, out_path: Path, deadline: float | None,
                 progress: Callable[[str], None], probe: str = "layers", count_kernels: bool = False) -> dict:
    """Time the graph engine's decode step of each model cut to each layer count; writes
    ``out_path`` after each model. ``count_kernels``: each point also counts the kernels of one
    eager step (``kernels``)."""
    import torch

    from calibrate.graph_engine import GraphEngine, decode_step
    from calibrate.timing import free_memory, median_s, torch_device

    dev = torch_device(device)
    result = _new_result(probe, dev, grid,
                         "calibrate.graph_engine.decode_step of the model with num_hidden_layers cut to `layers` "
                         "(and the overrides), random bf16 weights, a random static cache of `context` positions "
                         "at position context / 2, captured in one CUDA graph as GraphEngine runs it; median of "
                         "reps replays (eager on the CPU)")
    t0 = time.monotonic()
    for name, variant, overrides in grid.models:
        for layers in grid.layers:
            config = _cut_config(name, layers, overrides)
            engine = None
            try:
                engine = GraphEngine(config, device=str(dev))
                s = engine.shapes
                for batch in grid.batches:
                    if _out_of_budget(deadline, result, out_path, progress, probe,
                                      f"{name} {variant} layers {layers} batch {batch}"):
                        return result
                    st = engine.new_state(batch, grid.context)
                    with torch.inference_mode():
                        replay = engine._capture(st, grid.context // 2)
                        st.pos.fill_(grid.context // 2)
                        step_s = median_s(replay, dev, warmup=grid.warmup, reps=grid.reps)
                    point = {"model": name, "variant": variant, "q_heads": s.heads,
                             "kv_heads": s.kv_heads, "head_dim": s.head_dim, "hidden": s.hidden,
                             "layers": layers, "batch": batch, "context": grid.context,
                             "step_s": step_s, "graph": engine.use_graph}
                    engine._graph = None
                    if count_kernels:  # the kernels one eager step launches (CPU: its top-level ops)
                        with torch.inference_mode():
                            st.pos.fill_(grid.context // 2)
                            point["kernels"] = _count_kernels(lambda: decode_step(engine.weights, s, st), dev)
                    result["points"].append(point)
                    del st
            except Exception as exc:  # noqa: BLE001 - record and go on
                result["errors"].append({"model": name, "variant": variant, "layers": layers, "error": _short(exc)})
            del engine
            free_memory()
        _write(out_path, result)
        progress(f"{probe}: {name} {variant} done ({time.monotonic() - t0:.1f} s, {len(result['points'])} points)")
    return _finished(result, out_path, t0)


# ---- kernels (what a decode step runs, kernel by kernel) ---------------------------------------

@dataclass(frozen=True)
class KernelsGrid:
    #: (catalog model, layers the model is cut to, batch, context: the static cache's positions)
    points: tuple[tuple[str, int, int, int], ...]
    reps: int
    top: int  # kernels kept per point, by device time


FULL_KERNELS = KernelsGrid(points=(
    ("phi-3-mini-4k", 2, 16, 4112), ("phi-3-mini-4k", 2, 16, 528), ("llama-2-7b", 2, 16, 4112),
    ("gemma-3-4b", 6, 16, 4112), ("gpt-oss-20b", 2, 1, 8208), ("gpt-oss-20b", 2, 16, 8208),
    ("qwen2.5-7b", 2, 16, 8208), ("mistral-7b-v0.3", 2, 16, 8208),
    # a static cache whose length is not a multiple of 8 (prompt + gen = 4,100, 2,053)
    ("qwen2.5-7b", 2, 16, 4100), ("llama-3.1-8b", 2, 16, 2053), ("qwen2.5-7b", 2, 16, 4104)), reps=5, top=14)
TINY_KERNELS = KernelsGrid(points=(("tiny-qwen2", 1, 2, 16), ("tiny-gpt-oss", 2, 2, 48)), reps=2, top=6)


def _cut_config(name: str, layers: int, overrides=()) -> dict:
    """``name``'s config.json with ``overrides`` and cut to its first ``layers`` layers
    (roofline.probes.cut_config: what roofline prices a probe point's model as)."""
    from calibrate.configs import load_model_config
    from roofline.probes import cut_config

    return cut_config(load_model_config(name), layers, overrides)


def kernels_probe(device: str, grid: KernelsGrid, out_path: Path, deadline: float | None,
                  progress: Callable[[str], None]) -> dict:
    """Profile the graph engine's decode step (eagerly: the kernels a graph replays) of each model
    cut to a few layers, kernel by kernel; writes ``out_path`` after each point."""
    import torch

    from calibrate.graph_engine import GraphEngine, decode_step
    from calibrate.timing import free_memory, median_s, synchronize, torch_device

    dev = torch_device(device)
    result = _new_result("kernels", dev, grid,
                         "calibrate.graph_engine.decode_step of the model cut to `layers` layers, random bf16 "
                         "weights, a random static cache of `context` positions at position context - 8; the "
                         "step run eagerly under torch.profiler `reps` times: each kernel's device time per step "
                         "(the `top` longest, the rest summed); step_s: the eager step's median (launch gaps "
                         "included), graph_step_s: the same step replayed from a CUDA graph")
    t0 = time.monotonic()
    for name, layers, batch, context in grid.points:
        if _out_of_budget(deadline, result, out_path, progress, "kernels", f"{name} batch {batch} T {context}"):
            return result
        engine = None
        try:
            config = _cut_config(name, layers)
            engine = GraphEngine(config, device=str(dev))
            st = engine.new_state(batch, context)
            with torch.inference_mode():
                st.pos.fill_(context - 8)
                step = lambda: decode_step(engine.weights, engine.shapes, st)  # noqa: E731
                eager_s = median_s(step, dev, warmup=2, reps=grid.reps)
                graph_s = median_s(engine._capture(st, context - 8), dev, warmup=1, reps=grid.reps)
                engine._graph = None
                st.pos.fill_(context - 8)
                kernels = _profile_kernels(step, dev, grid.reps)
            top = sorted(kernels.items(), key=lambda kv: -kv[1])
            result["points"].append({
                "model": name, "layers": layers, "batch": batch, "context": context, "step_s": eager_s,
                "graph_step_s": graph_s, "kernel_s": sum(kernels.values()),
                "kernels": [{"name": k, "seconds": v} for k, v in top[:grid.top]],
                "other_kernels_s": sum(v for _, v in top[grid.top:])})
            synchronize(dev)
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"model": name, "batch": batch, "context": context, "error": _short(exc)})
        del engine
        free_memory()
        _write(out_path, result)
        progress(f"kernels: {name} b{batch} T{context} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


def _count_kernels(fn: Callable[[], object], device) -> int:
    """The kernels one call of ``fn`` launches (torch.profiler's CUDA events; on the CPU its top-level ops)."""
    from torch.profiler import ProfilerActivity, profile

    from calibrate.timing import synchronize

    cuda = device.type == "cuda"
    fn()  # warm: lazily built tensors (the q/k norm weights) are not counted
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        fn()
        synchronize(device)
    if cuda:
        return sum(1 for ev in prof.events() if ev.device_type.name == "CUDA")
    return sum(1 for ev in prof.events() if ev.cpu_parent is None)


def _profile_kernels(fn: Callable[[], object], device, reps: int) -> dict[str, float]:
    """{kernel name: device seconds per call of ``fn``} from torch.profiler over ``reps`` calls
    (on the CPU: the CPU ops' self time)."""
    from torch.profiler import ProfilerActivity, profile

    from calibrate.timing import synchronize

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(reps):
            fn()
        synchronize(device)
    out: dict[str, float] = {}
    for ev in prof.events():
        if cuda and ev.device_type.name != "CUDA":
            continue
        if not cuda and ev.cpu_parent is not None:
            continue
        t = (ev.device_time if cuda else ev.self_cpu_time_total) * 1e-6 / reps
        out[ev.name[:160]] = out.get(ev.name[:160], 0.0) + t
    return out


# ---- prefill-kernels (where an eager prefill's layer time goes) ------------------------------

@dataclass(frozen=True)
class PrefillKernelsGrid:
    #: (label, catalog model whose config is the base, width overrides as (key, value) pairs,
    #: "generic" (identifies the per-element costs) or "model" (evidence only))
    points: tuple[tuple[str, str, tuple, str], ...]
    layers: tuple[int, int]  # the two cuts; their difference is layers[1] - layers[0] layers
    batches: tuple[int, ...]  # each point at each batch of `prompt`-token prompts (tokens a forward)
    prompt: int
    reps: int


def _widths(hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int) -> tuple:
    return (("hidden_size", hidden), ("num_attention_heads", heads), ("num_key_value_heads", kv_heads),
            ("head_dim", head_dim), ("intermediate_size", inter))


def _mla(heads: int, nope: int, rope: int, v: int, latent: int) -> tuple:
    """A dense deepseek-v2 layer's widths (no routed experts): hidden 2,048, intermediate 8,192."""
    return (("hidden_size", 2048), ("intermediate_size", 8192), ("n_routed_experts", 0), ("num_attention_heads", heads),
            ("num_key_value_heads", heads), ("qk_nope_head_dim", nope), ("qk_rope_head_dim", rope),
            ("v_head_dim", v), ("kv_lora_rank", latent), ("q_lora_rank", None))


#: generic shapes: from a base of hidden 3,072, 24 query heads and 8 KV heads of 128, intermediate
#: 8,192, one width changed at a time (no catalog model's shape)
FULL_PREFILL_KERNELS = PrefillKernelsGrid(points=(
    ("llama base", "llama-3.1-8b", _widths(3072, 24, 8, 128, 8192), "generic"),
    ("llama wide intermediate", "llama-3.1-8b", _widths(3072, 24, 8, 128, 16384), "generic"),
    ("llama wide queries", "llama-3.1-8b", _widths(3072, 48, 8, 128, 8192), "generic"),
    ("llama MHA", "llama-3.1-8b", _widths(3072, 24, 24, 128, 8192), "generic"),
    ("llama wide hidden", "llama-3.1-8b", _widths(5120, 24, 8, 128, 8192), "generic"),
    ("llama heads of 64", "llama-3.1-8b", _widths(3072, 48, 16, 64, 8192), "generic"),
    ("llama heads of 256", "llama-3.1-8b", _widths(3072, 12, 4, 256, 8192), "generic"),
    ("qwen3 base", "qwen3-8b", _widths(3072, 24, 8, 128, 8192), "generic"),
    ("qwen3 wide queries", "qwen3-8b", _widths(3072, 48, 8, 128, 8192), "generic"),
    ("qwen3 MHA", "qwen3-8b", _widths(3072, 24, 24, 128, 8192), "generic"),
    ("neox base", "pythia-6.9b", _widths(3072, 24, 24, 128, 12288), "generic"),
    ("neox narrow intermediate", "pythia-6.9b", _widths(3072, 24, 24, 128, 6144), "generic"),
    ("llama narrow", "llama-3.1-8b", _widths(1536, 12, 2, 128, 6144), "generic"),
    ("qwen3 narrow", "qwen3-8b", _widths(1536, 16, 4, 128, 6144), "generic"),
    # MLA (deepseek-v2's decompressed prefill), dense: from 16 heads of 128 + 64 rope, values of 128,
    # a latent of 512, hidden 2,048, intermediate 8,192, one width changed at a time
    ("mla base", "deepseek-v2-lite", _mla(16, 128, 64, 128, 512), "generic"),
    ("mla more heads", "deepseek-v2-lite", _mla(32, 128, 64, 128, 512), "generic"),
    ("mla narrow rope", "deepseek-v2-lite", _mla(16, 128, 32, 128, 512), "generic"),
    ("mla narrow nope", "deepseek-v2-lite", _mla(16, 64, 64, 128, 512), "generic"),
    ("mla narrow values", "deepseek-v2-lite", _mla(16, 128, 64, 64, 512), "generic"),
    ("mla narrow latent", "deepseek-v2-lite", _mla(16, 128, 64, 128, 256), "generic"),
    ("llama-3.1-8b", "llama-3.1-8b", (), "model"),
    ("qwen2.5-1.5b", "qwen2.5-1.5b", (), "model"),
    ("qwen2.5-0.5b", "qwen2.5-0.5b", (), "model"),
    ("mixtral-8x7b", "mixtral-8x7b", (), "model"),
    ("qwen2.5-7b", "qwen2.5-7b", (), "model"),
    ("olmo-2-7b", "olmo-2-7b", (), "model"),
    ("qwen3-8b", "qwen3-8b", (), "model"),
    ("phi-3-mini-4k", "phi-3-mini-4k", (), "model"),
    ("falcon-7b", "falcon-7b", (), "model"),
    ("qwen3-30b-a3b", "qwen3-30b-a3b", (), "model"),
    ("gpt-oss-20b", "gpt-oss-20b", (), "model"),
), layers=(2, 6), batches=(1, 4, 16), prompt=2048, reps=3)
TINY_PREFILL_KERNELS = PrefillKernelsGrid(points=(
    ("tiny base", "tiny-llama", (), "generic"),
    ("tiny wide queries", "tiny-llama", (("num_attention_heads", 8), ("head_dim", 16)), "generic"),
    ("tiny mla", "tiny-deepseek-v2", (("n_routed_experts", 0),), "generic"),
    ("tiny-qwen3-moe", "tiny-qwen3-moe", (), "model"),
), layers=(1, 2), batches=(2,), prompt=16, reps=2)


def prefill_kernels_probe(device: str, grid: PrefillKernelsGrid, out_path: Path, deadline: float | None,
                          progress: Callable[[str], None]) -> dict:
    """Profile the graph engine's eager prefill of each point's config cut to ``grid.layers`` layers,
    kernel by kernel; writes ``out_path`` after each point."""
    import torch

    from calibrate.graph_engine import GraphEngine, prefill
    from calibrate.timing import free_memory, median_s, synchronize, torch_device

    dev = torch_device(device)
    result = _new_result("prefill-kernels", dev, grid,
                         "calibrate.graph_engine.prefill (eager, as the harness's TTFT runs it) of a config cut to "
                         "each of `layers` layers, random bf16 weights, `batch` (each of `batches`) random prompts of `prompt` tokens "
                         "into a static cache of prompt + 8 positions; under torch.profiler `reps` times: each "
                         "kernel's device time per prefill (all kernels), and the prefill's eager median. Per "
                         "point, `cuts` holds both layer counts; the shapes record the engine's own widths")
    t0 = time.monotonic()
    for label, base, overrides, kind in grid.points:
        if _out_of_budget(deadline, result, out_path, progress, "prefill-kernels", label):
            return result
        points = {b: {"label": label, "base": base, "kind": kind, "overrides": dict(overrides), "batch": b,
                      "prompt": grid.prompt, "cuts": []} for b in grid.batches}
        try:
            for layers in grid.layers:
                engine = GraphEngine(_cut_config(base, layers, overrides), device=str(dev))
                s = engine.shapes
                shapes = {"hidden": s.hidden, "heads": s.heads, "kv_heads": s.kv_heads, "head_dim": s.head_dim,
                          "inter": s.inter, "gated": s.gated, "act": s.act, "qk_norm": s.qk_norm,
                          "experts": s.experts, "mla": s.mla, "windows": [w for w in s.windows if w],
                          "qk_nope_dim": s.qk_nope_dim, "qk_rope_dim": s.qk_rope_dim, "v_head_dim": s.v_head_dim,
                          "kv_lora_rank": s.kv_lora_rank, "q_lora_rank": s.q_lora_rank}
                for batch, point in points.items():
                    point["shapes"] = shapes
                    st = engine.new_state(batch, grid.prompt + 8)
                    gen = torch.Generator(device=dev).manual_seed(1)
                    ids = torch.randint(0, s.vocab, (batch, grid.prompt), device=dev, generator=gen)
                    with torch.inference_mode():
                        run = lambda: prefill(engine.weights, s, ids, st.cache_k, st.cache_v, st.cos, st.sin)  # noqa: E731
                        prefill_s = median_s(run, dev, warmup=1, reps=grid.reps)
                        kernels = _profile_kernels(run, dev, grid.reps)
                    point["cuts"].append({"layers": layers, "prefill_s": prefill_s,
                                          "kernels": [{"name": k, "seconds": v}
                                                      for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])]})
                    del st
                    free_memory()
                del engine
                free_memory()
            result["points"].extend(points.values())
            synchronize(dev)
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"label": label, "error": _short(exc)})
        free_memory()
        _write(out_path, result)
        progress(f"prefill-kernels: {label} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


# ---- moe (where a mixture-of-experts layer's time goes) ---------------------------------------

@dataclass(frozen=True)
class MoEGrid:
    models: tuple[str, ...]
    tokens: tuple[int, ...]  # T: tokens through the layer (a decode step's batch, a prefill's prompt tokens)
    copies: int  # MoE layers built, timed in turn (their expert weights together exceed L2)
    max_work_bytes: int  # skip T where the routed rows' intermediates (all copies) exceed this
    max_expert_bytes: int  # build fewer copies where one layer's experts exceed this
    reps: int


FULL_MOE = MoEGrid(models=("qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite", "mixtral-8x7b", "qwen3-235b-a22b",
                           "gpt-oss-120b", "deepseek-v3"),
                   tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
                   copies=3, max_work_bytes=48 * GiB, max_expert_bytes=16 * GiB, reps=5)
TINY_MOE = MoEGrid(models=("tiny-qwen3-moe", "tiny-gpt-oss"), tokens=(1, 4, 16), copies=2,
                   max_work_bytes=64 * MiB, max_expert_bytes=64 * MiB, reps=2)
#: the stages of calibrate.graph_engine.moe_forward, each timed alone, then the whole of it
MOE_STAGES = ("route", "sort", "gather", "gemm_gate_up", "act", "gemm_down", "combine", "shared", "moe_forward")


def _moe_stage_fns(h, m, s) -> dict:
    """{stage: call} over one layer's weights ``m`` and input ``h`` (T, hidden): moe_forward's
    stages with their inputs computed once, so each call runs that stage alone."""
    import torch

    from calibrate.graph_engine import _act, _dense_ffn, expert_mm, moe_forward, route

    k = s.top_k
    weights, idx = route(h, m, s)
    flat = idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    row_token = torch.div(order, k, rounding_mode="floor")
    row_expert = flat.index_select(0, order)
    counts = torch.zeros(s.experts, dtype=torch.int64, device=h.device).scatter_add_(0, flat, torch.ones_like(flat))
    offs = torch.cumsum(counts, 0).to(torch.int32)
    xs = h.index_select(0, row_token)
    gu = expert_mm(xs, m.gate_up, offs)
    act = _act(gu, s)
    out = expert_mm(act, m.down, offs)
    w_rows = weights.reshape(-1).index_select(0, order)

    def sort():
        f = idx.reshape(-1)
        o = torch.argsort(f, stable=True)
        torch.div(o, k, rounding_mode="floor")
        f.index_select(0, o)
        c = torch.zeros(s.experts, dtype=torch.int64, device=h.device).scatter_add_(0, f, torch.ones_like(f))
        return torch.cumsum(c, 0).to(torch.int32)

    def gate_up():
        g = expert_mm(xs, m.gate_up, offs)
        return g if m.gate_up_bias is None else g + m.gate_up_bias.index_select(0, row_expert)

    def down():
        o = expert_mm(act, m.down, offs)
        return o if m.down_bias is None else o + m.down_bias.index_select(0, row_expert)

    fns = {"route": lambda: route(h, m, s), "sort": sort, "gather": lambda: h.index_select(0, row_token),
           "gemm_gate_up": gate_up, "act": lambda: _act(gu, s), "gemm_down": down,
           "combine": lambda: torch.zeros_like(h).index_add_(0, row_token, out * w_rows.unsqueeze(1)),
           "moe_forward": lambda: moe_forward(h, m, s)}
    if m.shared_gu is not None:
        fns["shared"] = lambda: _dense_ffn(h, m.shared_gu, m.shared_down, s)
    return fns, int((counts > 0).sum())


def moe_probe(device: str, grid: MoEGrid, out_path: Path, deadline: float | None,
              progress: Callable[[str], None]) -> dict:
    """Time each stage of the graph engine's mixture-of-experts layer over ``grid``; writes
    ``out_path`` after each model."""
    import torch

    from calibrate.configs import load_model_config
    from calibrate.graph_engine import Shapes, random_weights
    from calibrate.timing import free_memory, median_s, torch_device

    dev = torch_device(device)
    result = _new_result("moe", dev, grid,
                         "calibrate.graph_engine.moe_forward's stages on random bf16 weights and a random (T, hidden) "
                         "input (routing as the engine routes it: random weights route near uniformly), each stage's "
                         "inputs computed once; the calls over `copies` MoE layers captured in one CUDA graph, median "
                         "of reps replays / copies; moe_forward_eager: the whole layer run eagerly (as a prefill "
                         "runs it), timed the same way without the graph (a plain loop on the CPU)")
    t0 = time.monotonic()
    for name in grid.models:
        built = None
        try:
            config = load_model_config(name)
            shapes0 = Shapes.from_config(config)
            first = next((i for i, moe in enumerate(shapes0.moe_layers) if moe), None)
            if first is None:
                raise ValueError(f"{name} has no mixture-of-experts layer")
            one = 3 * shapes0.experts * shapes0.hidden * shapes0.moe_inter * 2
            copies = max(1, min(grid.copies, grid.max_expert_bytes // max(1, one)))
            s = Shapes.from_config(_cut_config(name, first + copies))
            built = random_weights(s, dev, torch.bfloat16, 0)
            layers = [lw.moe for lw in built.layers if lw.moe is not None][:copies]
            gen = torch.Generator(device=dev).manual_seed(1)
            for tokens in grid.tokens:
                rows = tokens * s.top_k
                work = rows * max(s.hidden, 2 * s.moe_inter) * 2 * 4 * len(layers)
                if work > grid.max_work_bytes:
                    continue
                if _out_of_budget(deadline, result, out_path, progress, "moe", f"{name} T {tokens}"):
                    return result
                with torch.inference_mode():
                    per_copy, touched = [], []
                    for m in layers:
                        h = torch.randn(tokens, s.hidden, device=dev, dtype=torch.bfloat16, generator=gen)
                        fns, n = _moe_stage_fns(h, m, s)
                        per_copy.append(fns)
                        touched.append(n)
                    for stage in MOE_STAGES:
                        if stage not in per_copy[0]:
                            continue
                        seconds, info = _time_calls([f[stage] for f in per_copy], dev, grid.reps)
                        result["points"].append(_moe_point(name, s, tokens, stage, seconds, touched, info["graph"]))
                    whole = [f["moe_forward"] for f in per_copy]
                    seconds = median_s(lambda: [f() for f in whole], dev, warmup=1, reps=grid.reps) / len(whole)
                    result["points"].append(_moe_point(name, s, tokens, "moe_forward_eager", seconds, touched, False))
                del per_copy, fns, h
                free_memory()
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"model": name, "error": _short(exc)})
        del built
        free_memory()
        _write(out_path, result)
        progress(f"moe: {name} done ({time.monotonic() - t0:.1f} s, {len(result['points'])} points)")
    return _finished(result, out_path, t0)


def _moe_point(name: str, s, tokens: int, stage: str, seconds: float, touched: list, graph: bool) -> dict:
    """One timing with the layer's shape and work: routed rows, experts touched (mean over the
    copies), the experts' matmul FLOPs and the touched experts' weight bytes (bf16)."""
    rows = tokens * s.top_k
    mean_touched = sum(touched) / len(touched)
    return {"model": name, "experts": s.experts, "top_k": s.top_k, "hidden": s.hidden, "moe_inter": s.moe_inter,
            "shared_inter": s.shared_inter, "tokens": tokens, "rows": rows, "stage": stage, "seconds": seconds,
            "experts_touched": mean_touched, "expert_flop": 2.0 * rows * 3 * s.hidden * s.moe_inter,
            "expert_bytes": mean_touched * 3 * s.hidden * s.moe_inter * 2, "graph": graph}


# ---- attention ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttentionGrid:
    shapes: tuple[tuple[str, int, int, int], ...]  # (model, q_heads, kv_heads, head_dim)
    batches: tuple[int, ...]
    contexts: tuple[int, ...]  # cached tokens T
    max_kv_bytes: int  # skip combinations whose K + V (one layer) exceed this
    rotate_bytes: int  # copies of the cache until a pass touches this many bytes
    max_copies: int
    reps: int
    #: skip sdpa_math where it would materialise (group + 1) x the cache (it repeats K and V per
    #: query head under enable_gqa)
    max_math_bytes: int
    ops: tuple[str, ...] = ()  # the ops timed (empty: every op of OPS)


FULL_ATTENTION = AttentionGrid(
    shapes=(("qwen2.5-0.5b", 14, 2, 64), ("qwen2.5-1.5b", 12, 2, 128), ("qwen2.5-3b", 16, 2, 128),
            ("qwen2.5-7b", 28, 4, 128), ("llama-3.1-8b", 32, 8, 128)),
    batches=(1, 4, 16, 64, 256),
    contexts=(128, 512, 2048, 8192, 32768),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=48 * GiB,
)
TINY_ATTENTION = AttentionGrid(
    shapes=(("tiny-qwen2", 4, 2, 16),), batches=(1, 2), contexts=(16, 64),
    max_kv_bytes=64 * MiB, rotate_bytes=0, max_copies=2, reps=2, max_math_bytes=64 * MiB,
)
#: the query heads a KV head serves, varied at generic shapes (MHA's 1 to MQA's 64, head widths 64
#: and 128, none a catalog model's): the graph engine's decode attention alone
FULL_ATTENTION_GROUPS = AttentionGrid(
    shapes=(("g1-128", 16, 16, 128), ("g2-128", 16, 8, 128), ("g16-128", 32, 2, 128), ("g32-128", 32, 1, 128),
            ("g1-64", 24, 24, 64), ("g8-64", 24, 3, 64), ("g64-64", 64, 1, 64)),
    batches=(1, 16, 64, 256), contexts=(512, 2048, 8192),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=0,
    ops=("graph_attention",),
)
#: the cached tokens around the powers of two (a cache of prompt + gen positions, rounded up to 8; call
#: 41 ran 19 of them, 1,024-8,224, call 42 these 40):
#: the graph engine's decode attention and its QK product alone, at generic shapes of 1-8 query heads
#: a KV head (cuBLAS picks the QK kernel by the row's length; device call 33 saw it slow by 1.9x at
#: 1,040-1,088 positions for one KV head a query head)
FULL_ATTENTION_CONTEXTS = AttentionGrid(
    shapes=(("g1-128", 16, 16, 128), ("g4-128", 32, 8, 128), ("g8-128", 32, 4, 128), ("g7-64", 14, 2, 64)),
    batches=(16, 64, 256),
    contexts=(512, 520, 528, 544, 576, 640, 768, 1024, 1032, 1040, 1056, 1088, 1096, 1104, 1112, 1120, 1128, 1136,
              1144, 1152, 1280, 1536, 2048, 2056, 2064, 2080, 2112, 2176, 2304, 2560, 3072, 3088, 4096, 4112, 4160,
              8192, 8208, 8224, 16384, 16416),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=0,
    ops=("graph_attention", "graph_qk"),
)
#: the head width at small batches: 32 query heads of 64, 80, 96, 112, 128 (and 16 of 256), one and
#: four a KV head, batches 1-64, three cache lengths outside the windows above; the decode attention
#: and each of its kernels alone (phi-3-mini's 96-wide MHA heads ran 6-15 us a layer over the model at
#: batches 1-16, device calls 22-32)
FULL_ATTENTION_WIDTHS = AttentionGrid(
    shapes=(("w64-g1", 32, 32, 64), ("w80-g1", 32, 32, 80), ("w96-g1", 32, 32, 96), ("w112-g1", 32, 32, 112),
            ("w128-g1", 32, 32, 128), ("w256-g1", 16, 16, 256), ("w64-g4", 32, 8, 64), ("w96-g4", 32, 8, 96),
            ("w128-g4", 32, 8, 128)),
    batches=(1, 4, 16, 64), contexts=(528, 2048, 8192),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=0,
    ops=("graph_attention", "graph_qk", "graph_softmax", "graph_pv"),
)
#: the batch at a fixed cache length: eight KV heads at batch 128 (1,024 batched matrices) ran the decode
#: attention ~1.7x slower than at 64 or 256 at 576 positions (device call 54: llama-3.2-1b -19% at prompt
#: 512 + 64, batch 128; 1-8 other models with 8 KV heads -4 to -8%), not at 2,112; batches 32-512 around
#: it, at shapes of 2-8 KV heads, three cache lengths
FULL_ATTENTION_BATCHES = AttentionGrid(
    shapes=(("g4-128", 32, 8, 128), ("g4-64", 32, 8, 64), ("g3-128", 24, 8, 128), ("g5-128", 40, 8, 128),
            ("g7-128", 28, 4, 128), ("g8-128", 16, 2, 128)),
    batches=(32, 64, 96, 112, 128, 144, 160, 192, 256, 384, 512), contexts=(576, 1152, 2112),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=0,
    ops=("graph_attention", "graph_qk", "graph_pv"),
)
#: the cache lengths between the attention-contexts probe's, densely: 1,536-2,048 every 32 positions (device
#: call 59 found every model's step slower at 1,952 than at 2,064 or 4,128, batch 1 included, a length that
#: probe jumps over), 2,048-4,096 every 128, 4,096-16,384 every 512 (the shared-memory softmax past 9,216:
#: call 59's 64-wide heads 6-13% fast at 12,320), at the attention-contexts probe's four generic shapes, and
#: batches 1 and 4 besides its 16, 64 and 256 (the decode attention alone; read with the attention-contexts
#: file by roofline.probes.attention_context_factors)
FULL_ATTENTION_LENGTHS = AttentionGrid(
    shapes=(("g1-128", 16, 16, 128), ("g4-128", 32, 8, 128), ("g8-128", 32, 4, 128), ("g7-64", 14, 2, 64)),
    batches=(1, 4, 16, 64, 256),
    contexts=tuple(range(1536, 2048, 32)) + tuple(range(2048, 4096, 128)) + tuple(range(4096, 16384 + 1, 512))
    + (9224, 12320),
    max_kv_bytes=16 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5, max_math_bytes=0,
    ops=("graph_attention",),
)
#: the probes that time the decode attention alone at generic shapes, and their full grids (one tiny grid)
ATTENTION_SHAPE_GRIDS = {"attention-groups": FULL_ATTENTION_GROUPS, "attention-contexts": FULL_ATTENTION_CONTEXTS,
                         "attention-batches": FULL_ATTENTION_BATCHES, "attention-widths": FULL_ATTENTION_WIDTHS,
                         "attention-lengths": FULL_ATTENTION_LENGTHS}
TINY_ATTENTION_GROUPS = AttentionGrid(
    shapes=(("g1", 4, 4, 16), ("g4", 4, 1, 16)), batches=(1, 2), contexts=(16, 64),
    max_kv_bytes=64 * MiB, rotate_bytes=0, max_copies=2, reps=2, max_math_bytes=0, ops=("graph_attention",),
)
GRAPH_OPS = ("graph_attention", "graph_qk", "graph_softmax", "graph_pv", "graph_cache_write")
SDPA_BACKENDS = ("default", "flash", "efficient", "math", "cudnn")
OPS = GRAPH_OPS + tuple(f"sdpa_{b}" for b in SDPA_BACKENDS) + ("cat_append",)


def graph_decode_attention(q, ck, cv, bias, scale):
    """The graph engine's decode attention (calibrate.graph_engine.decode_attention)."""
    from calibrate.graph_engine import decode_attention

    return decode_attention(q, ck, cv, bias, scale)



def attention_point_sizes(batch: int, context: int, q_heads: int, kv_heads: int, head_dim: int) -> dict:
    """Bytes and FLOPs of one layer's decode attention (bf16): K+V read, score elements, FLOPs."""
    kv_bytes = 2 * batch * kv_heads * context * head_dim * 2
    return {"kv_bytes": kv_bytes, "score_elements": batch * q_heads * context,
            "flop": 4 * batch * q_heads * context * head_dim, "seq_layers": batch}


def _op_cost(op: str, sizes: dict) -> dict:
    """Bytes moved and FLOPs of one op, from attention_point_sizes (bf16, 2 bytes per element)."""
    kv, se, flop = sizes["kv_bytes"], sizes["score_elements"], sizes["flop"]
    table = {
        "graph_attention": (kv + 8 * se, flop),  # S written, read, P written, read
        "graph_qk": (kv // 2 + 2 * se, flop // 2),
        "graph_softmax": (4 * se, 0),
        "graph_pv": (kv // 2 + 2 * se, flop // 2),
        "graph_cache_write": (kv // max(1, sizes["context"]), 0),  # one token's K and V written
        "cat_append": (2 * kv, 0),
    }
    nbytes, f = table.get(op, (kv, flop))  # sdpa_*: reads K and V once
    return {"bytes": nbytes, "op_flop": f}


def _time_calls(fns: list[Callable[[], object]], device, reps: int) -> tuple[float, dict]:
    """Seconds per call of ``fns`` run in turn: one CUDA graph replay / len(fns) on CUDA (eager
    timing if capture fails), a plain loop on the CPU. Returns (seconds, info)."""
    import torch

    from calibrate.timing import median_s

    def run_all():
        for fn in fns:
            fn()

    info: dict = {"copies": len(fns), "graph": False}
    target = run_all
    if device.type == "cuda":
        # capture_begin/end by hand: torch.cuda.graph() runs gc.collect() and empty_cache() on
        # entry, tens of ms each, over a thousand captures
        from calibrate.timing import side_stream

        side = side_stream(device)  # one per device: see calibrate.timing.side_stream
        side.wait_stream(torch.cuda.current_stream(device))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side):
            run_all()
            run_all()
            side.synchronize()
            try:
                graph.capture_begin()
                try:
                    run_all()
                finally:
                    graph.capture_end()
                target = graph.replay
                info["graph"] = True
            except Exception as exc:  # noqa: BLE001 - e.g. a backend that cannot be captured
                info["graph_error"] = _short(exc)
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
    return median_s(target, device, warmup=1, reps=reps) / len(fns), info


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _sdpa_context(backend: str):
    import contextlib

    if backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "math": SDPBackend.MATH, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend])


def _attention_fns(op: str, data: dict) -> list[Callable[[], object]]:
    """The calls of one op over every copy of the cache (closures over ``data``'s tensors)."""
    import torch
    import torch.nn.functional as F

    q, q4, bias, scale, pos = data["q"], data["q4"], data["bias"], data["scale"], data["pos"]
    ks, vs = data["k"], data["v"]
    n = len(ks)
    if op == "graph_attention":
        return [lambda i=i: graph_decode_attention(q, ks[i], vs[i], bias, scale) for i in range(n)]
    if op == "graph_qk":
        def qk(i):
            b, kvh, t, d = ks[i].shape
            return torch.baddbmm(bias, q, ks[i].view(b * kvh, t, d).transpose(1, 2), alpha=scale)
        return [lambda i=i: qk(i) for i in range(n)]
    if op == "graph_softmax":
        scores = data["scores"]
        return [lambda i=i: torch.softmax(scores[i], dim=-1) for i in range(n)]
    if op == "graph_pv":
        probs = data["scores"]
        def pv(i):
            b, kvh, t, d = vs[i].shape
            return torch.bmm(probs[i], vs[i].view(b * kvh, t, d))
        return [lambda i=i: pv(i) for i in range(n)]
    if op == "graph_cache_write":
        k1, v1 = data["k1"], data["v1"]
        return [lambda i=i: (ks[i].index_copy_(2, pos, k1), vs[i].index_copy_(2, pos, v1)) for i in range(n)]
    if op.startswith("sdpa_"):
        return [lambda i=i: F.scaled_dot_product_attention(q4, ks[i], vs[i], enable_gqa=True) for i in range(n)]
    if op == "cat_append":
        k1, v1 = data["k1"], data["v1"]
        return [lambda i=i: (torch.cat([ks[i], k1], dim=-2), torch.cat([vs[i], v1], dim=-2)) for i in range(n)]
    raise ValueError(f"unknown op {op!r}")


def _attention_data(device, batch: int, context: int, q_heads: int, kv_heads: int, head_dim: int, copies: int):
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    group = q_heads // kv_heads
    bf16 = torch.bfloat16
    shape = (batch, kv_heads, context, head_dim)
    bias = torch.zeros(context, device=device, dtype=bf16)
    bias[-1] = float("-inf")  # the slot after the current position, as in a decode step
    data = {
        "k": [torch.randn(shape, device=device, dtype=bf16, generator=gen) for _ in range(copies)],
        "v": [torch.randn(shape, device=device, dtype=bf16, generator=gen) for _ in range(copies)],
        "q": torch.randn(batch * kv_heads, group, head_dim, device=device, dtype=bf16, generator=gen),
        "q4": torch.randn(batch, q_heads, 1, head_dim, device=device, dtype=bf16, generator=gen),
        "k1": torch.randn(batch, kv_heads, 1, head_dim, device=device, dtype=bf16, generator=gen),
        "v1": torch.randn(batch, kv_heads, 1, head_dim, device=device, dtype=bf16, generator=gen),
        "bias": bias,
        "scale": head_dim ** -0.5,
        "pos": torch.tensor([context - 2], device=device),
    }
    data["scores"] = [torch.softmax(torch.randn(batch * kv_heads, group, context, device=device, dtype=bf16,
                                                generator=gen), dim=-1) for _ in range(copies)]
    return data


def sdpa_backend_from_ops(names: list[str]) -> str:
    """Which SDPA backend ran, from the aten op names a profiler recorded: cudnn, flash,
    efficient, math, flash-cpu, or '' if no SDPA op was seen."""
    low = " ".join(n.lower() for n in names)
    for key, backend in (("_scaled_dot_product_cudnn_attention", "cudnn"),
                         ("_scaled_dot_product_flash_attention_for_cpu", "flash-cpu"),
                         ("_scaled_dot_product_flash_attention", "flash"),
                         ("_scaled_dot_product_efficient_attention", "efficient"),
                         ("_scaled_dot_product_attention_math", "math")):
        if key in low:
            return backend
    return ""


def profiled_op_names(fn: Callable[[], object], device, enabled: bool = True) -> list[str]:
    """Names of every op and kernel the torch profiler saw while running ``fn`` once ([] and a
    plain call when not ``enabled``)."""
    from torch.profiler import ProfilerActivity, profile

    from calibrate.timing import synchronize

    if not enabled:
        fn()
        synchronize(device)
        return []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        synchronize(device)
    return sorted({e.key for e in prof.key_averages()})


def _interesting(names: list[str]) -> list[str]:
    keys = ("attention", "attn", "fmha", "flash", "cudnn", "sdpa", "softmax", "bmm", "gemm", "cutlass", "sm90")
    return [n for n in names if any(k in n.lower() for k in keys)][:40]


def attention_probe(device: str, grid: AttentionGrid, out_path: Path, deadline: float | None,
                    progress: Callable[[str], None]) -> dict:
    """Time every op of OPS over ``grid``; writes ``out_path`` after each combination."""
    import torch

    from calibrate.timing import environment, free_memory, torch_device, utc_now

    dev = torch_device(device)
    result: dict = {"probe": "attention", "timestamp": utc_now(), **environment(dev), "grid": asdict(grid),
                    "method": ("one layer; calls over `copies` cache copies captured in one CUDA graph "
                               "(a plain loop on the CPU), median of reps replays / copies"),
                    "points": [], "dispatch": [], "skipped": [], "stopped": None}
    t0 = time.monotonic()
    with torch.inference_mode():
        for name, q_heads, kv_heads, head_dim in grid.shapes:
            for batch in grid.batches:
                for context in grid.contexts:
                    sizes = attention_point_sizes(batch, context, q_heads, kv_heads, head_dim)
                    where = {"shape": name, "q_heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim,
                             "batch": batch, "context_tokens": context}
                    if sizes["kv_bytes"] > grid.max_kv_bytes:
                        result["skipped"].append({**where, "why": "K + V over max_kv_bytes"})
                        continue
                    if _out_of_budget(deadline, result, out_path, progress, "attention",
                                      f"{name} batch {batch} T {context}"):
                        return result
                    _attention_combo(dev, grid, where, sizes, result)
                    free_memory()
                _write(out_path, result)
            progress(f"attention: {name} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


def _dispatch_point(grid: AttentionGrid, batch: int, context: int) -> bool:
    """Profile the default SDPA at the first batch and at 64, at the second and fourth context
    (e.g. 512 and 8192): 4 profiler runs per shape instead of 25."""
    contexts = grid.contexts[1::2] or grid.contexts
    return batch in (grid.batches[0], 64) and context in contexts


def _attention_combo(dev, grid: AttentionGrid, where: dict, sizes: dict, result: dict) -> None:
    batch, context = where["batch"], where["context_tokens"]
    q_heads, kv_heads, head_dim = where["q_heads"], where["kv_heads"], where["head_dim"]
    copies = max(1, min(grid.max_copies, math.ceil(grid.rotate_bytes / sizes["kv_bytes"]) if grid.rotate_bytes else 1))
    try:
        data = _attention_data(dev, batch, context, q_heads, kv_heads, head_dim, copies)
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: record, go on
        result["skipped"].append({**where, "why": _short(exc)})
        return
    if _dispatch_point(grid, batch, context):  # which kernel the default SDPA picks, per shape
        try:
            names = profiled_op_names(_attention_fns("sdpa_default", data)[0], dev)
            result["dispatch"].append({**where, "sdpa_default_backend": sdpa_backend_from_ops(names),
                                       "ops": _interesting(names)})
        except Exception as exc:  # noqa: BLE001
            result["dispatch"].append({**where, "error": _short(exc)})
    group = q_heads // kv_heads
    for op in grid.ops or OPS:
        point = {**where, "op": op, **sizes, **_op_cost(op, {**sizes, "context": context})}
        if op == "sdpa_math" and (group + 1) * sizes["kv_bytes"] > grid.max_math_bytes:
            result["skipped"].append({**where, "op": op, "why": "math backend would repeat K and V per query head"})
            continue
        try:
            with _sdpa_context(op[len("sdpa_"):] if op.startswith("sdpa_") else "default"):
                seconds, info = _time_calls(_attention_fns(op, data), dev, grid.reps)
            point.update(info, s=seconds, bytes_per_s=point["bytes"] / seconds if seconds > 0 else None)
        except Exception as exc:  # noqa: BLE001 - unsupported backend, OOM, ...: record it
            point["error"] = _short(exc)
        result["points"].append(point)
    del data



# ---- the decode attention's kernel table ----------------------------------------------------------

@dataclass(frozen=True)
class AttentionTableGrid:
    """The graph engine's decode attention alone over batched matrices x cache lengths, per shape.

    cuBLAS picks the decode attention's QK kernel by the number of batched matrices (batch x KV
    heads) as well as by the row's length (docs/method.md, section 13): this grid times it at every
    power of two of batched matrices, every cache length a few dozen positions apart, for the head
    shapes of the catalog's models (roofline.probes.attention_kernel_table reads it)."""

    shapes: tuple[tuple[str, int, int, int], ...]  # (name, q_heads, kv_heads, head_dim), in the order run
    matrices: tuple[int, ...]  # batched matrices: batch x KV heads (a shape's batch is this / its KV heads)
    contexts: tuple[int, ...]  # cache positions (multiples of 8, as the engine lays caches out)
    max_kv_bytes: int  # skip points whose one layer's K + V exceed this
    rotate_bytes: int  # copies of the cache in one graph until a replay touches this many bytes
    max_copies: int
    reps: int


FULL_ATTENTION_TABLE = AttentionTableGrid(
    shapes=(("g4-64", 32, 8, 64), ("g7-64", 14, 2, 64), ("g1-96", 32, 32, 96), ("g71-64", 71, 1, 64),
            ("g16-64", 128, 8, 64), ("g4-128", 32, 8, 128), ("g7-128", 28, 4, 128), ("g1-128", 32, 32, 128),
            ("g2-256", 16, 8, 256), ("g1-256", 16, 16, 256)),
    matrices=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    contexts=(256, 320, 384, 448) + tuple(sorted(set(range(512, 4096, 64)) | set(range(1024, 1088, 8))))
    + tuple(range(4096, 16384 + 1, 256)) + (16416,),
    max_kv_bytes=8 * GiB, rotate_bytes=256 * MiB, max_copies=16, reps=5,
)
TINY_ATTENTION_TABLE = AttentionTableGrid(
    shapes=(("g1", 4, 4, 16), ("g4", 4, 1, 16)), matrices=(2, 4, 8), contexts=(16, 64),
    max_kv_bytes=64 * MiB, rotate_bytes=0, max_copies=2, reps=2,
)


def attention_table_probe(device: str, grid: AttentionTableGrid, out_path: Path, deadline: float | None,
                          progress: Callable[[str], None]) -> dict:
    """Time the graph engine's decode attention (calibrate.graph_engine.decode_attention) over
    ``grid``, one shape after another; writes ``out_path`` after each shape. Each shape's K and V
    are two flat buffers filled once, and each point's caches are contiguous views of them of
    exactly the engine's layout (B, KV heads, T, d): a point costs its capture and its replays,
    not an allocation (the attention probe's points allocate and fill theirs: ~0.2 s a point)."""
    import torch

    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    result = _new_result("attention-table", dev, grid,
                         "one layer; calls over `copies` contiguous cache views captured in one CUDA graph "
                         "(a plain loop on the CPU), median of reps replays / copies", skipped=[])
    t0 = time.monotonic()
    bf16 = torch.bfloat16
    with torch.inference_mode():
        for name, q_heads, kv_heads, head_dim in grid.shapes:
            if _out_of_budget(deadline, result, out_path, progress, "attention-table", name):
                return result
            group = q_heads // kv_heads
            elements = grid.max_kv_bytes // 4  # K and V, bf16: each buffer holds half of the bytes
            try:
                gen = torch.Generator(device=dev).manual_seed(0)
                kbuf = torch.randn(elements, device=dev, dtype=bf16, generator=gen)
                vbuf = torch.randn(elements, device=dev, dtype=bf16, generator=gen)
            except Exception as exc:  # noqa: BLE001 - out of memory: record, next shape
                result["errors"].append({"shape": name, "error": _short(exc)})
                continue
            for matrices in grid.matrices:
                # fewer matrices than the shape's KV heads: one sequence of that many KV heads (the same
                # query heads a KV head: the batched matrices and their rows are what the kernels see)
                kv = kv_heads if matrices >= kv_heads else matrices
                if matrices % kv or kv_heads % kv:
                    continue
                batch = matrices // kv
                q = torch.randn(matrices, group, head_dim, device=dev, dtype=bf16, generator=gen)
                for context in grid.contexts:
                    where = {"shape": name, "q_heads": group * kv, "kv_heads": kv, "head_dim": head_dim,
                             "batch": batch, "context_tokens": context}
                    sizes = attention_point_sizes(batch, context, group * kv, kv, head_dim)
                    n = batch * kv * context * head_dim
                    if n > elements:
                        result["skipped"].append({**where, "why": "K + V over max_kv_bytes"})
                        continue
                    if _out_of_budget(deadline, result, out_path, progress, "attention-table",
                                      f"{name} batch {batch} T {context}"):
                        return result
                    copies = max(1, min(grid.max_copies, elements // n,
                                        math.ceil(grid.rotate_bytes / sizes["kv_bytes"]) if grid.rotate_bytes else 1))
                    shape = (batch, kv, context, head_dim)
                    ks = [kbuf[i * n:(i + 1) * n].view(shape) for i in range(copies)]
                    vs = [vbuf[i * n:(i + 1) * n].view(shape) for i in range(copies)]
                    bias = torch.zeros(context, device=dev, dtype=bf16)
                    bias[-1] = float("-inf")  # the slot after the current position, as in a decode step
                    scale = head_dim ** -0.5
                    fns = [lambda i=i: graph_decode_attention(q, ks[i], vs[i], bias, scale) for i in range(copies)]
                    point = {**where, "op": "graph_attention", **sizes,
                             **_op_cost("graph_attention", {**sizes, "context": context})}
                    try:
                        seconds, info = _time_calls(fns, dev, grid.reps)
                        point.update(info, s=seconds, bytes_per_s=point["bytes"] / seconds if seconds > 0 else None)
                    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: record it
                        point["error"] = _short(exc)
                    result["points"].append(point)
                    del fns
                    if dev.type == "cuda" and torch.cuda.memory_reserved(dev) > 3 * grid.max_kv_bytes:
                        torch.cuda.empty_cache()  # each capture's pool: freed with its graph, returned here
            del kbuf, vbuf
            free_memory()
            _write(out_path, result)
            progress(f"attention-table: {name} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


# ---- the experts' grouped matmul, at generic shapes -------------------------------------------------

@dataclass(frozen=True)
class GroupedMmGrid:
    """torch._grouped_mm (the graph engine's expert matmuls, calibrate.graph_engine.expert_mm) alone,
    at generic shapes: ``groups`` experts of ``rows`` routed rows each (every group the same), an
    inner width K and an output width N on a ladder of powers of two and their halfway 1.5x (as the
    gemm probe's), none a catalog model's shape. What a mixture-of-experts layer's matmuls cost by
    experts touched, rows an expert and shape (roofline.grouped_mm.read_grouped_mm reads it; a
    model's own shapes are priced by interpolation). From ``random_rows_from`` rows an expert on, the
    rows are routed at random (each of groups x rows to a group drawn uniformly: counts spread as a
    router's do, var = rows x (1 - 1 / groups)), below it exactly ``rows`` each (a decode step's
    experts, one or a few rows each). ``spread`` points put one row each in ``groups_total`` groups,
    most of them empty (a decode step's untouched experts), at one group count and shape each."""

    groups: tuple[int, ...]
    rows: tuple[int, ...]
    ks: tuple[int, ...]
    ns: tuple[int, ...]
    max_weight_bytes: int  # skip (groups, K, N) whose weights exceed this
    max_rows: int  # skip points of more routed rows than this
    max_flop: float  # skip points of more FLOPs than this
    rotate_bytes: int  # copies of the weights until a replay reads this many bytes (the L2: 50 MB on the H200)
    reps: int
    random_rows_from: int = 0  # rows an expert from which its rows are routed at random (0: never)
    #: (touched groups, groups in all, K, N): untouched experts' empty groups beside one row each
    spread: tuple[tuple[int, int, int, int], ...] = ()


#: device call 71 ran the powers of two alone (K 512-16,384, N 1,024-32,768), every group exactly
#: ``rows`` rows, rows 1-4,096, FLOPs to 2e13 (h200-probe-grouped-mm-call71.json)
FULL_GROUPED_MM = GroupedMmGrid(
    groups=(1, 2, 4, 8, 16, 32, 64, 128, 256), rows=(1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
    ks=_ladder(512, 16384), ns=_ladder(1024, 32768),
    max_weight_bytes=24 * GiB, max_rows=1 << 18, max_flop=5.0e12, rotate_bytes=600 * MiB, reps=7,
    random_rows_from=16,
    spread=tuple((g, e, k, n) for g, e in ((4, 32), (4, 128), (8, 256), (2, 8), (32, 256))
                 for k, n in ((2048, 4096), (4096, 8192))),
)
TINY_GROUPED_MM = GroupedMmGrid(groups=(1, 4), rows=(1, 8), ks=(16, 32), ns=(16, 32), max_weight_bytes=16 * MiB,
                                max_rows=64, max_flop=1e9, rotate_bytes=0, reps=2, random_rows_from=8,
                                spread=((1, 4, 16, 16),))


def grouped_mm_probe(device: str, grid: GroupedMmGrid, out_path: Path, deadline: float | None,
                     progress: Callable[[str], None]) -> dict:
    """Time torch._grouped_mm over ``grid`` (bf16, the engine's layout: weights (groups, N, K)
    transposed, rows sorted by group, int32 cumulative offsets); writes ``out_path`` after each
    shape. Each (groups, K, N) allocates its weights once, in as many copies as a replay needs to
    read ``rotate_bytes`` (weights beyond the L2, as a decode step reads them)."""
    import torch

    from calibrate.graph_engine import expert_mm
    from calibrate.timing import free_memory, torch_device

    dev = torch_device(device)
    result = _new_result("grouped-mm", dev, grid,
                         "torch._grouped_mm (calibrate.graph_engine.expert_mm) over `copies` copies of the "
                         "weights captured in one CUDA graph (a plain loop on the CPU), median of reps replays / "
                         "copies; every group `rows` rows", skipped=[])
    t0 = time.monotonic()
    bf16 = torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(0)

    def timed(groups_total: int, touched: int, rows: int, k: int, n: int, ws) -> dict:
        counts = torch.zeros(groups_total, dtype=torch.int64, device=dev)
        if grid.random_rows_from and rows >= grid.random_rows_from and groups_total == touched:
            # routed at random: each row to a group drawn uniformly (a router's spread of counts)
            counts = torch.bincount(torch.randint(0, touched, (touched * rows,), device=dev, generator=gen),
                                    minlength=touched)
        else:  # exactly `rows` each, the touched groups spread evenly over all of them (not the first few)
            counts[torch.linspace(0, groups_total - 1, touched, device=dev).round().long()] = rows
        offs = torch.cumsum(counts, 0).to(torch.int32)
        x = torch.randn(touched * rows, k, device=dev, dtype=bf16, generator=gen)
        point = {"groups": touched, "groups_total": groups_total, "rows": rows, "k": k, "n": n,
                 "weight_bytes": touched * n * k * 2, "flop": 2.0 * touched * rows * k * n,
                 "routed": "random" if int(counts.max()) != int(counts[counts > 0].min()) else "exact",
                 "touched": int((counts > 0).sum()), "most_rows": int(counts.max())}
        try:
            seconds, info = _time_calls([lambda w=w: expert_mm(x, w, offs) for w in ws], dev, grid.reps)
            point.update(info, s=seconds)
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: record it
            point["error"] = _short(exc)
        return point

    def weights(groups: int, k: int, n: int):
        one = groups * n * k * 2
        copies = max(1, math.ceil(grid.rotate_bytes / one)) if grid.rotate_bytes else 1
        return [torch.randn(groups, n, k, device=dev, dtype=bf16, generator=gen) for _ in range(copies)]

    with torch.inference_mode():
        for k in grid.ks:
            for n in grid.ns:
                for groups in grid.groups:
                    where = f"K {k} N {n} groups {groups}"
                    if groups * n * k * 2 > grid.max_weight_bytes:
                        result["skipped"].append({"groups": groups, "k": k, "n": n, "why": "weights over max_weight_bytes"})
                        continue
                    if _out_of_budget(deadline, result, out_path, progress, "grouped-mm", where):
                        return result
                    try:
                        ws = weights(groups, k, n)
                    except Exception as exc:  # noqa: BLE001 - out of memory: record, next shape
                        result["errors"].append({"groups": groups, "k": k, "n": n, "error": _short(exc)})
                        free_memory()
                        continue
                    for rows in grid.rows:
                        if groups * rows > grid.max_rows or 2.0 * groups * rows * k * n > grid.max_flop:
                            result["skipped"].append({"groups": groups, "rows": rows, "k": k, "n": n,
                                                      "why": "rows or FLOPs over the grid's limits"})
                            continue
                        result["points"].append(timed(groups, groups, rows, k, n, ws))
                    del ws
                    free_memory()
                _write(out_path, result)
            progress(f"grouped-mm: K {k} done ({time.monotonic() - t0:.1f} s)")
        for touched, total, k, n in grid.spread:
            if _out_of_budget(deadline, result, out_path, progress, "grouped-mm", f"spread {touched} of {total}"):
                return result
            ws = weights(total, k, n)
            for groups_total in (touched, total):
                point = timed(groups_total, touched, 1, k, n, [w[:groups_total] for w in ws])
                result["points"].append({**point, "series": "spread"})
            del ws
            free_memory()
    return _finished(result, out_path, t0)


# ---- memory ------------------------------------------------------------------------------------

FULL_MEMORY_CASES = tuple(
    {"model": m, **c}
    for m in ("qwen2.5-0.5b", "qwen2.5-1.5b")
    for c in ({"kind": "graph"}, {"kind": "graph", "ceilings_first": True}, {"kind": "graph", "cudnn": False},
              {"kind": "prefill-backends"}, {"kind": "hf-eager"}, {"kind": "hf-eager", "cudnn": False})
)
TINY_MEMORY_CASES = (
    {"model": "tiny-qwen2", "kind": "graph", "ceilings_first": True},
    {"model": "tiny-qwen2", "kind": "prefill-backends"},
)
_STAT_KEYS = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "active_bytes.all.peak",
              "requested_bytes.all.peak", "reserved_bytes.all.current", "reserved_bytes.all.peak",
              "allocation.all.current", "segment.all.current", "num_alloc_retries", "num_ooms")


class _Stages:
    """Memory after each stage of one case: allocated, peak since the stage began, reserved, stats."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.stages: list[dict] = []
        self.t0 = time.monotonic()

    def begin(self) -> None:
        import torch

        gc.collect()
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)

    def snap(self, name: str, **extra) -> dict:
        import torch

        rec: dict = {"stage": name, "t_s": round(time.monotonic() - self.t0, 3)}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            stats = torch.cuda.memory_stats(self.device)
            rec.update(allocated_bytes=torch.cuda.memory_allocated(self.device),
                       max_allocated_bytes=torch.cuda.max_memory_allocated(self.device),
                       reserved_bytes=torch.cuda.memory_reserved(self.device),
                       max_reserved_bytes=torch.cuda.max_memory_reserved(self.device),
                       stats={k: stats.get(k) for k in _STAT_KEYS}, largest_live_blocks=_largest_blocks(self.device))
        else:
            import resource

            rec["rss_max_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rec.update(extra)
        self.stages.append(rec)
        return rec

    def fail(self, name: str, exc: BaseException) -> None:
        self.stages.append({"stage": name, "error": _short(exc)})


def _largest_blocks(device, n: int = 8) -> list[int]:
    """Sizes in bytes of the n largest live (allocated) blocks of the caching allocator."""
    import torch

    try:
        sizes = [b["size"] for seg in torch.cuda.memory_snapshot() for b in seg.get("blocks", [])
                 if b.get("state") == "active_allocated"]
    except Exception:  # noqa: BLE001 - diagnostics only
        return []
    return sorted(sizes, reverse=True)[:n]


def _clear_cublas(stages: _Stages) -> None:
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if stages.cuda and clear is not None:
        before = torch.cuda.memory_allocated(stages.device)
        clear()
        stages.snap("cuBLAS workspaces cleared", freed_bytes=before - torch.cuda.memory_allocated(stages.device))


def run_memory_case(case: dict, out: dict | None = None) -> dict:
    """One memory case, in this process (the probe runs each in a fresh one): stages and flags,
    filled into ``out`` as they come (so a failure keeps the stages before it)."""
    import torch

    from calibrate.ceilings import default_sizes, measure_ceilings
    from calibrate.configs import TINY_MODELS, load_model_config
    from calibrate.grid import ModelSize
    from calibrate.timing import free_memory, torch_device

    dev = torch_device(case.get("device", "cuda"))
    cuda = dev.type == "cuda"
    if cuda and not case.get("cudnn", True):
        torch.backends.cuda.enable_cudnn_sdp(False)
    model = case["model"]
    config = load_model_config(model)
    batch, prompt, gen = case.get("batch", 1), case.get("prompt", 128), case.get("gen", 16)
    out = {} if out is None else out
    out.update(case=case, weight_bytes_expected=ModelSize.from_config(model, config).weight_bytes, flags=_flags(),
               env={"CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")})
    st = _Stages(dev)
    out["stages"] = st.stages
    torch.zeros(1, device=dev)  # context up
    st.snap("start")
    if case.get("ceilings_first"):
        st.begin()
        measure_ceilings(str(dev), {model: config}, [1, 64],
                         sizes=default_sizes(dev.type, tiny_models_only=model in TINY_MODELS))
        free_memory()
        st.snap("ceilings measured, then freed")
    with torch.inference_mode():
        kind = case["kind"]
        profile = case.get("profile", True)  # the torch profiler names the SDPA backend
        if kind in ("graph", "prefill-backends"):
            _graph_case(st, config, dev, batch, prompt, gen, kind, profile)
        elif kind == "hf-eager":
            _hf_case(st, config, dev, batch, prompt, gen, profile)
        else:
            raise ValueError(f"unknown memory case kind {kind!r}")
    return out


def _flags() -> dict:
    import torch

    b = torch.backends.cuda
    flags = {"torch": torch.__version__}
    for name in ("cudnn_sdp_enabled", "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled"):
        fn = getattr(b, name, None)
        flags[name] = fn() if fn else None
    flags["cudnn_version"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return flags


def _graph_case(st: _Stages, config: dict, dev, batch: int, prompt: int, gen: int, kind: str,
                profile: bool = True) -> None:
    """Weights; a whole runner point first (as the runner's first point after loading), then what
    it is made of: static cache, eager prefill (profiled, per backend), capture, one step."""
    import torch

    from calibrate.graph_engine import GraphEngine
    from calibrate.graph_engine import prefill as ge_prefill

    st.begin()
    eng = GraphEngine(config, device=str(dev))
    st.snap("weights")
    if kind == "graph":
        st.begin()
        result = eng.measure(batch, prompt, gen)
        st.snap("a whole runner point (GraphEngine.measure)", peak_mem_gib=result["peak_mem_gib"])
        _clear_cublas(st)
    st.begin()
    state = eng.new_state(batch, prompt + gen)
    st.snap("static cache allocated")
    ids = torch.randint(0, eng.shapes.vocab, (batch, prompt), device=dev)

    def prefill():
        ge_prefill(eng.weights, eng.shapes, ids, state.cache_k, state.cache_v, state.cos, state.sin)

    backends = ("default",) if kind == "graph" else ("math", "efficient", "flash", "cudnn", "default")
    for backend in backends:
        st.begin()
        try:
            with _sdpa_context(backend):
                names = profiled_op_names(prefill, dev, profile)
            st.snap(f"eager prefill ({backend})", sdpa_backend=sdpa_backend_from_ops(names), ops=_interesting(names))
        except Exception as exc:  # noqa: BLE001 - a backend this shape or device lacks
            st.fail(f"eager prefill ({backend})", exc)
    if kind == "prefill-backends":
        return
    st.begin()
    replay = eng._capture(state, prompt)
    st.snap("decode step captured (CUDA graph)" if eng.use_graph else "decode step warmed up (no CUDA graph)")
    st.begin()
    replay()
    st.snap("one decode step")
    eng._graph = None
    del replay, state
    st.begin()
    st.snap("point state freed")
    eng.close()


def _hf_case(st: _Stages, config: dict, dev, batch: int, prompt: int, gen: int, profile: bool = True) -> None:
    from calibrate.hf_eager import HFEagerEngine

    st.begin()
    eng = HFEagerEngine(config, device=str(dev))
    st.snap("weights", attn_implementation=eng.extra_columns().get("attn_implementation"))
    st.begin()
    result = eng.measure(batch, prompt, gen)
    st.snap("a whole runner point (HFEagerEngine.measure)", peak_mem_gib=result["peak_mem_gib"])
    _clear_cublas(st)
    st.begin()
    names = profiled_op_names(lambda: eng._run(batch, prompt, 2), dev, profile)
    st.snap("prefill + one decode step", sdpa_backend=sdpa_backend_from_ops(names), ops=_interesting(names))
    eng.close()


def _case_summary(rec: dict) -> dict:
    """The numbers the question needs, per case: GiB above the weights at the runner's peak, what
    the prefill left allocated, the cuBLAS workspace, and the SDPA backend the prefill used."""
    stages = {s["stage"]: s for s in rec.get("result", {}).get("stages", []) if "error" not in s}
    weights = stages.get("weights", {}).get("allocated_bytes")
    out = {"case": rec["case"], "ok": rec.get("returncode") == 0}
    point = next((s for n, s in stages.items() if n.startswith("a whole runner point")), None)
    if weights is not None and point is not None and point.get("max_allocated_bytes") is not None:
        out["runner_peak_above_weights_gib"] = round((point["max_allocated_bytes"] - weights) / GiB, 4)
        out["left_allocated_after_point_gib"] = round((point["allocated_bytes"] - weights) / GiB, 4)
    if "start" in stages and "weights" in stages and stages["start"].get("allocated_bytes") is not None:
        out["allocated_before_weights_gib"] = round(stages["start"]["allocated_bytes"] / GiB, 4)
        if "ceilings measured, then freed" in stages:
            out["left_by_ceilings_gib"] = round(stages["ceilings measured, then freed"]["allocated_bytes"] / GiB, 4)
    for name, s in stages.items():
        if name.startswith("eager prefill") or name.startswith("prefill +"):
            entry = {"backend": s.get("sdpa_backend")}
            if s.get("allocated_bytes") is not None:
                entry["peak_gib"] = round(s["max_allocated_bytes"] / GiB, 4)
                entry["allocated_after_gib"] = round(s["allocated_bytes"] / GiB, 4)
            out.setdefault("prefill", {})[name] = entry
    if "cuBLAS workspaces cleared" in stages:
        out["cublas_workspace_gib"] = round(stages["cuBLAS workspaces cleared"]["freed_bytes"] / GiB, 4)
    return out


def memory_probe(device: str, cases: tuple[dict, ...], out_path: Path, deadline: float | None, jobs: int,
                 case_timeout_s: float, progress: Callable[[str], None]) -> dict:
    """Run every case in a fresh Python process (``jobs`` at a time); writes ``out_path``."""
    from calibrate.timing import utc_now

    result: dict = {"probe": "memory", "timestamp": utc_now(), "device": device, "cases": [], "summary": []}
    tmp = out_path.parent / f".{out_path.stem}-cases"
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    def one(i_case):
        i, case = i_case
        case = {"device": device, **case}
        if deadline is not None and time.monotonic() > deadline:
            return {"case": case, "returncode": None, "error": "budget reached before this case started"}
        path = tmp / f"case-{i}.json"
        timeout = case_timeout_s if deadline is None else max(10.0, min(case_timeout_s, deadline + 30 - time.monotonic()))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        t = time.monotonic()
        rec: dict = {"case": case}
        try:
            proc = subprocess.run([sys.executable, "-m", "calibrate.probes", "--memory-case", json.dumps(case),
                                   "--case-out", str(path)], cwd=REPO_ROOT, env=env, capture_output=True,
                                  text=True, timeout=timeout, check=False)
            rec["returncode"] = proc.returncode
            if proc.returncode != 0:
                rec["stderr_tail"] = proc.stderr[-3000:]
        except subprocess.TimeoutExpired:
            rec["returncode"] = None
            rec["error"] = f"timed out after {timeout:.0f} s"
        rec["wall_s"] = round(time.monotonic() - t, 2)
        if path.exists():
            rec["result"] = json.loads(path.read_text())
        return rec

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for rec in pool.map(one, list(enumerate(cases))):
            result["cases"].append(rec)
            result["summary"].append(_case_summary(rec))
            progress(f"memory: {rec['case']['model']} {rec['case']['kind']}"
                     f"{' ceilings first' if rec['case'].get('ceilings_first') else ''}"
                     f"{' cuDNN off' if rec['case'].get('cudnn') is False else ''}: "
                     f"{'ok' if rec.get('returncode') == 0 else 'FAILED'} ({rec.get('wall_s', 0)} s)")
            _write(out_path, result)
    result["wall_s"] = round(time.monotonic() - t0, 2)
    _write(out_path, result)
    for f in tmp.glob("case-*.json"):
        f.unlink()
    tmp.rmdir()
    return result


# ---- driver ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SustainedGrid:
    m: int
    n: int
    k: int
    #: ("load" | "idle", seconds) in order: the GEMM runs back to back under load, nothing runs idle
    phases: tuple[tuple[str, float], ...]
    window_calls: int  # GEMMs between two synchronised timestamps
    clock_sample_ms: int  # nvidia-smi's sampling period (0: no sampling)
    #: (model, batch, prompt tokens): the graph engine's prefill of the model, forwards back to back
    #: (each its own window), through ``prefill_phases``
    prefills: tuple[tuple[str, int, int], ...] = ()
    prefill_phases: tuple[tuple[str, float], ...] = ()


#: one large bf16 GEMM run back to back for 12 s, then bursts after idle gaps: the matmul rate and the
#: SM clock against time under load (the ceilings and the gemm probe time short bursts, a prefill of
#: seconds runs at the clock the card holds under its power limit)
FULL_SUSTAINED = SustainedGrid(m=8192, n=8192, k=8192,
                               phases=(("idle", 3.0), ("load", 12.0), ("idle", 1.0), ("load", 3.0), ("idle", 4.0),
                                       ("load", 3.0), ("idle", 10.0), ("load", 3.0)),
                               window_calls=8, clock_sample_ms=50,
                               prefills=(("qwen2.5-7b", 4, 512), ("llama-3.1-8b", 16, 2048)),
                               prefill_phases=(("idle", 3.0), ("load", 10.0), ("idle", 2.0), ("load", 3.0)))
TINY_SUSTAINED = SustainedGrid(m=64, n=64, k=64, phases=(("idle", 0.1), ("load", 0.3), ("idle", 0.1), ("load", 0.2)),
                               window_calls=4, clock_sample_ms=0, prefills=(("tiny-llama", 2, 16),),
                               prefill_phases=(("idle", 0.1), ("load", 0.3)))


def sustained_probe(device: str, grid: SustainedGrid, out_path: Path, deadline: float | None,
                    progress: Callable[[str], None]) -> dict:
    """Run one GEMM back to back through ``grid.phases``, then each of ``grid.prefills`` (the graph
    engine's prefill of a model, forward after forward) through ``grid.prefill_phases``; each window
    (``window_calls`` GEMMs, or one forward) is timed from the host between synchronisations (its
    length and its end on the probe's clock, a series name on each), and nvidia-smi samples the SM
    clock, power and temperature alongside. Writes ``out_path``."""
    import shutil
    import subprocess

    import torch
    import torch.nn.functional as F

    from calibrate.timing import synchronize, torch_device

    dev = torch_device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    result = _new_result("sustained-matmul", dev, grid,
                         "F.linear(x (M, K), W (N, K)) back to back; host time after a synchronisation every "
                         "window_calls calls; nvidia-smi --query-gpu clocks.sm,power.draw,temperature.gpu -lms "
                         "alongside (its own timestamps, converted to the probe's clock)",
                         dtype=str(dtype).removeprefix("torch."), windows=[], clocks=[])
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    smi = None
    if grid.clock_sample_ms and dev.type == "cuda" and shutil.which("nvidia-smi"):
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,noheader,nounits", f"-lms={grid.clock_sample_ms}",
                                f"--id={dev.index or 0}"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        import threading

        def read_clocks():
            for line in smi.stdout:
                try:
                    clock, power, temp = (float(x) for x in line.strip().split(","))
                except ValueError:
                    continue
                result["clocks"].append({"t_s": time.monotonic() - t0, "sm_mhz": clock, "power_w": power,
                                         "temp_c": temp})

        threading.Thread(target=read_clocks, daemon=True).start()
    flop = 2.0 * grid.m * grid.n * grid.k * grid.window_calls

    def run_phases(series: str, phases, window, flop_per_window: float | None) -> bool:
        """``window()`` back to back through ``phases``; False when the budget ran out."""
        for i, (kind, seconds) in enumerate(phases):
            if _out_of_budget(deadline, result, out_path, progress, "sustained-matmul", f"{series} phase {i}"):
                return False
            start = time.monotonic()
            if kind == "idle":
                time.sleep(seconds)
                continue
            last = start
            while last - start < seconds:
                window()
                now = time.monotonic()
                result["windows"].append({"series": series, "phase": i, "t_s": now - t0, "load_s": now - start,
                                          "seconds": now - last,
                                          "flop_per_s": None if flop_per_window is None else flop_per_window / (now - last)})
                last = now
            progress(f"sustained-matmul: {series} phase {i} ({kind} {seconds} s) done")
        _write(out_path, result)
        return True

    try:
        with torch.inference_mode():
            x = torch.randn(grid.m, grid.k, device=dev, dtype=dtype, generator=gen)
            w = torch.randn(grid.n, grid.k, device=dev, dtype=dtype, generator=gen)
            for _ in range(3):  # kernel chosen, memory cached
                F.linear(x, w)
            synchronize(dev)

            def gemms():
                for _ in range(grid.window_calls):
                    F.linear(x, w)
                synchronize(dev)

            going = run_phases("gemm", grid.phases, gemms, flop)
            del x, w
            for name, batch, prompt in grid.prefills if going else ():
                from calibrate.configs import load_model_config
                from calibrate.graph_engine import GraphEngine
                from calibrate.timing import free_memory

                engine = GraphEngine(load_model_config(name), device=str(dev))
                st = engine.new_state(batch, prompt + 1)
                engine._prefill(st, batch, prompt)  # kernels chosen, memory cached
                going = run_phases(f"prefill {name} {batch}x{prompt}", grid.prefill_phases,
                                   lambda: engine._prefill(st, batch, prompt), None)
                del st, engine
                free_memory()
                if not going:
                    break
    finally:
        if smi is not None:
            smi.terminate()
            try:
                smi.wait(timeout=5)
            except Exception:  # noqa: BLE001
                smi.kill()
    return _finished(result, out_path, t0)


def _new_result(probe: str, dev, grid, method: str, **extra) -> dict:
    """A probe's result as it starts: what ran where (environment, grid, timestamp), how it was
    timed, ``extra`` fields, and empty points, errors and stop."""
    from calibrate.timing import environment, utc_now

    return {"probe": probe, "timestamp": utc_now(), **environment(dev), "grid": asdict(grid), **extra,
            "method": method, "points": [], "errors": [], "stopped": None}


def _out_of_budget(deadline: float | None, result: dict, out_path: Path, progress, probe: str, where: str) -> bool:
    """Past ``deadline``: the result says where it stopped, is written, and the caller returns it."""
    if deadline is None or time.monotonic() <= deadline:
        return False
    result["stopped"] = f"budget reached before {where}"
    _write(out_path, result)
    progress(f"{probe}: {result['stopped']}")
    return True


def _finished(result: dict, out_path: Path, t0: float) -> dict:
    """A probe that ran its whole grid: its wall time written with the rest."""
    result["wall_s"] = round(time.monotonic() - t0, 2)
    _write(out_path, result)
    return result


def _write(path: Path, data: dict) -> None:
    from roofline.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def run_probes(out_dir: Path, what: list[str], device: str = "cuda", budget_s: float | None = 90.0,
               tiny: bool | None = None, jobs: int = 4, progress: Callable[[str], None] = print,
               kernels_points: tuple | None = None, prefill_kernels_models: tuple | None = None,
               chunk_rows: int | None = None) -> dict[str, Path]:
    """Run the probes named in ``what``; returns {probe: json path}. An error in one probe is
    written to its file (``error``, ``traceback``) and the next probe still runs.
    ``kernels_points``: the kernels probe's (model, layers, batch, context) points instead of its grid's.
    ``chunk_rows``: the chunk probe's cache rows (the loop's max_model_len T) instead of its grid's
    ``prefill_kernels_models``: the prefill-kernels probe at these catalog models' own layers only
    (its grid's layer cuts, batches and prompt; evidence, not the generic shapes the fit reads)."""
    unknown = [w for w in what if w not in PROBES]
    if unknown:
        from roofline.errors import RooflineError

        raise RooflineError(f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)}")
    from calibrate.runner import check_device

    device = check_device(device)
    tiny = (not device.startswith("cuda")) if tiny is None else tiny
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    deadline = None if budget_s is None else time.monotonic() + budget_s
    paths = {}
    # memory first: its cases run in their own processes, in parallel, in a fixed time; the
    # attention probe then takes what is left of the budget
    for name in [p for p in PROBES if p in what]:
        path = out_dir / f"probe-{name}.json"
        t0 = time.monotonic()
        try:
            if name == "attention":
                attention_probe(device, TINY_ATTENTION if tiny else FULL_ATTENTION, path, deadline, progress)
            elif name in ATTENTION_SHAPE_GRIDS:  # the decode attention alone at generic shapes
                attention_probe(device, TINY_ATTENTION_GROUPS if tiny else ATTENTION_SHAPE_GRIDS[name], path, deadline,
                                progress)
            elif name == "attention-table":
                attention_table_probe(device, TINY_ATTENTION_TABLE if tiny else FULL_ATTENTION_TABLE, path, deadline,
                                      progress)
            elif name == "grouped-mm":
                grouped_mm_probe(device, TINY_GROUPED_MM if tiny else FULL_GROUPED_MM, path, deadline, progress)
            elif name == "index":
                from calibrate.index_probe import FULL_INDEX, TINY_INDEX, index_probe

                index_probe(device, TINY_INDEX if tiny else FULL_INDEX, path, deadline, progress)
            elif name == "sustained-matmul":
                sustained_probe(device, TINY_SUSTAINED if tiny else FULL_SUSTAINED, path, deadline, progress)
            elif name == "gemm":
                gemm_probe(device, TINY_GEMM if tiny else FULL_GEMM, path, deadline, progress)
            elif name == "chunk":
                grid = TINY_CHUNK if tiny else FULL_CHUNK
                chunk_probe(device, replace(grid, rows=chunk_rows) if chunk_rows else grid, path, deadline, progress)
            elif name == "loop-attention":
                loop_attention_probe(device, TINY_LOOP_ATTENTION if tiny else FULL_LOOP_ATTENTION, path, deadline,
                                     progress)
            elif name == "layers":
                layers_probe(device, TINY_LAYERS if tiny else FULL_LAYERS, path, deadline, progress)
            elif name == "layer-features":
                layers_probe(device, TINY_LAYER_FEATURES if tiny else FULL_LAYER_FEATURES, path, deadline, progress,
                             probe="layer-features", count_kernels=True)
            elif name == "masked-attention":
                masked_attention_probe(device, TINY_MASKED_ATTENTION if tiny else FULL_MASKED_ATTENTION, path,
                                       deadline, progress)
            elif name == "prefill-kernels":
                grid = TINY_PREFILL_KERNELS if tiny else FULL_PREFILL_KERNELS
                if prefill_kernels_models:
                    labels = {pt[0]: pt for pt in grid.points}  # a grid point by its label, else a catalog model's layers
                    grid = replace(grid, points=tuple(labels.get(m, (m, m, (), "model")) for m in prefill_kernels_models))
                prefill_kernels_probe(device, grid, path, deadline, progress)
            elif name == "kernels":
                grid = TINY_KERNELS if tiny else FULL_KERNELS
                if kernels_points:
                    grid = KernelsGrid(points=tuple(kernels_points), reps=grid.reps, top=max(grid.top, 40))  # points asked for: more names
                kernels_probe(device, grid, path, deadline, progress)
            elif name == "moe":
                moe_probe(device, TINY_MOE if tiny else FULL_MOE, path, deadline, progress)
            elif name == "prefill-attention":
                prefill_attention_probe(device, TINY_PREFILL_ATTENTION if tiny else FULL_PREFILL_ATTENTION, path,
                                        deadline, progress)
            else:
                memory_probe(device, TINY_MEMORY_CASES if tiny else FULL_MEMORY_CASES, path, deadline, jobs,
                             case_timeout_s=60.0 if tiny else 150.0, progress=progress)
        except Exception as exc:  # noqa: BLE001 - never crash the job: write what is known
            progress(f"{name}: FAILED: {_short(exc)}")
            previous = json.loads(path.read_text()) if path.exists() else {"probe": name}
            _write(path, {**previous, "error": _short(exc), "traceback": traceback.format_exc()})
        progress(f"{name}: {path} ({time.monotonic() - t0:.1f} s)")
        paths[name] = path
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for probe-<name>.json")
    ap.add_argument("--what", default="attention,memory", help=f"comma list of {', '.join(PROBES)}")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=90.0, help="stop starting new work after this")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes (the default on the CPU)")
    ap.add_argument("--jobs", type=int, default=4, help="memory cases run at once (each its own process)")
    ap.add_argument("--prefill-kernels-models", help="the prefill-kernels probe at these points only (comma list: a "
                    "grid point's label, e.g. 'mla base', or a catalog model's own layers, evidence beside the generic "
                    "shapes)")
    ap.add_argument("--kernels-points", help="the kernels probe's points instead of its grid: "
                    "MODEL:LAYERS:BATCH:CONTEXT,... (a model's decode step cut to LAYERS layers, BATCH sequences, "
                    "a static cache of CONTEXT positions)")
    ap.add_argument("--chunk-rows", type=int, help="the chunk probe's cache rows a slot (the serving loop's "
                    "max_model_len; default: the grid's, 1,280 full, 48 tiny)")
    ap.add_argument("--memory-case", help=argparse.SUPPRESS)
    ap.add_argument("--case-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_case:  # one memory case, in this fresh process
        case = json.loads(args.memory_case)
        out: dict = {"case": case}
        try:
            run_memory_case(case, out)
        except Exception as exc:  # noqa: BLE001 - write what the stages got to, then fail
            out.update(error=_short(exc), traceback=traceback.format_exc())
            Path(args.case_out).write_text(json.dumps(out, default=str))
            raise
        Path(args.case_out).write_text(json.dumps(out, default=str))
        return 0
    if not args.out:
        ap.error("--out is required")
    what = [w.strip() for w in args.what.split(",") if w.strip()]
    from roofline.errors import RooflineError

    points = None
    if args.kernels_points:
        try:
            points = [(m, int(lay), int(b), int(c)) for m, lay, b, c in
                      (x.strip().split(":") for x in args.kernels_points.split(",") if x.strip())]
        except ValueError:
            print(f"error: --kernels-points: give MODEL:LAYERS:BATCH:CONTEXT,..., not {args.kernels_points!r}",
                  file=sys.stderr)
            return 2

    if args.chunk_rows is not None and args.chunk_rows < 1:
        print(f"error: --chunk-rows must be a positive whole number, not {args.chunk_rows}", file=sys.stderr)
        return 2
    try:
        paths = run_probes(Path(args.out), what, args.device, args.budget_s, True if args.tiny else None, args.jobs,
                           chunk_rows=args.chunk_rows,
                           progress=lambda m: print(m, flush=True), kernels_points=points,
                           prefill_kernels_models=tuple(m.strip() for m in (args.prefill_kernels_models or "").split(",")
                                                        if m.strip()) or None)
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = [n for n, p in paths.items() if "error" in json.loads(p.read_text())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
