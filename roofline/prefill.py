"""The prefill: time to first token for a static batch whose prompts are processed together.

A prefill of ``batch`` prompts of ``prompt_tokens`` each runs every weight matmul on
batch x prompt rows, causal attention over the prompt (prompt(prompt+1)/2 query-key pairs per
sequence and head; a windowed layer's query sees at most its window), and the LM head only for
the positions whose logits are kept (``logits="last"``: one per sequence, as ``logits_to_keep=1``;
``"all"``: every position). It reads the weights once per forward pass and writes the prompt's
KV cache. An engine that prefills at most ``prefill_chunk_tokens`` tokens per forward (the
calibration's; whole sequences, at least one) runs the batch as consecutive forwards of as many
sequences as fit: TTFT is their sum. Priced by roofline.step.

A card whose calibration holds its rate against time under load (``Calibration.matmul_load_curve``,
the sustained-matmul probe's) runs the prefill's matmuls priced at the fitted efficiency at that
rate's average over the prefill, which starts on a rested card (the rates probes measured, the
attention's and the routed experts', are held as timed): the clock holds its boost for the first
~0.1 s of load, then falls (the H200's prefill ~7% slower, ~9% at its power limit).
"""

from __future__ import annotations

from functools import lru_cache

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


@lru_cache(maxsize=16)
def _load_integral(curve: tuple) -> tuple:
    """(times, rates, the integral of the rate from 0 to each time): the curve linear between its
    points and its first value from 0 to the first."""
    ts = np.array([0.0] + [t for t, _ in curve], dtype=float)
    rs = np.array([curve[0][1]] + [r for _, r in curve], dtype=float)
    integral = np.concatenate([[0.0], np.cumsum(np.diff(ts) * 0.5 * (rs[1:] + rs[:-1]))])
    return ts, rs, integral


def load_average(curve, seconds):
    """The average of ``curve`` (Calibration.matmul_load_curve: (seconds of load, relative rate))
    over the first ``seconds`` of load: linear between its points, its first value before the
    first, its last after the last (its first value at 0 s)."""
    ts, rs, integral = _load_integral(tuple(tuple(p) for p in curve))
    t = np.asarray(seconds, dtype=float)
    i = np.clip(np.searchsorted(ts, t, side="right") - 1, 0, len(ts) - 1)
    nxt = np.minimum(i + 1, len(ts) - 1)
    span = ts[nxt] - ts[i]
    r_t = np.where(span > 0, rs[i] + (rs[nxt] - rs[i]) * (t - ts[i]) / np.where(span > 0, span, 1.0), rs[i])
    total = integral[i] + 0.5 * (rs[i] + r_t) * (t - ts[i])
    return np.where(t > 0, total / np.where(t > 0, t, 1.0), float(rs[0]))


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
    curve = model.calibration.matmul_load_curve
    if curve:  # the matmuls priced at the fitted efficiency run at the clock's average over the pass
        # (three fixed-point steps); the rates probes measured (attention's, the routed experts') were
        # timed under the probes' own load and are held
        fitted = full * model.prefill_fitted_compute_s(work) + np.where(
            has_tail, model.prefill_fitted_compute_s(tail_work), 0.0)
        burst = np.minimum(out["compute_s"], fitted)
        other = out["ttft_s"] - burst
        ttft = out["ttft_s"]
        for _ in range(3):
            ttft = other + burst / load_average(curve, ttft)
        out["compute_s"] = out["compute_s"] + (ttft - out["ttft_s"])
        out["ttft_s"] = ttft
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
