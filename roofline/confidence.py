"""How far to trust an answer: the calibration's measured errors, and where a question leaves what
it saw (issue 9).

* **Coverage** (``coverage_of``, stored by the fit in ``fit_report["coverage"]``): the contexts,
  batches, model sizes, dtypes, attention kinds, mixture-of-experts and tensor-parallel degrees
  the calibration's measurements spanned.
* **Expected error** (``expected_errors``): the calibration's own out-of-sample errors, per
  answer -- for TPOT the larger of the mean over held-out models (leave-one-model-out) and the
  error on the held-out context nearest the question's (leave-one-context-out); for TTFT the same
  from batch 64 up and over all batches below; for a mixture-of-experts or tensor-parallel question,
  the errors on the held-out models of that kind the calibration was validated on
  (``fit_report["validation"]``, benchmarks/make_calibrations.py). A card with no calibration gets
  the pure roofline's record instead (hardware_profiles/measurements/floor-errors.json): its times are floors.
  Where the validation also measured its error by how much of the decode step is fixed overhead
  (``tpot_mape_by_overhead_share``: bins of the predicted step's overhead share), a row's TPOT error
  is at least its bin's: a step that is mostly launches and fixed per-layer time (a small model at
  small batches) carries the model-to-model spread of that fixed time, which the fitted models
  cannot show (docs/method.md, "The expected error").
* **Extrapolation** (``extrapolation``): a list of reasons, one per way the question leaves the
  coverage; empty when none. The expected error holds inside the coverage; outside it, it is a
  lower bound and the reasons say why. A row whose step is more fixed overhead than any step the
  calibration was fitted on (``coverage["overhead_share"]``) says so.
"""

from __future__ import annotations

import numpy as np

#: The record of the pure roofline against measured decode (benchmarks/floor_errors.py writes it).
FLOOR_FILE = "measurements/floor-errors.json"

#: A model this much larger or smaller (by parameters) than every fitted one is an extrapolation.
SIZE_MARGIN = 1.25

#: Bins of a decode step's overhead share (its fixed overhead over its time, the mean decode step as
#: roofline.decode.mean_decode prices it) for the held-out TPOT error by share; a bin of fewer than
#: MIN_BIN_POINTS held-out points is not used (too few to say its error)
OVERHEAD_SHARE_EDGES = (0.0, 0.5, 0.6, 0.7, 0.8, 1.0)
MIN_BIN_POINTS = 8
#: a step's overhead share this much above the largest of the fitted steps' is an extrapolation
OVERHEAD_SHARE_MARGIN = 0.02


def overhead_share(overhead_s, step_s) -> np.ndarray:
    """The fixed overhead's share of a decode step: ``overhead_s`` / ``step_s`` (arrays; 0 where the
    step takes no time), as roofline.decode.mean_decode or predict's columns give them."""
    step = np.asarray(step_s, dtype=float)
    return np.divide(np.asarray(overhead_s, dtype=float), step, out=np.zeros_like(step), where=step > 0)


def _in_bin(share, lo, hi, last):
    """share in [lo, hi) -- [lo, hi] for the last bin, which holds a share of exactly 1 (floats or arrays)."""
    return (share >= lo) & ((share <= hi) if last else (share < hi))


def errors_by_overhead_share(shares, errors, models=None) -> list[dict]:
    """The mean absolute relative error of the points in each OVERHEAD_SHARE_EDGES bin that has any:
    [{from, to, tpot_mape_fraction, points}] (the last bin holds a share of exactly 1); with each
    point's model name (``models``), each bin's ``models`` too (how many models its figure rests on)."""
    shares, errors = np.asarray(shares, dtype=float), np.abs(np.asarray(errors, dtype=float))
    out = []
    for i, (lo, hi) in enumerate(zip(OVERHEAD_SHARE_EDGES, OVERHEAD_SHARE_EDGES[1:])):
        inside = _in_bin(shares, lo, hi, i == len(OVERHEAD_SHARE_EDGES) - 2)
        if inside.any():
            entry = {"from": lo, "to": hi, "tpot_mape_fraction": float(errors[inside].mean()),
                     "points": int(inside.sum())}
            if models is not None:
                entry["models"] = sorted({str(m) for m, keep in zip(models, inside) if keep})
            out.append(entry)
    return out


def share_bin_error(bins, share: float) -> float | None:
    """The TPOT error of the bin of ``bins`` (errors_by_overhead_share) that ``share`` falls in, None
    where none does or it holds fewer than MIN_BIN_POINTS points."""
    for i, b in enumerate(bins or ()):
        if _in_bin(share, b["from"], b["to"], i == len(bins) - 1):
            return b["tpot_mape_fraction"] if b["points"] >= MIN_BIN_POINTS else None
    return None


def coverage_of(groups) -> dict:
    """What the measurements of a fit span (fitting._Group list)."""
    contexts = np.concatenate([g.prompt + g.gen for g in groups])
    params = [g.spec.param_count for g in groups]
    return {
        "context_tokens": [int(contexts.min()), int(contexts.max())],
        "prompt_tokens": [int(min(g.prompt.min() for g in groups)), int(max(g.prompt.max() for g in groups))],
        "batch": [int(min(g.batch.min() for g in groups)), int(max(g.batch.max() for g in groups))],
        "params": [int(min(params)), int(max(params))],
        "weight_dtypes": sorted({g.weight_dtype for g in groups}),
        "kv_dtypes": sorted({g.kv_dtype for g in groups}),
        "attention": sorted({g.spec.attention_label for g in groups}),
        "windows": any(g.spec.layer_windows is not None and any(g.spec.windows) for g in groups),
        "sinks": any(g.spec.attention_sinks for g in groups),
        "moe": any(g.spec.moe_layers for g in groups),
        "tp": sorted({int(g.tp) for g in groups}),
    }


def merge_coverage(a: dict, b: dict) -> dict:
    """The coverage of two fits' measurements together (a calibration extended by fit_extra_terms)."""
    out = dict(a)
    if b["moe"]:  # mixture-of-experts sizes are their own range: a dense model is judged by the dense ones
        out["moe_params"] = b["params"] if not a.get("moe_params") else [min(a["moe_params"][0], b["params"][0]),
                                                                           max(a["moe_params"][1], b["params"][1])]
        b = {**b, "params": a["params"]}
    for key in ("context_tokens", "prompt_tokens", "batch", "params"):
        out[key] = [min(a[key][0], b[key][0]), max(a[key][1], b[key][1])]
    for key in ("weight_dtypes", "kv_dtypes", "attention", "tp"):
        out[key] = sorted(set(a[key]) | set(b[key]))
    for key in ("windows", "sinks", "moe"):
        out[key] = bool(a[key] or b[key])
    # overhead shares too: a MoE layer's fixed time is its own, so a dense step is judged by the dense fits'
    key = "moe_overhead_share" if b["moe"] else "overhead_share"
    shares = [x for x in (a.get(key), b.get("overhead_share")) if x]
    if shares:
        out[key] = [min(x[0] for x in shares), max(x[1] for x in shares)]
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def floor_record() -> dict:
    """The pure roofline's measured record (pooled over the committed measurements)."""
    from roofline.atomic import read_json
    from roofline.hardware import profiles_dir

    return read_json(profiles_dir() / FLOOR_FILE, "floor errors")


def _context_key(key: str) -> int:
    prompt, gen = key.split("/")
    return int(prompt) + int(gen)


#: Which measured error stands for each quantity: TTFT from batch 64 up where the answer is there
#: (small-batch TTFTs are a few ms of launches, their relative error larger).
_KEYS = {"tpot": "tpot_mape_fraction", "ttft": "ttft_mape_fraction", "ttft_large": "ttft_mape_fraction_batch_64_up",
         "peak_mem": "peak_mem_mape_fraction"}


def expected_errors(calibration, scenario, batches, overhead_shares=None) -> dict:
    """The expected relative error of each answer, per batch: {tpot_fraction, ttft_fraction (arrays),
    peak_mem_fraction (a number), basis (words)}. Fractions are mean absolute errors measured out
    of sample; None where nothing measured them. ``overhead_shares``: each batch's decode step's
    overhead share (``overhead_share``), for the validation's error by share. See the module doc."""
    batches = np.atleast_1d(np.asarray(batches, dtype=float))
    n = len(batches)
    if calibration.is_uncalibrated:
        pooled = floor_record()["pooled"]
        return {"tpot_fraction": np.full(n, pooled["tpot"]["mape_fraction"]),
                "ttft_fraction": np.full(n, pooled["ttft"]["mape_fraction"]),
                "peak_mem_fraction": pooled["peak_mem"]["mape_fraction"],
                "basis": (f"floor: no calibration, so times are lower bounds; the pure roofline has been "
                          f"{100 * abs(pooled['tpot']['mean_signed_fraction']):.0f}% too fast in TPOT on average "
                          f"(worst {100 * abs(pooled['tpot']['worst_fraction']):.0f}%) over {pooled['tpot']['points']} "
                          f"measured points (hardware_profiles/{FLOOR_FILE})")}
    rep = calibration.fit_report or {}
    if rep.get("transferred"):  # issue 10: an engine profile's terms on a card without a calibration
        return _transferred_errors(rep["transferred"], n)
    lomo = list(rep.get("leave_one_model_out", {}).values())
    loco = rep.get("leave_one_context_out", {})
    context = scenario.prompt_tokens + scenario.gen_tokens
    nearest = min(loco, key=lambda k: abs(np.log(_context_key(k)) - np.log(max(context, 1)))) if loco else None
    held = [lomo] + ([[loco[nearest]]] if nearest else [])
    basis = "held-out errors of the calibration (leave one model out; leave out the nearest context"
    basis += f", {nearest})" if nearest else ")"
    category = "moe" if scenario.model.moe_layers else "tp" if scenario.tp > 1 else None
    validation = rep.get("validation", {}).get(category or "dense")
    if validation and category:
        held = [[validation]]
        basis = f"held-out {validation.get('what', category)} ({', '.join(validation.get('models', []))})"
    elif validation:
        held.append([validation])
        basis = basis[:-1] + f"; held-out {', '.join(validation.get('models', []))})"
    elif not lomo and not loco:
        held = [[rep.get("in_sample", {})]]
        basis = "the calibration's in-sample error (it held nothing out, so this understates it)"

    def pick(key):
        values = [_mean(e.get(_KEYS[key]) for e in group) for group in held]
        values = [v for v in values if v is not None]
        return max(values) if values else None

    ttft_small, ttft_large = pick("ttft"), pick("ttft_large")
    ttft = np.where(batches >= 64, np.nan if ttft_large is None else ttft_large,
                    np.nan if ttft_small is None else ttft_small)
    tpot = pick("tpot")
    tpot_rows = np.full(n, np.nan if tpot is None else tpot)
    bins = (validation or {}).get("tpot_mape_by_overhead_share")
    if bins and any(b["points"] >= MIN_BIN_POINTS for b in bins):
        basis = basis[:-1] + "; each row at least the held-out error of steps as much fixed overhead)"
        if overhead_shares is not None:
            by_share = [share_bin_error(bins, float(x)) for x in np.broadcast_to(overhead_shares, (n,))]
            tpot_rows = np.array([t if e is None else (e if np.isnan(t) else max(t, e))
                                  for t, e in zip(tpot_rows, by_share)])
    return {"tpot_fraction": tpot_rows, "ttft_fraction": ttft,
            "peak_mem_fraction": pick("peak_mem"), "basis": basis}


def _transferred_errors(transferred: dict, n: int) -> dict:
    """The engine profile's leave-one-card-out error (roofline.engines.transferred_calibration)."""
    err = transferred.get("error", {})
    tpot, ttft = err.get("tpot_mape_fraction"), err.get("ttft_mape_fraction")
    where = f"{transferred['engine']} profile ({transferred['variant']})"
    basis = (f"transferred from the {where}, leave-one-card-out error "
             + ("?" if tpot is None else f"{100 * tpot:.0f}%") + f" ({err.get('basis', 'leave-one-card-out')}, "
             f"{err.get('points', 0)} points; roofline.engines)")
    return {"tpot_fraction": np.full(n, np.nan if tpot is None else tpot),
            "ttft_fraction": np.full(n, np.nan if ttft is None else ttft), "peak_mem_fraction": None, "basis": basis}


def extrapolation(calibration, scenario, batches, overhead_shares=None) -> list[list[str]]:
    """Per batch, the reasons the answer leaves what the calibration saw (empty lists: none);
    ``overhead_shares`` as for expected_errors."""
    batches = np.atleast_1d(np.asarray(batches))
    common: list[str] = []
    if calibration.is_uncalibrated:
        common.append("no calibration: the card's ceilings alone (a floor)")
        return [list(common) for _ in batches]
    if calibration.card != scenario.card.id:
        common.append(f"calibration fitted on {calibration.card}, not {scenario.card.id}")
    transferred = (calibration.fit_report or {}).get("transferred")
    if transferred and not transferred.get("measured_on_this_card"):
        common.append(f"no {transferred['engine']} measurement of {scenario.card.id}: the "
                      f"{transferred['engine']} profile's terms, transferred")
    cov = (calibration.fit_report or {}).get("coverage")
    if not cov:
        common.append("the calibration records no coverage (fitted before roofline 0.2)")
        return [list(common) for _ in batches]
    spec = scenario.model
    context = scenario.prompt_tokens + scenario.gen_tokens
    lo, hi = cov["context_tokens"]
    if context > hi:
        common.append(f"context {context:,} tokens beyond the {hi:,} the calibration saw")
    elif context < lo:
        common.append(f"context {context:,} tokens below the {lo:,} the calibration saw")
    plo, phi = cov["moe_params"] if spec.moe_layers and cov.get("moe_params") else cov["params"]
    if spec.param_count > SIZE_MARGIN * phi or spec.param_count < plo / SIZE_MARGIN:
        common.append(f"model of {spec.param_count / 1e9:.2g}B parameters outside the "
                      f"{plo / 1e9:.2g}-{phi / 1e9:.2g}B the calibration saw")
    if scenario.weight_dtype not in cov["weight_dtypes"]:
        common.append(f"weights in {scenario.weight_dtype}, the calibration saw {', '.join(cov['weight_dtypes'])}")
    if scenario.kv_dtype not in cov["kv_dtypes"]:
        common.append(f"KV cache in {scenario.kv_dtype}, the calibration saw {', '.join(cov['kv_dtypes'])}")
    if spec.attention_label not in cov["attention"] and not (spec.attention_label in ("mha", "mqa", "gqa")
                                                                and {"mha", "gqa", "mqa"} & set(cov["attention"])):
        common.append(f"{spec.attention_label} attention, the calibration saw {', '.join(cov['attention'])}")
    if spec.moe_layers and not cov["moe"]:
        common.append("mixture of experts: the calibration saw dense models only")
    if any(spec.windows) and spec.layer_windows is not None and not cov["windows"]:
        common.append("sliding-window layers: the calibration saw full attention only")
    if spec.attention_sinks and not cov["sinks"]:
        common.append("attention sinks: the calibration saw none")
    tps = sorted(set(cov["tp"]) | set(cov.get("link_tp", [])))
    if scenario.tp not in tps:
        common.append(f"tensor parallelism {scenario.tp}: the calibration measured {' and '.join(map(str, tps))} GPU(s)")
    share_range = cov.get("moe_overhead_share") if spec.moe_layers and cov.get("moe_overhead_share") \
        else cov.get("overhead_share")
    shares = None if overhead_shares is None or not share_range else np.broadcast_to(overhead_shares, batches.shape)
    top_share = share_range[1] if share_range else None
    out = []
    for i, b in enumerate(batches):
        reasons = list(common)
        if b > cov["batch"][1]:
            reasons.append(f"batch {int(b):,} beyond the {cov['batch'][1]:,} the calibration saw")
        if shares is not None and shares[i] > top_share + OVERHEAD_SHARE_MARGIN:
            reasons.append(f"a step {100 * shares[i]:.0f}% fixed overhead, beyond the {100 * top_share:.0f}% "
                           "of the most overhead-bound step the calibration was fitted on")
        out.append(reasons)
    return out
