"""The one cost model of a forward pass: decode step, prefill, or a continuous-batching mix.

A pass is described by the work it does (``PassWork``: how many sequences decode a token, how
many cached tokens they attend to, how many prompt tokens are prefilled, ...) and priced by
``StepModel.pass_s``. Every caller -- predict's TPOT and TTFT, the static and continuous
servers, waste, choose, the fit -- goes through it; the chart page's JavaScript is a port of
this module (roofline/chart_assets/model.js, held equal by tests/test_model_js.py under node).

A pass runs three families of kernels one after another, each on its own roofline, and
overlaps their sum with a fixed overhead (launches, Python):

    overhead (+)q [ matmuls + attention + elementwise ]
    matmuls     = weight bytes / BW'  (+)p  matmul FLOPs / peak'
    attention   = KV bytes / BW'      (+)p  attention FLOPs / peak'
    elementwise = activation bytes / BW'

where ``a (+)p b = (a^p + b^p)^(1/p)`` (``pnorm``): p = 1 adds the terms, a large p takes their
max. BW' is the bandwidth ceiling times the calibration's bandwidth efficiency; peak' the compute
ceiling times the efficiency of the kernel family (decode matmuls, decode attention, prefill).
Uncalibrated, each family is a pure roofline max(bytes/BW, FLOPs/peak) and there is no overhead.

Works on Python floats (the simulators' hot loops) and on numpy arrays (predict's sweeps) with
the same code: only ``pnorm`` and the overhead's choice branch on the type.
"""

from __future__ import annotations

from math import exp, log1p
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from roofline.calibration import MAX_EXPONENT, Calibration
from roofline.hardware import CardProfile
from roofline.model_spec import ModelSpec
from roofline.units import dtype_bytes

BOUNDS = np.array(["overhead", "memory", "compute"])


def pnorm(a, b, p):
    """(a^p + b^p)^(1/p) for non-negative numbers: a sum at p <= 1, exactly max(a, b) at
    p >= MAX_EXPONENT, a smooth blend between. Python floats in, a float out (fast path);
    otherwise numpy arrays, broadcast."""
    if p <= 1.0:
        return a + b
    if type(a) is float and type(b) is float:
        if a >= b:
            hi, lo = a, b
        else:
            hi, lo = b, a
        if p >= MAX_EXPONENT or hi <= 0.0:
            return hi
        return hi * exp(log1p((lo / hi) ** p) / p)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    hi = np.maximum(a, b)
    if p >= MAX_EXPONENT:
        return hi
    lo = np.minimum(a, b)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * np.exp(np.log1p(ratio**p) / p)


class PassWork(NamedTuple):
    """The work of one forward pass, in tokens (floats or broadcastable arrays).

    decode_tokens   sequences that decode one token each (body and LM head on one row each)
    kv_read_tokens  cached tokens the decoding sequences attend to, summed over them
    prefill_tokens  prompt tokens processed (body only; their KV is written)
    prefill_pairs   causal (query, key) pairs among the prompt tokens
    logit_rows      prompt positions whose logits are computed (1 per newcomer with logits=last)
    """

    decode_tokens: float = 0.0
    kv_read_tokens: float = 0.0
    prefill_tokens: float = 0.0
    prefill_pairs: float = 0.0
    logit_rows: float = 0.0


def decode_work(batch, kv_read_tokens) -> PassWork:
    """One decode step of ``batch`` sequences attending to ``kv_read_tokens`` cached tokens in all."""
    return PassWork(decode_tokens=batch, kv_read_tokens=kv_read_tokens)


def prefill_work(prompt_tokens, prompt_pairs, logit_rows) -> PassWork:
    """A prefill of ``prompt_tokens`` tokens in all (``prompt_pairs`` causal pairs)."""
    return PassWork(prefill_tokens=prompt_tokens, prefill_pairs=prompt_pairs, logit_rows=logit_rows)


class PassParts(NamedTuple):
    """The times a pass is built from, seconds: the overhead and each kernel family's two sides."""

    overhead_s: object
    matmul_memory_s: object
    matmul_compute_s: object
    attention_memory_s: object
    attention_compute_s: object
    elementwise_s: object


@dataclass(frozen=True)
class StepModel:
    """The cost model of one model on one card under one calibration; build once, price often."""

    spec: ModelSpec
    card: CardProfile
    calibration: Calibration
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    # derived scalars (base units)
    weight_read_bytes: float = field(init=False)
    kv_bytes_per_token: float = field(init=False)
    act_bytes_per_token: float = field(init=False)
    prefill_act_bytes_per_token: float = field(init=False)
    bandwidth_bytes_per_s: float = field(init=False)
    peak_flop_per_s: float = field(init=False)
    decode_overhead_s: float = field(init=False)
    # seconds per unit of work (what pass_parts multiplies PassWork's counts by)
    _c: tuple = field(init=False, repr=False)

    def __post_init__(self):
        cal, spec = self.calibration, self.spec
        set_ = object.__setattr__
        set_(self, "weight_read_bytes", float(spec.decode_weight_bytes(self.weight_dtype, self.act_dtype)))
        set_(self, "kv_bytes_per_token", float(spec.kv_bytes_per_token(self.kv_dtype)))
        width_bytes = activation_width_bytes(spec, self.act_dtype)
        set_(self, "act_bytes_per_token", cal.activation_traffic_coeff * width_bytes)
        set_(self, "prefill_act_bytes_per_token", cal.prefill_activation_traffic_coeff * width_bytes)
        set_(self, "bandwidth_bytes_per_s", float(cal.measured_bandwidth_bytes_per_s or self.card.bandwidth_bytes_per_s))
        set_(self, "peak_flop_per_s", float(cal.measured_peak_flop_per_s or self.card.peak_flop_per_s))
        set_(self, "decode_overhead_s", cal.step_overhead_s + cal.layer_overhead_s * spec.num_hidden_layers)
        s_per_byte = 1.0 / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        s_per_decode_flop = 1.0 / (cal.compute_efficiency * self.peak_flop_per_s)
        s_per_attention_flop = 1.0 / (cal.attention_efficiency * self.peak_flop_per_s)
        s_per_prefill_flop = 1.0 / (cal.prefill_compute_efficiency * self.peak_flop_per_s)
        attn_flop = float(spec.attention_flop_per_context_token)
        set_(self, "_c", (
            float(cal.prefill_overhead_s),                                        # 0 prefill overhead
            max(self.decode_overhead_s, float(cal.prefill_overhead_s)),           # 1 mixed-pass overhead
            self.weight_read_bytes * s_per_byte,                                  # 2 matmul memory
            float(spec.linear_flop_per_token) * s_per_decode_flop,                # 3 per decode token
            float(spec.body_linear_flop_per_token) * s_per_prefill_flop,          # 4 per prompt token
            2.0 * float(spec.lm_head_params) * s_per_prefill_flop,                # 5 per prefill logit row
            self.kv_bytes_per_token * s_per_byte,                                 # 6 per KV token moved
            float(cal.kv_traffic_factor),                                         # 7 KV moved per KV read
            attn_flop * s_per_attention_flop,                                     # 8 per decode (query, key) pair
            attn_flop * s_per_prefill_flop,                                       # 9 per prefill pair
            self.act_bytes_per_token * s_per_byte,                                # 10 per decode token
            self.prefill_act_bytes_per_token * s_per_byte,                        # 11 per prompt token
            float(cal.roofline_exponent),                                         # 12 p
            float(cal.overhead_exponent),                                         # 13 q
        ))
        dtype_bytes(self.act_dtype)  # validate

    @property
    def balance_point_flop_per_byte(self) -> float:
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    # ---- the cost of a pass ----
    def overhead_s(self, decode_tokens, prefill_tokens):
        """The decode overhead for a decode step, the prefill's for a prefill, the larger for a mix."""
        c = self._c
        if type(decode_tokens) is float and type(prefill_tokens) is float:
            if prefill_tokens > 0.0:
                return c[1] if decode_tokens > 0.0 else c[0]
            return self.decode_overhead_s
        d, p = np.asarray(decode_tokens, dtype=float), np.asarray(prefill_tokens, dtype=float)
        return np.where(p > 0, np.where(d > 0, c[1], c[0]), self.decode_overhead_s)

    def pass_parts(self, work: PassWork) -> PassParts:
        """The overhead and each kernel family's memory and compute time (seconds)."""
        return PassParts(*self._parts(work))

    def _parts(self, work) -> tuple:
        """pass_parts as a plain tuple: the formula, written once for floats and arrays alike."""
        d, kv, p, pairs, rows = work
        c = self._c
        return (
            self.overhead_s(d, p),
            c[2],
            d * c[3] + p * c[4] + rows * c[5],
            (c[7] * kv + d + p) * c[6],
            kv * c[8] + pairs * c[9],
            d * c[10] + p * c[11],
        )

    def pass_s(self, work: PassWork):
        """Seconds of one pass doing ``work`` (a PassWork, or any tuple of its five counts in its order)."""
        o, mm, mc, am, ac, el = self._parts(work)
        p = self._c[12]
        return pnorm(o, pnorm(mm, mc, p) + pnorm(am, ac, p) + el, self._c[13])

    def pass_breakdown(self, work: PassWork) -> dict:
        """``pass_s`` with where the time goes: total, overhead, memory (the families whose bytes
        outweigh their FLOPs, and the elementwise kernels) and compute (the others); arrays."""
        o, mm, mc, am, ac, el = (np.asarray(x, dtype=float) for x in self._parts(work))
        p = self._c[12]
        gemm, attn = pnorm(mm, mc, p), pnorm(am, ac, p)
        total = pnorm(o, gemm + attn + el, self._c[13])
        gemm_on_memory, attn_on_memory = mm >= mc, am >= ac
        memory_s = np.where(gemm_on_memory, gemm, 0.0) + np.where(attn_on_memory, attn, 0.0) + el
        compute_s = np.where(gemm_on_memory, 0.0, gemm) + np.where(attn_on_memory, 0.0, attn)
        shape = np.broadcast(total, memory_s, compute_s).shape
        return {
            "step_s": np.broadcast_to(total, shape),
            "overhead_s": np.broadcast_to(o, shape),
            "memory_s": np.broadcast_to(memory_s, shape),
            "compute_s": np.broadcast_to(compute_s, shape),
        }

    # ---- the work's plain counts (for the lesson's columns) ----
    def linear_flop(self, work: PassWork):
        spec = self.spec
        d, _, p, _, rows = work
        return d * float(spec.linear_flop_per_token) + p * float(spec.body_linear_flop_per_token) \
            + rows * 2.0 * float(spec.lm_head_params)

    def attention_flop(self, work: PassWork):
        return (work.kv_read_tokens + work.prefill_pairs) * float(self.spec.attention_flop_per_context_token)

    def bytes_counted(self, work: PassWork):
        """The lesson's count: weights once plus the KV cache read (or, for a prefill, written) once."""
        return self.weight_read_bytes + (work.kv_read_tokens + work.prefill_tokens) * self.kv_bytes_per_token


def activation_width_bytes(spec: ModelSpec, act_dtype: str = "bf16") -> float:
    """Bytes of one token's activations across every layer's elementwise kernels, per unit of the
    calibration's activation-traffic coefficient: layers x (hidden + intermediate) x act bytes."""
    width = spec.num_hidden_layers * (spec.hidden_size + spec.intermediate_size)
    return width * dtype_bytes(act_dtype)


def bound_index(overhead_s, memory_s, compute_s):
    """0, 1 or 2: which of overhead, memory and compute time is largest (BOUNDS)."""
    return np.where(overhead_s >= np.maximum(memory_s, compute_s), 0, np.where(memory_s >= compute_s, 1, 2))
