"""The one cost model of a forward pass: decode step, prefill, or a continuous-batching mix.

A pass is described by the work it does (``PassWork``: how many sequences decode a token, how
many cached tokens they attend to, how many prompt tokens are prefilled, ...) and priced by
``StepModel.pass_s``. Every caller -- predict's TPOT and TTFT, the static and continuous
servers, waste, choose, the fit -- goes through it; the chart page's JavaScript is a port of
this module (roofline/chart_assets/model.js, held equal by tests/test_model_js.py under node).

A pass runs four families of kernels one after another, each on its own roofline, and overlaps
their sum with a fixed overhead (launches, Python):

    overhead (+)q [ matmuls + attention + elementwise + collectives ]
    matmuls     = weight bytes / BW'  (+)p  matmul FLOPs / peak'
    attention   = KV and score bytes / BW'  (+)p  attention FLOPs / peak'
    elementwise = activation bytes / BW'
    collectives = tensor-parallel all-reduces and the logits all-gather (latency + bytes / link)

where ``a (+)p b = (a^p + b^p)^(1/p)`` (``pnorm``): p = 1 adds the terms, a large p takes their
max. BW' is the bandwidth ceiling times the calibration's bandwidth efficiency; peak' the compute
ceiling times the efficiency of the kernel family (decode matmuls, decode attention, prefill).
Uncalibrated, each family is a pure roofline max(bytes/BW, FLOPs/peak) and there is no overhead.
Calibrated, the overhead is a fixed time a step and a layer, plus a fixed time a layer for each
feature whose own kernels the layer runs (q/k norms, MLA's decode, shared experts, gpt-oss's MoE
layer: ``Calibration.layer_feature_overhead_s``); a decoding sequence whose cache length is in one
of the engine's slower-kernel windows has its attention priced up by that window's factor
(``Calibration.attention_context_factors``).

The weights a pass reads: every dense weight, and of each mixture-of-experts layer only the
experts its tokens were routed to (``experts_touched``). Where the calibration has the grouped
GEMM's tile rates, those experts are a family of their own, added to the matmuls': the larger of
their bytes and the FLOPs of the whole tiles their rows fill (``expert_tile_rows``). The KV it
reads: full-attention layers see every cached token, windowed layers at most their window
(``PassWork.kv_read_window_tokens``). A pass of at most 16 routed rows also pays, each MoE layer,
PyTorch's small-index gathers over the large-index ones the fitted terms price
(``Calibration.index_kernel_table``; roofline.index_kernels), in the elementwise family.
With tensor parallelism (``tp``) every figure is one GPU's share (KV heads replicated where the
GPUs outnumber them) and the collectives join the pass.

Works on Python floats (the simulators' hot loops) and on numpy arrays (predict's sweeps) with
the same code: only ``pnorm``, ``experts_touched`` and the overhead's choice branch on the type.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import lru_cache
from math import ceil, exp, inf, log, log1p, sqrt
from typing import NamedTuple

import numpy as np

from roofline.calibration import MAX_EXPONENT, Calibration
from roofline.grouped_mm import layer_nodes, nodes_seconds
from roofline.hardware import CardProfile, matmul_peak
from roofline.index_kernels import excess_at, layer_excess_s, moe_index_ops
from roofline.model_spec import ModelSpec
from roofline.units import dtype_bytes

BOUNDS = np.array(["overhead", "memory", "compute"])

#: torch._grouped_mm's tiles (PyTorch's GroupMM.cu), (rows, columns): an expert's routed rows run in
#: tiles of 64 x 128 while the routed rows, averaged over all experts, are fewer than
#: SMALL_TILE_ROWS_PER_EXPERT (floor(rows / experts) <= 128), else in tiles of 128 x 256
SMALL_TILE = (64, 128)
LARGE_TILE = (128, 256)
SMALL_TILE_ROWS_PER_EXPERT = 129
#: roofline.step.StepModel._measured_experts: the grouped-mm table prices experts of up to this many
#: routed rows each, the tile rates from TILE_ROWS_FROM on (log time blended between): one small tile
#: (64 rows) half full, and two full
TABLE_ROWS_UP_TO = 32.0
TILE_ROWS_FROM = 128.0
#: the tile table's last point: past it a token adds k rows (every expert's tiles long since full)
TILE_TABLE_MAX_TOKENS = 8192


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
    r = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    # hi * exp(log1p(r^p) / p), in place: the same operations in the same order, no temporaries
    np.power(r, p, out=r)
    np.log1p(r, out=r)
    r /= p
    np.exp(r, out=r)
    r *= hi
    return r if r.ndim else r[()]


class PassWork(NamedTuple):
    """The work of one forward pass, in tokens (floats or broadcastable arrays).

    decode_tokens          sequences that decode one token each (body and LM head on one row each)
    kv_read_tokens         cached tokens the decoding sequences attend to, summed over them
    prefill_tokens         prompt tokens processed (body only; their KV is written)
    prefill_pairs          causal (query, key) pairs among the prompt tokens
    logit_rows             prompt positions whose logits are computed (1 per newcomer with logits=last)
    kv_read_window_tokens  as kv_read_tokens for the windowed layers: each sequence's share capped at
                           the window (None: no cap, as kv_read_tokens); only windowed models read it
    prefill_window_pairs   as prefill_pairs with each query's keys capped at the window (None: no cap)
    """

    decode_tokens: float = 0.0
    kv_read_tokens: float = 0.0
    prefill_tokens: float = 0.0
    prefill_pairs: float = 0.0
    logit_rows: float = 0.0
    kv_read_window_tokens: float | None = None
    prefill_window_pairs: float | None = None


def decode_work(batch, kv_read_tokens, kv_read_window_tokens=None) -> PassWork:
    """One decode step of ``batch`` sequences attending to ``kv_read_tokens`` cached tokens in all."""
    return PassWork(batch, kv_read_tokens, 0.0, 0.0, 0.0, kv_read_window_tokens, None)


def prefill_work(prompt_tokens, prompt_pairs, logit_rows, prompt_window_pairs=None) -> PassWork:
    """A prefill of ``prompt_tokens`` tokens in all (``prompt_pairs`` causal pairs)."""
    return PassWork(0.0, 0.0, prompt_tokens, prompt_pairs, logit_rows, None, prompt_window_pairs)


def causal_pairs(prompt_tokens, window=None):
    """Causal (query, key) pairs of one prompt, each query seeing at most ``window`` keys (itself included)."""
    p = np.asarray(prompt_tokens, dtype=float)
    full = p * (p + 1.0) / 2.0
    if window is None:
        return full
    w = float(window)
    return np.where(p <= w, full, w * (w + 1.0) / 2.0 + (p - w) * w)


class PassParts(NamedTuple):
    """The times a pass is built from, seconds: the overhead and each kernel family's parts."""

    overhead_s: object
    matmul_memory_s: object
    matmul_compute_s: object
    attention_memory_s: object
    attention_compute_s: object
    elementwise_s: object
    collectives_s: object
    #: a pass's routed experts where the calibration prices them by tiles (expert_small_tile_efficiency):
    #: their weight bytes and their tiles' FLOPs, combined by max and added to the dense matmuls'
    expert_memory_s: object = 0.0
    expert_compute_s: object = 0.0


def _window_factor(windows, kv, d):
    """The factor of the window (after_tokens, to_tokens, factor) a decoding sequence's cache of
    kv / d positions falls in (1 outside every window and without decoding sequences): the
    attention-contexts windows and the softmax's row-length steps alike."""
    if type(kv) is float and type(d) is float:
        if d > 0.0:
            t = kv / d
            for lo, hi, f in windows:
                if lo < t <= hi:
                    return f
        return 1.0
    kv, d = np.asarray(kv, dtype=float), np.asarray(d, dtype=float)
    t = np.divide(kv, d, out=np.zeros(np.broadcast(kv, d).shape), where=d > 0)
    out = np.ones_like(t)
    for lo, hi, f in windows:
        out = np.where((t > lo) & (t <= hi), f, out)
    return out


@dataclass(frozen=True)
class StepModel:
    """The cost model of one model on one card under one calibration; build once, price often.

    ``tp``: GPUs the model is split over (Megatron-style tensor parallelism); every figure is then
    one GPU's. ``routing_skew``: 0 for uniformly routed experts, s > 0 for expert popularity
    falling as 1/rank^s (a trained router's skew; see ``experts_touched``)."""

    spec: ModelSpec
    card: CardProfile
    calibration: Calibration
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    tp: int = 1
    routing_skew: float = 0.0
    # derived scalars (base units, one GPU's share)
    weight_read_bytes: float = field(init=False)
    dense_read_bytes: float = field(init=False)
    expert_bytes: float = field(init=False)
    kv_bytes_per_token: float = field(init=False)
    kv_window_bytes_per_token: float = field(init=False)
    attention_flop_per_pair: float = field(init=False)
    attention_window_flop_per_pair: float = field(init=False)
    #: a prompt's (query, key) pair's FLOPs, full and windowed layers (MLA: decompressed)
    prefill_flop_per_pair: float = field(init=False)
    prefill_window_flop_per_pair: float = field(init=False)
    window: int | None = field(init=False)
    #: (pair factor, sinks) where the engine's prefill attention takes a masked path (the calibration's
    #: masked_prefill_attention_flop_per_s), else None: roofline.prefill.static_prefill_work
    masked_prefill: tuple | None = field(init=False)
    act_bytes_per_token: float = field(init=False)
    prefill_act_bytes_per_token: float = field(init=False)
    #: seconds per prompt token of the elementwise kernels the prefill-kernels probe prices
    #: (Calibration.prefill_elementwise_bytes_per_element; 0 without it)
    prefill_elementwise_s_per_token: float = field(init=False)
    decode_elementwise_extra_s_per_token: float = field(init=False)
    bandwidth_bytes_per_s: float = field(init=False)
    peak_flop_per_s: float = field(init=False)
    decode_overhead_s: float = field(init=False)
    # seconds per unit of work (what _parts multiplies PassWork's counts by)
    _c: tuple = field(init=False, repr=False)
    _touched_table: object = field(init=False, repr=False, default=None)
    _tile_table: object = field(init=False, repr=False, default=None)
    _window_layers: int = field(init=False, repr=False, default=0)
    _context_windows: tuple = field(init=False, repr=False, default=())
    _row_factors: tuple = field(init=False, repr=False, default=())
    #: positions a decoding sequence's softmax row holds beyond its cache: 1 with attention sinks (the
    #: sink logit joins the row), 0 otherwise
    _softmax_extra_positions: float = field(init=False, repr=False, default=0.0)
    _kernel_table: object = field(init=False, repr=False, default=None)
    #: roofline.grouped_mm.layer_nodes of the calibration's expert_gemm_table at this model's experts
    _expert_nodes: object = field(init=False, repr=False, default=None)
    #: seconds the MoE layers' small-index kernels cost over the large-index ones at 0..16 routed rows
    #: (roofline.index_kernels; the calibration's index_kernel_table), None without
    _index_excess: object = field(init=False, repr=False, default=None)

    def __post_init__(self):
        cal, spec, tp = self.calibration, self.spec, self.tp
        set_ = object.__setattr__
        wd, ad = self.weight_dtype, self.act_dtype
        weight_read = float(spec.decode_weight_bytes(wd, ad))
        all_experts = float(spec.all_routed_expert_bytes(wd, ad)) if spec.moe_layers else 0.0
        set_(self, "weight_read_bytes", weight_read / tp)
        set_(self, "dense_read_bytes", (weight_read - all_experts) / tp)
        set_(self, "expert_bytes", float(spec.routed_expert_bytes(wd, ad)) / tp if spec.moe_layers else 0.0)
        # the attention layout, one GPU's share: (layers, KV elements, FLOPs, score elements) per token or pair
        kv_b = dtype_bytes(self.kv_dtype)
        full_kv = win_kv = full_flop = win_flop = full_scores = win_scores = full_lane = win_lane = 0.0
        full_pflop = win_pflop = 0.0  # a prompt's pairs (MLA: decompressed)
        full_heads = win_heads = 0.0  # query heads x layers: a prefill's score elements per pair
        full_read = win_read = 0.0
        windows = {g.window for g in spec.attention_groups if g.window is not None}
        if len(windows) > 1:
            from roofline.errors import RooflineError

            raise RooflineError(f"{spec.name}: layers with several window sizes ({sorted(windows)}) are not supported")
        for g in spec.attention_groups:
            kv_share = g.kv_elements_per_token * kv_heads_share(g.kind, g.kv_heads, tp)
            kv = g.layers * kv_share * kv_b
            flop = g.layers * g.flop_per_pair / tp
            pflop = g.layers * (g.prefill_flop_per_pair or g.flop_per_pair) / tp
            # score elements per pair, weighted by their bytes relative to a plain layer's
            heads = g.layers * g.q_heads / tp
            scores = heads
            if g.sinks and cal.attention_score_bytes > 0:
                scores *= 1.0 + cal.sink_score_bytes / cal.attention_score_bytes
            read = kv * (cal.mla_latent_passes if g.kind == "mla" else 1.0)  # bytes a step's attention reads
            # the values' weighted sum runs serially over each (sequence, KV head)'s cached tokens:
            # one output tile spans the whole head width, so its time per token does not depend on
            # the width (the attention probe: 64-wide heads cost as much per token as 128-wide)
            lane = float(g.layers)
            if g.window is None:
                full_kv, full_flop, full_scores = full_kv + kv, full_flop + flop, full_scores + scores
                full_lane, full_read, full_heads = full_lane + lane, full_read + read, full_heads + heads
                full_pflop += pflop
            else:
                win_kv, win_flop, win_scores = win_kv + kv, win_flop + flop, win_scores + scores
                win_lane, win_read, win_heads = win_lane + lane, win_read + read, win_heads + heads
                win_pflop += pflop
        set_(self, "window", next(iter(windows)) if windows else None)
        set_(self, "_window_layers", sum(g.layers for g in spec.attention_groups if g.window is not None))
        set_(self, "attention_flop_per_pair", full_flop)
        set_(self, "attention_window_flop_per_pair", win_flop)
        set_(self, "prefill_flop_per_pair", full_pflop)
        set_(self, "prefill_window_flop_per_pair", win_pflop)
        set_(self, "kv_bytes_per_token", full_kv + win_kv)
        set_(self, "kv_window_bytes_per_token", win_kv)
        # a plain MLP's GELU touches its intermediate once where a gated one's silu-and-multiply
        # moves it several times: weighted by their measured costs (plain_mlp_activation_weight)
        width_bytes = activation_width_bytes(spec, ad, plain_mlp_activation_weight(cal)) / tp
        set_(self, "act_bytes_per_token", cal.activation_traffic_coeff * width_bytes)
        set_(self, "prefill_act_bytes_per_token", cal.prefill_activation_traffic_coeff * width_bytes)
        bandwidth = float(cal.measured_bandwidth_bytes_per_s or self.card.bandwidth_bytes_per_s)
        set_(self, "bandwidth_bytes_per_s", bandwidth)
        # the prefill-kernels probe's cost of each kind of element a prompt token's layers touch
        # (norms and residuals, activation, rope and cache writes, q/k norms): bytes at the ceiling
        per_element = dict(cal.prefill_elementwise_bytes_per_element or {})
        if per_element:  # a calibration without the clamped activation's cost prices it as silu's;
            # an expert bias is gathered per routed row and added: two one-pass kernels (a GELU's pass)
            per_element.setdefault("clamped_intermediate", per_element.get("gated_intermediate", 0.0))
            per_element.setdefault("expert_bias", 2.0 * per_element.get("plain_intermediate", 0.0))
            if "mla_heads" not in per_element:  # no MLA shapes probed: an MLA layer as the MHA layer
                # its prefill decompresses to (heads x (nope + rope) queries, as many keys)
                per_element["mla_heads"] = per_element.get("query", 0.0) + per_element.get("key_value", 0.0)
        # each GPU of a tensor-parallel group holds its share of the heads and of the intermediate,
        # but the whole hidden state: its norms and residual adds run on every GPU in full
        elements = spec.prefill_elementwise_elements
        set_(self, "prefill_elementwise_s_per_token",
             sum(float(per_element.get(k, 0.0)) * elements[k] / (1 if k == "hidden" else tp) for k in elements)
             / bandwidth)
        # a decode step's routed rows run the same elementwise kernels a prompt's do: the activation
        # coefficient prices a gated intermediate's (silu's); gpt-oss's clamped SwiGLU costs its extra
        # over silu's, and its experts' biases (gathered per routed row and added) cost theirs, per
        # decoding token (device call 74: 30 us a layer more than qwen3-30b-a3b's at batch 256)
        set_(self, "decode_elementwise_extra_s_per_token", (
            max(float(per_element.get("clamped_intermediate", 0.0)) - float(per_element.get("gated_intermediate", 0.0)),
                0.0) * elements["clamped_intermediate"]
            + float(per_element.get("expert_bias", 0.0)) * elements["expert_bias"]) / tp / bandwidth)
        # issue 10: the matmul ceiling is picked by the weight format (fp8 weights on an H100 run at its
        # fp8 tensor peak; a card without that path falls back to bf16): roofline.hardware.matmul_peak
        set_(self, "peak_flop_per_s", matmul_peak(self.card, wd, cal.measured_peak_flop_per_s).flop_per_s)
        # a layer with q/k norms, MLA's absorbed decode, shared experts or gpt-oss's MoE layer runs
        # kernels of its own: a fixed time each such layer, measured by the layer-features probe
        # (Calibration.layer_feature_overhead_s)
        features = cal.layer_feature_overhead_s or {}
        feature_s = sum(float(features.get(k, 0.0)) * n for k, n in spec.decode_layer_features.items())
        set_(self, "decode_overhead_s", cal.step_overhead_s + cal.layer_overhead_s * spec.num_hidden_layers
             + cal.moe_layer_overhead_s * spec.moe_layers + feature_s)
        s_per_byte = 1.0 / (cal.bandwidth_efficiency * self.bandwidth_bytes_per_s)
        s_per_decode_flop = 1.0 / (cal.compute_efficiency * self.peak_flop_per_s)
        s_per_attention_flop = 1.0 / (cal.attention_efficiency * self.peak_flop_per_s)
        s_per_prefill_flop = 1.0 / (cal.prefill_compute_efficiency * self.peak_flop_per_s)
        # a prompt's attention pairs: at the engine's measured prefill-attention rate for this head
        # width where the calibration has one, else at the prefill matmuls' rate
        rate = head_dim_rate(cal.prefill_attention_flop_per_s, spec.head_dim)
        s_per_prefill_pair_flop = s_per_prefill_flop if rate is None else 1.0 / rate
        # an engine whose windowed (or sinks) prefill runs a masked SDPA over the whole square: each
        # such pair costs computed width / width x (the causal pair's rate / the masked path's rate)
        sinks = any(g.sinks for g in spec.attention_groups)
        masked = None
        if cal.masked_prefill_attention_flop_per_s and (sinks or windows) and spec.attention_kind != "mla":
            computed = -(-(spec.head_dim + 1) // 8) * 8 if sinks else spec.head_dim
            masked_rate = head_dim_rate(cal.masked_prefill_attention_flop_per_s, computed)
            masked = (computed / spec.head_dim / (masked_rate * s_per_prefill_pair_flop), sinks)
        set_(self, "masked_prefill", masked)
        score_s = cal.attention_score_bytes * s_per_byte
        prefill_score_s = cal.prefill_score_bytes * s_per_byte
        # a prompt token's routed-expert FLOPs (k experts a MoE layer) run the grouped GEMMs, at their
        # measured rate where the calibration has it
        routed_flop = spec.routed_expert_flop_per_token
        s_per_expert_prefill_flop = (1.0 / cal.expert_prefill_flop_per_s if cal.expert_prefill_flop_per_s
                                     else s_per_prefill_flop)
        # a grouped GEMM computes at least expert_gemm_min_rows rows per touched expert: the padding
        # (min_rows x touched - tokens x k, when positive) costs FLOPs of one expert row each
        expert_row_flop = spec.moe_layers * (2.0 * spec.routed_expert_weight_params + spec.routed_expert_bias_params) / tp
        # the grouped GEMM's tiles (expert_small_tile_efficiency): seconds per row of tiles on each path,
        # every MoE layer's gate-up (2 x intermediate columns over hidden) and down (hidden columns over
        # intermediate), the columns padded to whole tiles; the routed rows' own FLOPs then leave the
        # dense matmuls' terms
        tiles = bool(cal.expert_small_tile_efficiency and spec.moe_layers)
        small_row_s = large_row_s = 0.0
        if tiles:
            inter, hidden = spec.moe_intermediate_size / tp, float(spec.hidden_size)

            small_row_s = spec.moe_layers * tile_row_flop(hidden, inter, SMALL_TILE[1]) / (
                cal.expert_small_tile_efficiency * self.peak_flop_per_s)
            large_row_s = spec.moe_layers * tile_row_flop(hidden, inter, LARGE_TILE[1]) / (
                cal.expert_large_tile_efficiency * self.peak_flop_per_s)
        if tiles or (cal.expert_gemm_table and spec.moe_layers):  # priced apart (_parts): out of the dense terms
            decode_routed_s, prefill_routed_s = routed_flop / tp * s_per_decode_flop, 0.0
        else:
            decode_routed_s, prefill_routed_s = 0.0, routed_flop / tp * s_per_expert_prefill_flop
        # collectives per pass (tp > 1): 2 all-reduces a layer and the embedding's, of hidden x act
        # bytes per token; the logits all-gathered (vocab x act bytes per logit row); ring algorithms
        if tp > 1:
            link_s = 1.0 / self.link_bytes_per_s
            latency = self.link_latency_s
            n_reduce = 2.0 * spec.num_hidden_layers + 1.0
            gather_latency = latency if cal.allgather_latency_s is None else cal.allgather_latency_s
            reduce_fixed = n_reduce * latency + gather_latency
            reduce_per_token = n_reduce * spec.hidden_size * dtype_bytes(ad) * 2.0 * (tp - 1) / tp * link_s
            gather_per_row = spec.vocab_size * dtype_bytes(ad) * (tp - 1) / tp * link_s
        else:
            reduce_fixed = reduce_per_token = gather_per_row = 0.0
        # the prefill matmuls priced at the fitted efficiency (not the probes' measured rates): what
        # a load curve stretches (roofline.prefill.prefill); per prompt token, per logit row
        set_(self, "_prefill_fitted_s", (
            (float(spec.body_linear_flop_per_token) - routed_flop) / tp * s_per_prefill_flop,
            float(spec.lm_head_flop_per_position) / tp * s_per_prefill_flop))
        dense_prefill_s, lm_head_s = self._prefill_fitted_s
        # the softmax's warp kernel (a row of at most attention_softmax_warp_max_tokens positions a warp) walks
        # its row serially: with few rows it costs the row's length x this a layer (MLA's latent scores too:
        # the engine's absorbed decode softmaxes them with the same kernel)
        warp_row_s = float(cal.attention_softmax_warp_s_per_token or 0.0)
        # the decode attention's fill-and-drain time beyond its price (Calibration.attention_ramp_s), every
        # attention layer (MLA's absorbed decode runs the same three dependent kernels on its latent)
        ramp_layers = float(sum(g.layers for g in spec.attention_groups))
        set_(self, "_c", (
            float(cal.prefill_overhead_s),                                        # 0 prefill overhead
            max(self.decode_overhead_s, float(cal.prefill_overhead_s)),           # 1 mixed-pass overhead
            self.dense_read_bytes * s_per_byte,                                   # 2 matmul memory, dense weights
            float(spec.linear_flop_per_token) / tp * s_per_decode_flop - decode_routed_s,  # 3 per decode token
            dense_prefill_s + prefill_routed_s,                                   # 4 per prompt token
            lm_head_s,                                                            # 5 per prefill logit row
            full_read * s_per_byte,                                               # 6 per KV token moved, full layers
            float(cal.kv_traffic_factor),                                         # 7 KV moved per KV read
            full_flop * s_per_attention_flop,                                     # 8 per decode pair, full layers
            full_pflop * s_per_prefill_pair_flop,                                 # 9 per prefill pair, full layers
            self.act_bytes_per_token * s_per_byte
            + self.decode_elementwise_extra_s_per_token,                          # 10 per decode token
            self.prefill_act_bytes_per_token * s_per_byte
            + self.prefill_elementwise_s_per_token,                               # 11 per prompt token
            float(cal.roofline_exponent),                                         # 12 p
            float(cal.overhead_exponent),                                         # 13 q
            win_read * s_per_byte,                                                # 14 per KV token moved, windowed
            win_flop * s_per_attention_flop,                                      # 15 per decode pair, windowed
            win_pflop * s_per_prefill_pair_flop,                                  # 16 per prefill pair, windowed
            full_scores * score_s,                                                # 17 score traffic per pair, full
            win_scores * score_s,                                                 # 18 score traffic per pair, windowed
            cal.attention_sequence_overhead_s * spec.num_hidden_layers,           # 19 per decoding sequence
            spec.moe_layers * self.expert_bytes * cal.expert_traffic_factor * s_per_byte,  # 20 per touched expert
            float(spec.num_experts),                                              # 21 E
            1.0 - spec.experts_per_token / spec.num_experts if spec.num_experts else 1.0,  # 22 1 - k/E
            reduce_fixed,                                                         # 23 collectives, fixed
            reduce_per_token,                                                     # 24 per token in the pass
            gather_per_row,                                                       # 25 per logit row gathered
            cal.attention_lane_s_per_token * full_lane,                            # 26 lane, full layers
            cal.attention_lane_s_per_token * win_lane,                             # 27 lane, windowed layers
            cal.batch_layer_overhead_s * spec.num_hidden_layers,                  # 28 from two sequences up
            expert_row_flop * s_per_decode_flop,                                  # 29 per padded expert row
            float(cal.expert_gemm_min_rows),                                      # 30 rows per touched expert
            float(spec.experts_per_token),                                        # 31 k
            full_heads * prefill_score_s,                                         # 32 prefill score traffic per pair, full
            win_heads * prefill_score_s,                                          # 33 prefill score traffic per pair, windowed
            spec.moe_layers * spec.experts_per_token * spec.hidden_size * dtype_bytes(ad)
            * cal.expert_row_traffic_coeff * s_per_byte,                          # 34 routed rows' gather and combine, per token
            small_row_s,                                                          # 35 per row of small tiles (0: no tiles)
            large_row_s,                                                          # 36 per row of large tiles
            float(SMALL_TILE_ROWS_PER_EXPERT * spec.num_experts),                 # 37 routed rows below which tiles are small
            warp_row_s * full_lane,                                               # 38 softmax warp floor per position, full layers
            warp_row_s * win_lane,                                                # 39 softmax warp floor per position, windowed
            float(cal.attention_softmax_warp_max_tokens),                         # 40 longest row the warp kernel takes
            float(cal.attention_softmax_warp_after_tokens),                       # 41 positions the floor starts after
            ramp_layers * float(cal.attention_ramp_s),                            # 42 attention ramp's height, all its layers
            ramp_layers,                                                          # 43 the layers it applies to
            float(cal.attention_ramp_knee_s),                                     # 44 its knee, a layer's priced attention
        ))
        # cache lengths whose decode attention runs a slower kernel (Calibration.attention_context_factors)
        # (measured at some head widths and query heads a KV head: a model of other ones, or MLA, runs
        # other kernels)
        group = spec.num_attention_heads / spec.num_key_value_heads
        set_(self, "_context_windows", () if spec.attention_kind == "mla" else tuple(
            (float(a), float(b), float(f)) for a, b, f, d_lo, d_hi, g_lo, g_hi in (cal.attention_context_factors or ())
            if d_lo <= spec.head_dim <= d_hi and g_lo <= group <= g_hi))
        # a decoding sequence's score elements by the softmax kernel its row's length runs
        # (Calibration.attention_score_row_factors; MLA's latent attention runs its own): each step a
        # window of cache lengths up to the next step, priced as the context windows are
        steps = [] if spec.attention_kind == "mla" else [(float(a), float(f)) for a, f in
                                                         (cal.attention_score_row_factors or ())]
        set_(self, "_row_factors", tuple((a, b, f) for (a, f), b in zip(steps, [a for a, _ in steps[1:]] + [inf])))
        # with attention sinks the softmax runs over the cache and the sink: a cache of 2,048 positions
        # is a row of 2,049 (2,056 in the graph engine, padded to 8: the same side of every step, the
        # steps being multiples of 8), past the warp kernel's longest (device call 80: qwen3-30b-a3b's
        # layer with gpt-oss's at 2,048 positions runs no slower than at 4,104, its own 6 us slower)
        set_(self, "_softmax_extra_positions", 1.0 if spec.attention_sinks and spec.attention_kind != "mla" else 0.0)
        # the decode attention's measured factor by batched matrices and cache length (Calibration.
        # attention_kernel_table): the entry of this head width nearest in query heads a KV head
        # (within 2x; MLA's latent attention runs other kernels), with the price's own steps by length
        # (the windows and the softmax's kernels), which its interpolation does not cross
        # (dense models only: the probe ran the catalog's dense shapes, and the MoE fit's held-out set is
        # no better with it, 3.96% -> 4.06%)
        if cal.attention_kernel_table and spec.attention_kind != "mla" and not spec.moe_layers:
            near = [e for e in cal.attention_kernel_table
                    if e["head_dim"] == spec.head_dim and max(e["group"] / group, group / e["group"]) <= 2.0]
            if near:
                e = min(near, key=lambda e: (abs(math.log(e["group"] / group)), e["group"]))
                # (a slower kernel's window of lengths measured at this head width bounds the
                # interpolation whatever the query heads a KV head: the table itself measures the
                # factor inside it where the window's own was not measured)
                edges = sorted({x for a, b, _, d_lo, d_hi, _, _ in (cal.attention_context_factors or ())
                                if d_lo <= spec.head_dim <= d_hi for x in (float(a), float(b))}
                               | {a for a, _, _ in self._row_factors if a > 0})
                # below the fewest probed matrices the factor goes to 1 at half as many (fewer matrices
                # run other kernels, which the fitted terms price)
                lm = np.log2(np.asarray(e["matrices"], dtype=float))
                factors = np.asarray(e["factors"], dtype=float)
                table = (np.concatenate([[lm[0] - 1.0], lm]), np.asarray(e["contexts"], dtype=float),
                         np.vstack([np.ones((1, factors.shape[1])), factors]), tuple(edges),
                         spec.num_key_value_heads * kv_heads_share(spec.attention_kind, spec.num_key_value_heads, tp))
                # the same grid as Python lists: the float path's indexing (the simulators' hot loop)
                set_(self, "_kernel_table", table + tuple(x.tolist() for x in table[:3]))
        if self.routing_skew > 0 and spec.num_experts:
            set_(self, "_touched_table", _touched_table(spec.num_experts, spec.experts_per_token, self.routing_skew))
        if tiles:
            set_(self, "_tile_table", tile_rows_table(spec.num_experts, spec.experts_per_token, float(self.routing_skew)))
        if cal.index_kernel_table and spec.moe_layers:
            set_(self, "_index_excess", tuple(spec.moe_layers * x for x in layer_excess_s(
                cal.index_kernel_table, moe_index_ops(spec, tp), float(spec.experts_per_token))))
        if cal.expert_gemm_table and spec.moe_layers:
            set_(self, "_expert_nodes", layer_nodes(cal.expert_gemm_table, float(spec.hidden_size),
                                                    spec.moe_intermediate_size / tp))
        dtype_bytes(self.act_dtype)  # validate

    @property
    def link_bytes_per_s(self) -> float:
        """The bandwidth an all-reduce moves at, per direction per GPU (calibrated, else the card's link)."""
        cal = self.calibration
        if cal.allreduce_bandwidth_bytes_per_s:
            return cal.allreduce_bandwidth_bytes_per_s
        link = self.card.tp_link_bytes_per_s(self.tp)
        if not link:
            from roofline.errors import RooflineError

            raise RooflineError(f"{self.card.id} has no interconnect on record: tensor parallelism cannot be costed", "tp")
        return link

    @property
    def link_latency_s(self) -> float:
        """The fixed time of one all-reduce (calibrated, else the card's link figure, else 0)."""
        cal = self.calibration
        if cal.allreduce_latency_s is not None:
            return cal.allreduce_latency_s
        link = self.card.interconnect
        return (link.allreduce_latency_s if link else None) or 0.0

    @property
    def balance_point_flop_per_byte(self) -> float:
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    # ---- experts ----
    def experts_touched(self, tokens):
        """Distinct routed experts per MoE layer that ``tokens`` tokens are routed to (each to top-k of
        E): E·(1 − (1 − k/E)^tokens) under uniform routing; with ``routing_skew`` s, expert i is
        chosen by a token with probability min(1, k·p_i), p_i ∝ 1/i^s, and the sum of
        1 − (1 − that)^tokens is tabulated. 0 for a dense model."""
        c = self._c
        if not c[21]:
            return 0.0 if type(tokens) is float else np.zeros_like(np.asarray(tokens, dtype=float))
        if self._touched_table is None:
            if type(tokens) is float:
                return c[21] * (1.0 - c[22] ** tokens)
            return c[21] * (1.0 - c[22] ** np.asarray(tokens, dtype=float))
        grid, values = self._touched_table
        out = np.interp(np.asarray(tokens, dtype=float), grid, values)
        return float(out) if type(tokens) is float else out

    def expert_tile_rows(self, tokens):
        """Rows of grouped-GEMM tiles per MoE layer that a pass of ``tokens`` tokens computes (the
        calibration's tile path; 0 without it): roofline.step.tile_rows_table, interpolated, and past
        its last point k rows a token more."""
        if self._tile_table is None:
            return 0.0 if type(tokens) is float else np.zeros_like(np.asarray(tokens, dtype=float))
        return table_tile_rows(self._tile_table, self._c[31], tokens)

    # ---- the cost of a pass ----
    def overhead_s(self, decode_tokens, prefill_tokens):
        """The decode overhead for a decode step (and the per-layer extra of two or more sequences),
        the prefill's for a prefill, the larger for a mix."""
        c = self._c
        if type(decode_tokens) is float and type(prefill_tokens) is float:
            decode = self.decode_overhead_s + (c[28] if decode_tokens >= 2.0 else 0.0)
            if prefill_tokens > 0.0:
                return max(decode, c[0]) if decode_tokens > 0.0 else c[0]
            return decode
        d, p = np.asarray(decode_tokens, dtype=float), np.asarray(prefill_tokens, dtype=float)
        decode = self.decode_overhead_s + np.where(d >= 2.0, c[28], 0.0)
        return np.where(p > 0, np.where(d > 0, np.maximum(decode, c[0]), c[0]), decode)

    def pass_parts(self, work: PassWork) -> PassParts:
        """The overhead and each kernel family's times (seconds)."""
        return PassParts(*self._parts(work))

    def _parts(self, work) -> tuple:
        """pass_parts as a plain tuple: the formula, written once for floats and arrays alike."""
        d, kv, p, pairs, rows, kvw, pairsw = work
        c = self._c
        uncapped = kvw is None  # the windowed layers read what the full ones do
        if uncapped:
            kvw = kv
        if pairsw is None:
            pairsw = pairs
        score, scorew = c[17], c[18]
        tokens, tokens_w = kv, kvw  # the cached tokens read, before a window's factor scales them
        # the softmax's rows: each sequence's cache, and its sink where the model has one
        extra = self._softmax_extra_positions
        # (uncapped, the windowed layers' figures are the full ones': computed once, the same numbers)
        rk = kv + d * extra
        rkw = rk if uncapped else kvw + d * extra
        if c[38] or c[39]:  # the softmax's warp kernel's floor: its walk along the row, while it runs a warp a row
            t = _per_sequence(rk, d)
            tw = t if uncapped else _per_sequence(rkw, d)
            warp, warpw = _warp_floor(t, c[38], c[40], c[41]), _warp_floor(tw, c[39], c[40], c[41])
        if self._row_factors:  # the scores' cost by the softmax kernel their rows' length runs
            f = _window_factor(self._row_factors, rk, d)
            score, scorew = score * f, scorew * (f if uncapped else _window_factor(self._row_factors, rkw, d))
        if self._context_windows:  # a cache length in a slower kernel's window (windowed layers: their ring's)
            f = _window_factor(self._context_windows, kv, d)
            if uncapped:
                kv = kvw = kv * f
            else:
                kv, kvw = kv * f, kvw * _window_factor(self._context_windows, kvw, d)
        matmul_memory = c[2]
        matmul_compute = d * c[3] + p * c[4] + rows * c[5]
        expert_memory = expert_compute = 0.0
        if c[21]:
            tokens = d + p
            touched = self.experts_touched(tokens)
            if c[35]:  # by tiles: the experts' bytes against their tiles' FLOPs, beside the dense matmuls
                expert_memory = c[20] * touched
                if type(tokens) is float:
                    per_row = c[35] if tokens * c[31] < c[37] else c[36]
                else:
                    per_row = np.where(np.asarray(tokens, dtype=float) * c[31] < c[37], c[35], c[36])
                expert_compute = self.expert_tile_rows(tokens) * per_row
            elif self._expert_nodes is None:
                matmul_memory = matmul_memory + c[20] * touched
                if c[30]:
                    matmul_compute = matmul_compute + _max(c[30] * touched - (d + p) * c[31], 0.0 * touched) * c[29]
            if self._expert_nodes is not None:
                expert_memory, expert_compute = self._measured_experts(tokens, touched, expert_memory, expert_compute)
        written = d + p
        read = c[7] * kv + written
        kv_s = read * c[6] + (read if uncapped else c[7] * kvw + written) * c[14]
        if c[26] or c[27]:
            # the values' weighted sum is a reduction over each sequence's context that the kernel
            # runs serially: with few sequences it cannot go faster than context x the lane time
            each = _per_sequence(kv, d)
            lane = each * c[26] + (each if uncapped else _per_sequence(kvw, d)) * c[27]
            kv_s = 0.5 * kv_s + _max(0.5 * kv_s, lane)
        decode_attention = (kv_s + (_max(kv * score, warp) + _max(kvw * scorew, warpw) if c[38] or c[39]
                                    else kv * score + kvw * scorew) + d * c[19])
        written_s = p * (c[6] + c[14])  # the prompt's KV writes: not the decode attention's
        if c[42]:  # its fill and drain: a layer priced x seconds (not the prompt's KV writes) runs ramp x x / (x + knee) more
            x = _max(decode_attention - written_s, 0.0 * decode_attention) / c[43]
            decode_attention = decode_attention + c[42] * x / (x + c[44])
        if self._kernel_table is not None:  # as measured at its batched matrices and cache length (not the prompt's KV writes)
            table = self._kernel_table
            f = _table_factor(table, d * table[4], _per_sequence(tokens, d))
            if not uncapped:  # the windowed layers' rings: their own length's factor, by their share
                fw = _table_factor(table, d * table[4], _per_sequence(tokens_w, d))
                full, win = c[7] * kv * c[6] + kv * score, c[7] * kvw * c[14] + kvw * scorew
                both = full + win
                if type(both) is float:
                    f = (f * full + fw * win) / both if both > 0.0 else f
                else:
                    f = np.where(both > 0.0, (f * full + fw * win) / np.where(both > 0.0, both, 1.0), f)
            decode_attention = written_s + (decode_attention - written_s) * f
        return (
            self.overhead_s(d, p),
            matmul_memory,
            matmul_compute,
            decode_attention + pairs * c[32] + pairsw * c[33],
            kv * c[8] + pairs * c[9] + kvw * c[15] + pairsw * c[16],
            d * c[10] + p * c[11] + (d + p) * c[34] + (0.0 if self._index_excess is None
                                                       else excess_at(self._index_excess, (d + p) * c[31])),
            0.0 if c[23] == 0.0 and c[24] == 0.0 else c[23] + written * c[24] + (d + rows) * c[25],
            expert_memory,
            expert_compute,
        )

    def _measured_experts(self, tokens, touched, tile_memory, tile_compute):
        """(memory, compute) seconds of a pass's routed experts priced from the calibration's
        expert_gemm_table: each MoE layer's two grouped matmuls at the experts touched and the rows each
        gets (0 without tokens). Where the calibration has the tile rates too, the table prices experts
        of up to TABLE_ROWS_UP_TO rows and the tiles (their expected count under the routing, exact)
        from TILE_ROWS_FROM on, log time blended between: the table's points of many rows an expert
        are one routing draw each, whose tiles at a few experts stray from the expectation by up to a
        tile an expert. The time is memory while the rows an expert are fewer than the card's FLOPs
        per byte, else compute (for the breakdown)."""
        c = self._c
        ridge = self.peak_flop_per_s / self.bandwidth_bytes_per_s
        if type(tokens) is float and type(touched) is float:  # the simulators' hot loop: plain floats
            if tokens <= 0.0:
                return 0.0, 0.0
            rows_each = tokens * c[31] / max(touched, 1.0)
            t = self.spec.moe_layers * nodes_seconds(self._expert_nodes, touched, rows_each)
            if c[35]:
                w = min(max(log(max(rows_each, 1.0) / TABLE_ROWS_UP_TO) / log(TILE_ROWS_FROM / TABLE_ROWS_UP_TO), 0.0),
                        1.0)
                if w > 0.0:
                    tiles = max(tile_memory, tile_compute)
                    t = exp((1.0 - w) * log(max(t, 1e-30)) + w * log(max(tiles, 1e-30)))
            return (t, 0.0) if rows_each < ridge else (0.0, t)
        rows_each = tokens * c[31] / _max(touched, 1.0 + 0.0 * touched)
        t = self.spec.moe_layers * nodes_seconds(self._expert_nodes, touched, rows_each)
        if c[35]:
            w = np.clip(np.log(np.maximum(rows_each, 1.0) / TABLE_ROWS_UP_TO) / log(TILE_ROWS_FROM / TABLE_ROWS_UP_TO),
                        0.0, 1.0)
            tiles = _max(tile_memory, tile_compute)
            t = np.where(w <= 0.0, t, np.exp((1.0 - w) * np.log(np.maximum(t, 1e-30))
                                             + w * np.log(np.maximum(tiles, 1e-30))))
        t = np.where(np.asarray(tokens) > 0.0, t, 0.0)
        on_memory = np.asarray(rows_each) < ridge
        return np.where(on_memory, t, 0.0), np.where(on_memory, 0.0, t)

    def prefill_fitted_compute_s(self, work: PassWork):
        """Seconds of ``work``'s prefill matmuls at the fitted prefill efficiency (the dense ones and
        the LM head's; the routed experts' and the attention's run at rates probes measured)."""
        per_token, per_row = self._prefill_fitted_s
        return np.asarray(work[2], dtype=float) * per_token + np.asarray(work[4], dtype=float) * per_row

    def pass_s(self, work: PassWork):
        """Seconds of one pass doing ``work`` (a PassWork, or any tuple of its seven counts in its order)."""
        o, mm, mc, am, ac, el, co, em, ec = self._parts(work)
        c = self._c
        p = c[12]
        gemm = (pnorm(mm, mc, p) + _max(em, ec) if c[35] or self._expert_nodes is not None
                else pnorm(mm, mc, p))  # (the simulators' hot loop)
        return pnorm(o, gemm + pnorm(am, ac, p) + el + co, c[13])

    def work_s(self, work: PassWork):
        """``pass_s`` without the fixed overhead: the kernels' own time (what a CUDA-graph replay
        of the pass costs beyond its launch floor; roofline.pass_costs.LoopCost)."""
        _, mm, mc, am, ac, el, co, em, ec = self._parts(work)
        p = self._c[12]
        return pnorm(mm, mc, p) + _max(em, ec) + pnorm(am, ac, p) + el + co

    def pass_breakdown(self, work: PassWork) -> dict:
        """``pass_s`` with where the time goes: total, overhead, memory (the families whose bytes
        outweigh their FLOPs, the elementwise kernels and the collectives) and compute (the
        others); arrays."""
        o, mm, mc, am, ac, el, co, em, ec = (np.asarray(x, dtype=float) for x in self._parts(work))
        p = self._c[12]
        gemm, attn, experts = pnorm(mm, mc, p), pnorm(am, ac, p), np.maximum(em, ec)
        total = pnorm(o, gemm + experts + attn + el + co, self._c[13])
        gemm_on_memory, attn_on_memory, experts_on_memory = mm >= mc, am >= ac, em >= ec
        memory_s = (np.where(gemm_on_memory, gemm, 0.0) + np.where(attn_on_memory, attn, 0.0)
                    + np.where(experts_on_memory, experts, 0.0) + el + co)
        compute_s = (np.where(gemm_on_memory, 0.0, gemm) + np.where(attn_on_memory, 0.0, attn)
                     + np.where(experts_on_memory, 0.0, experts))
        shape = np.broadcast(total, memory_s, compute_s).shape
        return {
            "step_s": np.broadcast_to(total, shape),
            "overhead_s": np.broadcast_to(o, shape),
            "memory_s": np.broadcast_to(memory_s, shape),
            "compute_s": np.broadcast_to(compute_s, shape),
            "collectives_s": np.broadcast_to(co, shape),
        }

    # ---- the work's plain counts (for the lesson's columns) ----
    def linear_flop(self, work: PassWork):
        """Matmul FLOPs of the pass, one GPU's share."""
        spec = self.spec
        d, _, p, _, rows, _, _ = work
        return (d * float(spec.linear_flop_per_token) + p * float(spec.body_linear_flop_per_token)
                + rows * float(spec.lm_head_flop_per_position)) / self.tp

    def attention_flop(self, work: PassWork):
        """Attention FLOPs of the pass (windows applied), one GPU's share."""
        d, kv, p, pairs, rows, kvw, pairsw = work
        kvw = kv if kvw is None else kvw
        pairsw = pairs if pairsw is None else pairsw
        return (kv * self.attention_flop_per_pair + pairs * self.prefill_flop_per_pair
                + kvw * self.attention_window_flop_per_pair + pairsw * self.prefill_window_flop_per_pair)

    def weight_bytes_read(self, work: PassWork):
        """Weight bytes the pass reads (dense weights and the experts its tokens touch), one GPU's share."""
        tokens = work[0] + work[2]
        return self.dense_read_bytes + self.spec.moe_layers * self.expert_bytes * self.experts_touched(tokens)

    def bytes_counted(self, work: PassWork):
        """The lesson's count: weights once plus the KV cache read (or, for a prefill, written) once."""
        d, kv, p, _, _, kvw, _ = work
        kvw = kv if kvw is None else kvw
        full = self.kv_bytes_per_token - self.kv_window_bytes_per_token
        return self.weight_bytes_read(work) + (kv + p) * full + (kvw + p) * self.kv_window_bytes_per_token


def _per_sequence(total, sequences):
    """total / sequences (0 where there are none), for floats or arrays."""
    if type(total) is float and type(sequences) is float:
        return total / sequences if sequences > 0.0 else 0.0
    total, sequences = np.asarray(total, dtype=float), np.asarray(sequences, dtype=float)
    shape = np.broadcast_shapes(total.shape, sequences.shape)
    return np.divide(total, sequences, out=np.zeros(shape), where=sequences > 0)


def _table_factor(table, matrices, tokens):
    """The kernel table's factor (StepModel._kernel_table: log2 matrices, lengths, factors, the price's
    steps by length, the KV heads; then the first three again as lists) at ``matrices`` batched matrices and caches of ``tokens`` positions: linear in
    log2 matrices and in length between the probed ones, the ends held; between two probed lengths
    with a step of the price's own factors between them, the value on the query's side of it."""
    edges = table[3]
    if type(matrices) is float and type(tokens) is float:
        lm, cs, F = table[5], table[6], table[7]  # lists: the same numbers, indexed without numpy's cost
        x = min(max(math.log2(matrices) if matrices > 1.0 else 0.0, lm[0]), lm[-1])
        t = min(max(tokens, cs[0]), cs[-1])
        i = min(max(bisect.bisect_right(lm, x) - 1, 0), len(lm) - 2)
        j = min(max(bisect.bisect_right(cs, t) - 1, 0), len(cs) - 2)
        wi = (x - lm[i]) / (lm[i + 1] - lm[i])
        wj = (t - cs[j]) / (cs[j + 1] - cs[j])
        for e in edges:
            if cs[j] <= e < cs[j + 1]:
                wj = 0.0 if t <= e else 1.0
        lo = F[i][j] * (1.0 - wj) + F[i][j + 1] * wj
        hi = F[i + 1][j] * (1.0 - wj) + F[i + 1][j + 1] * wj
        return float(lo * (1.0 - wi) + hi * wi)
    lm, cs, F = table[0], table[1], table[2]
    # each axis's index and weight on its own input's shape (a sweep's matrices vary by batch, its
    # lengths by context), broadcast only where the grid's values are gathered
    x = np.clip(np.log2(np.maximum(np.asarray(matrices, dtype=float), 1.0)), lm[0], lm[-1])
    t = np.clip(np.asarray(tokens, dtype=float), cs[0], cs[-1])
    i = np.clip(np.searchsorted(lm, x, side="right") - 1, 0, len(lm) - 2)
    j = np.clip(np.searchsorted(cs, t, side="right") - 1, 0, len(cs) - 2)
    wi = (x - lm[i]) / (lm[i + 1] - lm[i])
    wj = (t - cs[j]) / (cs[j + 1] - cs[j])
    for e in edges:
        wj = np.where((cs[j] <= e) & (e < cs[j + 1]), np.where(t <= e, 0.0, 1.0), wj)
    lo = F[i, j] * (1.0 - wj) + F[i, j + 1] * wj
    hi = F[i + 1, j] * (1.0 - wj) + F[i + 1, j + 1] * wj
    return lo * (1.0 - wi) + hi * wi


def _warp_floor(tokens, s_per_token, most, after):
    """(tokens - after) x s_per_token where a row of ``tokens`` positions runs the softmax's warp kernel
    (after < tokens <= most), else 0; for floats or arrays."""
    if type(tokens) is float:
        return (tokens - after) * s_per_token if after < tokens <= most else 0.0
    tokens = np.asarray(tokens, dtype=float)
    return np.where((tokens > after) & (tokens <= most), (tokens - after) * s_per_token, 0.0)


def _max(a, b):
    """max for floats, np.maximum otherwise."""
    if type(a) is float and type(b) is float:
        return a if a >= b else b
    return np.maximum(a, b)


def kv_heads_share(kind: str, kv_heads: int, tp: int) -> float:
    """Fraction of a layer's cached KV one GPU holds: 1/tp of the KV heads, but at least one head
    (replicated where the GPUs outnumber them); an MLA latent is shared by every head, so each GPU
    holds all of it."""
    if kind == "mla" or tp == 1:
        return 1.0
    return max(1.0 / tp, 1.0 / kv_heads)


def _touched_table(experts: int, top_k: int, skew: float, max_tokens: int = 1 << 16):
    """(tokens grid, experts touched) for skewed routing: expert i (popularity ∝ 1/i^skew) is chosen by
    a token with probability r_i = min(1, c·p_i), c set so that Σ r_i = k (each token picks exactly k
    experts; an expert cannot be picked twice); touched(N) = Σ_i 1 − (1 − r_i)^N."""
    r = routing_probabilities(experts, top_k, skew)
    grid = np.unique(np.concatenate([np.arange(0, 1025, dtype=float), np.geomspace(1024, max_tokens, 400)]))
    log_miss = np.log1p(-np.minimum(r, 1.0 - 1e-15))
    values = experts - np.exp(np.outer(grid, log_miss)).sum(axis=1)
    return grid, values


def routing_probabilities(experts: int, top_k: int, skew: float) -> np.ndarray:
    """Each expert's chance of being among a token's top k: k/E each under uniform routing (skew
    0); with skew s, min(1, c·p_i) for popularity p_i ∝ 1/i^s, c set so that they sum to k."""
    if skew <= 0:
        return np.full(experts, top_k / experts)
    p = 1.0 / np.arange(1, experts + 1, dtype=float) ** skew
    lo, hi = 0.0, float(top_k) / p.min()
    for _ in range(200):  # bisection on c: Σ min(1, c·p_i) grows with c from 0 to E >= k
        c = 0.5 * (lo + hi)
        lo, hi = (c, hi) if np.minimum(1.0, c * p).sum() < top_k else (lo, c)
    return np.minimum(1.0, hi * p)


def tile_grid(experts: int, top_k: int) -> np.ndarray:
    """The tokens at which ``tile_rows_table`` is computed: every count to 1,024, then 200 steps
    to TILE_TABLE_MAX_TOKENS, whole numbers, and the two counts either side of the switch to the
    large tiles (a pass's tokens x k against SMALL_TILE_ROWS_PER_EXPERT x E)."""
    switch = -(-SMALL_TILE_ROWS_PER_EXPERT * experts // top_k)  # the fewest tokens on the large tiles
    geo = np.floor(np.geomspace(1024, TILE_TABLE_MAX_TOKENS, 201) + 0.5)
    return np.unique(np.concatenate([np.arange(0, 1025, dtype=float), geo, [switch - 1.0, float(switch)]]))


def tile_row_flop(hidden: float, inter: float, cols: int) -> float:
    """FLOPs of one row of tiles through an expert's gate-up (2 x intermediate columns over hidden)
    and down (hidden columns over intermediate), the columns padded to whole tiles of ``cols``."""
    return 2.0 * (hidden * ceil(2.0 * inter / cols) * cols + inter * ceil(hidden / cols) * cols)


def table_tile_rows(table, top_k: float, tokens):
    """Rows of tiles a pass of ``tokens`` computes per MoE layer from ``tile_rows_table``'s (grid,
    values): interpolated, and past its last point ``top_k`` rows a token more (float in, float out)."""
    grid, values = table
    t = np.asarray(tokens, dtype=float)
    out = np.interp(t, grid, values) + np.maximum(t - grid[-1], 0.0) * top_k
    return float(out) if type(tokens) is float else out


def _tile_window(n: int, q: float) -> tuple[int, int]:
    """Binomial(n, q)'s support that matters: mean +- 8 sd and 8 more (outside it < 1e-14)."""
    mean, sd = n * q, sqrt(n * q * (1.0 - q))
    return max(0, int(mean - 8.0 * sd) - 8), min(n, int(mean + 8.0 * sd) + 8)


@lru_cache(maxsize=64)
def tile_rows_table(experts: int, top_k: int, skew: float = 0.0):
    """(tokens grid, rows of tiles per MoE layer) for the grouped GEMM: a pass of T tokens routes
    r_i ~ Binomial(T, q_i) rows to expert i (q_i: routing_probabilities), which computes ceil(r_i / h)
    tiles of h rows (h = 64 while T·k < 129·E, else 128: SMALL_TILE, LARGE_TILE); the table holds
    Σ_i h·E[ceil(r_i / h)] = Σ_i h·Σ_{j >= 0} P(r_i > j·h) at each of tile_grid's tokens. An expert
    whose rows stay below one tile adds h·P(r_i > 0) = h·(1 - (1 - q_i)^T)."""
    from scipy.stats import binom

    grid = tile_grid(experts, top_k)
    probs, counts = np.unique(routing_probabilities(experts, top_k, skew), return_counts=True)
    values = np.zeros(len(grid))
    cells, xs, ns, qs = [], [], [], []  # the tails P(r > j h) inside a window, computed in one call
    for g, tokens in enumerate(grid):
        n = int(tokens)
        h = SMALL_TILE[0] if n * top_k < SMALL_TILE_ROWS_PER_EXPERT * experts else LARGE_TILE[0]
        total = 0.0
        for qi, count in zip(probs.tolist(), counts.tolist()):
            if qi >= 1.0:
                total += count * -(-n // h)
                continue
            lo, hi = _tile_window(n, qi)
            if hi < h:
                total += count * -np.expm1(n * np.log1p(-qi))
                continue
            total += count * -(-lo // h)  # j h < lo: certain
            for j in range(-(-lo // h), hi // h + 1):
                cells.append(g), xs.append(j * h), ns.append(n), qs.append((qi, count))
        values[g] = h * total
    if cells:
        q_arr, c_arr = np.array(qs).T
        tails = binom.sf(np.array(xs), np.array(ns), q_arr)
        hs = np.where(np.array(ns) * top_k < SMALL_TILE_ROWS_PER_EXPERT * experts, SMALL_TILE[0], LARGE_TILE[0])
        np.add.at(values, np.array(cells), hs * c_arr * tails)
    return grid, values


#: a plain MLP's intermediate element in decode's elementwise traffic, per gated one, where the
#: calibration has not measured both (``plain_mlp_activation_weight``): GELU reads and writes the
#: intermediate once (2 I elements moved), silu-and-multiply moves 5 I (silu reads the gate and
#: writes it, the product reads it and up and writes I)
PLAIN_MLP_ACTIVATION_WEIGHT = 0.4


def plain_mlp_activation_weight(cal: Calibration) -> float:
    """What a plain (GELU) MLP's intermediate element weighs in the decode activation width, per a
    gated MLP's: the prefill-kernels probe's measured cost of one over the other where the
    calibration has both (the same kernels run at a decode step's rows; on the H200's graph engine
    5.8 against 25.7 bytes an element, 0.23), else PLAIN_MLP_ACTIVATION_WEIGHT."""
    per = cal.prefill_elementwise_bytes_per_element or {}
    gated, plain = float(per.get("gated_intermediate", 0.0)), float(per.get("plain_intermediate", 0.0))
    return plain / gated if gated > 0.0 and plain > 0.0 else PLAIN_MLP_ACTIVATION_WEIGHT


def activation_width_bytes(spec: ModelSpec, act_dtype: str = "bf16", plain_weight: float = 1.0) -> float:
    """Bytes of one token's activations across every layer's elementwise kernels, per unit of the
    calibration's activation-traffic coefficient: Σ layers (hidden + active intermediate) x act
    bytes, a plain MLP's intermediate weighted by ``plain_weight`` (plain_mlp_activation_weight;
    1 counts it as a gated one's)."""
    return (float(spec.activation_width_per_token) * dtype_bytes(act_dtype)
            - (1.0 - plain_weight) * plain_intermediate_bytes(spec, act_dtype))


def plain_intermediate_bytes(spec: ModelSpec, act_dtype: str = "bf16") -> float:
    """Bytes of a plain MLP's intermediate per token, all layers (0 for a gated MLP): what
    activation_width_bytes takes off at a plain_weight below 1 (the chart's port reads it)."""
    return float(spec.prefill_elementwise_elements["plain_intermediate"]) * dtype_bytes(act_dtype)


def head_dim_rate(rates: dict | None, head_dim: float) -> float | None:
    """The FLOP rate of ``rates`` ({head_dim: FLOP/s}) at ``head_dim``: linear in log head width
    between the measured ones, the nearest one's beyond them; None without rates."""
    if not rates:
        return None
    pts = sorted((float(k), float(v)) for k, v in rates.items())
    if head_dim <= pts[0][0]:
        return pts[0][1]
    if head_dim >= pts[-1][0]:
        return pts[-1][1]
    for (h0, r0), (h1, r1) in zip(pts, pts[1:]):
        if h0 <= head_dim <= h1:
            f = log(head_dim / h0) / log(h1 / h0)
            return r0 + f * (r1 - r0)
    return pts[-1][1]


def bound_index(overhead_s, memory_s, compute_s):
    """0, 1 or 2: which of overhead, memory and compute time is largest (BOUNDS)."""
    return np.where(overhead_s >= np.maximum(memory_s, compute_s), 0, np.where(memory_s >= compute_s, 1, 2))
