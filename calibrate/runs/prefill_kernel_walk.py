"""Where the loop's prefill graph spends its time, kernel by kernel (device call 110,
calibrate/runs/h200-call107.sh PART=walk).

Full multi-head models' prefill graphs ran 0.90-0.95x their price at 64-256-token buckets while
grouped-query models ran 0.94-1.0x (benchmarks/prefill_ratio_by_bucket.py on the H200 runs; the
kv-repeat probe's clean passes on an H100, calls 107-109); the K/V repeats' fixed time explains
~4 us a layer of a 10-30 us gap. The price is a sum of parts (roofline.pass_costs.LoopCost): a
fixed time a layer, the linears from the card's matmul table, the attention, the elementwise
bytes at one rate. This measures each part inside the pass:

    python3 calibrate/runs/prefill_kernel_walk.py OUT.json MODEL:SLOTS:ROWS ...

For each model and each bucket of BUCKETS (a lone prompt of 7/8 the bucket, random ids):

- ``graph_s``: the prefill graph's replay as a run times it (median of 20 after 5);
- ``kernels``: the same pass run eagerly (``_prefill_graph_body``, the graph's body) under
  torch.profiler, 3 passes after one: each kernel name's launches and device seconds a pass. Their
  sum against ``graph_s`` is the graph's time between and around its kernels;
- ``linears``: the layer's four matmuls (``roofline.pass_costs.loop_layer_gemms``' shapes, as the
  loop's weights hold them) and the LM head at the slots' rows, each timed alone as the card's
  gemm probe times its grid (calibrate.probes._time_calls over copies of W beyond L2) at the exact
  shape: the table's interpolation against the shape itself against the matmul inside the pass.

OUT.json is rewritten after every model. PROBE_DEVICE=cpu is a smoke run (CPU ops, no graphs):
``PROBE_DEVICE=cpu python3 calibrate/runs/prefill_kernel_walk.py /tmp/w.json tiny-qwen2:4:160``.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BUCKETS = (64, 128, 256, 512, 1024)
ROTATE_BYTES = 256 << 20  # the gemm probe's: copies of W past the L2 (hardware_profiles/measurements/*-probe-gemm.json)


def profile_pass(fn, device, reps: int = 3) -> dict:
    """{kernel name: [launches, device seconds] a call of ``fn``} (on the CPU: top-level ops' self time)."""
    from torch.profiler import ProfilerActivity, profile

    from calibrate.timing import synchronize

    cuda = device.type == "cuda"
    fn()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(reps):
            fn()
        synchronize(device)
    out: dict = {}
    for ev in prof.events():
        if (cuda and ev.device_type.name != "CUDA") or (not cuda and ev.cpu_parent is not None):
            continue
        entry = out.setdefault(ev.name[:160], [0.0, 0.0])
        entry[0] += 1.0 / reps
        entry[1] += (ev.device_time if cuda else ev.self_cpu_time_total) * 1e-6 / reps
    return out


def linear_shapes(ex) -> list[tuple[str, int, int]]:
    """(name, N, K) of the layer's four matmuls as the loop's weights hold them (calibrate.graph_engine.
    LayerWeights: wqkv, wo, wgu (gate and up fused, or up alone), wdown) and the LM head's."""
    lw, w = ex.weights.layers[0], ex.weights
    return [("qkv", *lw.wqkv.shape), ("o", *lw.wo.shape), ("up", *lw.wgu.shape), ("down", *lw.wdown.shape),
            ("lm_head", *w.lm_head.shape)]


def time_linear(m: int, n: int, k: int, device, dtype) -> float:
    """F.linear(x (m, k), W (n, k)) alone, as the gemm probe times its grid."""
    import torch
    import torch.nn.functional as F

    from calibrate.probes import _time_calls

    copies = max(1, min(16, math.ceil(ROTATE_BYTES / (n * k * dtype.itemsize))))
    gen = torch.Generator(device=device).manual_seed(0)
    with torch.inference_mode():
        ws = [torch.randn(n, k, device=device, dtype=dtype, generator=gen) for _ in range(copies)]
        x = torch.randn(m, k, device=device, dtype=dtype, generator=gen)
        seconds, _ = _time_calls([lambda w=w: F.linear(x, w) for w in ws], device, 5)
    return seconds


def walk_model(spec: str, device: str) -> dict:
    from calibrate.runs.kv_repeat_probe import open_session

    model, slots, rows, session = open_session(spec, device)
    ex = session.executor
    if ex.device.type != "cuda":  # no graphs on the CPU: each "graph" is its body, called eagerly
        ex.prefill_graph_of = {b: (lambda b=b: ex._prefill_graph_body(b)) for b in ex.prefill_buckets}
    shapes = linear_shapes(ex)
    vocab = int(session.model_config["vocab_size"])
    gen = random.Random(model)
    entry = {"model": model, "slots": slots, "rows": rows, "layers": ex.shapes.layers,
             "linears": {name: [n, k] for name, n, k in shapes}, "buckets": {}}
    import torch

    for bucket in BUCKETS:
        n = bucket * 7 // 8
        if bucket not in ex.prefill_buckets or n >= rows:
            continue
        items = [(0, [gen.randrange(vocab) for _ in range(n)], 0)]
        for _ in range(5):
            ex.prefill(items)
        graph_s = statistics.median(ex.prefill(items)[1] for _ in range(20))
        ex._stage_prefill(items)
        with torch.inference_mode():
            kernels = profile_pass(lambda b=bucket: ex._prefill_graph_body(b), ex.device)
        linears = {}
        if ex.device.type == "cuda":
            for name, nn, kk in shapes:
                linears[name] = time_linear(slots if name == "lm_head" else bucket, nn, kk, ex.device, ex.dtype)
        entry["buckets"][str(bucket)] = {"prompt": n, "graph_s": graph_s, "kernels": kernels,
                                        "linears_alone_s": linears}
        total = sum(s for _, s in kernels.values())
        print(f"{model} bucket {bucket}: graph {graph_s * 1e3:.3f} ms, kernels {total * 1e3:.3f} ms "
              f"({sum(c for c, _ in kernels.values()):.0f} launches), between {(graph_s - total) * 1e6:+.0f} us",
              flush=True)
    session.executor = None
    return entry


def main() -> None:
    from calibrate.runs.kv_repeat_probe import run_models

    run_models(walk_model, sys.argv[1:])


if __name__ == "__main__":
    main()
