"""Fit a Calibration to measured decode runs, and compare a calibration with measurements.

Three bounded least-squares problems on relative residuals (pred / measured - 1), in order:
- decode (TPOT): fixed and per-layer step overhead, bandwidth, matmul and attention efficiency,
  KV and activation traffic, and the two exponents that say how overhead, memory and compute
  time overlap;
- prefill (TTFT), the decode terms held: the prefill's overhead, matmul efficiency and
  activation traffic;
- memory (peak): the activation coefficient and a fixed workspace.
Terms are per card + engine, not per model, so a fit on some models predicts others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.calibration import DECODE_TERMS, MEMORY_TERMS, PREFILL_TERMS, TERMS, Calibration
from roofline.decode import mean_tpot_s
from roofline.errors import RooflineError
from roofline.hardware import CardProfile
from roofline.memory import peak_memory
from roofline.model_spec import load_model
from roofline.prefill import prefill
from roofline.step import StepModel


@dataclass
class _Group:
    """The measured points of one model, as arrays."""

    model: str
    spec: object
    batch: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    tpot: np.ndarray
    ttft: np.ndarray  # nan where not measured
    peak: np.ndarray  # bytes, nan where not measured


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


def _groups(rows, statistic: str = "mean") -> tuple[list[_Group], str, str]:
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
    for name in sorted({r.model for r in rows}):
        rs = [r for r in rows if r.model == name]
        nan = float("nan")
        out.append(
            _Group(
                model=name,
                spec=load_model(name),
                batch=np.array([r.batch for r in rs], float),
                prompt=np.array([r.prompt_tokens for r in rs], float),
                gen=np.array([r.gen_tokens for r in rs], float),
                tpot=np.array([_tpot(r, statistic) for r in rs], float),
                ttft=np.array([nan if r.ttft_s is None else r.ttft_s for r in rs], float),
                peak=np.array([nan if r.peak_mem_bytes is None else r.peak_mem_bytes for r in rs], float),
            )
        )
    return out, engines[0], kv_caches[0]


def _with(cal: Calibration, **terms) -> Calibration:
    return cal.model_copy(update=terms)


def _predict_group(card: CardProfile, cal: Calibration, g: _Group, kv_cache: str):
    m = StepModel(g.spec, card, cal)
    tpot = mean_tpot_s(m, g.batch, g.prompt, g.gen, kv_cache)
    ttft = prefill(m, g.batch, g.prompt)["ttft_s"]
    peak = peak_memory(m, g.batch, g.prompt, g.gen, kv_cache)["peak_bytes"]
    return tpot, ttft, peak


# ---- the three sub-fits (bounds: roofline.calibration.TERMS) ----
def _solve(residual, names, starts, loss="linear"):
    from scipy.optimize import least_squares

    logs = [TERMS[n].log for n in names]
    lo = np.array([np.log(TERMS[n].fit_bounds[0]) if TERMS[n].log else TERMS[n].fit_bounds[0] for n in names])
    hi = np.array([np.log(TERMS[n].fit_bounds[1]) if TERMS[n].log else TERMS[n].fit_bounds[1] for n in names])

    def unpack(x):
        return {n: (float(np.exp(v)) if lg else float(v)) for n, v, lg in zip(names, x, logs)}

    best = None
    for start in starts:
        x0 = np.array([np.log(start[n]) if lg else start[n] for n, lg in zip(names, logs)])
        x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
        res = least_squares(
            lambda x: residual(unpack(x)), x0, bounds=(lo, hi), x_scale="jac", max_nfev=4000, loss=loss, f_scale=0.05
        )
        if best is None or res.cost < best.cost:
            best = res
    return unpack(best.x)


def _unidentifiable(groups) -> set[str]:
    """Terms the measurements cannot tell from others, held at their defaults:
    - with one layer count, a fixed step overhead is indistinguishable from a per-layer one;
    - with one model, attention and activation costs scale exactly like the KV traffic and the
      matmul FLOPs (all grow with batch at a fixed context), so only the latter are fitted."""
    held = set()
    if len({g.spec.num_hidden_layers for g in groups}) < 2:
        held.add("step_overhead_s")
    if len(groups) < 2:
        held |= {"attention_efficiency", "activation_traffic_coeff", "prefill_activation_traffic_coeff"}
    return held


def _fit_decode(card, base: Calibration, groups, kv_cache) -> Calibration:
    held = _unidentifiable(groups)
    names = [n for n in DECODE_TERMS if n not in held]
    min_tpot = min(float(np.min(g.tpot)) for g in groups)
    layers = np.mean([g.spec.num_hidden_layers for g in groups])

    def residual(terms_):
        cal = _with(base, **terms_)
        out = []
        for g in groups:
            m = StepModel(g.spec, card, cal)
            out.append(mean_tpot_s(m, g.batch, g.prompt, g.gen, kv_cache) / g.tpot - 1.0)
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
        }
        if "step_overhead_s" in names:
            s["step_overhead_s"], s["layer_overhead_s"] = share * min_tpot / 2, share * min_tpot / (2 * layers)
        starts.append(s)
    best = _solve(residual, names, starts)
    return _with(base, **best)


def _fit_prefill(card, cal: Calibration, groups) -> Calibration:
    """TTFT terms, the decode terms held. Small-batch TTFTs are a few ms of noisy launches, so
    the loss is robust (soft L1): a few wild points do not drag the large-batch fit."""
    have = [g for g in groups if np.isfinite(g.ttft).any()]
    if not have:
        return cal

    def residual(terms_):
        c = _with(cal, **terms_)
        out = []
        for g in have:
            m = StepModel(g.spec, card, c)
            ok = np.isfinite(g.ttft)
            out.append(prefill(m, g.batch[ok], g.prompt[ok])["ttft_s"] / g.ttft[ok] - 1.0)
        return np.concatenate(out)

    min_ttft = min(float(np.nanmin(g.ttft)) for g in have)
    names = [n for n in PREFILL_TERMS if n not in _unidentifiable(groups)]
    starts = [
        {n: v for n, v in zip(PREFILL_TERMS, start)}
        for start in ((0.5 * min_ttft, 0.7, 4.0), (0.05 * min_ttft, 0.4, 0.0), (0.2 * min_ttft, 0.9, 10.0))
    ]
    best = _solve(residual, names, starts, loss="soft_l1")
    return _with(cal, **best)


def _fit_memory(card, cal: Calibration, groups, kv_cache) -> Calibration:
    have = [g for g in groups if np.isfinite(g.peak).any()]
    if not have:
        return cal

    def residual(terms_):
        c = _with(cal, **terms_)
        out = []
        for g in have:
            m = StepModel(g.spec, card, c)
            ok = np.isfinite(g.peak)
            pred = peak_memory(m, g.batch[ok], g.prompt[ok], g.gen[ok], kv_cache)["peak_bytes"]
            out.append(pred / g.peak[ok] - 1.0)
        return np.concatenate(out)

    starts = [{"activation_coeff": 3.0, "workspace_bytes": 1e7}, {"activation_coeff": 1.0, "workspace_bytes": 1e8}]
    best = _solve(residual, list(MEMORY_TERMS), starts)
    return _with(cal, **best)


def _fit_all(card, base: Calibration, groups, kv_cache) -> Calibration:
    """Decode terms on TPOT, then the prefill's on TTFT, then memory's on peak memory."""
    return _fit_memory(card, _fit_prefill(card, _fit_decode(card, base, groups, kv_cache), groups), groups, kv_cache)


def fit_calibration(
    rows,
    card: CardProfile,
    source: str = "",
    measured_bandwidth_bytes_per_s: float | None = None,
    measured_peak_flop_per_s: float | None = None,
    cross_validate: bool = True,
    tpot_statistic: str = "mean",
) -> Calibration:
    """Fit every term to ``rows`` (MeasurementRow) measured on ``card``; report in-sample and
    leave-one-model-out errors in ``fit_report``. ``tpot_statistic`` picks which statistic of
    the measured decode steps to fit (mean, median or p10: the latter two resist a noisy host)."""
    groups, engine, kv_cache = _groups(rows, tpot_statistic)
    base = Calibration(
        card=card.id,
        engine=engine,
        kv_cache=kv_cache,
        measured_bandwidth_bytes_per_s=measured_bandwidth_bytes_per_s,
        measured_peak_flop_per_s=measured_peak_flop_per_s,
        source=source,
        fitted_on=[g.model for g in groups],
        tpot_statistic=tpot_statistic,
    )
    cal = _fit_all(card, base, groups, kv_cache)
    report = {"in_sample": _errors(card, cal, groups, kv_cache)}
    if cross_validate and len(groups) > 1:
        loo = {}
        for held in groups:
            rest = [g for g in groups if g is not held]
            loo[held.model] = _errors(card, _fit_all(card, base, rest, kv_cache), [held], kv_cache)
        report["leave_one_model_out"] = loo
    return _with(cal, fit_report=report)


def _mape(pred, meas) -> float | None:
    """Mean absolute relative error, as a fraction (0.026 = 2.6%); None without measurements."""
    ok = np.isfinite(meas)
    if not ok.any():
        return None
    return float(np.mean(np.abs(pred[ok] / meas[ok] - 1.0)))


def _errors(card, cal, groups, kv_cache) -> dict:
    preds = [_predict_group(card, cal, g, kv_cache) for g in groups]
    cat = lambda i: np.concatenate([p[i] for p in preds])  # noqa: E731
    ttft_meas = np.concatenate([g.ttft for g in groups])
    large = np.concatenate([g.batch for g in groups]) >= LARGE_BATCH
    return {
        "tpot_mape_fraction": _mape(cat(0), np.concatenate([g.tpot for g in groups])),
        "ttft_mape_fraction": _mape(cat(1), ttft_meas),
        f"ttft_mape_fraction_batch_{LARGE_BATCH}_up": _mape(cat(1)[large], ttft_meas[large]),
        "peak_mem_mape_fraction": _mape(cat(2), np.concatenate([g.peak for g in groups])),
        "points": int(sum(len(g.batch) for g in groups)),
    }


def compare(calibration: Calibration, rows, card: CardProfile, tpot_statistic: str | None = None, min_batch: int = 1) -> dict:
    """Per-row predicted vs measured, and the MAPE of each quantity (overall and per model),
    over the rows of batch >= ``min_batch``; TPOT is the calibration's statistic unless given."""
    statistic = tpot_statistic or calibration.tpot_statistic
    rows = [r for r in rows if r.batch >= min_batch]
    if not rows:
        raise RooflineError(f"no measurement has a batch of {min_batch} or more")
    groups, engine, kv_cache = _groups(rows, statistic)
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
    summary = _errors(card, calibration, groups, kv_cache)
    return {
        "card": card.id,
        "engine": engine,
        "calibration": f"{calibration.card}/{calibration.engine}",
        **{k: v for k, v in summary.items()},
        "per_model": per_model,
        "rows": out_rows,
    }
