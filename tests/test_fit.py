"""The fit: recovers known terms from synthetic measurements; fit/compare on the lesson's table."""

import json

import pytest
from click.testing import CliRunner

from cli import main
from roofline.calibration import Calibration, load_calibration
from roofline.fitting import compare, fit_calibration
from roofline.hardware import load_card
from roofline.measurements import MeasurementRow, write_measurements
from roofline.api import fit as api_fit
from roofline.api import predict

TRUE = Calibration(
    card="h200", engine="synthetic", kv_cache="dynamic",
    step_overhead_s=0.004, layer_overhead_s=0.0003, bandwidth_efficiency=0.8, compute_efficiency=0.6,
    kv_traffic_factor=2.0, roofline_exponent=3.0, overhead_exponent=2.0,
    prefill_overhead_s=0.02, prefill_compute_efficiency=0.7, activation_coeff=4.0, workspace_bytes=5e8,
)
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def synthetic_rows(model, cal=TRUE):
    p = predict("h200", model, BATCHES, prompt_tokens=128, gen_tokens=128, calibration=cal).columns
    return [
        MeasurementRow(card="h200", model=model, engine=cal.engine, kv_cache="dynamic", prompt_tokens=128,
                       gen_tokens=128, batch=int(b), ttft_s=float(t), tpot_s=float(s), peak_mem_gib=float(m))
        for b, t, s, m in zip(p["batch"], p["ttft_s"], p["tpot_s"], p["peak_mem_gib"])
    ]


@pytest.fixture(scope="module")
def fitted():
    rows = synthetic_rows("qwen2.5-0.5b") + synthetic_rows("llama-3.1-8b")
    return fit_calibration(rows, load_card("h200"), cross_validate=False)


def test_fit_recovers_known_terms(fitted):
    assert fitted.fit_report["in_sample"]["tpot_mape_fraction"] < 0.005
    assert fitted.bandwidth_efficiency == pytest.approx(TRUE.bandwidth_efficiency, rel=0.1)
    assert fitted.compute_efficiency == pytest.approx(TRUE.compute_efficiency, rel=0.1)
    overhead = lambda c, layers: c.step_overhead_s + c.layer_overhead_s * layers  # noqa: E731
    for layers in (24, 32):
        assert overhead(fitted, layers) == pytest.approx(overhead(TRUE, layers), rel=0.1)
    assert fitted.activation_coeff == pytest.approx(TRUE.activation_coeff, rel=0.05)
    assert fitted.prefill_compute_efficiency == pytest.approx(TRUE.prefill_compute_efficiency, rel=0.05)


def test_fit_transfers_to_a_model_it_never_saw(fitted):
    held = synthetic_rows("qwen2.5-7b")
    result = compare(fitted, held, load_card("h200"))
    assert result["tpot_mape_fraction"] < 0.02
    assert result["ttft_mape_fraction"] < 0.02
    assert result["peak_mem_mape_fraction"] < 0.01


def test_leave_one_model_out_is_reported():
    rows = synthetic_rows("qwen2.5-0.5b") + synthetic_rows("qwen2.5-1.5b") + synthetic_rows("llama-3.1-8b")
    cal = fit_calibration(rows, load_card("h200"))
    loo = cal.fit_report["leave_one_model_out"]
    assert set(loo) == {"qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3.1-8b"}
    assert all(v["tpot_mape_fraction"] < 0.03 for v in loo.values())


def test_mixed_engines_are_refused():
    rows = synthetic_rows("qwen2.5-0.5b") + synthetic_rows("qwen2.5-1.5b", TRUE.model_copy(update={"engine": "other"}))
    with pytest.raises(Exception, match="mix engines"):
        fit_calibration(rows, load_card("h200"))


def test_fit_then_compare_on_the_lessons_table(tmp_path):
    # issue 4 acceptance: in-sample on the lesson's table (section 2), TPOT MAPE at most 6%
    out = tmp_path / "cal.json"
    table = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
    r = CliRunner().invoke(main, ["fit", table, "--card", "rtx3060", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert load_calibration(out).engine == "hf-eager"
    r = CliRunner().invoke(main, ["compare", "--calibration", str(out), table, "--format", "json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output)
    assert result["tpot_mape_fraction"] <= 0.06
    assert result["ttft_mape_fraction"] <= 0.15
    assert len(result["rows"]) == 8


def test_shipped_rtx3060_calibration_matches_a_fresh_fit(tmp_path):
    shipped = load_calibration("hardware_profiles/calibrations/rtx3060-hf-eager.json")
    out = tmp_path / "cal.json"
    CliRunner().invoke(main, ["fit", "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv", "--card", "rtx3060", "-o", str(out)])
    fresh = load_calibration(out)
    for term in ("layer_overhead_s", "bandwidth_efficiency", "compute_efficiency", "prefill_compute_efficiency"):
        assert getattr(fresh, term) == pytest.approx(getattr(shipped, term), rel=0.02), term


def test_malformed_measurements_give_one_line_error(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("card,model,engine,kv_cache,prompt_tokens,gen_tokens,batch,ttft_s,tpot_s,peak_mem_gib\n"
                   "h200,qwen2.5-0.5b,graph,static,128,128,1,0.01,0.002,1.0\n"
                   "h200,qwen2.5-0.5b,graph,static,128,128,two,0.01,0.002,1.0\n")
    r = CliRunner().invoke(main, ["fit", str(bad), "--card", "h200", "-o", str(tmp_path / "c.json")])
    assert r.exit_code == 1
    assert ":3:" in r.output and "batch" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    import os

    from roofline.calibration import save_calibration

    target = tmp_path / "cal.json"
    save_calibration(TRUE, target)
    before = target.read_text()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(Exception):
        save_calibration(TRUE.model_copy(update={"engine": "changed"}), target)
    assert target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["cal.json"]  # no temporary file left behind


def test_fit_and_compare_filters(tmp_path):
    rows = synthetic_rows("qwen2.5-0.5b") + synthetic_rows("llama-3.1-8b")
    # p10 and median columns a little below the mean, as a noisy host gives
    rows = [r.__class__(**{**r.__dict__, "tpot_p10_s": 0.9 * r.tpot_s, "tpot_median_s": 0.95 * r.tpot_s}) for r in rows]
    table = tmp_path / "m.csv"
    write_measurements(table, rows)
    out = tmp_path / "c.json"
    r = CliRunner().invoke(main, ["fit", str(table), "--card", "h200", "--model", "qwen2.5-0.5b",
                                  "--tpot-statistic", "p10", "-o", str(out)])
    assert r.exit_code == 0, r.output
    cal = load_calibration(out)
    assert cal.fitted_on == ["qwen2.5-0.5b"] and cal.tpot_statistic == "p10"
    res = json.loads(CliRunner().invoke(main, ["compare", "--calibration", str(out), str(table),
                                               "--model", "qwen2.5-0.5b", "--min-batch", "64", "--format", "json"]).output)
    assert {row["batch"] for row in res["rows"]} == {64, 128, 256, 512, 1024}
    assert all(row["tpot_measured_s"] == pytest.approx(0.9 * next(
        x.tpot_s for x in rows if x.model == "qwen2.5-0.5b" and x.batch == row["batch"])) for row in res["rows"])
    bad = CliRunner().invoke(main, ["fit", str(table), "--card", "h200", "--model", "qwen2.5-72b", "-o", str(out)])
    assert bad.exit_code == 1 and "--model: no measurements of qwen2.5-72b" in bad.output


def _cut_steps(model, layer_counts, cal=TRUE, batches=(1, 16, 64)):
    """The layers probe's points for ``model`` cut to ``layer_counts`` layers, priced by ``cal``
    (a synthetic probe: calibrate.probes --what layers measures these on a GPU)."""
    import numpy as np

    from roofline.decode import mean_tpot_s
    from roofline.model_spec import load_model
    from roofline.probes import LayersPoint
    from roofline.step import StepModel

    spec, card = load_model(model), load_card("h200")
    return [LayersPoint(model, n, b, 256, float(mean_tpot_s(StepModel(spec.with_layers(n), card, cal),
                                                            np.array([float(b)]), np.array([128.0]),
                                                            np.array([128.0]), cal.kv_cache)[0]))
            for n in layer_counts for b in batches]


def test_the_layers_probe_splits_the_fixed_time_that_one_layer_count_cannot():
    # qwen2.5-1.5b and qwen2.5-7b both have 28 layers: from their steps alone the step's own
    # overhead is unidentifiable (held at 0, all of it in the layers); their steps cut to 2-12
    # layers recover the true split, and a 16-layer model (llama-3.2-1b) is priced right only then
    truth = TRUE.model_copy(update={"step_overhead_s": 0.004, "layer_overhead_s": 0.0001})
    rows = synthetic_rows("qwen2.5-1.5b", truth) + synthetic_rows("qwen2.5-7b", truth)
    card = load_card("h200")
    alone = fit_calibration(rows, card, cross_validate=False)
    assert alone.step_overhead_s == 0.0 and "step_overhead_s" in alone.fit_report["held"]
    cuts = _cut_steps("qwen2.5-1.5b", (2, 4, 8, 12), truth) + _cut_steps("qwen2.5-7b", (2, 4, 8, 12), truth)
    cuts += _cut_steps("llama-3.2-1b", (2, 4), truth)  # not a fitted model: ignored
    probed = fit_calibration(rows, card, cross_validate=False, layers_probe=cuts)
    assert probed.step_overhead_s == pytest.approx(truth.step_overhead_s, rel=0.1)
    assert probed.layer_overhead_s == pytest.approx(truth.layer_overhead_s, rel=0.1)
    held = synthetic_rows("llama-3.2-1b", truth)
    assert compare(probed, held, card)["tpot_mape_fraction"] < 0.01
    assert compare(alone, held, card)["tpot_mape_fraction"] > 0.05


def test_a_held_out_model_is_held_out_of_the_layers_probe_too():
    # leave-one-model-out: the fold without qwen2.5-7b sees none of its cut steps (made here
    # with a wildly wrong step overhead: a fold that used them would be far off)
    truth = TRUE.model_copy(update={"step_overhead_s": 0.004, "layer_overhead_s": 0.0001})
    wrong = truth.model_copy(update={"step_overhead_s": 0.05})
    rows = synthetic_rows("qwen2.5-1.5b", truth) + synthetic_rows("qwen2.5-7b", truth)
    cuts = _cut_steps("qwen2.5-1.5b", (2, 4, 8, 12), truth) + _cut_steps("qwen2.5-7b", (2, 4, 8, 12), wrong)
    cal = fit_calibration(rows, load_card("h200"), layers_probe=cuts)
    assert cal.fit_report["leave_one_model_out"]["qwen2.5-1.5b"]["tpot_mape_fraction"] > 0.1  # 7b's cuts only
    assert cal.fit_report["leave_one_model_out"]["qwen2.5-7b"]["tpot_mape_fraction"] < 0.01  # 1.5b's only


def test_fit_takes_a_layers_probe_file_on_the_command_line(tmp_path):
    # one model, one layer count: the step's own overhead is held at 0 from the table alone; with
    # a layers-probe file of that model's cut steps (here the shipped calibration's prices of them)
    # it is fitted. A bad file is a one-line error.
    table = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
    shipped = load_calibration("hardware_profiles/calibrations/rtx3060-hf-eager.json")
    truth = shipped.model_copy(update={"step_overhead_s": 0.003})
    probe = tmp_path / "probe-layers.json"
    points = [{"model": p.model, "variant": "", "layers": p.layers, "batch": p.batch, "context": p.context,
               "step_s": p.seconds} for p in _cut_steps("qwen2.5-1.5b", (2, 4, 8), truth, batches=(1, 8))]
    probe.write_text(json.dumps({"probe": "layers", "points": points}))
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["fit", table, "--card", "rtx3060", "-o", str(out), "--layers-probe", str(probe)])
    assert r.exit_code == 0, r.output
    cal = load_calibration(out)
    assert cal.step_overhead_s > 0.001 and "step_overhead_s" not in cal.fit_report["held"]
    plain = load_calibration("hardware_profiles/calibrations/rtx3060-hf-eager.json")
    assert plain.step_overhead_s == 0.0
    probe.write_text("{}")
    r = CliRunner().invoke(main, ["fit", table, "--card", "rtx3060", "-o", str(out), "--layers-probe", str(probe)])
    assert r.exit_code != 0 and "not a layers probe file" in r.output and "Traceback" not in r.output


def test_a_prompts_attention_is_priced_at_the_measured_rate_of_its_head_width():
    # roofline.step.head_dim_rate: exact at a measured width, linear in log width between, clamped
    # beyond; StepModel prices a prefill's pairs at it (the rest of the pass unchanged)
    import math

    from roofline.model_spec import load_model
    from roofline.step import StepModel, head_dim_rate, prefill_work

    rates = {"64": 3.0e14, "128": 6.0e14}
    assert head_dim_rate(None, 64) is None and head_dim_rate({}, 64) is None
    assert head_dim_rate(rates, 64) == 3.0e14 and head_dim_rate(rates, 32) == 3.0e14 and head_dim_rate(rates, 256) == 6.0e14
    assert head_dim_rate(rates, 64 * math.sqrt(2)) == pytest.approx(4.5e14)
    card = load_card("h200")
    for name, rate in (("qwen2.5-0.5b", 3.0e14), ("qwen2.5-7b", 6.0e14)):
        spec = load_model(name)
        plain, measured = (StepModel(spec, card, TRUE.model_copy(update={"prefill_attention_flop_per_s": r}))
                           for r in (None, rates))
        work = prefill_work(4096.0, 4096.0 * 4097 / 2, 1.0)
        pairs_flop = 4096.0 * 4097 / 2 * plain._c[9] / (1.0 / (TRUE.prefill_compute_efficiency * plain.peak_flop_per_s))
        assert measured.pass_parts(work).attention_compute_s == pytest.approx(pairs_flop / rate, rel=1e-9)
        assert measured.pass_parts(work).matmul_compute_s == plain.pass_parts(work).matmul_compute_s


def test_moe_probe_sets_the_row_term_and_the_fit_keeps_it(tmp_path):
    # `roofline fit --base CAL --moe-probe FILE` on MoE runs: expert_row_traffic_coeff is the probe's
    # per-element time of the fitted MoE models x the base's calibrated bandwidth / 2 bytes, held as
    # measured while the other MoE terms are fitted (the recovery of a known truth, synthetic rows)
    from roofline.api import moe_row_traffic_coeff
    from roofline.probes import moe_row_seconds_per_element

    probe = "hardware_profiles/measurements/h200-probe-moe.json"
    base = load_calibration("hardware_profiles/calibrations/h200-graph.json").model_copy(
        update={"expert_row_traffic_coeff": 0.0, "moe_layer_overhead_s": 0.0, "expert_traffic_factor": 1.0,
                "expert_gemm_min_rows": 0.0, "expert_gemm_table": None})  # the tiles' terms: no grouped-mm table
    card = load_card("h200")
    want = moe_row_traffic_coeff(base, card, probe, ["qwen3-30b-a3b"])
    bw = base.bandwidth_efficiency * base.measured_bandwidth_bytes_per_s
    assert want == pytest.approx(moe_row_seconds_per_element(probe, ["qwen3-30b-a3b"]) * bw / 2)
    # and the grouped GEMM's two tile rates, fitted on the probe's matmuls of the same model
    from roofline.probes import moe_tile_efficiencies

    small, large, _ = moe_tile_efficiencies(probe, ["qwen3-30b-a3b"], base.measured_peak_flop_per_s)
    truth = base.model_copy(update={"expert_row_traffic_coeff": want, "moe_layer_overhead_s": 8e-5,
                                    "expert_traffic_factor": 1.25, "expert_small_tile_efficiency": small,
                                    "expert_large_tile_efficiency": large})
    p = predict("h200", "qwen3-30b-a3b", BATCHES[:10], prompt_tokens=128, gen_tokens=32, engine="graph",
                calibration=truth).columns
    rows = [MeasurementRow(card="h200", model="qwen3-30b-a3b", engine="graph", kv_cache="static", prompt_tokens=128,
                           gen_tokens=32, batch=int(b), ttft_s=float(t), tpot_s=float(s), peak_mem_gib=float(m))
            for b, t, s, m in zip(p["batch"], p["ttft_s"], p["tpot_s"], p["peak_mem_gib"])]
    csv = write_measurements(tmp_path / "moe.csv", rows)
    base_path = tmp_path / "base.json"
    base_path.write_text(base.model_dump_json())
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(main, ["fit", str(csv), "--card", "h200", "--base", str(base_path), "--moe-probe",
                                       probe, "-o", str(out)])
    assert result.exit_code == 0, result.output
    got = load_calibration(out)
    assert got.expert_row_traffic_coeff == pytest.approx(want, rel=1e-12)
    assert (got.expert_small_tile_efficiency, got.expert_large_tile_efficiency) == pytest.approx((small, large), rel=1e-9)
    assert got.expert_traffic_factor == pytest.approx(1.25, rel=0.02)
    assert got.moe_layer_overhead_s == pytest.approx(8e-5, rel=0.05)
    assert got.expert_gemm_min_rows == 0.0 and "expert_gemm_min_rows" not in got.fit_report["extra"]["terms"]
    assert "qwen3-30b-a3b" in got.fitted_on and got.fit_report["extra"]["held"] == sorted(
        ["expert_large_tile_efficiency", "expert_prefill_flop_per_s", "expert_row_traffic_coeff",
         "expert_small_tile_efficiency"] + (
            ["prefill_elementwise_bytes_per_element"] if base.prefill_elementwise_bytes_per_element else []))
    # without a base calibration the probe has nothing to join: one line, exit 2
    bad = CliRunner().invoke(main, ["fit", str(csv), "--card", "h200", "--moe-probe", probe, "-o", str(out)])
    assert bad.exit_code != 0 and "base calibration" in bad.output and "Traceback" not in bad.output


def test_fit_stores_the_probes_attention_rates_as_measured(tmp_path):
    # `roofline fit --prefill-attention-probe F1 --masked-attention-probe F2`: both rate tables land in
    # the calibration as the readers return them (nothing fitted), and predict then prices a windowed
    # model's long prompt on the masked path (more time than the window's causal pairs at the causal rate)
    from roofline.probes import masked_attention_rates, prefill_attention_rates

    causal = "hardware_profiles/measurements/h200-probe-prefill-attention.json"
    masked = "hardware_profiles/measurements/h200-probe-masked-attention.json"
    rows = synthetic_rows("qwen2.5-1.5b") + synthetic_rows("qwen2.5-7b")
    csv = write_measurements(tmp_path / "m.csv", rows)
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["fit", str(csv), "--card", "h200", "-o", str(out), "--prefill-attention-probe", causal,
                                  "--masked-attention-probe", masked])
    assert r.exit_code == 0, r.output
    cal = load_calibration(out)
    assert cal.prefill_attention_flop_per_s == prefill_attention_rates(causal)
    assert cal.masked_prefill_attention_flop_per_s == masked_attention_rates(masked)
    plain = cal.model_copy(update={"masked_prefill_attention_flop_per_s": None})
    slow = predict("h200", "mistral-7b-v0.1", [4], prompt_tokens=16384, gen_tokens=16, calibration=cal)
    fast = predict("h200", "mistral-7b-v0.1", [4], prompt_tokens=16384, gen_tokens=16, calibration=plain)
    assert slow.columns["ttft_s"][0] > 1.3 * fast.columns["ttft_s"][0]  # 16k past a 4,096 window: ~2x the work


def test_fit_reads_several_attention_probe_files(tmp_path):
    # `roofline fit --attention-probe A --attention-probe B`: both files' points are fitted with the
    # decode terms (what api.fit does with the list), and they move the attention terms
    rows = synthetic_rows("qwen2.5-1.5b") + synthetic_rows("qwen2.5-7b")
    csv = write_measurements(tmp_path / "m.csv", rows)
    a = "hardware_profiles/measurements/h200-probe-attention.json"
    b = "hardware_profiles/measurements/h200-probe-attention-groups.json"
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["fit", str(csv), "--card", "h200", "-o", str(out), "--attention-probe", a,
                                  "--attention-probe", b])
    assert r.exit_code == 0, r.output
    from roofline.calibration import DECODE_TERMS

    def terms(c):
        return [getattr(c, t) for t in DECODE_TERMS]

    both = load_calibration(out)
    assert terms(both) == pytest.approx(terms(api_fit([csv], card="h200", attention_probe=[a, b])), rel=1e-9)
    one = api_fit([csv], card="h200", attention_probe=a)
    assert terms(both) != pytest.approx(terms(one), rel=1e-3)
