"""calibrate/runs/kv_repeat_probe.py on the CPU: each variant of the loop's prefill graph body (K/V
repeated, the kernel's own grouped queries, extra copies on a full multi-head model) computes the
pass the shipped body computes; the extra kernels' elements are counted as documented."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "calibrate" / "runs"))
import kv_repeat_probe as kp  # noqa: E402


def run_script(name: str):
    """calibrate/runs/NAME.py as a module, loaded from its file: benchmarks/ has a script of the
    same name, and another test may have put benchmarks/ first on sys.path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"runs_{name}", ROOT / "calibrate" / "runs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def mha_config(tmp_path):
    """tiny-llama (4 query heads, 1 K/V head) made full multi-head: 4 K/V heads."""
    config = json.loads((ROOT / "roofline" / "catalog" / "tiny-llama" / "config.json").read_text())
    config["num_key_value_heads"] = config["num_attention_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("model,names", [("tiny-llama", ["repeated", "native"]),
                                         ("tiny-qwen2", ["repeated", "native"]), (None, ["plain", "copies"])])
def test_every_variant_computes_the_pass_the_run_replays(model, names, mha_config):
    entry = kp.probe_model(f"{model or mha_config}:4:160", "cpu")
    assert entry["variants"] == names
    assert set(entry["buckets"]) == {"64", "128"}  # 7/8 of 256 does not fit 160 rows
    for bucket, by in entry["buckets"].items():
        assert by["prompt"] == int(bucket) * 7 // 8
        assert by["same_tokens"], bucket
        assert by[f"{names[0]}_s"] > 0 and by[f"{names[1]}_s"] > 0


def test_extra_elements_count_the_repeats_and_the_wider_attention_reads(mha_config):
    """tiny-llama: 4 query heads of 16 (q = 64), 1 K/V head (kv = 16): repeats 2 x (16 + 64) = 160,
    the attention reading K and V at 64 instead of 16: 2 x 48 = 96; the copies on the full
    multi-head model: 4 x 64 = 256."""
    from calibrate.serving_job import ServingSession

    for model, want in (("tiny-llama", 256.0), (mha_config, 256.0)):
        ex = ServingSession(model, "cpu", max_num_seqs=2, max_model_len=64, progress=lambda m: None).executor
        assert kp.extra_elements(ex) == want
    ex = ServingSession("tiny-qwen2", "cpu", max_num_seqs=2, max_model_len=64, progress=lambda m: None).executor
    q, kv = ex.shapes.heads * ex.shapes.head_dim, ex.shapes.kv_heads * ex.shapes.head_dim
    assert (q, kv) == (64, 32)
    assert kp.extra_elements(ex) == 2 * (32 + 64) + 2 * (64 - 32)


def test_the_cpu_smoke_run_writes_its_file(tmp_path, monkeypatch):
    out = tmp_path / "k.json"
    monkeypatch.setenv("PROBE_DEVICE", "cpu")
    monkeypatch.setattr(sys, "argv", ["kv_repeat_probe.py", str(out), "tiny-qwen2:4:96"])
    kp.main()
    data = json.loads(out.read_text())
    assert data["gpu"] == "cpu"
    [entry] = data["models"]
    assert entry["model"] == "tiny-qwen2" and entry["layers"] == 2 and list(entry["buckets"]) == ["64"]


def test_the_kernel_walk_times_every_part_of_the_pass_on_the_cpu(tmp_path, monkeypatch, mha_config):
    """calibrate/runs/prefill_kernel_walk.py's CPU smoke run: each bucket's ops profiled, the
    linears' shapes read from the loop's weights (tiny-llama made full multi-head: q + 2 kv =
    3 x 64 rows of 64; SwiGLU's gate and up fused: 2 x intermediate)."""
    kw = run_script("prefill_kernel_walk")

    out = tmp_path / "w.json"
    monkeypatch.setenv("PROBE_DEVICE", "cpu")
    monkeypatch.setattr(sys, "argv", ["prefill_kernel_walk.py", str(out), f"{mha_config}:4:160", "no-such-model:4:160"])
    kw.main()
    data = json.loads(out.read_text())
    entry, bad = data["models"]
    config = json.loads(Path(mha_config).read_text())
    h, inter = config["hidden_size"], config["intermediate_size"]
    assert entry["linears"] == {"qkv": [3 * h, h], "o": [h, h], "up": [2 * inter, h], "down": [h, inter],
                                "lm_head": [config["vocab_size"], h]}
    assert list(entry["buckets"]) == ["64", "128"]
    for by in entry["buckets"].values():
        assert by["graph_s"] > 0 and by["linears_alone_s"] == {}
        assert any("linear" in name or "addmm" in name or "mm" in name for name in by["kernels"])
    assert "unknown model" in bad["skipped"]


def test_gemm_recheck_picks_the_points_slower_than_a_larger_m():
    """calibrate/runs/gemm_recheck.py: a point at least 10% slower than the same (N, K) at a larger
    M (the fastest such), M >= 16, the largest ratio first; the H100 table's (64, 16384, 4096) --
    103 us against 63 at M 128 (call 112 timed the shape alone at 49 us) -- is among them."""
    gr = run_script("gemm_recheck")

    pts = [{"m": m, "n": 256, "k": 256, "seconds": s} for m, s in
           ((8, 9.0), (16, 5.0), (32, 2.0), (64, 2.1), (128, 3.0))] + \
          [{"m": m, "n": 512, "k": 256, "seconds": s} for m, s in ((16, 1.0), (32, 1.05), (64, 1.2))]
    got = gr.slow_points(pts, 10)
    # (8, ...) is below M 16; (16, 256, 256) is 2.5x M 32's; (32, 512, 256) is within 10% of none faster
    assert [(p["m"], p["n"], p["m_after"]) for p in got] == [(16, 256, 32)]
    assert got[0]["ratio"] == pytest.approx(2.5)
    table = json.loads((ROOT / "hardware_profiles" / "measurements" / "h100-sxm-probe-gemm.json").read_text())
    worst = gr.slow_points(table["points"], 40)
    assert any((p["m"], p["n"], p["k"]) == (64, 16384, 4096) for p in worst)


def test_the_repeats_fixed_time_is_the_lines_intercept(tmp_path):
    """roofline.pass_costs.kv_repeat_s_from_probe: per grouped-query model, the line of the paired
    difference a layer against the extra bytes; the median of the intercepts. Two models built at
    3 and 5 us a layer plus 1 ns a kB; a full multi-head entry (copies) is left out; a probe with
    no grouped-query model is a one-line error."""
    from roofline.errors import RooflineError
    from roofline.pass_costs import kv_repeat_s_from_probe

    def entry(model, fixed, variants=("repeated", "native"), layers=28, per_token=1000.0):
        buckets = {str(b): {"diff_s": -(fixed + per_token * 2 * b * 1e-12) * layers} for b in (64, 256, 1024)}
        return {"model": model, "layers": layers, "variants": list(variants),
                "extra_elements_per_token_layer": per_token, "buckets": buckets}

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"models": [entry("a", 3e-6), entry("b", 5e-6), entry("c", 9e-6, ("plain", "copies")),
                                           {"model": "d", "skipped": "no"}]}))
    value, points = kv_repeat_s_from_probe([path])
    assert value == pytest.approx(4e-6, rel=1e-6)
    assert [p["model"] for p in points] == ["a", "b"]
    assert points[0]["s_per_byte"] == pytest.approx(1e-12, rel=1e-6)
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"models": [entry("c", 9e-6, ("plain", "copies"))]}))
    with pytest.raises(RooflineError, match="no grouped-query model"):
        kv_repeat_s_from_probe([bad])


def test_a_launchs_fixed_time_is_the_walks_launch_coefficient(tmp_path):
    """roofline.pass_costs.launch_s_from_walks: the elementwise kernels' time a layer at each model's
    smallest bucket against their launches and their bytes (loop_elementwise_elements at the bucket,
    bf16), through the origin. Three catalog models built at 2.5 us a launch plus their bytes at
    1.25 TB/s, with matmul and attention kernels that must not count, and a skipped model; fewer
    than three models is a one-line error."""
    from roofline.errors import RooflineError
    from roofline.model_spec import load_model
    from roofline.pass_costs import launch_s_from_walks, loop_elementwise_elements

    def entry(model, launches, layers):
        byts = loop_elementwise_elements(load_model(model)) * 64 * 2.0
        per_kernel = (2.5e-6 * launches + byts / 1.25e12) * layers / (launches * layers)
        kernels = {"elementwise_kernel<add>": [launches * layers / 2, per_kernel * launches * layers / 2],
                   "vectorized_layer_norm_kernel": [launches * layers / 2, per_kernel * launches * layers / 2],
                   "nvjet_tst_128x64 (a matmul)": [4 * layers, 1e-3], "pytorch_flash::flash_fwd_kernel": [layers, 1e-3]}
        return {"model": model, "layers": layers, "buckets": {"128": {"kernels": {}}, "64": {"kernels": kernels}}}

    path = tmp_path / "w.json"
    path.write_text(json.dumps({"models": [entry("qwen2.5-7b", 21, 28), entry("qwen3-8b", 25, 36),
                                           entry("pythia-6.9b", 18, 32), {"model": "x", "skipped": "no"}]}))
    value, points = launch_s_from_walks([path])
    assert value == pytest.approx(2.5e-6, rel=1e-6)
    assert [(p["model"], p["launches"]) for p in points] == [("qwen2.5-7b", 21), ("qwen3-8b", 25), ("pythia-6.9b", 18)]
    bad = tmp_path / "v.json"
    bad.write_text(json.dumps({"models": [entry("qwen2.5-7b", 21, 28)]}))
    with pytest.raises(RooflineError, match="fewer than three walked models"):
        launch_s_from_walks([bad])


def test_the_qk_norm_probe_leaves_out_the_norms_and_only_them(tmp_path, monkeypatch):
    """calibrate/runs/qk_norm_probe.py on the CPU: a q/k-norm model (tiny-qwen2's widths as Qwen3)
    is timed with and without its q/k norms; the variant without them runs two RMSNorms a layer
    fewer (q's and k's) and the same otherwise; a model without q/k norms is skipped."""
    import calibrate.graph_engine as ge

    qk = run_script("qk_norm_probe")
    config = json.loads((ROOT / "roofline" / "catalog" / "tiny-qwen2" / "config.json").read_text())
    config.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"],
                  head_dim=config["hidden_size"] // config["num_attention_heads"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "q.json"
    monkeypatch.setenv("PROBE_DEVICE", "cpu")
    monkeypatch.setattr(sys, "argv", ["qk_norm_probe.py", str(out), f"{path}:4:160", "tiny-qwen2:4:160"])
    calls = {"n": 0}
    rms = ge._rms

    def counted(*a, **k):
        calls["n"] += 1
        return rms(*a, **k)

    monkeypatch.setattr(ge, "_rms", counted)
    seen = {}
    real = kp.time_buckets

    def spy(session, model, names, graphs, rows, same_math=True):  # one pass of each variant, counted
        for name in names:
            before = calls["n"]
            graphs[name][64]()
            seen[name] = calls["n"] - before
        return real(session, model, names, graphs, rows, same_math)

    monkeypatch.setattr(qk, "time_buckets", spy)
    qk.main()
    entry, bare = json.loads(out.read_text())["models"]
    layers = config["num_hidden_layers"]
    assert seen["qk-norm"] - seen["no-qk-norm"] == 2 * layers
    assert entry["variants"] == ["qk-norm", "no-qk-norm"] and list(entry["buckets"]) == ["64", "128"]
    assert entry["extra_elements_per_token_layer"] == 4 * (4 + 2) * 16  # 4 x (q + kv): 4 and 2 heads of 16
    assert all(by["same_tokens"] is None for by in entry["buckets"].values())
    assert bare == {"model": "tiny-qwen2", "skipped": "no q/k norms"}
