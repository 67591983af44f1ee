"""The simulator against the real server loop (calibrate/serving_loop.py): the same decisions on a
virtual clock, and the committed H200 runs replayed (issue 14)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline.scheduler as scheduler
from calibrate import serving_loop as loop
from roofline.pass_costs import LoopCost, capture_sizes, load_loop_terms, loop_terms_path
from roofline.scenario import make_scenario
from roofline.scheduler import ServerConfig, serve_stream
from roofline.serving_replay import (COMPARED, KV_REPEAT_PROBES, LAUNCH_WALKS, compare_rows, fit_loop_terms, replay,
                                     shipped_folder)
from roofline.serving_runs import read_run, run_names
from roofline.step import decode_work

FOLDER = shipped_folder()
FIT = ["qwen2.5-1.5b-mixed-r40-n400-s1", "qwen2.5-7b-mixed-r25-n300-s1"]


class Linear:
    """Costs that depend on everything the loop reports (slots, contexts, tokens, pairs, chunks),
    and host time for each sequence that finishes (the loop's ``left``)."""

    wake_s = 0.0
    finish_s = 3e-4

    def __init__(self, static: bool):
        self.static = static  # chunked: the decode covers the prefilling slot too; price slots only

    def decode_s(self, slots, decoding, kv_read):
        return 1e-3 + 1e-4 * slots + (0.0 if self.static else 1e-7 * kv_read)

    def decode_costs(self, slots, decoding, kv_read):
        return np.array([self.decode_s(slots, decoding, x) for x in kv_read])

    def pass_s(self, slots, decoding, kv_read, tokens, pairs, chunks, cont_tokens=0, cont_cached=0, longest=0):
        return (self.decode_s(slots, decoding, kv_read) if decoding else 0.0) + self.prefill(tokens, pairs, chunks,
                                                                                             cont_tokens, cont_cached)

    @staticmethod
    def prefill(tokens, pairs, chunks, cont_tokens=0, cont_cached=0):
        return 2e-3 + 1e-5 * tokens + 1e-9 * pairs + 1e-4 * chunks + 3e-6 * cont_tokens + 7e-7 * cont_cached


def loop_run(p, g, a, cfg: ServerConfig, cost):
    """calibrate.serving_loop.serve on a virtual clock with ``cost``'s prices."""
    def prefill_s(lengths, starts):
        pairs = sum(n * s + n * (n + 1) / 2 for n, s in zip(lengths, starts))
        # the loop's chunk graph: its first chunk continues after cached tokens
        return cost.prefill(float(sum(lengths)), float(pairs), float(len(lengths)),
                            lengths[0] if starts[0] else 0, starts[0])

    def decode_s(n, bucket, contexts):
        return cost.decode_s(n, n, float(sum(contexts)))

    clock = loop.VirtualClock()
    ex = loop.CostExecutor(clock, prefill_s, decode_s, cfg.max_num_seqs, leave_s=getattr(cost, "finish_s", 0.0))
    reqs = [loop.Request(i, float(a[i]), int(p[i]), int(g[i])) for i in range(len(p))]
    policy = "prefill-first" if cfg.schedule == "prefill-first" else "chunked"
    config = loop.SchedulerConfig(cfg.max_num_seqs, cfg.max_model_len, cfg.num_blocks, cfg.block_size,
                                  cfg.max_num_batched_tokens, policy)
    # an idle loop sleeps until the next arrival and wakes ``wake_s`` late
    return loop.serve(reqs, ex, config, clock=clock, sleep=lambda s: clock.advance(s + cost.wake_s))


def test_buckets_are_the_loops():
    for s in (1, 2, 3, 7, 8, 9, 16, 33, 64, 100, 256, 1000):
        assert capture_sizes(s) == loop.capture_sizes(s)
    assert capture_sizes(64) == [1, 2, 4, 8, 16, 24, 32, 48, 64]  # the runs' config.capture_sizes


def test_prefill_token_buckets_are_the_loops():
    from roofline.pass_costs import prefill_token_buckets

    for n in (1, 16, 17, 40, 512, 513, 700, 1280, 2048, 5000):
        assert prefill_token_buckets(n) == loop.prefill_token_buckets(n)
    for name in run_names(FOLDER):  # the committed runs' own record of their buckets
        c = read_run(FOLDER, name).config
        assert c["prefill_token_buckets"] == prefill_token_buckets(c["max_num_batched_tokens"])


def test_a_graph_prefill_is_priced_at_its_padded_bucket_without_eager_overhead():
    """LoopCost under prefill graphs: 100 tokens of 2 sequences cost what 128 padded tokens (the
    padding one more causal sequence of 28, logits for max_num_seqs rows) cost, by hand: the
    floor a layer, the loop's four linears a layer and the LM head from the card's matmul table,
    the step model's attention (no eager overhead), and the loop's elementwise bytes (counted
    from its code) at the fitted rate."""
    from roofline.gemm import load_gemm_table
    from roofline.pass_costs import loop_elementwise_elements, loop_elementwise_launches, loop_layer_gemms
    from roofline.step import pnorm, prefill_work

    terms = load_loop_terms(card="h200", engine="graph")
    assert terms.prefill_graphs and terms.prefill_gemm_table
    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    cost = LoopCost(step, terms, max_model_len=1280, max_num_seqs=64, max_num_batched_tokens=2048)
    pairs = 60 * 61 / 2 + 40 * 41 / 2
    work = prefill_work(128.0, pairs + 28 * 29 / 2, 64.0)
    table = load_gemm_table(terms.prefill_gemm_table)
    # qwen2.5-1.5b: hidden 1536, 12 x 128 query and 2 x 128 KV widths, intermediate 8960, vocab 151936
    linears = 28 * (table.seconds(128, 2048, 1536) + table.seconds(128, 1536, 1536) + table.seconds(128, 17920, 1536)
                    + table.seconds(128, 1536, 8960)) + table.seconds(64, 151936, 1536)
    parts = step.pass_parts(work)
    attention = pnorm(parts.attention_memory_s, parts.attention_compute_s, step.calibration.roofline_exponent)
    # 10 H + 10 (q + kv) + 4 kv + 2 (kv + q) + 2 q + 2 q + 5 I elements of 2 bytes a token and layer
    elements = 10 * 1536 + 10 * 1792 + 4 * 256 + 2 * 1792 + 4 * 1536 + 5 * 8960
    assert loop_elementwise_elements(step.spec) == elements
    # qwen3-8b adds its q/k norms, q and k copied to contiguous rows and normed, 4 (q + kv) (device call
    # 120's paired probe: 1.2 TB/s over these bytes): hidden 4096, 32 x 128 query and 8 x 128 KV widths, I 12288
    q3 = make_scenario(card="h200", model="qwen3-8b", engine="graph").step.spec
    assert loop_elementwise_elements(q3) == (10 * 4096 + 10 * 5120 + 4 * 1024 + 2 * 5120 + 4 * 4096 + 5 * 12288
                                             + 4 * 5120)
    # pythia-6.9b's plain MLP: one GELU (2 I); hidden 4096, 32 heads of 128 without grouping, I 16384
    neox = make_scenario(card="h200", model="pythia-6.9b", engine="graph").step.spec
    assert loop_elementwise_elements(neox) == (10 * 4096 + 10 * 8192 + 4 * 4096 + 2 * 4096 + 2 * 4096 + 2 * 16384)
    assert loop_layer_gemms(neox) == [(3 * 4096, 4096), (4096, 4096), (16384, 4096), (4096, 16384)]
    assert loop_layer_gemms(step.spec)[2] == (2 * 8960, 1536)  # gated: gate and up in one matmul
    elementwise = 28 * elements * 2 * 128 / terms.prefill_elementwise_bytes_per_s.value
    floor = terms.prefill_floor_s_per_layer.value * 28
    # qwen2.5-1.5b groups its queries (12 over 2 K/V heads): the loop repeats K and V, two kernels a
    # layer whose fixed time is measured apart (calls 109-110: ~4 us a layer)
    repeats = terms.prefill_kv_repeat_s_per_layer.value * 28
    assert 2e-6 < terms.prefill_kv_repeat_s_per_layer.value < 6e-6
    # and every layer launches 19 elementwise kernels beside them (2 norms, RoPE's 10, 2 cache writes, 2
    # residual adds, the attention's fill, SwiGLU's 2), each at a fixed time measured from the kernel
    # walks (calls 110, 112, 117 on H100s: ~2.1 us), not fitted
    assert loop_elementwise_launches(step.spec) == 19
    assert loop_elementwise_launches(q3) == 23  # q and k each copied to contiguous rows and normed
    assert loop_elementwise_launches(neox) == 18  # one GELU for silu and the multiply
    assert 1.5e-6 < terms.prefill_launch_s.value < 3e-6
    launches = terms.prefill_launch_s.value * 19 * 28
    want = floor + repeats + launches + linears + attention + elementwise
    assert cost.prefill_device_s(100.0, pairs, 2.0) == pytest.approx(want, rel=1e-9)
    # every padded count prices alike: 100 tokens and 128 tokens of one sequence differ in pairs only
    assert cost.prefill_device_s(128.0, 128 * 129 / 2, 1.0) == pytest.approx(
        want - attention + pnorm(*step.pass_parts(prefill_work(128.0, 128 * 129 / 2, 64.0))[3:5],
                                 step.calibration.roofline_exponent), rel=1e-9)


def test_a_model_the_loop_does_not_run_falls_back_to_the_step_models_matmuls():
    # a mixture of experts: no table shapes for its experts, so the step model's kernel time
    terms = load_loop_terms(card="h200", engine="graph")
    step = make_scenario(card="h200", model="qwen3-30b-a3b", engine="graph").step
    cost = LoopCost(step, terms, max_model_len=1280, max_num_seqs=64, max_num_batched_tokens=2048)
    assert cost.gemms is None
    from roofline.step import prefill_work

    # the fixed time: the floor, the dense decoder's 23 launches a layer (SwiGLU and Qwen3's q/k norms) and,
    # its queries grouped (32 over 4 K/V heads), the K/V repeats: 57.66 + 4 x 2.13 + 4.22 us a layer
    assert step.spec.num_attention_heads > step.spec.num_key_value_heads
    floor = (terms.prefill_floor_s_per_layer.value + 23 * terms.prefill_launch_s.value
             + terms.prefill_kv_repeat_s_per_layer.value) * step.spec.num_hidden_layers
    assert cost.prefill_device_s(128.0, 128 * 129 / 2, 1.0) == pytest.approx(
        floor + step.work_s(prefill_work(128.0, 128 * 129 / 2, 64.0)), rel=1e-9)


streams = st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 150), min_size=n, max_size=n),
    st.lists(st.integers(1, 50), min_size=n, max_size=n),
    st.one_of(st.just(None), st.lists(st.floats(0, 0.3), min_size=n, max_size=n)),
    st.integers(1, 8), st.sampled_from([1, 4, 16]), st.integers(0, 25), st.integers(0, 400),
    st.sampled_from(["prefill-first", "decode-first"]), st.booleans(),
))


@settings(max_examples=120, deadline=None)
@given(streams)
def test_the_same_decisions_as_the_loop(case):
    p, g, a, S, B, spare_blocks, spare_tokens, schedule, fast = case
    p, g = np.array(p), np.array(g)
    a = np.zeros(len(p)) if a is None else np.array(a)
    most = int((p + g - 1).max())
    blocks = -(-most // B) + spare_blocks
    budget = (max(most, S) if schedule == "prefill-first" else S) + spare_tokens
    cfg = ServerConfig(S, blocks, B, most + 3, budget, schedule)
    cost = Linear(static=schedule == "decode-first")
    order = np.argsort(a, kind="stable")
    old = scheduler.FAST_MIN
    scheduler.FAST_MIN = 2 if fast else 10**9  # the vectorised quiet stretches, or one step at a time
    try:
        r = serve_stream(p[order], g[order], a[order], cfg, cost)
    finally:
        scheduler.FAST_MIN = old
    ref = loop_run(p, g, a, cfg, cost)
    back = np.empty(len(p), dtype=int)
    back[order] = np.arange(len(p))
    want = ref.requests
    np.testing.assert_allclose(r.first_token_s[back], [x["first_token_s"] for x in want], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.finish_s[back], [x["finish_s"] for x in want], rtol=1e-9, atol=1e-12)
    assert r.preemptions[back].tolist() == [x["preemptions"] for x in want]
    assert (r.iterations, r.max_running) == (len(ref.iterations), ref.max_running)
    kinds = [it["kind"] for it in ref.iterations]
    assert r.decode_iterations == sum(k in ("decode", "mixed") for k in kinds)


def test_loop_costs_by_hand():
    # a decode step of 5 sequences runs the bucket-8 graph over 8 x max_model_len cached tokens
    terms = load_loop_terms(card="h200", engine="graph")
    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    cost = LoopCost(step, terms, max_model_len=1280, max_num_seqs=64)
    want = (step.pass_s(decode_work(8.0, 8.0 * 1280)) + 28 * terms.decode_extra_s_per_layer.value
            + terms.host_decode_s.value + 5 * terms.host_decode_s_per_seq.value)
    assert cost.decode_s(5, 5, 123.0) == pytest.approx(want, rel=1e-12)
    assert cost.decode_s(5, 5, 0.0) == cost.decode_s(5, 5, 1e6)  # the static cache: contexts do not matter
    assert cost.decode_s(8, 5, 0.0) == cost.decode_s(5, 5, 0.0)  # the same bucket's graph
    assert cost.decode_s(9, 9, 0.0) > cost.decode_s(8, 8, 0.0)  # bucket 16
    # a prefill pass is never faster than its floor, and grows with its tokens
    floor = 28 * terms.prefill_floor_s_per_layer.value
    assert floor <= cost.prefill_device_s(16.0, 136.0, 1.0) < cost.prefill_device_s(2048.0, 2048 * 2049 / 2, 1.0)


def test_a_real_runs_stream_gets_the_loops_decisions():
    # the 1.5b overloaded run (80 preemptions measured): the loop's own scheduler, fed the
    # simulator's LoopCost prices (host terms scaled by the run's host probe, as replay does),
    # and the simulator agree on every request
    from roofline.pass_costs import scaled_for_host

    run = read_run(FOLDER, "qwen2.5-1.5b-mixed-r80-n400-s1")
    c = run.config
    step = make_scenario(card="h200", model=c["model"], engine="graph").step
    terms = scaled_for_host(load_loop_terms(card="h200", engine="graph"), c["host_probe"])
    assert terms.host_decode_s != load_loop_terms(card="h200", engine="graph").host_decode_s  # scaled
    cost = LoopCost(step, terms, c["max_model_len"], c["max_num_seqs"], c["max_num_batched_tokens"])
    cost.prefill = lambda t, pairs, k, ct=0, cc=0: cost.pass_s(0, 0, 0.0, t, pairs, k, ct, cc)
    p = np.array([r["prompt_tokens"] for r in run.requests])
    g = np.array([r["gen_tokens"] for r in run.requests])
    a = np.array([r["arrival_s"] for r in run.requests])
    cfg = ServerConfig(c["max_num_seqs"], c["num_blocks"], c["block_size"], c["max_model_len"],
                       c["max_num_batched_tokens"], "prefill-first")
    ref = loop_run(p, g, a, cfg, cost)
    sim = replay(run, FOLDER, load_loop_terms(card="h200", engine="graph"))
    assert sim["preemptions"] == ref.preemptions > 0
    ttft = [x["ttft_s"] for x in ref.requests]
    assert sim["ttft_p50_s"] == pytest.approx(np.percentile(ttft, 50), rel=1e-9)
    assert sim["ttft_p99_s"] == pytest.approx(np.percentile(ttft, 99), rel=1e-9)


def test_the_k_v_repeats_move_out_of_the_floor_for_full_attention_only():
    """The fit runs group their queries, so the repeats' measured fixed time (calls 109-110) comes
    out of the fitted floor a layer exactly: a grouped-query model's prefill is priced as before,
    a full multi-head one's (llama-2-7b, which runs no repeats) that much a layer less."""
    runs = [read_run(FOLDER, n) for n in FIT]
    with_probe = fit_loop_terms(runs, kv_repeat_probes=KV_REPEAT_PROBES)
    without = fit_loop_terms(runs)
    assert without.prefill_kv_repeat_s_per_layer is None
    repeat = with_probe.prefill_kv_repeat_s_per_layer.value
    assert with_probe.prefill_floor_s_per_layer.value + repeat == pytest.approx(
        without.prefill_floor_s_per_layer.value, rel=1e-4)
    for model, grouped in (("qwen2.5-7b", True), ("llama-3.1-8b", True), ("llama-2-7b", False),
                           ("phi-3-mini-4k", False)):
        step = make_scenario(card="h200", model=model, engine="graph").step
        a, b = (LoopCost(step, t, max_model_len=1024, max_num_seqs=32).prefill_device_s(112.0, 112 * 113 / 2, 1.0)
                for t in (with_probe, without))
        layers = step.spec.num_hidden_layers
        assert a == pytest.approx(b if grouped else b - repeat * layers, rel=1e-4), model


def test_the_launches_move_out_of_the_floor_by_each_layouts_count():
    """The fit runs launch 19 elementwise kernels a layer (SwiGLU, no q/k norms), so the launches'
    measured time (the kernel walks of calls 110, 112 and 117) comes out of the fitted floor a layer
    exactly 19 times: such a model's prefill is priced as before, a plain GELU MLP's (pythia-6.9b:
    18 launches) one launch a layer less, q/k norms' (qwen3-8b, olmo-2-7b: 23) four a layer more."""
    from roofline.pass_costs import loop_elementwise_launches

    runs = [read_run(FOLDER, n) for n in FIT]
    with_walks = fit_loop_terms(runs, kv_repeat_probes=KV_REPEAT_PROBES, launch_walks=LAUNCH_WALKS)
    without = fit_loop_terms(runs, kv_repeat_probes=KV_REPEAT_PROBES)
    assert without.prefill_launch_s is None
    launch = with_walks.prefill_launch_s.value
    assert 1.5e-6 < launch < 3e-6  # a small kernel's launch and exit on the GH100 die: microseconds
    assert with_walks.prefill_floor_s_per_layer.value + 19 * launch == pytest.approx(
        without.prefill_floor_s_per_layer.value, rel=1e-4)
    for model, count in (("qwen2.5-7b", 19), ("llama-2-7b", 19), ("pythia-6.9b", 18), ("qwen3-8b", 23),
                         ("olmo-2-7b", 23), ("falcon-7b", 18)):
        step = make_scenario(card="h200", model=model, engine="graph").step
        assert loop_elementwise_launches(step.spec) == count, model
        a, b = (LoopCost(step, t, max_model_len=1024, max_num_seqs=32).prefill_device_s(112.0, 112 * 113 / 2, 1.0)
                for t in (with_walks, without))
        assert a == pytest.approx(b + (count - 19) * launch * step.spec.num_hidden_layers, rel=1e-4), model


def test_the_qk_norms_time_in_the_graph_is_the_priced_launches_and_bytes():
    """The launch term was measured from kernel sums (the walks); device calls 120 and 126 timed the
    q/k norms in the graph itself (calibrate/runs/qk_norm_probe.py, the graph with and without them,
    interleaved, on two H100s): over five lines (qwen3-8b and olmo-2-7b on both, qwen3-32b once) the
    fixed time a layer (the intercept against their bytes, 4 x (q + kv) a token) is 7.8-14.9 us,
    median 9.0, where the price says four launches, 8.5 us (the 14.9 is qwen3-8b on call 126, whose
    2,048-token point fell to 36 us a layer from call 120's 80); the bytes move at 1.2-3.0 TB/s,
    the fitted elementwise rate's order (1.64 TB/s on the fit runs' H200)."""
    import statistics

    from roofline.pass_costs import LAUNCHES_QK_NORM, paired_lines

    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "h100-2026-12-06"
    terms = load_loop_terms(card="h200", engine="graph")
    priced = LAUNCHES_QK_NORM * terms.prefill_launch_s.value
    lines = {}
    for call in ("call120", "call126"):
        for entry, fixed, per_byte in paired_lines(data / call / "qk-norm.json"):
            lines[call, entry["model"]] = fixed, per_byte
    assert sorted(lines) == [("call120", "olmo-2-7b"), ("call120", "qwen3-32b"), ("call120", "qwen3-8b"),
                             ("call126", "olmo-2-7b"), ("call126", "qwen3-8b")]
    fixed = [f for f, _ in lines.values()]
    assert all(0.85 * priced < f < 1.8 * priced for f in fixed), fixed
    assert 0.95 * priced < statistics.median(fixed) < 1.25 * priced
    assert all(0.7e12 < 1.0 / per_byte < 3.5e12 for _, per_byte in lines.values())


def test_the_launch_count_is_what_the_walks_counted():
    """loop_elementwise_launches against the kernels torch.profiler counted in the loop's prefill
    (the committed walks, twelve models on H100s): the count a layer plus the K/V repeats' two with
    grouped queries (loop_walk_launches), within the pass's own few kernels (embedding, last norm,
    argmax: under 0.4 a layer; 0.36 on the qwen2.5 models)."""
    from roofline.hardware import profiles_dir
    from roofline.model_spec import load_model
    from roofline.pass_costs import launch_s_from_walks, loop_walk_launches

    _, points = launch_s_from_walks([profiles_dir() / p for p in LAUNCH_WALKS])
    assert len(points) == 12
    for p in points:
        assert 0 <= p["launches"] - loop_walk_launches(load_model(p["model"])) < 0.4, (p["model"], p["launches"])


def test_a_walk_the_launch_time_was_not_measured_on_lies_on_its_line():
    """Held out: device call 121 walked qwen3-8b, llama-3.1-8b, gemma-2-9b and gpt-neox-20b (the last
    two no earlier walk had) on one H100. Each launches what loop_elementwise_launches counts (plus
    the repeats with grouped queries, plus under 0.3 a layer of the pass's own), and each model's
    elementwise time a layer at 64 tokens lies within 2.5 us of the line the shipped launch time was
    measured on (calls 110, 112, 117; the twelve models it was measured on lie within 2.0): 63-73 us
    measured, gpt-neox-20b 2.1 us under the line."""
    from roofline.hardware import profiles_dir
    from roofline.model_spec import load_model
    from roofline.pass_costs import launch_line, launch_s_from_walks, loop_walk_launches

    root = Path(__file__).resolve().parents[1]
    value, per_byte = launch_line(launch_s_from_walks([profiles_dir() / p for p in LAUNCH_WALKS])[1])
    _, held = launch_s_from_walks([root / "docs" / "data" / "h100-2026-12-06" / "call121" / "kernel-walk.json"])
    assert [p["model"] for p in held] == ["qwen3-8b", "llama-3.1-8b", "gemma-2-9b", "gpt-neox-20b"]
    for p in held:
        spec = load_model(p["model"])
        assert 0 <= p["launches"] - loop_walk_launches(spec) < 0.3, p["model"]
        assert abs(p["launches"] * value + p["bytes"] * per_byte - p["seconds"]) < 2.5e-6, p["model"]


def test_the_h200_shows_the_launches_the_h100s_priced():
    """Device calls 128-129, the first on an H200 in two sessions (the acceptance card; in no term):
    its kernel walk on qwen3-8b, llama-2-7b, qwen2.5-7b and pythia-6.9b launches what the loop's code
    counts, and the line of its four models alone costs 2.24 us a launch where the shipped term (from
    H100 walks) says 2.13; its q/k norms take 11.8 us a layer of fixed time in the graph (priced
    8.5, the H100s' five lines 7.8-14.9) and its K/V repeats 4.07 and 4.68 (priced 4.22)."""
    from roofline.model_spec import load_model
    from roofline.pass_costs import LAUNCHES_QK_NORM, launch_s_from_walks, loop_walk_launches, paired_lines

    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "h200-2026-12-06"
    terms = load_loop_terms(card="h200", engine="graph")
    value, points = launch_s_from_walks([data / "call128" / "kernel-walk.json"])
    assert json.loads((data / "call128" / "kernel-walk.json").read_text())["gpu"].startswith("NVIDIA H200")
    assert [p["model"] for p in points] == ["qwen3-8b", "llama-2-7b", "qwen2.5-7b", "pythia-6.9b"]
    for p in points:
        spec = load_model(p["model"])
        assert 0 <= p["launches"] - loop_walk_launches(spec) < 0.4, p["model"]
    assert 0.85 < value / terms.prefill_launch_s.value < 1.2
    qk = [fixed for _, fixed, _ in paired_lines(data / "call128" / "qk-norm.json")]
    assert len(qk) == 1 and 0.85 * LAUNCHES_QK_NORM * terms.prefill_launch_s.value < qk[0] < 1.8 * (
        LAUNCHES_QK_NORM * terms.prefill_launch_s.value)
    repeats = [fixed for _, fixed, _ in paired_lines(data / "call129" / "kv-repeat.json")]
    assert len(repeats) == 2 and all(0.8 < r / terms.prefill_kv_repeat_s_per_layer.value < 1.25 for r in repeats)


def test_a_second_h200_prices_the_launches_and_repeats_as_the_h100s_measured_them():
    """The fortieth session's H200 (calibrate/runs/h200-call117.sh's H200 part, another machine than
    calls 128-129's): the walk on llama-2-7b, qwen2.5-7b, qwen3-8b and pythia-6.9b launches what the
    code counts, 2.25 us a launch on its own line (shipped 2.13, from H100 walks); the K/V repeats
    4.03 and 4.04 us a layer for qwen2.5-7b and llama-3.1-8b (shipped 4.22)."""
    from roofline.model_spec import load_model
    from roofline.pass_costs import kv_repeat_s_from_probe, launch_s_from_walks, loop_walk_launches

    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "h200-2026-12-06" / "call117"
    terms = load_loop_terms(card="h200", engine="graph")
    assert json.loads((data / "kernel-walk.json").read_text())["gpu"].startswith("NVIDIA H200")
    value, points = launch_s_from_walks([data / "kernel-walk.json"])
    assert [p["model"] for p in points] == ["llama-2-7b", "qwen2.5-7b", "qwen3-8b", "pythia-6.9b"]
    for p in points:
        assert 0 <= p["launches"] - loop_walk_launches(load_model(p["model"])) < 0.4, p["model"]
    assert value == pytest.approx(2.25e-6, rel=0.01) and 1.0 < value / terms.prefill_launch_s.value < 1.1
    repeats, rpoints = kv_repeat_s_from_probe([data / "kv-repeat.json"])
    assert sorted(p["model"] for p in rpoints) == ["llama-3.1-8b", "qwen2.5-7b"]
    assert all(0.9 < p["fixed_s"] / terms.prefill_kv_repeat_s_per_layer.value < 1.0 for p in rpoints)


def test_a_prefill_graph_timed_alone_runs_at_its_price_with_random_tokens_not_constant_ones():
    """The fortieth session's H200 (calibrate/runs/h200-call101.sh: calibrate/runs/prefill_config_probe.py,
    qwen2.5-7b on 64 slots of 2,304 rows): with every token id 7 its prefill graphs at 512-2,048
    tokens ran 0.90-0.97x the shipped price, with random tokens 0.96-1.05x, the served passes' ~1.0x;
    back to back at 2,048 tokens the SM clock averaged 1,929 MHz with token id 7 and 1,658 with
    random ones under the 700 W cap (docs/serving.md, "What the fortieth session's device calls
    said"; call 104 found the same on an H100)."""
    import csv
    import gzip

    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "h200-2026-12-06" / "call101"
    probe = json.loads((data / "prefill-config.json").read_text())
    assert probe["gpu"] == "NVIDIA H200"
    terms = load_loop_terms(card="h200", engine="graph")
    ratios = {}
    for c in probe["configs"]:
        if c["model"] != "qwen2.5-7b":
            continue
        cost = LoopCost(make_scenario(card="h200", model=c["model"], engine="graph").step, terms, c["rows"],
                        c["slots"], 2048)
        for b, t in c["buckets"].items():
            if int(b) < 512:
                continue
            prompts = c["prompts"][b]
            price = cost.prefill_device_s(float(sum(prompts)), float(sum(n * (n + 1) / 2 for n in prompts)),
                                          float(len(prompts)))
            for phase in ("cool_s", "hot_s", "loaded_s"):
                ratios.setdefault(c["tokens"], []).append(t[phase] / price)
    assert len(ratios["const"]) == len(ratios["random"]) == 18
    assert 0.88 < min(ratios["const"]) and max(ratios["const"]) < 0.98
    assert 0.95 < min(ratios["random"]) and max(ratios["random"]) < 1.07
    assert np.median(ratios["random"]) / np.median(ratios["const"]) > 1.05
    with gzip.open(data / "power-probe.csv.gz", "rt") as fh:
        samples = [(float(r["t_unix_s"]), float(r["sm_mhz"])) for r in csv.DictReader(fh)]
    clocks = {}
    for c in probe["configs"]:
        if c["model"] == "qwen2.5-7b" and c["layout"] == "256":
            start, end = c["buckets"]["2048"]["unix_s"][1:3]  # the back-to-back phase
            clocks[c["tokens"]] = np.mean([mhz for t, mhz in samples if start <= t < end])
    assert clocks["const"] > 1900 and clocks["random"] < 1700


def test_the_shipped_terms_are_the_fit_on_the_fit_runs():
    shipped = load_loop_terms(card="h200", engine="graph")
    assert shipped.fitted_on == FIT
    assert sorted(shipped.held_out) == sorted(n for n in run_names(FOLDER) if n not in FIT)
    again = fit_loop_terms([read_run(FOLDER, n) for n in FIT], kv_repeat_probes=KV_REPEAT_PROBES,
                           launch_walks=LAUNCH_WALKS)
    for name in ("decode_extra_s_per_layer", "prefill_floor_s_per_layer", "prefill_floor_exponent", "host_decode_s",
                 "host_decode_s_per_seq", "host_prefill_s", "host_prefill_s_per_seq", "wake_s", "host_finish_s",
                 "prefill_elementwise_bytes_per_s", "prefill_kv_repeat_s_per_layer", "prefill_launch_s"):
        assert getattr(again, name).value == pytest.approx(getattr(shipped, name).value, rel=1e-6), name
    assert again.host_probe == pytest.approx(shipped.host_probe, rel=1e-9)
    # the figures are physical: a decode graph's extra kernels cost microseconds a layer, a
    # prefill graph's small kernels tens of microseconds a layer (the eager prefill's Python
    # launches took ~380), the host a fraction of a ms, a finishing sequence's exit (blocks
    # freed, a slot's KV copied) tens of microseconds; the elementwise kernels stream below the
    # card's 4.8 TB/s
    assert shipped.prefill_graphs and shipped.prefill_gemm_table == "measurements/h200-probe-gemm.json"
    assert 5e-6 < shipped.decode_extra_s_per_layer.value < 5e-5
    assert 1e-5 < shipped.prefill_floor_s_per_layer.value < 2e-4
    assert 1e-5 < shipped.host_decode_s.value < 5e-4 and shipped.host_prefill_s.value < 2e-3
    assert 1e-5 < shipped.host_finish_s.value < 5e-4
    assert 0.3e12 < shipped.prefill_elementwise_bytes_per_s.value < 4.8e12
    assert json.loads(loop_terms_path("h200", "graph").read_text())["card"] == "h200"


def test_a_runs_host_probe_scales_the_host_terms():
    # a run measured on a machine whose host probe took twice the fit runs' time replays as the
    # terms with every host term doubled; without a probe (or of another shape) it is unscaled

    from roofline.pass_costs import scaled_for_host

    terms = load_loop_terms(card="h200", engine="graph")
    ref = terms.host_probe
    twice = {"decode_host_s": 2 * ref["decode_host_s"], "prefill_host_s": 3 * ref["prefill_host_s"],
             "decode_seqs": ref["decode_seqs"]}
    scaled = scaled_for_host(terms, twice)
    for name in ("host_decode_s", "host_decode_s_per_seq", "host_finish_s"):
        assert getattr(scaled, name).value == pytest.approx(2 * getattr(terms, name).value, rel=1e-12)
    for name in ("host_prefill_s", "host_prefill_s_per_seq"):
        assert getattr(scaled, name).value == pytest.approx(3 * getattr(terms, name).value, rel=1e-12)
    assert scaled.decode_extra_s_per_layer == terms.decode_extra_s_per_layer  # the GPU's terms stay
    assert scaled_for_host(terms, None) is terms
    assert scaled_for_host(terms, {**twice, "decode_seqs": 4}) is terms
    # replay applies it: a run replayed with its own probe = the scaled terms without one
    run = read_run(FOLDER, "qwen2.5-1.5b-short-r60-n400-s3")
    by_hand = scaled_for_host(terms, run.config["host_probe"])
    config = {k: v for k, v in run.config.items() if k != "host_probe"}
    plain = dataclasses.replace(run, run={**run.run, "config": config})
    assert replay(run, FOLDER, terms) == replay(plain, FOLDER, by_hand)
    assert replay(plain, FOLDER, terms) != replay(run, FOLDER, terms)


@pytest.fixture(scope="module")
def rows():
    return {r["run"]: r for r in compare_rows(FOLDER, load_loop_terms(card="h200", engine="graph"))}


@pytest.mark.parametrize("name", ["qwen2.5-1.5b-mixed-r60-n300-s8", "qwen2.5-1.5b-mixed-r80-n400-s1",
                                  "qwen2.5-7b-long-gen-r6-n200-s2", "qwen2.5-1.5b-long-prompt-r20-n200-s11",
                                  "llama-3.2-3b-mixed-r35-n300-s41"])
def test_held_out_runs_within_the_acceptance_bounds(rows, name):
    # held out: none of these set a term (fit on FIT only); bounds: issue 14's acceptance. The
    # first four missed a bound before the host probe and the matmul table (docs/serving.md)
    row = rows[name]
    assert not row["fitted"]
    for key, bound in COMPARED.items():
        if bound is not None:
            assert abs(row[key]["error"]) <= bound, (key, row[key])
    assert row["same_preemption_behaviour"]


def test_every_held_out_run_with_a_host_probe_within_the_bounds_but_the_documented_miss(rows):
    held = [r for r in rows.values() if not r["fitted"]]
    assert len(held) == 10
    for r in held:
        for key, bound in COMPARED.items():
            if bound is not None:
                miss = EARLIER_MISSES.get(("h200-graph-probe", r["run"], key), bound)
                assert abs(r[key]["error"]) <= miss, (r["run"], key, r[key])
        assert r["same_preemption_behaviour"], r["run"]


#: docs/serving.md's misses among the other held-out folders, each with how far off it is. With the
#: host probe (calls 11, 12): TTFT p99 of runs whose tail is preemptions' recomputes (the same
#: stream measured twice differed by up to 39% there: benchmarks/serving_repeatability.py), and
#: qwen2.5-0.5b, whose decode steps the step model prices ~5% slow. Without it (calls 5-7, 9): the
#: machines' host speed is unknown to the replay. The eleventh session's attention terms (fitted on
#: the attention probes) moved five of these tails by 2-11 points (call 11's qwen2.5-0.5b +23% -> +35%,
#: call 12's qwen2.5-1.5b -18% -> -20% and qwen2.5-7b -27% -> -29%, call 17's llama-3.2-3b -21% ->
#: -23%; call 5's qwen2.5-1.5b at 40 req/s TTFT p50 -8% -> -11%): docs/serving.md. The twelfth
#: session's softmax warp floor (a decode step at 1,280 positions and few sequences pays the warp's walk;
#: the loop's decode extra refitted 15.0 -> 12.4 us a layer) moved them again: call 11's qwen2.5-0.5b
#: +35% -> -4% and mistral-7b-v0.3 +26% -> +13%, call 12's qwen2.5-1.5b -20% -> -6%, inside; call 17's
#: llama-3.2-3b -23% -> -36%, call 12's qwen2.5-7b at 25 req/s -29% -> -35% and at 22 req/s -18% -> -23%,
#: its TTFT p50 in call 13 +11%, call 14's llama-3.2-1b TPOT p50 -9% -> -10.5%; calls 5-7's host-less
#: runs by 1-2 points. The fourteenth session's decode-attention ramp (the loop's decode extra refitted
#: 12.4 -> 10.7 us a layer): call 14's qwen2.5-0.5b TTFT p99 -19% -> -24%, call 12's qwen2.5-7b at 25
#: req/s -35% -> -32%, call 17's llama-3.2-3b -36% -> -35%
EARLIER_MISSES = {
    ("h200-graph-probe", "qwen2.5-3b-mixed-r40-n300-s43", "ttft_p99_s"): 0.32,
    ("h200-graph-call11", "mistral-7b-v0.3-mixed-r20-n200-s61", "ttft_p99_s"): 0.38,
    ("h200-graph-call11", "qwen2.5-0.5b-mixed-r60-n400-s60", "ttft_p99_s"): 0.37,
    ("h200-graph-call12", "qwen2.5-0.5b-mixed-r60-n400-s60", "ttft_p99_s"): 0.32,
    ("h200-graph-call12", "qwen2.5-7b-mixed-r25-n300-s1", "ttft_p99_s"): 0.37,
    ("h200-graph-call12", "qwen2.5-7b-mixed-r22-n250-s54", "ttft_p99_s"): 0.26,
    ("h200-graph-call13-sync", "qwen2.5-7b-mixed-r22-n250-s54", "ttft_p50_s"): 0.13,
    ("h200-graph-call14", "llama-3.2-1b-mixed-r40-n300-s75", "tpot_p50_s"): 0.13,
    ("h200-graph-call12", "qwen2.5-1.5b-mixed-r55-n300-s51", "ttft_p99_s"): 0.22,
    ("h200-graph-call14", "qwen2.5-0.5b-mixed-r55-n400-s77", "ttft_p99_s"): 0.26,
    ("h200-graph-call17", "llama-3.2-3b-mixed-r32-n300-s92", "ttft_p99_s"): 0.38,
    # call 85 (a check after the fact, twenty-third session): -30.0%, its decode graph at 1.046x its
    # price on that machine (1.005-1.012x on three earlier ones; benchmarks/serving_tail_sensitivity.py)
    ("h200-graph-call85", "llama-3.2-1b-mixed-r65-n400-s302", "ttft_p99_s"): 0.33,
    # call 88 (a machine whose host probe read 2.2-4.9x the fit runs' and whose GPU ran these decodes
    # 1.029x and 1.049x their price): the tight pool's TTFT p50 -15.7%, the bursty stream's -30.0%
    ("h200-graph-call88", "qwen2.5-1.5b-mixed-r40-n300-s405", "ttft_p50_s"): 0.18,
    ("h200-graph-call88", "qwen2.5-7b-bursty-mixed-s300", "ttft_p50_s"): 0.33,
    # call 89 (the first runs with the device probe, which read each run's decode speed within 1.3%):
    # two of the five streams served again for their earlier misses missed again, the other way
    # round from before for llama-3.2-3b (-21.9% on call 17, +25.8% here; qwen2.5-0.5b +31-34% on
    # calls 11-12, +21.8% here): tails at the preemption onset, docs/serving.md
    ("h200-graph-call89", "llama-3.2-3b-mixed-r32-n300-s92", "ttft_p99_s"): 0.27,
    ("h200-graph-call89", "qwen2.5-0.5b-mixed-r60-n400-s60", "ttft_p99_s"): 0.23,
    # call 90 (layouts no earlier run had): pythia-6.9b overloaded, its decode graphs 0.95-0.98x their
    # price (the GPT-NeoX layout priced ~4% slow, its device probe read it): TTFT p50 +13.8%; +19.1% once
    # its prefill (full attention: no K/V repeats) dropped the repeats' fixed time (calls 109-110), while
    # its preemptions came to the measured 25 (from 22) and its TTFT p99 to +7.9% (from +10.1%)
    ("h200-graph-call90", "pythia-6.9b-mixed-r20-n200-s605", "ttft_p50_s"): 0.20,
    # calls 91 and 92 (the pool from memory, 64-256 slots; call 92 is call 91's five streams again on
    # the same machine): the streams measured within 1-6% of themselves (TTFT p99 21.7 / 22.9 ms,
    # 512 / 495 ms), the replays moved with each run's host probe -- qwen2.5-1.5b at 90 req/s +6.9%
    # then +166.7%, its probe reading 1.0x then 2.5x the fit runs' host, the run's host ~1.1x both
    # times (docs/serving.md); llama-3.1-8b overloaded at 250 req/s, its TTFT p50 -20.8% and -12.9%
    ("h200-graph-call91", "llama-3.1-8b-short-r250-n600-s703", "ttft_p50_s"): 0.22,
    ("h200-graph-call91", "qwen2.5-1.5b-mixed-r120-n500-s702", "ttft_p50_s"): 0.12,
    ("h200-graph-call92", "llama-3.1-8b-short-r250-n600-s703", "ttft_p50_s"): 0.14,
    ("h200-graph-call92", "llama-3.1-8b-short-r250-n600-s703", "ttft_p99_s"): 0.29,
    ("h200-graph-call92", "qwen2.5-1.5b-mixed-r120-n500-s702", "ttft_p50_s"): 0.25,
    ("h200-graph-call92", "qwen2.5-1.5b-mixed-r90-n400-s701", "ttft_p50_s"): 0.12,
    ("h200-graph-call92", "qwen2.5-1.5b-mixed-r90-n400-s701", "ttft_p99_s"): 1.70,
    # calls 98-100 (the thirtieth session, H200s; rates picked beforehand): qwen2.5-7b with 192 slots at
    # 120 req/s, TPOT p50 -12.4% (its decode steps ran 1.041x their price on that machine); qwen2.5-14b
    # with 128 slots at 120 req/s, overloaded, TTFT p50 -12.2% (its prefill graphs 1.053x)
    ("h200-graph-call99", "qwen2.5-7b-short-r120-n500-s761", "tpot_p50_s"): 0.14,
    ("h200-graph-call100", "qwen2.5-14b-short-r120-n500-s751", "ttft_p50_s"): 0.14,
    # call 106 (the thirty-third session, an H200; rates picked before call 105): phi-3-mini-4k's short
    # requests with its 128 slots full, TTFT p99 +58.5%: its prefill graphs ran 0.945x their price (0.966
    # on an H100, call 105: priced a few percent slow on both cards), and at +-5% of GPU time the replay
    # ranges 29.3-52.8 ms against 29.5 measured (compare-serving --pass-time-spread 0.05)
    ("h200-graph-call106", "phi-3-mini-4k-short-r140-n500-s782", "ttft_p99_s"): 0.62,
    # the fortieth session's H200 (scripts and rates of the thirty-fourth to thirty-eighth sessions):
    # gemma-2-9b's TTFT p50 +12.8% (its prefill graphs 0.957x their price on that machine, 1.021x on
    # call 119's H100); call 138's chunked stream at 1.15 x choose-server's rate, 95% of the
    # capacity, TTFT p50 +15.8% (its p99 +4.1%); docs/serving.md, "What the fortieth session's
    # device calls said"
    ("h200-graph-call131", "gemma-2-9b-mixed-r16-n250-s821", "ttft_p50_s"): 0.14,
    ("h200-graph-call138", "qwen2.5-7b-long-prompt-r21p4-n400-s861", "ttft_p50_s"): 0.17,
    # the forty-sixth session's H200 (calls 141-142's request files, rates picked before the forty-first
    # session): llama-3.2-3b's chat stream at 20 req/s runs 83-88 sequences, at the edge of the 64 -> 96
    # decode bucket; its decode steps ran 1.033x their price there and its TPOT p50 is -17.9% as priced
    # (benchmarks/serving_speed_edge.py: 16.5 ms at 1.00x, 19.7 at 1.04x, 20.1 measured); the same stream
    # at 30 req/s and qwen2.5-7b's at 25, both past capacity, TTFT p50 -59.9% and -20.3%, TTFT p99
    # -35.8% (docs/serving.md, "What the forty-sixth session's device calls said")
    ("h200-graph-call141", "llama-3.2-3b-chat-s885-r20", "tpot_p50_s"): 0.20,
    ("h200-graph-call141", "llama-3.2-3b-chat-s885-r30", "ttft_p50_s"): 0.62,
    ("h200-graph-call141", "llama-3.2-3b-chat-s885-r30", "ttft_p99_s"): 0.38,
    ("h200-graph-call141", "qwen2.5-7b-chat-s881-r25", "ttft_p50_s"): 0.22,
    ("h200-graph", "qwen2.5-1.5b-mixed-r0-n400-s1", "throughput_tok_s"): 0.10,
    ("h200-graph", "qwen2.5-1.5b-mixed-r40-n400-s1", "ttft_p50_s"): 0.12,
    ("h200-graph", "qwen2.5-1.5b-mixed-r50-n300-s13", "ttft_p50_s"): 0.11,
    ("h200-graph", "qwen2.5-1.5b-mixed-r60-n300-s8", "ttft_p50_s"): 0.31,
    ("h200-graph", "qwen2.5-1.5b-mixed-r80-n400-s1", "ttft_p50_s"): 0.21,
    ("h200-graph", "qwen2.5-7b-mixed-r25-n300-s1", "ttft_p99_s"): 0.43,  # 0.417 with the attention-kernel table (session 15)
}


@pytest.mark.parametrize("sub", ["h200-graph", "h200-graph-call9", "h200-graph-call11", "h200-graph-call12",
                                 "h200-graph-call13-sync", "h200-graph-call13-spin", "h200-graph-call14",
                                 "h200-graph-call15", "h200-graph-call17", "h200-graph-call85",
                                 "h200-graph-call88", "h200-graph-call89",
                                 "h200-graph-call90", "h200-graph-call91", "h200-graph-call92",
                                 "h200-graph-call98", "h200-graph-call99", "h200-graph-call100",
                                 "h200-graph-call106", "h200-graph-call117", "h200-graph-call131",
                                 "h200-graph-call132", "h200-graph-call133", "h200-graph-call137",
                                 "h200-graph-call138", "h200-graph-call141"])
def test_other_held_out_runs_within_the_bounds_but_the_documented_misses(sub):
    folder = FOLDER.parent / sub
    terms = load_loop_terms(card="h200", engine="graph")
    rows = compare_rows(folder, terms, fitted=())
    assert len(rows) == {"h200-graph": 24, "h200-graph-call9": 6, "h200-graph-call11": 12, "h200-graph-call12": 14,
                         "h200-graph-call13-sync": 3, "h200-graph-call13-spin": 3, "h200-graph-call14": 10,
                         "h200-graph-call15": 6, "h200-graph-call17": 7, "h200-graph-call85": 9,
                         "h200-graph-call88": 7, "h200-graph-call89": 7,
                         "h200-graph-call90": 5, "h200-graph-call91": 5, "h200-graph-call92": 5,
                         "h200-graph-call98": 1, "h200-graph-call99": 4, "h200-graph-call100": 4,
                         "h200-graph-call106": 6, "h200-graph-call117": 1, "h200-graph-call131": 3,
                         "h200-graph-call132": 1, "h200-graph-call133": 6, "h200-graph-call137": 10,
                         "h200-graph-call138": 5, "h200-graph-call141": 9}[sub]
    chunked = [r for r in rows if r["policy"] == "chunked"]
    assert len(chunked) == {"h200-graph-call11": 2, "h200-graph-call14": 9, "h200-graph-call15": 6,
                            "h200-graph-call17": 2, "h200-graph-call85": 3,
                            "h200-graph-call88": 1, "h200-graph-call90": 3, "h200-graph-call91": 1,
                            "h200-graph-call92": 1, "h200-graph-call106": 2, "h200-graph-call138": 5,
                            "h200-graph-call141": 1}.get(sub, 0)
    eager_chunks = sub == "h200-graph-call11"
    # call 11's chunked runs: the loop (before its chunk graphs) ran chunks after cached tokens
    # eagerly, the terms price graphs: far too fast, not modelled (docs/serving.md)
    for r in chunked if eager_chunks else []:
        assert r["ttft_p50_s"]["error"] < -0.4
    for r in rows:
        assert not r["fitted"]
        if r["policy"] == "chunked" and eager_chunks:
            continue
        for key, bound in COMPARED.items():
            if bound is not None:
                assert abs(r[key]["error"]) <= EARLIER_MISSES.get((sub, r["run"], key), bound), (r["run"], key, r[key])
        # a pool one request from full: 1 preemption measured and none simulated (call 17's mistral-7b-v0.3
        # at 18 req/s, one simulated and none measured from the eleventh session's attention terms, is the
        # same again since the twelfth session's softmax warp floor)
        borderline = {("h200-graph", "qwen2.5-1.5b-mixed-r40-n200-s21"): (1, 0)}
        if (sub, r["run"]) not in borderline:
            assert r["same_preemption_behaviour"], r["run"]
        else:
            assert (r["preemptions"]["measured"], r["preemptions"]["simulated"]) == borderline[(sub, r["run"])]


def test_a_decode_buckets_edge_amplifies_the_step_speed():
    """The forty-sixth session's H200 (docs/serving.md, "What the forty-sixth session's device calls
    said"; benchmarks/serving_speed_edge.py): llama-3.2-3b's chat stream at 20 req/s keeps 83-88
    sequences running, past the 64 -> 96 decode bucket, so its replayed TPOT p50 moves far more than
    the decode steps' speed (14.9 -> 19.7 ms from 0.98x to 1.04x the price, +32%); qwen2.5-7b's chat
    stream at 15 req/s, inside the 64-slot bucket, about in proportion (11.1 -> 12.2 ms, +10%)."""
    folder = FOLDER.parent / "h200-graph-call141"
    terms = load_loop_terms(card="h200", engine="graph")

    def tpot_p50(name, scale):
        run = read_run(folder, name)
        scales = {b: scale for b in capture_sizes(run.config["max_num_seqs"])}
        return replay(run, folder, terms, decode_time_scales=scales)["tpot_p50_s"]

    edge = [tpot_p50("llama-3.2-3b-chat-s885-r20", x) for x in (0.98, 1.04)]
    inside = [tpot_p50("qwen2.5-7b-chat-s881-r15", x) for x in (0.98, 1.04)]
    assert edge[1] / edge[0] > 1.25
    assert 1.03 < inside[1] / inside[0] < 1.15
    # the measured run (20.09 ms at 1.033x its price) lies beyond the replay at the price
    assert read_run(folder, "llama-3.2-3b-chat-s885-r20").summary["tpot_p50_s"] > 1.15 * tpot_p50(
        "llama-3.2-3b-chat-s885-r20", 1.0)


def test_the_chunk_table_prices_a_chunk_after_cached_tokens():
    """Call 14's chunked runs: a mixed iteration whose first chunk continues after cached tokens
    (one chunk in the pass, so its cached count is read off the pairs) ran at ~1.04-1.12x the
    price without the chunk table (the copied-out cache's bytes only), and within a few percent of
    it with the table (roofline.chunk_table, call 15's probe); iterations without such a chunk
    are the same either way."""
    folder = FOLDER.parent / "h200-graph-call14"
    terms = load_loop_terms(card="h200", engine="graph")
    assert terms.chunk_attention_table == "measurements/h200-probe-chunk.json"
    bare = terms.model_copy(update={"chunk_attention_table": None})
    with_table, without = [], []
    for name in run_names(folder):
        run = read_run(folder, name)
        c = run.config
        if c["policy"] != "chunked":
            continue
        step = make_scenario(card="h200", model=c["model"], engine="graph").step
        costs = [LoopCost(step, t, c["max_model_len"], c["max_num_seqs"], c["max_num_batched_tokens"])
                 for t in (terms, bare)]
        for it in run.iterations:
            tokens, pairs = float(it["prefill_tokens"]), float(it["prefill_pairs"])
            if it["kind"] != "mixed" or it["prefill_seqs"] != 1:
                continue
            cached = (pairs - tokens * (tokens + 1) / 2) / tokens
            if cached < 0.5:
                continue
            slots = int(it["decode_seqs"]) + 1  # the decode graph covers the prefilling slot too
            prices = [cost.prefill_device_s(tokens, pairs, 1.0, tokens, cached) + cost.decode_device_s[slots]
                      for cost in costs]
            with_table.append(it["device_s"] / prices[0])
            without.append(it["device_s"] / prices[1])
    assert len(with_table) > 500
    assert 1.07 < np.median(without) < 1.15
    assert 0.97 < np.median(with_table) < 1.05


def test_a_probe_after_the_run_counts_half():
    # roofline.pass_costs.run_host_probe: before only -> itself; with a probe after of the same
    # shape -> the geometric mean; another shape after -> the one before; replay uses it
    from roofline.pass_costs import run_host_probe

    before = {"decode_host_s": 1e-4, "prefill_host_s": 2e-4, "decode_seqs": 16}
    assert run_host_probe({"host_probe": before}) is before
    assert run_host_probe({}) is None
    both = run_host_probe({"host_probe": before, "host_probe_after": {**before, "decode_host_s": 4e-4,
                                                                       "prefill_host_s": 2e-4}})
    assert both["decode_host_s"] == pytest.approx(2e-4, rel=1e-12) and both["prefill_host_s"] == pytest.approx(2e-4)
    assert run_host_probe({"host_probe": before, "host_probe_after": {**before, "decode_seqs": 4}}) is before
    run = read_run(FOLDER, "qwen2.5-1.5b-short-r60-n400-s3")
    terms = load_loop_terms(card="h200", engine="graph")
    slow = dataclasses.replace(run, run={**run.run, "config": {**run.config, "host_probe_after": {
        **run.config["host_probe"], "decode_host_s": 9 * run.config["host_probe"]["decode_host_s"],
        "prefill_host_s": 9 * run.config["host_probe"]["prefill_host_s"]}}})
    assert replay(slow, FOLDER, terms)["tpot_p50_s"] > replay(run, FOLDER, terms)["tpot_p50_s"]


def test_the_device_probe_foretells_each_runs_decode_speed():
    """Calls 89 and 90's runs (the first that carry the device probe: each decode bucket's graph
    timed in the run's own process before its clock): the decode speed the probe foretold, weighted
    by the run's decode steps per bucket, against the speed the run's decode steps then ran at, both
    over the price. Measured: within 1.25% on all twelve (call 89's seven: mean -0.6%; call 90's
    five within 0.8%), while the runs' decode speeds spread 0.958-1.038x their price (two machine
    starts, nine models): the probe reads what the price misses for that model on that machine
    (pythia-6.9b's layout priced ~4% slow), which a probe 2% off would not. Calls 91-92 (96-256
    slots): within 2.3% (llama-3.1-8b overloaded, 1.016 measured, 0.993 foretold); the H100's ten
    runs (its decode priced by the transferred terms): within 1.8%."""
    from roofline.serving_replay import pass_ratios
    from roofline.serving_runs import read_run, run_names

    speeds = []
    for sub, count, card, tol in (("h200-graph-call89", 7, "h200", 0.02), ("h200-graph-call90", 5, "h200", 0.02),
                                  ("h200-graph-call91", 5, "h200", 0.025), ("h200-graph-call92", 5, "h200", 0.025),
                                  ("h100-sxm-graph-call1", 6, "h100-sxm", 0.02),
                                  ("h100-sxm-graph-call3", 4, "h100-sxm", 0.02)):
        terms = load_loop_terms(card=card, engine="graph")
        folder = FOLDER.parent / sub
        names = run_names(folder)
        assert len(names) == count
        for name in names:
            ratios = pass_ratios(read_run(folder, name), terms)
            assert ratios["probe"] is not None, name
            assert ratios["probe"] == pytest.approx(ratios["decode"], abs=tol), name
            speeds.append(ratios["decode"])
    assert max(speeds) - min(speeds) > 0.07  # the spread the probe reads
