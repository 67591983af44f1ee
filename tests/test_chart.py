"""The chart page's data and HTML (no browser), `roofline chart`'s CLI, and Prediction.figure()."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import roofline
from cli import main
from roofline.chart_page import render_page, write_chart
from roofline.calibration import Calibration, shipped_calibration
from roofline.hardware import load_card
from roofline.chart_data import CALIBRATION_PROVENANCE, WHAT_IF_DTYPES, page_data, settings_calibration
from roofline.errors import RooflineError
from roofline.hardware import card_ids
from roofline.model_spec import catalog_names, load_model
from roofline.prediction import bend
from roofline.scenario import make_scenario


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_import_roofline_does_not_import_plotly():
    code = "import sys, roofline, roofline.chart_page, roofline.chart_data, roofline.browser; print('plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_roofline_chart_is_the_api_function_even_after_the_page_module_loads(tmp_path):
    import roofline.chart_page  # noqa: F401 - a submodule named chart would replace roofline.chart

    assert callable(roofline.chart)
    info = roofline.chart(tmp_path / "p.html")
    assert info["selected"] == ["rtx3060", "qwen2.5-1.5b"] and info["pngs"] == []
    assert callable(roofline.chart)


def test_page_data_offers_every_card_and_catalog_model():
    data = page_data()
    assert sorted(c["id"] for c in data["cards"]) == card_ids()
    assert sorted(m["name"] for m in data["models"]) == catalog_names()
    assert data["initial"]["card"] == "rtx3060" and data["initial"]["model"] == "qwen2.5-1.5b"
    rtx = next(c for c in data["cards"] if c["id"] == "rtx3060")
    assert rtx["fitted"]["label"] == "rtx3060/hf-eager" and data["pure"]["is_uncalibrated"]
    # fitted: what `roofline predict --card CARD` uses (issue 10): the card's default engine's shipped
    # calibration, else that engine's profile transferred to the card
    from roofline.engines import default_engine
    from roofline.scenario import make_scenario

    for card in data["cards"]:
        engine = default_engine(load_card(card["id"]))[0]
        shipped = shipped_calibration(card["id"], engine)
        assert card["fitted"] is not None, card["id"]
        assert bool(card["fitted"]["fit_report"].get("transferred")) == (shipped is None), card["id"]
        for dtype in ("bf16", "fp8", "int4"):
            py = make_scenario(card=card["id"], model="qwen2.5-1.5b", weight_dtype=dtype).calibration
            page = settings_calibration(data, {"card": card["id"], "weight_dtype": dtype})
            assert (page.engine, page.step_overhead_s, page.bandwidth_efficiency, page.compute_efficiency) == \
                (py.engine, py.step_overhead_s, py.bandwidth_efficiency, py.compute_efficiency), (card["id"], dtype)
    assert sum(bool(c["fitted_formats"]) for c in data["cards"]) >= 1  # some engines' terms differ by format
    json.dumps(data, allow_nan=False)  # plain JSON: no NaN or inf for the page


@pytest.mark.parametrize("model, tp", [("qwen2.5-7b", 1), ("qwen3-30b-a3b", 2), ("gpt-oss-20b", 4),
                                       ("deepseek-v2-lite", 8), ("falcon-7b", 1)])
def test_model_scalars_are_what_the_python_model_uses(model, tp):
    """The page derives StepModel's scalars from these exports with StepModel's own arithmetic:
    here the exports themselves against the ModelSpec and the StepModel built from it."""
    data = page_data()
    spec = load_model(model)
    m = next(x for x in data["models"] if x["name"] == model)
    for d in WHAT_IF_DTYPES:
        step = make_scenario(card="h200", model=model, weight_dtype=d, kv_dtype=d, calibration=None, tp=tp).step
        assert m["decode_weight_bytes"][d] / tp == step.weight_read_bytes
        assert m["weight_bytes"][d] == spec.weight_bytes(d)
        if spec.moe_layers:
            assert (m["decode_weight_bytes"][d] - m["all_routed_expert_bytes"][d]) / tp == step.dense_read_bytes
            assert m["routed_expert_bytes"][d] / tp == step.expert_bytes > 0
    assert ("routed_expert_bytes" in m) == (spec.moe_layers > 0)
    groups = [{k: getattr(g, k) for k in ("layers", "kind", "window", "q_heads", "kv_heads", "kv_elements_per_token",
                                          "flop_per_pair", "sinks", "prefill_flop_per_pair")}
              for g in spec.attention_groups]
    assert m["attention_groups"] == groups
    assert m["linear_flop_per_token"] == spec.linear_flop_per_token
    assert m["prefill_elementwise_elements"] == spec.prefill_elementwise_elements
    if spec.moe_layers:  # a prompt token's routed-expert FLOPs (the grouped GEMMs' rate prices them)
        assert m["routed_flop_per_token"] == spec.moe_layers * spec.experts_per_token * 2.0 * spec.routed_expert_weight_params
    assert m["lm_head_flop_per_position"] == spec.lm_head_flop_per_position
    assert (m["num_experts"], m["experts_per_token"], m["moe_layers"]) == (spec.num_experts, spec.experts_per_token,
                                                                          spec.moe_layers)
    # the elementwise kernels' traffic: the page multiplies the calibration's coefficients by
    # act_width_bytes_per_token / tp, exactly as StepModel does
    cal = Calibration(card="h200", engine="x", activation_traffic_coeff=2.7, prefill_activation_traffic_coeff=5.3)
    sm = make_scenario(card="h200", model=model, calibration=cal, tp=tp).step
    # (a plain MLP's intermediate weighted as the page weights it: this calibration measured no
    # element costs, so by the exported default)
    w = data["plain_mlp_activation_weight"]
    width = (m["act_width_bytes_per_token"] - (1.0 - w) * m["plain_intermediate_bytes_per_token"]) / tp
    assert (m["plain_intermediate_bytes_per_token"] > 0) == (not spec.mlp_gated)
    assert 2.7 * width == pytest.approx(sm.act_bytes_per_token, rel=1e-12) and width > 0
    assert 5.3 * width == pytest.approx(sm.prefill_act_bytes_per_token, rel=1e-12)
    assert m["hidden_size"] == spec.hidden_size and m["params_label"] == f"{spec.param_count / 1e9:.2g}"


def test_qwen_7b_exports_by_hand():
    """Published shape of Qwen2.5-7B (its config.json): 28 layers, 28 query and 4 KV heads of 128."""
    m = next(x for x in page_data()["models"] if x["name"] == "qwen2.5-7b")
    (g,) = m["attention_groups"]
    assert (g["layers"], g["q_heads"], g["kv_heads"], g["window"]) == (28, 28, 4, None)
    assert g["kv_elements_per_token"] == 2 * 4 * 128 and g["flop_per_pair"] == 4 * 28 * 128
    assert g["layers"] * g["kv_elements_per_token"] * 2 == 56 * 1024  # KV bytes per token in bf16


def test_the_continuous_servers_knobs_are_simulates_defaults():
    """The page's continuous server is roofline.api.simulate's default one: its pool's block
    size, profiling prefill, memory share and the engine's reserve, the slot limit, and each
    model's max_model_len (Qwen2.5-7B's config.json: 32,768 positions)."""
    import inspect

    from roofline import api
    from roofline.kvpool import DEFAULT_PROFILE_TOKENS
    from roofline.servers import MAX_NUM_SEQS

    defaults = {k: v.default for k, v in inspect.signature(api.simulate).parameters.items()}
    assert (defaults["schedule"], defaults["max_num_batched_tokens"], defaults["pass_cost"]) == ("decode-first", None, "fused")
    data = page_data()
    assert data["server"] == {"block_size": defaults["block_size"], "profile_tokens": DEFAULT_PROFILE_TOKENS,
                              "engine_reserve_bytes": 0.0, "max_num_seqs": MAX_NUM_SEQS}
    assert data["initial"]["gpu_memory_utilization"] == defaults["gpu_memory_utilization"] == 0.9
    assert page_data(gpu_memory_utilization=0.5)["initial"]["gpu_memory_utilization"] == 0.5
    for m in data["models"]:
        assert m["max_position_embeddings"] == load_model(m["name"]).max_position_embeddings, m["name"]
    assert next(m for m in data["models"] if m["name"] == "qwen2.5-7b")["max_position_embeddings"] == 32768


def test_card_links_are_the_profiles():
    """Per TP degree the page offers, each card's link is CardProfile.tp_link_bytes_per_s (None:
    tensor parallelism cannot be costed there), and the initial degree is offered too."""
    from roofline.hardware import load_card

    data = page_data(cards=["h200"], tp=3)
    assert data["tp_choices"] == [1, 2, 3, 4, 8] and data["initial"]["tp"] == 3
    for entry in data["cards"]:
        card = load_card(entry["id"])
        assert entry["tp_link_bytes_per_s"] == {str(t): card.tp_link_bytes_per_s(t) for t in (2, 3, 4, 8)}
        link = card.interconnect
        assert entry["allreduce_latency_s"] == (link.allreduce_latency_s if link else None)
    h200 = next(c for c in data["cards"] if c["id"] == "h200")
    assert h200["tp_link_bytes_per_s"]["2"] > 1e11  # NVLink, hundreds of GB/s per direction
    apple = next(c for c in data["cards"] if c["id"].startswith("apple"))
    assert apple["tp_link_bytes_per_s"]["2"] is None


@pytest.mark.parametrize("card, engine", [("h200", "graph"), ("h200", "hf-eager"), ("rtx3060", "hf-eager")])
def test_compact_fit_report_gives_the_same_confidence(card, engine):
    """The page carries only the parts of a fit report roofline.confidence reads: from them it
    gives the same expected errors and extrapolation reasons as from the whole report."""
    from roofline.confidence import expected_errors, extrapolation

    full = shipped_calibration(card, engine)
    data = page_data(cards=[card], engine=engine)
    compact = settings_calibration(data, {"card": card, "calibrated": True})
    assert compact.fit_report != full.fit_report and len(json.dumps(compact.fit_report)) < len(json.dumps(full.fit_report))
    batches = np.array([1, 64, 100, 5000])
    for model, tp, prompt in (("qwen2.5-7b", 1, 128), ("qwen3-30b-a3b", 1, 400), ("llama-3.1-70b", 2, 20000),
                              ("gpt-oss-20b", 4, 3000), ("deepseek-v2-lite", 1, 8000)):
        sc = make_scenario(card=card, model=model, prompt_tokens=prompt, tp=tp, calibration=full)
        a, b = expected_errors(full, sc, batches), expected_errors(compact, sc, batches)
        assert a["basis"] == b["basis"] and a["peak_mem_fraction"] == b["peak_mem_fraction"]
        assert np.array_equal(a["tpot_fraction"], b["tpot_fraction"], equal_nan=True)
        assert np.array_equal(a["ttft_fraction"], b["ttft_fraction"], equal_nan=True)
        assert extrapolation(full, sc, batches) == extrapolation(compact, sc, batches)


def test_floor_is_the_pure_rooflines_record():
    from roofline.confidence import expected_errors

    floor = page_data()["floor"]
    sc = make_scenario(card="a100-80gb", model="qwen2.5-7b", calibration=None)
    e = expected_errors(sc.calibration, sc, [1])
    assert floor["basis"] == e["basis"] and floor["tpot_fraction"] == e["tpot_fraction"][0]
    assert 0.05 < floor["tpot_fraction"] < 1  # the pure roofline is a floor, tens of percent too fast


def test_page_exports_every_calibration_term():
    """Every field of Calibration but its provenance reaches the page, fitted and pure alike, so
    a term added to the model cannot be silently missing from the port's inputs."""
    data = page_data()
    rtx = next(c for c in data["cards"] if c["id"] == "rtx3060")
    terms = set(Calibration.model_fields) - set(CALIBRATION_PROVENANCE)
    for new in ("attention_lane_s_per_token", "expert_gemm_min_rows", "allreduce_bandwidth_bytes_per_s",
                "mla_latent_passes", "sink_score_bytes", "prefill_chunk_tokens"):
        assert new in terms
    for new in ("attention_efficiency", "activation_traffic_coeff", "prefill_activation_traffic_coeff"):
        assert new in terms
    shipped = shipped_calibration("rtx3060", "hf-eager")
    for k in terms:
        assert rtx["fitted"][k] == getattr(shipped, k), k
        assert data["pure"][k] == getattr(Calibration.uncalibrated("rtx3060"), k), k
    assert rtx["fitted"]["card"] == "rtx3060" and rtx["fitted"]["fit_report"]["coverage"]["batch"] == [1, 128]


def test_calibration_file_without_the_new_terms_gets_their_defaults(tmp_path):
    """A calibration written before attention and activation traffic existed still loads; the
    page gets the model's defaults (efficiency 1, no activation traffic): the old step model."""
    old = {"card": "h200", "engine": "old", "step_overhead_s": 0.003, "compute_efficiency": 0.5}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    data = page_data(cards=["h200"], calibration=str(path))
    fitted = next(c for c in data["cards"] if c["id"] == "h200")["fitted"]
    defaults = Calibration(card="h200", engine="old")
    for k in ("attention_efficiency", "activation_traffic_coeff", "prefill_activation_traffic_coeff"):
        assert fitted[k] == getattr(defaults, k)
    assert fitted["step_overhead_s"] == 0.003 and fitted["compute_efficiency"] == 0.5


def test_bend_grid_tail_is_the_python_grid():
    data = page_data()
    tail = data["bend_grid_tail"]
    assert tail[0] > 4096 and tail[-1] == data["bend_max_batch"] == 65536
    assert tail == sorted(set(tail)) and len(tail) < 520


def test_calibration_file_applies_to_the_chosen_cards(tmp_path):
    from roofline.calibration import Calibration, save_calibration

    path = tmp_path / "cal.json"
    save_calibration(Calibration(card="h200", engine="graph", step_overhead_s=0.004), path)
    data = page_data(cards=["h200"], calibration=str(path))
    h200 = next(c for c in data["cards"] if c["id"] == "h200")
    assert h200["fitted"]["step_overhead_s"] == 0.004 and h200["fitted"]["label"] == "h200/graph"
    rtx = next(c for c in data["cards"] if c["id"] == "rtx3060")
    assert rtx["fitted"]["label"] == "rtx3060/hf-eager"  # other cards keep their shipped one
    cal = settings_calibration(data, {"card": "h200", "calibrated": True})
    assert cal.step_overhead_s == 0.004
    assert settings_calibration(data, {"card": "h200", "calibrated": False}) is None
    none = page_data(cards=["rtx3060"], calibration=None)
    assert next(c for c in none["cards"] if c["id"] == "rtx3060")["fitted"] is None


def test_measurements_are_resolved_to_page_ids(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text(
        "card,model,engine,kv_cache,prompt_tokens,gen_tokens,batch,ttft_s,tpot_s,peak_mem_gib,status\n"
        "RTX3060,Qwen/Qwen2.5-1.5B-Instruct,hf-eager,dynamic,128,128,4,0.07,0.0185,2.93,ok\n"
        "rtx3060,qwen2.5-1.5b,hf-eager,dynamic,128,128,256,,,,oom\n"
    )
    pts = page_data(measurements=[csv])["measurements"]
    assert len(pts) == 1  # the oom row is skipped
    assert pts[0]["card"] == "rtx3060" and pts[0]["model"] == "qwen2.5-1.5b"
    assert pts[0]["peak_mem_bytes"] == pytest.approx(2.93 * 2**30)


@pytest.mark.parametrize("kwargs, message", [
    ({"cards": ["nope"]}, "unknown card 'nope'"),
    ({"models": ["gpt-9"]}, "unknown model 'gpt-9'"),
    ({"prompt_tokens": 0}, "prompt_tokens: must be at least 1"),
    ({"mix": "8y32"}, "mix: item 1 '8y32'"),
    ({"kv_dtype": "fp4"}, "unknown dtype 'fp4'"),
    ({"kv_dtype": "fp32"}, "kv_dtype: must be one of"),
    ({"ttft_max_s": -1}, "ttft_max_s: must be a positive number"),
    ({"return_policy": "sometimes"}, "return_policy: must be one of"),
    ({"batch": 0}, "batch: must be at least 1"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization: must be at most 1, not 1.5"),
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization: must be a fraction of the card's memory in (0, 1]"),
])
def test_page_data_rejects_bad_input(kwargs, message):
    with pytest.raises(RooflineError, match=re.escape(message)):
        page_data(**kwargs)


def test_page_embeds_plotly_and_cannot_be_broken_out_of(tmp_path):
    data = page_data()
    data["models"][0]["name"] = "</script><script>alert(1)</script>"
    html = render_page(data)
    assert html.count("</script>") == 5  # data, plotly.js, model.js, serving.js, chart.js
    from plotly.offline import get_plotlyjs

    from roofline.chart_page import ASSETS

    assert get_plotlyjs() in html  # plotly.js inline, whole
    template = (ASSETS / "page.html").read_text()
    assert "src=" not in template and "href=" not in template  # the page's own markup loads nothing
    assert "default-src 'none'" in template  # and its CSP forbids any fetch
    assert "__DATA__" not in html and "__PLOTLYJS__" not in html
    m = re.search(r'<script type="application/json" id="roofline-data">(.*?)</script>', html, re.S)
    assert "<" not in m.group(1)  # not even "<!--", which would change how the script element is parsed
    assert json.loads(m.group(1))["models"][0]["name"] == "</script><script>alert(1)</script>"


def test_page_title_escapes_names():
    data = page_data()
    data["initial"]["model"] = '<img src=x onerror="alert(1)">'
    html = render_page(data)
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert title == "roofline: &lt;img src=x onerror=&quot;alert(1)&quot;&gt; on rtx3060"


def test_write_chart_is_atomic_and_small(tmp_path):
    out = tmp_path / "sub" / "r.html"
    info = write_chart(out)
    assert out.stat().st_size == info["bytes"] < 10e6
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary file left


def test_cli_chart_writes_the_page_and_reports_it(tmp_path):
    out = tmp_path / "x.html"
    r = run("chart", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "-o", str(out))
    assert r.exit_code == 0, r.output
    cards, models = len(card_ids()), len(catalog_names())
    assert re.fullmatch(
        rf"wrote {re.escape(str(out))} \([45]\.\d MB\): qwen2\.5-1\.5b on rtx3060 selected, {cards} cards x {models} models offered\n",
        r.output,
    )
    assert out.is_file()


def test_cli_chart_passes_tp_and_routing_skew_to_the_page(tmp_path):
    out = tmp_path / "x.html"
    r = run("chart", "--card", "h200", "--model", "llama-3.1-70b", "--tp", "2", "-o", str(out))
    assert r.exit_code == 0, r.output
    html = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="roofline-data">(.*?)</script>', html, re.S).group(1))
    assert (data["initial"]["tp"], data["initial"]["model"], data["initial"]["card"]) == (2, "llama-3.1-70b", "h200")
    r = run("chart", "--card", "h200", "--model", "qwen3-30b-a3b", "--routing-skew", "1.5", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert '"routing_skew":1.5' in out.read_text(encoding="utf-8")
    r = run("chart", "--card", "apple-m2-max-38c", "--tp", "2", "-o", str(tmp_path / "y.html"))
    assert r.exit_code == 1
    assert r.output == "Error: --tp: apple-m2-max-38c has no interconnect on record: tensor parallelism cannot be costed\n"
    assert not (tmp_path / "y.html").exists()


def test_cli_chart_errors_exit_1_with_one_line(tmp_path):
    r = run("chart", "--card", "rtx3061", "-o", str(tmp_path / "x.html"))
    assert r.exit_code == 1
    assert r.output.startswith("Error: unknown card 'rtx3061'; did you mean rtx3060")
    r = run("chart", "--measurements", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "x.html"))
    assert r.exit_code == 1 and "no such file" in r.output
    assert not (tmp_path / "x.html").exists()


def test_cli_chart_help_has_one_example():
    r = run("chart", "--help")
    assert r.exit_code == 0
    assert r.output.count("Example:") == 1
    assert "Example: roofline chart --card rtx3060 --model qwen2.5-1.5b -o roofline.html" in r.output


# ---- Prediction.figure() ----
def test_prediction_figure_carries_the_predictions_numbers():
    p = roofline.predict("rtx3060", "qwen2.5-1.5b")
    fig = p.figure()
    thr, tpot = fig.data
    assert list(thr.x) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert np.allclose(thr.y, p.columns["throughput_tok_s"], rtol=0)
    assert np.allclose(tpot.y, p.columns["tpot_s"] * 1e3, rtol=0)
    assert tpot.yaxis == "y2"
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals)[:3] == [1, 2, 4]
    b = bend(p.scenario)
    rect = [s for s in fig.layout.shapes if s.type == "rect"][0]
    assert (rect.x0, rect.x1) == (b.region_low_batch, b.region_high_batch) == (64, 128)
    assert any(s.type == "line" and s.x0 == b.crossing_batch for s in fig.layout.shapes)


def test_prediction_figure_without_bend_has_no_shapes():
    fig = roofline.predict("h200", "qwen2.5-7b", batches=[1, 3, 9]).figure(show_bend=False)
    assert fig.layout.shapes == () and list(fig.data[0].x) == [1, 3, 9]
