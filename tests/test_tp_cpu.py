"""Tensor-parallel decode on the CPU: gloo, 2 worker processes, tiny models (what CI runs).

Every test that starts workers gives the launcher a timeout, so a failing test ends instead of
hanging: the launcher kills its workers by pid past it.
"""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from calibrate import graph_engine as ge  # noqa: E402
from calibrate import tp_engine as te  # noqa: E402
from calibrate import tp_job  # noqa: E402
from calibrate.configs import load_model_config  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.measurements import read_measurements  # noqa: E402

TIMEOUT_S = 120.0  # per launch; a launch takes a few seconds
TINY_QWEN3 = {
    "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 320,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "tie_word_embeddings": False,
    "attention_bias": False, "hidden_act": "silu",
}


def _sweep(tmp_path, prompts=(8, 16), batches=(1, 2, 4, 8), fault=None, env=None, **kw):
    extra_env = dict(env or {})
    if fault:
        extra_env[te.FAULT_ENV] = fault
    kw.setdefault("timeout_s", TIMEOUT_S)
    return tp_job.run_tp_calibration(
        card="cpu-test", models=kw.pop("models", ["tiny-qwen2"]), prompts=list(prompts), gen=4,
        batches=list(batches), tp=2, out_dir=tmp_path, device="cpu", extra_env=extra_env,
        progress=lambda m: None, **kw)


# --- one process ------------------------------------------------------------------------------


def test_plan_splits_heads_and_replicates_kv_heads():
    s = ge.Shapes.from_config(load_model_config("qwen2.5-14b"))  # 40 heads, 8 KV heads
    plans = [te.plan_tp(s, 2, r) for r in range(2)]
    assert [(p.heads, p.kv_heads, p.kv_replicas, p.q_head_start, p.kv_head_start) for p in plans] == [
        (20, 4, 1, 0, 0), (20, 4, 1, 20, 4)]
    assert [(p.inter, p.inter_start, p.vocab, p.vocab_start) for p in plans] == [
        (6912, 0, 76032, 0), (6912, 6912, 76032, 76032)]
    s = ge.Shapes.from_config(load_model_config("qwen2.5-0.5b"))  # 14 heads, 2 KV heads: tp 4 would need 14/4
    with pytest.raises(RooflineError, match="14 attention heads do not split over 4"):
        te.plan_tp(s, 4, 0)
    s = ge.Shapes.from_config(load_model_config("tiny-llama"))  # 4 heads, 1 KV head: replicated
    assert [(p.kv_heads, p.kv_replicas, p.kv_head_start) for p in (te.plan_tp(s, 4, r) for r in range(4))] == [
        (1, 4, 0)] * 4
    s = ge.Shapes(hidden=64, layers=1, heads=12, kv_heads=3, head_dim=16, inter=96, vocab=100, eps=1e-6,
                  rope_theta=1e4, qkv_bias=False, tied=False)
    with pytest.raises(RooflineError, match="3 KV heads neither split over nor replicate onto 2"):
        te.plan_tp(s, 2, 0)
    s6 = ge.Shapes(**{**s.__dict__, "kv_heads": 2})  # 6 ranks: 2 heads each, KV heads on 3 ranks each
    assert [(te.plan_tp(s6, 6, r).kv_head_start, te.plan_tp(s6, 6, r).q_head_start) for r in range(6)] == [
        (0, 0), (0, 2), (0, 4), (1, 6), (1, 8), (1, 10)]


def test_shards_put_back_together_are_the_full_weights():
    s = ge.Shapes(hidden=32, layers=1, heads=4, kv_heads=2, head_dim=8, inter=48, vocab=101, eps=1e-6,
                  rope_theta=1e4, qkv_bias=True, tied=False)  # odd vocab: the last shard is padded
    full = ge.random_weights(s, torch.device("cpu"), torch.float32, seed=2)
    shards = [te.shard_weights(full, s, te.plan_tp(s, 2, r)) for r in range(2)]
    lw, a, b = full.layers[0], shards[0].layers[0], shards[1].layers[0]
    q, kv = s.q_dim, s.kv_dim
    qa, ka, va = a.wqkv.split([16, 8, 8])  # per rank: 2 query heads, 1 KV head (head_dim 8)
    qb, kb, vb = b.wqkv.split([16, 8, 8])
    assert torch.equal(torch.cat([qa, qb]), lw.wqkv[:q])
    assert torch.equal(torch.cat([ka, kb]), lw.wqkv[q:q + kv])
    assert torch.equal(torch.cat([va, vb]), lw.wqkv[q + kv:])
    assert torch.equal(torch.cat([a.bqkv[:16], b.bqkv[:16]]), lw.bqkv[:q])
    assert torch.equal(torch.cat([a.wo, b.wo], dim=1), lw.wo)
    assert torch.equal(torch.cat([a.wgu[:24], b.wgu[:24]]), lw.wgu[:48])  # gate
    assert torch.equal(torch.cat([a.wgu[24:], b.wgu[24:]]), lw.wgu[48:])  # up
    assert torch.equal(torch.cat([a.wdown, b.wdown], dim=1), lw.wdown)
    assert shards[0].embed.shape == shards[1].embed.shape == (51, 32)
    assert torch.equal(torch.cat([shards[0].embed, shards[1].embed])[:101], full.embed)
    assert not shards[1].embed[50].any()  # the padding row
    assert torch.equal(torch.cat([shards[0].lm_head, shards[1].lm_head])[:101], full.lm_head)


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_tp1_is_the_graph_engine(name):
    """World 1: collectives are no-ops and the decoder gives the graph engine's logits exactly."""
    cfg = load_model_config(name)
    result = te.check_tp_decode(cfg, te.Comm(), "cpu", seed=4)
    assert result["reference"] == "graph_engine" and result["tokens_equal"]
    assert result["max_rel_logit_err"] == 0.0


def test_tp1_qwen3_matches_transformers():
    result = te.check_tp_decode(TINY_QWEN3, te.Comm(), "cpu", seed=1)
    assert result["reference"] == "transformers" and result["tokens_equal"]
    assert result["max_rel_logit_err"] < 1e-5


def test_engine_refuses_other_architectures():
    with pytest.raises(RooflineError, match="model type 'gemma2'"):
        te.check_dense({"model_type": "gemma2"})
    assert te.check_dense(TINY_QWEN3) and not te.check_dense(load_model_config("tiny-llama"))


def test_settle_raises_for_errors_and_reports_ooms():
    assert te.settle([None, None]) is None
    assert te.settle([None, "oom: CUDA out of memory"]) == "rank 1: CUDA out of memory"
    with pytest.raises(RuntimeError, match="rank 0: error: boom"):
        te.settle(["error: boom", "oom: x"])


def test_done_points_and_pending_respect_tp_gen_and_oom(tmp_path):
    from roofline.measurements import MeasurementRow

    def row(batch, status="ok", tp=2, gen=4, prompt=8):
        return MeasurementRow(card="c", model="m", engine="graph", kv_cache="static", prompt_tokens=prompt,
                              gen_tokens=gen, batch=batch, ttft_s=None, tpot_s=0.1 if status == "ok" else None,
                              peak_mem_gib=None, status=status, tp=tp)

    rows = [row(1), row(2), row(4, "oom"), row(8, tp=None), row(16, gen=5), row(1, prompt=16)]
    done = tp_job._done_points(rows, "c", 4, 2)
    assert done == {("m", 8): ((1, 2, 4), 4), ("m", 16): ((1,), None)}
    assert tp_job._pending([1, 2, 4, 8], *done[("m", 8)]) == []
    assert tp_job._pending([1, 2, 4, 8], *done[("m", 16)]) == [2, 4, 8]


@pytest.mark.parametrize("kw, what", [
    (dict(models=["tiny-qwen2"], tp=3), "4 attention heads do not split over 3"),
    (dict(models=["no-such-model-xyz"]), "unknown model"),
    (dict(batches=[0]), "positive integers"),
    (dict(gen=1), "gen tokens must be >= 2"),
    (dict(device="cuda"), "needs 2 CUDA GPUs"),
])
def test_bad_arguments_fail_before_any_process_starts(tmp_path, kw, what, monkeypatch):
    if kw.get("device") == "cuda" and torch.cuda.device_count() >= 2:
        pytest.skip("two GPUs are present")
    monkeypatch.setattr(tp_job, "launch", lambda *a, **k: pytest.fail("launched"))
    args = dict(card="c", models=["tiny-qwen2"], prompts=[8], gen=4, batches=[1], tp=2, out_dir=tmp_path,
                device="cpu")
    with pytest.raises(RooflineError, match=what):
        tp_job.run_tp_calibration(**{**args, **kw})


# --- two processes ----------------------------------------------------------------------------


def test_tp2_decode_equals_one_process_on_the_same_weights(tmp_path):
    """Both ranks build the full weights from one seed and keep their shards; rank 0 decodes the
    same prompts with the unsplit weights (graph engine; transformers for qwen3's q/k norms)."""
    qwen3 = tmp_path / "tiny-qwen3" / "config.json"
    qwen3.parent.mkdir()
    qwen3.write_text(json.dumps(TINY_QWEN3))
    tp_job.run_tp_calibration("cpu-test", [], [], 4, [], 2, tmp_path, device="cpu", check=True,
                              check_models=["tiny-qwen2", "tiny-llama", str(qwen3)], timeout_s=TIMEOUT_S,
                              progress=lambda m: None)
    got = json.loads(tp_job.check_path(tmp_path, "cpu-test", 2).read_text())
    assert [got[k]["reference"] for k in ("tiny-qwen2", "tiny-llama", str(qwen3))] == [
        "graph_engine", "graph_engine", "transformers"]
    for name, result in got.items():
        assert result["world"] == 2 and result["tokens_equal"], name
        assert len(result["tokens"]) == 6 and len(result["tokens"][0]) == 3  # gen steps x batch
        assert result["max_rel_logit_err"] < 1e-5, name


def test_sweep_rows_probe_and_an_oom_on_one_rank(tmp_path):
    """Rank 1 alone runs out of memory in the decode warm-up at batch 4: both ranks record it, skip
    the larger batches of that prompt and go on with the next prompt."""
    path = _sweep(tmp_path, fault="rank=1,batch=4,phase=decode,kind=oom", probe=True,
                  probe_sizes=[2048, 8192], probe_gather_sizes=[4096])
    assert path == tmp_path / "measurements-cpu-test-graph-tp2.csv"
    rows = read_measurements(path)
    assert [(r.prompt_tokens, r.batch, r.status) for r in rows] == [
        (8, 1, "ok"), (8, 2, "ok"), (8, 4, "oom"), (16, 1, "ok"), (16, 2, "ok"), (16, 4, "oom")]
    for r in rows:
        assert (r.card, r.model, r.engine, r.kv_cache, r.tp, r.gen_tokens) == (
            "cpu-test", "tiny-qwen2", "graph", "static", 2, 4)
    ok = [r for r in rows if r.ok]
    for r in ok:
        assert r.ttft_s > 0 and r.tpot_s > 0 and r.n_decode_steps == 3
        assert r.peak_mem_gib is None and r.extra["peak_mem_rank_gib"] == ""  # no CUDA allocator here
        per_rank = [float(t) for t in r.extra["tpot_rank_s"].split(";")]
        assert len(per_rank) == 2 and per_rank[0] == pytest.approx(r.tpot_s, rel=1e-6)
        assert r.extra["logits_gather"] == "all-gather" and r.extra["cuda_graph"] == "false"
        assert (r.extra["kv_heads_per_rank"], r.extra["kv_head_replicas"]) == ("1", "1")
    assert "rank 1" in rows[2].extra["oom_message"] and "simulated" in rows[2].extra["oom_message"]
    steps = [json.loads(line) for line in tp_job.steps_path(tmp_path, "cpu-test", 2).read_text().splitlines()]
    assert [(s["prompt_tokens"], s["batch"], s["tp"], len(s["step_s"])) for s in steps] == [
        (8, 1, 2, 3), (8, 2, 2, 3), (16, 1, 2, 3), (16, 2, 2, 3)]
    probe = json.loads(tp_job.probe_path(tmp_path, "cpu-test", 2).read_text())
    assert probe["world"] == 2 and probe["backend"] == "gloo" and probe["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert [p["bytes"] for p in probe["all_reduce"]] == [2048, 8192]
    assert all(p["eager_s_median"] > 0 and p["graph_s_per_call"] is None for p in probe["all_reduce"])
    ag = probe["all_gather"][0]
    assert (ag["bytes_per_rank"], ag["bytes"]) == (4096, 8192)
    assert ag["algbw_bytes_per_s"] == pytest.approx(8192 / ag["eager_s_median"])


def test_an_oom_on_one_rank_in_any_phase_is_agreed(tmp_path):
    """Rank 1 alone fails: tiny-qwen2 allocating batch 2's state, tiny-llama halfway through batch
    4's prefill (rank 0 is inside the collectives), the third model while loading its weights."""
    qwen3 = tmp_path / "tiny-qwen3.json"
    qwen3.write_text(json.dumps(TINY_QWEN3))
    faults = ";".join(["model=tiny-qwen2,rank=1,batch=2,phase=alloc", "model=tiny-llama,rank=1,batch=4,phase=prefill",
                       f"model={qwen3},rank=1,phase=load"])
    rows = read_measurements(_sweep(tmp_path, models=["tiny-qwen2", "tiny-llama", str(qwen3)], prompts=(8, 16),
                                    batches=(1, 2, 4), fault=faults))
    got = [(r.model, r.prompt_tokens, r.batch, r.status) for r in rows]
    assert got == [
        ("tiny-qwen2", 8, 1, "ok"), ("tiny-qwen2", 8, 2, "oom"),
        ("tiny-qwen2", 16, 1, "ok"), ("tiny-qwen2", 16, 2, "oom"),
        ("tiny-llama", 8, 1, "ok"), ("tiny-llama", 8, 2, "ok"), ("tiny-llama", 8, 4, "oom"),
        ("tiny-llama", 16, 1, "ok"), ("tiny-llama", 16, 2, "ok"), ("tiny-llama", 16, 4, "oom"),
        (str(qwen3), 8, 1, "oom"), (str(qwen3), 16, 1, "oom"),
    ]
    messages = [r.extra["oom_message"] for r in rows if not r.ok]
    assert "rank 1: CUDA out of memory (simulated on rank 1, alloc, batch 2)" in messages[0]
    assert "simulated on rank 1, prefill, batch 4" in messages[2]
    assert messages[4].startswith("loading the model: rank 1")
    assert rows[4].extra["kv_head_replicas"] == "2"  # tiny-llama's one KV head on both ranks


def test_budget_stops_cleanly_and_resume_continues(tmp_path):
    # rank 0's clock jumps 100 s per point: with a 150 s budget, 2 points start, the third would not
    path = _sweep(tmp_path, prompts=(8,), batches=(1, 2, 4), budget_s=150.0,
                  env={tp_job.POINT_COST_ENV: "100"})
    first = read_measurements(path)
    assert [r.batch for r in first] == [1, 2]
    path = _sweep(tmp_path, prompts=(8,), batches=(1, 2, 4), resume=True)
    rows = read_measurements(path)
    assert [r.batch for r in rows] == [1, 2, 4]
    assert [r.timestamp for r in rows[:2]] == [r.timestamp for r in first]
    steps = tp_job.steps_path(tmp_path, "cpu-test", 2).read_text().splitlines()
    assert [json.loads(line)["batch"] for line in steps] == [1, 2, 4]


def test_an_error_on_one_rank_stops_both_and_keeps_the_points(tmp_path):
    with pytest.raises(RooflineError, match=r"worker exit codes \[1, 1\]"):
        _sweep(tmp_path, prompts=(8,), fault="rank=1,batch=2,phase=prefill,kind=error")
    assert [r.batch for r in read_measurements(tmp_path / "measurements-cpu-test-graph-tp2.csv")] == [1]


def test_a_hung_rank_is_killed_at_the_timeout(tmp_path):
    t0 = time.monotonic()
    # each rank killed by the launcher (-9), or ended by its own watchdog's hard deadline (124) when
    # that fires first on a loaded machine: either way both are gone, and the timeout is said
    with pytest.raises(RooflineError, match=r"\[(-9|124), (-9|124)\] \(timeout after 8 s"):
        _sweep(tmp_path, prompts=(8,), fault="rank=1,batch=1,phase=prefill,kind=hang", timeout_s=8.0)
    assert time.monotonic() - t0 < 40
