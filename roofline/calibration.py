"""A calibration: the terms that turn a pure roofline into a card + engine's measured times.

The pure roofline says a decode step takes max(bytes / bandwidth, FLOPs / peak). Real engines
add a fixed cost per step (kernel launches, Python), reach only a fraction of each ceiling, move
more KV bytes than the cache holds (a dynamic cache that grows by concatenation copies it), and
overlap memory and compute imperfectly. Each of those is one named, bounded term here (``TERMS``:
the one table of defaults and bounds, used by the model's validation and by the fit);
``fit.py`` fits them to measurements. ``Calibration.uncalibrated()`` is the pure roofline.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from stat import S_ISREG
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from roofline.errors import RooflineError

#: The exponent at and above which the p-norm combination is taken as exactly max(a, b)
#: (at p = 400 the p-norm is within 0.2% of the max anyway).
MAX_EXPONENT = 400.0


class Term(NamedTuple):
    """One calibration term: its default (the pure roofline's value), the bounds a calibration
    must respect, and the narrower range a fit searches (``fit_lower``/``fit_upper``; the
    model's bounds where None), on a log scale when ``log``."""

    default: float
    lower: float
    upper: float
    description: str
    lower_open: bool = False
    log: bool = False
    fit_lower: float | None = None
    fit_upper: float | None = None

    @property
    def fit_bounds(self) -> tuple[float, float]:
        lo = self.lower if self.fit_lower is None else self.fit_lower
        hi = self.upper if self.fit_upper is None else self.fit_upper
        return lo, hi


INF = math.inf
TERMS: dict[str, Term] = {
    # decode step
    "step_overhead_s": Term(0.0, 0.0, INF, "fixed cost of one decode step, s", fit_upper=1.0),
    "layer_overhead_s": Term(0.0, 0.0, INF, "cost per layer per decode step, s", fit_upper=0.05),
    "bandwidth_efficiency": Term(1.0, 0.0, 1.0, "fraction of the bandwidth ceiling reached", lower_open=True,
                                 fit_lower=0.05),
    "compute_efficiency": Term(1.0, 0.0, 1.0, "fraction of the compute ceiling the weight matmuls reach",
                               lower_open=True, fit_lower=0.05),
    "attention_efficiency": Term(1.0, 0.0, 1.0, "fraction of the compute ceiling decode attention (QK^T, AV) reaches",
                                 lower_open=True, log=True, fit_lower=1e-3),
    "kv_traffic_factor": Term(1.0, 0.5, 16.0, "KV bytes moved per KV byte held, per step"),
    "activation_traffic_coeff": Term(
        0.0, 0.0, 64.0, "elementwise-kernel bytes per token per layer, in units of (hidden + intermediate) x act bytes"),
    "roofline_exponent": Term(MAX_EXPONENT, 1.0, MAX_EXPONENT, "p of (mem^p + compute^p)^(1/p); 1 adds, large takes max",
                              log=True),
    "overhead_exponent": Term(1.0, 1.0, MAX_EXPONENT, "q combining overhead with the roofline; 1 adds, large overlaps",
                              log=True),
    "attention_score_bytes": Term(
        0.0, 0.0, 64.0, "bytes moved per attention score element (query head x cached token x layer) in decode"),
    "attention_lane_s_per_token": Term(
        0.0, 0.0, INF, "decode attention's serial time per cached token of one (sequence, KV head), per layer: the "
        "values' weighted sum over the context is a reduction the kernel does not split (one output tile spans the "
        "head width), its floor when few sequences run, s", fit_upper=3e-8),
    "batch_layer_overhead_s": Term(
        0.0, 0.0, INF, "extra cost per layer of a decode pass of two or more sequences (kernels a single sequence "
        "does not launch, e.g. a copy its contiguous layout avoids), s", fit_upper=1e-4),
    "attention_sequence_overhead_s": Term(
        0.0, 0.0, INF, "decode attention's cost per sequence per layer, s", fit_upper=1e-4),
    "moe_layer_overhead_s": Term(0.0, 0.0, INF, "extra cost per mixture-of-experts layer per pass (routing), s",
                                 fit_upper=1e-3),
    "expert_traffic_factor": Term(
        1.0, 1.0, 16.0, "time per routed-expert byte relative to a dense weight byte (grouped GEMM efficiency; not used "
        "where expert_gemm_table prices the experts: then the tile path's, fitted without the table)"),
    "expert_row_traffic_coeff": Term(
        0.0, 0.0, 256.0, "bytes a mixture-of-experts layer moves per routed (token, expert) row outside its matmuls -- "
        "the token gathered into the expert-sorted rows and the weighted scatter-add back (atomic adds, each "
        "rewriting a whole sector) -- in units of hidden x act bytes; measured by the MoE probe"),
    "expert_gemm_min_rows": Term(
        0.0, 0.0, 4096.0, "rows a grouped GEMM computes per touched expert at least (its tile height: an expert "
        "with fewer routed tokens still costs that many rows)", fit_upper=512.0),

    # prefill
    "prefill_overhead_s": Term(0.0, 0.0, INF, "fixed cost of a prefill, s", fit_upper=10.0),
    "prefill_compute_efficiency": Term(1.0, 0.0, 1.25, "fraction of peak reached by prefill (the peak: a measured "
                                       "8192^3 GEMM's rate, or the datasheet's; a prefill's larger matmuls, in the "
                                       "boost clock's first tens of ms of load, can run a few % above it)",
                                       lower_open=True, fit_lower=0.02),
    "prefill_activation_traffic_coeff": Term(
        0.0, 0.0, 64.0, "as activation_traffic_coeff, for the prefill's large-M elementwise kernels"),
    "prefill_score_bytes": Term(
        0.0, 0.0, 64.0, "bytes moved per prefill attention score element (query head x causal (query, key) pair x "
        "layer): an attention that materialises its score matrix (llama.cpp without flash attention: the F32 KQ "
        "written, softmaxed, converted and read again) rather than keeping it on chip"),
    # memory
    "activation_coeff": Term(
        3.0, 0.0, 64.0, "prefill transient activations, in units of tokens x intermediate_size x act bytes"),
    "workspace_bytes": Term(0.0, 0.0, INF, "fixed allocator/library workspace, bytes", fit_upper=64e9),
}
DECODE_TERMS = ("step_overhead_s", "layer_overhead_s", "bandwidth_efficiency", "compute_efficiency",
                "attention_efficiency", "kv_traffic_factor", "activation_traffic_coeff", "roofline_exponent",
                "overhead_exponent", "batch_layer_overhead_s")
#: Decode terms a fit only frees when its measurements can tell them apart (several contexts;
#: MoE models; tensor-parallel runs): see roofline.fitting.
CONTEXT_TERMS = ("attention_score_bytes", "attention_lane_s_per_token", "attention_sequence_overhead_s")
MOE_TERMS = ("moe_layer_overhead_s", "expert_traffic_factor", "expert_gemm_min_rows")
PREFILL_TERMS = ("prefill_overhead_s", "prefill_compute_efficiency", "prefill_activation_traffic_coeff")
MEMORY_TERMS = ("activation_coeff", "workspace_bytes")


def _field(name: str):
    t = TERMS[name]
    bounds = {"gt" if t.lower_open else "ge": t.lower}
    if t.upper < INF:
        bounds["le"] = t.upper
    return Field(t.default, description=t.description, **bounds)


def _table(v: dict | None, known, what: str, unit: str, most: float = math.inf, most_text: str = ""):
    """A by-kind table of a calibration: known keys, finite values >= 0 (and at most ``most``)."""
    if v is None:
        return v
    unknown = sorted(set(v) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)} (known: {', '.join(known)})")
    if any(not math.isfinite(x) or x < 0 or x > most for x in v.values()):
        raise ValueError(f"{unit} must be finite and >= 0" + (f" and at most {most_text}" if most_text else ""))
    return v


class Calibration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    card: str = Field(description="card id the terms were fitted on")
    engine: str = Field(description="decode engine, e.g. hf-eager or graph")
    kv_cache: Literal["dynamic", "static"] = "dynamic"
    # decode step
    step_overhead_s: float = _field("step_overhead_s")
    layer_overhead_s: float = _field("layer_overhead_s")
    bandwidth_efficiency: float = _field("bandwidth_efficiency")
    compute_efficiency: float = _field("compute_efficiency")
    attention_efficiency: float = _field("attention_efficiency")
    kv_traffic_factor: float = _field("kv_traffic_factor")
    activation_traffic_coeff: float = _field("activation_traffic_coeff")
    roofline_exponent: float = _field("roofline_exponent")
    overhead_exponent: float = _field("overhead_exponent")
    attention_score_bytes: float = _field("attention_score_bytes")
    attention_lane_s_per_token: float = _field("attention_lane_s_per_token")
    batch_layer_overhead_s: float = _field("batch_layer_overhead_s")
    attention_sequence_overhead_s: float = _field("attention_sequence_overhead_s")
    moe_layer_overhead_s: float = _field("moe_layer_overhead_s")
    expert_traffic_factor: float = _field("expert_traffic_factor")
    expert_gemm_min_rows: float = _field("expert_gemm_min_rows")
    expert_row_traffic_coeff: float = _field("expert_row_traffic_coeff")
    # tensor parallelism: the link as measured with the runs (roofline.collectives); default the card's
    allreduce_latency_s: float | None = Field(None, ge=0, description="fixed time of one all-reduce, s")
    allgather_latency_s: float | None = Field(None, ge=0, description="fixed time of the logits all-gather, s")
    allreduce_bandwidth_bytes_per_s: float | None = Field(
        None, gt=0, description="bandwidth an all-reduce moves at, per direction per GPU")
    # prefill
    prefill_overhead_s: float = _field("prefill_overhead_s")
    prefill_compute_efficiency: float = _field("prefill_compute_efficiency")
    prefill_activation_traffic_coeff: float = _field("prefill_activation_traffic_coeff")
    prefill_score_bytes: float = _field("prefill_score_bytes")
    # memory
    activation_coeff: float = _field("activation_coeff")
    workspace_bytes: float = _field("workspace_bytes")
    # facts of the engine's decode-attention kernels (read from its code, not fitted)
    mla_latent_passes: float = Field(
        1.0, ge=1.0, le=4.0, description="times decode attention reads an MLA latent per step (the graph engine's "
        "absorbed kernel: once for the scores, once more for the values' latent: (2r + rope) / (r + rope))")
    sink_score_bytes: float = Field(
        0.0, ge=0.0, le=64.0, description="extra bytes per score element in layers with attention sinks (the graph "
        "engine concatenates the sink column to the scores, then slices the probabilities: two more passes)")
    prefill_chunk_tokens: int | None = Field(
        None, gt=0, description="the engine prefills at most this many tokens per forward (whole sequences); None: all at once")
    decode_logits_buffers: float = Field(
        1.0, ge=1.0, le=4.0, description="a decode step's logits buffers (batch x vocabulary x activation bytes each) "
        "alive at the engine's memory peak: the graph engine holds two, its eager warm-up step's (StepState.logits) "
        "while its captured graph allocates its own")
    decode_score_buffers: float = Field(
        0.0, ge=0.0, le=4.0, description="a decode step's attention score buffers (sequences x query heads x cached "
        "slots x activation bytes each, one layer's) alive at the engine's memory peak: the graph engine's decode "
        "attention holds two, the scores (baddbmm) and their softmax; 0: not counted (an engine whose decode "
        "attention does not materialise its scores, or one not read)")
    prefill_attention_flop_per_s: dict[str, float] | None = Field(
        None, description="the engine's prefill attention FLOP rate by head width ({head_dim: FLOP/s}), measured "
        "alone by the prefill-attention probe (calibrate.probes; median over prompts of 4,096 tokens and more): a "
        "prompt's attention pairs are priced at the rate of the model's head width (log-interpolated, clamped) "
        "instead of the prefill matmuls'; None: at the matmuls' rate")
    masked_prefill_attention_flop_per_s: dict[str, float] | None = Field(
        None, description="the engine's masked prefill attention FLOP rate by computed head width ({head_dim: "
        "FLOP/s}), measured by the masked-attention probe (calibrate.probes): where a window is shorter than the "
        "prompt, or the model has attention sinks, the graph engine runs SDPA with an explicit mask over every "
        "tile of the (P, P [+1]) square, K/V repeated to every head (sinks: the head padded to d + 1 rounded up "
        "to 8); those layers' prompt attention is priced so; None: as the window's causal pairs")
    expert_prefill_flop_per_s: float | None = Field(
        None, gt=0, description="the rate a prefill's routed-expert matmuls run at (FLOP/s): the engine's grouped "
        "GEMMs, measured alone by the MoE probe (calibrate.probes) at the fitted MoE models' shapes (median over "
        "16,384 tokens and more); a prompt token's routed-expert FLOPs are priced at it instead of the prefill "
        "matmuls' rate; None: at the prefill matmuls' rate")
    expert_small_tile_efficiency: float | None = Field(
        None, gt=0, le=2, description="the rate of a decode's grouped expert matmuls on the engine's small-tile "
        "path, as a fraction of the matmul ceiling (measured_peak_flop_per_s, else the card's), per FLOP of the "
        "tiles it computes: torch._grouped_mm runs an expert's routed rows in tiles of 64 rows x 128 columns "
        "while the rows an expert, averaged over all experts, are fewer than 129, so a touched expert with r rows "
        "computes ceil(r / 64) x 64 of them (roofline.step.expert_tile_rows); fitted with the large path's rate, "
        "a bandwidth and a fixed time on the MoE probe's grouped matmuls at the fitted MoE model's shape "
        "(roofline.probes.moe_tile_efficiencies). With it a pass's routed experts cost max(their weight bytes, "
        "their tiles' FLOPs at this rate), added to the dense matmuls' roofline, and expert_gemm_min_rows is not "
        "used; None: the routed rows' FLOPs join the dense matmuls' at the decode rate (with "
        "expert_gemm_min_rows' padding)")
    expert_large_tile_efficiency: float | None = Field(
        None, gt=0, le=2, description="as expert_small_tile_efficiency, for the large-tile path (128 rows x 256 "
        "columns: 129 rows an expert on average and more, a prefill's size)")
    prefill_elementwise_bytes_per_element: dict[str, float] | None = Field(
        None, description="bytes per element of a prefill layer's non-matmul kernels, by kind (hidden, "
        "gated_intermediate, plain_intermediate, query, key_value, qk_norm, clamped_intermediate: "
        "roofline.probes.ELEMENTWISE_KINDS), at the bandwidth ceiling (measured_bandwidth_bytes_per_s, else the "
        "card's): the prefill-kernels probe's seconds per element (calibrate.probes: the engine's eager prefill "
        "profiled kernel by kernel at generic shapes, non-negative least squares) x that ceiling, so another card "
        "prices them at its own; a prompt token's elementwise time is the sum over kinds of these x the model's "
        "elements (ModelSpec.prefill_elementwise_elements) / the ceiling, added to the "
        "prefill_activation_traffic_coeff term (held at 0 where this is measured); None: that term alone")
    layer_feature_overhead_s: dict[str, float] | None = Field(
        None, description="seconds a decode step spends per layer that has a feature, on that feature's own "
        "kernels, by feature (qk_norm, biased_experts: roofline.probes.LAYER_FEATURES; the layers with it: "
        "ModelSpec.decode_layer_features): the layer-features probe's (calibrate.probes: the engine's decode step "
        "at a fitted model's shape with the feature switched on, cut to two layer counts, batches 1-16), added to "
        "the step's fixed overhead; None: 0 (the feature's kernels priced only through the fitted per-layer time "
        "of models without it)")
    attention_context_factors: list[tuple[float, float, float, float, float, float, float]] | None = Field(
        None, description="windows of cached positions where the engine's decode attention runs a slower kernel: "
        "(after_tokens, to_tokens, factor, head_dim_from, head_dim_to, group_from, group_to), a decoding "
        "sequence's cache of more than after_tokens and at most to_tokens positions costs factor x its price (a "
        "windowed layer's: its ring of at most the window) in a model whose head width and query heads per KV head "
        "are within the probed ones (GQA/MHA; an MLA layer's latent runs other kernels); the attention-contexts probe's "
        "(calibrate.probes: the engine's decode attention alone at generic shapes over cache lengths around the "
        "powers of two; roofline.probes.attention_context_factors); None: none")
    attention_kernel_table: list[dict] | None = Field(
        None, description="the decode attention's measured time over its price, by head shape, batched matrices and "
        "cache length: entries {head_dim, group, matrices: [...], contexts: [...], factors: [[...] per matrices]}. "
        "cuBLAS picks the decode attention's QK kernel by the number of batched matrices (batch x KV heads a GPU) "
        "as well as by the row's length, in pockets no smooth term follows (the H200's 64-wide heads 1.3-1.7x "
        "their price at 1,024-2,048 matrices at some lengths, ~1.0 at the neighbours). A model of the entry's "
        "head width and within a factor of two of its query heads a KV head (the nearest; not MLA) has each "
        "decoding layer's attention priced x the factor at its matrices (linear in log2 between the probed ones, "
        "the ends held) and cache length (linear between the probed ones, not across a step of the price's own "
        "factors by length: the same side's value). The attention-table probe's (calibrate.probes: the engine's "
        "decode attention alone; roofline.probes.attention_kernel_table: measured less its launch-level time, over "
        "the price without the table; 1 where the price is under 5 us, in full from 10 us); None: none")
    expert_gemm_table: dict | None = Field(
        None, description="the experts' grouped matmul (torch._grouped_mm) alone, as measured at generic shapes: "
        "{ks, ns, groups, rows: ascending lists; seconds: K x N x groups x rows} (the grouped-mm probe: "
        "calibrate.probes --what grouped-mm; roofline.grouped_mm.read_grouped_mm). Where set, a pass's routed "
        "experts cost, each MoE layer, its gate-up (K hidden, N 2 x expert width) and down (K expert width, N "
        "hidden) at the experts it touches and the rows each gets (tokens x k / touched), interpolated in log "
        "time over log K, N, groups and rows (roofline.grouped_mm), instead of expert_traffic_factor's bytes and "
        "the tile efficiencies; None: not measured")
    index_kernel_table: dict | None = Field(
        None, description="PyTorch's index_select / index_add_ kernels alone, as the graph engine's MoE layer runs "
        "them: {rows: 1-16, ops: {op: {repeats, widths, small_s: [repeat][width][rows], large_s: [repeat][width]}}} "
        "(the index probe, with the engine's index patterns at a top-k of `repeat`: "
        "calibrate.probes --what index; roofline.index_kernels.read_index_probe). With at most 16 indices PyTorch "
        "runs small-index kernels whose time grows per index; where set, a pass of at most 16 routed rows pays, "
        "each MoE layer, its index ops' small-index time over their large-index time (roofline.index_kernels); "
        "None: not measured (nothing charged)")
    attention_score_row_factors: list[tuple[float, float]] | None = Field(
        None, description="(after_tokens, factor) steps, ascending: a decoding sequence whose cache (a windowed "
        "layer's: its ring) holds more than after_tokens positions has its score elements priced at the last such "
        "step's factor x attention_score_bytes. The engine's softmax over a row of scores runs one of PyTorch's "
        "kernels by the row's length: a warp a row up to 2,048 positions, a 1,024-thread block holding the row in "
        "registers up to 9,216, in shared memory (or read from global memory) past it; on the H200 the register "
        "kernel runs 1.7-2.1x longer than the warp's at 2,064 positions against 2,048 (the kernels probe) and the "
        "longer rows' at about half its bytes per element (the attention probes); fitted on the attention probes' "
        "points in each regime (roofline.probes.attention_stream_terms); None: one cost per score element at "
        "every length")
    attention_softmax_warp_s_per_token: float | None = Field(
        None, ge=0.0, le=1e-7, description="the decode softmax's floor per position of a row, per layer, while the "
        "row runs PyTorch's warp kernel (at most attention_softmax_warp_max_tokens positions): a warp takes a whole "
        "row and walks it serially (max, sum, write: each lane a row's length / 32 elements), so with few rows the "
        "kernel's time grows with the row's length whatever the bytes (the H200: 3.1 us a layer at 512 positions, "
        "8.2 at 2,048, at batches 1-16, against 4.6 us at 8,192 in the block kernel); a decoding sequence's score "
        "traffic is priced at least (its cache's positions - attention_softmax_warp_after_tokens) x this x the "
        "layers; the attention probes' softmax alone (roofline.probes.softmax_warp_floor); None: no floor")
    attention_softmax_warp_after_tokens: float = Field(
        0.0, ge=0.0, description="the row's positions after which the softmax's walk outlasts the kernel's "
        "shortest time (which the fitted per-layer time holds): the probe's line a + s x positions against its "
        "time at its shortest rows (the H200: ~140 positions)")
    attention_softmax_warp_max_tokens: float = Field(
        2048.0, gt=0.0, description="the longest softmax row PyTorch's warp kernel takes (bf16: 2,048 elements; "
        "PyTorch's SoftMax.cu), the floor's reach")
    attention_ramp_s: float = Field(
        0.0, ge=0.0, le=1e-3, description="the decode attention's time beyond its price that grows with its size and "
        "saturates, per layer: a layer whose decode attention is priced x seconds (its KV and score traffic) costs "
        "attention_ramp_s x x / (x + attention_ramp_knee_s) more (every attention layer: MLA's absorbed decode runs the same three dependent kernels on its latent). "
        "The attention probes (calibrate.probes: the engine's decode attention alone at generic shapes, batches "
        "1-512, 512-16,384 positions) run ~9 us beyond their price at the smallest shapes (the kernels' launch-"
        "level time, which the fitted per-layer overhead holds) and ~12-16 us from 16 MB to 1 GB of cache a layer: "
        "three dependent kernels (scores, softmax, weighted sum) each fill and drain the card; fitted on the "
        "probes' points at every size (roofline.probes.attention_ramp_terms); 0: none")
    attention_ramp_knee_s: float = Field(
        1e-5, gt=0.0, le=1e-2, description="the priced decode attention a layer (seconds) at which the ramp "
        "(attention_ramp_s) reaches half its height")
    matmul_load_curve: list[tuple[float, float]] | None = Field(
        None, description="the card's rate against time under load: (seconds of load, rate / the rate of the "
        "first tens of ms), ascending in time, the last held after it; the sustained-matmul probe's (calibrate."
        "probes: a fitted model's prefill forward after forward for seconds, or one large GEMM; the clock falls "
        "from its boost within ~0.1 s and again at the power limit; roofline.probes.sustained_matmul_curve). A "
        "prefill's matmuls priced at prefill_compute_efficiency run at the average of this over the pass "
        "(roofline.prefill.prefill), that efficiency then relative to the first tens of ms; None: one rate "
        "whatever the pass's length")
    # optional ceilings measured alongside the calibration (replace the profile's)
    measured_bandwidth_bytes_per_s: float | None = Field(None, gt=0)
    measured_peak_flop_per_s: float | None = Field(None, gt=0)
    # provenance
    tpot_statistic: Literal["mean", "median", "p10"] = Field(
        "mean", description="which statistic of the measured decode steps the TPOT terms were fitted to"
    )
    source: str = ""
    fitted_on: list[str] = []
    fit_report: dict = {}

    @field_validator("layer_feature_overhead_s")
    @classmethod
    def _layer_features(cls, v):
        from roofline.probes import LAYER_FEATURES

        return _table(v, LAYER_FEATURES, "features", "seconds per layer", 1e-3, "1 ms")

    @field_validator("matmul_load_curve")
    @classmethod
    def _load_curve(cls, v):
        if v is None:
            return v
        times = [t for t, _ in v]
        if not v or times != sorted(times) or len(set(times)) != len(times) or not all(
                math.isfinite(t) and t >= 0 and math.isfinite(r) and 0.1 <= r <= 1.5 for t, r in v):
            raise ValueError("matmul_load_curve: (seconds >= 0, ascending and distinct; relative rate 0.1-1.5) pairs")
        return [(float(t), float(r)) for t, r in v]

    @field_validator("attention_score_row_factors")
    @classmethod
    def _row_factors(cls, v):
        if v is None:
            return v
        after = [a for a, _ in v]
        if not v or after != sorted(after) or len(set(after)) != len(after) or not all(
                math.isfinite(a) and math.isfinite(f) and a >= 0 and 0 < f <= 10 for a, f in v):
            raise ValueError("attention_score_row_factors: (after_tokens >= 0, ascending and distinct; "
                             "0 < factor <= 10) steps")
        return [(float(a), float(f)) for a, f in v]

    @field_validator("expert_gemm_table")
    @classmethod
    def _expert_gemm_table(cls, v):
        if v is None:
            return v
        from roofline.grouped_mm import AXES, check_table

        check_table(v)
        return {**{a: [float(x) for x in v[a]] for a in AXES},
                "seconds": [[[[float(x) for x in r] for r in g] for g in n] for n in v["seconds"]]}

    @field_validator("index_kernel_table")
    @classmethod
    def _index_kernel_table(cls, v):
        if v is None:
            return v
        from roofline.index_kernels import check_table

        check_table(v)
        return {"rows": [float(r) for r in v["rows"]],
                "ops": {op: {"repeats": [float(k) for k in e["repeats"]], "widths": [float(w) for w in e["widths"]],
                             "small_s": [[[float(x) for x in r] for r in a] for a in e["small_s"]],
                             "large_s": [[float(x) for x in a] for a in e["large_s"]]} for op, e in v["ops"].items()}}

    @field_validator("attention_kernel_table")
    @classmethod
    def _kernel_table(cls, v):
        if v is None:
            return v
        out = []
        for e in v:
            try:
                d, g = float(e["head_dim"]), float(e["group"])
                m = [float(x) for x in e["matrices"]]
                c = [float(x) for x in e["contexts"]]
                f = [[float(x) for x in row] for row in e["factors"]]
            except (KeyError, TypeError, ValueError):
                raise ValueError("each attention_kernel_table entry is {head_dim, group, matrices, contexts, factors}") from None
            if not (d > 0 and g > 0 and len(m) >= 2 and len(c) >= 2 and m == sorted(set(m)) and c == sorted(set(c))
                    and m[0] > 0 and len(f) == len(m) and all(len(r) == len(c) for r in f)
                    and all(math.isfinite(x) and 0.1 <= x <= 10 for r in f for x in r)):
                raise ValueError("attention_kernel_table: head_dim and group > 0; matrices and contexts ascending, "
                                 "distinct, two or more; factors one row of 0.1-10 per matrices, one value per context")
            out.append({"head_dim": d, "group": g, "matrices": m, "contexts": c, "factors": f})
        return out

    @field_validator("attention_context_factors")
    @classmethod
    def _context_windows(cls, v):
        if v is None:
            return v
        for lo, hi, f, d_lo, d_hi, g_lo, g_hi in v:
            if not (all(math.isfinite(x) for x in (lo, hi, f, d_lo, d_hi, g_lo, g_hi)) and 0 <= lo < hi
                    and 0 < f <= 10 and 0 < d_lo <= d_hi and 0 < g_lo <= g_hi):
                raise ValueError("each window is (after_tokens, to_tokens, factor, head_dim_from, head_dim_to, "
                                 "group_from, group_to) with 0 <= after < to, 0 < factor <= 10 and 0 < from <= to")
        return v

    @model_validator(mode="after")
    def _tile_paths(self):
        if (self.expert_small_tile_efficiency is None) != (self.expert_large_tile_efficiency is None):
            raise ValueError("expert_small_tile_efficiency and expert_large_tile_efficiency go together: both or neither")
        return self

    @field_validator("prefill_elementwise_bytes_per_element")
    @classmethod
    def _elementwise_kinds(cls, v):
        from roofline.probes import ELEMENTWISE_KINDS

        return _table(v, ELEMENTWISE_KINDS, "kinds", "bytes per element")

    @classmethod
    def uncalibrated(cls, card: str, kv_cache: str = "dynamic") -> "Calibration":
        """The pure roofline: no overhead, full ceilings, max(memory, compute)."""
        return cls(card=card, engine="roofline", kv_cache=kv_cache, source="pure roofline: ceilings alone")

    @property
    def is_uncalibrated(self) -> bool:
        return self.engine == "roofline"

    @property
    def label(self) -> str | None:
        """``card/engine``, or None for the pure roofline."""
        return None if self.is_uncalibrated else f"{self.card}/{self.engine}"


def calibrations_dir() -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "calibrations"


def calibration_from_dict(data, origin: str) -> Calibration:
    try:
        return Calibration(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "calibration"
        raise RooflineError(f"{origin}: {loc}: {err['msg']}") from None
    except TypeError:
        raise RooflineError(f"{origin}: a calibration must be a JSON object") from None


def load_calibration(path: str | Path) -> Calibration:
    from roofline.atomic import read_json

    return calibration_from_dict(read_json(Path(path), "calibration"), str(path))


def shipped_calibration(card: str, engine: str) -> Calibration | None:
    """The calibration shipped in hardware_profiles/calibrations/<card>-<engine>.json, if any (read
    once per version of the file: a sweep over the catalog asks for the same few many times)."""
    path = calibrations_dir() / f"{card}-{engine}.json"
    try:
        stat = path.stat()
    except OSError:
        return None
    if not S_ISREG(stat.st_mode):  # the one stat says it is a file, and which version
        return None
    return _cached_calibration(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _cached_calibration(path: str, mtime_ns: int, size: int) -> Calibration:
    """load_calibration of ``path`` as it was at (``mtime_ns``, ``size``): a Calibration is frozen."""
    return load_calibration(path)


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Write atomically: a temporary file in the same folder, then rename."""
    from roofline.atomic import write_text_atomic

    try:
        return write_text_atomic(path, calibration.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None
