"""calibrate.probes on the CPU with tiny sizes: the files they write, the attention copy's fidelity
to the graph engine, backend detection, and that one failing probe does not stop the other."""

from __future__ import annotations

import inspect
import json

import pytest

torch = pytest.importorskip("torch")

from calibrate import graph_engine as ge  # noqa: E402
from calibrate import probes  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402


def test_probe_times_the_engines_own_attention():
    """The probe's attention is the graph engine's decode_attention, the function its decode step runs."""
    assert "decode_attention(" in inspect.getsource(ge._gqa_decode)
    src = inspect.getsource(probes.graph_decode_attention)
    assert "from calibrate.graph_engine import decode_attention" in src


def test_attention_copy_equals_sdpa_with_gqa():
    torch.manual_seed(0)
    batch, q_heads, kv_heads, total, hd = 3, 6, 2, 11, 8
    q4 = torch.randn(batch, q_heads, 1, hd)
    ck, cv = torch.randn(batch, kv_heads, total, hd), torch.randn(batch, kv_heads, total, hd)
    bias = torch.zeros(total)
    bias[-3:] = float("-inf")  # slots after the current position
    ref = torch.nn.functional.scaled_dot_product_attention(q4, ck[:, :, :-3], cv[:, :, :-3], enable_gqa=True)
    grouped = q4.reshape(batch * kv_heads, q_heads // kv_heads, hd)  # heads ordered by KV head
    out = probes.graph_decode_attention(grouped, ck, cv, bias, hd ** -0.5)
    assert torch.allclose(out.reshape(batch, q_heads, 1, hd), ref, atol=1e-5)


def test_attention_probe_on_cpu(tmp_path):
    path = tmp_path / "probe-attention.json"
    data = probes.attention_probe("cpu", probes.TINY_ATTENTION, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    pts = data["points"]
    grid = probes.TINY_ATTENTION
    assert len(pts) == len(grid.batches) * len(grid.contexts) * len(probes.OPS)
    for p in pts:
        assert p["kv_bytes"] == 2 * p["batch"] * p["kv_heads"] * p["context_tokens"] * p["head_dim"] * 2
        assert p["score_elements"] == p["batch"] * p["q_heads"] * p["context_tokens"]
        assert p["seq_layers"] == p["batch"]
    ok = {p["op"] for p in pts if "error" not in p}
    assert set(probes.GRAPH_OPS) | {"sdpa_default", "sdpa_math", "cat_append"} <= ok
    assert all(p["s"] > 0 for p in pts if "error" not in p)
    # the CPU has no memory-efficient or cuDNN attention: recorded, not raised
    assert {p["op"] for p in pts if "error" in p} == {"sdpa_efficient", "sdpa_cudnn"}
    assert {d["sdpa_default_backend"] for d in data["dispatch"]} == {"flash-cpu"}


def test_attention_probe_stops_at_the_budget(tmp_path):
    data = probes.attention_probe("cpu", probes.TINY_ATTENTION, tmp_path / "a.json", 0.0, lambda m: None)
    assert data["points"] == [] and data["stopped"].startswith("budget reached before tiny-qwen2 batch 1")


def test_skipped_combinations_over_the_kv_limit(tmp_path):
    grid = probes.AttentionGrid(shapes=(("t", 4, 2, 16),), batches=(1, 64), contexts=(16,), max_kv_bytes=4096,
                                rotate_bytes=0, max_copies=1, reps=1, max_math_bytes=1)
    data = probes.attention_probe("cpu", grid, tmp_path / "a.json", None, lambda m: None)
    assert [(s["batch"], s.get("op")) for s in data["skipped"]] == [(1, "sdpa_math"), (64, None)]


def test_memory_case_stages_and_backends_on_cpu():
    out: dict = {}
    probes.run_memory_case({"device": "cpu", "model": "tiny-qwen2", "kind": "prefill-backends", "prompt": 8,
                            "gen": 4}, out)
    stages = {s["stage"]: s for s in out["stages"]}
    assert list(stages)[:3] == ["start", "weights", "static cache allocated"]
    assert stages["eager prefill (math)"]["sdpa_backend"] == "math"
    assert stages["eager prefill (flash)"]["sdpa_backend"] == "flash-cpu"
    assert "No viable backend" in stages["eager prefill (cudnn)"]["error"]
    assert out["weight_bytes_expected"] > 0 and out["flags"]["torch"] == torch.__version__


def test_memory_probe_runs_cases_in_fresh_processes(tmp_path):
    path = tmp_path / "probe-memory.json"
    cases = ({"model": "tiny-llama", "kind": "graph", "prompt": 8, "gen": 4, "profile": False},
             {"model": "tiny-llama", "kind": "no-such-kind"})
    data = probes.memory_probe("cpu", cases, path, None, jobs=2, case_timeout_s=120, progress=lambda m: None)
    assert json.loads(path.read_text())["summary"] == data["summary"]
    good, bad = data["cases"]
    assert good["returncode"] == 0
    names = [s["stage"] for s in good["result"]["stages"]]
    assert names[:3] == ["start", "weights", "a whole runner point (GraphEngine.measure)"]
    assert "eager prefill (default)" in names and names[-1] == "point state freed"
    assert data["summary"][0]["prefill"]["eager prefill (default)"]["backend"] == ""  # profiler off
    # a failing case is recorded with its error, and the probe goes on
    assert bad["returncode"] != 0 and "unknown memory case kind" in bad["result"]["error"]
    assert not list(tmp_path.glob(".probe-memory-cases*"))


def test_a_failing_probe_is_written_and_the_next_still_runs(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(probes, "memory_probe", boom)
    monkeypatch.setattr(probes, "TINY_ATTENTION", probes.AttentionGrid(
        shapes=(("t", 4, 2, 16),), batches=(1,), contexts=(16,), max_kv_bytes=2**20, rotate_bytes=0,
        max_copies=1, reps=1, max_math_bytes=2**20))
    lines: list[str] = []
    paths = probes.run_probes(tmp_path, ["attention", "memory"], device="cpu", progress=lines.append)
    mem = json.loads(paths["memory"].read_text())
    assert mem["error"] == "RuntimeError: probe exploded" and "Traceback" in mem["traceback"]
    att = json.loads(paths["attention"].read_text())
    assert len(att["points"]) == len(probes.OPS) and "error" not in att
    assert any("memory: FAILED" in line for line in lines)


def test_bad_probe_and_device_names():
    with pytest.raises(RooflineError, match="unknown probe"):
        probes.run_probes("/nonexistent", ["speed"], device="cpu")
    with pytest.raises(RooflineError, match="unknown device 'tpu'"):
        probes.run_probes("/nonexistent", ["attention"], device="tpu")
    assert probes.main(["--out", "/nonexistent", "--what", "speed"]) == 2


def test_backend_names_from_profiler_ops():
    assert probes.sdpa_backend_from_ops(["aten::_scaled_dot_product_cudnn_attention", "x"]) == "cudnn"
    assert probes.sdpa_backend_from_ops(["aten::_scaled_dot_product_flash_attention"]) == "flash"
    assert probes.sdpa_backend_from_ops(["aten::_scaled_dot_product_efficient_attention"]) == "efficient"
    assert probes.sdpa_backend_from_ops(["aten::_scaled_dot_product_attention_math"]) == "math"
    assert probes.sdpa_backend_from_ops(["aten::mm"]) == ""


def test_gemm_probe_on_cpu_is_a_table_roofline_reads(tmp_path):
    # the tiny grid: every (N, K), climbing M until the first shape over max_flop; the file is what
    # roofline.gemm reads
    from roofline.gemm import load_gemm_table

    path = tmp_path / "probe-gemm.json"
    grid = probes.TINY_GEMM
    data = probes.gemm_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    want = []
    for n in grid.ns:
        for k in grid.ks:
            for m in grid.ms:
                want.append((m, n, k))
                if 2.0 * m * n * k > grid.max_flop:
                    break
    assert [(p["m"], p["n"], p["k"]) for p in data["points"]] == want and not data["errors"]
    for p in data["points"]:
        assert p["flop"] == 2.0 * p["m"] * p["n"] * p["k"] and p["weight_bytes"] == p["n"] * p["k"] * 4  # fp32 on CPU
        assert p["seconds"] > 0
    table = load_gemm_table(path)
    first = data["points"][0]
    assert table.seconds(first["m"], first["n"], first["k"]) == pytest.approx(first["seconds"], rel=1e-12)


def test_gemm_probe_stops_at_the_budget(tmp_path):
    data = probes.gemm_probe("cpu", probes.TINY_GEMM, tmp_path / "g.json", 0.0, lambda m: None)
    assert data["points"] == [] and data["stopped"].startswith("budget reached before N 32 K 32 M 1")


def test_the_full_gemm_grid_covers_the_catalogs_dense_shapes():
    # every dense catalog model's loop linears (and their M up to 2,048 prefill tokens) lie inside
    # the grid's N and K, but for the LM head's vocabulary (N beyond 65,536: time in proportion)
    # and Falcon-180B's down projection (K 59,392 > 32,768: in proportion too; its 360 GB of
    # weights never fit one GPU the loop runs on)
    from roofline.model_spec import catalog_names, load_model
    from roofline.pass_costs import loop_layer_gemms

    g = probes.FULL_GEMM
    assert g.ms[0] == 1 and g.ms[-1] == 65536 and 2048 in g.ms
    outside = []
    for name in catalog_names():
        shapes = loop_layer_gemms(load_model(name))
        if shapes is None:
            continue
        for n, k in shapes:
            if not (g.ns[0] <= n <= g.ns[-1] and g.ks[0] <= k <= g.ks[-1]):
                outside.append((name, n, k))
    assert outside == [("falcon-180b", 14848, 59392)]


def test_chunk_probe_on_cpu_is_a_table_roofline_reads(tmp_path):
    # the tiny grid: every bucket x chunk share x cached size with c + t within the rows, both the
    # chunk graph's and the prefill graph's attention timed; the file is what roofline.chunk_table reads
    from roofline.chunk_table import load_chunk_table

    path = tmp_path / "probe-chunk.json"
    grid = probes.TINY_CHUNK
    data = probes.chunk_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    want = [(b, max(1, round(b * f)), c) for b in grid.buckets for f in grid.fractions for c in grid.cached
            if c + max(1, round(b * f)) <= grid.rows]
    assert [(p["bucket"], p["chunk_tokens"], p["cached"]) for p in data["points"]] == want and not data["errors"]
    for p in data["points"]:
        assert p["chunk_s"] > 0 and p["prefill_s"] > 0 and p["prompt_tokens"] == p["bucket"] - p["chunk_tokens"]
    table = load_chunk_table(path)
    first = data["points"][0]
    assert table.extra_s(4, 2, 16, first["bucket"], first["chunk_tokens"], first["cached"]) == pytest.approx(
        max(0.0, first["chunk_s"] - first["prefill_s"]), rel=1e-12, abs=1e-15)


def test_chunk_probe_stops_at_the_budget(tmp_path):
    data = probes.chunk_probe("cpu", probes.TINY_CHUNK, tmp_path / "c.json", 0.0, lambda m: None)
    assert data["points"] == [] and data["stopped"] == "budget reached before tiny-qwen2 bucket 16 t 8 c 0"


def test_the_full_chunk_grid_covers_the_served_models_head_shapes():
    # every model the serving loop served on the H200 has its head shape measured exactly
    from roofline.model_spec import load_model

    shapes = {(q, kv, hd) for _, q, kv, hd in probes.FULL_CHUNK.shapes}
    for name in ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "llama-3.2-1b", "llama-3.2-3b",
                 "mistral-7b-v0.3"):
        spec = load_model(name)
        assert (spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim) in shapes, name
    assert probes.FULL_CHUNK.rows == 1280 and probes.FULL_CHUNK.slots == 64  # the committed runs' loop


def test_layers_probe_on_cpu_is_what_the_fit_reads(tmp_path):
    # the tiny grid: each model (and head-split variant) at each layer count and batch; the fit's
    # reader keeps the models as they are and leaves the variants out
    from roofline.probes import layers_points

    path = tmp_path / "probe-layers.json"
    grid = probes.TINY_LAYERS
    data = probes.layers_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    assert not data["errors"]
    assert [(p["variant"], p["layers"], p["batch"]) for p in data["points"]] == [
        (v, n, b) for _, v, _ in grid.models for n in grid.layers for b in grid.batches]
    variant = [p for p in data["points"] if p["variant"]]
    assert {(p["q_heads"], p["kv_heads"], p["head_dim"]) for p in variant} == {(2, 1, 32)}
    assert all(p["step_s"] > 0 for p in data["points"])
    points = layers_points(path)
    assert [(p.layers, p.batch) for p in points] == [(n, b) for n in grid.layers for b in grid.batches]
    assert all(p.model == "tiny-qwen2" and p.context == grid.context for p in points)


def test_layers_points_refuse_a_file_that_is_not_a_layers_probe(tmp_path):
    from roofline.errors import RooflineError
    from roofline.probes import layers_points

    bad = tmp_path / "bad.json"
    for text, needle in (('{"points": 3}', "not a layers probe file"),
                         ('{"points": [{"model": "m", "variant": "x"}]}', "no points of a model as it is"),
                         ('{"points": [{"model": "m", "variant": "", "layers": "two"}]}', "lacks model, layers")):
        bad.write_text(text)
        with pytest.raises(RooflineError, match=needle):
            layers_points(bad)


def test_the_full_layers_grid_cuts_the_fitted_models_below_their_depth():
    # the fit needs the fitted models cut to several layer counts, all below the shallowest of them
    names = {m for m, v, _ in probes.FULL_LAYERS.models if not v}
    assert {"qwen2.5-1.5b", "qwen2.5-7b", "llama-3.1-8b"} <= names
    assert len(probes.FULL_LAYERS.layers) >= 3 and max(probes.FULL_LAYERS.layers) < 28
    for m, v, overrides in probes.FULL_LAYERS.models:
        if v:  # a head-split variant keeps the query and K/V widths
            from roofline.model_spec import load_model

            spec, o = load_model(m), dict(overrides)
            assert o["num_attention_heads"] * o["head_dim"] == spec.num_attention_heads * spec.head_dim
            assert o["num_key_value_heads"] * o["head_dim"] == spec.num_key_value_heads * spec.head_dim


def test_prefill_attention_probe_on_cpu_gives_the_rates_the_fit_stores(tmp_path):
    # the tiny grid: each shape at each prompt, B = tokens / P; the reader's rate per head width is
    # the median over the long prompts (all of them when none reaches min_prompt_tokens)
    import statistics

    from roofline.probes import prefill_attention_rates

    path = tmp_path / "probe-prefill-attention.json"
    grid = probes.TINY_PREFILL_ATTENTION
    data = probes.prefill_attention_probe("cpu", grid, path, None, lambda m: None)
    assert not data["errors"] and [(p["prompt_tokens"], p["batch"]) for p in data["points"]] == [(8, 4), (16, 2)]
    for p in data["points"]:
        assert p["flop"] == 4.0 * p["batch"] * 4 * 16 * p["prompt_tokens"] * (p["prompt_tokens"] + 1) / 2
        assert p["flop_per_s"] == pytest.approx(p["flop"] / p["seconds"])
    rates = prefill_attention_rates(path, min_prompt_tokens=16)
    assert rates == {"16": pytest.approx(data["points"][1]["flop_per_s"])}
    assert prefill_attention_rates(path, min_prompt_tokens=10**6) == {
        "16": pytest.approx(statistics.median(p["flop_per_s"] for p in data["points"]))}


def test_the_shipped_prefill_attention_rates_and_bad_files(tmp_path):
    # hardware_profiles/measurements/h200-probe-prefill-attention.json (device call 18, cuDNN SDPA):
    # 64-wide heads run at ~0.77x the rate of 128-wide ones on long prompts
    from roofline.errors import RooflineError
    from roofline.probes import prefill_attention_rates

    rates = prefill_attention_rates("hardware_profiles/measurements/h200-probe-prefill-attention.json")
    assert set(rates) == {"64", "128"}
    assert rates["64"] == pytest.approx(4.53e14, rel=0.02) and rates["128"] == pytest.approx(5.88e14, rel=0.02)
    bad = tmp_path / "bad.json"
    for text, needle in (('{"points": 1}', "not a prefill-attention probe file"), ('{"points": []}', "no points"),
                         ('{"points": [{"head_dim": 64}]}', "lacks head_dim"),
                         ('{"points": [{"head_dim": 64, "prompt_tokens": 8, "flop_per_s": 0}]}', "must be positive")):
        bad.write_text(text)
        with pytest.raises(RooflineError, match=needle):
            prefill_attention_rates(bad)


def test_moe_probe_on_cpu_times_every_stage_of_the_engines_layer(tmp_path):
    # the tiny grid: each MoE model at each token count, every stage of moe_forward, the whole layer
    # in a graph (a plain loop on the CPU) and eagerly; the points carry the work the reader divides by
    from roofline.probes import moe_row_seconds_per_element

    path = tmp_path / "probe-moe.json"
    grid = probes.TINY_MOE
    data = probes.moe_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    assert not data["errors"]
    stages = [s for s in probes.MOE_STAGES if s != "shared"] + ["moe_forward_eager"]  # no tiny model has shared experts
    assert [(p["model"], p["tokens"], p["stage"]) for p in data["points"]] == [
        (m, t, s) for m in grid.models for t in grid.tokens for s in stages]
    for p in data["points"]:
        assert p["rows"] == p["tokens"] * p["top_k"] and p["seconds"] > 0
        assert 1 <= p["experts_touched"] <= min(p["experts"], p["rows"])
        assert p["expert_flop"] == 2.0 * p["rows"] * 3 * p["hidden"] * p["moe_inter"]
    # the reader: (gather + combine) / (rows x hidden), median over the named models' large points
    got = moe_row_seconds_per_element(path, ["tiny-gpt-oss"], min_tokens=16)
    at = {p["stage"]: p for p in data["points"] if p["model"] == "tiny-gpt-oss" and p["tokens"] == 16}
    assert got == pytest.approx((at["gather"]["seconds"] + at["combine"]["seconds"])
                                / (at["gather"]["rows"] * at["gather"]["hidden"]))


def test_moe_stage_inputs_rebuild_the_engines_layer():
    # the stages the probe times, run in order, give moe_forward's output (same routing, same sums)
    from calibrate.configs import load_model_config

    s = ge.Shapes.from_config(load_model_config("tiny-qwen3-moe"))
    w = ge.random_weights(s, torch.device("cpu"), torch.float32, 0)
    m = next(lw.moe for lw in w.layers if lw.moe is not None)
    h = torch.randn(5, s.hidden, generator=torch.Generator().manual_seed(3))
    fns, touched = probes._moe_stage_fns(h, m, s)
    assert set(fns) == {"route", "sort", "gather", "gemm_gate_up", "act", "gemm_down", "combine", "moe_forward"}
    assert 1 <= touched <= s.experts
    torch.testing.assert_close(fns["combine"](), ge.moe_forward(h, m, s))
    offs = fns["sort"]()
    assert int(offs[-1]) == 5 * s.top_k  # every routed row is counted once


def test_the_shipped_moe_probe_and_bad_files(tmp_path):
    # hardware_profiles/measurements/h200-probe-moe.json (device call 19): at qwen3-30b-a3b's shape the
    # routed rows' gather and combine cost ~12 ps per (row x hidden) element on the H200 (the
    # combine's bf16 atomic adds run at ~90 G elements/s)
    from roofline.probes import moe_row_seconds_per_element

    shipped = "hardware_profiles/measurements/h200-probe-moe.json"
    assert moe_row_seconds_per_element(shipped, ["qwen3-30b-a3b"]) == pytest.approx(1.2e-11, rel=0.1)
    # the other shapes, not fitted on, agree within 15%: a per-element cost, not a per-model one
    for other in ("mixtral-8x7b", "gpt-oss-20b", "deepseek-v2-lite", "deepseek-v3"):
        assert moe_row_seconds_per_element(shipped, [other]) == pytest.approx(1.2e-11, rel=0.15)
    bad = tmp_path / "bad.json"
    for text, needle in (('{"points": 1}', "not a MoE probe file"), ('{"points": []}', "no gather and combine"),
                         ('{"points": [{"model": "m"}]}', "lacks model"),
                         ('{"points": [{"model": "m", "tokens": 9999, "stage": "gather", "rows": 1, "hidden": 1, '
                          '"seconds": 0}, {"model": "m", "tokens": 9999, "stage": "combine", "rows": 1, "hidden": 1, '
                          '"seconds": 0}]}', "must be positive")):
        bad.write_text(text)
        with pytest.raises(RooflineError, match=needle):
            moe_row_seconds_per_element(bad, ["m"])


def test_kernels_probe_on_cpu_lists_each_steps_kernels(tmp_path):
    # the tiny grid: one point per (model, layers, batch, context), the step timed eagerly and from a
    # graph (eager on the CPU), its ops by time, longest first, the rest summed; a gemma-3 style
    # nested config is cut like a flat one
    path = tmp_path / "probe-kernels.json"
    grid = probes.TINY_KERNELS
    data = probes.kernels_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    assert not data["errors"]
    assert [(p["model"], p["layers"], p["batch"], p["context"]) for p in data["points"]] == list(grid.points)
    for p in data["points"]:
        times = [k["seconds"] for k in p["kernels"]]
        assert 0 < len(times) <= grid.top and times == sorted(times, reverse=True) and min(times) > 0
        assert p["kernel_s"] == pytest.approx(sum(times) + p["other_kernels_s"])
        assert p["step_s"] > 0 and p["graph_step_s"] > 0
    nested = {"model_type": "gemma3", "text_config": {"num_hidden_layers": 6, "layer_types": ["a"] * 6}}
    import unittest.mock as mock

    with mock.patch("calibrate.configs.load_model_config", return_value=nested):
        cut = probes._cut_config("x", 2)
    assert cut["text_config"]["num_hidden_layers"] == 2 and cut["text_config"]["layer_types"] == ["a", "a"]


def test_masked_attention_probe_on_cpu_gives_the_rates_the_calibration_stores(tmp_path):
    # the tiny grid: the engine's masked prefill path (a window shorter than the prompt; sinks) at
    # each prompt; computed FLOPs count the whole square the kernel computes, at the width it computes
    # (sinks: d + 1 padded to a multiple of 8); the reader's rate per computed width is the median
    import statistics

    from roofline.probes import masked_attention_rates

    path = tmp_path / "probe-masked-attention.json"
    grid = probes.TINY_MASKED_ATTENTION
    data = probes.masked_attention_probe("cpu", grid, path, None, lambda m: None)
    assert not data["errors"]
    assert [(p["shape"], p["prompt_tokens"]) for p in data["points"]] == [
        (label, p) for label, *_ in grid.shapes for p in grid.prompts]
    for p in data["points"]:
        d = 24 if p["sinks"] else 16
        keys = p["prompt_tokens"] + (1 if p["sinks"] else 0)
        assert p["computed_head_dim"] == d
        assert p["computed_flop"] == 4.0 * p["batch"] * p["q_heads"] * d * p["prompt_tokens"] * keys
    rates = masked_attention_rates(path, min_prompt_tokens=1)
    assert set(rates) == {"16", "24"}
    assert rates["24"] == pytest.approx(statistics.median(p["flop_per_s"] for p in data["points"] if p["sinks"]))


def test_the_shipped_masked_attention_rates_and_bad_files(tmp_path):
    # hardware_profiles/measurements/h200-probe-masked-attention.json (device call 24, cuDNN with a
    # mask): the whole square at 240-320 TFLOP/s, sinks' 72-wide padded heads at ~120
    from roofline.probes import masked_attention_rates

    rates = masked_attention_rates("hardware_profiles/measurements/h200-probe-masked-attention.json")
    assert set(rates) == {"64", "72", "96", "128", "256"}
    assert rates["128"] == pytest.approx(3.1e14, rel=0.05) and rates["72"] == pytest.approx(1.2e14, rel=0.1)
    bad = tmp_path / "bad.json"
    for text, needle in (('{"points": 1}', "not a masked-attention probe file"), ('{"points": []}', "no points"),
                         ('{"points": [{"computed_head_dim": 64}]}', "lacks computed_head_dim"),
                         ('{"points": [{"computed_head_dim": 64, "prompt_tokens": 8, "flop_per_s": -1}]}',
                          "must be positive")):
        bad.write_text(text)
        with pytest.raises(RooflineError, match=needle):
            masked_attention_rates(bad)


def test_prefill_kernels_probe_on_cpu_profiles_both_cuts(tmp_path):
    # the tiny grid: each point at each batch, the engine's eager prefill cut to both layer counts,
    # every op with its time; the reader's per-(token x layer) families come from the two cuts'
    # difference and are what the ops sum to
    from roofline.probes import kernel_family, prefill_kernel_layer_seconds

    path = tmp_path / "probe-prefill-kernels.json"
    grid = probes.TINY_PREFILL_KERNELS
    data = probes.prefill_kernels_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str))
    assert not data["errors"]
    assert [(p["label"], p["batch"]) for p in data["points"]] == [(label, b) for label, *_ in grid.points
                                                                  for b in grid.batches]
    for p in data["points"]:
        assert [c["layers"] for c in p["cuts"]] == list(grid.layers)
        families = {kernel_family(k["name"]) for c in p["cuts"] for k in c["kernels"]}
        assert families == {"matmul", "attention", "elementwise"}, families  # aten ops on the CPU
        per = prefill_kernel_layer_seconds(p)
        assert set(per) == {"matmul", "attention", "elementwise", "prefill"}
    wide = next(p for p in data["points"] if p["label"] == "tiny wide queries")
    assert wide["shapes"]["heads"] == 8 and wide["shapes"]["head_dim"] == 16  # the override reached the engine
    assert next(p for p in data["points"] if p["kind"] == "model")["shapes"]["qk_norm"]  # tiny-qwen3-moe


def test_attention_groups_probe_on_cpu_times_only_the_engines_attention(tmp_path):
    # the tiny grid: MHA and MQA shapes, the graph engine's whole decode attention alone (the grid's
    # ops), every point with its score elements (batch x query heads x cached tokens)
    path = tmp_path / "probe-attention-groups.json"
    grid = probes.TINY_ATTENTION_GROUPS
    data = probes.attention_probe("cpu", grid, path, None, lambda m: None)
    assert {p["op"] for p in data["points"]} == {"graph_attention"}
    assert len(data["points"]) == len(grid.shapes) * len(grid.batches) * len(grid.contexts)
    for p in data["points"]:
        assert p["score_elements"] == p["batch"] * p["q_heads"] * p["context_tokens"] and p["s"] > 0
    assert {p["q_heads"] // p["kv_heads"] for p in data["points"]} == {1, 4}


def test_attention_table_probe_on_cpu_times_views_of_the_engines_layout(tmp_path):
    # the tiny grid: every (shape, batched matrices, length) whose K + V fit, the batch being the
    # batched matrices over the shape's KV heads; what roofline.probes reads as graph_attention points
    from roofline.probes import attention_points

    path = tmp_path / "probe-attention-table.json"
    grid = probes.TINY_ATTENTION_TABLE
    data = probes.attention_table_probe("cpu", grid, path, None, lambda m: None)
    assert data["stopped"] is None and not data["errors"]
    points = attention_points(path)
    assert len(points) == len(grid.shapes) * len(grid.matrices) * len(grid.contexts)
    assert {(p.batch * p.kv_heads, p.context_tokens) for p in points} == {
        (m, t) for m in grid.matrices for t in grid.contexts}
    for raw in data["points"]:
        assert raw["kv_bytes"] == 4 * raw["batch"] * raw["kv_heads"] * raw["context_tokens"] * raw["head_dim"]
        assert raw["s"] > 0
    # fewer matrices than the shape's KV heads: one sequence of that many KV heads, the group kept
    # (g1 has 4 KV heads: its 2 matrices run as 2 query heads on 2 KV heads)
    few = {(p["shape"], p["batch"], p["kv_heads"], p["q_heads"]) for p in data["points"]
           if p["batch"] * p["kv_heads"] == 2}
    assert few == {("g1", 1, 2, 2), ("g4", 2, 1, 4)}
    # a K + V over the grid's limit is skipped, not timed
    small = probes.AttentionTableGrid(shapes=(("g1", 4, 4, 16),), matrices=(8,), contexts=(16, 4096),
                                      max_kv_bytes=64 * 1024, rotate_bytes=0, max_copies=1, reps=1)
    data = probes.attention_table_probe("cpu", small, tmp_path / "small.json", None, lambda m: None)
    assert [p["context_tokens"] for p in data["points"]] == [16]
    assert [s["context_tokens"] for s in data["skipped"]] == [4096]


def test_attention_table_probe_stops_at_the_budget(tmp_path):
    data = probes.attention_table_probe("cpu", probes.TINY_ATTENTION_TABLE, tmp_path / "t.json", 0.0, lambda m: None)
    assert data["stopped"] and not data["points"]


def test_loop_attention_probe_on_cpu_times_the_loops_own_call(tmp_path):
    # the tiny grid: each bucket x slot count x layout whose prompts fit the slots; the offsets are
    # the loop's (calibrate.serving_loop.ModelExecutor._stage_prefill): prompts, padding, empty ones
    path = tmp_path / "probe-loop-attention.json"
    grid = probes.TINY_LOOP_ATTENTION
    data = probes.loop_attention_probe("cpu", grid, path, None, lambda m: None)
    assert json.loads(path.read_text()) == json.loads(json.dumps(data, default=str)) and not data["errors"]
    # eight prompts need eight slots: the tiny grid's 1 and 4 slots hold only the lone prompt
    assert [(p["bucket"], p["slots"], p["layout"]) for p in data["points"]] == [
        (b, s, "one") for b in grid.buckets for s in grid.slots]
    first = data["points"][0]  # bucket 16, one slot: a prompt of 14, the padding of 2
    assert first["lens"] == [14] and first["pairs"] == 14 * 15 // 2 + 2 * 3 // 2 and first["seconds"] > 0
    assert probes.loop_attention_offsets([14], 16, 1) == [0, 14, 16]
    assert probes.loop_attention_offsets([3, 5], 16, 4) == [0, 3, 8, 16, 16, 16]  # 5 sequences: 2 + padding + 2 empty
