"""The chart page's JavaScript port (roofline/chart_assets/model.js, serving.js) against the Python package.

``RooflineModel.compute(settings)`` in model.js, merged with ``RooflineServing.compute(settings)``
in serving.js, returns for one what-if setting the numbers the page draws: predict's rows (every
column, the expected error and the extrapolation reasons), the bend, the expected error's basis,
the chosen and the largest fitting batch, static waste and both servers. ``python_result``
computes the same with the package (roofline.api), and ``differences`` lists where they disagree.
tests/test_model_js.py runs the port under node on many settings; tests/test_chart_browser.py
runs it inside the page in chromium.
"""

from __future__ import annotations

import math

from roofline import api
from roofline.chart_data import settings_calibration
from roofline.prediction import bend, evaluate
from roofline.scenario import make_scenario

ROW_KEYS = (
    "ttft_s", "tpot_s", "per_user_tok_s", "throughput_tok_s", "peak_mem_gib", "intensity_flop_per_byte",
    "compute_ceiling_fraction", "bandwidth_ceiling_fraction", "e2e_s", "peak_mem_bytes", "weights_bytes",
    "kv_cache_bytes", "activations_bytes", "logits_bytes", "workspace_bytes", "bytes_per_step", "flop_per_step",
    "step_overhead_s", "step_memory_s", "step_compute_s",
)
EXACT_ROW_KEYS = ("batch", "bound", "ttft_bound", "fits_in_memory", "extrapolation")
ERROR_KEYS = ("tpot_fraction", "ttft_fraction", "peak_mem_fraction")
BEND_EXACT = ("crossing_batch", "knee_batch", "region_low_batch", "region_high_batch", "experts_saturated_batch",
              "num_experts")
BEND_FLOAT = ("balance_point_flop_per_byte", "intensity_limit_flop_per_byte")
WASTE_EXACT = ("requests", "batches", "tokens_needed", "slots_used", "wasted_slots")
CLASS_FLOAT = ("ttft_in_batch_s", "e2e_in_batch_s", "e2e_alone_s", "slowdown")
SERVER_EXACT = ("requests", "generated_tokens", "passes", "slot_steps", "idle_slot_steps")
SERVER_FLOAT = ("makespan_s", "throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "e2e_p90_s",
                "e2e_p99_s", "mean_occupancy", "waste_fraction")
PARITY_BATCHES = [1, 2, 3, 7, 16, 64, 100, 128, 1000, 4096]
#: The largest batch the page searches (its bend_max_batch); choose is asked for the same range.
MAX_BATCH = 65536


def rel_err(a, b) -> float:
    a, b = float(a), float(b)
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def python_scenario(data: dict, settings: dict):
    """The Scenario the page computes for ``settings`` (its initial settings overridden)."""
    s = {**data["initial"], **settings}
    kv_cache = None if s["kv_cache"] in (None, "auto") else s["kv_cache"]
    return make_scenario(card=s["card"], model=s["model"], prompt_tokens=s["prompt_tokens"],
                         gen_tokens=s["gen_tokens"], kv_cache=kv_cache, logits=s.get("logits", "last"),
                         calibration=settings_calibration(data, s), weight_dtype=s["weight_dtype"],
                         kv_dtype=s["kv_dtype"], tp=s.get("tp", 1), routing_skew=s.get("routing_skew", 0.0))


def python_result(data: dict, settings: dict) -> dict:
    """What the page's compute(settings) should return, from the Python package."""
    s = {**data["initial"], **settings}
    scenario = python_scenario(data, s)
    prediction = evaluate(scenario, s.get("batches", PARITY_BATCHES))
    out = {"rows": prediction.rows(), "bend": bend(scenario).as_dict(),
           "expected_error_basis": prediction.meta()["expected_error_basis"]}
    try:
        out["chosen_batch"] = api.choose(scenario=scenario, ttft_max_s=s["ttft_max_s"], max_batch=MAX_BATCH).batch
    except Exception:  # noqa: BLE001 - no batch meets the limit
        out["chosen_batch"] = None
    try:
        out["fits_batch"] = api.choose(scenario=scenario, max_batch=MAX_BATCH).batch
    except Exception:  # noqa: BLE001 - not even batch 1 fits
        out["fits_batch"] = None
    if s.get("serving", True) is False:
        return out
    common = dict(calibration=scenario.calibration, weight_dtype=s["weight_dtype"], kv_dtype=s["kv_dtype"],
                  tp=scenario.tp, routing_skew=scenario.routing_skew)
    out["waste"] = api.waste(mix=s["mix"], batch=s["batch"], prompt_tokens=s["prompt_tokens"], card=s["card"],
                             model=s["model"], return_policy="whole-batch", **common)
    sim = api.simulate(s["card"], s["model"], batch=s["batch"], mix=s["mix"], count=s["stream_count"],
                       prompt_tokens=s["prompt_tokens"], return_policy=s["return_policy"],
                       gpu_memory_utilization=None,  # the page's server: slots only, no KV pool (yet)
                       **common)
    out["serve_static"], out["serve_continuous"] = sim["static"], sim["continuous"]
    return out


def differences(js: dict, py: dict, rel: float) -> list[str]:
    """Where the port's result ``js`` disagrees with ``py`` (floats beyond ``rel`` relative)."""
    bad: list[str] = []
    if "error" in js:
        return [f"the port failed: {js['error']}"]

    def close(where, a, b):
        if b is None or (isinstance(b, float) and math.isinf(b)):
            if a is not None:
                bad.append(f"{where}: {a!r} vs {b!r}")
        elif a is None or rel_err(a, b) > rel:
            bad.append(f"{where}: {a!r} vs {b!r}")

    def same(where, a, b):
        if a != b:
            bad.append(f"{where}: {a!r} vs {b!r}")

    if len(js["rows"]) != len(py["rows"]):
        return [f"rows: {len(js['rows'])} vs {len(py['rows'])}"]
    for pg, pr in zip(js["rows"], py["rows"]):
        for k in EXACT_ROW_KEYS:
            same(f"batch {pr['batch']} {k}", pg[k], pr[k])
        for k in ROW_KEYS:
            close(f"batch {pr['batch']} {k}", pg[k], pr[k])
        for k in ERROR_KEYS:
            close(f"batch {pr['batch']} expected_error {k}", pg["expected_error"][k], pr["expected_error"][k])
    for k in BEND_EXACT:
        same(f"bend {k}", js["bend"][k], py["bend"][k])
    for k in BEND_FLOAT:
        close(f"bend {k}", js["bend"][k], py["bend"][k])
    same("expected_error_basis", js["expected_error_basis"], py["expected_error_basis"])
    same("chosen_batch", js["chosen_batch"], py["chosen_batch"])
    same("fits_batch", js["fits_batch"], py["fits_batch"])
    if "waste" not in py:
        return bad
    for k in WASTE_EXACT:
        same(f"waste {k}", js["waste"][k], py["waste"][k])
    close("waste waste_fraction", js["waste"]["waste_fraction"], py["waste"]["waste_fraction"])
    for pc, pyc in zip(js["waste"]["classes"], py["waste"]["classes"]):
        for k in CLASS_FLOAT:
            close(f"waste class {pyc['class']} {k}", pc[k], pyc[k])
    for name in ("serve_static", "serve_continuous"):
        for k in SERVER_EXACT:
            same(f"{name} {k}", js[name][k], py[name][k])
        for k in SERVER_FLOAT:
            close(f"{name} {k}", js[name][k], py[name][k])
    return bad
