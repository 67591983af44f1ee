"""Fit a Calibration to measured decode runs, and compare a calibration with measurements.

Three bounded least-squares problems on relative residuals (pred / measured - 1), in order:
- decode (TPOT): fixed and per-layer step overhead, bandwidth, matmul and attention efficiency,
  KV and activation traffic, the two exponents that say how overhead, memory and compute time
  overlap, and -- where the measurements can tell them apart -- the attention terms that only
  several contexts separate (score traffic, the serial reduction's lane time) and the
  mixture-of-experts terms;
- prefill (TTFT), the decode terms held: the prefill's overhead, matmul efficiency and
  activation traffic;
- memory (peak): the activation coefficient and a fixed workspace.
Terms are per card + engine, not per model, so a fit on some models predicts others. The fit
report holds the in-sample error and the error on each model and each context left out of the
fit (leave-one-model-out, leave-one-context-out): the expected error of a prediction.

A measurement row says how it was taken, and the prediction mirrors it: its weight and KV dtypes
and tensor-parallel degree; ``prefill`` ``none`` (the harness skipped the prefill: no TTFT, and no
prefill activations in the peak); the engine's ``prefill_chunk_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.calibration import CONTEXT_TERMS, DECODE_TERMS, MEMORY_TERMS, MOE_TERMS, PREFILL_TERMS, TERMS, Calibration
from roofline.confidence import coverage_of, errors_by_overhead_share, merge_coverage, overhead_share
from roofline.decode import mean_decode, mean_tpot_s
from roofline.errors import RooflineError
from roofline.hardware import CardProfile
from roofline.memory import peak_memory
from roofline.model_spec import load_model
from roofline.prefill import prefill
from roofline.step import StepModel


@dataclass
class _Group:
    """The measured points of one model (at one weight dtype, KV dtype and TP degree), as arrays."""

    model: str
    spec: object
    weight_dtype: str
    kv_dtype: str
    tp: int
    batch: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    tpot: np.ndarray
    ttft: np.ndarray  # nan where not measured
    peak: np.ndarray  # bytes, nan where not measured
    prefill_ran: np.ndarray  # False where the harness skipped the prefill

    def subset(self, keep: np.ndarray) -> "_Group":
        return _Group(self.model, self.spec, self.weight_dtype, self.kv_dtype, self.tp,
                      *(getattr(self, k)[keep] for k in ("batch", "prompt", "gen", "tpot", "ttft", "peak",
                                                         "prefill_ran")))

    def step_model(self, card: CardProfile, cal: Calibration) -> StepModel:
        return StepModel(self.spec, card, cal, weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype, tp=self.tp)


#: TTFT at small batches is a few ms of launches; its error is also reported from this batch up.
LARGE_BATCH = 64
#: Which decode-step statistic of a measurement stands for its TPOT.
TPOT_STATISTICS = {"mean": "tpot_s", "median": "tpot_median_s", "p10": "tpot_p10_s"}


def _tpot(row, statistic: str) -> float:
    value = getattr(row, TPOT_STATISTICS[statistic])
    if value is None:
        raise RooflineError(
            f"{row.model} batch {row.batch}: no {TPOT_STATISTICS[statistic]} column to fit the {statistic} TPOT"
        )
    return value


def _chunk_tokens(rows) -> int | None:
    """The engine's prefill chunk (the rows' ``prefill_chunk_tokens`` column; None when absent)."""
    values = {r.extra.get("prefill_chunk_tokens", "").strip() for r in rows}
    values.discard("")
    if not values:
        return None
    if len(values) > 1:
        raise RooflineError(f"measurements mix prefill chunk sizes {sorted(values)}: fit one engine setting at a time")
    return int(values.pop())


def _groups(rows, statistic: str = "mean") -> tuple[list[_Group], str, str, int | None]:
    if statistic not in TPOT_STATISTICS:
        raise RooflineError(f"TPOT statistic must be one of {', '.join(TPOT_STATISTICS)}, not {statistic!r}")
    rows = [r for r in rows if r.ok]
    if not rows:
        raise RooflineError("no completed measurements to fit (every row is an OOM marker?)")
    engines = sorted({r.engine for r in rows})
    kv_caches = sorted({r.kv_cache for r in rows})
    if len(engines) > 1 or len(kv_caches) > 1:
        raise RooflineError(
            f"measurements mix engines {engines} / kv caches {kv_caches}: fit one engine at a time"
        )
    out = []
    keys = sorted({(r.model, r.weight_dtype or "bf16", r.kv_dtype or "bf16", r.tp_degree) for r in rows})
    nan = float("nan")
    for name, wd, kd, tp in keys:
        rs = [r for r in rows if (r.model, r.weight_dtype or "bf16", r.kv_dtype or "bf16", r.tp_degree) == (name, wd, kd, tp)]
        out.append(
            _Group(
                model=name if (wd, kd, tp) == ("bf16", "bf16", 1) else f"{name} ({wd}/{kd}, tp {tp})",
                spec=load_model(name),
                weight_dtype=wd,
                kv_dtype=kd,
                tp=tp,
                batch=np.array([r.batch for r in rs], float),
                prompt=np.array([r.prompt_tokens for r in rs], float),
                gen=np.array([r.gen_tokens for r in rs], float),
                tpot=np.array([_tpot(r, statistic) for r in rs], float),
                ttft=np.array([nan if r.ttft_s is None else r.ttft_s for r in rs], float),
                peak=np.array([nan if r.peak_mem_bytes is None else r.peak_mem_bytes for r in rs], float),
                prefill_ran=np.array([r.extra.get("prefill", "timed") != "none" for r in rs], bool),
            )
        )
    return out, engines[0], kv_caches[0], _chunk_tokens(rows)


def _with(cal: Calibration, **terms) -> Calibration:
    return cal.model_copy(update=terms)


def _predict_group(card: CardProfile, cal: Calibration, g: _Group, kv_cache: str):
    m = g.step_model(card, cal)
    tpot = mean_tpot_s(m, g.batch, g.prompt, g.gen, kv_cache)
    ttft = prefill(m, g.batch, g.prompt)["ttft_s"]
    peak = peak_memory(m, g.batch, g.prompt, g.gen, kv_cache, prefill_ran=g.prefill_ran)["peak_bytes"]
    return tpot, ttft, peak


# ---- the three sub-fits (bounds: roofline.calibration.TERMS) ----
def solve_bounded(residual, names, bounds, logs, starts, *, max_nfev=4000, loss="linear", f_scale=0.05):
    """Bounded least squares of ``residual({name: value})`` over ``names``, each within ``bounds``
    (lo, hi) and searched in log space where ``logs`` says; the best of ``starts`` (dicts of start
    values). Shared by the calibration fit and roofline.published_fit."""
    from scipy.optimize import least_squares

    lo = np.array([np.log(b[0]) if lg else b[0] for b, lg in zip(bounds, logs)])
    hi = np.array([np.log(b[1]) if lg else b[1] for b, lg in zip(bounds, logs)])

    def unpack(x):
        return {n: (float(np.exp(v)) if lg else float(v)) for n, v, lg in zip(names, x, logs)}

    best = None
    for start in starts:
        x0 = np.array([np.log(start[n]) if lg else start[n] for n, lg in zip(names, logs)])
        x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
        # each variable scaled by a tenth of its search range (or its start, where larger): a
        # Jacobian-based scale divides by zero when a term slides onto its bound, and the solver
        # then crawls a flat valley to max_nfev (a host-bound engine's fit took minutes)
        scale = np.maximum(np.where(np.isfinite(hi - lo), 0.1 * (hi - lo), 1.0), np.abs(x0))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            res = least_squares(lambda x: residual(unpack(x)), x0, bounds=(lo, hi), x_scale=scale,
                                max_nfev=max_nfev, loss=loss, f_scale=f_scale)
        if best is None or res.cost < best.cost:
            best = res
    return unpack(best.x)


def _solve(residual, names, starts, loss="linear"):
    return solve_bounded(residual, names, [TERMS[n].fit_bounds for n in names], [TERMS[n].log for n in names],
                         starts, max_nfev=4000, loss=loss, f_scale=0.05)


def _unidentifiable(groups, fixed=frozenset(), layer_cuts: bool = False) -> set[str]:
    """Terms the measurements cannot tell from others, held at their defaults:
    - with one layer count, a fixed step overhead is indistinguishable from a per-layer one;
    - with one model, attention and activation costs scale exactly like the KV traffic and the
      matmul FLOPs (all grow with batch at a fixed context), so only the latter are fitted;
    - with one context, per-sequence and per-cached-token costs cannot be told apart: the
      context terms (score traffic, lane time) are held;
    - without a mixture-of-experts model, the MoE terms mean nothing;
      (unless the matmuls' efficiency and the KV traffic are held at measured values: then the
      batch's growth beyond them is the attention's -- HF eager on a CPU copies K and V out per
      query head and runs attention as small unfused ops, roofline.local_card.linear_probe_terms);
    - without both single-sequence and batched steps, the extra overhead of a batched one."""
    held = set()
    # (unless the layers probe cut the models to other layer counts)
    if len({g.spec.num_hidden_layers for g in groups}) < 2 and not layer_cuts:
        held.add("step_overhead_s")
    if len({g.model for g in groups}) < 2:
        held |= {"activation_traffic_coeff", "prefill_activation_traffic_coeff"}
        if not {"compute_efficiency", "kv_traffic_factor"} <= set(fixed):
            held.add("attention_efficiency")
    contexts = {(p, n) for g in groups for p, n in zip(g.prompt, g.gen)}
    if len({p + n for p, n in contexts}) < 2:
        held |= set(CONTEXT_TERMS)
    if not any(g.spec.moe_layers for g in groups):
        held |= set(MOE_TERMS)
    batches = {float(b) for g in groups for b in g.batch}
    if not (1.0 in batches and any(b >= 2 for b in batches)):
        held.add("batch_layer_overhead_s")
    return held


def _probe_models(card, points):
    """One single-layer ModelSpec per probe shape (query heads, KV heads, head width), so the
    probe's attention is priced by the step model's own attention family."""
    from roofline.model_spec import ModelSpec

    specs = {}
    for p in points:
        key = (p.q_heads, p.kv_heads, p.head_dim)
        if key not in specs:
            specs[key] = ModelSpec(name=f"probe-{p.shape}", model_type="llama", hidden_size=p.q_heads * p.head_dim,
                                   intermediate_size=1, num_hidden_layers=1, num_attention_heads=p.q_heads,
                                   num_key_value_heads=p.kv_heads, head_dim=p.head_dim, vocab_size=1,
                                   tie_word_embeddings=True, qkv_bias=False)
    return specs


def _probe_attention_s(card, cal: Calibration, specs, points):
    """The attention family's time for each probe point: one layer, ``batch`` x ``context`` slots
    (one StepModel per shape, its points priced as arrays)."""
    from roofline.step import decode_work, pnorm

    out = np.empty(len(points))
    for key, spec in specs.items():
        idx = [i for i, p in enumerate(points) if (p.q_heads, p.kv_heads, p.head_dim) == key]
        batch = np.array([points[i].batch for i in idx], dtype=float)
        context = np.array([points[i].context_tokens for i in idx], dtype=float)
        parts = StepModel(spec, card, cal).pass_parts(decode_work(batch, batch * context))
        out[idx] = pnorm(parts.attention_memory_s, parts.attention_compute_s, cal.roofline_exponent)
    return out


def _layer_cuts(groups, layers_probe):
    """(spec cut to the point's layer count, batch, context, seconds) for the layers probe's points
    of the models in ``groups`` only (a model held out of a cross-validation fold is held out of
    the probe too)."""
    specs = {g.spec.name: g.spec for g in groups}
    cut: dict = {}
    for p in layers_probe:
        if p.model in specs and (p.model, p.layers) not in cut:
            cut[(p.model, p.layers)] = specs[p.model].with_layers(p.layers)
    return [(cut[(p.model, p.layers)], p.batch, p.context, p.seconds) for p in layers_probe if p.model in specs]


def _tie(cal: Calibration, tied) -> Calibration:
    """``cal`` with each ``tied`` term at its held value per unit of bandwidth efficiency times the
    calibration's (a cost measured in seconds per byte: it stays put as the efficiency moves)."""
    return _with(cal, **{k: v * cal.bandwidth_efficiency for k, v in tied.items()}) if tied else cal


def _fit_decode(card, base: Calibration, groups, kv_cache, fixed=frozenset(), probe=(), warm=None,
                layers_probe=(), tied=None) -> Calibration:
    cuts = _layer_cuts(groups, layers_probe)
    given = set(fixed) | set(tied or {})
    held = _unidentifiable(groups, given, bool(cuts)) | given
    names = [n for n in (*DECODE_TERMS, *CONTEXT_TERMS, *MOE_TERMS) if n not in held]
    min_tpot = min(float(np.min(g.tpot)) for g in groups)
    layers = np.mean([g.spec.num_hidden_layers for g in groups])

    specs = _probe_models(card, probe) if probe else {}
    probe_s = np.array([p.seconds for p in probe])
    # the probe's per-layer launches (3 kernels) are part of the layer overhead in a whole step:
    # taken as the probe's floor, its smallest timing (one sequence, the shortest context)
    probe_floor = float(probe_s.min()) if len(probe) else 0.0

    def residual(terms_):
        cal = _tie(_with(base, **terms_), tied)
        out = []
        for g in groups:
            m = g.step_model(card, cal)
            out.append(mean_tpot_s(m, g.batch, g.prompt, g.gen, kv_cache) / g.tpot - 1.0)
        if len(probe):
            out.append((probe_floor + _probe_attention_s(card, cal, specs, probe)) / probe_s - 1.0)
        if cuts:  # whole steps of the fitted models cut to a few layers: the step's own time vs a layer's
            pred = [mean_tpot_s(StepModel(spec, card, cal), np.array([float(b)]), np.array([ctx / 2.0]),
                                np.array([ctx / 2.0]), kv_cache)[0] for spec, b, ctx, _ in cuts]
            out.append(np.array(pred) / np.array([s for *_, s in cuts]) - 1.0)
        return np.concatenate(out)

    starts = []
    for share, p, q in ((0.5, 2.0, 2.0), (0.3, 20.0, 1.0), (0.8, 1.0, 20.0), (0.1, 4.0, 4.0)):
        s = {
            "step_overhead_s": 0.0,
            "layer_overhead_s": share * min_tpot / layers,
            "bandwidth_efficiency": 0.8,
            "compute_efficiency": 0.6,
            "attention_efficiency": 0.05,
            "kv_traffic_factor": 1.5,
            "activation_traffic_coeff": 1.0,
            "roofline_exponent": p,
            "overhead_exponent": q,
            "attention_score_bytes": 4.0,
            "attention_lane_s_per_token": 1.3e-9,
            "batch_layer_overhead_s": 2e-6,
            "attention_sequence_overhead_s": 0.0,
            "moe_layer_overhead_s": 2e-5,
            "expert_traffic_factor": 1.5,
            "expert_gemm_min_rows": 64.0,
        }
        if "step_overhead_s" in names:
            s["step_overhead_s"], s["layer_overhead_s"] = share * min_tpot / 2, share * min_tpot / (2 * layers)
        starts.append(s)
    best = _solve(residual, names, _warm(warm, names) or starts)
    return _tie(_with(base, **best), tied)


def _fit_prefill(card, cal: Calibration, groups, warm=None, fixed=frozenset()) -> Calibration:
    """TTFT terms, the decode terms held. Small-batch TTFTs are a few ms of noisy launches, so
    the loss is robust (soft L1): a few wild points do not drag the large-batch fit."""
    have = [g for g in groups if np.isfinite(g.ttft).any()]
    if not have:
        return cal

    def residual(terms_):
        c = _with(cal, **terms_)
        out = []
        for g in have:
            m = g.step_model(card, c)
            ok = np.isfinite(g.ttft)
            out.append(prefill(m, g.batch[ok], g.prompt[ok])["ttft_s"] / g.ttft[ok] - 1.0)
        return np.concatenate(out)

    min_ttft = min(float(np.nanmin(g.ttft)) for g in have)
    names = [n for n in PREFILL_TERMS if n not in _unidentifiable(groups) and n not in fixed]
    starts = [
        {n: v for n, v in zip(PREFILL_TERMS, start)}
        for start in ((0.5 * min_ttft, 0.7, 4.0), (0.05 * min_ttft, 0.4, 0.0), (0.2 * min_ttft, 0.9, 10.0))
    ]
    best = _solve(residual, names, _warm(warm, names) or starts, loss="soft_l1")
    return _with(cal, **best)


def _fit_memory(card, cal: Calibration, groups, kv_cache, warm=None) -> Calibration:
    have = [g for g in groups if np.isfinite(g.peak).any()]
    if not have:
        return cal

    def residual(terms_):
        c = _with(cal, **terms_)
        out = []
        for g in have:
            m = g.step_model(card, c)
            ok = np.isfinite(g.peak)
            pred = peak_memory(m, g.batch[ok], g.prompt[ok], g.gen[ok], kv_cache, prefill_ran=g.prefill_ran[ok])
            out.append(pred["peak_bytes"] / g.peak[ok] - 1.0)
        return np.concatenate(out)

    starts = [{"activation_coeff": 3.0, "workspace_bytes": 1e7}, {"activation_coeff": 1.0, "workspace_bytes": 1e8}]
    best = _solve(residual, list(MEMORY_TERMS), _warm(warm, MEMORY_TERMS) or starts)
    return _with(cal, **best)


def _warm(warm, names) -> list[dict]:
    """One start at ``warm``'s terms (a cross-validation refit starts from the full fit's optimum:
    a fraction of the multi-start cost, the same optimum where the data allow one)."""
    return [{n: getattr(warm, n) for n in names}] if warm is not None else []


def _fit_all(card, base: Calibration, groups, kv_cache, fixed=frozenset(), probe=(), warm=None,
             layers_probe=(), tied=None) -> Calibration:
    """Decode terms on TPOT (and the attention and layers probes' timings), then the prefill's on
    TTFT, then memory's on peak memory. ``warm``: a fitted calibration to start from (one start);
    ``tied``: terms held per unit of bandwidth efficiency (_tie)."""
    decode = _fit_decode(card, base, groups, kv_cache, fixed, probe, warm, layers_probe, tied)
    return _fit_memory(card, _fit_prefill(card, decode, groups, warm, fixed), groups, kv_cache, warm)


def _contexts(groups) -> list[tuple[int, int]]:
    return sorted({(int(p), int(n)) for g in groups for p, n in zip(g.prompt, g.gen)})


def _only_context(groups, context, keep: bool):
    """The groups with only (keep) or without (not keep) the rows at ``context`` (prompt, gen)."""
    out = []
    for g in groups:
        at = (g.prompt == context[0]) & (g.gen == context[1])
        sel = at if keep else ~at
        if sel.any():
            out.append(g.subset(sel))
    return out


def _engine_facts(engine: str) -> dict:
    """The engine profile's facts (roofline.engines), where the engine has a profile."""
    from roofline.engines import engine_ids, load_engine

    return load_engine(engine).calibration_facts() if engine in engine_ids() else {}


def fit_calibration(
    rows,
    card: CardProfile,
    source: str = "",
    measured_bandwidth_bytes_per_s: float | None = None,
    measured_peak_flop_per_s: float | None = None,
    cross_validate: bool = True,
    tpot_statistic: str = "mean",
    collectives: dict | None = None,
    fixed: dict | None = None,
    attention_probe=(),
    layers_probe=(),
    fixed_per_bandwidth: dict | None = None,
) -> Calibration:
    """Fit every term to ``rows`` (MeasurementRow) measured on ``card``; report in-sample,
    leave-one-model-out and leave-one-context-out errors in ``fit_report``. ``tpot_statistic``
    picks which statistic of the measured decode steps to fit (mean, median or p10: the latter
    two resist a noisy host). ``collectives``: the link terms measured by the TP harness
    (roofline.collectives.link_terms), stored as measured. ``fixed``: terms measured elsewhere
    (e.g. the attention kernel's by calibrate.probes, roofline.probes.attention_terms), held at
    those values. ``fixed_per_bandwidth``: terms priced at the bandwidth ceiling x the bandwidth
    efficiency (``kv_traffic_factor``, ``attention_score_bytes``) measured elsewhere as a cost per
    byte, given per unit of bandwidth efficiency: held at that value x the fitted efficiency, so the
    cost in seconds stays what was measured (roofline.probes.attention_stream_terms). ``attention_probe``: roofline.probes.AttentionPoint timings of the engine's decode
    attention alone, fitted with the decode terms (they pin the attention family's per-byte,
    per-score and lane costs across head shapes the models do not span). ``layers_probe``:
    roofline.probes.LayersPoint timings of the engine's whole decode step of the fitted models cut
    to a few layer counts (points of other models are ignored; a model or context held out of a
    cross-validation fold is held out of them too): they split the fixed time into the step's
    own and each layer's, which models of 28-32 layers alone cannot."""
    groups, engine, kv_cache, chunk = _groups(rows, tpot_statistic)
    collectives = dict(collectives or {})
    link_world = collectives.pop("world", None)
    bad_card = sorted({r.card for r in rows if r.ok and r.card != card.id})
    if bad_card:
        raise RooflineError(f"measurements were taken on {', '.join(bad_card)}, not {card.id}: give --card to match", "card")
    facts = _engine_facts(engine)
    facts["prefill_chunk_tokens"] = chunk  # as the rows were measured
    base = Calibration(
        card=card.id,
        engine=engine,
        kv_cache=kv_cache,
        **facts,
        measured_bandwidth_bytes_per_s=measured_bandwidth_bytes_per_s,
        measured_peak_flop_per_s=measured_peak_flop_per_s,
        source=source,
        fitted_on=sorted({g.spec.name for g in groups}),
        tpot_statistic=tpot_statistic,
        **collectives,
        **(fixed or {}),
    )
    held_fixed = set(fixed or {})
    tied = dict(fixed_per_bandwidth or {})
    probe, cuts = tuple(attention_probe), tuple(layers_probe)
    cal = _fit_all(card, base, groups, kv_cache, held_fixed, probe, layers_probe=cuts, tied=tied)
    coverage = {**coverage_of(groups), "overhead_share": _share_range(card, cal, groups, kv_cache)}
    if link_world is not None:
        coverage["link_tp"] = [int(link_world)]
    held_terms = _unidentifiable(groups, held_fixed | set(tied), bool(_layer_cuts(groups, cuts)))
    report = {"in_sample": _errors(card, cal, groups, kv_cache), "held": sorted(held_terms),
              "fixed": {k: getattr(cal, k) for k in sorted(held_fixed)}, "coverage": coverage}
    if tied:
        report["fixed_per_bandwidth_efficiency"] = {k: tied[k] for k in sorted(tied)}
    if cross_validate and len({g.spec.name for g in groups}) > 1:
        loo = {}
        for name in sorted({g.spec.name for g in groups}):
            rest = [g for g in groups if g.spec.name != name]
            held = [g for g in groups if g.spec.name == name]
            loo[name] = _errors(card, _fit_all(card, base, rest, kv_cache, held_fixed, probe, cal, cuts, tied), held,
                                kv_cache)
        report["leave_one_model_out"] = loo
    contexts = _contexts(groups)
    if cross_validate and len(contexts) > 1:
        loco = {}
        for ctx in contexts:
            rest, held = _only_context(groups, ctx, keep=False), _only_context(groups, ctx, keep=True)
            others = tuple(p for p in cuts if p.context != ctx[0] + ctx[1])  # the probe's context held out too
            loco[f"{ctx[0]}/{ctx[1]}"] = _errors(card, _fit_all(card, base, rest, kv_cache, held_fixed, probe, cal,
                                                                others, tied),
                                                 held, kv_cache)
        report["leave_one_context_out"] = loco
    return _with(cal, fit_report=report)


def _tpot_and_share(card, cal, g: _Group, kv_cache) -> tuple[np.ndarray, np.ndarray]:
    """A group's predicted TPOT and its decode steps' overhead share under ``cal`` (one mean_decode)."""
    dec = mean_decode(g.step_model(card, cal), g.batch, g.prompt, g.gen, kv_cache)
    return np.asarray(dec["step_s"], dtype=float), overhead_share(dec["overhead_s"], dec["step_s"])


def _share_range(card, cal, groups, kv_cache) -> list[float]:
    """[smallest, largest] overhead share of the fitted decode steps (the coverage's ``overhead_share``)."""
    shares = np.concatenate([_tpot_and_share(card, cal, g, kv_cache)[1] for g in groups])
    return [round(float(shares.min()), 4), round(float(shares.max()), 4)]


def _mape(pred, meas) -> float | None:
    """Mean absolute relative error, as a fraction (0.026 = 2.6%); None without measurements."""
    ok = np.isfinite(meas)
    if not ok.any():
        return None
    return float(np.mean(np.abs(pred[ok] / meas[ok] - 1.0)))


def _worst(pred, meas) -> float | None:
    ok = np.isfinite(meas)
    if not ok.any():
        return None
    return float(np.max(np.abs(pred[ok] / meas[ok] - 1.0)))


def _errors(card, cal, groups, kv_cache) -> dict:
    preds = [_predict_group(card, cal, g, kv_cache) for g in groups]
    cat = lambda i: np.concatenate([p[i] for p in preds])  # noqa: E731
    tpot_meas = np.concatenate([g.tpot for g in groups])
    ttft_meas = np.concatenate([g.ttft for g in groups])
    large = np.concatenate([g.batch for g in groups]) >= LARGE_BATCH
    return {
        "tpot_mape_fraction": _mape(cat(0), tpot_meas),
        "tpot_worst_fraction": _worst(cat(0), tpot_meas),
        "ttft_mape_fraction": _mape(cat(1), ttft_meas),
        f"ttft_mape_fraction_batch_{LARGE_BATCH}_up": _mape(cat(1)[large], ttft_meas[large]),
        "peak_mem_mape_fraction": _mape(cat(2), np.concatenate([g.peak for g in groups])),
        "points": int(sum(len(g.batch) for g in groups)),
    }


def compare(calibration: Calibration, rows, card: CardProfile, tpot_statistic: str | None = None, min_batch: int = 1) -> dict:
    """Per-row predicted vs measured, and the MAPE of each quantity (overall, per model and per
    context), over the rows of batch >= ``min_batch``; TPOT is the calibration's statistic unless given."""
    statistic = tpot_statistic or calibration.tpot_statistic
    rows = [r for r in rows if r.batch >= min_batch]
    if not rows:
        raise RooflineError(f"no measurement has a batch of {min_batch} or more", "min_batch")
    bad_card = sorted({r.card for r in rows if r.ok and r.card != card.id})
    if bad_card:
        raise RooflineError(f"measurements were taken on {', '.join(bad_card)}, not {card.id}: give --card to match "
                            "(and a calibration of that card)", "card")
    groups, engine, kv_cache, chunk = _groups(rows, statistic)
    if calibration.prefill_chunk_tokens != chunk:  # the prediction mirrors how the rows were measured
        calibration = _with(calibration, prefill_chunk_tokens=chunk)
    out_rows = []
    per_model = {}
    for g in groups:
        tpot, ttft, peak = _predict_group(card, calibration, g, kv_cache)
        per_model[g.model] = _errors(card, calibration, [g], kv_cache)
        for i in range(len(g.batch)):
            out_rows.append(
                {
                    "model": g.model,
                    "batch": int(g.batch[i]),
                    "prompt_tokens": int(g.prompt[i]),
                    "gen_tokens": int(g.gen[i]),
                    "tpot_measured_s": float(g.tpot[i]),
                    "tpot_predicted_s": float(tpot[i]),
                    "ttft_measured_s": None if np.isnan(g.ttft[i]) else float(g.ttft[i]),
                    "ttft_predicted_s": float(ttft[i]),
                    "peak_mem_measured_bytes": None if np.isnan(g.peak[i]) else float(g.peak[i]),
                    "peak_mem_predicted_bytes": float(peak[i]),
                }
            )
    per_context = {f"{c[0]}/{c[1]}": _errors(card, calibration, _only_context(groups, c, keep=True), kv_cache)
                   for c in _contexts(groups)}
    summary = _errors(card, calibration, groups, kv_cache)
    return {
        "card": card.id,
        "engine": engine,
        "calibration": f"{calibration.card}/{calibration.engine}",
        **{k: v for k, v in summary.items()},
        "per_model": per_model,
        "per_context": per_context,
        "rows": out_rows,
    }


def fit_extra_terms(base: Calibration, rows, card: CardProfile, source: str = "", fixed: dict | None = None) -> Calibration:
    """Keep ``base``'s terms and fit only those ``rows`` newly identify: the mixture-of-experts
    terms (per-MoE-layer overhead, expert traffic) on MoE models' decode, with ``fixed`` terms set
    first (a probe's measured values). The new rows' models join ``fitted_on``;
    ``fit_report["extra"]`` holds the in-sample errors on them."""
    groups, engine, kv_cache, chunk = _groups(rows, base.tpot_statistic)
    if fixed:
        base = _with(base, **fixed)
    if engine != base.engine:
        raise RooflineError(f"measurements are of engine {engine}, the base calibration of {base.engine}")
    names = [n for n in MOE_TERMS if n not in _unidentifiable(groups)]
    if base.expert_small_tile_efficiency is not None:
        # the tiles price what the padded rows stood for: expert_gemm_min_rows is not used
        names = [n for n in names if n != "expert_gemm_min_rows"]
        base = _with(base, expert_gemm_min_rows=0.0)
    without_table = None
    if base.expert_gemm_table is not None:
        # the experts' matmuls as the grouped-mm probe measured them: no traffic factor to fit with the
        # table; it is fitted without it first (the tile path's, which a card without the table prices
        # by, and without the index probe's small-index kernels, this card's seconds too: an engine
        # profile carries neither), and kept with that fit's overhead in the report
        without_table = fit_extra_terms(_with(base, expert_gemm_table=None, index_kernel_table=None), rows, card)
        base = _with(base, expert_traffic_factor=without_table.expert_traffic_factor)
        names = [n for n in names if n not in ("expert_traffic_factor", "expert_gemm_min_rows")]
    if not names:
        raise RooflineError("these measurements identify no term the base calibration lacks (no MoE model)")
    if chunk is not None and base.prefill_chunk_tokens != chunk:
        base = _with(base, prefill_chunk_tokens=chunk)

    def residual(terms_):
        cal = _with(base, **terms_)
        return np.concatenate([mean_tpot_s(g.step_model(card, cal), g.batch, g.prompt, g.gen, kv_cache) / g.tpot - 1.0
                               for g in groups])

    starts = [{k: x for k, x in {"moe_layer_overhead_s": v, "expert_traffic_factor": f, "expert_gemm_min_rows": r}.items()
               if k in names} for v, f, r in ((2e-5, 1.5, 64.0), (5e-6, 2.5, 128.0), (5e-5, 1.1, 16.0))]
    cal = _with(base, **_solve(residual, names, starts))
    report = dict(base.fit_report)
    report["extra"] = {"terms": names, "models": sorted({g.spec.name for g in groups}), "held": sorted(fixed or {}),
                       "in_sample": _errors(card, cal, groups, kv_cache)}
    if without_table is not None:
        report["extra"]["without_expert_gemm_table"] = {
            "moe_layer_overhead_s": without_table.moe_layer_overhead_s,
            "expert_traffic_factor": without_table.expert_traffic_factor,
            "in_sample_tpot_mape_fraction": without_table.fit_report["extra"]["in_sample"].get("tpot_mape_fraction")}
    if "coverage" in report:
        report["coverage"] = merge_coverage(report["coverage"], {**coverage_of(groups),
                                                                 "overhead_share": _share_range(card, cal, groups, kv_cache)})
    fitted_on = sorted(set(base.fitted_on) | {g.spec.name for g in groups})
    return _with(cal, fit_report=report, fitted_on=fitted_on,
                 source=f"{base.source}; MoE terms: {source}" if source else base.source)


def validation_entry(calibration: Calibration, rows, card: CardProfile, what: str, files=()) -> dict:
    """The calibration's errors on measurements it was not fitted on (for ``fit_report["validation"]``:
    the expected error of answers of that kind, roofline.confidence)."""
    fitted = set(calibration.fitted_on)
    rows = [r for r in rows if r.model not in fitted]
    if not rows:
        raise RooflineError(f"no held-out rows for the {what} validation: every model was fitted on")
    result = compare(calibration, rows, card)
    keys = ("tpot_mape_fraction", "tpot_worst_fraction", "ttft_mape_fraction", "ttft_mape_fraction_batch_64_up",
            "peak_mem_mape_fraction", "points")
    # the TPOT error by the step's overhead share (roofline.confidence): per model, as compare groups them
    shares, errs, names = [], [], []
    for model in sorted({r.model for r in rows}):
        groups, _, kv_cache, _ = _groups([r for r in rows if r.model == model], calibration.tpot_statistic)
        for g in groups:
            tpot, share = _tpot_and_share(card, calibration, g, kv_cache)
            shares.append(share)
            errs.append(tpot / g.tpot - 1.0)
            names += [model] * len(g.batch)
    return {"what": what, "files": [str(f) for f in files], "models": sorted({r.model for r in rows}),
            **{k: result.get(k) for k in keys},
            "tpot_mape_by_overhead_share": errors_by_overhead_share(np.concatenate(shares), np.concatenate(errs),
                                                                    names)}
