"""`roofline chart` in a real browser: the page opened headless from file:// (issue 5).

Checks that each plot draws traces, that the card control changes the data, that the page's
JavaScript port of the formulas gives the Python package's numbers (predict, bend, choose,
waste, simulate) to 1e-6, that nothing is fetched from a network, that a screenshot is not
blank, and that the PNG export writes small, non-blank images. Needs a chromium (Debian:
``apt-get install chromium``; CI installs it in .ci/run); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from js_parity import PARITY_BATCHES, differences, python_result, rel_err
from roofline.api import predict
from roofline.browser import Browser, find_chromium, png_colour_stats, png_decode
from roofline.chart_page import PLOT_IDS, write_chart
from roofline.hardware import load_card
from roofline.units import GiB

LESSON_CSV = Path(__file__).resolve().parent.parent / "hardware_profiles" / "measurements" / "rtx3060-hf-eager-lesson.csv"
CHROMIUM = find_chromium()

if CHROMIUM is None and os.environ.get("ROOFLINE_REQUIRE_TOOLS") == "1":
    pytest.fail("no chromium but ROOFLINE_REQUIRE_TOOLS=1 (CI): install chromium", pytrace=False)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium on PATH (install it: apt-get install chromium; or set ROOFLINE_CHROMIUM): "
        "the chart page can only be checked in a real browser",
    ),
]

#: (card, model, prompt, gen, weight dtype, kv dtype, kv cache, calibrated, logits, mix, batch, count, policy)
PARITY_SETTINGS = [
    # the lesson's scenario on its calibrated card
    dict(card="rtx3060", model="qwen2.5-1.5b", prompt_tokens=128, gen_tokens=128, weight_dtype="bf16", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x256", batch=16, stream_count=64,
         return_policy="whole-batch"),
    # the H200's shipped hf-eager calibration, long prompt, fp8 KV, early return
    dict(card="h200", model="qwen2.5-7b", prompt_tokens=1000, gen_tokens=300, weight_dtype="bf16", kv_dtype="fp8",
         kv_cache="auto", calibrated=True, logits="last", mix="30x20,2x1000", batch=32, stream_count=100,
         return_policy="early-return"),
    # a 70B model on a big card with no shipped calibration (pure roofline: p = 400, the exact max)
    dict(card="mi300x", model="llama-3.1-70b", prompt_tokens=2048, gen_tokens=512, weight_dtype="fp8", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="16x64,16x512", batch=16, stream_count=96,
         return_policy="whole-batch"),
    # a mixture of experts with skewed routing (the first bend, the expected error of held-out MoE models)
    dict(card="h200", model="qwen3-30b-a3b", prompt_tokens=1024, gen_tokens=256, weight_dtype="bf16", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x256", batch=16, stream_count=32,
         return_policy="whole-batch", routing_skew=1.2),
    # tensor parallelism over the card's NVLink; MLA + MoE split over 4 GPUs; windows + sinks over 2
    dict(card="h200", model="llama-3.1-70b", prompt_tokens=2048, gen_tokens=128, weight_dtype="bf16", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x128", batch=16, stream_count=32,
         return_policy="early-return", tp=2),
    dict(card="h200", model="deepseek-v2-lite", prompt_tokens=4000, gen_tokens=200, weight_dtype="fp8", kv_dtype="fp8",
         kv_cache="static", calibrated=True, logits="last", mix="8x32,8x64", batch=8, stream_count=24,
         return_policy="whole-batch", tp=4, routing_skew=0.5),
    dict(card="h100-sxm", model="gpt-oss-20b", prompt_tokens=6000, gen_tokens=300, weight_dtype="int4", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x64", batch=8, stream_count=24,
         return_policy="whole-batch", tp=2),
    # the continuous server's KV pool binds (preemptions), and refuses a 30k-token prompt
    dict(card="rtx3060", model="qwen2.5-1.5b", prompt_tokens=1000, gen_tokens=128, weight_dtype="bf16", kv_dtype="bf16",
         kv_cache="auto", calibrated=True, logits="last", mix="8x64,8x1024", batch=32, stream_count=96,
         return_policy="whole-batch", gpu_memory_utilization=0.35),
    dict(card="h100-sxm", model="qwen2.5-72b", prompt_tokens=30000, gen_tokens=100, weight_dtype="fp8", kv_dtype="fp8",
         kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x256", batch=16, stream_count=64,
         return_policy="whole-batch"),
]


#: A calibration with every term of the step model away from its default, for the H200.
SYNTHETIC_CALIBRATION = dict(
    card="h200", engine="graph", step_overhead_s=0.002, layer_overhead_s=2e-5, bandwidth_efficiency=0.8,
    compute_efficiency=0.6, attention_efficiency=0.03, kv_traffic_factor=1.7, activation_traffic_coeff=3.0,
    roofline_exponent=6.0, overhead_exponent=2.5, prefill_overhead_s=0.01, prefill_compute_efficiency=0.7,
    prefill_activation_traffic_coeff=5.0, activation_coeff=2.5, workspace_bytes=1e8,
    measured_bandwidth_bytes_per_s=4.2e12, measured_peak_flop_per_s=8e14,
)
#: (settings, the bounds its PARITY_BATCHES rows report)
SYNTHETIC_SETTINGS = [
    # a small model: overhead-bound decode turning memory-bound, TTFT from overhead to compute
    (dict(card="h200", model="qwen2.5-0.5b", prompt_tokens=200, gen_tokens=256, weight_dtype="bf16", kv_dtype="bf16",
          kv_cache="auto", calibrated=True, logits="last", mix="8x32,8x256", batch=16, stream_count=64, return_policy="whole-batch"),
     {"decode": {"overhead", "memory"}, "ttft": {"overhead", "compute"}}),
    # 70B: memory-bound decode turning compute-bound past the crossing
    (dict(card="h200", model="llama-3.1-70b", prompt_tokens=1000, gen_tokens=256, weight_dtype="fp8", kv_dtype="fp8",
          kv_cache="static", calibrated=True, logits="all", mix="30x20,2x300", batch=32, stream_count=70, return_policy="early-return"),
     {"decode": {"memory", "compute"}, "ttft": {"compute"}}),
]


@pytest.fixture(scope="module")
def synthetic_page(tmp_path_factory):
    """A page whose H200 carries SYNTHETIC_CALIBRATION (as ``--calibration FILE`` would)."""
    from roofline.calibration import Calibration

    path = tmp_path_factory.mktemp("chart") / "synthetic.html"
    written = write_chart(path, cards=("h200",), models=("qwen2.5-0.5b",), calibration=Calibration(**SYNTHETIC_CALIBRATION))
    with Browser() as browser:
        browser.open(path.resolve().as_uri())
        browser.wait_for("window.rooflineReady === true", timeout_s=60)
        yield {"browser": browser, "path": path, "data": written["data"]}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The default page (plus the lesson's measurements and a comparison card), opened in selftest mode."""
    path = tmp_path_factory.mktemp("chart") / "roofline.html"
    written = write_chart(path, cards=("rtx3060", "h200"), models=("qwen2.5-1.5b",), measurements=[LESSON_CSV])
    with Browser() as browser:
        browser.open(path.resolve().as_uri() + "?selftest=1")
        browser.wait_for("window.rooflineSelfTestResult", timeout_s=120)
        result = browser.evaluate("window.rooflineSelfTestResult")
        yield {"browser": browser, "path": path, "data": written["data"], "bytes": written["bytes"], "selftest": result}


# ---- the page ----
def test_default_page_is_self_contained_and_under_10_mb(page):
    html = page["path"].read_text(encoding="utf-8")
    assert page["bytes"] < 10e6
    assert "<script src" not in html.lower()  # plotly.js is inline, not from a CDN
    urls = page["browser"].requested_urls()
    assert urls and all(u.startswith("file://") for u in urls), urls
    assert page["browser"].console_errors() == []


def test_every_plot_draws_traces(page):
    plots = page["selftest"]["plots"]
    assert sorted(plots) == sorted(PLOT_IDS)
    for plot_id, stats in plots.items():
        assert stats["traces"] >= 2, plot_id
        assert stats["svg_traces"] >= 1 and stats["drawn_paths"] >= 1, (plot_id, stats)
        assert stats["points"] >= 2 and stats["height"] > 200, (plot_id, stats)
    # the lesson's measurements are overlaid on the throughput, roofline, TTFT and memory charts
    b = page["browser"]
    names = b.evaluate("document.getElementById('plot-roofline').data.map(t => t.name)")
    assert any(n.startswith("measured") for n in names)
    measured = b.evaluate("document.getElementById('plot-throughput').data.find(t => t.name === 'measured throughput').x")
    assert measured == [1, 2, 4, 8, 16, 32, 64, 128]


def test_changing_the_card_changes_the_data(page):
    sw = page["selftest"]["card_switch"]
    assert (sw["from"], sw["to"]) == ("rtx3060", "h200")
    assert sw["changed"]
    assert sw["before"]["memory_capacity"] == pytest.approx(12.0)
    assert sw["after"]["memory_capacity"] == pytest.approx(load_card("h200").memory_bytes / GiB)
    # batch 1's throughput on each card is Python's (each card's shipped calibration, if any)
    for card, fp in ((sw["from"], sw["before"]), (sw["to"], sw["after"])):
        py = predict(card, "qwen2.5-1.5b", batches=[1]).columns["throughput_tok_s"][0]
        assert rel_err(fp["throughput"][0], py) < 1e-6, card
    for plot_id, stats in sw["plots_after"].items():
        assert stats["traces"] >= 2 and stats["drawn_paths"] >= 1, plot_id
    assert page["selftest"]["restored"] == page["selftest"]["card_switch"]["before"]


def test_redraw_is_fast(page):
    """Every card and every model switched through its control: compute + all six plots redrawn.
    The 200 ms target is measured by benchmarks/bench_chart.py; here a loose regression bound."""
    times = page["selftest"]["redraw_ms"]
    assert times["count"] == len(page["data"]["cards"]) + len(page["data"]["models"])
    assert times["median"] < 1000


def test_bad_control_value_shows_an_error_and_keeps_the_plots(page):
    b = page["browser"]
    before = b.evaluate("document.getElementById('plot-ttft').data[0].y.slice(0, 3)")
    b.evaluate("(() => { const el = document.getElementById('ctl-prompt'); el.value = '0'; el.dispatchEvent(new Event('change')); })()")
    assert "prompt length must be a whole number" in b.evaluate("document.getElementById('status').textContent")
    assert b.evaluate("document.getElementById('plot-ttft').data[0].y.slice(0, 3)") == before
    b.evaluate("(() => { const el = document.getElementById('ctl-prompt'); el.value = '128'; el.dispatchEvent(new Event('change')); return window.rooflineLastDraw; })()")
    assert b.evaluate("document.getElementById('status').textContent") == ""


# ---- the page's numbers are Python's ----
def settings_id(s):
    return (f"{s['card']}-{s['model']}-{s['kv_dtype']}-{s['kv_cache']}-tp{s.get('tp', 1)}-skew{s.get('routing_skew', 0)}"
            f"-mem{s.get('gpu_memory_utilization', 0.9)}")


@pytest.mark.parametrize("settings", PARITY_SETTINGS, ids=settings_id)
def test_page_formulas_equal_python(page, settings):
    assert_page_equals_python(page, settings)


@pytest.mark.parametrize("settings, bounds", SYNTHETIC_SETTINGS, ids=[settings_id(s) for s, _ in SYNTHETIC_SETTINGS])
def test_page_formulas_equal_python_on_every_term(synthetic_page, settings, bounds):
    """A calibration with every term away from its default (slow attention, activation traffic
    in decode and prefill, blended p and q, measured ceilings): the families' rooflines, the
    memory / compute split and the bound each row reports are Python's."""
    rows = assert_page_equals_python(synthetic_page, settings)
    assert {r["bound"] for r in rows} == bounds["decode"] and {r["ttft_bound"] for r in rows} == bounds["ttft"]


def assert_page_equals_python(page, settings):
    """The page's own RooflineModel (in the browser) gives the package's numbers (tests/js_parity.py)."""
    import json

    js = page["browser"].evaluate(f"window.rooflineCompute({json.dumps({**settings, 'batches': PARITY_BATCHES, 'ttft_max_s': 0.5})})")
    assert "error" not in js, js
    bad = differences(js, python_result(page["data"], {**settings, "batches": PARITY_BATCHES, "ttft_max_s": 0.5}), 1e-9)
    assert not bad, "; ".join(bad[:8])
    return js["rows"]


def test_tp_and_skew_controls_redraw_with_python_numbers(page):
    """The tensor-parallel and routing-skew controls recompute in the page: batch 1's TPOT after
    each change is Python's, and the skew control shows for a mixture of experts only."""
    b = page["browser"]

    def set_control(setting, value, ok=True):
        b.evaluate(f"(() => {{ const el = document.querySelector(\"[data-setting='{setting}']\"); el.value = '{value}';"
                   " el.dispatchEvent(new Event('change')); return window.rooflineLastDraw; })()")
        assert (b.evaluate("document.getElementById('status').textContent") == "") == ok

    try:
        set_control("card", "h200")
        set_control("model", "qwen3-30b-a3b")
        assert b.evaluate("document.getElementById('ctl-skew-label').style.display") == ""
        set_control("routing_skew", "1.5")
        set_control("tp", "2")
        tpot = b.evaluate("document.getElementById('plot-throughput').data[3].y[0]")  # the powers-of-two TPOT markers, ms
        py = predict("h200", "qwen3-30b-a3b", batches=[1], tp=2, routing_skew=1.5).columns["tpot_s"][0]
        assert rel_err(tpot / 1e3, py) < 1e-9
        summary = b.evaluate("document.getElementById('summary').textContent")
        assert "x 2 (tensor parallel)" in summary and "routing skew 1.5" in summary
        assert "Expected error: TPOT \u00b1" in summary and "Extrapolating" in summary
        set_control("model", "qwen2.5-1.5b")
        assert b.evaluate("document.getElementById('ctl-skew-label').style.display") == "none"
        set_control("card", "apple-m2-max-38c", ok=False)  # no interconnect on record: the page says so
        assert "has no interconnect on record" in b.evaluate("document.getElementById('status').textContent")
    finally:
        for setting, value in (("tp", "1"), ("routing_skew", "0"), ("card", "rtx3060"), ("model", "qwen2.5-1.5b")):
            b.evaluate(f"(() => {{ const el = document.querySelector(\"[data-setting='{setting}']\"); el.value = '{value}';"
                       " el.dispatchEvent(new Event('change')); return window.rooflineLastDraw; })()")


def test_the_serving_note_shows_the_pool_and_a_refusal(page):
    """Under the serving chart, as text: the continuous server's KV pool, how many sequences ran
    at once and the preemptions (Python's numbers); when the server cannot serve, Python's reason
    instead of a line, the static server and the other charts still drawn."""
    from roofline import api

    b = page["browser"]

    def set_control(setting, value):
        b.evaluate(f"(() => {{ const el = document.querySelector(\"[data-setting='{setting}']\"); el.value = '{value}';"
                   " el.dispatchEvent(new Event('change')); return window.rooflineLastDraw; })()")
        assert b.evaluate("document.getElementById('status').textContent") == ""

    def note():
        # one text node, nothing parsed as markup
        assert b.evaluate("Array.from(document.getElementById('serving-note').childNodes).map(n => n.nodeType)") == [3]
        return b.evaluate("document.getElementById('serving-note').textContent")

    sim = api.simulate("rtx3060", "qwen2.5-1.5b", batch=16, mix="8x32,8x256", count=64, prompt_tokens=128)["continuous"]
    text = note()
    assert f"a KV pool of {sim['kv_capacity_tokens']:,} tokens" in text and "0.9 x 12.00 GiB" in text
    assert "At most 16 of 16 slots ran at once; no preemption" in text
    try:
        for setting, value in (("prompt_tokens", 1000), ("mix", "8x64,8x1024"), ("batch", 32), ("stream_count", 96),
                               ("gpu_memory_utilization", 0.35)):
            set_control(setting, value)
        sim = api.simulate("rtx3060", "qwen2.5-1.5b", batch=32, mix="8x64,8x1024", count=96, prompt_tokens=1000,
                           gpu_memory_utilization=0.35)["continuous"]
        assert sim["preemptions"] > 0
        text = note()
        assert (f"a KV pool of {sim['kv_capacity_tokens']:,} tokens" in text
                and f"At most {sim['max_running']} of 32 slots ran at once; {sim['preemptions']} preemptions "
                    f"({sim['preempted_requests']} requests recomputed)" in text), text
        names = b.evaluate("document.getElementById('plot-serving').data.map(t => t.name)")
        assert f"{sim['preemptions']} preemptions" in names[1]
        set_control("model", "llama-3.1-8b")  # 15 GiB of weights on a 12 GiB card: no pool
        text = note()
        assert text.startswith("The continuous server cannot serve this stream: no room for a KV cache: 0.35 x 12.0 GiB"), text
        traces = b.evaluate("document.getElementById('plot-serving').data.map(t => [t.name, t.x.length])")
        assert traces[0][1] > 2 and traces[1] == ["continuous: cannot serve this stream (see below)", 1]
        assert b.evaluate("document.getElementById('plot-ttft').data[0].y.length") > 10
    finally:
        for setting, value in (("model", "qwen2.5-1.5b"), ("prompt_tokens", 128), ("mix", "8x32,8x256"), ("batch", 16),
                               ("stream_count", 64), ("gpu_memory_utilization", 0.9)):
            set_control(setting, value)
    assert "no preemption" in note()


def test_lesson_numbers_on_the_page(page):
    """The page shows the lesson's scenario as the CLI predicts it: bend between 64 and 128
    (static-batching lesson, section 3), 43.8% waste for 8x32 + 8x256 (section 5)."""
    r = page["browser"].evaluate("window.rooflineCompute({})")
    assert (r["bend"]["region_low_batch"], r["bend"]["region_high_batch"]) == (64, 128)
    assert r["waste"]["waste_fraction"] == pytest.approx(0.4375)
    summary = page["browser"].evaluate("document.getElementById('summary').textContent")
    assert "decode bends between batch 64 and 128" in summary
    # the lesson's calibration held nothing out: its in-sample error, and the context it saw (256)
    assert "from the calibration's in-sample error" in summary
    assert "Extrapolating (the expected error is then a lower bound): batches above 128 beyond the calibration's." in summary


# ---- images ----
def test_png_decoder_agrees_with_the_browser(page):
    """The stdlib PNG decoder used below reads a chromium screenshot as chromium itself does."""
    import base64

    b = page["browser"]
    png = b.screenshot(clip={"x": 0, "y": 0, "width": 300, "height": 200})
    ours = png_decode(png)
    theirs = b.evaluate(
        "new Promise(res => { const img = new Image(); img.onload = () => { const c = document.createElement('canvas');"
        " c.width = img.width; c.height = img.height; const g = c.getContext('2d'); g.drawImage(img, 0, 0);"
        " res(Array.from(g.getImageData(0, 0, img.width, img.height).data)); };"
        f" img.src = 'data:image/png;base64,{base64.b64encode(png).decode()}'; }})"
    )
    theirs = np.array(theirs, dtype=np.uint8).reshape(200, 300, 4)
    assert ours.shape[:2] == (200, 300)
    assert np.array_equal(ours[..., :3], theirs[..., :3])


def test_screenshot_is_not_blank(page):
    stats = png_colour_stats(page["browser"].screenshot())
    assert stats["distinct_colours"] > 50 and stats["ink_fraction"] > 0.05, stats


def test_png_export_writes_one_small_image_per_chart(tmp_path):
    from roofline.chart_page import export_pngs

    html = tmp_path / "page.html"
    write_chart(html, measurements=[LESSON_CSV])
    pngs = export_pngs(html, tmp_path / "img")
    assert [p.name for p in pngs] == [f"{i.removeprefix('plot-')}.png" for i in PLOT_IDS]
    for p in pngs:
        data = p.read_bytes()
        assert len(data) < 300_000, p
        stats = png_colour_stats(data)
        assert (stats["width"], stats["height"]) == (900, 430), p
        assert stats["distinct_colours"] > 20 and stats["ink_fraction"] > 0.02, (p.name, stats)


def test_cli_writes_the_acceptance_page(tmp_path):
    from click.testing import CliRunner

    from cli import main

    out = tmp_path / "x.html"
    r = CliRunner().invoke(main, ["chart", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"wrote {out} (")
    with Browser() as b:
        b.open(out.resolve().as_uri())
        b.wait_for("window.rooflineReady === true", timeout_s=60)
        drawn = b.evaluate(
            "Array.from(document.querySelectorAll('.plot')).filter(d => d.data && d.data.length"
            " && d.querySelectorAll('g.trace').length).length"
        )
        assert drawn >= 4
        assert all(u.startswith("file://") for u in b.requested_urls())
    assert 4.5e6 < out.stat().st_size < 10e6  # plotly.js (4.6 MB) and the data, under the 10 MB target


# ---- names from files are text, never markup ----
HOSTILE = """<img src=x onerror="document.title='pwned'">"""


def test_hostile_card_and_model_names_run_no_script(tmp_path):
    """A card profile and a model folder named with markup: the page shows the names as text
    (controls, summary, chart titles and legends) and no script runs; the same text inserted as
    markup does run in this page (so the check can fail)."""
    import json
    import shutil

    from roofline.hardware import profiles_dir
    from roofline.model_spec import CATALOG_DIR

    profile = json.loads((profiles_dir() / "rtx3060.json").read_text(encoding="utf-8"))
    profile.update(id="evil" + HOSTILE, name=HOSTILE, aliases=[])
    card_path = tmp_path / "evil-card.json"
    card_path.write_text(json.dumps(profile), encoding="utf-8")
    folder = tmp_path / HOSTILE
    folder.mkdir()
    shutil.copy(CATALOG_DIR / "qwen2.5-0.5b" / "config.json", folder / "config.json")
    page_path = tmp_path / "hostile.html"
    written = write_chart(page_path, cards=(str(card_path), "h200"), models=(str(folder), "qwen2.5-0.5b"))
    model_name = written["data"]["initial"]["model"]
    assert model_name.endswith(HOSTILE) and written["data"]["initial"]["card"] == "evil" + HOSTILE
    with Browser() as b:
        b.open(page_path.resolve().as_uri())
        b.wait_for("window.rooflineReady === true", timeout_s=60)
        title = b.evaluate("document.title")
        assert title == f"roofline: {model_name} on evil{HOSTILE}"  # the text, shown as text
        assert b.evaluate("document.querySelectorAll('img').length") == 0
        assert b.evaluate("document.querySelectorAll('[onerror]').length") == 0
        assert b.console_errors() == []
        assert b.evaluate("document.getElementById('status').textContent") == ""
        summary = b.evaluate("document.getElementById('summary').textContent")
        assert HOSTILE in summary and model_name in summary
        option = b.evaluate("document.getElementById('ctl-card').selectedOptions[0].textContent")
        assert option.startswith("evil" + HOSTILE)
        titles = b.evaluate("Array.from(document.querySelectorAll('.gtitle')).map(t => t.textContent)")
        assert any(model_name in t for t in titles), titles
        legend = b.evaluate("Array.from(document.querySelectorAll('#plot-throughput .legendtext')).map(t => t.textContent)")
        assert any(HOSTILE in t for t in legend), legend  # the comparison lines name the other pairs
        assert b.evaluate("document.title") == title and b.evaluate("document.querySelectorAll('img').length") == 0
        # the control: the same name inserted as markup runs its script here
        b.evaluate(f"document.body.insertAdjacentHTML('beforeend', {json.dumps(HOSTILE)})")
        b.wait_for("document.title === 'pwned'", timeout_s=10)
