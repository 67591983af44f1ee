"""The decode softmax's walk along a row at few rows (Calibration.attention_softmax_warp_s_per_token and
_after_tokens; roofline.probes.softmax_warp_floor): recovery of a known line from a synthetic probe
file, refusal of a file without such series, the fit option, the shipped H200 calibration against
its probes, and where the step model charges the floor and where it does not."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import main
from roofline.calibration import load_calibration
from roofline.errors import RooflineError
from roofline.probes import softmax_warp_floor
from roofline.scenario import make_scenario
from roofline.step import PassWork

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
M = "hardware_profiles/measurements"


def _softmax_file(tmp_path, slope, intercept, floor_s, name="softmax.json"):
    """graph_softmax points of few rows: max(floor, intercept + slope x positions) at 128-2,048
    positions, and many rows (bandwidth-bound, twice as slow) and long rows the reader must skip."""
    points = []
    for q, b in ((14, 1), (14, 4), (32, 1), (32, 4)):
        for t in (128, 512, 1024, 2048):
            points.append({"shape": f"q{q}", "q_heads": q, "kv_heads": 2, "head_dim": 64, "batch": b,
                           "context_tokens": t, "op": "graph_softmax", "s": max(floor_s, intercept + slope * t)})
        points.append({"shape": f"q{q}", "q_heads": q, "kv_heads": 2, "head_dim": 64, "batch": b,
                       "context_tokens": 8192, "op": "graph_softmax", "s": 1e-3})  # the block kernel's rows
    for t in (512, 2048):  # 32 x 64 = 2,048 rows: not the warp's floor
        points.append({"shape": "q32", "q_heads": 32, "kv_heads": 2, "head_dim": 64, "batch": 64,
                       "context_tokens": t, "op": "graph_softmax", "s": 1e-3 * t})
    path = tmp_path / name
    path.write_text(json.dumps({"probe": "attention", "points": points}))
    return path


def test_a_known_walk_is_recovered(tmp_path):
    slope, after = softmax_warp_floor(_softmax_file(tmp_path, 3e-9, 1.9e-6, 2.3e-6))
    assert slope == pytest.approx(3e-9, rel=1e-9)
    # the walk passes the shortest rows' 2.3 us at (2.3 - 1.9) us / 3 ns = 133 positions
    assert after == pytest.approx(0.4e-6 / 3e-9, rel=1e-9)


def test_a_file_without_few_row_series_is_refused(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"probe": "attention", "points": [
        {"shape": "a", "q_heads": 32, "kv_heads": 8, "head_dim": 128, "batch": 64, "context_tokens": t,
         "op": "graph_softmax", "s": 1e-5} for t in (512, 2048)]}))
    with pytest.raises(RooflineError, match="no softmax series"):
        softmax_warp_floor(path)


def test_the_fit_option_stores_the_walk(tmp_path):
    probe = _softmax_file(tmp_path, 3e-9, 1.9e-6, 2.3e-6)
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["fit", f"{M}/rtx3060-hf-eager-lesson.csv", "--card", "rtx3060", "-o", str(out),
                                  "--softmax-probe", str(probe)])
    assert r.exit_code == 0, r.output
    cal = load_calibration(out)
    assert cal.attention_softmax_warp_s_per_token == pytest.approx(3e-9, rel=1e-9)
    assert cal.attention_softmax_warp_after_tokens == pytest.approx(133.33, rel=1e-3)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = CliRunner().invoke(main, ["fit", f"{M}/rtx3060-hf-eager-lesson.csv", "--card", "rtx3060",
                                  "--softmax-probe", str(bad)])
    assert r.exit_code != 0 and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_the_shipped_calibration_holds_what_its_probes_give():
    cal = load_calibration(SHIPPED)
    slope, after = softmax_warp_floor([f"{M}/h200-probe-attention.json", f"{M}/h200-probe-attention-widths.json"])
    # the same fit: equal but for the last digits, which move with the installed numpy (2.4.6: 6e-14 apart)
    assert cal.attention_softmax_warp_s_per_token == pytest.approx(slope, rel=1e-9)
    assert cal.attention_softmax_warp_after_tokens == pytest.approx(after, rel=1e-9)
    # golden: the H200's softmax alone at batches 1-4 runs 3.1-3.6 us at 512-528 positions and 8.1-8.3 us at
    # 2,048 (h200-probe-attention.json, h200-probe-attention-widths.json): ~3.1 ns a position, from ~140 on
    assert 2.8e-9 < slope < 3.4e-9 and 100 < after < 200


def _decode_s(cal, context, batch=1, model="qwen2.5-7b"):
    step = make_scenario(card="h200", model=model, engine="graph", calibration=cal).step
    return step.pass_s(PassWork(float(batch), float(batch * context), 0.0, 0.0, float(batch), None, None)), step


@pytest.mark.parametrize("context, charged", [(100, False), (1952, True), (2048, True), (2056, False), (8192, False)])
def test_the_floor_is_charged_only_on_the_warp_kernels_rows(context, charged):
    # the floor's own charge: the attention's ramp (which grows with the priced attention, the floor
    # included: tests/test_attention_ramp.py) set aside
    with_ = load_calibration(SHIPPED).model_copy(update={"attention_ramp_s": 0.0})
    without = with_.model_copy(update={"attention_softmax_warp_s_per_token": None})
    a, step = _decode_s(with_, context)
    b, _ = _decode_s(without, context)
    if not charged:
        assert a == b
        return
    # at batch 1 the score traffic (0.3 us a layer) is far below the walk, which replaces it: the pass grows
    # by the walk over every layer less that traffic
    walk = (context - with_.attention_softmax_warp_after_tokens) * with_.attention_softmax_warp_s_per_token \
        * step.spec.num_hidden_layers
    assert 0.85 * walk < a - b <= walk


def test_many_sequences_pay_their_bytes_not_the_floor():
    """At batch 256 the scores' traffic exceeds one warp's walk: the floor does not move the step."""
    with_ = load_calibration(SHIPPED)
    without = with_.model_copy(update={"attention_softmax_warp_s_per_token": None})
    assert _decode_s(with_, 1952, 256)[0] == _decode_s(without, 1952, 256)[0]


@pytest.mark.parametrize("context, charged", [(2047, True), (2048, False)])
def test_a_sink_joins_the_softmax_row(context, charged):
    """gpt-oss-20b's sink logit joins each row (the graph engine pads it to 8 more: the same side of
    2,048): a cache of 2,048 positions is a row of 2,049, past the warp kernel's rows, where a model
    without sinks still walks its row (device call 80: qwen3-30b-a3b's layer with gpt-oss's ran no
    slower at 2,048 positions than at 4,104, its own 6 us slower)."""
    with_ = load_calibration(SHIPPED).model_copy(update={"attention_ramp_s": 0.0})
    without = with_.model_copy(update={"attention_softmax_warp_s_per_token": None})
    a, b = (make_scenario(card="h200", model="gpt-oss-20b", engine="graph", calibration=cal).step.pass_s(
        PassWork(1.0, float(context), 0.0, 0.0, 1.0, 128.0, None)) for cal in (with_, without))  # the rings: 128
    step = make_scenario(card="h200", model="gpt-oss-20b", engine="graph", calibration=with_).step
    assert step.spec.attention_sinks and step.window == 128
    full_layers = sum(g.layers for g in step.spec.attention_groups if not g.window)
    walk = (context + 1 - with_.attention_softmax_warp_after_tokens) * with_.attention_softmax_warp_s_per_token \
        * full_layers
    if charged:  # the full layers' rows of 2,048 walk (the windowed layers' ring of 128 + 1: below the start),
        # less the score traffic the walk replaces (64 query heads a layer: ~1 us)
        assert 0.75 * walk < a - b <= walk
    else:
        assert a == b
