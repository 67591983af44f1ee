"""The continuous server (issue 14): KV pool, admission, preemption, chunked prefill, percentiles,
goodput -- small cases worked out by hand, and the bounds on the work."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline
from roofline.calibration import Calibration
from roofline.errors import RooflineError
from roofline.kvpool import kv_pool
from roofline.scenario import make_scenario
from roofline.scheduler import MAX_REQUESTS, ServerConfig, serve_stream
from roofline.serving import Served, goodput, latency_percentiles, serve_continuous
from roofline.serving_runs import percentile

CARD, MODEL = "rtx3060", "qwen2.5-1.5b"


class Flat:
    """Pass costs a hand can add up: a prefill pass (or chunk iteration) 1 s, a decode step 0.1 s."""

    wake_s = 0.0

    def decode_s(self, slots, decoding, kv_read):
        return 0.1

    def pass_s(self, slots, decoding, kv_read, tokens, pairs, chunks, cont_tokens=0, cont_cached=0, longest=0):
        return 1.0 + (0.1 if decoding else 0.0)


def serve(p, g, config, arrival=None, cost=None):
    arrival = np.zeros(len(p)) if arrival is None else np.asarray(arrival, dtype=float)
    return serve_stream(np.array(p), np.array(g), arrival, config, cost or Flat())


# ---- the KV pool -----------------------------------------------------------------------------
def test_pool_from_memory_by_hand():
    # qwen2.5-1.5b: 28 layers x (K and V) x 2 KV heads x 128 x 2 bytes = 28,672 bytes per token; the
    # weights 3,087,428,608 bytes (what the H200 run measured: run-*.json memory.weight_bytes)
    cal = Calibration(card=CARD, engine="x", workspace_bytes=1e8, activation_coeff=0.0)
    step = make_scenario(card=CARD, model=MODEL, calibration=cal).step
    pool = kv_pool(step)
    assert pool.kv_bytes_per_token == 28 * 2 * 2 * 128 * 2 == 28672
    assert pool.weights_bytes == 3087428608
    assert pool.workspace_bytes == 1e8 and pool.gpu_memory_utilization == 0.9
    logits = step.spec.logits_bytes_per_position("bf16")  # activation_coeff 0: only the profiling pass's logits
    assert pool.activations_bytes == pytest.approx(logits)
    free = 0.9 * 12 * 2**30 - 3087428608 - 1e8 - logits
    assert pool.num_blocks == math.floor(free / (16 * 28672))
    assert pool.capacity_tokens == pool.num_blocks * 16
    # half the memory: fewer blocks; a reserve takes its bytes' worth of blocks
    assert kv_pool(step, gpu_memory_utilization=0.45).num_blocks < pool.num_blocks
    reserved = kv_pool(step, engine_reserve_bytes=16 * 28672 * 10)
    assert reserved.num_blocks == pool.num_blocks - 10


def test_pool_given_in_tokens():
    step = make_scenario(card=CARD, model=MODEL).step
    assert kv_pool(step, kv_capacity_tokens=12000).num_blocks == 750  # the real runs' pool: 750 blocks
    assert kv_pool(step, kv_capacity_tokens=12015).capacity_tokens == 12000
    with pytest.raises(RooflineError, match="at least one block") as exc:
        kv_pool(step, kv_capacity_tokens=15)
    assert exc.value.field == "kv_capacity_tokens"


def test_a_model_that_does_not_fit_has_no_pool():
    step = make_scenario(card=CARD, model="qwen2.5-14b").step  # ~29.5 GB of bf16 weights on a 12 GiB card
    with pytest.raises(RooflineError, match="no room for a KV cache") as exc:
        kv_pool(step)
    assert exc.value.field == "gpu_memory_utilization"


# ---- preemption, worked by hand ----------------------------------------------------------------
def test_preemption_by_recompute_by_hand():
    # 4 blocks of 2 tokens; A and B (prompt 2, gen 4) at t = 0, prefill-first
    # t=1.0  prefill A, B (1 block each; KV 2 each)                              free 2
    # t=1.1  decode: both KVs full (2) -> a block each                            free 0
    # t=1.2  decode: KV 3, room in the block
    # t=1.3  decode: both full again (4) and nothing free: B, the latest admitted, is preempted
    #        (its 2 blocks freed, 3 tokens produced); A takes a block and makes its 4th token: done
    # t=2.3  B readmitted: prefill of 2 + 3 = 5 tokens (3 blocks), its 4th token comes out: done
    cfg = ServerConfig(max_num_seqs=4, num_blocks=4, block_size=2, schedule="prefill-first")
    r = serve([2, 2], [4, 4], cfg)
    np.testing.assert_allclose(r.first_token_s, [1.0, 1.0])
    np.testing.assert_allclose(r.finish_s, [1.3, 2.3])
    assert r.preemptions.tolist() == [0, 1]
    assert (r.iterations, r.prefill_iterations, r.decode_iterations, r.max_running) == (5, 2, 3, 2)
    assert r.generated_tokens == 8
    # each ends holding ceil(5 / 2) = 3 blocks: 5 blocks still preempt, 6 do not (B finishes with A)
    assert serve([2, 2], [4, 4], ServerConfig(4, 5, 2, schedule="prefill-first")).preemptions.tolist() == [0, 1]
    r6 = serve([2, 2], [4, 4], ServerConfig(4, 6, 2, schedule="prefill-first"))
    assert r6.preemptions.tolist() == [0, 0] and r6.finish_s.tolist() == pytest.approx([1.3, 1.3])


def test_the_victim_is_the_latest_admitted_and_goes_first_in_the_queue():
    # A, B, C (prompt 2, gen 6) at 0 and D (prompt 2, gen 2) at 1.05; 5 blocks of 2; prefill-first
    # 1.0  prefill A B C (3 blocks, free 2)
    # 1.1  all three full, 3 needed > 2: C preempted (frees 1), A B take theirs        free 1
    # 1.1+ C (n 3, 2 blocks) heads the queue and does not fit; D would (1 block) but FIFO does not skip
    # 1.2  A B decode; 1.3: both full, 2 > 1: B preempted (frees 2), A takes one     free 2
    #      the queue is now B, C, D (B went in front of C: it arrived earlier)
    # 1.4  A decodes; 1.5: A takes a block (free 1) and finishes (frees 4)             free 5
    # 2.5  prefill B (5 tokens, 3 blocks) and C (3 tokens, 2 blocks); D waits         free 0
    # 2.6  B C decode; 2.7: both full, none free: C preempted again, B finishes        free 5
    # 3.7  prefill C (5 tokens) and D; 3.8: D finishes; 3.9: C finishes
    cfg = ServerConfig(max_num_seqs=4, num_blocks=5, block_size=2, schedule="prefill-first")
    r = serve([2, 2, 2, 2], [6, 6, 6, 2], cfg, arrival=[0, 0, 0, 1.05])
    assert r.preemptions.tolist() == [0, 1, 2, 0]
    np.testing.assert_allclose(r.first_token_s, [1.0, 1.0, 1.0, 3.7])  # a recompute keeps the first TTFT
    np.testing.assert_allclose(r.finish_s, [1.5, 2.7, 3.9, 3.8])


def test_decode_first_preempts_in_admission_order():
    # the same pool under decode-first: the decodes take their blocks first; the same victim
    cfg = ServerConfig(max_num_seqs=4, num_blocks=4, block_size=2, schedule="decode-first")
    r = serve([2, 2], [4, 4], cfg)
    assert r.preemptions.tolist() == [0, 1]
    # A: prefilled at 1.0 (pass 1), decodes 1.1, 1.2, 1.3 (done); B preempted at the third step,
    # readmitted in the next iteration: a prefill of 5 tokens alone (1.0) -> 2.3
    np.testing.assert_allclose(r.finish_s, [1.3, 2.3])


# ---- chunked prefill, worked by hand -------------------------------------------------------------
def test_chunked_prefill_pass_counts():
    # decode-first, 8 tokens an iteration: a 20-token prompt takes chunks of 8, 8 and 4
    cfg = ServerConfig(max_num_seqs=2, num_blocks=100, block_size=4, max_num_batched_tokens=8)
    r = serve([20], [1], cfg)
    assert (r.iterations, r.prefill_iterations, r.decode_iterations) == (3, 3, 0)
    assert r.first_token_s[0] == pytest.approx(3.0)
    # A (20 tokens, gen 3) and B (4 tokens, gen 1) at t = 0:
    # it 1: A's chunk of 8 (budget spent); it 2: A 8 more; it 3: A's last 4 + B's 4 (budget 8):
    # both prefills complete, both first tokens at 3.0, B done; it 4, 5: A decodes (3.1, 3.2)
    r = serve([20, 4], [3, 1], cfg)
    assert (r.iterations, r.prefill_iterations, r.decode_iterations) == (5, 3, 2)
    np.testing.assert_allclose(r.first_token_s, [3.0, 3.0])
    np.testing.assert_allclose(r.finish_s, [3.2, 3.0])


def test_decode_first_needs_a_budget_for_every_running_sequence():
    with pytest.raises(RooflineError, match="at least the running-sequence limit") as exc:
        ServerConfig(max_num_seqs=64, num_blocks=10, max_num_batched_tokens=32)
    assert exc.value.field == "max_num_batched_tokens"
    ServerConfig(max_num_seqs=64, num_blocks=10, max_num_batched_tokens=32, schedule="prefill-first")  # fine there


def test_prefill_first_takes_at_most_the_budget_per_pass():
    # budget 10 tokens: prompts of 6 are prefilled one per pass
    cfg = ServerConfig(max_num_seqs=4, num_blocks=100, block_size=4, max_num_batched_tokens=10,
                       schedule="prefill-first")
    r = serve([6, 6, 6], [1, 1, 1], cfg)
    np.testing.assert_allclose(r.first_token_s, [1.0, 2.0, 3.0])


def test_requests_the_server_could_never_serve_are_rejected():
    step = make_scenario(card=CARD, model=MODEL).step
    # max_model_len 100: 90 + 20 - 1 = 109 tokens do not fit; 50 + 20 - 1 do
    s = serve_continuous(step, [90, 50], [20, 20], None, 4, max_model_len=100)
    assert np.isnan(s.ttft_s[0]) and s.ttft_s[1] > 0
    summary = s.summary()
    assert summary["rejected"] == 1 and summary["generated_tokens"] == 20
    assert summary["ttft_p50_s"] == pytest.approx(s.ttft_s[1])


# ---- percentiles and goodput -------------------------------------------------------------------
def test_percentiles_are_numpys_linear_ones_and_tpot_skips_one_token_requests():
    rng = np.random.default_rng(3)
    ttft, e2e = rng.random(37), rng.random(37) + 1
    tpot = np.where(rng.random(37) < 0.3, np.nan, rng.random(37) / 100)
    out = latency_percentiles(ttft, tpot, e2e)
    finite = tpot[~np.isnan(tpot)]
    for q in (50, 90, 99):
        assert out[f"ttft_p{q}_s"] == pytest.approx(np.percentile(ttft, q), rel=1e-15)
        assert out[f"tpot_p{q}_s"] == pytest.approx(np.percentile(finite, q), rel=1e-15)
        assert out[f"e2e_p{q}_s"] == pytest.approx(percentile(e2e, q), rel=1e-12)  # the real runs' definition
    # by hand: p90 of 1..11 is 10 (rank 0.9 x 10 = 9 exactly); p99 interpolates 10.9
    hand = latency_percentiles(np.arange(1.0, 12.0), None, np.arange(1.0, 12.0))
    assert hand["ttft_p50_s"] == 6.0 and hand["ttft_p90_s"] == 10.0 and hand["ttft_p99_s"] == pytest.approx(10.9)


def test_tpot_is_decode_time_over_the_tokens_after_the_first():
    # a lone request: TTFT = the prefill pass, then gen - 1 decode steps of 0.1 s
    cfg = ServerConfig(max_num_seqs=2, num_blocks=100, block_size=16)
    step = make_scenario(card=CARD, model=MODEL).step
    r = serve([10], [5], cfg)
    assert r.finish_s[0] - r.first_token_s[0] == pytest.approx(0.4)
    s = serve_continuous(step, [10, 10], [5, 1], None, 2)
    assert np.isnan(s.tpot_s[1]) and s.tpot_s[0] == pytest.approx((s.finish_s[0] - (s.ttft_s[0])) / 4)


def test_goodput_by_hand():
    # three requests over 2 s: (TTFT, TPOT) = (0.1, 10 ms), (0.3, one token), (0.2, 50 ms)
    served = Served(ttft_s=np.array([0.1, 0.3, 0.2]), e2e_s=np.array([1.0, 0.3, 2.0]), finish_s=np.array([1.0, 0.3, 2.0]),
                    slots=4, passes=10, useful_slot_steps=12, makespan_s=2.0, tpot_s=np.array([0.01, np.nan, 0.05]),
                    gen_tokens=np.array([10, 1, 1]))
    g = goodput(served, 0.25, 0.02)
    assert g["slo_attainment"] == pytest.approx(1 / 3)  # only the first meets both
    assert g["goodput_req_s"] == pytest.approx(0.5) and g["goodput_tok_s"] == pytest.approx(5.0)
    # TTFT limit alone: the one-token request fails on TTFT (0.3 > 0.25), the third passes
    assert goodput(served, 0.25, None)["slo_attainment"] == pytest.approx(2 / 3)
    # TPOT limit alone: a one-token request meets any TPOT limit
    assert goodput(served, None, 0.02)["slo_attainment"] == pytest.approx(2 / 3)


# ---- the work is bounded before it starts ------------------------------------------------------
def test_absurd_counts_are_refused_before_any_work():
    with pytest.raises(RooflineError, match=f"at most {MAX_REQUESTS:,}") as exc:
        roofline.simulate(CARD, MODEL, batch=8, mix="1x10", count=MAX_REQUESTS + 1)
    assert exc.value.field == "count"


def test_the_default_server_is_v01s_when_the_pool_does_not_bind():
    # 16 slots x (128 + 256) tokens fit a 12 GiB card's pool many times over: the same answer as a
    # pool that never binds (docs/batching.md's figures stand)
    kw = dict(batch=16, mix="8x32,8x256", count=200, arrival_rate=6.0, seed=1)
    a = roofline.simulate(CARD, MODEL, **kw)
    b = roofline.simulate(CARD, MODEL, **kw, gpu_memory_utilization=None)
    assert a["continuous"]["kv_capacity_tokens"] > 16 * 384 and b["continuous"]["kv_capacity_tokens"] is None
    for key in ("ttft_p99_s", "tpot_p50_s", "e2e_p90_s", "passes", "throughput_tok_s"):
        assert a["continuous"][key] == b["continuous"][key]
    assert a["continuous"]["preemptions"] == 0


def test_a_small_pool_preempts_and_holds_fewer_sequences():
    kw = dict(batch=64, mix="16x64,16x512", count=300, seed=1, prompt_tokens=512)
    roomy = roofline.simulate(CARD, MODEL, **kw)["continuous"]
    tight = roofline.simulate(CARD, MODEL, **kw, kv_capacity_tokens=8000)["continuous"]
    assert roomy["preemptions"] == 0 and roomy["max_running"] == 64
    assert tight["preemptions"] > 0 and tight["max_running"] < 64
    # 500 blocks, a 512-token prompt takes 32 at admission: at most 15 run; the pool binds throughput too
    assert tight["max_running"] <= 15
    assert tight["throughput_tok_s"] < roomy["throughput_tok_s"]


# ---- remembered prices: the same numbers, bounded -------------------------------------------
def counting(step, calls):
    """A class whose instances price passes as ``step`` does, recording each pass's work in ``calls``."""

    class Counting:
        def __init__(self):
            self.spec = step.spec

        def pass_s(self, work):
            calls.append(work)
            return step.pass_s(work)

    return Counting


def test_fused_costs_remember_prices_and_give_the_same_numbers(monkeypatch):
    """FusedCost remembers each decode step's price by (decoding, kv_read), for single steps and for
    stretches: a repeat gives the very number the step model does, without calling it; a stretch prices
    only its steps not seen before; past the caps (MEMO_MAX prices, STRETCH_CELLS_MAX cells) nothing
    more is kept."""
    from roofline import pass_costs
    from roofline.pass_costs import FusedCost

    step = make_scenario(card="h200", model="qwen2.5-7b", engine="graph").step  # with the kernel table
    calls = []
    real = step.pass_s
    Counting = counting(step, calls)

    cost = FusedCost(Counting())
    first = cost.decode_s(8, 8, 9000.0)
    assert first == real((8.0, 9000.0, 0.0, 0.0, 0.0, None, None)) and len(calls) == 1
    assert cost.decode_s(8, 8, 9000.0) == first and len(calls) == 1  # remembered
    kv = 9000.0 + 8.0 * np.arange(40)
    a = cost.decode_costs(8, 8, kv)
    assert len(calls) == 2
    np.testing.assert_array_equal(a, real((8.0, kv, 0.0, 0.0, 0.0, None, None)))  # the vectorised prices
    np.testing.assert_array_equal(cost.decode_costs(8, 8, kv[5:30]), a[5:30])
    assert len(calls) == 2  # every step known: no call
    mixed = cost.decode_costs(8, 8, np.append(kv[:3], 1e5))  # one unknown step: one call, for it alone
    assert len(calls) == 3 and np.array_equal(calls[-1][1], [1e5])
    np.testing.assert_array_equal(mixed, np.append(a[:3], real((8.0, 1e5, 0.0, 0.0, 0.0, None, None))))
    np.testing.assert_array_equal(cost.decode_costs(4, 4, kv), real((4.0, kv, 0.0, 0.0, 0.0, None, None)))
    assert len(calls) == 4  # another decoding count: its own prices
    halves = kv + 0.5  # not whole numbers of tokens: priced every time, never kept
    np.testing.assert_array_equal(cost.decode_costs(8, 8, halves), real((8.0, halves, 0.0, 0.0, 0.0, None, None)))
    cost.decode_costs(8, 8, halves)
    assert len(calls) == 6
    odd = np.array([10.0, 5000.0, 20.5, 30.0])  # not ascending, one not whole: priced as given, nothing kept
    np.testing.assert_array_equal(cost.decode_costs(8, 8, odd), real((8.0, odd, 0.0, 0.0, 0.0, None, None)))
    assert len(calls) == 7
    jumbled = np.array([10.0, 5000.0, 20.0])  # whole but not ascending: kept at its own tokens
    np.testing.assert_array_equal(cost.decode_costs(8, 8, jumbled), real((8.0, jumbled, 0.0, 0.0, 0.0, None, None)))
    np.testing.assert_array_equal(cost.decode_costs(8, 8, jumbled[::-1]), real((8.0, jumbled[::-1], 0.0, 0.0, 0.0, None, None)))
    assert len(calls) == 8
    monkeypatch.setattr(pass_costs, "MEMO_MAX", 5)
    small = FusedCost(Counting())
    for i in range(20):
        assert small.decode_s(4, 4, float(1000 + i)) == real((4.0, float(1000 + i), 0.0, 0.0, 0.0, None, None))
    assert len(small._steps) == 5  # the first five kept, the rest computed every time
    monkeypatch.setattr(pass_costs, "STRETCH_CELLS_MAX", 1000)
    before = len(calls)
    small.decode_costs(4, 4, 2000.0 + np.arange(50.0))
    small.decode_costs(4, 4, 2000.0 + np.arange(50.0))
    assert len(small._stretches) == 0 and len(calls) == before + 2  # 2,050 cells would pass the cap: not kept
    monkeypatch.setattr(pass_costs, "STRETCH_CELLS_MAX", 5000)
    small.decode_costs(4, 4, 2000.0 + np.arange(50.0))
    small.decode_costs(4, 4, 3000.0 + np.arange(60.0))
    assert small._stretch_cells == 4100  # the table doubled to hold 3,060 cells
    small.decode_costs(4, 4, 3000.0 + np.arange(60.0))
    assert len(calls) == before + 4  # known: no call
    small.decode_costs(4, 4, 6000.0 + np.arange(10.0))  # 8,200 cells would pass 5,000: priced, not kept
    assert small._stretch_cells == 4100 and len(calls) == before + 5


def test_a_quiet_stretchs_prices_are_decode_costs_numbers_from_a_slice():
    """FusedCost.decode_run (the scheduler's quiet stretches: whole reads first, first + stride, ...)
    gives decode_costs' numbers, pricing only the steps its table lacks, and writes them into it."""
    from roofline.pass_costs import FusedCost

    step = make_scenario(card="h200", model="qwen2.5-7b", engine="graph").step  # with the kernel table
    calls = []
    real = step.pass_s
    Counting = counting(step, calls)

    def want(decoding, reads):
        return real((float(decoding), np.asarray(reads, dtype=float), 0.0, 0.0, 0.0, None, None)).tolist()

    cost = FusedCost(Counting())
    a = cost.decode_run(8, 9000, 8, 40)  # no table yet: decode_costs builds it
    assert isinstance(a, list) and a == want(8, 9000 + 8 * np.arange(40)) and len(calls) == 1
    assert cost.decode_run(8, 9040, 8, 20) == a[5:25] and len(calls) == 1  # all known: a slice, no call
    b = cost.decode_run(8, 9004, 8, 10)  # inside the table, none known: one call
    assert b == want(8, 9004 + 8 * np.arange(10)) and len(calls) == 2
    assert cost.decode_costs(8, 8, 9004.0 + 8 * np.arange(10)).tolist() == b and len(calls) == 2  # kept
    c = cost.decode_run(8, 8992, 8, 3)  # 8,992 new, 9,000 and 9,008 known: one call for the one
    assert c == want(8, [8992, 9000, 9008]) and len(calls) == 3 and np.array_equal(calls[-1][1], [8992.0])
    assert cost.decode_run(8, 50_000, 8, 4) == want(8, 50_000 + 8 * np.arange(4))  # past the table: it grows
    assert len(calls) == 4 and len(cost._stretches[8]) >= 50_025
    np.testing.assert_array_equal(cost.decode_run(8, -8, 8, 2), want(8, [-8, 0]))  # (not the scheduler's) as given
    assert cost.decode_run(4, 7, 4, 5) == want(4, 7 + 4 * np.arange(5))  # another decoding count: its own


def test_stretches_priced_by_slice_or_by_array_serve_alike():
    """The scheduler's quiet stretches from FusedCost.decode_run (a table slice) and from
    decode_costs alone (a cost object without decode_run: reads as a float array) give the same
    times to the last bit, with and without a pool that binds."""
    from roofline.pass_costs import FusedCost

    step = make_scenario(card=CARD, model=MODEL).step
    rng = np.random.default_rng(5)
    p, g = rng.integers(32, 513, 3000), np.where(rng.random(3000) < 0.25, rng.integers(256, 1025, 3000),
                                                 rng.integers(8, 65, 3000))
    arrivals = (np.zeros(3000), np.cumsum(rng.exponential(1 / 3.0, 3000)))

    class ArrayOnly:
        def __init__(self):
            inner = FusedCost(step)
            self.wake_s, self.decode_s, self.pass_s, self.decode_costs = (
                inner.wake_s, inner.decode_s, inner.pass_s, inner.decode_costs)

    for slots, blocks, a in ((8, 10**9, arrivals[0]), (16, 10**9, arrivals[1]), (64, 1500, arrivals[0])):
        cfg = ServerConfig(slots, blocks, 16, None, None, "decode-first")
        one = serve_stream(p, g, a, cfg, FusedCost(step))
        two = serve_stream(p, g, a, cfg, ArrayOnly())
        assert not hasattr(ArrayOnly(), "decode_run")
        np.testing.assert_array_equal(one.first_token_s, two.first_token_s)
        np.testing.assert_array_equal(one.finish_s, two.finish_s)
        assert one.preemptions.sum() == two.preemptions.sum()
    assert one.preemptions.sum() > 0  # the last pool (24,000 tokens for 64 slots) binds


def test_a_static_backlog_prices_each_read_once():
    """serve_static's backlog prices its decode steps from a table over their reads' span, each read
    once: the same numbers as pricing every step, and every step where the reads are not whole or
    span more numbers than there are steps."""
    from roofline.serving import _decode_prices
    from roofline.step import decode_work

    step = make_scenario(card=CARD, model=MODEL).step
    calls = []

    class Counting:
        def pass_s(self, work):
            calls.append(np.size(work[1]))
            return step.pass_s(work)

    # twelve batches of 199 steps over 8 sequences, prompts summing to 3,000-3,040 tokens: 2,388 steps, 403 reads
    kv = 3000.0 + 8 * np.tile(np.arange(1.0, 200.0), 12) + np.repeat([0.0, 40.0, 8.0, 16.0, 0.0, 3.0] * 2, 199)
    got = _decode_prices(Counting(), 8.0, kv)
    np.testing.assert_array_equal(got, step.pass_s(decode_work(8.0, kv)))
    assert calls == [len(np.unique(kv))] and len(np.unique(kv)) < len(kv)  # each read priced once
    for odd in (kv + 0.5, np.array([10.0, 1e6])):  # not whole; a span wider than the steps
        calls.clear()
        np.testing.assert_array_equal(_decode_prices(Counting(), 8.0, odd), step.pass_s(decode_work(8.0, odd)))
        assert calls == [len(odd)]


def test_the_loop_remembers_prefill_prices():
    """LoopCost's prefill passes: a repeat of the same five counts gives the very number
    prefill_device_s does (the memo is exact), for whole prompts and chunks after cached tokens."""
    from roofline.pass_costs import LoopCost, load_loop_terms

    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    cost = LoopCost(step, load_loop_terms(card="h200", engine="graph"), 1280, 64, 2048)
    for args in ((300.0, 300.0 * 301 / 2, 1.0, 0, 0), (512.0, 512.0 * 1000.0, 1.0, 512, 488), (16.0, 136.0, 1.0, 0, 0)):
        want = cost.prefill_device_s(*args) + cost.terms.host_prefill_s.value + cost.terms.host_prefill_s_per_seq.value
        assert cost.pass_s(3, 0, 0.0, *args[:3], *args[3:]) == pytest.approx(want, rel=1e-15)
        assert cost.pass_s(3, 0, 0.0, *args[:3], *args[3:]) == cost.pass_s(3, 0, 0.0, *args[:3], *args[3:])
    assert len(cost._prefills) == 3


def test_a_chunk_graph_at_another_cache_length_copies_its_rows_apart():
    """The chunk table was measured at 1,280 cache rows a slot (its grid's ``rows``); a chunk graph
    copies all max_model_len rows of its slot out (calibrate.serving_loop.chunk_attention: an
    index_select and a cat of K and V), so at 4,096 rows it costs, every layer, the copy's time a
    row (the same probe at 4,096 rows, call 90: hardware_profiles/measurements/
    h200-probe-chunk-rows4096.json) x 2,816 rows more; at the table's rows and head shape nothing
    is added, and a whole prompt's pass (no chunk graph) does not change. The measured copy ran at
    0.8-1.2 TB/s: qwen2.5-7b's 2,816 rows x 4 K/V heads x 128 x 2 bytes x 8 (23 MB a layer) took
    ~26 us, where the loop's elementwise rate (1.64 TB/s) would say 14 us."""
    from roofline.chunk_table import copy_s_per_row, load_chunk_table
    from roofline.pass_costs import LoopCost, load_loop_terms

    step = make_scenario(card="h200", model="qwen2.5-7b", engine="graph").step
    terms = load_loop_terms(card="h200", engine="graph")
    assert terms.chunk_rows_table == "measurements/h200-probe-chunk-rows4096.json"
    at = {t: LoopCost(step, terms, t, 64, 512) for t in (1280, 4096)}
    assert at[1280].chunk_table.rows == 1280 and at[1280].chunk_copy_s == 0.0
    layers, shape = 28, (28, 4, 128)  # qwen2.5-7b's config.json: 28 layers, 28 query and 4 K/V heads of 128
    per_row = copy_s_per_row(at[1280].chunk_table, load_chunk_table(terms.chunk_rows_table), shape)
    copy_bytes = 8 * (4096 - 1280) * 4 * 128 * 2
    assert 0.7e12 < copy_bytes / (per_row * (4096 - 1280)) < 1.3e12  # the rate the probe measured
    want = layers * per_row * (4096 - 1280)
    assert at[4096].chunk_copy_s == pytest.approx(want, rel=1e-12)
    chunk = (512.0, 512.0 * 700.0, 1.0, 512, 400)  # a 512-token chunk after 400 cached tokens
    assert at[4096].prefill_device_s(*chunk) - at[1280].prefill_device_s(*chunk) == pytest.approx(want, rel=1e-9)
    whole = (300.0, 300.0 * 301 / 2, 1.0, 0, 0)
    assert at[4096].prefill_device_s(*whole) == at[1280].prefill_device_s(*whole)
    # a K/V width the table has not: pythia-6.9b's 32 K/V heads of 128 priced from the nearest
    # measured shape's 8 (mistral-7b-v0.3's), so its copy is 4x as wide: 1,280 x 4 - 1,280 rows'
    # worth more at that shape, every one of its 32 layers
    mha = make_scenario(card="h200", model="pythia-6.9b", engine="graph").step
    cost = LoopCost(mha, terms, 1280, 64, 512)
    assert cost.chunk_table.nearest_shape(32, 32, 128) == (32, 8, 128)
    per_row = copy_s_per_row(cost.chunk_table, load_chunk_table(terms.chunk_rows_table), (32, 8, 128))
    assert cost.chunk_copy_s == pytest.approx(32 * per_row * (1280 * 4 - 1280), rel=1e-12)
    # without the second table: the copy's bytes at the elementwise rate
    bare = LoopCost(step, terms.model_copy(update={"chunk_rows_table": None}), 4096, 64, 512)
    assert bare.chunk_copy_s == pytest.approx(copy_bytes * layers / terms.prefill_elementwise_bytes_per_s.value,
                                              rel=1e-12)


def test_the_chunk_copy_term_by_hand_on_synthetic_tables(tmp_path):
    """LoopCost's copy term from two synthetic chunk probes (a flat grid at 1,000 rows, and at 3,000 rows every point 20 us slower: 10 ns a row a layer at qwen2.5-1.5b's shape,
    (12, 2, 128)). By hand, over its 28 layers: 2,000 rows copy 1,000 more, 28 x 10 ns x 1,000 =
    280 us; 512 rows copy 488 fewer, -136.64 us, which a chunk graph whose table price is 28 x 2 us
    = 56 us cannot go below: its extra time floors at 0."""
    import json

    from roofline.pass_costs import LoopCost, load_loop_terms

    def _points():  # one shape, buckets 64 and 256, shares 1/4 and 1: 1 us + 0.01 us a cached token
        return [{"q_heads": 12, "kv_heads": 2, "head_dim": 128, "bucket": b, "chunk_tokens": int(b * f), "cached": c,
                 "chunk_s": 5e-6 + (1e-6 + 1e-8 * c), "prefill_s": 5e-6}
                for b in (64, 256) for f in (0.25, 1.0) for c in (0, 100, 200)]

    low, high = tmp_path / "probe-chunk.json", tmp_path / "probe-chunk-rows3000.json"
    low.write_text(json.dumps({"grid": {"rows": 1000}, "points": _points()}))
    high.write_text(json.dumps({"grid": {"rows": 3000},
                                "points": [dict(p, chunk_s=p["chunk_s"] + 20e-6) for p in _points()]}))
    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    terms = load_loop_terms(card="h200", engine="graph").model_copy(
        update={"chunk_attention_table": str(low), "chunk_rows_table": str(high)})
    at = {t: LoopCost(step, terms, t, 64, 512) for t in (1000, 2000, 512)}
    assert at[1000].chunk_copy_s == pytest.approx(0.0, abs=1e-15)
    assert at[2000].chunk_copy_s == pytest.approx(280e-6, rel=1e-9)
    assert at[512].chunk_copy_s == pytest.approx(-136.64e-6, rel=1e-9)
    # a 16-token chunk after 100 cached tokens in a 64-token pass: 2 us a layer in the table
    assert at[1000].chunk_extra_s(64, 16, 100) == pytest.approx(56e-6, rel=1e-9)
    assert at[2000].chunk_extra_s(64, 16, 100) == pytest.approx(336e-6, rel=1e-9)
    assert at[512].chunk_extra_s(64, 16, 100) == 0.0


def test_the_kernel_tables_float_path_matches_its_array_path():
    """roofline.step._table_factor on floats (Python lists, the simulators' hot loop) and on arrays
    (numpy) gives the same factor at every point, on and between the grid's, past its ends too."""
    from roofline.step import _table_factor

    step = make_scenario(card="h200", model="qwen2.5-7b", engine="graph").step
    table = step._kernel_table
    assert table is not None  # the H200 graph calibration carries the attention kernel table
    rng = np.random.default_rng(4)
    matrices = np.concatenate([rng.uniform(0.5, 2 ** 12, 300), 2.0 ** table[0][1:], [1.0, 3.0]])
    tokens = np.concatenate([rng.uniform(0.0, 2 * table[1][-1], 300), table[1], table[1][:2]])[:len(matrices)]
    arr = _table_factor(table, matrices, tokens)
    for m, t, want in zip(matrices.tolist(), tokens.tolist(), arr.tolist()):
        assert _table_factor(table, m, t) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_the_shipped_calibration_read_once_is_left_as_it_was():
    """roofline.calibration.shipped_calibration reads each file once per version and hands every
    caller the same object (frozen, but its tables are lists and dicts): predicting, simulating and
    choosing with it must leave it as the file has it -- a caller that changed it would change every
    later answer."""
    from roofline import api
    from roofline.calibration import load_calibration, calibrations_dir, shipped_calibration

    shared = shipped_calibration("h200", "graph")
    assert shipped_calibration("h200", "graph") is shared  # read once
    api.predict("h200", "qwen2.5-7b", [1, 8, 64])
    api.simulate("h200", "qwen2.5-1.5b", engine="graph", batch=8, mix="4x64,1x512", count=40,
                 pass_cost="serving-loop", schedule="prefill-first")
    api.choose("h200", "qwen2.5-7b", tpot_max_s=0.05)
    assert shared.model_dump() == load_calibration(calibrations_dir() / "h200-graph.json").model_dump()


def test_the_scheduler_hands_each_prefill_its_longest_prompt_or_chunk():
    # the measured prefill attention (roofline.pass_costs LoopCost with prefill_attention_measured)
    # reads a pass's longest prompt; the scheduler knows it where a served run's record does not
    seen = []

    class Recording(Flat):
        def pass_s(self, slots, decoding, kv_read, tokens, pairs, chunks, cont_tokens=0, cont_cached=0, longest=0):
            seen.append((tokens, chunks, longest))
            return super().pass_s(slots, decoding, kv_read, tokens, pairs, chunks)

    # prefill-first: prompts of 100, 400 and 50 arriving together, one pass
    serve([100, 400, 50], [2, 2, 2], ServerConfig(max_num_seqs=4, num_blocks=100, schedule="prefill-first"),
          cost=Recording())
    assert seen[0] == (550.0, 3.0, 400)
    # decode-first, chunked at 256 tokens an iteration: 256 of the 400 first (longest 256), then its last 144 with
    # the 100 (longest 144)
    seen.clear()
    serve([400, 100], [2, 2], ServerConfig(max_num_seqs=4, num_blocks=100, max_num_batched_tokens=256,
                                           schedule="decode-first"), cost=Recording())
    assert seen[:2] == [(256.0, 1.0, 256), (244.0, 2.0, 144)]
