"""Calibration over a grid of prompts x batches, on the CPU with tiny models: OOM caps across
contexts, the TTFT token limit, the time budget, resume, the RAM check and argument errors."""

from __future__ import annotations

import json
import re
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from calibrate import grid as gridmod  # noqa: E402
from calibrate import runner  # noqa: E402
from calibrate.configs import load_model_config  # noqa: E402
from calibrate.grid import DEFAULT_GRID, Grid, ModelSize, plan_point  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.measurements import read_measurements  # noqa: E402


def _run(tmp_path, prompts=(8, 16), gens=4, batches=(1, 2, 4), engine="graph", models=("tiny-qwen2",), **kw):
    kw.setdefault("measure_ceilings", False)
    kw.setdefault("progress", lambda msg: None)
    return runner.run_calibration(
        card="cpu-test", models=list(models), engine=engine, batches=list(batches),
        prompt_tokens=list(prompts), gen_tokens=gens, out_dir=tmp_path, device="cpu", **kw,
    )


def _points(path):
    return [(r.model, r.prompt_tokens, r.gen_tokens, r.batch, r.status) for r in read_measurements(path)]


def _fake(oom=lambda prompt, batch: False, calls=None, step_s=0.001):
    """A measure_point that records its calls and raises an OOM where ``oom(prompt, batch)``."""
    def fake(engine_obj, batch, prompt_tokens, gen_tokens, **plan):
        if calls is not None:
            calls.append((prompt_tokens, batch, plan))
        if oom(prompt_tokens, batch):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
        timed = plan.get("timed_prefill", True)
        return {"ttft_s": 0.01 if timed else None, "step_s": [step_s] * (gen_tokens - 1),
                "e2e_s": 0.02 if timed else None, "peak_mem_gib": None, "peak_reserved_gib": None}
    return fake


@pytest.mark.parametrize("engine", ["graph", "hf-eager"])
def test_several_prompts_end_to_end(tmp_path, engine):
    path = _run(tmp_path, prompts=(16, 8), gens=[4, 5], batches=(2, 1), engine=engine)
    rows = read_measurements(path)
    # prompts ascending, each with its own gen (given in the prompts' order), batches ascending
    assert [(r.prompt_tokens, r.gen_tokens, r.batch) for r in rows] == [(8, 5, 1), (8, 5, 2), (16, 4, 1), (16, 4, 2)]
    assert all(r.ok and r.ttft_s > 0 and r.tpot_s > 0 and r.extra["prefill"] == "timed" for r in rows)
    assert [r.n_decode_steps for r in rows] == [4, 4, 3, 3]
    raw = [json.loads(x) for x in (tmp_path / f"steps-cpu-test-{engine}.jsonl").read_text().splitlines()]
    assert [(r["prompt_tokens"], r["batch"]) for r in raw] == [(8, 1), (8, 2), (16, 1), (16, 2)]


def test_oom_caps_longer_prompts_and_not_shorter_ones(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(runner, "measure_point", _fake(lambda p, b: p == 16 and b >= 2, calls))
    lines: list[str] = []
    path = _run(tmp_path, prompts=(8, 16, 32), batches=(1, 2, 4), progress=lines.append)
    assert _points(path) == [
        ("tiny-qwen2", 8, 4, 1, "ok"), ("tiny-qwen2", 8, 4, 2, "ok"), ("tiny-qwen2", 8, 4, 4, "ok"),
        ("tiny-qwen2", 16, 4, 1, "ok"), ("tiny-qwen2", 16, 4, 2, "oom"),
        ("tiny-qwen2", 32, 4, 1, "ok"),  # starts below the batch that ran out at prompt 16
    ]
    assert [(p, b) for p, b, _ in calls] == [(8, 1), (8, 2), (8, 4), (16, 1), (16, 2), (32, 1)]
    assert any("below batch 2" in line for line in lines)

    # resume with a shorter prompt added: it climbs to the top; the longer ones stay capped
    calls.clear()
    path = _run(tmp_path, prompts=(4, 8, 16, 32), batches=(1, 2, 4), resume=True)
    assert [(p, b) for p, b, _ in calls] == [(4, 1), (4, 2), (4, 4)]
    assert sum(status == "oom" for *_, status in _points(path)) == 1


def test_oom_while_loading_is_recorded_at_the_first_pending_point(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory while loading")
    monkeypatch.setattr(runner, "load_engine", boom)
    assert _points(_run(tmp_path, prompts=(8, 16), batches=(1, 2))) == [("tiny-qwen2", 8, 4, 1, "oom")]


def test_oom_inside_a_graph_capture_counts_as_oom():
    from calibrate.timing import is_oom

    try:
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        except Exception:
            raise RuntimeError("operation failed due to a previous error during capture")
    except RuntimeError as exc:
        assert is_oom(exc)
    assert not is_oom(RuntimeError("CUDA error: an illegal memory access was encountered"))


class _Clock:
    """Stands in for runner.time: monotonic() advances 10 s per measured point."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_budget_stops_before_a_point_and_resume_finishes(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    calls: list = []
    inner = _fake(calls=calls)

    def advancing(*a, **k):
        clock.now += 10.0
        return inner(*a, **k)

    monkeypatch.setattr(runner, "measure_point", advancing)
    lines: list[str] = []
    path = _run(tmp_path, prompts=(8, 16), batches=(1, 2, 4), budget_s=25.0, progress=lines.append)
    # points start at t=0, 10, 20; the 4th would start at 30 > 25
    assert [(p, b) for p, b, _ in calls] == [(8, 1), (8, 2), (8, 4)]
    assert len(read_measurements(path)) == 3
    assert any("deadline reached; stopping before prompt 16, batch 1" in line for line in lines)

    calls.clear()
    path = _run(tmp_path, prompts=(8, 16), batches=(1, 2, 4), budget_s=100.0, resume=True)
    assert [(p, b) for p, b, _ in calls] == [(16, 1), (16, 2), (16, 4)]
    assert [(p, b) for _, p, _, b, _ in _points(path)] == [(8, 1), (8, 2), (8, 4), (16, 1), (16, 2), (16, 4)]


def test_max_seconds_per_point_skips_the_rest_of_a_prompt(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    calls: list = []
    inner = _fake(calls=calls)

    def advancing(*a, **k):
        clock.now += 10.0
        return inner(*a, **k)

    monkeypatch.setattr(runner, "measure_point", advancing)
    lines: list[str] = []
    _run(tmp_path, prompts=(8,), batches=(1, 2, 4), max_seconds_per_point=5.0, progress=lines.append)
    assert [(p, b) for p, b, _ in calls] == [(8, 1)]  # 10 s measured; the next is estimated longer
    assert any("batch 2 and larger skipped" in line for line in lines)


def test_ttft_token_limit_leaves_ttft_blank_and_runs_no_prefill(tmp_path, monkeypatch):
    from calibrate import graph_engine as ge

    prefills: list = []
    real = ge.prefill

    def counting(w, s, ids, *a):
        prefills.append(tuple(ids.shape))
        return real(w, s, ids, *a)

    monkeypatch.setattr(ge, "prefill", counting)
    path = _run(tmp_path, prompts=(8,), batches=(1, 2, 4), ttft_max_tokens=16, warmup_prefill_max_tokens=8)
    rows = read_measurements(path)
    assert [r.extra["prefill"] for r in rows] == ["timed", "timed-cold", "none"]
    assert rows[0].ttft_s > 0 and rows[1].ttft_s > 0 and rows[2].ttft_s is None and rows[2].e2e_s is None
    assert all(r.tpot_s > 0 and r.n_decode_steps == 3 for r in rows)
    # batch 1: warm-up + timed prefill; batch 2: the timed one only; batch 4 (32 tokens): none
    assert prefills == [(1, 8), (1, 8), (2, 8)]


def test_ttft_token_limit_on_hf_eager_builds_the_cache_without_a_prefill(tmp_path, monkeypatch):
    from calibrate.hf_eager import HFEagerEngine

    built: list = []
    real = HFEagerEngine.random_cache

    def spy(self, batch, prompt):
        built.append((batch, prompt))
        cache = real(self, batch, prompt)
        assert cache.get_seq_length() == prompt
        return cache

    monkeypatch.setattr(HFEagerEngine, "random_cache", spy)
    rows = read_measurements(_run(tmp_path, engine="hf-eager", prompts=(8,), batches=(1, 4), ttft_max_tokens=16))
    assert [(r.batch, r.extra["prefill"], r.ttft_s is None) for r in rows] == [(1, "timed", False), (4, "none", True)]
    assert built == [(4, 8), (4, 8)]  # warm-up and timed run of batch 4
    assert rows[1].tpot_s > 0 and rows[1].n_decode_steps == 3


def test_graph_engine_measures_a_bounded_point_without_a_prefill():
    from calibrate.graph_engine import GraphEngine

    eng = GraphEngine(load_model_config("tiny-llama"), device="cpu")
    bounded = eng.measure(2, 8, 4, timed_prefill=False, warmup_prefill=False)
    full = eng.measure(2, 8, 4)
    assert bounded.keys() == full.keys()
    assert len(bounded["step_s"]) == len(full["step_s"]) == 3
    assert bounded["ttft_s"] is None and bounded["e2e_s"] is None and full["ttft_s"] > 0


def test_plan_point_thresholds():
    # defaults: TTFT timed (and warmed up) up to 65,536 tokens, no prefill above
    assert plan_point(1, 16_384).label == "timed"
    assert plan_point(4, 16_384).label == "timed"  # 65,536 tokens: still timed, warm
    assert plan_point(8, 16_384).label == "none"
    assert plan_point(8, 16_384).warmup_prefill is False
    assert plan_point(1024, 128).label == "none" and plan_point(512, 128).label == "timed"
    # a lower warm-up limit makes the points between the two limits cold
    assert plan_point(4, 16_384, warmup_prefill_max_tokens=16_384).label == "timed-cold"


def test_grid_of_normalises_and_rejects():
    g = Grid.of([2048, 128], {128: 128, 2048: 64}, [4, 1, 4])
    assert (g.prompts, g.gens, g.batches) == ((128, 2048), (128, 64), (1, 4))
    assert Grid.of(128, 16, [1]).points() == [(128, 16, 1)]
    assert Grid.of([512, 128], [32, 64], [1]).gen_for(512) == 32
    with pytest.raises(RooflineError, match="2 gen length"):
        Grid.of([1, 2, 3], [4, 5], [1])
    with pytest.raises(RooflineError, match="gen tokens must be integers >= 2"):
        Grid.of([8], 1, [1])
    with pytest.raises(RooflineError, match="prompt tokens must be positive"):
        Grid.of([0, 8], 4, [1])
    with pytest.raises(RooflineError, match="no gen length for prompt"):
        Grid.of([8, 16], {8: 4}, [1])


def test_default_grid_fits_five_minutes_for_two_8b_models_on_an_h200():
    sizes = {m: ModelSize.from_config(m, load_model_config(m)) for m in ("qwen2.5-7b", "llama-3.1-8b")}
    rows = gridmod.estimate_grid(sizes, "graph", DEFAULT_GRID)
    total = sum(r["total_s"] for r in rows)
    assert 60 < total < 270  # + start-up and ceilings < 5 min
    assert DEFAULT_GRID.prompts == (128, 512, 2048, 8192, 16384)
    # every prompt is measured at batch 1, and at some batch where its prefill is not timed
    for p in DEFAULT_GRID.prompts:
        mine = [r for r in rows if r["prompt"] == p and r["model"] == "qwen2.5-7b"]
        assert mine[0]["batch"] == 1 and mine[0]["prefill"] == "timed"
        assert any(r["prefill"] == "none" for r in mine)
    # the estimate reproduces v0.1's measured sweep of qwen2.5-7b (prompt 128, gen 128, batches
    # 1-1024 with every prefill timed: 27.7 s, docs/calibration-runs.md) within 15%
    v01 = gridmod.estimate_grid({"q": sizes["qwen2.5-7b"]}, "graph", Grid.of(128, 128, DEFAULT_GRID.batches),
                                ttft_max_tokens=10**9, warmup_prefill_max_tokens=10**9, model_load_s=0)
    assert sum(r["total_s"] for r in v01) == pytest.approx(27.7, rel=0.15)


def test_model_size_counts_the_weights_the_engine_builds():
    from calibrate.graph_engine import GraphEngine

    size = ModelSize.from_config("tiny-qwen2", load_model_config("tiny-qwen2"))
    eng = GraphEngine(load_model_config("tiny-qwen2"), device="cpu")
    w = eng.weights
    tensors = [w.embed, w.final_norm] + [t for lw in w.layers for t in vars(lw).values() if t is not None]
    assert size.weight_bytes == sum(t.numel() * t.element_size() for t in tensors)  # tied: lm_head is embed
    assert size.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2  # layers x (K, V) x kv_heads x head_dim x bf16
    # qwen2.5-1.5b: 2.87 GiB of weights (docs/calibration-runs.md)
    assert ModelSize.from_config("q", load_model_config("qwen2.5-1.5b")).weight_bytes / 2**30 == pytest.approx(2.875, abs=0.01)


def test_cpu_run_that_does_not_fit_in_ram_is_refused_before_building(tmp_path, monkeypatch):
    from calibrate import timing

    # 16 GiB available, 90% usable (15.5 GB): qwen2.5-7b's 15.2 GB of weights fit, batch 64 does not
    monkeypatch.setattr(timing, "mem_available_bytes", lambda: 16 * 2**30)
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: pytest.fail("built a model"))
    with pytest.raises(RooflineError) as err:
        _run(tmp_path, models=("qwen2.5-0.5b", "qwen2.5-7b"), prompts=(128,), batches=(1, 64))
    msg = str(err.value)
    assert msg.startswith("qwen2.5-7b does not fit in this machine's RAM at batch 64, prompt 128")
    assert re.search(r"needs about 1[67]\.\d GB \(weights 15\.2 GB \+ KV cache 0\.5 GB", msg), msg
    assert msg.endswith("17.2 GB available (MemAvailable); use smaller batches or prompts")
    assert list(tmp_path.iterdir()) == []
    # 8 GiB: the weights alone do not fit, whatever the batch: the message says so, not "smaller batches"
    monkeypatch.setattr(timing, "mem_available_bytes", lambda: 8 * 2**30)
    with pytest.raises(RooflineError) as err:
        _run(tmp_path, models=("qwen2.5-7b",), prompts=(128,), batches=(1,))
    assert str(err.value) == ("qwen2.5-7b does not fit in this machine's RAM: its weights alone are 15.2 GB, "
                              "8.6 GB available (MemAvailable); pick a smaller model")
    assert list(tmp_path.iterdir()) == []


def test_bad_config_is_a_clean_error_before_any_tensor(tmp_path, monkeypatch):
    cfg = dict(load_model_config("tiny-qwen2"), num_attention_heads=-4)
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(cfg))
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: pytest.fail("built a model"))
    with pytest.raises(RooflineError, match=r"num_attention_heads must be a positive integer, got -4"):
        _run(tmp_path / "out", models=(str(bad),))
    for change, what in [(dict(num_key_value_heads=3), "multiple of num_key_value_heads"),
                         (dict(hidden_size=66), "hidden_size \\(66\\) is not a multiple"),  # roofline.config_families reads it
                         (dict(vocab_size="many"), "vocab_size must be a positive integer")]:
        bad.write_text(json.dumps(dict(load_model_config("tiny-qwen2"), **change)))
        with pytest.raises(RooflineError, match=what):
            _run(tmp_path / "out", models=(str(bad),))


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "mps"])
def test_unknown_device_is_one_clear_line(tmp_path, device):
    with pytest.raises(RooflineError) as err:
        runner.run_calibration("c", ["tiny-qwen2"], "graph", [1], 8, 4, tmp_path, device=device)
    assert str(err.value) == f"unknown device '{device}'; use cuda (or cuda:N) for a CUDA GPU, or cpu"


def test_unknown_device_through_the_cli(tmp_path):
    from click.testing import CliRunner

    from cli import main

    r = CliRunner().invoke(main, ["calibrate", "--card", "h200", "--model", "tiny-qwen2", "--device", "tpu",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == ["Error: unknown device 'tpu'; use cuda (or cuda:N) for a CUDA GPU, or cpu"]


def test_gpu_job_grid_and_heldout_on_cpu(tmp_path, capsys):
    from calibrate import gpu_job

    rc = gpu_job.main(["--out", str(tmp_path), "--card", "cpu-test", "--device", "cpu", "--engines", "graph",
                       "--models", "tiny-qwen2", "--prompts", "8,16", "--gen", "4", "--batches", "1,2",
                       "--heldout-models", "tiny-llama", "--heldout-prompts", "12", "--no-ceilings",
                       "--ttft-max-tokens", "16"])
    assert rc == 0
    main_rows = read_measurements(tmp_path / "measurements-cpu-test-graph.csv")
    held = read_measurements(tmp_path / "heldout" / "measurements-cpu-test-graph.csv")
    assert [(r.prompt_tokens, r.batch, r.ttft_s is None) for r in main_rows] == [
        (8, 1, False), (8, 2, False), (16, 1, False), (16, 2, True)]
    assert [(r.model, r.prompt_tokens, r.gen_tokens, r.batch) for r in held] == [
        ("tiny-llama", 12, 4, 1), ("tiny-llama", 12, 4, 2)]
    out = capsys.readouterr().out
    table = [line.split() for line in out.splitlines() if line.startswith("tiny-qwen2 ")]
    # model, prompt, gen, batch, [ttft], tpot, p10, p90, tok/s (no peak memory on the CPU)
    assert [len(t) for t in table] == [9, 9, 9, 8] and table[3][:4] == ["tiny-qwen2", "16", "4", "2"]


def test_gpu_job_estimate_needs_no_gpu(capsys):
    from calibrate import gpu_job

    assert gpu_job.main(["--estimate", "--grid", "default", "--engines", "graph",
                         "--models", "qwen2.5-7b,llama-3.1-8b"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-7b        16384   32" in out and "estimated total" in out


def test_cpu_ceilings_record_threads_fp32_and_their_sizes(tmp_path):
    from calibrate.ceilings import CPU_SIZES, GPU_SIZES, TINY_SIZES, default_sizes
    from roofline.units import GiB

    assert default_sizes("cpu") is CPU_SIZES and CPU_SIZES.buffer_bytes == 1 * GiB  # past any LLC
    assert default_sizes("cuda") is GPU_SIZES and default_sizes("cpu", tiny_models_only=True) is TINY_SIZES
    _run(tmp_path, prompts=(8,), batches=(1,), measure_ceilings=True)  # tiny models: tiny sizes
    data = json.loads((tmp_path / "ceilings-cpu-test.json").read_text())
    assert data["sizes"]["buffer_bytes"] == TINY_SIZES.buffer_bytes == data["buffer_bytes"]
    assert data["threads"] == torch.get_num_threads() and data["cpu_count"] >= 1 and data["cpu_model"]
    assert data["gemm_fp32_flop_per_s"] > 0 and data["read_fp32_bandwidth_bytes_per_s"] > 0
    assert data["mem_available_bytes"] is None or data["mem_available_bytes"] > 0
