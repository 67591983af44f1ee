"""The chart page's JavaScript port of the model, run under node, equals the Python package.

One port (roofline/chart_assets/model.js, serving.js) of the one step model: every predict
column, the expected error and the extrapolation reasons, the bend (with a mixture of experts'
first bend), choose, waste and both servers, on many scenarios: cards, models (dense, long
context, windowed, sinks, MLA, mixtures of experts with uniform and skewed routing), dtypes,
cache kinds, logits, tensor parallelism over the card's link or a calibrated one, shipped, pure
and synthetic calibrations. Needs node; in CI (ROOFLINE_REQUIRE_TOOLS=1, set by .ci/run) a
missing node is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from js_parity import PARITY_BATCHES, differences, python_result, python_scenario
from roofline.batching import parse_mix
from roofline.calibration import Calibration, load_calibration
from roofline.chart_data import page_data
from roofline.errors import RooflineError

ROOT = Path(__file__).resolve().parent.parent
MODEL_JS = ROOT / "roofline" / "chart_assets" / "model.js"
SERVING_JS = ROOT / "roofline" / "chart_assets" / "serving.js"
RUNNER = ROOT / "tests" / "js" / "run_model.js"
SERVING_RUNNER = ROOT / "tests" / "js" / "run_serving.js"
NODE = shutil.which("node")
REQUIRED = os.environ.get("ROOFLINE_REQUIRE_TOOLS") == "1"
REL = 1e-9

if NODE is None and REQUIRED:
    pytest.fail("node is not installed but ROOFLINE_REQUIRE_TOOLS=1 (CI): install nodejs", pytrace=False)
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs)")

#: A calibration with every term of the step model away from its default (attention lane and
#: score traffic, sinks, MLA passes, MoE terms, a chunked prefill, a calibrated link), no fit report.
SYNTHETIC = dict(
    card="h200", engine="graph", step_overhead_s=0.002, layer_overhead_s=2e-5, bandwidth_efficiency=0.8,
    compute_efficiency=0.6, attention_efficiency=0.03, kv_traffic_factor=1.7, activation_traffic_coeff=3.0,
    roofline_exponent=6.0, overhead_exponent=2.5, prefill_overhead_s=0.01, prefill_compute_efficiency=0.7,
    prefill_activation_traffic_coeff=5.0, activation_coeff=2.5, workspace_bytes=1e8,
    measured_bandwidth_bytes_per_s=4.2e12, measured_peak_flop_per_s=8e14,
    attention_score_bytes=6.0, attention_lane_s_per_token=4e-9, batch_layer_overhead_s=3e-6,
    attention_sequence_overhead_s=2e-7, moe_layer_overhead_s=5e-5, expert_traffic_factor=1.3,
    expert_gemm_min_rows=64.0, expert_row_traffic_coeff=20.0, allreduce_latency_s=1.2e-5, allgather_latency_s=2e-5,
    allreduce_bandwidth_bytes_per_s=2.5e11, mla_latent_passes=1.9, sink_score_bytes=8.0, prefill_chunk_tokens=8192,
    prefill_score_bytes=12.0,
    # a measured prefill-attention rate by head width (roofline.step.head_dim_rate: interpolated in
    # log head width between 64 and 128, clamped beyond)
    prefill_attention_flop_per_s={"64": 3.0e14, "128": 5.0e14},
    # the masked prefill path's rate by computed head width (windows past the prompt, sinks)
    masked_prefill_attention_flop_per_s={"64": 2.0e14, "72": 1.1e14, "128": 3.0e14, "256": 2.4e14},
    # the prefill-kernels probe's bytes per element by kind, at the ceiling; no clamped activation
    # (gpt-oss's is then priced as silu's, the fallback both sides take)
    expert_prefill_flop_per_s=5.5e14,  # a prompt's routed-expert matmuls at the grouped GEMMs' rate
    prefill_elementwise_bytes_per_element={"hidden": 25.0, "gated_intermediate": 25.6, "plain_intermediate": 5.7,
                                           "query": 58.0, "key_value": 84.0, "qk_norm": 29.0},
    # a decode layer's features' own kernels: q/k norms (qwen3-30b-a3b, gemma-3-4b), MLA and shared
    # experts (deepseek-v2-lite), gpt-oss's MoE layer
    layer_feature_overhead_s={"qk_norm": 9e-6, "mla": 1.5e-5, "shared_experts": 1.1e-5, "biased_experts": 4e-6},
    # cache lengths whose decode attention runs a slower kernel: deepseek-v2-lite at 3,000 + 300 and
    # qwen3-30b-a3b at 9,000 + 64 decode inside them (gemma-3-4b's windowed layers' ring of 1,024 too)
    # (the second for 64-128-wide heads only: qwen2.5-7b's 128; gpt-oss-20b's 64; MLA never)
    attention_context_factors=[[1000.0, 1100.0, 1.3, 64.0, 256.0, 1.0, 8.0], [3000.0, 3400.0, 1.2, 64.0, 128.0, 1.0, 16.0],
                               [9000.0, 9100.0, 1.15, 100.0, 256.0, 1.0, 8.0]],
    # score elements of rows past 2,048 positions at 1.6 x their cost, past 9,216 at 0.7: gpt-oss-20b's full
    # layers at 20,000 + 300 (not its windowed layers' ring of 128), qwen3-30b-a3b at 9,000 + 64 (the
    # middle step), deepseek-v2-lite's MLA never
    attention_score_row_factors=[[2048.0, 1.6], [9216.0, 0.7]],
    # the softmax's warp kernel's walk along rows of 140-2,048 positions: qwen2.5-0.5b at 200 + 256 and
    # llama-3.1-70b at 1,000 + 256 (their small batches), gemma-3-4b's windowed layers' ring of 1,024 (not
    # its full layers at 5,100), gpt-oss-20b's ring of 128 (below the start) and full layers (past the
    # warp's rows) never, deepseek-v2-lite's MLA latent scores at 3,300 positions not
    attention_softmax_warp_s_per_token=3e-9, attention_softmax_warp_after_tokens=140.0,
    # the matmul rate against time under load: the prefills' fitted matmuls at its average (a dip, a
    # flat stretch and a last value held after it; the routed experts' and the attention's rates held)
    matmul_load_curve=[[0.0, 1.0], [0.02, 0.97], [0.1, 0.85], [0.3, 0.88], [2.0, 0.8]],
    # the decode attention's factor by batched matrices and length: qwen2.5-7b's 7 query heads a KV head
    # take the 8's entry (the 1's is beyond 2x), gemma-3-4b's full layers and ring of 1,024 the 256-wide
    # one (the mixtures of experts, gpt-oss-20b's 64-wide and qwen3-30b-a3b's, never) (its lengths cross the windows at
    # 1,000 and 1,100 and the row factors' 2,048: the same side's value); MLA never
    attention_kernel_table=[
        {"head_dim": 128, "group": 8, "matrices": [64, 1024, 8192], "contexts": [256, 1024, 2112, 9000, 9300],
         "factors": [[1.1, 0.9, 1.3, 1.0, 1.05], [1.5, 1.2, 0.8, 1.4, 0.9], [0.9, 1.0, 1.1, 1.3, 1.5]]},
        {"head_dim": 128, "group": 1, "matrices": [64, 128], "contexts": [256, 512], "factors": [[3.0, 3.0], [3.0, 3.0]]},
        {"head_dim": 64, "group": 8, "matrices": [16, 512], "contexts": [64, 256, 16384, 32768],
         "factors": [[1.2, 0.8, 1.1, 1.3], [0.7, 1.6, 1.0, 1.2]]},
        {"head_dim": 256, "group": 2, "matrices": [8, 64, 2048], "contexts": [512, 1056, 1200, 3000, 8000],
         "factors": [[1.0, 1.4, 0.9, 1.1, 1.2], [1.3, 0.8, 1.5, 1.0, 0.9], [1.1, 1.2, 1.0, 1.3, 0.95]]},
    ],
)
#: A calibration fitted on another card, with a fit report of every kind confidence reads: the
#: coverage (MLA among its attention kinds, a MoE size range, a TP link), held-out models and
#: contexts, and a dense validation (joined to the held-out errors, not replacing them).
# a calibration with a full fit report and a coverage the settings below leave in every way a
# calibration of the same card can be left (one of another card is refused: issue 15)
FOREIGN = dict(
    card="h200", engine="graph", step_overhead_s=1e-4, layer_overhead_s=3e-5, bandwidth_efficiency=0.85,
    compute_efficiency=0.7, roofline_exponent=3.0, overhead_exponent=1.5, prefill_overhead_s=0.003,
    fit_report={
        "coverage": {"context_tokens": [256, 4096], "prompt_tokens": [128, 4000], "batch": [1, 256],
                     "params": [1_000_000_000, 9_000_000_000], "weight_dtypes": ["bf16", "fp8"], "kv_dtypes": ["bf16"],
                     "attention": ["gqa", "mla"], "windows": False, "sinks": True, "moe": True, "tp": [1],
                     "link_tp": [2, 4], "moe_params": [15_000_000_000, 16_000_000_000],
                     "overhead_share": [0.05, 0.3], "moe_overhead_share": [0.1, 0.9]},
        "leave_one_model_out": {"a": {"tpot_mape_fraction": 0.05, "ttft_mape_fraction": 0.2,
                                      "ttft_mape_fraction_batch_64_up": 0.1, "peak_mem_mape_fraction": 0.01,
                                      "points": 9},
                                "b": {"tpot_mape_fraction": 0.07, "ttft_mape_fraction": None,
                                      "ttft_mape_fraction_batch_64_up": None, "peak_mem_mape_fraction": 0.02}},
        # contexts 256 and 1024: a question at 512 is as near to both (in log), and takes the first
        "leave_one_context_out": {"128/128": {"tpot_mape_fraction": 0.04, "ttft_mape_fraction": 0.3},
                                  "1000/24": {"tpot_mape_fraction": 0.09, "ttft_mape_fraction": 0.1,
                                              "ttft_mape_fraction_batch_64_up": 0.05}},
        "validation": {"dense": {"what": "dense", "models": ["x-7b", "y-3b"], "tpot_mape_fraction": 0.11,
                                 "peak_mem_mape_fraction": 0.005, "files": ["f.csv"],
                                 # the error by overhead share: a thin bin (unused) and one above the rest
                                 "tpot_mape_by_overhead_share": [
                                     {"from": 0.0, "to": 0.4, "tpot_mape_fraction": 0.03, "points": 50},
                                     {"from": 0.4, "to": 0.5, "tpot_mape_fraction": 0.5, "points": 2},
                                     {"from": 0.5, "to": 1.0, "tpot_mape_fraction": 0.25, "points": 30}]}},
        "in_sample": {"tpot_mape_fraction": 0.01},
    },
)


def setting(card, model, prompt=128, gen=128, w="bf16", kv="bf16", cache="auto", calibrated=True, logits="last",
            mix="8x32,8x256", batch=16, count=64, policy="whole-batch", tp=1, skew=0.0, serving=True,
            batches=PARITY_BATCHES, mem=0.9):
    return dict(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, weight_dtype=w, kv_dtype=kv,
                kv_cache=cache, calibrated=calibrated, logits=logits, mix=mix, batch=batch, stream_count=count,
                return_policy=policy, batches=batches, ttft_max_s=0.5, tp=tp, routing_skew=skew, serving=serving,
                gpu_memory_utilization=mem)


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
        # the KV pool (2,352 tokens at 91% of memory) cannot hold one 30k-token prompt: the continuous server refused
        setting("h100-sxm", "qwen2.5-72b", 30000, 100, w="fp8", kv="fp8", mem=0.91),
        setting("rtx3090", "qwen2.5-3b", 1, 8, mix="1x1", batch=1, count=3),
        setting("l40s", "qwen2.5-14b", 8000, 16, w="int4", cache="static", mix="3x7,2x9", batch=2, count=11,
                policy="early-return"),
        # dense at a long context, beyond the calibration's (an extrapolation reason)
        setting("h200", "llama-3.1-8b", 100000, 64, serving=False),
        # a mixture of experts on a calibration that saw dense models only; at TP 2 over the card's link
        setting("h200", "qwen3-30b-a3b", 512, 128, mix="8x16,8x64", count=32),
        setting("h200", "qwen2.5-14b", 2048, 128, tp=2, mix="8x16,8x64", count=32),
        # the continuous server's KV pool binds: 37 preemptions of 26 requests, a pool of 30,960 tokens
        setting("rtx3060", "qwen2.5-1.5b", 1000, 128, mix="8x64,8x1024", batch=32, count=96, mem=0.35),
        # some requests rejected (prompt + generation beyond the 7,568-token pool at 92% of memory), the rest served
        setting("h100-sxm", "qwen2.5-72b", 4000, 100, w="fp8", kv="fp8", mix="6x32,2x6000,4x300", batch=8, count=36,
                mem=0.92),
        # beyond the model's 32,768 positions: some rejected; then all (max_model_len's refusal)
        setting("h200", "qwen2.5-1.5b", 30000, 100, mix="4x100,4x5000", batch=8, count=16),
        setting("h200", "qwen2.5-1.5b", 30000, 100, mix="4x5000", batch=8, count=8),
        # weights beyond the card's memory: no room for a KV cache (the pool's refusal)
        setting("rtx3060", "llama-3.1-8b", 128, 100, mix="8x16", count=8),
    ]),
    "shipped-graph": (dict(cards=("h200",), engine="graph"), [
        setting("h200", "qwen2.5-0.5b", 200, 256),
        setting("h200", "llama-3.1-8b", 2048, 64, kv="fp8", cache="dynamic"),
        setting("h200", "qwen2.5-32b", 128, 128, w="int8", logits="all", mix="64x16,8x512", batch=64, count=200),
        setting("h200", "llama-3.1-8b", 100000, 32, serving=False),  # prefill in chunks of the engine's 32768 tokens
        # mixtures of experts: uniform and skewed routing; MLA; windows + sinks
        setting("h200", "qwen3-30b-a3b", 1024, 256),
        setting("h200", "qwen3-30b-a3b", 1024, 256, skew=1.2),
        setting("h200", "qwen3-30b-a3b", 300, 100, w="fp8", skew=0.4, cache="dynamic", serving=False),
        setting("h200", "deepseek-v2-lite", 2048, 128, mix="16x32,4x128", count=40),
        setting("h200", "deepseek-v2-lite", 600, 60, skew=0.8, kv="fp8", serving=False),
        setting("h200", "gpt-oss-20b", 8000, 256, mix="8x64,8x256", count=32),
        setting("h200", "gpt-oss-20b", 100, 2000, w="int4", skew=2.0, serving=False),
        setting("h200", "mistral-7b-v0.1", 8000, 512, cache="dynamic", mix="8x64,8x256", count=32),
        setting("h200", "mistral-7b-v0.1", 3000, 2000, cache="static", logits="all", serving=False),
        # tensor parallelism over the calibration's measured link
        setting("h200", "llama-3.1-70b", 2048, 128, tp=2, mix="8x32,8x128", count=32),
        setting("h200", "llama-3.1-70b", 512, 512, tp=8, w="fp8", kv="fp8", mix="8x32,8x128", count=32),
        setting("h200", "qwen3-30b-a3b", 4096, 128, tp=4, skew=0.7, serving=False),
        # a mixture of experts on half the card: 11 preemptions
        setting("h200", "qwen3-30b-a3b", 3000, 256, skew=0.8, mix="16x64,16x768", batch=64, count=128, mem=0.5),
        # a plain MLP: its intermediate weighted by the prefill-kernels probe's plain / gated costs
        setting("h200", "falcon-7b", 512, 64, mix="8x16,8x64", count=32),
    ]),
    "pure": (dict(cards=("h100-sxm",), calibration=None), [
        setting("h100-sxm", "llama-3.1-70b", 1000, 200, tp=2, mix="8x32,8x128", count=32),  # NVSwitch link
        # at TP 2 the pool per GPU (34,848 tokens) binds as 16 prompts of 2,000 grow: preemptions
        setting("h100-sxm", "llama-3.1-70b", 2000, 200, tp=2, mix="8x32,8x512", count=32),
        setting("mi300x", "llama-3.1-70b", 1000, 200, tp=8, w="fp8"),  # a mesh: one link per peer
        setting("rtx4090", "qwen2.5-7b", 1000, 200, tp=2, serving=False),  # over PCIe
        setting("h100-sxm", "mixtral-8x7b", 700, 300, skew=1.0, serving=False),
        setting("h100-sxm", "gemma-3-4b", 5000, 500, serving=False),  # windowed layers, one window size
        setting("h100-sxm", "gemma-2-9b", 9000, 500, tp=4, cache="static", serving=False),
        setting("h100-sxm", "deepseek-v3", 2000, 100, w="fp8", tp=8, serving=False),
    ]),
    "synthetic": (dict(cards=("h200",), calibration=Calibration(**SYNTHETIC)), [
        setting("h200", "qwen2.5-0.5b", 200, 256),
        setting("h200", "llama-3.1-70b", 1000, 256, w="fp8", kv="fp8", cache="static", logits="all",
                mix="30x20,2x300", batch=32, count=70, policy="early-return"),
        setting("h200", "qwen2.5-7b", 16, 4096, cache="dynamic", mix="5x4096,5x3", batch=4, count=20),
        setting("h200", "gpt-oss-20b", 20000, 300, skew=0.5, mix="8x32,8x64", count=16),
        setting("h200", "deepseek-v2-lite", 3000, 300, tp=2, mix="8x32,8x64", count=16),
        setting("h200", "qwen3-30b-a3b", 9000, 64, tp=8, serving=False),
        setting("h200", "gemma-3-4b", 5000, 100, serving=False),  # the masked prefill past its window
        setting("h200", "gpt-j-6b", 1000, 100, serving=False),  # a plain MLP at the synthetic 5.7 / 25.6
        # the sink joins the softmax's row: gpt-oss-20b's full layers leave the warp kernel and take the
        # row factors' first step at a cache of 2,048 positions, one step before a model without sinks would
        setting("h200", "gpt-oss-20b", 2040, 16, serving=False),
    ]),
    "foreign": (dict(cards=("h200",), calibration=Calibration(**FOREIGN)), [
        setting("h200", "qwen2.5-7b", 384, 128, serving=False),  # context 512: a tie between the held-out contexts
        setting("h200", "qwen2.5-7b", 256, 128, w="int8", tp=4, serving=False),
        setting("h200", "deepseek-v2-lite", 2000, 100, serving=False),
        setting("h200", "gpt-oss-120b", 100, 100, kv="fp8", tp=8, serving=False),
        setting("h200", "llama-3.2-1b", 5000, 10, serving=False),
    ]),
    # elementwise traffic without the element costs measured: a plain MLP's intermediate at the
    # default weight (roofline.step.PLAIN_MLP_ACTIVATION_WEIGHT)
    "plain-default": (dict(cards=("h200",), calibration=Calibration(card="h200", engine="graph",
                                                                    activation_traffic_coeff=3.0)), [
        setting("h200", "falcon-7b", 512, 64, serving=False),
        setting("h200", "gpt-neox-20b", 2000, 64, mix="8x16,8x64", count=32),
    ]),
    # a kernel table of 64-wide heads, 16 a KV head (falcon-40b's), and a slower kernel's window at
    # 1,024-1,088 positions measured for 1-8 query heads a KV head only: the table's interpolation
    # stops at the window's lengths all the same (from 1,000 + 64 the steps cross 1,024)
    "table-edges": (dict(cards=("h200",), calibration=Calibration(
        card="h200", engine="graph", attention_context_factors=[[1024.0, 1088.0, 1.4, 64.0, 90.0, 1.0, 8.0]],
        attention_kernel_table=[{"head_dim": 64, "group": 16, "matrices": [64, 4096],
                                 "contexts": [960, 1024, 1088, 1152],
                                 "factors": [[1.0, 0.9, 1.4, 1.0], [1.0, 0.85, 1.45, 1.1]]}])), [
        setting("h200", "falcon-40b", 1000, 64, serving=False),
    ]),
    # the shipped H200 graph calibration without its grouped-mm table: the experts by tiles alone (as
    # a card with the tile rates and no table prices them)
    "tiles-alone": (dict(cards=("h200",), calibration=load_calibration(
        "hardware_profiles/calibrations/h200-graph.json").model_copy(update={"expert_gemm_table": None})), [
        setting("h200", "qwen3-30b-a3b", 1024, 256, serving=False),
        setting("h200", "mixtral-8x7b", 200, 16, serving=False),
    ]),
}


def run_node(data: dict, settings: list[dict], tmp_path: Path, model_js: Path = MODEL_JS,
             serving_js: Path = SERVING_JS, runner: Path = RUNNER) -> list[dict]:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"data": data, "settings": settings}, allow_nan=False), encoding="utf-8")
    done = subprocess.run([NODE, str(runner), str(model_js), str(serving_js), str(job)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("page", list(PAGES))
def test_port_equals_python(page, tmp_path):
    options, settings = PAGES[page]
    data = page_data(**options)
    results = run_node(data, settings, tmp_path)
    bounds, reasons = set(), set()
    for s, js in zip(settings, results):
        py = python_result(data, s)
        bad = differences(js, py, REL)
        assert not bad, f"{page} {s['card']} {s['model']} tp {s['tp']} skew {s['routing_skew']}: " + "; ".join(bad[:8])
        bounds |= {r["bound"] for r in py["rows"]} | {r["ttft_bound"] for r in py["rows"]}
        reasons |= {x.split(" ")[0] for r in py["rows"] for x in r["extrapolation"]}
    if page == "synthetic":  # every branch of the bound attribution was exercised
        assert bounds == {"overhead", "memory", "compute"}
    if page == "foreign":  # and most of the extrapolation's reasons
        assert {"context", "model", "weights", "KV", "sliding-window", "tensor", "batch", "a"} <= reasons, reasons


def test_the_scenarios_cover_what_they_claim():
    """The pages above reach every part of the model: a MoE's first bend, skewed routing, the experts
    priced from the grouped-mm table and by tiles, MLA,
    windows and sinks, a chunked prefill, collectives over a calibrated and over the card's link."""
    seen = set()
    for options, settings in PAGES.values():
        data = page_data(**options)
        for s in settings:
            try:
                step = python_scenario(data, s).step
            except RooflineError:
                continue
            spec = step.spec
            seen |= {k for k, on in {
                "moe": spec.moe_layers > 0, "skew": step._touched_table is not None, "mla": spec.attention_kind == "mla",
                "window": step.window is not None, "sinks": spec.attention_sinks, "tp": step.tp > 1,
                "tp-card-link": step.tp > 1 and not step.calibration.allreduce_bandwidth_bytes_per_s,
                "tp-calibrated-link": step.tp > 1 and bool(step.calibration.allreduce_bandwidth_bytes_per_s),
                "chunk": step.calibration.prefill_chunk_tokens is not None and s["prompt_tokens"] * 2
                <= step.calibration.prefill_chunk_tokens, "long": s["prompt_tokens"] >= 100000,
                "static": (s["kv_cache"] if s["kv_cache"] != "auto" else step.calibration.kv_cache) == "static",
                "fp8-weights": s["weight_dtype"] == "fp8", "lane": step.calibration.attention_lane_s_per_token > 0,
                "masked-window": step.masked_prefill is not None and not step.masked_prefill[1]
                and s["prompt_tokens"] > step.window,
                "masked-sinks": step.masked_prefill is not None and step.masked_prefill[1],
                "row-factors": bool(step._row_factors) and s["prompt_tokens"] > step._row_factors[-1][0],
                "softmax-warp": bool(step._c[38]) and step._c[41] < s["prompt_tokens"] <= step._c[40],
                "softmax-warp-window": bool(step._c[39]) and step.window is not None
                and step._c[41] < step.window <= step._c[40],
                "expert-gemm-table": step._expert_nodes is not None,  # blended with the tiles from 32 rows
                "expert-tiles": step._expert_nodes is None and step._tile_table is not None,
            }.items() if on}
    assert seen == {"moe", "skew", "mla", "window", "sinks", "tp", "tp-card-link", "tp-calibrated-link", "chunk", "long",
                    "static", "fp8-weights", "lane", "masked-window", "masked-sinks", "row-factors", "softmax-warp",
                    "softmax-warp-window", "expert-gemm-table", "expert-tiles"}


@pytest.mark.filterwarnings("ignore::roofline.errors.RooflineWarning")  # weights beyond a card: on purpose
def test_the_server_settings_cover_what_they_claim():
    """The pages' serving settings reach every outcome of the continuous server: preemptions
    (with a mixture of experts and at TP 2 among them), requests rejected beside served ones (by
    the pool and by max_model_len), and each refusal: no room for a KV cache, every request
    beyond the pool, every request beyond max_model_len."""
    seen = set()
    for options, settings in PAGES.values():
        data = page_data(**options)
        for s in settings:
            if not s["serving"]:
                continue
            c = python_result(data, {**s, "batches": [1]})["serve_continuous"]
            if "error" in c:
                seen.add((c["field"], c["error"].split(":")[0]))
                continue
            if c["preemptions"]:
                seen |= {"preempted"} | ({"preempted-moe"} if s["model"].startswith("qwen3") else set()) \
                    | ({"preempted-tp"} if s["tp"] > 1 else set())
                assert c["preempted_requests"] <= c["preemptions"] and c["max_running"] <= s["batch"]
            if 0 < c["rejected"] < c["requests"]:  # by the model's positions, or else by the pool
                most = s["prompt_tokens"] + max(g for _, g in parse_mix(s["mix"])) - 1
                limit = next(m for m in data["models"] if m["name"] == s["model"])["max_position_embeddings"]
                seen.add("some-rejected-" + ("max_model_len" if most > limit else "pool"))
    assert seen == {"preempted", "preempted-moe", "preempted-tp", "some-rejected-pool", "some-rejected-max_model_len",
                    ("gpu_memory_utilization", "no room for a KV cache"),
                    ("gpu_memory_utilization", "every request is rejected"),
                    ("max_model_len", "every request is rejected")}, seen


@pytest.mark.filterwarnings("ignore::roofline.errors.RooflineWarning")  # weights beyond a card: on purpose
def test_kv_pool_equals_python_on_every_card(tmp_path):
    """The page's KV pool (roofline.kvpool.kv_pool from memory: blocks, or Python's refusal with
    its words) for every card profile and a spread of models, dtypes, TP degrees and memory
    shares, pure and calibrated."""
    from roofline.kvpool import kv_pool

    data = page_data(cards=("h200",), engine="graph")
    models = ("qwen2.5-0.5b", "llama-3.1-8b", "gemma-3-4b", "deepseek-v2-lite", "gpt-oss-20b", "llama-3.1-70b")
    settings = []
    for i, card in enumerate(c["id"] for c in data["cards"]):
        for j, model in enumerate(models):
            tp = (1, 2, 4, 8)[(i + j) % 4] if data["cards"][i]["tp_link_bytes_per_s"].get("2") else 1
            settings.append(setting(card, model, w=("bf16", "fp8", "int4")[(i + j) % 3], kv=("bf16", "fp8")[j % 2], tp=tp,
                                    calibrated=bool(i % 2), mem=(0.9, 0.5, 1.0, 0.95)[(i * 7 + j) % 4]))
    results = run_node(data, settings, tmp_path, runner=SERVING_RUNNER)
    sizes = set()
    for s, js in zip(settings, results):
        step = python_scenario(data, s).step
        try:
            pool = kv_pool(step, gpu_memory_utilization=s["gpu_memory_utilization"], engine=data["engine"])
        except RooflineError as exc:
            assert js == {"error": exc.message, "field": exc.field}, s
            sizes.add("refused")
            continue
        assert js == {"num_blocks": pool.num_blocks, "capacity_tokens": pool.capacity_tokens}, s
        sizes.add("fits")
    assert sizes == {"fits", "refused"}


def random_streams(seed: int, count: int) -> list[dict]:
    """Streams for the scheduler alone: ragged prompts and generations, few slots and pools from
    a little over the longest request to a few times it (rejections, many preemptions: several
    in one step, the lone sequence's own), sometimes a max_model_len."""
    import numpy as np

    rng = np.random.default_rng(seed)
    streams = []
    for _ in range(count):
        n = int(rng.integers(1, 40))
        prompts = rng.integers(1, 300, n)
        gens = rng.integers(1, 200, n)
        need = -(-(prompts + gens - 1) // 16)  # blocks each request needs at its end
        blocks = int(rng.integers(int(need.min()), int(need.max()) * 3 + 2))
        max_model_len = int(rng.integers(100, 500)) if rng.random() < 0.3 else None
        streams.append({"prompts": prompts.tolist(), "gens": gens.tolist(), "slots": int(rng.integers(1, 12)),
                        "num_blocks": blocks, "max_model_len": max_model_len})
    return streams


def test_continuous_server_equals_python_on_random_streams(tmp_path):
    """roofline.scheduler's decode-first server (roofline.serving.serve_continuous, FusedCost)
    and the page's serveContinuous on 120 random streams and pools: every counter exactly, every
    time percentile and throughput to 1e-9."""
    from js_parity import CONTINUOUS_EXACT, SERVER_EXACT, SERVER_FLOAT, rel_err
    from roofline.kvpool import KVPool
    from roofline.serving import serve_continuous

    data = page_data(cards=("h200",), engine="graph")
    settings = [{**setting("h200", "qwen2.5-0.5b"), "streams": random_streams(1, 60)},
                {**setting("h200", "qwen3-30b-a3b", skew=0.6, tp=2), "streams": random_streams(2, 60)}]
    results = run_node(data, settings, tmp_path, runner=SERVING_RUNNER)
    seen = {"preempted": 0, "rejected": 0}
    for s, js_all in zip(settings, results):
        step = python_scenario(data, s).step
        for x, js in zip(s["streams"], js_all):
            pool = KVPool(x["num_blocks"], data["server"]["block_size"], "kv_capacity_tokens", step.kv_bytes_per_token)
            served = serve_continuous(step, x["prompts"], x["gens"], None, x["slots"], pool=pool,
                                      max_model_len=x["max_model_len"])
            py = served.summary()
            if py["rejected"] == py["requests"]:
                assert js["rejected"] == py["rejected"]
                continue
            for k in SERVER_EXACT + CONTINUOUS_EXACT:
                assert js[k] == py[k], (k, x)
            for k in SERVER_FLOAT:
                assert (js[k] is None) == (py[k] is None) and (py[k] is None or rel_err(js[k], py[k]) < REL), (k, x)
            seen["preempted"] += py["preemptions"] > 0
            seen["rejected"] += py["rejected"] > 0
    assert seen["preempted"] >= 30 and seen["rejected"] >= 10, seen


def test_a_setting_python_rejects_is_rejected_by_the_port(tmp_path):
    """Tensor parallelism on a card with no interconnect on record: the port raises where
    StepModel raises, with the same words."""
    data = page_data()
    s = setting("apple-m2-max-38c", "qwen2.5-7b", tp=2)
    with pytest.raises(RooflineError, match="has no interconnect on record") as exc:
        python_scenario(data, s).step  # noqa: B018
    js = run_node(data, [s], tmp_path)[0]
    assert js == {"error": exc.value.message}


def _drifted_copy(script, needle, replacement, tmp_path):
    """A copy of the page's ``script`` with its one ``needle`` replaced (a deliberate drift)."""
    source = script.read_text(encoding="utf-8")
    assert source.count(needle) == 1, needle
    drifted = tmp_path / script.name
    drifted.write_text(source.replace(needle, replacement), encoding="utf-8")
    return drifted


@pytest.mark.parametrize("needle, replacement, page, index, where", [
    # the prefill's per-token matmul cost
    ("(model.body_linear_flop_per_token - routedFlop) / tp * sPerPrefillFlop",
     "(model.body_linear_flop_per_token - routedFlop) / tp * sPerPrefillFlop * 1.001", "shipped-hf-eager", 0, "ttft_s"),
    # the all-reduces' bytes (tp > 1 only)
    ("reducePerToken = nReduce * model.hidden_size * actB * 2.0 * (tp - 1) / tp * linkS;",
     "reducePerToken = nReduce * model.hidden_size * actB * 2.0 * (tp - 1) / tp * linkS * 1.01;",
     "shipped-graph", 13, "tpot_s"),
    # the rows' score factor on the windowed layers' ring too (gpt-oss-20b's 128 positions)
    ("scorew = scorew * (w.kvw === null ? lf : windowFactor(m.rowFactors, rkw, d));", "scorew = scorew * lf;",
     "synthetic", 3, "tpot_s"),
    # the first step's factor where the second applies (gpt-oss-20b's full layers at 20,300 positions: past both)
    ("i + 1 < all.length ? all[i + 1][0] : Infinity", "Infinity", "synthetic", 3, "tpot_s"),
    # the sink left out of the softmax's row (gpt-oss-20b at a cache of 2,048: still the warp kernel's row)
    ("var rk = kv + d * m.softmaxExtra, rkw = kvw + d * m.softmaxExtra;", "var rk = kv, rkw = kvw;", "synthetic", 8,
     "tpot_s"),
    # the softmax's warp floor on the windowed layers read at the full layers' cache (gemma-3-4b: 5,100, past the
    # warp's rows, against its ring of 1,024)
    ("warpw = warpFloor(perSequence(rkw, d), c[39], c[40], c[41]);",
     "warpw = warpFloor(perSequence(rk, d), c[39], c[40], c[41]);", "synthetic", 6, "tpot_s"),
    # the kernel table's factor on the windowed layers' ring read at the full layers' length (gemma-3-4b: 5,100
    # positions against its ring of 1,024)
    ("var fw = tableFactor(T, d * T.kvHeads, perSequence(tokensW, d));",
     "var fw = tableFactor(T, d * T.kvHeads, perSequence(tokens, d));", "synthetic", 6, "tpot_s"),
    # and interpolated across a step of the price (gemma-3-4b's ring of 1,024 past the window's 1,000)
    ("      T.edges.forEach(function (e) { if (cs[j] <= e && e < cs[j + 1]) wj = t <= e ? 0.0 : 1.0; });\n", "",
     "synthetic", 6, "tpot_s"),
    # the softmax's warp floor from the first position, not after the kernel's shortest time
    ("? (tokens - after) * s : 0.0; }", "? tokens * s : 0.0; }", "synthetic", 0, "tpot_s"),
    # the rows' score factor forgotten
    ("        score = score * lf;\n", "", "synthetic", 5, "tpot_s"),
    # the skewed routing's bisection (too few iterations)
    ("for (var it = 0; it < 200; it++)", "for (var it = 0; it < 20; it++)", "shipped-graph", 5, "tpot_s"),
    # the expected error's nearest context (a tie goes to the first, as Python's min)
    ("if (d < best)", "if (d <= best)", "foreign", 0, "expected_error"),
    # the expected error by overhead share: a bin of too few points used (llama-3.2-1b's batch 7, a share of 0.46)
    ("return b.points >= MIN_BIN_POINTS ? b.tpot_mape_fraction : null;", "return b.tpot_mape_fraction;", "foreign", 4,
     "expected_error"),
    # and the overhead-bound steps' error forgotten (its batch 1, a share of 0.56)
    ("return tpot === null || isNaN(tpot) ? e : Math.max(tpot, e);", "return tpot;", "foreign", 4, "expected_error"),
    # a prompt's routed-expert FLOPs at the dense prefill rate instead of the grouped GEMMs'
    ("prefillRoutedS = routedFlop / tp * sPerExpertPrefillFlop;", "prefillRoutedS = routedFlop / tp * sPerPrefillFlop;",
     "synthetic", 3, "ttft_s"),
    # the grouped GEMM's tiles: an expert's rows not rounded up to whole tiles
    ("ex += w[r - lo] * Math.ceil(r / h);", "ex += w[r - lo] * (r / h);", "shipped-graph", 4, "tpot_s"),
    # every pass on the small tiles, a prefill's many rows too
    ("((d + p) * c[31] < c[37] ? c[35] : c[36])", "c[35]", "shipped-graph", 4, "ttft_s"),
    # the experts' bytes and tiles added instead of the larger taken (by tiles alone; and where they
    # blend with the grouped-mm table from 32 rows an expert)
    ("Math.max(x[7], x[8]) + pnorm(x[3], x[4], p) + x[5] + x[6], m.c[13]);",
     "x[7] + x[8] + pnorm(x[3], x[4], p) + x[5] + x[6], m.c[13]);", "tiles-alone", 0, "knee_batch"),
    ("var tTiles = Math.max(expertMemory, expertCompute);", "var tTiles = expertMemory + expertCompute;",
     "shipped-graph", 4, "tpot_s"),
    # the grouped-mm table read at a token's rows, not its k experts' (rows an expert k times too few)
    ("rowsEach = tok * c[31] / Math.max(touched, 1.0);", "rowsEach = tok / Math.max(touched, 1.0);",
     "shipped-graph", 4, "tpot_s"),
    # its output width (gate-up: 2 x the expert width) read as the expert width
    ("var gu = shapeLogSeconds(t, hidden, 2.0 * inter)", "var gu = shapeLogSeconds(t, hidden, inter)",
     "shipped-graph", 9, "tpot_s"),
    # the graph engine's second decode logits buffer forgotten
    ("var logitsDecode = batch * model.logits_bytes_per_position * (cal.decode_logits_buffers || 1.0);",
     "var logitsDecode = batch * model.logits_bytes_per_position;", "shipped-graph", 0, "peak_mem"),
    # the graph engine's decode attention scores forgotten at the end of the decode (falcon-7b: 71 query heads;
    # its batch-1 peak is the prefill's, so the largest batch that fits is where they tell)
    ("var scoreBuffers = cal.decode_score_buffers || 0.0;", "var scoreBuffers = 0.0;", "shipped-graph", 17,
     "fits_batch"),
    # gpt-oss's 2,880 columns not padded to whole tiles
    ("inter * Math.ceil(hidden / cols) * cols", "inter * hidden", "shipped-graph", 9, "ttft_s"),
    # MLA's prompt pairs at the absorbed (decode) FLOPs instead of the decompressed prefill's
    ("        fullPflop * sPerPrefillPairFlop,", "        fullFlop * sPerPrefillPairFlop,", "synthetic", 4, "ttft_s"),
    # an MLA layer priced at nothing where the calibration has no MLA kinds (not as its MHA layer)
    ('if (cost === undefined && k === "mla_heads") cost = (perElement.query || 0.0) + (perElement.key_value || 0.0);',
     "", "synthetic", 4, "ttft_s"),
    # gpt-oss's expert biases priced at nothing where the calibration lacks their cost
    ('if (cost === undefined && k === "expert_bias") cost = 2.0 * (perElement.plain_intermediate || 0.0);', "",
     "synthetic", 3, "ttft_s"),
    # the load curve's average: its last value alone instead of the integral over the pass
    ("      return (area + prevR * (t - prevT)) / t;\n    }", "      return prevR;\n    }", "synthetic", 3, "ttft_s"),
    # the load curve stretching every compute-bound kernel, the probe-measured rates' too
    ("var burst = Math.min(out.compute_s, full * prefillFittedS(m, w) + (hasTail ? prefillFittedS(m, tw) : 0.0));",
     "var burst = out.compute_s;", "synthetic", 3, "ttft_s"),
    # gpt-oss's clamped activation priced at nothing where the calibration lacks its cost (not silu's)
    ('if (cost === undefined && k === "clamped_intermediate") cost = perElement.gated_intermediate;',
     "", "synthetic", 3, "ttft_s"),
    # a plain MLP's intermediate counted as a gated one's (its measured weight dropped)
    ("plainWeight = perElement.plain_intermediate / perElement.gated_intermediate;", "plainWeight = 1.0;",
     "shipped-graph", -1, "tpot_s"),
    # ... and at the default weight
    ("var plainWeight = DATA.plain_mlp_activation_weight;", "var plainWeight = 1.0;", "plain-default", 0, "tpot_s"),
    # the MoE layers' small-index kernels forgotten (qwen3-30b-a3b's batches 1 and 2: 8 and 16 routed rows)
    ("(m.indexExcess === null ? 0.0 : indexExcessAt(m.indexExcess, (d + p) * c[31]))", "0.0", "shipped-graph", 4,
     "tpot_s"),
    # ... read at the tokens, not their routed rows (k of them a token)
    ("indexExcessAt(m.indexExcess, (d + p) * c[31])", "indexExcessAt(m.indexExcess, d + p)", "shipped-graph", 4,
     "tpot_s"),
    # ... gpt-oss's two bias gathers forgotten
    ('if (model.expert_bias) ops.push(', 'if (false) ops.push(', "shipped-graph", 9, "tpot_s"),
    # ... the ops read at k = 1 (no token's row gathered k times)
    ("moeIndexOps(model, tp), model.experts_per_token)", "moeIndexOps(model, tp), 1.0)", "shipped-graph", 4, "tpot_s"),
    # the kernel table interpolated across a slower kernel's window measured at other query heads a KV head
    ("if (w[3] <= model.head_dim && model.head_dim <= w[4]) edges.push(w[0], w[1]);", "", "table-edges", 0, "tpot_s"),
])
def test_a_drifted_js_formula_is_caught(needle, replacement, page, index, where, tmp_path):
    """Break one term of the port and the comparison fails where it should."""
    drifted = _drifted_copy(MODEL_JS, needle, replacement, tmp_path)
    options, settings = PAGES[page]
    data = page_data(**options)
    s = {**settings[index], "serving": False}
    assert not differences(run_node(data, [s], tmp_path)[0], python_result(data, s), REL)
    bad = differences(run_node(data, [s], tmp_path, drifted)[0], python_result(data, s), REL)
    assert any(where in b for b in bad), bad


@pytest.mark.parametrize("needle, replacement, page, index, where", [
    # the preemption victim: the earliest admitted instead of the latest
    ("var v = latest(), bv = base[v], kv = bv + D;", "var v = running.keys().next().value, bv = base[v], kv = bv + D;",
     "shipped-hf-eager", 15, "serve_continuous"),
    # the preempted go back to the END of the queue instead of its front
    ("              requeue.push(v);\n", "              requeue.unshift(v);\n", "shipped-hf-eager", 15,
     "serve_continuous"),
    # the pool without the profiling prefill's activations (a larger pool)
    ("var activations = profile.activations_bytes + profile.logits_bytes;", "var activations = profile.logits_bytes;",
     "shipped-hf-eager", 15, "serve_continuous kv_capacity_tokens"),
    # no rejection by max_model_len: the requests beyond the model's positions served
    ("var pool = kvPool(m, u), maxModelLen = m.model.max_position_embeddings;", "var pool = kvPool(m, u), maxModelLen = null;",
     "shipped-hf-eager", 17, "serve_continuous rejected"),
])
def test_a_drifted_serving_js_is_caught(needle, replacement, page, index, where, tmp_path):
    """Break one rule of the continuous server's port and the comparison fails where it should."""
    drifted = _drifted_copy(SERVING_JS, needle, replacement, tmp_path)
    options, settings = PAGES[page]
    data = page_data(**options)
    s = {**settings[index], "batches": [1]}
    py = python_result(data, s)
    assert not differences(run_node(data, [s], tmp_path)[0], py, REL)
    bad = differences(run_node(data, [s], tmp_path, serving_js=drifted)[0], py, REL)
    assert any(b.startswith(where) for b in bad), bad
