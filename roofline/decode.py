"""Decode over a whole generation: TPOT as the mean of the generation's decode steps.

Each step is priced by the one pass model (roofline.step.StepModel.pass_s); this module says
which steps a generation of ``gen`` tokens runs and averages them. Everything takes numpy arrays
(or scalars) for batch and token counts and broadcasts; nothing loops over batch sizes.
"""

from __future__ import annotations

import numpy as np

from roofline.step import StepModel, bound_index, decode_work


def decode_contexts(prompt_tokens, gen_tokens, kv_cache: str, samples: int = 16):
    """Context lengths at which to evaluate decode steps, and their weights (summing to 1).

    Decode step i (i = 1 .. gen-1) attends to prompt + i tokens with a dynamic cache, and to the
    whole preallocated prompt + gen cache with a static one. Steps are split into ``samples``
    equal blocks evaluated at their mean context: exact wherever step time is linear in context.
    Returns arrays shaped (samples, *broadcast shape).
    """
    prompt = np.asarray(prompt_tokens, dtype=float)
    gen = np.asarray(gen_tokens, dtype=float)
    steps = np.maximum(gen - 1.0, 1.0)
    k = np.arange(samples, dtype=float).reshape((samples,) + (1,) * np.broadcast(prompt, gen).ndim)
    # block k covers steps (k*steps/samples, (k+1)*steps/samples]; mean step index there:
    mean_step = (k + 0.5) * steps / samples + 0.5
    if kv_cache == "static":
        context = np.broadcast_to(prompt + gen, mean_step.shape)
    else:
        context = prompt + mean_step
    weights = np.full(context.shape, 1.0 / samples)
    return context, weights


def block_spread(step_s, samples: int = 16) -> float:
    """How far ``decode_contexts``' blocks can put the mean of a generation's steps (``step_s``, one
    per step in order) off the step-by-step mean, at most: each block is priced at a context inside
    it, so it is off its own steps' mean by at most the price's spread (max - min) over them; the
    blocks' spreads summed over ``samples``. Zero where the price is constant; where it steps or
    bends within a block, that much (docs/method.md section 6; benchmarks/tpot_blocks_error.py)."""
    step_s = np.asarray(step_s, dtype=float)
    n, total = len(step_s), 0.0
    for k in range(samples):
        lo, hi = int(np.floor(k * n / samples)), int(np.ceil((k + 1) * n / samples))
        block = step_s[lo:max(hi, lo + 1)]
        total += float(block.max() - block.min())
    return total / samples


def decode_step(model: StepModel, batch, context_tokens) -> dict:
    """One decode step of ``batch`` sequences each attending to ``context_tokens`` tokens (each
    windowed layer to at most its window): its time and where it goes, and the lesson's counts
    (bytes counted, matmul and attention FLOPs)."""
    batch = np.asarray(batch, dtype=float)
    context = np.asarray(context_tokens, dtype=float)
    windowed = None if model.window is None else batch * np.minimum(context, model.window)
    work = decode_work(batch, batch * context, windowed)
    out = model.pass_breakdown(work)
    shape = out["step_s"].shape
    out["bytes_counted"] = np.broadcast_to(model.bytes_counted(work), shape)
    out["linear_flop"] = np.broadcast_to(model.linear_flop(work), shape)
    out["attention_flop"] = np.broadcast_to(model.attention_flop(work), shape)
    return out


#: mean_decode prices a long row of scenarios (a sweep's batches) this many at a time: each block's
#: (samples x block) arrays stay in the CPU's cache, which makes the whole sweep of 4,096 batches about a
#: quarter faster (docs/serving.md, "Speed") with the same numbers bit for bit. A row one past a whole number
#: of blocks joins the last block: numpy averages a lone scenario's samples through another routine
#: (a dot product, not a matrix-vector one), whose last bit can differ.
BLOCK_SCENARIOS = 1024


def mean_decode(model: StepModel, batch, prompt_tokens, gen_tokens, kv_cache: str) -> dict:
    """Decode quantities averaged over the generation (TPOT is the mean step time)."""
    shape = np.broadcast_shapes(np.shape(batch), np.shape(prompt_tokens), np.shape(gen_tokens))
    batch = np.broadcast_to(np.asarray(batch, dtype=float), shape)
    prompt = np.broadcast_to(np.asarray(prompt_tokens, dtype=float), shape)
    gen = np.broadcast_to(np.asarray(gen_tokens, dtype=float), shape)
    if len(shape) == 1 and shape[0] > BLOCK_SCENARIOS + 1:
        starts = list(range(0, shape[0], BLOCK_SCENARIOS))
        if shape[0] - starts[-1] == 1:
            starts.pop()
        ends = starts[1:] + [shape[0]]
        blocks = [_mean_decode(model, batch[a:b], prompt[a:b], gen[a:b], kv_cache) for a, b in zip(starts, ends)]
        return {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}
    return _mean_decode(model, batch, prompt, gen, kv_cache)


def _mean_decode(model: StepModel, batch, prompt, gen, kv_cache: str) -> dict:
    """mean_decode on arrays of one shape."""
    shape = batch.shape
    context, weights = decode_contexts(prompt, gen, kv_cache)
    parts = decode_step(model, batch[None, ...], context)
    w = weights[(slice(None),) + (0,) * (weights.ndim - 1)]  # equal weights: one per sample
    out = {k: np.tensordot(w, np.broadcast_to(v, context.shape[:1] + shape), axes=1) for k, v in parts.items()}
    out["bound_index"] = bound_index(out["overhead_s"], out["memory_s"], out["compute_s"])
    out["mean_context_tokens"] = np.sum(context * weights, axis=0)
    return out


def mean_tpot_s(model: StepModel, batch, prompt_tokens, gen_tokens, kv_cache: str):
    """TPOT alone (mean_decode's step_s) for callers that need nothing else (bend, the fit)."""
    return mean_decode(model, batch, prompt_tokens, gen_tokens, kv_cache)["step_s"]
