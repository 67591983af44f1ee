"""Static batching's waste and the static-vs-continuous simulation (roofline.batching, roofline.serving)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.batching import Requests, interleave, parse_mix, read_requests, token_accounting
from roofline.errors import RooflineError
from roofline.prefill import prefill, static_prefill_work
from roofline.scenario import make_scenario
from roofline.serving import serve_continuous, serve_static, static_batch_times
from roofline.step import PassWork, decode_work, prefill_work

CARD, MODEL = "rtx3060", "qwen2.5-1.5b"


@pytest.fixture(scope="module")
def step():
    return make_scenario(card=CARD, model=MODEL, calibration="auto").step


@pytest.fixture(scope="module")
def pure_step():
    return make_scenario(card="h200", model="qwen2.5-7b", calibration=None).step


# ---- token accounting: exact ----------------------------------------------------------------
def test_lesson_mix_accounting_is_exact():
    # lesson section 5: 8 x 32 + 8 x 256 = 2,304 needed; 16 x 256 = 4,096 slots; 43.75% wasted
    acc = token_accounting(interleave(parse_mix("8x32,8x256"))[0])
    assert (acc["tokens_needed"], acc["slots_used"], acc["waste_fraction"]) == (2304, 4096, 0.4375)
    assert acc["batches"] == 1 and acc["wasted_slots"] == 1792


def test_self_check_question_is_exact():
    # lesson, self-check questions: 30 x 20 + 2 x 1,000 in one batch of 32 -> 91.875%
    acc = token_accounting(interleave(parse_mix("30x20,2x1000"))[0], 32)
    assert (acc["tokens_needed"], acc["slots_used"]) == (2600, 32000)
    assert acc["waste_fraction"] == 0.91875


def test_mix_is_interleaved_round_robin_then_cut_into_batches():
    gen, cls = interleave(parse_mix("2x5,1x7,3x1"))
    assert gen.tolist() == [5, 7, 1, 5, 1, 1]
    assert cls.tolist() == [0, 1, 2, 0, 2, 2]
    acc = token_accounting(gen, 4)  # batches [5,7,1,5] and [1,1]
    assert acc["slots_used"] == 4 * 7 + 2 * 1 and acc["tokens_needed"] == 20 and acc["batches"] == 2


def test_api_waste_without_card_has_no_timings():
    r = roofline.waste(mix="8x32,8x256", batch=8)
    # two batches of [32,256,32,256,...]: each 8 x 256
    assert r["slots_used"] == 2 * 8 * 256 and r["waste_fraction"] == 0.4375
    assert "short_request_slowdown" not in r and "e2e_in_batch_s" not in r["classes"][0]


@pytest.mark.parametrize("text", ["8x", "x32", "0x32", "8x0", "8x32,", "8*32", "-1x32", "8x3.5", "eightx32"])
def test_bad_mix_is_a_one_line_error_naming_the_item(text):
    with pytest.raises(RooflineError) as exc:
        parse_mix(text)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("mix: item ") and exc.value.field == "mix"


# ---- the slowdown -------------------------------------------------------------------------
def test_lesson_slowdown_whole_batch(step):
    # lesson section 5: short request 5.722 s in the static batch vs 0.817 s alone, 7.0x;
    # acceptance: 5.5x to 8.5x under the whole-batch policy
    r = roofline.waste(mix="8x32,8x256", card=CARD, model=MODEL)
    short = r["classes"][0]
    assert short["gen_tokens"] == 32
    assert 5.5 <= r["short_request_slowdown"] <= 8.5
    assert r["short_request_slowdown"] == pytest.approx(short["e2e_in_batch_s"] / short["e2e_alone_s"])
    # the absolute times within 25% of the lesson's (its CPU was busy: section 2's caveat)
    assert short["e2e_in_batch_s"] == pytest.approx(5.722, rel=0.25)
    assert short["e2e_alone_s"] == pytest.approx(0.817, rel=0.25)


def test_early_return_shrinks_the_slowdown_but_not_to_one():
    whole = roofline.waste(mix="8x32,8x256", card=CARD, model=MODEL)["short_request_slowdown"]
    early = roofline.waste(mix="8x32,8x256", card=CARD, model=MODEL, return_policy="early-return")
    assert 1.0 < early["short_request_slowdown"] < whole / 3
    # the long requests are unaffected by the policy: they end with the batch either way
    assert early["classes"][1]["slowdown"] == pytest.approx(
        roofline.waste(mix="8x32,8x256", card=CARD, model=MODEL)["classes"][1]["slowdown"]
    )


def test_static_batch_steps_follow_the_definition(step):
    # every member keeps decoding: step i of a batch of n costs pass_s(decode_work(n, n * (prompt + i)))
    prompts, gens = np.full(16, 128), np.array([32, 256] * 8)
    pre, cum = static_batch_times(step, prompts, gens)
    assert pre == pytest.approx(float(prefill(step, 16, 128)["ttft_s"]), rel=1e-12)
    direct = sum(step.pass_s(decode_work(16.0, 16.0 * (128 + i))) for i in range(1, 256))
    assert cum[-1] == pytest.approx(direct, rel=1e-12) and len(cum) == 256


# ---- one pass model: the float path and the array path agree ---------------------------------
@settings(max_examples=40)
@given(
    d=st.integers(0, 512), kv=st.integers(0, 2_000_000), prompts=st.lists(st.integers(1, 4096), min_size=0, max_size=5),
)
def test_float_path_equals_array_path(d, kv, prompts):
    for model in (make_scenario(card=CARD, model=MODEL).step,
                  make_scenario(card="h200", model="qwen2.5-7b", calibration=None).step):
        p = np.array(prompts, dtype=float)
        tokens, pairs = float(p.sum()), float((p * (p + 1) / 2).sum())
        work = PassWork(float(d), float(kv), tokens, pairs, float(len(p)))
        as_float = model.pass_s(work)
        assert type(as_float) is float
        as_array = model.pass_s(PassWork(*(None if x is None else np.array([x]) for x in work)))
        assert as_float == pytest.approx(float(as_array[0]), rel=1e-12)
        assert as_float == pytest.approx(float(model.pass_breakdown(work)["step_s"]), rel=1e-12)
        if len(p):
            # a ragged prefill = the work of each prompt summed, the weights read once
            works = [static_prefill_work(1.0, x) for x in p]
            summed = prefill_work(sum(w.prefill_tokens for w in works), sum(w.prefill_pairs for w in works),
                                  float(len(p)))
            assert model.pass_s(summed) == pytest.approx(model.pass_s(prefill_work(tokens, pairs, float(len(p)))),
                                                         rel=1e-12)
            # and equal prompts give exactly roofline.prefill
            same = model.pass_s(prefill_work(len(p) * p[0], len(p) * p[0] * (p[0] + 1) / 2, float(len(p))))
            assert same == pytest.approx(float(prefill(model, len(p), p[0])["ttft_s"]), rel=1e-12)


def test_a_pass_that_only_prefills_pays_the_prefill_overhead():
    # v0.1 charged max(decode, prefill) overhead to a continuous pass with no running sequence,
    # but the prefill's own overhead to the same pass in the static server: now both charge the latter
    from roofline.calibration import Calibration

    cal = Calibration(card="rtx3060", engine="x", layer_overhead_s=0.01, prefill_overhead_s=0.002)
    model = make_scenario(card=CARD, model=MODEL, calibration=cal).step
    assert model.overhead_s(0.0, 128.0) == 0.002
    assert model.overhead_s(4.0, 128.0) == pytest.approx(0.01 * 28)
    assert model.overhead_s(4.0, 0.0) == pytest.approx(0.01 * 28)
    c = serve_continuous(model, [128], [1], None, 4)
    st_ = serve_static(model, np.array([128]), np.array([1]), None, 4)
    assert c.ttft_s[0] == pytest.approx(st_.ttft_s[0], rel=1e-12)


# ---- a slow, obvious reference simulator ---------------------------------------------------
def reference_continuous(model, prompts, gens, arrivals, slots):
    """Per-request state and the core's pass_s; no cleverness."""
    n = len(gens)
    order = sorted(range(n), key=lambda r: (arrivals[r], r))
    produced = {}
    ttft, finish = [None] * n, [None] * n
    t, queue, passes, useful = 0.0, list(order), 0, 0
    while queue or produced:
        if not produced and arrivals[queue[0]] > t:
            t = arrivals[queue[0]]
        new = []
        while queue and len(produced) + len(new) < slots and arrivals[queue[0]] <= t:
            new.append(queue.pop(0))
        kv = sum(prompts[r] + produced[r] for r in produced)
        pt = sum(prompts[r] for r in new)
        pairs = sum(prompts[r] * (prompts[r] + 1) / 2 for r in new)
        t += float(model.pass_s(PassWork(float(len(produced)), float(kv), float(pt), float(pairs), float(len(new)))))
        passes += 1
        for r in list(produced):
            produced[r] += 1
        for r in new:
            produced[r] = 1
            ttft[r] = t - arrivals[r]
        useful += len(produced)
        for r in [r for r in produced if produced[r] == gens[r]]:
            finish[r] = t
            del produced[r]
    return np.array(ttft), np.array(finish) - np.array(arrivals), passes, useful


def reference_static(model, prompts, gens, arrivals, slots, policy):
    n = len(gens)
    order = sorted(range(n), key=lambda r: (arrivals[r], r))
    ttft, finish = [None] * n, [None] * n
    t, passes = 0.0, 0
    while order:
        if arrivals[order[0]] > t:
            t = arrivals[order[0]]
        members = [r for r in order if arrivals[r] <= t][:slots]
        order = [r for r in order if r not in members]
        p = np.array([prompts[r] for r in members], dtype=float)
        t += float(model.pass_s(prefill_work(float(p.sum()), float((p * (p + 1) / 2).sum()), float(len(p)))))
        for r in members:
            ttft[r] = t - arrivals[r]
        longest = max(gens[r] for r in members)
        done_at = {1: t}
        for i in range(1, longest):
            t += float(model.pass_s(decode_work(float(len(members)), float(p.sum() + len(members) * i))))
            done_at[i + 1] = t
        for r in members:
            finish[r] = t if policy == "whole-batch" else done_at[gens[r]]
        passes += longest
    return np.array(ttft), np.array(finish) - np.array(arrivals), passes


stream = st.integers(1, 14).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(1, 300), min_size=n, max_size=n),
        st.lists(st.integers(1, 40), min_size=n, max_size=n),
        st.one_of(st.none(), st.lists(st.floats(0, 3), min_size=n, max_size=n)),
        st.integers(1, 6),
    )
)


@settings(max_examples=40)
@given(stream)
def test_simulators_match_the_reference(s):
    prompts, gens, arrivals, slots = s
    model = make_scenario(card=CARD, model=MODEL).step
    arr = [0.0] * len(gens) if arrivals is None else arrivals
    c = serve_continuous(model, prompts, gens, arrivals, slots)
    ttft, e2e, passes, useful = reference_continuous(model, prompts, gens, arr, slots)
    assert c.passes == passes and c.useful_slot_steps == useful == sum(gens)
    np.testing.assert_allclose(c.ttft_s, ttft, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(c.e2e_s, e2e, rtol=1e-9, atol=1e-9)
    for policy in ("whole-batch", "early-return"):
        s_ = serve_static(model, prompts, gens, arrivals, slots, policy)
        ttft, e2e, passes = reference_static(model, prompts, gens, arr, slots, policy)
        assert s_.passes == passes
        np.testing.assert_allclose(s_.ttft_s, ttft, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(s_.e2e_s, e2e, rtol=1e-9, atol=1e-9)


# ---- properties -----------------------------------------------------------------------------
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=200), st.one_of(st.none(), st.integers(1, 64)))
def test_waste_is_in_unit_interval(gens, batch):
    w = token_accounting(gens, batch)["waste_fraction"]
    assert 0.0 <= w < 1.0
    # and zero exactly when every batch's members are equal
    starts = range(0, len(gens), batch or len(gens))
    uniform = all(len(set(gens[s:s + (batch or len(gens))])) == 1 for s in starts)
    assert (w == 0.0) == uniform


@given(st.integers(1, 5000), st.integers(1, 300), st.one_of(st.none(), st.integers(1, 64)))
def test_equal_lengths_waste_nothing(gen, n, batch):
    assert token_accounting([gen] * n, batch)["waste_fraction"] == 0.0


@settings(max_examples=30)
@given(
    st.lists(st.tuples(st.integers(1, 2048), st.integers(1, 300)), min_size=1, max_size=120),
    st.integers(1, 48),
    st.one_of(st.none(), st.floats(0.1, 200.0)),
    st.integers(0, 2**31),
)
def test_continuous_never_idles_more_than_static(reqs, slots, rate, seed):
    model = make_scenario(card=CARD, model=MODEL).step
    stream_ = Requests(np.array([p for p, _ in reqs]), np.array([g for _, g in reqs]))
    if rate is not None:
        stream_ = stream_.with_poisson_arrivals(rate, seed)
    args = (model, stream_.prompt_tokens, stream_.gen_tokens, stream_.arrival_s, slots)
    c, s = serve_continuous(*args), serve_static(*args)
    assert c.idle_slot_steps <= s.idle_slot_steps
    assert c.useful_slot_steps == s.useful_slot_steps == int(stream_.gen_tokens.sum())


@settings(max_examples=10)
@given(st.integers(0, 2**31), st.floats(0.5, 50.0))
def test_same_seed_same_answer(seed, rate):
    kw = dict(mix="4x16,2x200", count=60, batch=8, arrival_rate=rate, seed=seed)
    a = roofline.simulate(CARD, MODEL, **kw)
    b = roofline.simulate(CARD, MODEL, **kw)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # another seed, other arrivals: every request's TTFT (first token - arrival) moves (a summary
    # percentile need not: under a light load each request is served alone, in overload the
    # makespan is the service time)
    one = roofline.simulate(CARD, MODEL, **kw, keep_requests=True)["per_request"]["static"]["ttft_s"]
    other = roofline.simulate(CARD, MODEL, **{**kw, "seed": seed + 1}, keep_requests=True)["per_request"]["static"]
    assert not np.array_equal(other["ttft_s"], one)


def test_all_at_zero_without_a_rate():
    r = roofline.simulate(CARD, MODEL, batch=16, mix="8x32,8x256")
    # one batch of 16 at t=0, both ways: the same passes and the lesson's waste
    assert r["static"]["waste_fraction"] == 0.4375 == r["continuous"]["waste_fraction"]
    assert r["static"]["passes"] == r["continuous"]["passes"] == 256
    assert r["meta"]["arrivals"] == "all at 0"


# ---- continuous beats static on a mixed stream -----------------------------------------------
def test_continuous_beats_static_on_a_mixed_stream():
    # offered 6 req/s of the lesson's mix: more than either server sustains (docs/batching.md)
    r = roofline.simulate(CARD, MODEL, batch=16, mix="8x32,8x256", count=2000, arrival_rate=6.0, seed=1)
    st_, co = r["static"], r["continuous"]
    assert co["throughput_tok_s"] > 1.5 * st_["throughput_tok_s"]
    assert co["mean_occupancy"] > 0.95 and st_["mean_occupancy"] == pytest.approx(0.5625, abs=0.01)
    short = next(c for c in r["classes"] if c["gen_tokens"] == 32)
    assert short["continuous_e2e_p50_s"] < short["static_e2e_p50_s"] / 3
    assert co["e2e_p99_s"] < st_["e2e_p99_s"] / 3


def test_under_light_load_continuous_wins_on_latency_not_throughput():
    # 2 req/s: both servers keep up, so both deliver the offered tokens; static still makes
    # short requests wait for a batch's longest member and for the batch before it
    r = roofline.simulate(CARD, MODEL, batch=16, mix="8x32,8x256", count=2000, arrival_rate=2.0, seed=1)
    st_, co = r["static"], r["continuous"]
    assert co["throughput_tok_s"] == pytest.approx(st_["throughput_tok_s"], rel=0.02)
    short = next(c for c in r["classes"] if c["gen_tokens"] == 32)
    assert short["continuous_e2e_p50_s"] < short["static_e2e_p50_s"] / 3
    assert co["ttft_p50_s"] < st_["ttft_p50_s"] / 10


# ---- request files --------------------------------------------------------------------------
def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_and_jsonl_read_the_same(tmp_path):
    a = read_requests(write(tmp_path, "r.csv", "prompt_tokens,gen_tokens,arrival_s\n128,32,0.5\n64,256,0\n"))
    b = read_requests(write(tmp_path, "r.jsonl", '{"prompt_tokens":128,"gen_tokens":32,"arrival_s":0.5}\n\n'
                                                '{"prompt_tokens":64,"gen_tokens":256,"arrival_s":0}\n'))
    for r in (a, b):
        assert r.prompt_tokens.tolist() == [128, 64] and r.gen_tokens.tolist() == [32, 256]
        assert r.arrival_s.tolist() == [0.5, 0.0]
    assert read_requests(write(tmp_path, "n.csv", "gen_tokens,prompt_tokens\n5,7\n")).arrival_s is None


@pytest.mark.parametrize(
    "name,text,where",
    [
        ("neg.csv", "prompt_tokens,gen_tokens\n128,32\n128,-4\n", "line 3"),
        ("nan.csv", "prompt_tokens,gen_tokens\n128,abc\n", "line 2"),
        ("frac.csv", "prompt_tokens,gen_tokens\n12.5,4\n", "line 2"),
        ("zero.csv", "prompt_tokens,gen_tokens\n128,0\n", "line 2"),
        ("missing.csv", "prompt_tokens\n128\n", "gen_tokens"),
        ("unknown.csv", "prompt_tokens,gen_tokens,arrival\n1,2,3\n", "line 1"),
        ("ragged.csv", "prompt_tokens,gen_tokens\n1,2,3\n", "line 2"),
        ("empty.csv", "", "empty"),
        ("header.csv", "prompt_tokens,gen_tokens\n", "no requests"),
        ("bad.jsonl", '{"prompt_tokens": 1, "gen_tokens": 2}\n{"prompt_tokens": 1,\n', "line 2"),
        ("miss.jsonl", '{"prompt_tokens": 1}\n', "line 1: missing gen_tokens"),
        ("list.jsonl", '{"prompt_tokens": 1, "gen_tokens": 2}\n[1, 2]\n', "line 2"),
        ("arr.csv", "prompt_tokens,gen_tokens,arrival_s\n1,2,0\n1,2,\n", "line 3"),
        ("negarr.jsonl", '{"prompt_tokens": 1, "gen_tokens": 2, "arrival_s": -1}\n', "line 1"),
    ],
)
def test_bad_request_files_name_the_line(tmp_path, name, text, where):
    with pytest.raises(RooflineError) as exc:
        read_requests(write(tmp_path, name, text))
    msg = str(exc.value)
    assert "\n" not in msg and where in msg and name in msg


def test_lengths_waste_in_arrival_order_and_back_to_back(tmp_path):
    # arrival order (not file order) makes the batches: [10,10] then [100,100]
    f = write(tmp_path, "r.csv", "prompt_tokens,gen_tokens,arrival_s\n16,10,0\n16,100,0.2\n16,10,0.1\n16,100,0.3\n")
    r = roofline.waste(requests=str(f), batch=2)
    assert (r["tokens_needed"], r["slots_used"]) == (220, 2 * 10 + 2 * 100)
    g = write(tmp_path, "g.csv", "prompt_tokens,gen_tokens\n16,10\n16,100\n16,10\n16,100\n")
    assert roofline.waste(requests=str(g), batch=2)["slots_used"] == 400  # file order: [10,100] twice
    t = roofline.waste(requests=str(f), batch=2, card=CARD, model=MODEL)
    assert t["e2e_p50_s"] <= t["e2e_p90_s"] <= t["e2e_p99_s"]
    # by hand: batch 1 starts when its last member arrives (0.1 s), batch 2 when batch 1 ends
    model = make_scenario(card=CARD, model=MODEL).step
    pre1, cum1 = static_batch_times(model, np.array([16, 16]), np.array([10, 10]))
    pre2, cum2 = static_batch_times(model, np.array([16, 16]), np.array([100, 100]))
    end1 = 0.1 + pre1 + cum1[-1]
    end2 = max(end1, 0.3) + pre2 + cum2[-1]
    e2e = np.array([end1 - 0.0, end1 - 0.1, end2 - 0.2, end2 - 0.3])
    assert t["e2e_p50_s"] == pytest.approx(np.percentile(e2e, 50), rel=1e-12)
    assert t["e2e_p99_s"] == pytest.approx(np.percentile(e2e, 99), rel=1e-12)
    # the second batch waits for the first: its E2E exceeds the first batch's
    one = roofline.waste(requests=str(write(tmp_path, "one.csv", "prompt_tokens,gen_tokens\n16,100\n16,100\n")),
                         batch=2, card=CARD, model=MODEL)
    assert t["e2e_p99_s"] > one["e2e_p99_s"]


def test_waste_needs_both_card_and_model():
    with pytest.raises(RooflineError, match="give both a card and a model") as exc:
        roofline.waste(mix="8x32", card=CARD)
    assert exc.value.field == "model"


def test_twenty_thousand_requests_both_ways():
    # (issue 3's speed target is measured by benchmarks/bench_simulate.py, not here)
    rng = np.random.default_rng(0)
    n = 20_000
    req = Requests(rng.integers(32, 513, n), np.where(rng.random(n) < 0.25, rng.integers(256, 1025, n), rng.integers(8, 65, n)))
    r = roofline.simulate(CARD, MODEL, batch=64, requests=req, arrival_rate=10.0, seed=0)
    assert r["static"]["generated_tokens"] == r["continuous"]["generated_tokens"] == int(req.gen_tokens.sum())
