"""The experts' grouped matmul as measured (Calibration.expert_gemm_table; roofline.grouped_mm;
calibrate.probes --what grouped-mm; docs/method.md section 4): the probe on the CPU and what it
writes, the table read from it (skipped cells filled along rows, then groups), the interpolation
(exact at the nodes, power laws exact between and past them), the step model's use of it (a MoE
layer's two matmuls at the experts touched and their rows; nothing without tokens), the fit's
refusals, and the shipped H200 calibration holding what the shipped probe file gives."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calibrate import probes
from roofline.calibration import Calibration, load_calibration
from roofline.errors import RooflineError
from roofline.grouped_mm import layer_nodes, nodes_seconds, read_grouped_mm, shape_log_seconds
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.step import StepModel, decode_work

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
PROBE = "hardware_profiles/measurements/h200-probe-grouped-mm-call72.json"
#: a known law for synthetic probe files: seconds = 1e-15 x G^0.9 x r^0.5 x K x N^1.1
LAW = (0.9, 0.5, 1.0, 1.1)


def _law(g, r, k, n):
    return 1e-15 * g ** LAW[0] * r ** LAW[1] * k ** LAW[2] * n ** LAW[3]


def _probe_file(tmp_path, skip=lambda g, r, k, n: False, name="gm.json"):
    points = [{"groups": g, "groups_total": g, "rows": r, "k": k, "n": n, "s": _law(g, r, k, n)}
              for k in (512, 1024, 2048) for n in (1024, 4096) for g in (1, 4, 16) for r in (1, 16, 256)
              if not skip(g, r, k, n)]
    points.append({"groups": 1, "groups_total": 8, "rows": 1, "k": 512, "n": 1024, "s": 1.0, "series": "spread"})
    path = tmp_path / name
    path.write_text(json.dumps({"probe": "grouped-mm", "points": points}))
    return path


def test_grouped_mm_probe_on_cpu_is_a_table_roofline_reads(tmp_path):
    grid = probes.TINY_GROUPED_MM
    path = tmp_path / "probe-grouped-mm.json"
    data = probes.grouped_mm_probe("cpu", grid, path, None, lambda m: None)
    assert data["stopped"] is None and not data["errors"]
    table_points = [p for p in data["points"] if not p.get("series")]
    assert len(table_points) == len(grid.groups) * len(grid.rows) * len(grid.ks) * len(grid.ns)
    for p in table_points:
        assert p["s"] > 0 and p["weight_bytes"] == p["groups"] * p["k"] * p["n"] * 2
        # below random_rows_from every group has exactly its rows; from it on they are routed at random
        assert p["routed"] == ("exact" if p["rows"] < grid.random_rows_from or p["groups"] == 1 else "random")
        assert p["touched"] <= p["groups"]
    spread = [p for p in data["points"] if p.get("series") == "spread"]
    assert {(p["groups"], p["groups_total"]) for p in spread} == {(1, 1), (1, 4)}
    table = read_grouped_mm([path])
    assert table["ks"] == [16.0, 32.0] and table["groups"] == [1.0, 4.0]
    Calibration(card="cpu", engine="graph", expert_gemm_table=table)  # a table the calibration takes


def test_grouped_mm_probe_stops_at_the_budget(tmp_path):
    data = probes.grouped_mm_probe("cpu", probes.TINY_GROUPED_MM, tmp_path / "t.json", 0.0, lambda m: None)
    assert data["stopped"] and not data["points"]


def test_the_full_grid_is_generic_and_covers_the_catalogs_experts():
    # every K and N a power of two or 1.5x one: no catalog model's own width (gpt-oss's 2,880, Mixtral's
    # 14,336, DeepSeek's 1,408 and 7,168) is a node; and every MoE model's shapes lie within the grid
    grid = probes.FULL_GROUPED_MM
    for w in grid.ks + grid.ns:
        assert w & (w - 1) == 0 or (2 * w // 3) & (2 * w // 3 - 1) == 0
    for name in ("qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b", "deepseek-v2-lite", "deepseek-v3"):
        spec = load_model(name)
        h, i = spec.hidden_size, spec.moe_intermediate_size
        assert grid.ks[0] <= min(h, i) and max(h, i) <= grid.ks[-1], name
        assert grid.ns[0] <= min(h, 2 * i) and max(h, 2 * i) <= grid.ns[-1], name
        assert spec.num_experts <= grid.groups[-1]


def test_the_table_is_exact_at_its_nodes_and_follows_power_laws(tmp_path):
    table = read_grouped_mm([_probe_file(tmp_path)])
    lg, lr = np.log(table["groups"]), np.log(table["rows"])
    # at a node: the measured time (4 significant digits)
    assert nodes_seconds((lg, lr, shape_log_seconds(table, 1024, 4096)), 4, 16) == pytest.approx(
        _law(4, 16, 1024, 4096), rel=1e-3)
    # log time bilinear in log K, N, groups and rows: a power law is exact anywhere between nodes...
    for g, r, k, n in ((2.5, 7.0, 700.0, 3000.0), (9.0, 100.0, 1500.0, 1024.0)):
        got = nodes_seconds((lg, lr, shape_log_seconds(table, k, n)), g, r)
        assert got == pytest.approx(_law(g, r, k, n), rel=1e-3)
    # ...and past the probed widths, experts and rows, time ∝ K·N, ∝ G and ∝ r from the edge
    edge = _law(16, 256, 2048, 4096)
    got = nodes_seconds((lg, lr, shape_log_seconds(table, 8192, 8192)), 64, 1024)
    assert got == pytest.approx(edge * 4 * 2 * 4 * 4, rel=1e-3)
    # fewer than one expert or row: the first node's
    assert nodes_seconds((lg, lr, shape_log_seconds(table, 512, 1024)), 0.5, 0.2) == pytest.approx(
        _law(1, 1, 512, 1024), rel=1e-3)
    # a layer: gate-up (K hidden, N 2 x inter) plus down (K inter, N hidden)
    nodes = layer_nodes(table, 1024.0, 768.0)
    assert nodes_seconds(nodes, 4, 16) == pytest.approx(_law(4, 16, 1024, 1536) + _law(4, 16, 768, 1024), rel=1e-3)
    # arrays alike
    arr = nodes_seconds(nodes, np.array([1.0, 4.0]), np.array([1.0, 16.0]))
    assert arr[1] == pytest.approx(nodes_seconds(nodes, 4.0, 16.0))


def test_skipped_cells_are_filled_along_rows_then_groups(tmp_path):
    # the largest rows at 16 groups and every 16-group cell at K 2,048 skipped (FLOPs, weights over limits)
    skip = lambda g, r, k, n: (g == 16 and r == 256) or (g == 16 and k == 2048)  # noqa: E731
    table = read_grouped_mm([_probe_file(tmp_path, skip)])
    s = np.asarray(table["seconds"])
    # at K 512, N 1,024: 16 groups x 256 rows from 16 groups x 16 rows, ∝ r
    assert s[0, 0, 2, 2] == pytest.approx(_law(16, 16, 512, 1024) * 16, rel=1e-3)
    # at K 2,048: 16 groups from 4 groups at the same rows, ∝ G
    assert s[2, 1, 2, 1] == pytest.approx(_law(4, 16, 2048, 4096) * 4, rel=1e-3)


def test_bad_probe_files_are_refused(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"probe": "moe", "points": []}))
    with pytest.raises(RooflineError, match="not a grouped-mm probe"):
        read_grouped_mm([other])
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"probe": "grouped-mm", "points": [{"groups": 1, "rows": 1, "k": 8, "n": 8,
                                                                    "error": "OOM"}]}))
    with pytest.raises(RooflineError, match="no timed point"):
        read_grouped_mm([empty])
    # a shape with no point at all cannot be filled
    hole = _probe_file(tmp_path, lambda g, r, k, n: k == 1024 and n == 4096, name="hole.json")
    with pytest.raises(RooflineError, match="K 1024 N 4096"):
        read_grouped_mm([hole])
    with pytest.raises(ValueError, match="expert_gemm_table"):
        Calibration(card="h200", engine="graph", expert_gemm_table={"ks": [1.0], "ns": [1.0, 2.0]})


def test_the_step_prices_a_moe_layer_at_its_touched_experts_and_rows(tmp_path):
    card = load_card("h200")
    table = read_grouped_mm([_probe_file(tmp_path)])
    base = Calibration(card="h200", engine="graph", moe_layer_overhead_s=0.0)
    with_table = base.model_copy(update={"expert_gemm_table": table})
    # qwen3-30b-a3b: gate-up 2,048 x 1,536 and down 768 x 2,048, within the synthetic probe's widths;
    # its 128 experts past its 16 groups from batch 3 on (then ∝ G from 16)
    spec = load_model("qwen3-30b-a3b")
    plain, priced = StepModel(spec, card, base), StepModel(spec, card, with_table)
    h, i, k = spec.hidden_size, spec.moe_intermediate_size, spec.experts_per_token

    def law(g, r, kk, n):
        return _law(min(g, 16.0), r, kk, n) * max(g / 16.0, 1.0)

    for batch in (1, 2, 3, 40):
        touched = priced.experts_touched(float(batch))
        rows = batch * k / touched
        expect = spec.moe_layers * (law(touched, rows, h, 2 * i) + law(touched, rows, i, h))
        parts = priced._parts(decode_work(float(batch), 64.0 * batch))
        assert parts[7] + parts[8] == pytest.approx(expect, rel=1e-3)
        # the routed FLOPs leave the dense matmuls' terms, which the plain model charges them to
        assert priced._parts(decode_work(float(batch), 64.0 * batch))[2] < plain._parts(
            decode_work(float(batch), 64.0 * batch))[2]
    # no tokens, no expert time
    assert sum(priced._parts(decode_work(0.0, 0.0))[7:9]) == 0.0
    # arrays alike
    arr = priced._parts(decode_work(np.array([1.0, 40.0]), np.array([64.0, 2560.0])))
    assert arr[7][1] + arr[8][1] == pytest.approx(sum(priced._parts(decode_work(40.0, 2560.0))[7:9]))


def test_fit_refuses_a_grouped_mm_probe_without_a_base(tmp_path):
    from roofline import api

    with pytest.raises(RooflineError, match="base calibration"):
        api.fit(["hardware_profiles/measurements/h200-graph-moe.csv"], card="h200",
                grouped_mm_probe=[_probe_file(tmp_path)])


def test_the_shipped_calibration_holds_the_shipped_probe_and_prices_from_it():
    cal = load_calibration(SHIPPED)
    assert cal.expert_gemm_table is not None
    shipped = read_grouped_mm([PROBE])
    assert np.allclose(np.asarray(cal.expert_gemm_table["seconds"]), np.asarray(shipped["seconds"]), rtol=1e-5)
    assert cal.fit_report["extra"]["held"].count("expert_gemm_table") == 1
    # gpt-oss-20b's one-token pass: its four experts' two matmuls, 24 layers, from the table; the
    # probe's gate-up at K 2,048-3,072 x N 4,096-6,144 for four experts of one row each reads 31-66 us
    step = StepModel(load_model("gpt-oss-20b"), load_card("h200"), cal)
    one = step._parts(decode_work(1.0, 1000.0))
    per_layer = (one[7] + one[8]) / step.spec.moe_layers
    assert 60e-6 < per_layer < 140e-6
    assert math.isclose(per_layer, nodes_seconds(step._expert_nodes, 4.0, 1.0), rel_tol=1e-9)
