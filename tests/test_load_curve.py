"""The card's matmul rate against time under load (the sustained-matmul probe): its reader, the
calibration's curve, and the prefill priced at the curve's average over the pass."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from cli import main
from roofline.calibration import Calibration, load_calibration
from roofline.errors import RooflineError
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.prefill import load_average, prefill, static_prefill_work
from roofline.probes import sustained_matmul_curve
from roofline.step import StepModel

H200_GRAPH = "hardware_profiles/calibrations/h200-graph.json"
H200_PROBE = "hardware_profiles/measurements/h200-probe-sustained-matmul.json"


def _probe(tmp_path, series):
    """A sustained-matmul file: {series: [(window end, seconds), ...]}."""
    windows = [{"series": name, "phase": 1, "load_s": end, "seconds": sec} for name, ws in series.items()
               for end, sec in ws]
    path = tmp_path / "probe-sustained-matmul.json"
    path.write_text(json.dumps({"probe": "sustained-matmul", "windows": windows}))
    return path


def _at(curve, t):
    """The curve's value at its point nearest ``t`` seconds (bin midpoints are sums of floats)."""
    return min(curve, key=lambda p: abs(p[0] - t))[1]


def _steady(rate_of, dt, until):
    """Windows of ``dt`` seconds back to back, each at rate_of(its midpoint) (work 1 each)."""
    out, t = [], 0.0
    while t + dt <= until + 1e-12:
        out.append((t + dt, 1.0 / rate_of(t + 0.5 * dt)))
        t += dt
    return out


def test_the_reader_bins_each_window_at_its_midpoint_relative_to_the_first_bin(tmp_path):
    # a boost for the first 0.1 s, then 80% of it: the curve says so bin by bin
    rate = lambda t: 100.0 if t < 0.1 else 80.0  # noqa: E731
    path = _probe(tmp_path, {"gemm": _steady(rate, 0.01, 3.0)})
    curve = sustained_matmul_curve(path, "gemm")
    assert curve[0] == (0.0, 1.0)
    assert _at(curve, 0.075) == pytest.approx(1.0)  # (0.05, 0.1]: still boosted
    assert _at(curve, 0.125) == pytest.approx(0.8) and _at(curve, 2.5) == pytest.approx(0.8)


def test_the_reader_prefers_the_finest_prefill_series_and_names_a_missing_one(tmp_path):
    fast = lambda t: 10.0  # noqa: E731
    slow = lambda t: 10.0 if t < 0.5 else 9.0  # noqa: E731
    path = _probe(tmp_path, {"gemm": _steady(fast, 0.01, 2.0), "prefill a 4x512": _steady(slow, 0.02, 2.0),
                             "prefill b 16x2048": _steady(fast, 0.5, 2.0)})
    assert _at(sustained_matmul_curve(path), 1.25) == pytest.approx(0.9)  # the 4x512 series: the most windows
    with pytest.raises(RooflineError, match="no series 'prefill c'"):
        sustained_matmul_curve(path, "prefill c")
    # a series of windows too long for the first bins has no curve
    with pytest.raises(RooflineError, match="first bins"):
        sustained_matmul_curve(path, "prefill b 16x2048")


def test_load_average_integrates_the_curve_linearly_between_its_points():
    curve = [(0.0, 1.0), (0.1, 0.9), (1.0, 0.8)]
    got = load_average(curve, np.array([0.0, 0.05, 0.1, 0.55, 1.0, 3.0]))
    # by hand: trapezoids; the last value held after the last point
    want = [1.0, 0.975, 0.95, (0.095 + 0.875 * 0.45) / 0.55, 0.86, (0.86 + 0.8 * 2.0) / 3.0]
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("curve", [[], [(0.1, 1.0), (0.0, 0.9)], [(0.0, 1.0), (0.0, 0.9)], [(0.0, 1.0), (1.0, 0.0)],
                                   [(0.0, 1.0), (1.0, float("nan"))]])
def test_the_calibration_refuses_a_curve_that_is_not_one(curve):
    cal = load_calibration(H200_GRAPH).model_dump()
    with pytest.raises(ValueError, match="matmul_load_curve"):
        Calibration(**{**cal, "matmul_load_curve": curve})


def test_a_long_prefill_runs_its_fitted_matmuls_at_the_curves_average():
    card, spec = load_card("h200"), load_model("qwen2.5-7b")
    base = load_calibration(H200_GRAPH).model_copy(update={"matmul_load_curve": None})
    curve = [(0.0, 1.0), (0.1, 0.8)]
    loaded = base.model_copy(update={"matmul_load_curve": curve})
    flat, slow = StepModel(spec=spec, card=card, calibration=base), StepModel(spec=spec, card=card, calibration=loaded)
    for batch, prompt in ((1, 128), (64, 2048)):
        a, b = prefill(flat, batch, prompt), prefill(slow, batch, prompt)
        ttft = float(b["ttft_s"])
        # the fixed point: the rest unchanged, the fitted matmuls over the average of the pass's length
        work = static_prefill_work(batch, prompt, "last", flat.window, flat.masked_prefill)
        fitted = min(float(a["compute_s"]), float(flat.prefill_fitted_compute_s(work)))
        assert ttft == pytest.approx(float(a["ttft_s"]) - fitted + fitted / float(load_average(curve, ttft)), rel=1e-3)
    # a prefill of ms runs near the boost; one of seconds near the curve's 0.8 (its matmuls ~25% longer)
    short = float(prefill(slow, 1, 128)["ttft_s"]) / float(prefill(flat, 1, 128)["ttft_s"])
    long_ = float(prefill(slow, 64, 2048)["ttft_s"]) / float(prefill(flat, 64, 2048)["ttft_s"])
    assert short < 1.02 and 1.15 < long_ < 1.25


def test_the_shipped_graph_calibration_carries_the_h200s_curve():
    cal = load_calibration(H200_GRAPH)
    # golden: device call 49 (h200-probe-sustained-matmul.json), qwen2.5-7b's prefill of 4 x 512
    # tokens a forward back to back: ~4.5% slower from 0.05 s, ~9% after 6 s (at the 700 W limit)
    assert cal.matmul_load_curve == sustained_matmul_curve(H200_PROBE)
    curve = cal.matmul_load_curve
    assert _at(curve, 10.0) == pytest.approx(0.908, abs=0.01) and _at(curve, 0.075) == pytest.approx(0.955, abs=0.01)
    # the pure GEMM throttles harder: its clock falls from 1,980 to ~1,450 MHz (~15% slower)
    assert _at(sustained_matmul_curve(H200_PROBE, "gemm"), 10.0) == pytest.approx(0.856, abs=0.015)


def test_fit_takes_the_sustained_matmul_probe_on_the_command_line(tmp_path):
    table = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
    out = tmp_path / "cal.json"
    path = _probe(tmp_path, {"prefill x 1x1": _steady(lambda t: 10.0 if t < 0.1 else 9.0, 0.01, 1.0)})
    r = CliRunner().invoke(main, ["fit", table, "--card", "rtx3060", "-o", str(out), "--sustained-matmul-probe", str(path)])
    assert r.exit_code == 0, r.output
    assert _at(load_calibration(out).matmul_load_curve, 0.875) == pytest.approx(0.9)
    assert "0.875 s: 0.900" in r.output
    path.write_text(json.dumps({"probe": "sustained-matmul", "windows": []}))
    r = CliRunner().invoke(main, ["fit", table, "--card", "rtx3060", "-o", str(out), "--sustained-matmul-probe", str(path)])
    assert r.exit_code != 0 and "no series" in r.output and "Traceback" not in r.output


def test_the_sustained_matmul_probe_runs_on_the_cpu(tmp_path):
    import torch

    from calibrate import probes

    path = tmp_path / "probe-sustained-matmul.json"
    # One CPU thread: with torch's thread pool on a loaded two-core machine (CI), one descheduled worker
    # held every tiny GEMM ~100 ms, so a load phase had a handful of windows and none in its first bins
    # (seen once in CI; reproduced with four busy processes beside it, and gone with one thread).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = probes.sustained_probe("cpu", probes.TINY_SUSTAINED, path, None, lambda m: None)
    finally:
        torch.set_num_threads(threads)
    series = {w["series"] for w in data["windows"]}
    assert series == {"gemm", "prefill tiny-llama 2x16"} and not data["errors"]
    # every load phase's windows, back to back, ends past its length
    loads = [w["load_s"] for w in data["windows"] if w["series"] == "gemm" and w["phase"] == 1]
    assert loads == sorted(loads) and loads[-1] >= probes.TINY_SUSTAINED.phases[1][1]
    assert sustained_matmul_curve(path, "gemm")[0] == (0.0, 1.0)
