"""The calibration harness end to end on the CPU with tiny models (what CI runs).

GPU-only checks at the end are skipped without a CUDA GPU.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from calibrate import graph_engine as ge  # noqa: E402
from calibrate import runner  # noqa: E402
from calibrate.configs import TINY_MODELS, load_model_config  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.measurements import read_measurements  # noqa: E402

PROMPT, GEN = 8, 5


def _run(tmp_path, engine="graph", models=("tiny-qwen2",), batches=(1, 2, 4), **kw):
    kw.setdefault("measure_ceilings", False)
    kw.setdefault("progress", lambda msg: None)
    return runner.run_calibration(
        card="cpu-test", models=list(models), engine=engine, batches=list(batches),
        prompt_tokens=PROMPT, gen_tokens=GEN, out_dir=tmp_path, device="cpu", **kw,
    )


@pytest.mark.parametrize("engine, kv_cache", [("graph", "static"), ("hf-eager", "dynamic")])
def test_sweep_end_to_end_on_cpu(tmp_path, engine, kv_cache):
    lines: list[str] = []
    path = _run(tmp_path, engine=engine, batches=(4, 1, 2, 2), progress=lines.append)
    assert path == tmp_path / f"measurements-cpu-test-{engine}.csv"
    rows = read_measurements(path)
    assert [r.batch for r in rows] == [1, 2, 4]  # ascending, de-duplicated
    for r in rows:
        assert (r.card, r.model, r.engine, r.kv_cache, r.status) == ("cpu-test", "tiny-qwen2", engine, kv_cache, "ok")
        assert (r.prompt_tokens, r.gen_tokens, r.n_decode_steps) == (PROMPT, GEN, GEN - 1)
        assert r.ttft_s > 0 and r.tpot_s > 0
        assert r.peak_mem_gib is None  # no CUDA allocator on the CPU
        assert r.tpot_p10_s <= r.tpot_median_s <= r.tpot_p90_s
        assert r.tpot_std_s >= 0
        # tpot is the mean step: e2e covers the prefill plus every timed step
        assert r.e2e_s >= r.ttft_s + (GEN - 1) * r.tpot_s * 0.99
        assert r.torch == torch.__version__ and r.transformers and r.gpu.startswith("cpu")
    assert any("batch     4" in line for line in lines)
    raw = [json.loads(line) for line in (tmp_path / f"steps-cpu-test-{engine}.jsonl").read_text().splitlines()]
    assert [r["batch"] for r in raw] == [1, 2, 4]
    for rec, row in zip(raw, rows):
        assert len(rec["step_s"]) == GEN - 1
        assert sum(rec["step_s"]) / len(rec["step_s"]) == pytest.approx(row.tpot_s, rel=1e-5)
    assert ("host_step_s" in raw[0]) == (engine == "hf-eager")


def test_a_model_given_as_a_config_path_is_compared_after_the_path_is_gone(tmp_path):
    """The measurements name the model by the path it was given; `roofline calibrate` keeps a copy
    of its config beside them (models/<folder>/config.json), which read_measurements (and with it
    compare and fit) reads where the path no longer exists. Catalog models get no copy."""
    import shutil
    from pathlib import Path

    from roofline import api
    from roofline.measurements import kept_config_path

    given = tmp_path / "elsewhere" / "my qwen3" / "config.json"
    given.parent.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "tiny_configs" / "tiny-qwen3" / "config.json", given)
    out = tmp_path / "out"
    path = runner.run_calibration(card="h200", models=[str(given), "tiny-qwen2"], engine="graph", batches=[1, 2],
                                  prompt_tokens=PROMPT, gen_tokens=GEN, out_dir=out, device="cpu",
                                  measure_ceilings=False, progress=lambda msg: None)
    kept = kept_config_path(out, str(given))
    assert kept.parent.parent == out / "models" and kept.parent.name.startswith("my-qwen3-")
    assert json.loads(kept.read_text()) == json.loads(given.read_text())
    assert [p.name for p in (out / "models").iterdir()] == [kept.parent.name]  # none for tiny-qwen2
    assert {r.model for r in read_measurements(path)} == {str(given), "tiny-qwen2"}  # the path, while it exists
    shutil.rmtree(tmp_path / "elsewhere")
    assert {r.model for r in read_measurements(path)} == {str(kept), "tiny-qwen2"}
    result = api.compare(calibration="hardware_profiles/calibrations/h200-graph.json", measurements=[path])
    assert set(result["per_model"]) == {str(kept), "tiny-qwen2"} and result["points"] == 4
    # calibrate --resume reads the rows as written (the path), not renamed to the copy
    assert {r.model for r in read_measurements(path, kept_configs=False)} == {str(given), "tiny-qwen2"}
    kept.unlink()  # without the copy: the path, and compare says the file is missing
    assert {r.model for r in read_measurements(path)} == {str(given), "tiny-qwen2"}
    with pytest.raises(RooflineError, match="not found"):
        api.compare(calibration="hardware_profiles/calibrations/h200-graph.json", measurements=[path])


def test_kept_configs_of_two_checkpoints_with_one_folder_name_do_not_collide(tmp_path):
    """Two checkpoints' .../hf/config.json: two copies, each model's rows renamed to its own (the
    review of 2026-12-05 found both renamed to one file); a model name too long for the file
    system stays a one-line error, not an OSError."""
    from roofline.measurements import kept_config_path, write_measurements

    a, b = "/gone/ckpt-a/hf/config.json", "/gone/ckpt-b/hf/config.json"
    assert kept_config_path(tmp_path, a) != kept_config_path(tmp_path, b)
    for model in (a, b):
        kept_config_path(tmp_path, model).parent.mkdir(parents=True)
        kept_config_path(tmp_path, model).write_text("{}")
    row = read_measurements("hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv")[0]
    rows = [replace(row, model=m) for m in (a, b, "/" + "x" * 300 + "/config.json")]
    write_measurements(tmp_path / "m.csv", rows)
    got = [r.model for r in read_measurements(tmp_path / "m.csv")]
    assert got == [str(kept_config_path(tmp_path, a)), str(kept_config_path(tmp_path, b)), rows[2].model]


def test_ceilings_on_cpu(tmp_path):
    _run(tmp_path, batches=(1, 2), measure_ceilings=True)
    data = json.loads((tmp_path / "ceilings-cpu-test.json").read_text())
    for key in ("copy_bandwidth_bytes_per_s", "read_bandwidth_bytes_per_s", "gemm_bf16_flop_per_s"):
        assert data[key] > 0, key
    assert data["balance_point_flop_per_byte"] == pytest.approx(
        data["gemm_bf16_flop_per_s"] / data["read_bandwidth_bytes_per_s"])
    assert data["card"] == "cpu-test" and data["torch"] == torch.__version__
    model = data["models"]["tiny-qwen2"]
    assert [s["name"] for s in model["shapes"]] == ["qkv", "o", "gate_up", "down", "lm_head"]
    qkv = model["shapes"][0]
    assert (qkv["n"], qkv["k"], qkv["count_per_step"]) == ((4 + 2 * 2) * 16, 64, 2)
    # on a CPU the step's linear layers are timed as the model runs them (calibrate.ceilings._cpu_decode_linear)
    assert model["method"].startswith("the model's own linear weights")
    assert [p["m"] for p in model["decode_linear"]] == [1, 2]
    assert all(p["linear_s"] > 0 for p in model["decode_linear"])
    # weight bytes of one step, bf16 (tiny-qwen2: hidden 64, 4 heads of 16, 2 KV heads, intermediate 128,
    # 2 layers, vocab 512): 2 layers x (qkv 128x64 + o 64x64 + gate_up 256x64 + down 64x128) + head 512x64
    assert model["linear_weight_bytes_per_step"] == 2 * (2 * (128 * 64 + 64 * 64 + 256 * 64 + 64 * 128) + 512 * 64)


def _oom_at(threshold, real=runner.measure_point, exc=None):
    def fake(engine_obj, batch, prompt_tokens, gen_tokens):
        if batch >= threshold:
            raise exc or torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
        return real(engine_obj, batch, prompt_tokens, gen_tokens)
    return fake


@pytest.mark.parametrize("exc", [None, RuntimeError("CUDA error: out of memory")])
def test_oom_stops_climbing_records_it_and_goes_on(tmp_path, monkeypatch, exc):
    monkeypatch.setattr(runner, "measure_point", _oom_at(4, exc=exc))
    lines: list[str] = []
    path = _run(tmp_path, models=("tiny-qwen2", "tiny-llama"), batches=(1, 2, 4, 8, 16), progress=lines.append)
    rows = read_measurements(path)
    got = [(r.model, r.batch, r.status) for r in rows]
    assert got == [
        ("tiny-qwen2", 1, "ok"), ("tiny-qwen2", 2, "ok"), ("tiny-qwen2", 4, "oom"),
        ("tiny-llama", 1, "ok"), ("tiny-llama", 2, "ok"), ("tiny-llama", 4, "oom"),
    ]
    oom = rows[2]
    assert oom.tpot_s is None and oom.ttft_s is None and "out of memory" in oom.extra["oom_message"].lower()
    assert sum("OUT OF MEMORY" in line for line in lines) == 2


def test_other_errors_propagate_but_earlier_points_are_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "measure_point", _oom_at(4, exc=ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        _run(tmp_path, batches=(1, 2, 4, 8))
    rows = read_measurements(tmp_path / "measurements-cpu-test-graph.csv")
    assert [(r.batch, r.status) for r in rows] == [(1, "ok"), (2, "ok")]


def test_interrupted_run_keeps_points_and_resume_skips_them(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "measure_point", _oom_at(4, exc=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, batches=(1, 2, 4))
    first = read_measurements(tmp_path / "measurements-cpu-test-graph.csv")
    assert [r.batch for r in first] == [1, 2]

    calls: list[int] = []
    real = _oom_at(10**9)  # the real point function

    def counting(engine_obj, batch, prompt_tokens, gen_tokens):
        calls.append(batch)
        return real(engine_obj, batch, prompt_tokens, gen_tokens)

    monkeypatch.setattr(runner, "measure_point", counting)
    rows = read_measurements(_run(tmp_path, batches=(1, 2, 4), resume=True))
    assert calls == [4]
    assert [r.batch for r in rows] == [1, 2, 4]
    assert [r.timestamp for r in rows[:2]] == [r.timestamp for r in first]
    assert [r.tpot_s for r in rows[:2]] == [r.tpot_s for r in first]

    calls.clear()
    _run(tmp_path, batches=(1, 2, 4), resume=True)
    assert calls == []
    raw = (tmp_path / "steps-cpu-test-graph.jsonl").read_text().splitlines()
    assert [json.loads(line)["batch"] for line in raw] == [1, 2, 4]


def test_resume_does_not_retry_past_a_recorded_oom(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "measure_point", _oom_at(2))
    _run(tmp_path, batches=(1, 2, 4))
    calls: list[int] = []
    monkeypatch.setattr(runner, "measure_point", lambda e, b, p, g: calls.append(b))
    rows = read_measurements(_run(tmp_path, batches=(1, 2, 4, 8), resume=True))
    assert calls == []
    assert [(r.batch, r.status) for r in rows] == [(1, "ok"), (2, "oom")]


def test_without_resume_an_old_file_is_replaced(tmp_path):
    _run(tmp_path, batches=(1, 2))
    rows = read_measurements(_run(tmp_path, batches=(4,)))
    assert [r.batch for r in rows] == [4]


def test_deadline_in_the_past_measures_nothing(tmp_path):
    path = _run(tmp_path, batches=(1, 2), deadline=0.0)
    assert not path.exists()


def test_no_gpu_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(RooflineError, match="no CUDA GPU found; use --device cpu"):
        runner.run_calibration("h200", ["tiny-qwen2"], "graph", [1], 8, 4, tmp_path, device="cuda")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "kw, what",
    [
        (dict(engine="vllm"), "unknown engine 'vllm'"),
        (dict(models=("no-such-model-xyz",)), "unknown model"),
        (dict(batches=(0, 1)), "positive integers"),
        (dict(batches=()), "no batch size"),
    ],
)
def test_bad_arguments(tmp_path, kw, what):
    with pytest.raises(RooflineError, match=what):
        _run(tmp_path, **kw)


def test_catalog_model_config_loads():
    cfg = load_model_config("qwen2.5-1.5b")
    assert (cfg["hidden_size"], cfg["num_key_value_heads"], cfg["vocab_size"]) == (1536, 2, 151936)
    assert load_model_config("tiny-qwen2")["hidden_size"] == 64 and "tiny-qwen2" in TINY_MODELS


def test_hf_engine_refuses_a_forward_without_logits_to_keep(monkeypatch):
    import inspect

    from calibrate import hf_eager

    monkeypatch.setattr(hf_eager.inspect, "signature", lambda f: inspect.Signature())
    with pytest.raises(RooflineError, match="logits_to_keep"):
        hf_eager.build_hf_model(load_model_config("tiny-qwen2"), torch.device("cpu"))


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_graph_decoder_matches_transformers(name):
    """Same weights, fp32: our prefill and static-cache decode steps give HF's logits and tokens."""
    from calibrate.hf_eager import build_hf_model

    cfg = load_model_config(name)
    torch.manual_seed(1)
    model = build_hf_model(cfg, torch.device("cpu")).float()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # norms and biases random too, so a wrong one shows
                p.normal_(1.0, 0.1)
    s = ge.Shapes.from_config(cfg)
    assert s.qkv_bias == (name == "tiny-qwen2") and s.tied == cfg["tie_word_embeddings"]
    w = ge.weights_from_hf(model, s)
    batch, plen, gen = 3, 7, 5
    total = plen + gen
    st = ge.StepState(
        tok=torch.zeros(batch, dtype=torch.long), pos=torch.zeros(1, dtype=torch.long),
        key_pos=torch.arange(total),
        cache_k=torch.randn(s.layers, batch, s.kv_heads, total, s.head_dim),
        cache_v=torch.randn(s.layers, batch, s.kv_heads, total, s.head_dim),
        cos=None, sin=None,
    )
    st.cos, st.sin = ge.rope_tables(s, total, torch.device("cpu"), torch.float32)
    ids = torch.randint(0, s.vocab, (batch, plen))
    with torch.no_grad():
        logits = ge.prefill(w, s, ids, st.cache_k, st.cache_v, st.cos, st.sin)
        ref = model(input_ids=ids).logits[:, -1]
        assert ((logits - ref).norm() / ref.norm()).item() < 1e-5
        seq = ids
        st.tok.copy_(logits.argmax(-1))
        for j in range(gen - 1):
            seq = torch.cat([seq, st.tok[:, None].clone()], dim=1)
            st.pos.fill_(plen + j)
            ge.decode_step(w, s, st)
            ref = model(input_ids=seq).logits[:, -1]
            assert ((st.logits - ref).norm() / ref.norm()).item() < 1e-5, j
            assert torch.equal(st.tok, ref.argmax(-1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_engine_with_cuda_graph_on_gpu(tmp_path):
    rows = read_measurements(runner.run_calibration(
        "gpu-test", ["tiny-qwen2"], "graph", [1, 8], 16, 8, tmp_path, device="cuda",
        measure_ceilings=False, progress=lambda m: None))
    assert all(r.ok and r.peak_mem_gib > 0 and r.extra["cuda_graph"] == "true" for r in rows)


def test_calibrate_command_end_to_end_on_cpu(tmp_path):
    # the CLI path CI can run: measure a tiny model on the CPU, write the CSV, then fit it
    from click.testing import CliRunner

    from cli import main
    from roofline.calibration import load_calibration
    from roofline.measurements import read_measurements

    out = tmp_path / "run"
    r = CliRunner().invoke(
        main,
        ["calibrate", "--card", "h200", "--model", "tiny-qwen2", "--model", "tiny-llama", "--engine", "graph",
         "--batches", "1,2,4", "--prompt", "8", "--gen", "4", "--device", "cpu", "--out", str(out)],
    )
    assert r.exit_code == 0, r.output
    rows = read_measurements(out / "measurements-h200-graph.csv")
    assert sorted({(x.model, x.batch) for x in rows}) == [
        (m, b) for m in ("tiny-llama", "tiny-qwen2") for b in (1, 2, 4)
    ]
    assert all(x.ok and x.tpot_s > 0 for x in rows)
    cal = load_calibration(out / "h200-graph.json")
    assert cal.engine == "graph" and cal.kv_cache == "static"
    assert sorted(cal.fitted_on) == ["tiny-llama", "tiny-qwen2"]
    assert "held out: tiny-llama" in r.output


def test_calibrate_without_a_gpu_says_so(tmp_path):
    from click.testing import CliRunner

    from cli import main

    r = CliRunner().invoke(main, ["calibrate", "--card", "h200", "--model", "qwen2.5-0.5b", "--out", str(tmp_path)])
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert r.exit_code == 1
    assert "no CUDA GPU" in r.output and len(r.output.strip().splitlines()) == 1


def test_calibrate_on_the_cpu_makes_this_cpu_a_card(tmp_path):
    # issue 16: --card names this CPU (not a catalog card): its profile is made from the measured
    # ceilings, written beside the calibration, and both work as --card / --calibration
    import json

    from click.testing import CliRunner

    from cli import main
    from roofline.hardware import load_card

    out = tmp_path / "run"
    r = CliRunner().invoke(
        main,
        ["calibrate", "--card", "this-cpu", "--model", "tiny-qwen2", "--model", "tiny-llama", "--engine", "hf-eager",
         "--batches", "1,2", "--prompt", "8", "--gen", "4", "--device", "cpu", "--out", str(out)],
    )
    assert r.exit_code == 0, r.output
    card_path = out / "card-this-cpu.json"
    assert f"--card {card_path}" in r.output
    ceilings = json.loads((out / "ceilings-this-cpu.json").read_text())
    card = load_card(str(card_path))
    assert card.id == "this-cpu" and card.kind == "cpu"
    # the card's ceilings are the measured ones, not a datasheet's
    assert card.bandwidth_bytes_per_s == pytest.approx(ceilings["read_bandwidth_bytes_per_s"], rel=1e-5)
    assert card.peak_flop_per_s == pytest.approx(ceilings["gemm_bf16_flop_per_s"], rel=1e-5)
    p = CliRunner().invoke(main, ["predict", "--card", str(card_path), "--model", "tiny-qwen2", "--calibration",
                                  str(out / "this-cpu-hf-eager.json"), "--batches", "1,2", "--format", "json"])
    assert p.exit_code == 0, p.output
    assert json.loads(p.stdout)["meta"]["calibration"] == "this-cpu/hf-eager"
    # a second run on the card profile the first wrote (the held-out model of docs/cpu.md): rows and
    # files carry the card's id, not the path it was given as (a path once became a file name)
    out2 = tmp_path / "run2"
    r2 = CliRunner().invoke(
        main,
        ["calibrate", "--card", str(card_path), "--model", "tiny-llama", "--engine", "hf-eager",
         "--batches", "1", "--prompt", "8", "--gen", "4", "--device", "cpu", "--no-fit", "--out", str(out2)],
    )
    assert r2.exit_code == 0, r2.output
    csv_path = out2 / "measurements-this-cpu-hf-eager.csv"
    assert csv_path.is_file() and (out2 / "ceilings-this-cpu.json").is_file()
    assert sorted(p.name for p in out2.iterdir() if p.is_dir()) == []
    c = CliRunner().invoke(main, ["compare", "--calibration", str(out / "this-cpu-hf-eager.json"), "--card",
                                  str(card_path), str(csv_path)])
    assert c.exit_code == 0, c.output


def test_linear_probe_terms_recover_the_terms_they_were_made_with(tmp_path):
    # roofline.local_card.linear_probe_terms: a probe made by the formula with known terms gives them back
    import json

    from roofline.local_card import linear_probe_terms

    bw, peak, e_bw, e_c, p = 40e9, 0.9e12, 0.6, 0.7, 1.5
    models = {}
    for name, w in (("a", 1.0e9), ("b", 3.0e9)):
        pts = []
        for m in (1, 2, 4, 8, 16, 32, 64):
            t = ((w / (e_bw * bw)) ** p + (m * w / (e_c * peak)) ** p) ** (1 / p)
            pts.append({"m": m, "linear_s": t})
        models[name] = {"linear_weight_bytes_per_step": w, "decode_linear": pts}
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps({"read_bandwidth_bytes_per_s": bw, "gemm_bf16_flop_per_s": peak, "models": models}))
    got = linear_probe_terms(path)
    assert got["bandwidth_efficiency"] == pytest.approx(e_bw, rel=1e-4)
    assert got["compute_efficiency"] == pytest.approx(e_c, rel=1e-4)
    assert got["roofline_exponent"] == pytest.approx(p, rel=1e-3)
    path.write_text(json.dumps({"read_bandwidth_bytes_per_s": bw, "gemm_bf16_flop_per_s": peak, "models": {}}))
    assert linear_probe_terms(path) == {}  # no probe: nothing held


def test_one_model_frees_attention_only_when_matmuls_and_kv_are_held():
    # roofline.fitting._unidentifiable: with one model, attention is collinear with the matmuls and
    # the KV traffic unless both are held at measured values
    from types import SimpleNamespace

    from roofline.fitting import _unidentifiable
    from roofline.model_spec import load_model

    g = SimpleNamespace(spec=load_model("qwen2.5-0.5b"), model="qwen2.5-0.5b", prompt=[128, 128], gen=[32, 32],
                        batch=[1.0, 8.0])
    assert "attention_efficiency" in _unidentifiable([g])
    assert "attention_efficiency" in _unidentifiable([g], {"compute_efficiency"})
    assert "attention_efficiency" not in _unidentifiable([g], {"compute_efficiency", "kv_traffic_factor"})
    assert "activation_traffic_coeff" in _unidentifiable([g], {"compute_efficiency", "kv_traffic_factor"})
