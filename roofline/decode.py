"""Bytes, FLOPs and time of a forward pass, and of one decode step in particular.

Everything takes numpy arrays (or scalars) for batch and token counts and broadcasts; nothing
loops over batch sizes. A pass's time is

    overhead  (+)q  ( bytes / (eff_bw * bandwidth)  (+)p  FLOPs / (eff_c * peak) )

where ``a (+)p b = (a^p + b^p)^(1/p)``: p = 1 adds the terms, a large p takes their max (the
pure roofline). The calibration supplies the overheads, efficiencies and exponents.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roofline.calibration import MAX_EXPONENT, Calibration
from roofline.hardware import CardProfile
from roofline.model_spec import ModelSpec
from roofline.units import dtype_bytes

BOUNDS = np.array(["overhead", "memory", "compute"])


def pnorm(a, b, p):
    """(a^p + b^p)^(1/p) for non-negative arrays: a sum at p = 1, exactly max(a, b) at
    p >= MAX_EXPONENT, a smooth blend between."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if p <= 1.0:
        return a + b
    hi = np.maximum(a, b)
    if p >= MAX_EXPONENT:
        return hi
    lo = np.minimum(a, b)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * np.exp(np.log1p(ratio**p) / p)


@dataclass(frozen=True)
class StepModel:
    """The cost model of one model on one card under one calibration; build once, evaluate often."""

    spec: ModelSpec
    card: CardProfile
    calibration: Calibration
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    # derived scalars
    weight_read_bytes: float = field(init=False)
    kv_bytes_per_token: float = field(init=False)
    bandwidth_bytes_per_s: float = field(init=False)
    peak_flop_per_s: float = field(init=False)

    def __post_init__(self):
        cal = self.calibration
        set_ = object.__setattr__
        set_(self, "weight_read_bytes", self.spec.decode_weight_bytes(self.weight_dtype, self.act_dtype))
        set_(self, "kv_bytes_per_token", self.spec.kv_bytes_per_token(self.kv_dtype))
        set_(self, "bandwidth_bytes_per_s", cal.measured_bandwidth_bytes_per_s or self.card.bandwidth_bytes_per_s)
        set_(self, "peak_flop_per_s", cal.measured_peak_flop_per_s or self.card.peak_flop_per_s)
        dtype_bytes(self.act_dtype)  # validate

    @property
    def balance_point_flop_per_byte(self) -> float:
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    @property
    def decode_overhead_s(self) -> float:
        cal = self.calibration
        return cal.step_overhead_s + cal.layer_overhead_s * self.spec.num_hidden_layers

    # ---- work of a pass ----
    def decode_work(self, batch, kv_tokens_read, kv_tokens_written=None):
        """Bytes and FLOPs of one decode step of ``batch`` sequences that together attend to
        ``kv_tokens_read`` cached tokens. Returns (bytes_counted, bytes_moved, linear_flop, attention_flop):
        ``bytes_counted`` holds weights and KV once (the lesson's count), ``bytes_moved`` applies the
        calibration's KV traffic factor."""
        batch = np.asarray(batch, dtype=float)
        kv_read = np.asarray(kv_tokens_read, dtype=float)
        kv_written = batch if kv_tokens_written is None else np.asarray(kv_tokens_written, dtype=float)
        kv_read_bytes = kv_read * self.kv_bytes_per_token
        kv_write_bytes = kv_written * self.kv_bytes_per_token
        counted = self.weight_read_bytes + kv_read_bytes
        moved = self.weight_read_bytes + self.calibration.kv_traffic_factor * kv_read_bytes + kv_write_bytes
        linear = batch * self.spec.linear_flop_per_token
        attention = kv_read * self.spec.attention_flop_per_context_token
        return counted, moved, linear, attention

    def combine(self, overhead_s, memory_s, compute_s):
        """Total time of a pass from its three terms."""
        cal = self.calibration
        return pnorm(overhead_s, pnorm(memory_s, compute_s, cal.roofline_exponent), cal.overhead_exponent)

    def decode_step(self, batch, context_tokens):
        """One decode step of ``batch`` sequences each attending to ``context_tokens`` tokens."""
        batch = np.asarray(batch, dtype=float)
        kv_read = batch * np.asarray(context_tokens, dtype=float)
        counted, moved, linear, attention = self.decode_work(batch, kv_read)
        cal = self.calibration
        memory_s = moved / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        compute_s = (linear + attention) / (cal.compute_efficiency * self.peak_flop_per_s)
        overhead_s = np.full(np.broadcast(batch, kv_read).shape, self.decode_overhead_s)
        return {
            "step_s": self.combine(overhead_s, memory_s, compute_s),
            "overhead_s": overhead_s,
            "memory_s": memory_s,
            "compute_s": compute_s,
            "bytes_counted": counted,
            "bytes_moved": moved,
            "linear_flop": linear,
            "attention_flop": attention,
        }

    def mixed_step_s(self, decode_batch, kv_tokens_read, prefill_tokens=0.0, prefill_pairs=0.0, prefill_sequences=0.0):
        """One iteration of continuous batching: ``decode_batch`` sequences decode one token each
        (attending to ``kv_tokens_read`` cached tokens in total) while ``prefill_sequences``
        newcomers' ``prefill_tokens`` prompt tokens are prefilled in the same pass
        (``prefill_pairs`` causal query-key pairs among them; the LM head runs only on each
        newcomer's last position, as in ``prefill``). Prefill FLOPs run at the prefill's
        efficiency; a pass that prefills pays the larger of the decode and prefill overheads.
        Scalars or arrays."""
        cal, spec = self.calibration, self.spec
        decode_batch = np.asarray(decode_batch, dtype=float)
        prefill_tokens = np.asarray(prefill_tokens, dtype=float)
        kv_read = np.asarray(kv_tokens_read, dtype=float)
        moved = self.weight_read_bytes + self.kv_bytes_per_token * (
            cal.kv_traffic_factor * kv_read + decode_batch + prefill_tokens
        )
        memory_s = moved / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        decode_flop = decode_batch * spec.linear_flop_per_token + kv_read * spec.attention_flop_per_context_token
        prefill_flop = (
            prefill_tokens * spec.body_linear_flop_per_token
            + np.asarray(prefill_sequences, dtype=float) * 2.0 * spec.lm_head_params
            + np.asarray(prefill_pairs, dtype=float) * spec.attention_flop_per_context_token
        )
        compute_s = decode_flop / (cal.compute_efficiency * self.peak_flop_per_s) + prefill_flop / (
            cal.prefill_compute_efficiency * self.peak_flop_per_s
        )
        overhead_s = np.where(prefill_tokens > 0, max(self.decode_overhead_s, cal.prefill_overhead_s), self.decode_overhead_s)
        return pnorm(overhead_s, pnorm(memory_s, compute_s, cal.roofline_exponent), cal.overhead_exponent)

    def decode_step_s(self, batch, kv_tokens_read):
        """Step time only, for a batch that attends to ``kv_tokens_read`` tokens in total
        (sequences of different lengths: the sum of their contexts). Fast path for simulators."""
        _, moved, linear, attention = self.decode_work(batch, kv_tokens_read)
        cal = self.calibration
        memory_s = moved / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        compute_s = (linear + attention) / (cal.compute_efficiency * self.peak_flop_per_s)
        return pnorm(self.decode_overhead_s, pnorm(memory_s, compute_s, cal.roofline_exponent), cal.overhead_exponent)


def bound_index(overhead_s, memory_s, compute_s):
    """0, 1 or 2: which of overhead, memory and compute time is largest (BOUNDS)."""
    return np.where(overhead_s >= np.maximum(memory_s, compute_s), 0, np.where(memory_s >= compute_s, 1, 2))


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


def mean_decode(model: StepModel, batch, prompt_tokens, gen_tokens, kv_cache: str):
    """Decode quantities averaged over the generation (TPOT is the mean step time)."""
    shape = np.broadcast_shapes(np.shape(batch), np.shape(prompt_tokens), np.shape(gen_tokens))
    batch = np.broadcast_to(np.asarray(batch, dtype=float), shape)
    prompt = np.broadcast_to(np.asarray(prompt_tokens, dtype=float), shape)
    gen = np.broadcast_to(np.asarray(gen_tokens, dtype=float), shape)
    context, weights = decode_contexts(prompt, gen, kv_cache)
    parts = model.decode_step(batch[None, ...], context)
    w = weights[(slice(None),) + (0,) * (weights.ndim - 1)]  # equal weights: one per sample
    out = {k: np.tensordot(w, np.broadcast_to(v, context.shape[:1] + shape), axes=1) for k, v in parts.items()}
    out["bound_index"] = bound_index(out["overhead_s"], out["memory_s"], out["compute_s"])
    out["mean_context_tokens"] = np.sum(context * weights, axis=0)
    return out
