"""Bytes, FLOPs and time of a forward pass, and of one decode step in particular.

Everything takes numpy arrays (or scalars) for batch and token counts and broadcasts; nothing
loops over batch sizes. A pass runs three families of kernels one after another -- the weight
matmuls, attention over the KV cache, the elementwise kernels -- each on its own roofline, and
overlaps their sum with a fixed overhead (launches, Python):

    overhead (+)q [ (weights/BW (+)p matmul FLOPs/peak) + (KV/BW (+)p attention FLOPs/peak) + activations/BW ]

where ``a (+)p b = (a^p + b^p)^(1/p)``: p = 1 adds the terms, a large p takes their max. The
calibration supplies the overheads, efficiencies, traffic factors and exponents; uncalibrated,
each family is a pure roofline max(bytes/BW, FLOPs/peak) and there is no overhead.
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
    act_bytes_per_token: float = field(init=False)
    prefill_act_bytes_per_token: float = field(init=False)
    bandwidth_bytes_per_s: float = field(init=False)
    peak_flop_per_s: float = field(init=False)

    def __post_init__(self):
        cal = self.calibration
        set_ = object.__setattr__
        set_(self, "weight_read_bytes", self.spec.decode_weight_bytes(self.weight_dtype, self.act_dtype))
        set_(self, "kv_bytes_per_token", self.spec.kv_bytes_per_token(self.kv_dtype))
        # activation traffic of the elementwise kernels per token, all layers (decode, prefill)
        width_bytes = self.spec.num_hidden_layers * (self.spec.hidden_size + self.spec.intermediate_size)
        width_bytes *= dtype_bytes(self.act_dtype)
        set_(self, "act_bytes_per_token", cal.activation_traffic_coeff * width_bytes)
        set_(self, "prefill_act_bytes_per_token", cal.prefill_activation_traffic_coeff * width_bytes)
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
        ``bytes_counted`` holds weights and KV once (the lesson's count); ``bytes_moved`` adds the
        calibration's extra KV traffic, the new tokens' KV written and the activation traffic."""
        batch = np.asarray(batch, dtype=float)
        kv_read = np.asarray(kv_tokens_read, dtype=float)
        kv_written = batch if kv_tokens_written is None else np.asarray(kv_tokens_written, dtype=float)
        counted = self.weight_read_bytes + kv_read * self.kv_bytes_per_token
        moved = (
            self.weight_read_bytes
            + self.kv_bytes_per_token * (self.calibration.kv_traffic_factor * kv_read + kv_written)
            + batch * self.act_bytes_per_token
        )
        linear = batch * self.spec.linear_flop_per_token
        attention = kv_read * self.spec.attention_flop_per_context_token
        return counted, moved, linear, attention

    def pass_time(
        self,
        overhead_s,
        weight_bytes,
        gemm_flop_decode,
        kv_bytes,
        attention_flop_decode,
        act_tokens,
        gemm_flop_prefill=0.0,
        attention_flop_prefill=0.0,
        prefill_act_tokens=0.0,
    ):
        """Time of one forward pass as three kernel families run one after another, each on
        its own roofline, the sum overlapped with the fixed overhead:

            overhead (+)q [ gemm + attention + elementwise ]
            gemm      = weight_bytes / BW' (+)p  gemm FLOPs / peak'
            attention = kv_bytes / BW'     (+)p  attention FLOPs / peak'
            elementwise = (act_tokens x decode + prefill_act_tokens x prefill activation bytes
                           per token) / BW'

        where BW' and peak' are the ceilings times the calibration's efficiencies (decode
        FLOPs at the decode efficiencies, prefill FLOPs at the prefill's). Returns
        (total_s, overhead_s, memory_s, compute_s): memory_s is the time of the families
        whose bytes outweigh their FLOPs (the elementwise kernels always), compute_s that of
        the others; the largest of the three names the bound."""
        cal = self.calibration
        s_per_byte = 1.0 / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        s_per_flop = 1.0 / self.peak_flop_per_s
        gemm_mem = weight_bytes * s_per_byte
        gemm_comp = s_per_flop * (
            gemm_flop_decode / cal.compute_efficiency + gemm_flop_prefill / cal.prefill_compute_efficiency
        )
        attn_mem = kv_bytes * s_per_byte
        attn_comp = s_per_flop * (
            attention_flop_decode / cal.attention_efficiency + attention_flop_prefill / cal.prefill_compute_efficiency
        )
        elem = s_per_byte * (
            np.asarray(act_tokens, dtype=float) * self.act_bytes_per_token
            + np.asarray(prefill_act_tokens, dtype=float) * self.prefill_act_bytes_per_token
        )
        p = cal.roofline_exponent
        gemm = pnorm(gemm_mem, gemm_comp, p)
        attn = pnorm(attn_mem, attn_comp, p)
        total = pnorm(overhead_s, gemm + attn + elem, cal.overhead_exponent)
        gemm_on_memory = gemm_mem >= gemm_comp
        attn_on_memory = attn_mem >= attn_comp
        memory_s = np.where(gemm_on_memory, gemm, 0.0) + np.where(attn_on_memory, attn, 0.0) + elem
        compute_s = np.where(gemm_on_memory, 0.0, gemm) + np.where(attn_on_memory, 0.0, attn)
        return total, overhead_s, memory_s, compute_s

    def decode_step(self, batch, context_tokens):
        """One decode step of ``batch`` sequences each attending to ``context_tokens`` tokens."""
        batch = np.asarray(batch, dtype=float)
        kv_read = batch * np.asarray(context_tokens, dtype=float)
        counted, moved, linear, attention = self.decode_work(batch, kv_read)
        overhead = np.full(np.broadcast(batch, kv_read).shape, self.decode_overhead_s)
        kv_bytes = moved - self.weight_read_bytes - batch * self.act_bytes_per_token
        total, overhead, memory_s, compute_s = self.pass_time(
            overhead, self.weight_read_bytes, linear, kv_bytes, attention, batch
        )
        return {
            "step_s": total,
            "overhead_s": overhead,
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
        kv_bytes = self.kv_bytes_per_token * (cal.kv_traffic_factor * kv_read + decode_batch + prefill_tokens)
        gemm_prefill = (
            prefill_tokens * spec.body_linear_flop_per_token
            + np.asarray(prefill_sequences, dtype=float) * 2.0 * spec.lm_head_params
        )
        overhead = np.where(prefill_tokens > 0, max(self.decode_overhead_s, cal.prefill_overhead_s), self.decode_overhead_s)
        return self.pass_time(
            overhead,
            self.weight_read_bytes,
            decode_batch * spec.linear_flop_per_token,
            kv_bytes,
            kv_read * spec.attention_flop_per_context_token,
            decode_batch,
            gemm_prefill,
            np.asarray(prefill_pairs, dtype=float) * spec.attention_flop_per_context_token,
            prefill_tokens,
        )[0]

    def decode_step_s(self, batch, kv_tokens_read):
        """Step time only, for a batch that attends to ``kv_tokens_read`` tokens in total
        (sequences of different lengths: the sum of their contexts). Fast path for simulators."""
        return self.mixed_step_s(batch, kv_tokens_read)


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
