"""The serving loop (calibrate/serving_loop.py) on the CPU: tokens, policy, arrivals, files.

Tokens: every request's greedy tokens equal the plain graph engine's for it alone (same weights),
also after compaction copies and after preemption + recompute. The policy tests run the
scheduler on a virtual clock (CostExecutor), so their schedules are exact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from calibrate import serving_loop as sl
from roofline import serving_runs as sr
from roofline.errors import RooflineError


def _cfg(num_blocks=1000, max_num_seqs=4, block_size=4, max_model_len=64, batched=None):
    return sl.SchedulerConfig(max_num_seqs=max_num_seqs, max_model_len=max_model_len, num_blocks=num_blocks,
                              block_size=block_size, max_num_batched_tokens=batched)


def _reqs(lengths, arrivals=None):
    arrivals = arrivals or [0.0] * len(lengths)
    return [sl.Request(i, a, p, g) for i, ((p, g), a) in enumerate(zip(lengths, arrivals))]


def _virtual(requests, config, prefill_s=1.0, decode_s=0.1, **kw):
    """serve on a virtual clock: a prefill pass costs prefill_s, a decode step decode_s."""
    clock = sl.VirtualClock()
    ex = sl.CostExecutor(clock, lambda lengths, starts: prefill_s, lambda n, bucket, ctx: decode_s, config.max_num_seqs)
    return sl.serve(requests, ex, config, clock=clock, sleep=clock.sleep, **kw), ex


# ---- small pieces ---------------------------------------------------------------------------
def test_capture_sizes_follow_the_documented_ladder():
    assert sl.capture_sizes(64) == [1, 2, 4, 8, 16, 24, 32, 48, 64]
    assert sl.capture_sizes(256) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert sl.capture_sizes(100) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100]
    assert sl.capture_sizes(3) == [1, 2, 3]
    assert sl.capture_sizes(1) == [1]
    sizes = sl.capture_sizes(64)
    assert [sl.bucket_for(n, sizes) for n in (1, 3, 5, 9, 17, 25, 33, 49, 64)] == [1, 4, 8, 16, 24, 32, 48, 64, 64]


def test_config_refuses_what_could_never_be_served():
    with pytest.raises(RooflineError, match="max_model_len"):
        _cfg().check(_reqs([(60, 6)]))  # 65 KV tokens > 64
    _cfg().check(_reqs([(60, 5)]))  # 64 KV tokens fit exactly
    with pytest.raises(RooflineError, match="blocks"):
        _cfg(num_blocks=3).check(_reqs([(10, 4)]))  # 13 tokens = 4 blocks of 4
    with pytest.raises(RooflineError, match="max_num_batched_tokens"):
        _cfg(batched=16).check(_reqs([(10, 8)]))  # a recompute could prefill 17 tokens
    with pytest.raises(RooflineError, match="policy"):
        sl.SchedulerConfig(max_num_seqs=1, max_model_len=8, num_blocks=4, policy="v1").check([])
    chunked = sl.SchedulerConfig(max_num_seqs=4, max_model_len=64, num_blocks=100, block_size=4,
                                 max_num_batched_tokens=16, policy="chunked")
    chunked.check(_reqs([(40, 8)]))  # chunked prefill: a prompt longer than the budget is fine
    with pytest.raises(RooflineError, match=">= max_num_seqs"):
        sl.SchedulerConfig(max_num_seqs=8, max_model_len=64, num_blocks=100, max_num_batched_tokens=4,
                           policy="chunked").check([])
    assert _cfg(max_model_len=100).batched_tokens == 2048 and _cfg(max_model_len=4096).batched_tokens == 4096


# ---- the policy on a virtual clock ------------------------------------------------------------
def test_a_hand_computed_schedule():
    # prefill 1 s, decode 0.1 s. A (p4, g3) and B (p4, g2) at 0, C (p4, g1) at 1.05.
    res, _ = _virtual(_reqs([(4, 3), (4, 2), (4, 1)], [0.0, 0.0, 1.05]), _cfg())
    its = res.iterations
    assert [(it["kind"], it["decode_seqs"] or it["prefill_seqs"]) for it in its] == [
        ("prefill", 2), ("decode", 2), ("prefill", 1), ("decode", 1)]
    assert [t for it in its for t in (it["t_start_s"], it["t_end_s"])] == pytest.approx(
        [0.0, 1.0, 1.0, 1.1, 1.1, 2.1, 2.1, 2.2])
    a, b, c = res.requests
    assert (a["first_token_s"], a["finish_s"], a["tpot_s"]) == pytest.approx((1.0, 2.2, 0.6))
    assert (b["first_token_s"], b["finish_s"], b["tpot_s"]) == pytest.approx((1.0, 1.1, 0.1))
    assert c["tpot_s"] is None and (c["ttft_s"], c["e2e_s"]) == pytest.approx((2.1 - 1.05, 2.1 - 1.05))
    # C arrived during the decode step at 1.0-1.1: admitted at the next iteration's start
    assert c["first_scheduled_s"] == pytest.approx(1.1)


def test_admission_respects_slots():
    res, _ = _virtual(_reqs([(4, 3)] * 10), _cfg(max_num_seqs=3))
    first = res.iterations[0]
    assert (first["kind"], first["prefill_seqs"]) == ("prefill", 3)
    assert res.max_running == 3
    assert max(it["running"] + it["finished"] for it in res.iterations) == 3
    assert all(r["finish_s"] is not None for r in res.requests)


def test_admission_respects_blocks_fifo_without_skipping():
    # block 4: A needs 3 blocks, B 3, C 1: exactly 7 fit together, 6 do not
    res, _ = _virtual(_reqs([(12, 2), (12, 2), (4, 2)]), _cfg(num_blocks=7))
    assert (res.iterations[0]["prefill_seqs"], res.iterations[0]["used_blocks"]) == (3, 7)
    res, _ = _virtual(_reqs([(12, 2), (12, 2), (4, 2)]), _cfg(num_blocks=6))
    assert (res.iterations[0]["prefill_seqs"], res.iterations[0]["used_blocks"]) == (2, 6)
    # B needs 5 blocks, 4 are free after A: C (1 block) would fit, but FIFO stops at B
    res, _ = _virtual(_reqs([(12, 2), (20, 2), (4, 2)]), _cfg(num_blocks=7))
    first = res.iterations[0]
    assert (first["prefill_seqs"], first["prefill_tokens"], first["used_blocks"]) == (1, 12, 3)
    assert res.iterations[1]["kind"] == "decode"  # C (1 block) is not admitted ahead of B
    assert res.requests[2]["first_scheduled_s"] >= res.requests[1]["first_scheduled_s"]


def test_admission_respects_the_batched_token_budget():
    res, _ = _virtual(_reqs([(30, 2), (30, 2), (30, 2), (30, 2)]), _cfg(batched=64, max_model_len=64))
    prefills = [it["prefill_tokens"] for it in res.iterations if it["kind"] == "prefill"]
    assert prefills == [60, 60]
    assert max(prefills) <= 64


def test_requests_are_not_admitted_before_they_arrive():
    arrivals = [0.5, 0.5, 3.0, 10.0, 10.01]
    res, _ = _virtual(_reqs([(4, 4)] * 5, arrivals), _cfg())
    for r in res.requests:
        assert r["first_scheduled_s"] >= r["arrival_s"]
    # an idle server waits for the next arrival exactly and starts it then
    assert [r["first_scheduled_s"] for r in res.requests[:4]] == pytest.approx([0.5, 0.5, 3.0, 10.0])
    assert res.requests[4]["first_scheduled_s"] == pytest.approx(11.0)  # after 10.0's prefill pass


def test_preemption_only_when_the_pool_is_too_small():
    lengths = [(9, 12)] * 6  # each ends with 20 KV tokens = 5 blocks of 4
    ample, _ = _virtual(_reqs(lengths), _cfg(num_blocks=4 * 5))  # every running sequence's last block fits
    assert ample.preemptions == 0 and all(r["preemptions"] == 0 for r in ample.requests)
    tight, ex = _virtual(_reqs(lengths), _cfg(num_blocks=12))
    assert tight.preemptions > 0
    assert sum(r["preemptions"] for r in tight.requests) == tight.preemptions
    assert all(r["finish_s"] is not None for r in tight.requests)
    assert max(it["used_blocks"] for it in tight.iterations) <= 12
    for r in tight.requests:
        # a recompute prefills prompt + the tokens produced so far: more than the prompt alone
        assert (r["prefilled_tokens"] > r["prompt_tokens"]) == (r["preemptions"] > 0)
        assert len(r["tokens"]) == r["gen_tokens"]


def test_the_victim_is_the_most_recently_admitted():
    # 3 at t=0 admitted together (slots 0,1,2 = A,B,C); the pool runs out: C (latest) goes first
    res, _ = _virtual(_reqs([(8, 10), (8, 10), (8, 10)]), _cfg(num_blocks=7, block_size=4))
    first = next(i for i, it in enumerate(res.iterations) if it["preempted"])
    assert res.iterations[first]["preempted"] == 1
    a, b, c = res.requests
    assert c["preemptions"] >= 1 and a["preemptions"] == 0
    # the preempted request keeps its first first token: TTFT from the first prefill
    assert c["first_token_s"] == pytest.approx(1.0)


def test_a_stream_of_single_token_requests():
    res, _ = _virtual(_reqs([(5, 1)] * 7), _cfg(max_num_seqs=3))
    assert [it["kind"] for it in res.iterations] == ["prefill"] * 3
    assert all(r["tpot_s"] is None and r["e2e_s"] == r["ttft_s"] for r in res.requests)
    s = sr.summarize(res.requests, res.iterations)
    assert s["tpot_p50_s"] is None and s["finished"] == 7 and s["generated_tokens"] == 7


def test_the_deadline_stops_admission_and_reports_the_rest():
    res, _ = _virtual(_reqs([(4, 5)] * 6, [0.0, 0.0, 0.1, 5.0, 6.0, 7.0]), _cfg(), deadline_s=2.0)
    assert res.deadline_hit
    served = [r["finish_s"] is not None for r in res.requests]
    assert served == [True, True, True, False, False, False]
    s = sr.summarize(res.requests, res.iterations)
    assert (s["finished"], s["unserved"]) == (3, 3)


def test_compaction_moves_the_last_slot_into_the_hole():
    # B (slot 1 of 3) finishes first: C moves from slot 2 to slot 1 with its valid KV prefix
    res, ex = _virtual(_reqs([(4, 5), (4, 2), (6, 5)]), _cfg())
    assert ex.moves[0] == (2, 1, 7)  # C: prompt 6 + 1 decode step written


# ---- the real model on the CPU ----------------------------------------------------------------
torch = pytest.importorskip("torch")
from calibrate import graph_engine as ge  # noqa: E402
from calibrate.configs import load_model_config  # noqa: E402


def _executor(name, max_num_seqs=4, max_model_len=64):
    """float32 weights with a large std, so tokens depend on the context (std 0.02 makes tied
    models repeat their input token)."""
    config = load_model_config(name)
    w = ge.random_weights(ge.Shapes.from_config(config), torch.device("cpu"), torch.float32, seed=3, std=0.2)
    return sl.ModelExecutor(config, device="cpu", max_num_seqs=max_num_seqs, max_model_len=max_model_len,
                            dtype="float32", weights=w)


def _alone(ex, req, seed=0):
    """The plain graph engine's greedy tokens for ``req`` alone: ge.prefill then ge.decode_step."""
    s, w = ex.shapes, ex.weights
    ids = torch.from_numpy(sl.prompt_ids_for(req, s.vocab, seed))[None]
    total = req.prompt_tokens + req.gen_tokens
    shape = (s.layers, 1, s.kv_heads, total, s.head_dim)
    cos, sin = ge.rope_tables(s, total, torch.device("cpu"), torch.float32)
    st = ge.StepState(tok=torch.zeros(1, dtype=torch.long), pos=torch.zeros(1, dtype=torch.long),
                      key_pos=torch.arange(total), cache_k=torch.zeros(shape), cache_v=torch.zeros(shape),
                      cos=cos, sin=sin)
    with torch.inference_mode():
        st.tok.copy_(ge.prefill(w, s, ids, st.cache_k, st.cache_v, cos, sin).argmax(-1))
        out = [int(st.tok[0])]
        for j in range(req.gen_tokens - 1):
            st.pos.fill_(req.prompt_tokens + j)
            ge.decode_step(w, s, st)
            out.append(int(st.tok[0]))
    return out


LENGTHS = [(5, 9), (11, 3), (3, 1), (14, 10), (7, 6), (4, 12), (9, 2), (6, 7)]


class _Counting:
    def __init__(self, ex, skip_copies=False):
        self.ex, self.skip = ex, skip_copies
        self.moves = []
        self.buckets, self.vocab = ex.buckets, ex.vocab

    def prefill(self, items):
        return self.ex.prefill(items)

    def decode(self, tokens, positions):
        return self.ex.decode(tokens, positions)

    def mixed(self, tokens, positions, items):
        return self.ex.mixed(tokens, positions, items)

    def left(self, n):
        self.ex.left(n)

    def move(self, src, dst, kv_tokens):
        self.moves.append((src, dst, kv_tokens))
        if not self.skip:
            self.ex.move(src, dst, kv_tokens)


TINY = Path(__file__).parent / "data" / "tiny_configs"


def _variant(tmp_path_factory, base: str, **changes) -> str:
    """A tiny catalog config with ``changes``, written to a temporary config.json (its path)."""
    from calibrate.configs import resolve_config_path

    config = {**json.loads(resolve_config_path(base).read_text()), **changes}
    path = tmp_path_factory.mktemp(base) / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    """Tiny models with what tiny-qwen2 and tiny-llama lack: Qwen3's q/k norms, biases on every
    attention projection (the output's too: Llama's attention_bias), a plain GELU MLP (GPT-NeoX)."""
    return {
        "qk-norm": str(TINY / "tiny-qwen3" / "config.json"),
        "o-bias": _variant(tmp_path_factory, "tiny-llama", attention_bias=True),
        "gelu": json.dumps({"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 64,
                            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "vocab_size": 384, "layer_norm_eps": 1e-5, "rotary_pct": 1.0,
                            "rotary_emb_base": 10000, "tie_word_embeddings": False, "hidden_act": "gelu"}),
    }


def _feature_path(features, tmp_path_factory, key):
    value = features[key]
    if value.startswith("{"):
        path = tmp_path_factory.mktemp(key) / "config.json"
        path.write_text(value)
        return str(path)
    return value


@pytest.mark.parametrize("key", ["qk-norm", "o-bias", "gelu"])
def test_tokens_equal_the_graph_engine_alone_for_the_other_dense_layers(key, features, tmp_path_factory):
    """q/k norms, an output bias and a plain MLP: the loop's decode step and its packed prefill
    (eager, graph-padded and chunked) run each as the graph engine does, through preemption."""
    name = _feature_path(features, tmp_path_factory, key)
    ex = _executor(name)
    shapes = ex.shapes
    assert {"qk-norm": shapes.qk_norm, "o-bias": shapes.o_bias, "gelu": not shapes.gated}[key]
    requests = _reqs(LENGTHS)
    res = sl.serve(requests, _Counting(ex), _cfg(num_blocks=9, max_num_seqs=4, block_size=4))
    assert res.preemptions > 0
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"{key}: request {req.request_id}"
    ex = _chunk_graph_executor(name)
    res = sl.serve(requests, _Counting(ex), _chunked(num_blocks=12, batched=6))
    assert res.preemptions > 0 and "mixed" in {it["kind"] for it in res.iterations}
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"{key} chunked: request {req.request_id}"


def test_the_loop_refuses_what_it_would_not_run_as_priced(tmp_path_factory):
    """MoE, latent attention, and a sliding window narrower than the slot: one line each, before
    any weight is built; a window at least the slot's length drops nothing and is served."""
    from calibrate.configs import load_model_config

    for name, words in [("tiny-mixtral", "mixture of experts"), ("tiny-qwen3-moe", "mixture of experts"),
                        ("tiny-gpt-oss", "mixture of experts")]:
        with pytest.raises(RooflineError, match=words):
            sl.ModelExecutor(load_model_config(name), device="cpu", max_num_seqs=2, max_model_len=32)
    for name in ("tiny-deepseek-v2", "tiny-deepseek-v3"):
        shapes = ge.Shapes.from_config(load_model_config(str(TINY / name / "config.json")))
        with pytest.raises(RooflineError, match="dense decoders only"):
            sl.check_servable(shapes, 32, name)
    dense_mla = ge.Shapes(hidden=64, layers=2, heads=4, kv_heads=4, head_dim=16, inter=128, vocab=64, eps=1e-6,
                          rope_theta=1e4, qkv_bias=False, tied=False, kv_lora_rank=32)
    with pytest.raises(RooflineError, match="latent attention"):
        sl.check_servable(dense_mla, 32)
    windowed = _variant(tmp_path_factory, "tiny-llama", model_type="mistral", sliding_window=48)
    with pytest.raises(RooflineError, match="48-token sliding window, narrower than max_model_len 64; "
                                            "serve it with --max-model-len 48 or less"):
        sl.ModelExecutor(load_model_config(windowed), device="cpu", max_num_seqs=2, max_model_len=64)
    ex = sl.ModelExecutor(load_model_config(windowed), device="cpu", max_num_seqs=2, max_model_len=48)
    assert min(ex.shapes.windows) == 48


def test_a_session_that_would_not_fit_is_refused_before_it_is_built(monkeypatch):
    """Weights + the static KV cache against the memory free (MemAvailable on the CPU), one line."""
    import calibrate.timing as timing
    from calibrate import serving_job as sj

    config = load_model_config("tiny-llama")
    need = sj.session_memory_bytes("tiny-llama", config, 4, 64, "bfloat16")
    shapes = ge.Shapes.from_config(config)
    # hand count: embedding + LM head, two layers (qkv 64 x 96, o 64 x 64, gate/up/down 3 x 64 x 160,
    # two norms), the final norm; K and V of 2 layers x 5 slots x 1 head x 64 rows x 16
    params = 2 * 384 * 64 + 2 * (64 * 96 + 64 * 64 + 3 * 64 * 160 + 2 * 64) + 64
    assert shapes.kv_heads == 1 and need == 2 * (params + 2 * 2 * 5 * 64 * 16)
    monkeypatch.setattr(timing, "mem_available_bytes", lambda: need)  # 0.9 x need < need: refused
    with pytest.raises(RooflineError, match="tiny-llama does not fit: .* GB available \\(MemAvailable\\)"):
        sj.check_session_fits("tiny-llama", config, torch.device("cpu"), 4, 64)
    monkeypatch.setattr(timing, "mem_available_bytes", lambda: 2 * need)
    sj.check_session_fits("tiny-llama", config, torch.device("cpu"), 4, 64)


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_tokens_equal_the_graph_engine_alone_through_compaction_and_preemption(name):
    ex = _executor(name)
    requests = _reqs(LENGTHS)
    counting = _Counting(ex)
    res = sl.serve(requests, counting, _cfg(num_blocks=9, max_num_seqs=4, block_size=4))
    assert res.preemptions > 0  # the small pool forced recomputes
    assert any(kv > 0 for _, _, kv in counting.moves)  # and compaction copied real KV
    buckets = {it["bucket"] for it in res.iterations if it["kind"] == "decode"}
    assert buckets & {4}  # 3 sequences run in the padded bucket of 4
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"request {req.request_id} ({rec['preemptions']} preemptions)"
    # the same stream with an ample pool and more slots: no preemption, same tokens
    res2 = sl.serve(requests, _executor(name, max_num_seqs=8), _cfg(max_num_seqs=8))
    assert res2.preemptions == 0
    assert [r["tokens"] for r in res2.requests] == [r["tokens"] for r in res.requests]


def _loop_varlen(q, k, v, cu, max_len):
    """varlen attention as a loop of causal SDPA calls over the segments cu delimits (empty ones
    skipped, rows outside every segment left zero): the CPU's stand-in for the flash call."""
    import torch.nn.functional as F

    out = torch.zeros_like(q)
    bounds = [int(x) for x in cu]
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            qi, ki, vi = (t[a:b].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
            out[a:b] = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True)[0].transpose(0, 1)
    return out


def _graph_prefill_executor(name, max_num_seqs=4, max_model_len=64, batched=40):
    """An executor whose whole-prompt prefills take the prefill-graph path (padded token buckets,
    static buffers, the spare slot), each 'graph' the body called directly, on the CPU."""
    config = load_model_config(name)
    w = ge.random_weights(ge.Shapes.from_config(config), torch.device("cpu"), torch.float32, seed=3, std=0.2)
    ex = sl.ModelExecutor(config, device="cpu", max_num_seqs=max_num_seqs, max_model_len=max_model_len,
                          dtype="float32", weights=w, max_num_batched_tokens=batched, prefill_graphs=True)
    assert ex.bufs.cache_k.shape[1] == max_num_seqs + 1  # the spare slot
    ex._prefill_buffers()
    ex._varlen_attention = _loop_varlen
    ex.prefill_graph_of = {b: (lambda b=b: ex._prefill_graph_body(b)) for b in ex.prefill_buckets}
    return ex


def test_prefill_token_buckets_follow_the_documented_ladder():
    assert sl.prefill_token_buckets(40) == [16, 32, 40]
    assert sl.prefill_token_buckets(2048) == [16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048]
    assert sl.prefill_token_buckets(1280) == [16, 32, 64, 128, 256, 512, 768, 1024, 1280]
    assert sl.prefill_token_buckets(16) == [16]


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_graph_prefill_tokens_equal_the_graph_engine_alone(name):
    """The padded, bucketed prefill (what a prefill CUDA graph replays) gives every request the
    tokens the plain engine gives it alone, through preemption and compaction: the padding's K/V
    lands only in the spare slot, the offsets and last positions are right."""
    ex = _graph_prefill_executor(name)
    requests = _reqs(LENGTHS)
    calls = []
    body = ex._prefill_graph_body
    ex._prefill_graph_body = lambda b: (calls.append(b), body(b))
    ex.prefill_graph_of = {b: (lambda b=b: ex._prefill_graph_body(b)) for b in ex.prefill_buckets}
    res = sl.serve(requests, _Counting(ex), _cfg(num_blocks=9, max_num_seqs=4, block_size=4, batched=40))
    assert res.preemptions > 0
    assert set(calls) >= {16, 32}  # passes of one and of several sequences, padded
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"request {req.request_id} ({rec['preemptions']} preemptions)"


def test_the_graph_prefill_check_catches_padding_written_into_a_real_slot():
    ex = _graph_prefill_executor("tiny-llama")
    stage = ex._stage_prefill

    def wrong(items):  # padding tokens sent to slot 0 instead of the spare slot
        bucket = stage(items)
        top = ex._pf_layout[0]
        total = sum(len(ids) for _, ids, _ in items)
        ex._pf_dev[2 * top + total:2 * top + bucket] = 0
        return bucket

    ex._stage_prefill = wrong
    requests = _reqs(LENGTHS)
    res = sl.serve(requests, _Counting(ex), _cfg(num_blocks=1000, max_num_seqs=4, block_size=4, batched=40))
    assert any(rec["tokens"] != _alone(ex, req) for req, rec in zip(requests, res.requests))


def test_the_token_check_catches_a_missing_compaction_copy():
    ex = _executor("tiny-llama")
    requests = _reqs(LENGTHS)
    res = sl.serve(requests, _Counting(ex, skip_copies=True), _cfg(num_blocks=1000, max_num_seqs=4, block_size=4))
    assert any(rec["tokens"] != _alone(ex, req) for req, rec in zip(requests, res.requests))


def test_real_clock_respects_arrivals():
    ex = _executor("tiny-qwen2")
    arrivals = [0.0, 0.03, 0.06, 0.2]
    res = sl.serve(_reqs([(6, 4)] * 4, arrivals), ex, _cfg())
    for r in res.requests:
        assert r["first_scheduled_s"] >= r["arrival_s"]
        assert r["ttft_s"] > 0 and r["e2e_s"] >= r["ttft_s"]
    # slots and blocks are ample: the first iteration that starts after an arrival admits it
    for r in res.requests:
        assert not [it for it in res.iterations if r["arrival_s"] <= it["t_start_s"] < r["first_scheduled_s"]]
    assert res.iterations[-1]["t_end_s"] < 5.0  # the idle wait ended (a slow shared CPU allowed for)
    for it in res.iterations:
        assert it["t_end_s"] >= it["t_start_s"] and it["device_s"] > 0


# ---- files ------------------------------------------------------------------------------------
def test_run_serving_writes_files_that_serving_runs_reads(tmp_path):
    from calibrate import serving_job as sj

    path = tmp_path / "reqs.csv"
    path.write_text("prompt_tokens,gen_tokens,arrival_s\n12,5,0\n30,1,0.01\n8,9,0.02\n20,4,0.02\n")
    out = tmp_path / "out"
    started_unix_s = time.time()
    run_path = sj.run_serving("cpu-test", "tiny-qwen2", path, out, device="cpu", max_num_seqs=2,
                              kv_capacity_tokens=48, block_size=8, progress=lambda m: None)
    assert run_path == out / "run-tiny-qwen2-reqs.json"
    names = sr.run_names(out)
    assert names == ["tiny-qwen2-reqs"]
    run = sr.read_run(out, names[0])
    assert [r["request_id"] for r in run.requests] == [0, 1, 2, 3]
    assert [(r["prompt_tokens"], r["gen_tokens"]) for r in run.requests] == [(12, 5), (30, 1), (8, 9), (20, 4)]
    assert run.requests[1]["tpot_s"] is None and run.requests[0]["tpot_s"] > 0
    assert all(r["ttft_s"] == pytest.approx(r["first_token_s"] - r["arrival_s"]) for r in run.requests)
    c = run.config
    assert (c["model"], c["card"], c["max_num_seqs"], c["block_size"], c["num_blocks"], c["kv_capacity_tokens"]) == (
        "tiny-qwen2", "cpu-test", 2, 8, 6, 48)
    assert c["max_model_len"] == 256 and c["policy"] == "prefill-first" and c["kv_pool_source"] == "kv_capacity_tokens"
    assert run.summary == pytest.approx({**sr.summarize(run.requests, run.iterations), "deadline_hit": False})
    assert run.summary["max_running"] <= 2
    assert {it["kind"] for it in run.iterations} <= {"prefill", "decode"}
    assert sum(it["prefill_seqs"] for it in run.iterations) == 4 + run.summary["preemptions"]
    for key in ("build_s", "warmup_s", "capture_s", "serve_wall_s"):
        assert run.run["times"][key] >= 0
    # the loop's t = 0 as a Unix time: before the file was written, after the job started
    zero = run.run["times"]["clock_zero_unix_s"]
    assert started_unix_s < zero < run_path.stat().st_mtime
    assert run.run["environment"]["torch"] == torch.__version__
    stream = sr.read_request_file(out / "stream-tiny-qwen2-reqs.csv")
    assert stream == sr.read_request_file(path)


def test_the_job_runs_canned_streams_on_the_cpu(tmp_path):
    from calibrate import serving_job as sj

    rc = sj.main(["--out", str(tmp_path), "--model", "tiny-llama", "--device", "cpu", "--streams", "short",
                  "--rates", "0,200", "--count", "12", "--max-num-seqs", "4", "--max-model-len", "320",
                  "--budget-s", "120"])
    assert rc == 0
    assert sr.run_names(tmp_path) == ["tiny-llama-short-r0-n12-s1", "tiny-llama-short-r200-n12-s1"]
    run = sr.read_run(tmp_path, "tiny-llama-short-r200-n12-s1")
    assert run.run["stream"]["rate_per_s"] == 200.0 and run.summary["finished"] == 12
    assert run.config["kv_pool_source"] == "static_cache" and run.config["num_blocks"] == 4 * 20


def test_a_budget_too_small_skips_runs(tmp_path):
    from calibrate import serving_job as sj

    rc = sj.main(["--out", str(tmp_path), "--model", "tiny-qwen2", "--device", "cpu", "--streams", "fixed",
                  "--rates", "1", "--count", "3", "--max-model-len", "384", "--budget-s", "1"])
    assert rc == 0 and sr.run_names(tmp_path) == []


# ---- streams and the reader -------------------------------------------------------------------
def test_canned_streams_are_seeded_in_range_and_share_the_simulators_arrivals():
    from calibrate import serving_job as sj

    a = sj.stream_requests("mixed", 300, 8.0, seed=5)
    assert a == sj.stream_requests("mixed", 300, 8.0, seed=5)
    assert a != sj.stream_requests("mixed", 300, 8.0, seed=6)
    p = np.array([r.prompt_tokens for r in a])
    g = np.array([r.gen_tokens for r in a])
    assert p.min() >= 64 and p.max() <= 1024 and g.min() >= 16 and g.max() <= 256
    assert np.median(p) < 400 and np.median(g) < 100  # log-uniform: the median is near the geometric mean
    assert abs(np.corrcoef(p, np.diff([0.0] + [r.arrival_s for r in a]))[0, 1]) < 0.2
    pytest.importorskip("pydantic")
    from roofline.batching import Requests

    expected = Requests(p, g).with_poisson_arrivals(8.0, seed=5).arrival_s
    assert [r.arrival_s for r in a] == pytest.approx(expected.tolist(), rel=0, abs=0)
    assert all(r.arrival_s == 0 for r in sj.stream_requests("fixed", 5, None))


def test_percentile_is_numpys():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100):
        values = rng.exponential(1.0, n).tolist()
        for q in (0, 50, 90, 99, 100):
            assert sr.percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_the_request_file_reader_matches_roofline_batching(tmp_path):
    pytest.importorskip("pydantic")
    from roofline.batching import read_requests

    csv_path = tmp_path / "a.csv"
    csv_path.write_text("prompt_tokens,gen_tokens,arrival_s\n100,20,0.5\n8,1,0\n")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('{"prompt_tokens": 100, "gen_tokens": 20}\n\n{"prompt_tokens": 8, "gen_tokens": 1}\n')
    for path in (csv_path, jsonl):
        mine = sr.read_request_file(path)
        theirs = read_requests(path)
        assert [r["prompt_tokens"] for r in mine] == theirs.prompt_tokens.tolist()
        assert [r["gen_tokens"] for r in mine] == theirs.gen_tokens.tolist()
        arrivals = [r["arrival_s"] for r in mine]
        assert arrivals == ([None, None] if theirs.arrival_s is None else theirs.arrival_s.tolist())
    bad = tmp_path / "bad.csv"
    for text, what in [("prompt_tokens,gen_tokens\n0,4\n", "at least 1"), ("prompt_tokens,gen\n4,4\n", "unknown"),
                       ("prompt_tokens,gen_tokens,arrival_s\n4,4,1\n4,4,\n", "every line"),
                       ("prompt_tokens,gen_tokens\n4,4,5\n", "fields"), ("", "empty")]:
        bad.write_text(text)
        with pytest.raises(RooflineError, match=what):
            sr.read_request_file(bad)


def test_reading_a_broken_run_names_the_file(tmp_path):
    (tmp_path / "run-x.json").write_text("{")
    with pytest.raises(RooflineError, match="run-x.json"):
        sr.read_run(tmp_path, "x")
    assert sr.run_names(tmp_path) == []  # no CSVs beside it: not a complete run
    (tmp_path / "run-x.json").write_text(json.dumps({"config": {}, "summary": {}}))
    (tmp_path / "requests-x.csv").write_text(",".join(sr.REQUEST_COLUMNS) + "\n")
    (tmp_path / "iterations-x.csv").write_text("iteration,t_start_s\n")
    with pytest.raises(RooflineError, match="missing column 't_end_s'"):
        sr.read_run(tmp_path, "x")


def test_a_runs_iterations_and_requests_read_alike_plain_or_compressed(tmp_path):
    """The committed runs keep their iteration and request files gzip-compressed: the same rows
    either way, the run found either way, and a damaged archive named in a one-line error."""
    import gzip
    import shutil

    committed = Path("hardware_profiles/measurements/serving/h200-graph")
    name = next(n for n in sr.run_names(committed))
    packed = committed / f"iterations-{name}.csv.gz"
    assert packed.exists() and not (committed / f"iterations-{name}.csv").exists()
    packed_requests = committed / f"requests-{name}.csv.gz"
    assert packed_requests.exists() and not (committed / f"requests-{name}.csv").exists()
    shutil.copy(committed / f"run-{name}.json", tmp_path / f"run-{name}.json")
    (tmp_path / f"requests-{name}.csv").write_bytes(gzip.decompress(packed_requests.read_bytes()))
    (tmp_path / f"iterations-{name}.csv").write_bytes(gzip.decompress(packed.read_bytes()))
    plain, stored = sr.read_run(tmp_path, name), sr.read_run(committed, name)
    assert plain.iterations == stored.iterations and len(plain.iterations) > 10
    assert plain.requests == stored.requests and len(plain.requests) > 10
    assert sr.run_names(tmp_path) == [name]
    (tmp_path / f"iterations-{name}.csv").unlink()
    broken = tmp_path / f"iterations-{name}.csv.gz"
    broken.write_bytes(packed.read_bytes()[: len(packed.read_bytes()) // 2])
    assert sr.run_names(tmp_path) == [name]
    with pytest.raises(RooflineError, match=f"cannot read .*iterations-{name}.csv.gz"):
        sr.read_run(tmp_path, name)
    broken.write_bytes(b"not gzip")
    with pytest.raises(RooflineError, match="cannot read"):
        sr.read_run(tmp_path, name)


def test_run_specs_parse_and_refuse():
    from calibrate import serving_job as sj

    assert sj.parse_run("mixed@10", 400, 1) == ("mixed", 10.0, 400, 1)
    assert sj.parse_run("long-gen@2.5:300:7", 400, 1) == ("long-gen", 2.5, 300, 7)
    assert sj._rate_label(2.5) == "r2p5" and sj._rate_label(0) == "r0"
    for bad, what in [("mixed", "STREAM@RATE"), ("mixed@x", "STREAM@RATE"), ("nope@3", "unknown stream"),
                      ("mixed@-1", "rate"), ("mixed@1:0", "count"), ("mixed@1:2:3:4", "STREAM@RATE")]:
        with pytest.raises(RooflineError, match=what):
            sj.parse_run(bad, 400, 1)


def test_the_job_takes_run_specs(tmp_path):
    from calibrate import serving_job as sj

    rc = sj.main(["--out", str(tmp_path), "--model", "tiny-qwen2", "--device", "cpu", "--max-num-seqs", "4",
                  "--max-model-len", "320", "--runs", "short@0:5:2,short@300:6"])
    assert rc == 0
    assert sr.run_names(tmp_path) == ["tiny-qwen2-short-r0-n5-s2", "tiny-qwen2-short-r300-n6-s1"]
    run = sr.read_run(tmp_path, "tiny-qwen2-short-r0-n5-s2")
    assert run.run["stream"]["seed"] == 2 and len(run.requests) == 5
    assert sr.read_request_file(tmp_path / "stream-tiny-qwen2-short-r0-n5-s2.csv") == [
        {"prompt_tokens": r.prompt_tokens, "gen_tokens": r.gen_tokens, "arrival_s": 0.0}
        for r in sj.stream_requests("short", 5, None, 2)]


# ---- policy chunked ---------------------------------------------------------------------------
def _chunked(num_blocks=1000, max_num_seqs=4, block_size=4, max_model_len=64, batched=8):
    return sl.SchedulerConfig(max_num_seqs=max_num_seqs, max_model_len=max_model_len, num_blocks=num_blocks,
                              block_size=block_size, max_num_batched_tokens=batched, policy="chunked")


def test_chunked_hand_computed_schedule():
    # budget 8 tokens; a prefill or a decode costs 1 s (a mixed pass 2 s). A (p10, g3), B (p3, g2) at 0.
    res, _ = _virtual(_reqs([(10, 3), (3, 2)]), _chunked(), prefill_s=1.0, decode_s=1.0)
    its = [(it["kind"], it["decode_seqs"], it["prefill_seqs"], it["prefill_tokens"]) for it in res.iterations]
    # 1: A's first 8 tokens. 2: A's last 2 (A's first token) + B's 3 (B's first token).
    # 3: A and B decode (B done). 4: A decodes (done).
    assert its == [("prefill", 0, 1, 8), ("prefill", 0, 2, 5), ("decode", 2, 0, 0), ("decode", 1, 0, 0)]
    assert res.iterations[1]["prefill_pairs"] == (2 * 8 + 3) + 6  # A's chunk after 8 cached, B whole
    a, b = res.requests
    assert (a["first_token_s"], a["finish_s"], b["first_token_s"], b["finish_s"]) == pytest.approx((2, 4, 2, 3))
    assert a["prefilled_tokens"] == 10


def test_chunked_mixes_decodes_and_chunks_within_the_budget():
    lengths = [(30, 6), (5, 12), (20, 3), (9, 9), (14, 4), (7, 7)]
    res, _ = _virtual(_reqs(lengths, [0.0, 0.0, 0.5, 0.5, 1.0, 3.0]), _chunked(batched=10), prefill_s=0.3,
                      decode_s=0.1)
    assert {"mixed", "decode", "prefill"} <= {it["kind"] for it in res.iterations}
    for it in res.iterations:
        assert it["decode_seqs"] + it["prefill_tokens"] <= 10
    for r, (p, g) in zip(res.requests, lengths):
        assert r["prefilled_tokens"] == p and len(r["tokens"]) == g and r["finish_s"] is not None
        assert r["first_scheduled_s"] >= r["arrival_s"]


def test_chunked_preempts_when_the_pool_is_too_small():
    lengths = [(9, 12)] * 6
    ample, _ = _virtual(_reqs(lengths), _chunked(num_blocks=4 * 5))
    assert ample.preemptions == 0
    tight, _ = _virtual(_reqs(lengths), _chunked(num_blocks=12))
    assert tight.preemptions > 0 and all(r["finish_s"] is not None for r in tight.requests)
    assert max(it["used_blocks"] for it in tight.iterations) <= 12


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_chunked_tokens_equal_the_graph_engine_alone(name):
    ex = _executor(name)
    requests = _reqs(LENGTHS, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    counting = _Counting(ex)
    res = sl.serve(requests, counting, _chunked(num_blocks=12, batched=6))
    assert res.preemptions > 0 and any(kv > 0 for _, _, kv in counting.moves)
    assert "mixed" in {it["kind"] for it in res.iterations}
    assert any(r["prefilled_tokens"] > r["prompt_tokens"] for r in res.requests)  # a chunked recompute
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"request {req.request_id} ({rec['preemptions']} preemptions)"


def _chunk_graph_executor(name, batched=6, calls=None, max_model_len=64):
    """The prefill-graph executor with chunk graphs too (each 'graph' its body called directly);
    ``calls`` collects ("prefill" | "chunk", bucket) for each replay."""
    ex = _graph_prefill_executor(name, batched=batched, max_model_len=max_model_len)
    ex._varlen_kv = sl.sdpa_varlen_kv
    calls = [] if calls is None else calls
    ex.prefill_graph_of = {b: (lambda b=b: (calls.append(("prefill", b)), ex._prefill_graph_body(b)))
                           for b in ex.prefill_buckets}
    ex.chunk_graph_of = {b: (lambda b=b: (calls.append(("chunk", b)), ex._chunk_graph_body(b)))
                         for b in ex.prefill_buckets}
    return ex


@pytest.mark.parametrize("name,kv_heads", [("tiny-qwen2", "native"), ("tiny-llama", "native"),
                                           ("tiny-llama", "repeated")])
def test_chunk_graph_tokens_equal_the_graph_engine_alone(name, kv_heads):
    """Policy chunked with every prefill in a graph (chunks after cached tokens in chunk graphs,
    also in mixed iterations after the decode step): each request's tokens are the plain engine's
    for it alone, through preemption, recompute and compaction."""
    calls = []
    ex = _chunk_graph_executor(name, calls=calls)
    assert ex.shapes.heads > ex.shapes.kv_heads  # grouped queries: both K/V layouts matter
    ex.chunk_gqa = kv_heads
    requests = _reqs(LENGTHS, [0.0] * len(LENGTHS))
    counting = _Counting(ex)
    res = sl.serve(requests, counting, _chunked(num_blocks=12, batched=6))
    assert res.preemptions > 0 and any(kv > 0 for _, _, kv in counting.moves)
    assert "mixed" in {it["kind"] for it in res.iterations}
    assert {kind for kind, _ in calls} == {"prefill", "chunk"}  # no eager pass left
    assert sum(1 for it in res.iterations if it["prefill_seqs"]) == len(calls)
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"request {req.request_id} ({rec['preemptions']} preemptions)"


def test_a_max_model_len_off_the_alignment_keeps_every_token():
    """max_model_len 61: each slot's cache holds 64 rows (a multiple of graph_engine.RING_ALIGN, the
    rest masked: an odd score row runs cuBLAS's GEMV fallback); scheduling still stops at 61, and
    the chunk graphs' key offsets step by the 64 rows: every request's tokens are the plain
    engine's for it alone, through preemption and chunked recompute."""
    ex = _chunk_graph_executor("tiny-llama", max_model_len=61)
    assert ex.max_model_len == 61 and ex.cache_len == 64 and ex.bufs.cache_k.shape[3] == 64
    requests = _reqs(LENGTHS, [0.0] * len(LENGTHS))
    res = sl.serve(requests, _Counting(ex), _chunked(num_blocks=12, batched=6, max_model_len=61))
    assert res.preemptions > 0 and "mixed" in {it["kind"] for it in res.iterations}
    for req, rec in zip(requests, res.requests):
        assert rec["tokens"] == _alone(ex, req), f"request {req.request_id} ({rec['preemptions']} preemptions)"


def test_the_chunk_graph_check_catches_keys_that_skip_the_cache():
    """If the chunk's keys were only its own tokens (cu_k's first sequence t long, not c + t), its
    queries would miss the cached tokens: the token check sees it."""
    ex = _chunk_graph_executor("tiny-llama")
    stage = ex._stage_prefill

    def wrong(items):
        bucket = stage(items)
        if int(items[0][2]):
            f = ex._pf_fields()
            ex._pf_dev[f["cu_k"]][1] = len(items[0][1])
        return bucket

    ex._stage_prefill = wrong
    requests = _reqs(LENGTHS, [0.0] * len(LENGTHS))
    res = sl.serve(requests, _Counting(ex), _chunked(num_blocks=1000, batched=6))
    assert any(rec["tokens"] != _alone(ex, req) for req, rec in zip(requests, res.requests))


def test_the_chunk_attention_check_passes_bottom_right_causal_and_refuses_top_left():
    """The check the loop runs before the clock (on the GPU, of the flash call): the stand-in
    passes in both K/V layouts; a top-left causal mask (chunk token j seeing only cache rows 0..j)
    is refused with the disagreement."""
    import torch.nn.functional as F

    ex = _chunk_graph_executor("tiny-llama")
    for ex.chunk_gqa in ("native", "repeated"):
        assert ex._check_chunk_attention() == ""

    def top_left(q, k, v, cu_q, cu_k, max_q, max_k):
        group = q.shape[1] // k.shape[1]
        out = torch.zeros_like(q)
        qs, ks = [int(x) for x in cu_q], [int(x) for x in cu_k]
        for a, b, c, d in zip(qs, qs[1:], ks, ks[1:]):
            if b > a:
                qi = q[a:b].transpose(0, 1).unsqueeze(0)
                ki, vi = (t[c:d].repeat_interleave(group, dim=1).transpose(0, 1).unsqueeze(0) for t in (k, v))
                out[a:b] = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True)[0].transpose(0, 1)
        return out

    ex._varlen_kv = top_left
    assert ex._check_chunk_attention().startswith("chunk attention (repeated K/V heads) disagrees with SDPA by")


def test_the_job_runs_policy_chunked(tmp_path):
    from calibrate import serving_job as sj

    rc = sj.main(["--out", str(tmp_path), "--model", "tiny-qwen2", "--device", "cpu", "--max-num-seqs", "4",
                  "--max-model-len", "320", "--runs", "short@0:6:2", "--policy", "chunked",
                  "--max-num-batched-tokens", "64"])
    assert rc == 0
    run = sr.read_run(tmp_path, "tiny-qwen2-short-r0-n6-s2")
    assert run.config["policy"] == "chunked" and run.config["max_num_batched_tokens"] == 64
    assert "mixed" in {it["kind"] for it in run.iterations} and run.summary["finished"] == 6


def test_the_job_runs_without_pydantic(tmp_path):
    """The GPU image has no pydantic: the job's own path must do without it. (roofline/__init__.py
    imports the API, hence pydantic, eagerly: the package is stubbed here so that only the
    modules the job imports are tested.)"""
    import subprocess
    import sys
    from pathlib import Path

    import roofline

    code = (
        "import sys, types\n"
        "pkg = types.ModuleType('roofline')\n"
        f"pkg.__path__ = [{str(Path(roofline.__file__).parent)!r}]\n"
        "sys.modules['roofline'] = pkg\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pydantic':\n"
        "            raise ImportError('no pydantic here')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from calibrate import serving_job\n"
        f"rc = serving_job.main(['--out', {str(tmp_path)!r}, '--model', 'tiny-llama', '--device', 'cpu',\n"
        "    '--max-num-seqs', '2', '--max-model-len', '320', '--runs', 'short@0:3'])\n"
        "assert 'pydantic' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sr.run_names(tmp_path) == ["tiny-llama-short-r0-n3-s1"]
    config = sr.read_run(tmp_path, "tiny-llama-short-r0-n3-s1").config
    assert "host_probe" in config and "host_probe_wide" not in config  # the wide probe only when asked


def test_the_host_probe_measures_a_fixed_stream_before_the_clock():
    # HOST_PROBE_SEQS requests (capped by the slots) each prefilled alone, then decoding together:
    # every prefill iteration is measured, and every decode step but the last (everyone finishes
    # there) and the one with no successor
    ex = _executor("tiny-qwen2")
    probe = sl.host_probe(ex, ex.max_num_seqs, ex.max_model_len)
    seqs = min(sl.HOST_PROBE_SEQS, ex.max_num_seqs)
    assert probe["decode_seqs"] == seqs and probe["prefill_iterations"] == seqs
    assert probe["decode_iterations"] == probe["gen_tokens"] - 2
    assert probe["prompt_tokens"] >= probe["gen_tokens"]  # so two prompts never share the probe's budget
    assert 0 < probe["decode_host_s"] < 1.0 and 0 < probe["prefill_host_s"] < 1.0


def test_the_wide_host_probe_serves_every_slot_and_is_recorded_beside_the_narrow_one(tmp_path):
    # serving_job --wide-host-probe (device call 148): the probe again with all 20 slots decoding, before and
    # after the clock, under its own keys; the narrow probe the replay reads stays at HOST_PROBE_SEQS
    import json

    from calibrate import serving_job as sj

    rc = sj.main(["--out", str(tmp_path), "--model", "tiny-llama", "--device", "cpu", "--max-num-seqs", "20",
                  "--max-model-len", "320", "--runs", "short@0:3", "--wide-host-probe"])
    assert rc == 0
    config = json.loads((tmp_path / "run-tiny-llama-short-r0-n3-s1.json").read_text())["config"]
    assert config["host_probe"]["decode_seqs"] == sl.HOST_PROBE_SEQS == 16
    for key in ("host_probe_wide", "host_probe_wide_after"):
        assert config[key]["decode_seqs"] == config[key]["prefill_iterations"] == 20
        assert 0 < config[key]["decode_host_s"] < 1.0
    clock = sl.VirtualClock()
    ex = sl.CostExecutor(clock, lambda lengths, starts: 0.01, lambda n, bucket, ctx: 0.002, 64)
    assert sl.host_probe(ex, 64, 256, clock=clock, sleep=clock.sleep, seqs=40)["decode_seqs"] == 40
    assert sl.host_probe(ex, 24, 256, clock=clock, sleep=clock.sleep, seqs=40)["decode_seqs"] == 24  # capped by the slots


def test_the_host_probe_reads_host_time_off_a_virtual_clock():
    # on a virtual clock whose every reading costs 1 ms of "host", an iteration's host time is
    # (clock readings between its start and the next's) x 1 ms: the probe's medians are whole ms
    class Ticking(sl.VirtualClock):
        def __call__(self):
            self.advance(1e-3)
            return super().__call__()

    clock = Ticking()
    ex = sl.CostExecutor(clock, lambda lengths, starts: 0.01, lambda n, bucket, ctx: 0.002, 16)
    probe = sl.host_probe(ex, 16, 256, clock=clock, sleep=clock.sleep)
    assert probe["decode_seqs"] == 16 and probe["prefill_iterations"] == 16
    for key in ("decode_host_s", "prefill_host_s"):
        assert probe[key] == pytest.approx(round(probe[key] / 1e-3) * 1e-3, abs=1e-9) and probe[key] >= 1e-3


def test_one_disturbed_repeat_of_the_host_probe_does_not_count(monkeypatch):
    # three repeats, the second on a machine 10x slower for a moment: the median of the repeats'
    # medians is the undisturbed figure, and every repeat is on record
    class Ticking(sl.VirtualClock):
        tick = 1e-3

        def __call__(self):
            self.advance(self.tick)
            return super().__call__()

    clock = Ticking()
    calls = []
    real_serve = sl.serve

    def serve(*args, **kw):
        calls.append(1)
        clock.tick = 1e-2 if len(calls) == 2 else 1e-3
        return real_serve(*args, **kw)

    monkeypatch.setattr(sl, "serve", serve)
    ex = sl.CostExecutor(clock, lambda lengths, starts: 0.01, lambda n, bucket, ctx: 0.002, 16)
    probe = sl.host_probe(ex, 16, 256, clock=clock, sleep=clock.sleep)
    assert len(calls) == len(probe["repeats"]) == sl.HOST_PROBE_REPEATS == 3
    slow, fast = probe["repeats"][1], probe["repeats"][0]
    assert slow["decode_host_s"] == pytest.approx(10 * fast["decode_host_s"], rel=1e-6)
    assert probe["decode_host_s"] == pytest.approx(fast["decode_host_s"], rel=1e-9)
    assert probe["prefill_host_s"] == pytest.approx(fast["prefill_host_s"], rel=1e-9)


def test_the_device_probe_times_every_capture_sizes_decode_step():
    # on a cost executor whose decode step at bucket b takes b ms (whatever the slots' positions),
    # the probe's median at each capture size is exactly b ms, from warmup + repeats steps each,
    # the bucket filled midway from the one below, each running slot at its own position
    seen = []

    def decode_s(n, bucket, ctx):
        seen.append((n, bucket, tuple(ctx)))
        return 1e-3 * bucket

    ex = sl.CostExecutor(sl.VirtualClock(), lambda lengths, starts: 0.01, decode_s, 24)
    probe = sl.device_probe(ex, 256, repeats=5, warmup=2)
    assert probe["decode_device_s"] == {str(b): pytest.approx(1e-3 * b, rel=1e-12) for b in ex.buckets}
    assert list(probe["decode_device_s"]) == ["1", "2", "4", "8", "16", "24"]
    assert len(seen) == len(ex.buckets) * (5 + 2) and probe["repeats"] == 5
    fill = {1: 1, 2: 2, 4: 3, 8: 6, 16: 12, 24: 20}  # midway from the bucket below, rounded up
    assert sl.probe_fill(ex.buckets) == fill and probe["decode_seqs"] == {str(b): n for b, n in fill.items()}
    assert all(n == fill[bucket] and len(set(ctx)) == n and max(ctx) <= 256 for n, bucket, ctx in seen)
    assert seen[-1][2] == tuple(p + 1 for p in sl.probe_positions(20, 256))
    assert sl.probe_fill([1, 2, 4, 8, 16, 24, 32, 48, 64]) == {1: 1, 2: 2, 4: 3, 8: 6, 16: 12, 24: 20, 32: 28,
                                                                48: 40, 64: 56}
    assert sl.probe_positions(4, 256) == [51, 102, 153, 204]  # (i + 1) x 256 // 5
    assert sl.probe_positions(3, 2) == [0, 1, 1]  # capped at the last position


def test_one_slow_step_of_the_device_probe_does_not_count():
    # the median: a step 10x slow once in a bucket's repeats leaves its figure alone
    calls = []

    def decode_s(n, bucket, ctx):
        calls.append(1)
        return 1e-3 * (10 if len(calls) == 6 else 1)

    ex = sl.CostExecutor(sl.VirtualClock(), lambda lengths, starts: 0.01, decode_s, 2)
    probe = sl.device_probe(ex, 64, repeats=5, warmup=0)
    assert probe["decode_device_s"] == {"1": pytest.approx(1e-3), "2": pytest.approx(1e-3)}


def test_spin_wait_reaches_the_executor_and_the_runs_config(tmp_path):
    # --spin-wait (call 13's experiment): the executor polls the pass's end event (on CUDA; the
    # CPU has no events) and the run says which wait it used
    from calibrate import serving_job as sj

    path = tmp_path / "reqs.csv"
    path.write_text("prompt_tokens,gen_tokens,arrival_s\n12,5,0\n8,3,0.01\n")
    for spin, want in ((True, "spin"), (False, "sync")):
        out = tmp_path / want
        sj.run_serving("cpu-test", "tiny-qwen2", path, out, device="cpu", max_num_seqs=2, spin_wait=spin,
                       progress=lambda m: None)
        run = sr.read_run(out, sr.run_names(out)[0])
        assert run.config["host_wait"] == want
        assert run.config["host_probe"]["decode_seqs"] == 2
        # the same probe again after the run's clock stopped
        assert run.config["host_probe_after"]["decode_seqs"] == 2
        assert run.config["host_probe_after"]["decode_host_s"] > 0
        # and the device probe, before and after: each capture size's decode step on the CPU
        for key in ("device_probe", "device_probe_after"):
            times = run.config[key]["decode_device_s"]
            assert list(times) == ["1", "2"] and all(0 < v < 1.0 for v in times.values())


def test_the_loop_attention_probe_hands_the_varlen_call_the_loops_own_offsets():
    # calibrate.probes.loop_attention_offsets stands for what a prefill graph's varlen call gets:
    # the offsets _stage_prefill writes for the same prompts (then the padding, then empty slots)
    from calibrate.probes import loop_attention_offsets

    ex = _executor("tiny-qwen2", max_num_seqs=4)
    ex._prefill_buffers()  # what the executor builds where it captures prefill graphs (CUDA)
    for lens in ([14], [3, 5], [4, 4, 4, 4]):
        bucket = ex._stage_prefill([(slot, [1] * n, 0) for slot, n in enumerate(lens)])
        staged = ex._pf_host.numpy()[ex._pf_fields()["cu"]].tolist()
        assert staged == loop_attention_offsets(lens, bucket, 4), lens
