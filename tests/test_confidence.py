"""The expected error and the extrapolation reasons on every answer (issue 9, roofline.confidence)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import roofline
from roofline.calibration import load_calibration
from cli import main
from roofline.confidence import (MIN_BIN_POINTS, coverage_of, errors_by_overhead_share, floor_record, merge_coverage,
                                 share_bin_error)
from roofline.fitting import _groups, fit_calibration
from roofline.hardware import load_card
from roofline.measurements import read_measurements

GRAPH = "hardware_profiles/calibrations/h200-graph.json"


def _graph_rows(*batches, **options):
    return roofline.predict("h200", options.pop("model", "qwen2.5-7b"), list(batches), engine="graph",
                            calibration=GRAPH, **options).rows()


def test_a_100k_prompt_on_a_calibration_fitted_to_16k_says_it_extrapolates():
    cal = load_calibration(GRAPH)
    top = cal.fit_report["coverage"]["context_tokens"][1]
    assert 16384 <= top < 100_000  # the grid's longest prompt is 16384 (+ its gen)
    for row in _graph_rows(1, 64, prompt_tokens=100_000):
        assert any("context 100,128 tokens beyond" in r for r in row["extrapolation"]), row["extrapolation"]


def test_inside_the_coverage_nothing_is_flagged():
    # qwen2.5-7b was fitted on, at prompts 128-16384 and batches 1-1024
    for row in _graph_rows(1, 64, 512, prompt_tokens=2048, gen_tokens=64):
        assert row["extrapolation"] == []


def test_batch_model_size_dtype_and_tp_beyond_the_coverage_are_named():
    (big_batch,) = _graph_rows(4096)
    assert big_batch["extrapolation"] == ["batch 4,096 beyond the 1,024 the calibration saw"]
    (small,) = _graph_rows(256, prompt_tokens=4096, gen_tokens=64, model="qwen2.5-0.5b")  # not overhead-bound
    assert len(small["extrapolation"]) == 1 and "0.49B parameters outside" in small["extrapolation"][0]
    (fp8,) = _graph_rows(8, weight_dtype="fp8")
    assert fp8["extrapolation"] == ["weights in fp8, the calibration saw bf16"]
    # the TP2 link was measured (collectives file): TP2 is inside, TP4 outside
    (tp2,) = _graph_rows(8, model="llama-3.1-70b", tp=2)
    assert not any("tensor parallelism" in r for r in tp2["extrapolation"])
    (tp4,) = _graph_rows(8, model="llama-3.1-70b", tp=4)
    assert any(r.startswith("tensor parallelism 4") for r in tp4["extrapolation"])


def test_expected_tpot_error_is_the_larger_of_the_held_out_model_and_nearest_context_errors():
    rep = load_calibration(GRAPH).fit_report
    lomo = np.mean([e["tpot_mape_fraction"] for e in rep["leave_one_model_out"].values()])
    nearest = rep["leave_one_context_out"]["2048/64"]["tpot_mape_fraction"]  # 2048+64 is nearest 2000+100
    dense = rep["validation"]["dense"]["tpot_mape_fraction"]
    (row,) = _graph_rows(32, prompt_tokens=2000, gen_tokens=100)
    assert row["expected_error"]["tpot_fraction"] == pytest.approx(max(lomo, nearest, dense), rel=1e-12)
    # TTFT: from batch 64 up the large-batch error, below it the error over every batch
    small, large = _graph_rows(8, 64)
    assert small["expected_error"]["ttft_fraction"] >= large["expected_error"]["ttft_fraction"]


def test_moe_and_tp_answers_take_the_held_out_errors_of_their_kind():
    rep = load_calibration(GRAPH).fit_report
    (moe,) = _graph_rows(16, model="qwen3-30b-a3b")
    # the MoE validation's error, or that of its steps of as much fixed overhead (a bin) where larger
    bins = rep["validation"]["moe"]["tpot_mape_by_overhead_share"]
    by_share = [b["tpot_mape_fraction"] for b in bins if b.get("points", 0) >= 1]
    got = moe["expected_error"]["tpot_fraction"]
    assert got >= rep["validation"]["moe"]["tpot_mape_fraction"] - 1e-12
    assert got == pytest.approx(rep["validation"]["moe"]["tpot_mape_fraction"]) or any(
        got == pytest.approx(e) for e in by_share), (got, bins)
    assert moe["extrapolation"] == []
    (tp,) = _graph_rows(16, model="qwen2.5-32b", tp=2)
    assert tp["expected_error"]["tpot_fraction"] == pytest.approx(rep["validation"]["tp"]["tpot_mape_fraction"])


def test_a_card_without_calibration_says_its_numbers_are_floors_and_by_how_much():
    p = roofline.predict("a100-80gb-sxm", "qwen2.5-7b", [1, 64], calibration=None)
    floor = floor_record()["pooled"]
    assert floor["tpot"]["mean_signed_fraction"] < 0  # the pure roofline is too fast: a floor
    for row in p.rows():
        assert row["expected_error"]["tpot_fraction"] == pytest.approx(floor["tpot"]["mape_fraction"])
        assert row["extrapolation"] == ["no calibration: the card's ceilings alone (a floor)"]
    assert p.meta()["expected_error_basis"].startswith("floor: no calibration")


def test_predict_json_and_csv_carry_the_error_and_extrapolation_on_every_row():
    r = CliRunner().invoke(main, ["predict", "--card", "h200", "--model", "qwen2.5-7b", "--engine", "graph",
                                  "--prompt", "100000", "--batches", "1,8", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)  # stderr: the warning that 100k tokens is past the model's positions
    assert "max_position_embeddings" in r.stderr
    assert data["meta"]["expected_error_basis"]
    for row in data["rows"]:
        assert set(row["expected_error"]) == {"tpot_fraction", "ttft_fraction", "peak_mem_fraction"}
        assert 0 < row["expected_error"]["tpot_fraction"] < 0.5
        assert row["extrapolation"] and "beyond" in row["extrapolation"][0]
    r = CliRunner().invoke(main, ["predict", "--card", "h200", "--model", "qwen2.5-7b", "--engine", "graph",
                                  "--prompt", "100000", "--batches", "1", "--format", "csv"])
    header, line = r.stdout.strip().splitlines()
    assert "extrapolation" in header.split(",") and "expected_tpot_error_fraction" in header.split(",")
    assert "context 100" in line
    r = CliRunner().invoke(main, ["predict", "--card", "h200", "--model", "qwen2.5-7b", "--engine", "graph",
                                  "--prompt", "100000", "--batches", "1"])
    assert "* extrapolating: context 100,128 tokens beyond the 16,416 the calibration saw" in r.output
    assert "TPOT ±" in r.output


def test_the_fit_records_what_its_measurements_covered():
    rows = read_measurements("hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv")
    cal = fit_calibration(rows, load_card("rtx3060"), cross_validate=False)
    cov = cal.fit_report["coverage"]
    assert cov["context_tokens"] == [256, 256] and cov["prompt_tokens"] == [128, 128]
    assert cov["batch"] == [min(r.batch for r in rows if r.ok), max(r.batch for r in rows if r.ok)]
    assert cov["moe"] is False and cov["tp"] == [1] and cov["attention"] == ["gqa"]


def test_merging_an_moe_fit_keeps_dense_sizes_apart():
    dense, _, _, _ = _groups(read_measurements("hardware_profiles/measurements/h200-graph-grid.csv"))
    moe, _, _, _ = _groups([r for r in read_measurements("hardware_profiles/measurements/h200-graph-moe.csv")
                            if r.model == "qwen3-30b-a3b"])
    merged = merge_coverage(coverage_of(dense), coverage_of(moe))
    assert merged["moe"] is True
    assert merged["params"] == coverage_of(dense)["params"]  # a dense 14B is still judged by the dense fits
    assert merged["moe_params"] == coverage_of(moe)["params"]


def test_errors_by_overhead_share_bin_the_points_and_skip_thin_bins():
    shares = [0.1, 0.45, 0.55, 0.95, 1.0] + [0.75] * MIN_BIN_POINTS
    errors = [0.01, -0.03, 0.02, 0.10, -0.20] + [0.05] * MIN_BIN_POINTS
    models = ["a", "b", "a", "c", "a"] + ["d"] * MIN_BIN_POINTS
    bins = errors_by_overhead_share(shares, errors, models)
    assert [(b["from"], b["to"], b["points"]) for b in bins] == [(0.0, 0.5, 2), (0.5, 0.6, 1), (0.7, 0.8, 8),
                                                                 (0.8, 1.0, 2)]  # a share of 1 is in the last
    assert [b["models"] for b in bins] == [["a", "b"], ["a"], ["d"], ["a", "c"]]
    assert bins[0]["tpot_mape_fraction"] == pytest.approx(0.02)  # mean |error|: (0.01 + 0.03) / 2
    assert bins[3]["tpot_mape_fraction"] == pytest.approx(0.15)
    assert share_bin_error(bins, 0.75) == pytest.approx(0.05)
    assert share_bin_error(bins, 0.3) is None  # two points: too few to say
    assert share_bin_error(bins, 0.65) is None  # no point in 0.6-0.7


def test_an_overhead_bound_step_carries_the_held_out_error_of_such_steps_and_says_it_extrapolates():
    rep = load_calibration(GRAPH).fit_report
    bins = rep["validation"]["dense"]["tpot_mape_by_overhead_share"]
    assert sum(b["points"] for b in bins) == rep["validation"]["dense"]["points"]
    top = rep["coverage"]["overhead_share"][1]
    assert 0.5 < top < 0.75  # qwen2.5-1.5b's batch-1 steps, the fitted steps most fixed overhead
    p = roofline.predict("h200", "qwen2.5-0.5b", [1, 512], engine="graph", calibration=GRAPH)
    one, big = p.rows()
    share = one["step_overhead_s"] / one["tpot_s"]
    assert share > top + 0.05  # a 0.5B model at one sequence: mostly launches and fixed per-layer time
    assert one["expected_error"]["tpot_fraction"] == pytest.approx(
        max(share_bin_error(bins, share), big["expected_error"]["tpot_fraction"]))
    assert one["expected_error"]["tpot_fraction"] > big["expected_error"]["tpot_fraction"]
    assert any(r.startswith(f"a step {100 * share:.0f}% fixed overhead, beyond the {100 * top:.0f}%")
               for r in one["extrapolation"])
    assert not any("fixed overhead" in r for r in big["extrapolation"])
    assert "steps as much fixed overhead" in p.meta()["expected_error_basis"]


def test_merging_an_moe_fit_keeps_its_overhead_shares_apart():
    dense = {**coverage_of(_groups(read_measurements("hardware_profiles/measurements/h200-graph-grid.csv"))[0]),
             "overhead_share": [0.02, 0.66]}
    moe = {**coverage_of(_groups([r for r in read_measurements("hardware_profiles/measurements/h200-graph-moe.csv")
                                  if r.model == "qwen3-30b-a3b"])[0]), "overhead_share": [0.14, 0.78]}
    merged = merge_coverage(dense, moe)
    assert merged["overhead_share"] == [0.02, 0.66] and merged["moe_overhead_share"] == [0.14, 0.78]
