"""Engine profiles (issue 10): the engines a user names, the default engine, terms transferred to a
card without a calibration, the fit on published tables (and the rows it must never see)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import roofline
from cli import main
from roofline import published_fit as pf
from roofline.calibration import Calibration
from roofline.engines import (
    Fact,
    Variant,
    card_classes,
    default_engine,
    engine_ids,
    load_engine,
    segment,
    transferred_calibration,
)
from roofline.errors import RooflineError
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.published import PublishedPoint, expected_reserved, load_published

REQUIRED = ("hf-eager", "graph", "vllm", "tensorrt-llm", "llama.cpp", "lmdeploy")
SERVING = ("vllm", "tensorrt-llm", "llama.cpp", "lmdeploy")
#: the serving engines whose profiles are fitted on published tables (vLLM's terms are the graph
#: engine's measured ones: benchmarks/fit_engine_profiles.py, VLLM_NOTE)
PUBLISHED_FIT = ("tensorrt-llm", "llama.cpp", "lmdeploy")


# ---- the engines a user names ----
def test_every_engine_the_issue_names_has_a_profile():
    assert set(REQUIRED) <= set(engine_ids())
    for engine in REQUIRED:
        profile = load_engine(engine)
        assert profile.id == engine and profile.variants, engine
        for name, variant in profile.variants.items():
            assert variant.terms and variant.fitted_on.get("cards"), (engine, name)
            assert variant.error["pooled"]["tpot_mape_fraction"] is not None, (engine, name)


@pytest.mark.parametrize("name, engine", [("trt-llm", "tensorrt-llm"), ("Ollama", "llama.cpp"),
                                          ("turbomind", "lmdeploy"), ("LLAMA.CPP", "llama.cpp")])
def test_engine_aliases(name, engine):
    assert load_engine(name).id == engine


def test_an_unknown_engine_is_an_error_naming_the_flag():
    with pytest.raises(RooflineError, match="unknown engine 'sglang-x'; choose one of graph, hf-eager") as err:
        roofline.predict("l4", "llama-3.2-1b", [1], engine="sglang-x")
    assert err.value.field == "engine"
    r = CliRunner().invoke(main, ["predict", "--card", "l4", "--model", "llama-3.2-1b", "--engine", "sglang-x"])
    assert r.exit_code == 1 and r.output.startswith("Error: --engine: unknown engine 'sglang-x'")


def test_serving_profiles_say_what_they_were_fitted_on_with_sources():
    for engine in PUBLISHED_FIT:
        for variant in load_engine(engine).variants.values():
            fitted = variant.fitted_on
            assert fitted["sources"] and all(s["url"].startswith("http") for s in fitted["sources"])
            assert fitted["points"] and fitted["models"] and fitted["engine_versions"]
            for fact in variant.terms.values():
                assert "published" in fact.source


# ---- the default engine ----
@pytest.mark.parametrize("card, engine", [
    ("rtx3060", "hf-eager"),        # the lesson's card: its shipped calibration (the lesson's engine)
    ("h200", "graph"),              # two shipped calibrations: the CUDA-graph engine before the Python loop
    ("h100-sxm", "vllm"), ("l4", "vllm"), ("rtx-a6000", "vllm"), ("mi300x", "vllm"),  # datacenter, workstation
    ("rtx4090", "llama.cpp"), ("rtx3090", "llama.cpp"),    # GeForce: a desktop card
    ("apple-m2-max-38c", "llama.cpp"), ("jetson-agx-orin-64gb", "llama.cpp"), ("epyc-9654", "llama.cpp"),
])
def test_default_engine(card, engine):
    assert default_engine(load_card(card))[0] == engine
    assert roofline.predict(card, "llama-3.2-1b", [1]).meta()["engine"] == engine


def test_segments_follow_the_card_profile():
    assert segment(load_card("rtx4090")) == "geforce" and card_classes(load_card("rtx4090")) == ("geforce",)
    assert segment(load_card("h100-pcie")) == "datacenter" and card_classes(load_card("h100-pcie")) == ("hbm",)
    assert segment(load_card("apple-m1-7c")) == "apple" and card_classes(load_card("l40s")) == ()


# ---- transferred terms ----
def test_a_card_without_calibration_gets_the_profile_terms_and_says_so():
    p = roofline.predict("l40s", "llama-3.1-8b", [1, 8], engine="tensorrt-llm", weight_dtype="fp8")
    meta = p.meta()
    variant = load_engine("tensorrt-llm").variants["cuda"]
    assert meta["engine"] == "tensorrt-llm" and meta["engine_profile"] == "hardware_profiles/engines/tensorrt-llm.json"
    assert meta["calibration"] == "l40s/tensorrt-llm"
    assert meta["calibration_source"].startswith("transferred from the tensorrt-llm engine profile (cuda variant")
    loco = variant.error["pooled"]["tpot_mape_fraction"]
    assert meta["expected_error_basis"].startswith(f"transferred from the tensorrt-llm profile (cuda), "
                                                   f"leave-one-card-out error {100 * loco:.0f}%")
    for row in p.rows():
        assert row["expected_error"]["tpot_fraction"] == pytest.approx(loco)
        assert "no tensorrt-llm measurement of l40s: the tensorrt-llm profile's terms, transferred" in row["extrapolation"]
    # the efficiencies multiply the card's datasheet ceilings; fp8 weights take the fp8 terms
    cal = p.scenario.calibration
    card = load_card("l40s")
    assert cal.measured_bandwidth_bytes_per_s == card.datasheet_bandwidth.base
    assert cal.compute_efficiency == variant.formats["fp8"]["compute_efficiency"].value
    assert cal.bandwidth_efficiency == variant.terms["bandwidth_efficiency"].value


def test_format_and_card_class_terms_compose_by_hand():
    variant = load_engine("llama.cpp").variants["cuda"]
    cal = transferred_calibration(load_card("h100-pcie"), "llama.cpp", "Q4_K_M")
    # the q4_k_m kernels' own bandwidth efficiency, times the HBM cards' factor (capped at 1)
    expected = min(1.0, variant.formats["q4_k_m"]["bandwidth_efficiency"].value
                   * variant.classes["hbm"]["bandwidth_efficiency"].value)
    assert cal.bandwidth_efficiency == pytest.approx(expected, rel=1e-12)
    assert cal.layer_overhead_s == pytest.approx(variant.terms["layer_overhead_s"].value
                                                 * variant.classes["hbm"]["layer_overhead_s"].value, rel=1e-12)
    # a GDDR card takes neither factor
    plain = transferred_calibration(load_card("l40s"), "llama.cpp", "q4_k_m")
    assert plain.bandwidth_efficiency == variant.formats["q4_k_m"]["bandwidth_efficiency"].value


def test_an_unfitted_format_takes_the_nearest_of_its_family_and_says_so():
    cal = transferred_calibration(load_card("rtx4090"), "llama.cpp", "q5_k_m")
    variant = load_engine("llama.cpp").variants["cuda"]
    assert cal.bandwidth_efficiency == variant.formats["q4_k_m"]["bandwidth_efficiency"].value
    assert "no fit of q5_k_m: the terms fitted for q4_k_m" in cal.source
    # a 16-bit-only profile keeps its shared terms for fp8 and says so
    v = Variant(applies_to="x", terms={"bandwidth_efficiency": Fact(value=0.8, source="s")},
                formats={"awq": {"bandwidth_efficiency": Fact(value=0.6, source="s")}})
    terms, notes = v.terms_for("fp8")
    assert terms["bandwidth_efficiency"] == 0.8 and notes == ["no fit of fp8 or its kind: the 16-bit terms"]


def test_a_scenario_keeps_its_shipped_calibration_and_replaces_transferred_terms_with_the_format():
    sc = roofline.make_scenario(card="rtx3060", model="qwen2.5-1.5b")
    assert sc.engine == "hf-eager" and sc.calibration.label == "rtx3060/hf-eager" and not sc.is_transferred
    sc = roofline.make_scenario(card="rtx4090", model="llama-3.1-8b", weight_dtype="fp16")
    q4 = sc.replace(weight_dtype="q4_k_m")
    variant = load_engine("llama.cpp").variants["cuda"]
    assert q4.calibration.bandwidth_efficiency == variant.formats["q4_k_m"]["bandwidth_efficiency"].value


def test_every_output_names_the_engine_profile_and_calibration():
    r = CliRunner().invoke(main, ["predict", "--card", "rtx4090", "--model", "llama-3.1-8b", "--batches", "1",
                                  "--format", "json"])
    meta = json.loads(r.output)["meta"]
    assert meta["engine"] == "llama.cpp" and meta["engine_profile"].endswith("engines/llama.cpp.json")
    assert meta["calibration"] == "rtx4090/llama.cpp"
    r = CliRunner().invoke(main, ["predict", "--card", "rtx4090", "--model", "llama-3.1-8b", "--batches", "1"])
    assert "calibration: rtx4090/llama.cpp -- transferred from the llama.cpp engine profile" in r.output


# ---- pricing a published row ----
def _point(**kw) -> PublishedPoint:
    base = dict(source_url="https://example.org/x", source_title="t", published="2025", engine="llama.cpp",
                engine_version="b1", card="rtx4090", card_as_named="RTX 4090", model="llama-2-7b",
                model_as_named="x", weight_format="q4_0", kv_dtype="fp16", tp=1, batch=1, prompt_tokens=0,
                gen_tokens=128, metric="decode_tok_s_per_seq", value=100.0, unit="tok/s", reserved=False, notes="")
    base.update(kw)
    return PublishedPoint(**base)


def test_each_metric_is_compared_as_the_time_it_measured():
    assert pf.measured_seconds(_point(value=100.0)) == pytest.approx(0.01)  # 1 / tok/s of one sequence
    assert pf.measured_seconds(_point(metric="decode_tok_s_total", batch=8, value=400.0)) == pytest.approx(0.02)
    assert pf.measured_seconds(_point(metric="prefill_tok_s", prompt_tokens=512, gen_tokens=0, value=1024.0)) == 0.5
    # output throughput includes the prefill: wall time = batch x gen / rate (per GPU x GPUs)
    out = _point(metric="output_tok_s_total", batch=4, gen_tokens=100, value=50.0, unit="tok/s/gpu", tp=2, gpus=2)
    assert pf.measured_seconds(out) == pytest.approx(4 * 100 / (50.0 * 2))
    assert pf.measured_seconds(_point(metric="tpot_s", value=12.0, unit="ms")) == pytest.approx(0.012)


def test_mean_step_is_mean_tpot_without_the_breakdown():
    from roofline.decode import mean_tpot_s
    from roofline.step import StepModel

    cal = Calibration(card="h200", engine="x", step_overhead_s=1e-3, bandwidth_efficiency=0.8, kv_traffic_factor=2.0,
                      roofline_exponent=3.0, overhead_exponent=1.5)
    for model in ("qwen2.5-7b", "gemma-2-9b"):  # gemma-2: windowed layers
        m = StepModel(load_model(model), load_card("h200"), cal)
        b, p, g = np.array([1.0, 16.0, 64.0]), np.array([0.0, 512.0, 6000.0]), np.array([129.0, 64.0, 33.0])
        for cache in ("dynamic", "static"):
            assert np.allclose(pf.mean_step_s(m, b, p, g, cache), mean_tpot_s(m, b, p, g, cache), rtol=1e-12)


def test_a_layer_split_adds_its_cost_per_extra_gpu():
    one = pf.cases([_point(model="llama-3-70b", weight_format="q4_k_m")])[0]
    four = pf.cases([_point(model="llama-3-70b", weight_format="q4_k_m", gpus=4)])[0]
    assert one[0].spec.name == "llama-3.1-70b"  # published id -> catalog model with the same shapes
    v = Variant(applies_to="x", terms={"bandwidth_efficiency": Fact(value=0.8, source="s"),
                                       "split_gpu_overhead_s": Fact(value=1e-3, source="s")})
    t1, t4 = (pf.predict_with(v, "llama.cpp", c)[0] for c in (one, four))
    assert t4 - t1 == pytest.approx(3 * 1e-3, rel=1e-9)


def test_rows_of_one_card_and_model_on_one_and_four_gpus_are_priced_apart():
    # a group shares the layer split of its first row: single- and multi-GPU rows must not share one
    one = _point(model="llama-3-70b", weight_format="q4_k_m")
    four = _point(model="llama-3-70b", weight_format="q4_k_m", gpus=4)
    v = Variant(applies_to="x", terms={"bandwidth_efficiency": Fact(value=0.8, source="s"),
                                       "split_gpu_overhead_s": Fact(value=1e-3, source="s")})
    both = pf.predict_with(v, "llama.cpp", pf.cases([one, four])[0])
    alone = [pf.predict_with(v, "llama.cpp", pf.cases([p])[0])[0] for p in (one, four)]
    assert both == pytest.approx(alone, rel=1e-12)


def test_a_layer_split_pipelines_a_long_prompt_in_micro_batches():
    # llama.cpp's pipeline parallelism: ubatches of 512 behind one another through the GPUs' stages,
    # drained at each 2048-token llama_decode call, at most 4 in flight
    f = pf.pipeline_factor
    assert float(f(512, 4)) == 1.0 and float(f(8192, 1)) == 1.0  # one micro-batch; one GPU
    assert float(f(1024, 4)) == pytest.approx((4 + 1) / 8)
    assert float(f(4096, 4)) == pytest.approx(2 * (4 + 3) / 32)
    assert float(f(2048, 8)) == pytest.approx((8 + 3 * 2) / 32)  # 4 copies in flight: 2 stages apart
    pp = dict(model="llama-3-8b", weight_format="fp16", prompt_tokens=4096, gen_tokens=0, metric="prefill_tok_s")
    v = Variant(applies_to="x", terms={"prefill_compute_efficiency": Fact(value=0.5, source="s")})
    t1, t4 = (pf.predict_with(v, "llama.cpp", pf.cases([_point(**pp, gpus=g)])[0])[0] for g in (1, 4))
    assert t4 == pytest.approx(t1 * 2 * 7 / 32, rel=1e-12)


def test_prefill_score_traffic_is_charged_without_flash_attention_only():
    from roofline.step import StepModel, prefill_work

    spec, card = load_model("llama-3.1-8b"), load_card("rtx4090")
    base = Calibration(card="rtx4090", engine="x", bandwidth_efficiency=0.8, roofline_exponent=1.0)
    scored = base.model_copy(update={"prefill_score_bytes": 20.0})
    work = prefill_work(4096.0, 4096.0 * 4097.0 / 2.0, 1.0)
    a, b = (StepModel(spec, card, c).pass_parts(work) for c in (base, scored))
    per_pair = spec.num_hidden_layers * spec.num_attention_heads * 20.0 / (0.8 * card.bandwidth_bytes_per_s)
    assert b.attention_memory_s - a.attention_memory_s == pytest.approx(work.prefill_pairs * per_pair, rel=1e-12)
    assert b._replace(attention_memory_s=0.0) == a._replace(attention_memory_s=0.0)
    # a decode step does not see it (decode's scores are attention_score_bytes')
    from roofline.step import decode_work
    assert StepModel(spec, card, base).pass_s(decode_work(1.0, 4096.0)) == StepModel(spec, card, scored).pass_s(
        decode_work(1.0, 4096.0))
    # the fit prices a row run with flash attention without it
    pp = dict(model="llama-3-8b", weight_format="fp16", prompt_tokens=4096, gen_tokens=0, metric="prefill_tok_s")
    v = Variant(applies_to="x", terms={"bandwidth_efficiency": Fact(value=0.8, source="s"),
                                       "prefill_score_bytes": Fact(value=20.0, source="s")})
    v0 = Variant(applies_to="x", terms={"bandwidth_efficiency": Fact(value=0.8, source="s")})
    on, off = (pf.cases([_point(**pp, flash_attn=fa)])[0] for fa in (True, False))
    assert pf.predict_with(v, "llama.cpp", on)[0] == pf.predict_with(v0, "llama.cpp", on)[0]
    assert pf.predict_with(v, "llama.cpp", off)[0] > pf.predict_with(v0, "llama.cpp", off)[0]


# ---- the fit ----
def _synthetic(truth: Variant):
    """A small published table measured by a known profile: tg and pp rows on three cards."""
    points = []
    for card in ("rtx4090", "rtx3060", "a40"):
        for model in ("llama-2-7b", "llama-3-70b"):  # 32 and 80 layers: step and layer overheads apart
            for fmt in ("fp16", "q4_0"):
                for gen in (128, 1024):
                    points.append(_point(card=card, model=model, weight_format=fmt, gen_tokens=gen))
                points.append(_point(card=card, model=model, weight_format=fmt, prompt_tokens=512, gen_tokens=0,
                                     metric="prefill_tok_s"))
    cs, skipped = pf.cases(points)
    assert not skipped
    seconds = pf.predict_with(truth, "llama.cpp", cs)
    out = []
    for p, c, s in zip(points, cs, seconds):
        value = (p.batch * p.prompt_tokens / s) if p.metric == "prefill_tok_s" else 1.0 / s
        out.append(_point(**{**p.__dict__, "value": float(value)}))
    return out


def test_a_fit_on_a_synthetic_published_table_recovers_the_terms():
    truth_values = {"step_overhead_s": 2e-3, "layer_overhead_s": 4e-5, "bandwidth_efficiency": 0.82,
                    "prefill_compute_efficiency": 0.55, "q4_0:bandwidth_efficiency": 0.7}
    layout = pf.Layout(shared=["step_overhead_s", "layer_overhead_s", "bandwidth_efficiency",
                               "prefill_compute_efficiency"], by_format={"q4_0": ["bandwidth_efficiency"]})
    truth = pf.variant_from_values(truth_values, layout)
    cs, _ = pf.cases(_synthetic(truth))
    got = pf.fit_terms(cs, "llama.cpp", layout, n_starts=1)
    for name, value in truth_values.items():
        assert got[name] == pytest.approx(value, rel=0.01), name


def test_reserved_rows_never_enter_a_fit(monkeypatch):
    reserved = _point(card="rtx3090", reserved=True)
    cs, _ = pf.cases([reserved])
    with pytest.raises(RooflineError, match="reserved row"):
        pf.fit_terms(cs, "llama.cpp", pf.Layout(shared=["bandwidth_efficiency"]))
    # the whole pipeline, with a reserved row of the fitted backend among the points: every fit it
    # runs (the profile's and each leave-one-card-out refit) sees unreserved rows only
    seen = []
    real = pf.fit_terms

    def spy(case_list, *args, **kwargs):
        seen.append([c.point for c in case_list])
        return real(case_list, *args, **kwargs)

    monkeypatch.setattr(pf, "fit_terms", spy)
    truth = pf.variant_from_values({"bandwidth_efficiency": 0.8}, pf.Layout(shared=["bandwidth_efficiency"]))
    points = _synthetic(truth)[:6] + [_point(card="rtx3090", reserved=True, value=50.0)]
    _, report = pf.fit_variant(points, "llama.cpp", "cuda", pf.Layout(shared=["bandwidth_efficiency"]), "x", loco=False)
    assert seen and all(not p.reserved for fit in seen for p in fit)
    assert report["in_sample"]["points"] == 6


def test_shipped_profiles_were_fitted_on_no_reserved_card():
    for engine in PUBLISHED_FIT:
        for variant in load_engine(engine).variants.values():
            for card in variant.fitted_on["cards"]:
                assert not expected_reserved(card, "https://github.com/NVIDIA/x"), (engine, card)
                assert card not in ("rtx3090", "l40s", "h100-pcie", "a100-40gb")
    # and the published ids they were fitted under are not reserved either
    fitted_ids = {(p.engine, p.card) for p in load_published() if not p.reserved}
    assert ("llama.cpp", "rtx3090") not in fitted_ids


def test_every_reserved_row_is_priced():
    # "no point blocked": the validation tables price every reserved row of every engine
    from pathlib import Path

    folder = Path(roofline.__file__).parent.parent / "hardware_profiles" / "engines" / "validation"
    for engine in SERVING:
        report = json.loads((folder / f"{engine}.json").read_text())
        reserved = report.get("reserved")
        n = sum(1 for p in load_published() if p.engine == engine and p.reserved)
        if n:
            assert reserved["priced"] == reserved["points"] == n and not reserved["unpriced"], engine


def test_vllm_is_the_graph_engines_measured_decode_and_says_so():
    # vLLM decodes with CUDA graphs since v0.3; the 2023 rows in the tables predate that, so the
    # profile takes the graph engine's measured terms and checks the 2023 rows as a version gap
    vllm, graph = load_engine("vllm").variants["cuda"], load_engine("graph").variants["cuda"]
    for name in ("step_overhead_s", "layer_overhead_s", "bandwidth_efficiency", "compute_efficiency"):
        assert vllm.terms[name].value == graph.terms[name].value, name
    assert "CUDA graphs" in vllm.note and vllm.fitted_on["cards"] == ["h200"]
    gap = vllm.error["vllm_2023_rows"]
    assert gap["points"] == 7 and gap["mean_signed_fraction"] < -0.3  # the old build was much slower
    # its expected error is TensorRT-LLM's leave-one-card-out error, and the answer says where it comes from
    trt = load_engine("tensorrt-llm").variants["cuda"].error["pooled"]
    assert vllm.error["pooled"]["tpot_mape_fraction"] == trt["tpot_mape_fraction"]
    out = roofline.predict("h100-sxm", "llama-3.1-8b", batches=[1], engine="vllm")
    assert out.meta()["engine"] == "vllm"
    # batch 1 on an H100 (3.35 TB/s, 16 GB of bf16 weights): between the bandwidth floor and twice it
    floor_s = load_model("llama-3.1-8b").weight_bytes("bf16") / 3.35e12
    assert floor_s < out.columns["tpot_s"][0] < 2 * floor_s


def test_the_graph_engine_holds_two_decode_logits_buffers():
    """The graph engine's fact (calibrate/graph_engine.py GraphEngine._capture: the eager warm-up steps
    leave StepState.logits alive while the capture allocates the graph's own) reaches its calibration,
    and the end of a decode then holds batch x vocabulary x 2 bytes more than with one buffer. Evidence:
    device calls 54 and 56 measured the peak 0.99-1.15 x that above the one-buffer price on nine models
    at batches 512-2,048 (h200-graph-check-call54.csv, -call56.csv)."""
    from roofline.calibration import load_calibration
    from roofline.memory import peak_memory
    from roofline.step import StepModel

    fact = load_engine("graph").facts["decode_logits_buffers"]
    assert fact.value == 2.0 and "_capture" in fact.source
    cal = load_calibration("hardware_profiles/calibrations/h200-graph.json")
    assert cal.decode_logits_buffers == 2.0
    assert load_calibration("hardware_profiles/calibrations/rtx3060-hf-eager.json").decode_logits_buffers == 1.0
    spec, card = load_model("qwen2.5-0.5b"), load_card("h200")
    two = StepModel(spec, card, cal)
    one = StepModel(spec, card, cal.model_copy(update={"decode_logits_buffers": 1.0}))
    batch = np.array([512.0, 2048.0])
    # (the harness's rows from batch 256 at these prompts time no prefill: the end of the decode is the peak)
    a, b = (peak_memory(m, batch, 512, 64, "static", prefill_ran=False) for m in (two, one))
    assert list(a["peak_at"]) == ["end", "end"]
    np.testing.assert_allclose(a["peak_bytes"] - b["peak_bytes"], batch * spec.vocab_size * 2, rtol=1e-12)


def test_the_graph_engine_holds_two_decode_score_buffers():
    """The graph engine's fact (calibrate/graph_engine.py decode_attention: one layer's scores and their
    softmax alive before the values' bmm; with sinks the concatenated row too) reaches its calibration,
    and the end of a decode then holds buffers x batch x query heads x cached slots x 2 bytes more than
    without it; windowed-only layers score their window. Evidence: falcon-7b (71 query heads over one KV
    head) measured 1.7-3.0% above the peak without them at batches 256-2,048 and 1,200-16,384 positions,
    within 0.33% with them (benchmarks/decode_score_memory.py)."""
    from roofline.calibration import load_calibration
    from roofline.memory import decode_score_bytes, peak_memory
    from roofline.step import StepModel

    fact = load_engine("graph").facts["decode_score_buffers"]
    assert fact.value == 2.0 and "decode_attention" in fact.source
    cal = load_calibration("hardware_profiles/calibrations/h200-graph.json")
    assert cal.decode_score_buffers == 2.0
    assert load_calibration("hardware_profiles/calibrations/h200-hf-eager.json").decode_score_buffers == 0.0
    card = load_card("h200")
    batch = np.array([256.0, 1024.0])
    falcon = load_model("falcon-7b")
    two = StepModel(falcon, card, cal)
    none = StepModel(falcon, card, cal.model_copy(update={"decode_score_buffers": 0.0}))
    a, b = (peak_memory(m, batch, 14000, 32, "static", prefill_ran=False) for m in (two, none))
    assert list(a["peak_at"]) == ["end", "end"]
    np.testing.assert_allclose(a["peak_bytes"] - b["peak_bytes"], 2 * batch * 71 * 14032 * 2, rtol=1e-12)
    np.testing.assert_allclose(a["activations_bytes"], 2 * batch * 71 * 14032 * 2, rtol=1e-12)
    # gpt-oss-20b: sinks (one more buffer, the concatenated row); its full layers score the whole context
    oss = StepModel(load_model("gpt-oss-20b"), card, cal)
    np.testing.assert_allclose(decode_score_bytes(oss, 4.0, 9000.0), 3 * 4 * 64 * 9000 * 2, rtol=1e-12)
    # mistral-7b-v0.1: every layer windowed (4,096): the ring's slots, not the context; split over 2 GPUs
    mistral = StepModel(load_model("mistral-7b-v0.1"), card, cal, tp=2)
    np.testing.assert_allclose(decode_score_bytes(mistral, 8.0, 9000.0), 2 * 8 * 16 * 4096 * 2, rtol=1e-12)
    assert decode_score_bytes(StepModel(falcon, card, load_calibration(
        "hardware_profiles/calibrations/h200-hf-eager.json")), 8.0, 9000.0) == 0.0
