"""PyTorch's small-index kernels (Calibration.index_kernel_table; roofline.index_kernels; calibrate.probes
--what index; docs/method.md section 4): the probe on the CPU with the engine's index patterns, the
table read from it, the ops a MoE layer runs (the graph engine's moe_forward), the excess over the
large-index kernels (exact at the probed points, linear between), the step model charging it only at
1-16 routed rows of an MoE model, and the shipped H200 calibration holding what the shipped probe file
gives."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate import index_probe
from roofline.calibration import Calibration, load_calibration
from roofline.errors import RooflineError
from roofline.hardware import load_card
from roofline.index_kernels import (OPS, SMALL_INDEX_MAX_ROWS, check_table, excess_at, layer_excess_s, moe_index_ops,
                                    read_index_probe)
from roofline.model_spec import load_model
from roofline.step import StepModel, decode_work, prefill_work

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
PROBE = "hardware_profiles/measurements/h200-probe-index-call77.json"


def _law(op, repeat, width, rows):
    """A known synthetic law: 2 us + (0.3 us x a repeat factor) a row on the small path, 1.5 us (+ width) above."""
    if rows > SMALL_INDEX_MAX_ROWS:
        return 1.5e-6 + 1e-10 * width
    return 2e-6 + 0.3e-6 * rows * (1.0 + 0.1 * repeat) + (0.5e-6 if op == "index-add" else 0.0)


def _probe_file(tmp_path, widths=(1024, 4096), repeats=(1, 8), drop=None):
    points = [{"op": op, "width": w, "repeat": k, "rows": r, "s": _law(op, k, w, r)}
              for op, wide in OPS.items() for w in (widths if wide else (1,)) for k in repeats
              for r in list(range(1, SMALL_INDEX_MAX_ROWS + 1)) + [17, 32] if (op, w, k, r) != drop]
    points.append({"op": "gather", "width": 1024, "rows": 3, "s": 1.0})  # call 76's grid: no repeat, not read
    path = tmp_path / "index.json"
    path.write_text(json.dumps({"probe": "index", "points": points}))
    return path


def test_index_probe_on_cpu_writes_a_table_roofline_reads(tmp_path):
    grid = index_probe.TINY_INDEX
    path = tmp_path / "probe-index.json"
    data = index_probe.index_probe("cpu", grid, path, None, lambda m: None)
    assert data["stopped"] is None and not data["errors"]
    assert not [p for p in data["points"] if "error" in p]
    wide = sum(OPS.values())
    assert len(data["points"]) == len(grid.rows) * len(grid.repeats) * (wide * len(grid.widths) + len(OPS) - wide)
    assert all(p["s"] > 0 and p["kernels"] for p in data["points"])
    table = read_index_probe([path])
    assert table["ops"]["gather"]["repeats"] == [1.0, 4.0] and table["ops"]["gather"]["widths"] == [16.0, 32.0]
    assert table["ops"]["select-1d"]["widths"] == [1.0]
    Calibration(card="cpu", engine="graph", index_kernel_table=table)  # a table the calibration takes


def test_index_probe_stops_at_the_budget(tmp_path):
    data = index_probe.index_probe("cpu", index_probe.TINY_INDEX, tmp_path / "t.json", 0.0, lambda m: None)
    assert data["stopped"] and not data["points"]


@pytest.mark.parametrize("rows,repeat", [(1, 1), (5, 2), (16, 8), (17, 4), (9, 8)])
def test_engine_indices_are_the_engines_patterns(rows, repeat):
    import torch

    order, token, expert = index_probe.engine_indices(rows, repeat, 32, torch.Generator().manual_seed(1), "cpu")
    assert len(order) == len(token) == len(expert) == rows
    tokens = -(-rows // repeat)
    assert int(order.max()) < tokens * repeat and len(set(order.tolist())) == rows  # a permutation's first rows
    assert torch.equal(token, torch.div(order, repeat, rounding_mode="floor"))
    assert torch.equal(expert, torch.sort(expert).values)  # sorted by expert, as moe_forward's argsort
    if rows == tokens * repeat:  # every token's row gathered repeat times
        assert sorted(token.tolist()) == sorted(list(range(tokens)) * repeat)


def test_the_table_holds_the_probe_and_the_excess_is_small_less_large(tmp_path):
    table = read_index_probe(_probe_file(tmp_path))
    check_table(table)
    e = table["ops"]["index-add"]
    assert e["repeats"] == [1.0, 8.0] and e["widths"] == [1024.0, 4096.0]
    assert e["small_s"][1][0][2] == pytest.approx(_law("index-add", 8, 1024, 3))
    assert e["large_s"][0][1] == pytest.approx(_law("index-add", 1, 4096, 17))  # the fewest rows above the switch
    ops = [("gather", 1024.0), ("index-add", 4096.0)]
    ex = layer_excess_s(table, ops, 8.0)
    assert ex[0] == 0.0 and len(ex) == SMALL_INDEX_MAX_ROWS + 1
    for r in (1, 7, 16):
        want = sum(_law(op, 8, w, r) - _law(op, 8, w, 17) for op, w in ops)
        assert ex[r] == pytest.approx(want, rel=1e-12)
    # between probed repeats and widths: linear in their logs (the law is linear in repeat: read at
    # sqrt(8), a third of the way in log from 1 to 8 ... half the way)
    mid = layer_excess_s(table, [("gather", 2048.0)], 8.0 ** 0.5)
    lo, hi = (layer_excess_s(table, [("gather", 2048.0)], k)[5] for k in (1.0, 8.0))
    assert mid[5] == pytest.approx((lo + hi) / 2, rel=1e-12)
    # past the probed widths and repeats: the ends held
    assert layer_excess_s(table, [("gather", 99999.0)], 64.0) == layer_excess_s(table, [("gather", 4096.0)], 8.0)


def test_excess_at_floats_equal_arrays_and_is_zero_past_the_switch():
    excess = tuple(float(i) * 1e-6 - 0.5e-6 * (i == 1) for i in range(SMALL_INDEX_MAX_ROWS + 1))
    rows = [0.0, 0.5, 1.0, 2.5, 8.0, 15.5, 16.0, 16.5, 17.0, 64.0, -1.0]
    floats = [excess_at(excess, r) for r in rows]
    assert np.allclose(excess_at(excess, np.array(rows)), floats, rtol=0, atol=1e-18)
    assert floats[0] == 0.0 and floats[-4:] == [0.0, 0.0, 0.0, 0.0]
    assert floats[1] == pytest.approx(0.5 * excess[1]) and floats[3] == pytest.approx((excess[2] + excess[3]) / 2)
    assert floats[6] == pytest.approx(excess[16], rel=1e-12)


def test_the_table_refuses_what_is_not_one(tmp_path):
    with pytest.raises(RooflineError, match="lack"):  # a row missing at every width of one op
        read_index_probe(_probe_file(tmp_path, widths=(1024,), repeats=(1,), drop=("select-1d", 1, 1, 9)))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"probe": "grouped-mm", "points": []}))
    with pytest.raises(RooflineError, match="not an index probe"):
        read_index_probe(other)
    good = read_index_probe(_probe_file(tmp_path))
    bad = json.loads(json.dumps(good))
    bad["ops"]["gather"]["widths"] = [4096.0, 1024.0]
    with pytest.raises(ValueError, match="index_kernel_table"):
        Calibration(card="h200", engine="graph", index_kernel_table=bad)
    bad = json.loads(json.dumps(good))
    bad["ops"]["gather"]["small_s"][0][0][3] = -1.0
    with pytest.raises(ValueError, match="index_kernel_table"):
        Calibration(card="h200", engine="graph", index_kernel_table=bad)


def test_a_moe_layer_runs_the_engines_index_ops():
    # calibrate.graph_engine.moe_forward: expert ids sorted, hidden rows gathered, (gpt-oss: two bias
    # tables' rows), the routing weights, the combine
    qwen = load_model("qwen3-30b-a3b")
    assert moe_index_ops(qwen) == [("select-1d-long", 1.0), ("gather", 2048.0), ("select-1d", 1.0),
                                   ("index-add", 2048.0)]
    oss = load_model("gpt-oss-20b")
    assert moe_index_ops(oss, tp=2)[2:4] == [("gather-weights", 2880.0), ("gather-weights", 2880.0)]
    assert moe_index_ops(oss)[2] == ("gather-weights", 5760.0)
    assert moe_index_ops(load_model("qwen2.5-7b")) == []


def test_the_step_charges_the_excess_at_few_routed_rows_only(tmp_path):
    table = read_index_probe(_probe_file(tmp_path))
    card = load_card("h200")
    base = load_calibration(SHIPPED).model_copy(update={"index_kernel_table": None})
    cal = base.model_copy(update={"index_kernel_table": table})
    spec = load_model("qwen3-30b-a3b")  # k = 8: one token routes 8 rows, two 16, three 24
    per_layer = layer_excess_s(table, moe_index_ops(spec), 8.0)
    for batch, rows in ((1, 8), (2, 16), (3, 24), (64, 512)):
        w = decode_work(float(batch), float(batch * 1000))
        with_, without = StepModel(spec, card, cal), StepModel(spec, card, base)
        want = spec.moe_layers * per_layer[rows] if rows <= SMALL_INDEX_MAX_ROWS else 0.0
        # a kernel family's time (the elementwise kernels'), so the step's total up to the overhead's blend
        assert with_.pass_parts(w).elementwise_s - without.pass_parts(w).elementwise_s == pytest.approx(
            want, rel=1e-12, abs=1e-15), batch
        assert with_.pass_s(w) - without.pass_s(w) == pytest.approx(want, rel=1e-4, abs=1e-12), batch
    # arrays as floats; a prompt of 2 tokens is 16 rows too; a dense model pays nothing
    step = StepModel(spec, card, cal)
    batches = np.array([1.0, 2.0, 3.0, 64.0])
    assert np.allclose(step.pass_s(decode_work(batches, batches * 1000)),
                       [step.pass_s(decode_work(b, b * 1000)) for b in batches], rtol=1e-12)
    p = prefill_work(2.0, 3.0, 1.0)
    assert step.pass_s(p) - StepModel(spec, card, base).pass_s(p) == pytest.approx(spec.moe_layers * per_layer[16],
                                                                                  rel=1e-4)
    dense = load_model("qwen2.5-7b")
    w = decode_work(1.0, 1000.0)
    assert StepModel(dense, card, cal).pass_s(w) == StepModel(dense, card, base).pass_s(w)


def test_the_shipped_calibration_holds_the_shipped_probe():
    cal = load_calibration(SHIPPED)
    assert cal.index_kernel_table == read_index_probe(PROBE)
    assert "index_kernel_table" in cal.fit_report["extra"]["held"]
    # the probe against what the kernels probe found inside the models' steps (device calls 75 and 76,
    # benchmarks/index_kernels_in_steps.py): qwen3-30b-a3b's layer at 8 and 16 routed rows pays 6.4 and 16.0 us
    # over its large-index kernels, gpt-oss-20b's at 4, 8 and 16 rows 6.1, 14.9 and 33.8 us; the table within 1 us
    for name, k, got in (("qwen3-30b-a3b", 8, {8: 6.4e-6, 16: 16.0e-6}),
                         ("gpt-oss-20b", 4, {4: 6.1e-6, 8: 14.9e-6, 16: 33.8e-6})):
        ex = layer_excess_s(cal.index_kernel_table, moe_index_ops(load_model(name)), float(k))
        for rows, seconds in got.items():
            assert ex[rows] == pytest.approx(seconds, abs=1.0e-6), (name, rows)
