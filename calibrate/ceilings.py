"""Measured ceilings of a card: bandwidth, bf16 matrix throughput, and the balance point.

What is measured (the lesson's lesson 01 method, on buffers far larger than L2):

* copy bandwidth: ``dst.copy_(src)`` of a random bf16 buffer, counting bytes read + written;
* read bandwidth: ``src.sum()`` of the same kind of buffer (reads every byte once, writes a scalar);
* bf16 GEMM throughput: an 8192^3 product of random matrices;
* the model's own shapes: each linear layer of the decode step (fused qkv, o, fused gate_up,
  down, lm_head) as ``F.linear`` of a (M, K) activation with the (N, K) weight, at M = each batch;
  at M = 1 this is a GEMV and its achieved bandwidth (weight bytes / time) is what decode can get.
  Weights are rotated over enough copies to exceed L2 several times, so the cache does not serve
  them, and the calls are captured in a CUDA graph so launch gaps do not count.

Timing: CUDA events, warm-up first, medians of repeats, random data (never zeros: zeros run
faster). On the CPU (tests) sizes are tiny and the clock is ``time.perf_counter``.

The balance point is bf16 GEMM FLOP/s over read bandwidth (FLOP per byte): below it decode is
bound by reading bytes, above it by arithmetic.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from roofline.units import GiB, MiB

GPU_BUFFER_BYTES = 4 * GiB
CPU_BUFFER_BYTES = 32 * MiB
GPU_GEMM_N = 8192
CPU_GEMM_N = 256
#: Rotate weight copies until this many bytes are touched per pass (H200 L2 is 60 MiB).
GPU_ROTATE_BYTES = 512 * MiB
CPU_ROTATE_BYTES = 1 * MiB


def _median_s(fn: Callable[[], object], device, warmup: int, reps: int) -> float:
    """Median seconds of one ``fn()`` call, each call timed alone."""
    from calibrate.timing import Marks, synchronize

    for _ in range(warmup):
        fn()
    synchronize(device)
    marks = Marks(device, 2 * reps)
    for _ in range(reps):
        marks.mark()
        fn()
        marks.mark()
    return float(np.median(marks.pairs()))


def _median_graph_s(fns: list[Callable[[], object]], device, reps: int) -> float:
    """Median seconds per call of a sequence of calls, replayed as one CUDA graph on CUDA.

    On the CPU the sequence runs as a plain loop. Returns time of the whole sequence / len(fns).
    """
    import torch

    def run_all():
        for fn in fns:
            fn()

    if device.type != "cuda":
        return _median_s(run_all, device, warmup=1, reps=reps) / len(fns)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            run_all()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all()
    t = _median_s(graph.replay, device, warmup=2, reps=reps)
    del graph
    return t / len(fns)


def copy_and_read_bandwidth(device, buffer_bytes: int, reps: int = 10) -> dict[str, float]:
    """Copy bandwidth (read + written bytes) and read bandwidth (sum reduction), bytes/s."""
    import torch

    n = int(buffer_bytes // 2)
    src = torch.randn(n, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    copy_s = _median_s(lambda: dst.copy_(src), device, warmup=3, reps=reps)
    del dst
    read_s = _median_s(lambda: src.sum(), device, warmup=3, reps=reps)
    del src
    nbytes = 2 * n
    return {
        "buffer_bytes": nbytes,
        "copy_s": copy_s,
        "copy_bandwidth_bytes_per_s": 2 * nbytes / copy_s,
        "read_s": read_s,
        "read_bandwidth_bytes_per_s": nbytes / read_s,
    }


def square_gemm(device, n: int, reps: int = 20) -> dict[str, float]:
    """bf16 n x n x n matrix product on random data: FLOP/s (2 n^3 per product)."""
    import torch

    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    t = _median_s(lambda: a @ b, device, warmup=5, reps=reps)
    return {"n": n, "gemm_s": t, "gemm_bf16_flop_per_s": 2.0 * n**3 / t}


def linear_shapes(config: dict) -> list[tuple[str, int, int, int]]:
    """(name, N out, K in, count per decode step) of each linear layer, as the graph engine fuses them."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config["intermediate_size"])
    layers = int(config["num_hidden_layers"])
    vocab = int(config["vocab_size"])
    return [
        ("qkv", (heads + 2 * kv_heads) * head_dim, hidden, layers),
        ("o", hidden, heads * head_dim, layers),
        ("gate_up", 2 * inter, hidden, layers),
        ("down", hidden, inter, layers),
        ("lm_head", vocab, hidden, 1),
    ]


def model_linear_ceilings(
    device, config: dict, batches: list[int], rotate_bytes: int, reps: int = 10
) -> dict:
    """Time every linear shape of ``config`` at M = each batch; plus per-batch sums per decode step."""
    import torch
    import torch.nn.functional as F

    shapes = []
    per_batch_s = {int(m): 0.0 for m in batches}
    for name, n_out, k_in, count in linear_shapes(config):
        weight_bytes = 2 * n_out * k_in
        copies = max(1, math.ceil(rotate_bytes / weight_bytes))
        weights = [torch.randn(n_out, k_in, dtype=torch.bfloat16, device=device) for _ in range(copies)]
        points = []
        for m in sorted({int(b) for b in batches}):
            x = torch.randn(m, k_in, dtype=torch.bfloat16, device=device)
            fns = [(lambda w=w: F.linear(x, w)) for w in weights]
            t = _median_graph_s(fns, device, reps=reps)
            moved = 2 * (n_out * k_in + m * k_in + m * n_out)
            points.append({
                "m": m,
                "s": t,
                "flop_per_s": 2.0 * m * n_out * k_in / t,
                "bytes_per_s": moved / t,
                "weight_bytes_per_s": weight_bytes / t,
            })
            per_batch_s[m] += count * t
            del x, fns
        shapes.append({"name": name, "n": n_out, "k": k_in, "count_per_step": count,
                       "weight_bytes": weight_bytes, "copies_rotated": copies, "points": points})
        del weights
    weight_bytes_step = sum(2 * n * k * c for _, n, k, c in linear_shapes(config))
    per_step = [
        {"m": m, "linear_s": s, "weight_bytes_per_s": weight_bytes_step / s}
        for m, s in sorted(per_batch_s.items())
    ]
    return {"shapes": shapes, "linear_weight_bytes_per_step": weight_bytes_step, "decode_linear": per_step}


def measure_ceilings(
    device: str = "cuda",
    model_configs: dict[str, dict] | None = None,
    batches: list[int] | None = None,
    progress: Callable[[str], None] = lambda msg: None,
) -> dict:
    """All ceilings as one JSON-ready dict, base units in unit-suffixed keys."""
    import torch

    from calibrate.timing import environment, nvidia_smi, torch_device, utc_now

    dev = torch_device(device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    result: dict = {"timestamp": utc_now(), "device": str(dev), **environment(dev)}
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        result["sm_count"] = props.multi_processor_count
        result["l2_cache_bytes"] = getattr(props, "L2_cache_size", None)
        result["total_memory_bytes"] = props.total_memory
        result["nvidia_smi_before"] = nvidia_smi(
            "clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,mig.mode.current"
        )
    bw = copy_and_read_bandwidth(dev, GPU_BUFFER_BYTES if cuda else CPU_BUFFER_BYTES)
    progress(
        f"ceilings: copy {bw['copy_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s (read+written), "
        f"read {bw['read_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s on {bw['buffer_bytes'] / GiB:.2f} GiB"
    )
    gemm = square_gemm(dev, GPU_GEMM_N if cuda else CPU_GEMM_N)
    progress(f"ceilings: bf16 GEMM {gemm['n']}^3 {gemm['gemm_bf16_flop_per_s'] / 1e12:,.1f} TFLOP/s")
    result.update(bw)
    result.update(gemm)
    result["balance_point_flop_per_byte"] = gemm["gemm_bf16_flop_per_s"] / bw["read_bandwidth_bytes_per_s"]
    result["balance_point_vs_copy_flop_per_byte"] = (
        gemm["gemm_bf16_flop_per_s"] / bw["copy_bandwidth_bytes_per_s"]
    )
    progress(f"ceilings: balance point {result['balance_point_flop_per_byte']:.1f} FLOP/byte "
             "(bf16 GEMM / read bandwidth)")
    models = {}
    for name, config in (model_configs or {}).items():
        models[name] = model_linear_ceilings(
            dev, config, batches or [1], GPU_ROTATE_BYTES if cuda else CPU_ROTATE_BYTES
        )
        gemv = models[name]["decode_linear"][0]
        progress(f"ceilings: {name} linear layers at M={gemv['m']}: {gemv['linear_s'] * 1e3:.3f} ms/step, "
                 f"{gemv['weight_bytes_per_s'] / 1e9:,.0f} GB/s of weights")
    result["models"] = models
    if cuda:
        result["nvidia_smi_after"] = nvidia_smi(
            "clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,mig.mode.current"
        )
    result["method"] = (
        "CUDA events (perf_counter on CPU), warm-up then median of repeats, random bf16 data; "
        "copy counts bytes read + written; read = sum reduction; model shapes rotate weight copies "
        "past L2 and replay the calls as one CUDA graph"
    )
    return result
