"""The prefill: time to first token for a static batch whose prompts are processed together.

A prefill of ``batch`` prompts of ``prompt_tokens`` each runs every weight matmul on
batch x prompt rows, causal attention over the prompt (prompt(prompt+1)/2 query-key pairs per
sequence and head; a windowed layer's query sees at most its window), and the LM head only for
the positions whose logits are kept (``logits="last"``: one per sequence, as ``logits_to_keep=1``;
``"all"``: every position). It reads the weights once per forward pass and writes the prompt's
KV cache. An engine that prefills at most ``prefill_chunk_tokens`` tokens per forward (the
calibration's; whole sequences, at least one) runs the batch as consecutive forwards of as many
sequences as fit: TTFT is their sum. Priced by roofline.step.
"""

from __future__ import annotations

import numpy as np

from roofline.step import StepModel, bound_index, causal_pairs, prefill_work

LOGITS = ("last", "all")


def logit_positions(batch, prompt_tokens, logits: str):
    """Positions whose logits a prefill computes: one per sequence, or every position."""
    if logits == "last":
        return np.asarray(batch, dtype=float)
    return np.asarray(batch, dtype=float) * np.asarray(prompt_tokens, dtype=float)


def static_prefill_work(batch, prompt_tokens, logits: str = "last", window=None, masked=None):
    """The PassWork of prefilling ``batch`` prompts of ``prompt_tokens`` each in one forward.

    ``masked`` (StepModel.masked_prefill): the engine runs its windowed layers' prefill attention,
    where the window is shorter than the prompt, and every layer's with attention sinks, as a
    masked SDPA over the whole (P, P [+1]) square; those pairs count ``factor`` causal pairs each
    (the masked path's time per pair in causal pairs of the model's width)."""
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    pairs = batch * causal_pairs(prompt)
    windowed = None if window is None else batch * causal_pairs(prompt, window)
    if masked is not None:
        factor, sinks = masked
        if sinks:
            pairs = batch * prompt * (prompt + 1.0) * factor
            windowed = None if window is None else pairs
        elif window is not None:
            windowed = np.where(prompt > window, batch * prompt * prompt * factor, windowed)
    return prefill_work(batch * prompt, pairs, logit_positions(batch, prompt, logits), windowed)


def chunk_sequences(model: StepModel, batch, prompt_tokens):
    """Sequences per prefill forward: the whole batch, or as many as the engine's token budget
    holds (at least one)."""
    batch = np.asarray(batch, dtype=float)
    chunk = model.calibration.prefill_chunk_tokens
    if chunk is None:
        return batch
    per = np.maximum(1.0, np.floor(chunk / np.asarray(prompt_tokens, dtype=float)))
    return np.minimum(batch, per)


def prefill(model: StepModel, batch, prompt_tokens, logits: str = "last") -> dict:
    """TTFT of a static batch: the prefill's time (the sum of its forwards), components, work and
    the largest term."""
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    per = chunk_sequences(model, batch, prompt)
    full = np.floor(batch / per)  # forwards of ``per`` sequences
    rest = batch - full * per  # and one of the remaining sequences, if any
    work, tail_work = (static_prefill_work(n, prompt, logits, model.window, model.masked_prefill) for n in (per, rest))
    head, tail = model.pass_breakdown(work), model.pass_breakdown(tail_work)
    has_tail = rest > 0
    out = {k: full * v + np.where(has_tail, tail[k], 0.0) for k, v in head.items()}
    out["ttft_s"] = out.pop("step_s")
    # the elementwise kernels' traffic: the fitted coefficient's bytes, and the probe-priced
    # kernels' time at the calibrated bandwidth
    act = batch * prompt * (model.prefill_act_bytes_per_token + model.prefill_elementwise_s_per_token
                            * model.calibration.bandwidth_efficiency * model.bandwidth_bytes_per_s)
    out["bytes"] = full * model.bytes_counted(work) + np.where(has_tail, model.bytes_counted(tail_work), 0.0) + act
    out["flop"] = full * (model.linear_flop(work) + model.attention_flop(work)) \
        + np.where(has_tail, model.linear_flop(tail_work) + model.attention_flop(tail_work), 0.0)
    out["forwards"] = full + has_tail
    out["bound_index"] = bound_index(out["overhead_s"], out["memory_s"], out["compute_s"])
    return out
