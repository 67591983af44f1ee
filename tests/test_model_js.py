"""The chart page's JavaScript port of the model, run under node, equals the Python package.

One port (roofline/chart_assets/model.js) of the one step model: every predict column, the bend,
choose, waste and both servers, on many scenarios (cards, models, dtypes, cache kinds, logits,
shipped, pure and synthetic calibrations). Needs node; in CI (ROOFLINE_REQUIRE_TOOLS=1, set by
.ci/run) a missing node is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from js_parity import PARITY_BATCHES, differences, python_result
from roofline.calibration import Calibration
from roofline.chart_data import page_data

ROOT = Path(__file__).resolve().parent.parent
MODEL_JS = ROOT / "roofline" / "chart_assets" / "model.js"
RUNNER = ROOT / "tests" / "js" / "run_model.js"
NODE = shutil.which("node")
REQUIRED = os.environ.get("ROOFLINE_REQUIRE_TOOLS") == "1"
REL = 1e-9

if NODE is None and REQUIRED:
    pytest.fail("node is not installed but ROOFLINE_REQUIRE_TOOLS=1 (CI): install nodejs", pytrace=False)
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs)")

#: A calibration with every term of the step model away from its default.
SYNTHETIC = dict(
    card="h200", engine="synthetic", step_overhead_s=0.002, layer_overhead_s=2e-5, bandwidth_efficiency=0.8,
    compute_efficiency=0.6, attention_efficiency=0.03, kv_traffic_factor=1.7, activation_traffic_coeff=3.0,
    roofline_exponent=6.0, overhead_exponent=2.5, prefill_overhead_s=0.01, prefill_compute_efficiency=0.7,
    prefill_activation_traffic_coeff=5.0, activation_coeff=2.5, workspace_bytes=1e8,
    measured_bandwidth_bytes_per_s=4.2e12, measured_peak_flop_per_s=8e14,
)


def setting(card, model, prompt=128, gen=128, w="bf16", kv="bf16", cache="auto", calibrated=True, logits="last",
            mix="8x32,8x256", batch=16, count=64, policy="whole-batch"):
    return dict(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, weight_dtype=w, kv_dtype=kv,
                kv_cache=cache, calibrated=calibrated, logits=logits, mix=mix, batch=batch, stream_count=count,
                return_policy=policy, batches=PARITY_BATCHES, ttft_max_s=0.5)


#: (page options, settings on that page)
PAGES = {
    "shipped-hf-eager": (dict(cards=("rtx3060", "h200")), [
        setting("rtx3060", "qwen2.5-1.5b"),  # the lesson
        setting("rtx3060", "qwen2.5-1.5b", calibrated=False),
        setting("h200", "qwen2.5-7b", 1000, 300, kv="fp8", mix="30x20,2x1000", batch=32, count=100,
                policy="early-return"),
        setting("rtx3060", "llama-3.2-1b", 512, 64, w="int8", kv="int4", cache="static", logits="all",
                mix="4x10,3x50,1x400", batch=5, count=23),
        setting("rtx3060", "qwen2.5-0.5b", 32, 1, w="fp16", kv="fp16", cache="dynamic", calibrated=False, batch=8,
                count=40),
        setting("mi300x", "llama-3.1-70b", 2048, 512, w="fp8", mix="16x64,16x512", count=96),
        setting("l4", "mistral-7b-v0.3", 4000, 1000, w="int4", kv="int8", cache="static", batch=4, count=12),
        setting("a100-80gb", "qwen2.5-32b", 300, 50, kv="fp8", logits="all", policy="early-return"),
        setting("rtx4090", "llama-3.2-3b", 64, 2000, cache="dynamic", mix="2x2000,6x10", batch=3, count=30),
        setting("h100-sxm", "qwen2.5-72b", 30000, 100, w="fp8", kv="fp8"),
        setting("rtx3090", "qwen2.5-3b", 1, 8, mix="1x1", batch=1, count=3),
        setting("l40s", "qwen2.5-14b", 8000, 16, w="int4", cache="static", mix="3x7,2x9", batch=2, count=11,
                policy="early-return"),
    ]),
    "shipped-graph": (dict(cards=("h200",), engine="graph"), [
        setting("h200", "qwen2.5-0.5b", 200, 256),
        setting("h200", "llama-3.1-8b", 2048, 64, kv="fp8", cache="dynamic"),
        setting("h200", "qwen2.5-32b", 128, 128, w="int8", logits="all", mix="64x16,8x512", batch=64, count=200),
    ]),
    "synthetic": (dict(cards=("h200",), calibration=Calibration(**SYNTHETIC)), [
        setting("h200", "qwen2.5-0.5b", 200, 256),
        setting("h200", "llama-3.1-70b", 1000, 256, w="fp8", kv="fp8", cache="static", logits="all",
                mix="30x20,2x300", batch=32, count=70, policy="early-return"),
        setting("h200", "qwen2.5-7b", 16, 4096, cache="dynamic", mix="5x4096,5x3", batch=4, count=20),
    ]),
}


def run_node(data: dict, settings: list[dict], tmp_path: Path) -> list[dict]:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"data": data, "settings": settings}, allow_nan=False), encoding="utf-8")
    done = subprocess.run([NODE, str(RUNNER), str(MODEL_JS), str(job)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_port_equals_python(page, tmp_path):
    options, settings = PAGES[page]
    data = page_data(**options)
    results = run_node(data, settings, tmp_path)
    bounds = set()
    for s, js in zip(settings, results):
        py = python_result(data, s)
        bad = differences(js, py, REL)
        assert not bad, f"{page} {s['card']} {s['model']}: " + "; ".join(bad[:8])
        bounds |= {r["bound"] for r in py["rows"]} | {r["ttft_bound"] for r in py["rows"]}
    if page == "synthetic":  # every branch of the bound attribution was exercised
        assert bounds == {"overhead", "memory", "compute"}


def test_a_drifted_js_formula_is_caught(tmp_path):
    """Break one term of the port (the prefill's per-token matmul cost) and the comparison fails."""
    source = MODEL_JS.read_text(encoding="utf-8")
    broken = source.replace("model.body_linear_flop_per_token * sPerPrefillFlop,",
                            "model.body_linear_flop_per_token * sPerPrefillFlop * 1.001,")
    assert broken != source
    drifted = tmp_path / "model.js"
    drifted.write_text(broken, encoding="utf-8")
    options, settings = PAGES["shipped-hf-eager"]
    data = page_data(**options)
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"data": data, "settings": settings[:1]}), encoding="utf-8")
    done = subprocess.run([NODE, str(RUNNER), str(drifted), str(job)], capture_output=True, text=True, timeout=60)
    js = json.loads(done.stdout)[0]
    bad = differences(js, python_result(data, settings[0]), REL)
    assert any("ttft_s" in b for b in bad), bad
