"""Measured ceilings of a card: bandwidth, bf16 matrix throughput, and the balance point.

What is measured (the lesson's lesson 01 method, on buffers far larger than L2):

* copy bandwidth: ``dst.copy_(src)`` of a random bf16 buffer, counting bytes read + written;
* read bandwidth: ``src.sum()`` of the same kind of buffer (reads every byte once, writes a scalar);
* bf16 and fp32 GEMM throughput: an n^3 product of random matrices (n = 8192 on a GPU);
* the model's own shapes: each linear layer of the decode step (fused qkv, o, fused gate_up,
  down, lm_head) as ``F.linear`` of a (M, K) activation with the (N, K) weight, at M = each batch;
  at M = 1 this is a GEMV and its achieved bandwidth (weight bytes / time) is what decode can get.
  Weights are rotated over enough copies to exceed L2 several times, so the cache does not serve
  them, and the calls are captured in a CUDA graph so launch gaps do not count.

Timing: CUDA events, warm-up first, medians of repeats, random data (never zeros: zeros run
faster). On the CPU the clock is ``time.perf_counter`` and the sizes are a CPU's (``CPU_SIZES``:
a 1 GiB buffer, far larger than any last-level cache; 1024^3 products; weights rotated past
256 MiB); the thread count torch uses is recorded, since every CPU number depends on it. Runs of
the tiny test models only (CI) use ``TINY_SIZES``, whose numbers mean nothing.

The balance point is bf16 GEMM FLOP/s over read bandwidth (FLOP per byte): below it decode is
bound by reading bytes, above it by arithmetic.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable

from calibrate.timing import median_s
from roofline.units import GiB, MiB


@dataclass(frozen=True)
class CeilingSizes:
    """How big the ceilings' buffers and products are, and how often each is repeated."""

    buffer_bytes: int  # copy / read buffer (each of src and dst)
    gemm_n: int  # square product n x n x n
    rotate_bytes: int  # weight copies rotated per pass, to defeat the caches
    reps: int  # timed repeats of the bandwidth and linear-shape measurements
    gemm_reps: int


#: H200 L2 is 60 MiB: 4 GiB buffers, 512 MiB of rotated weights.
GPU_SIZES = CeilingSizes(buffer_bytes=4 * GiB, gemm_n=8192, rotate_bytes=512 * MiB, reps=10, gemm_reps=20)
#: A server CPU's last-level cache is tens to hundreds of MiB: 1 GiB buffers, 256 MiB rotated.
CPU_SIZES = CeilingSizes(buffer_bytes=1 * GiB, gemm_n=1024, rotate_bytes=256 * MiB, reps=5, gemm_reps=5)
#: CI with the tiny test models: fast, meaningless numbers.
TINY_SIZES = CeilingSizes(buffer_bytes=32 * MiB, gemm_n=256, rotate_bytes=1 * MiB, reps=10, gemm_reps=20)

# Names kept from v0.1.
GPU_BUFFER_BYTES, GPU_GEMM_N, GPU_ROTATE_BYTES = GPU_SIZES.buffer_bytes, GPU_SIZES.gemm_n, GPU_SIZES.rotate_bytes
CPU_BUFFER_BYTES, CPU_GEMM_N, CPU_ROTATE_BYTES = TINY_SIZES.buffer_bytes, TINY_SIZES.gemm_n, TINY_SIZES.rotate_bytes


def default_sizes(device_type: str, tiny_models_only: bool = False) -> CeilingSizes:
    """GPU_SIZES on a GPU; on the CPU, CPU_SIZES (TINY_SIZES when every model is a tiny test model)."""
    if device_type == "cuda":
        return GPU_SIZES
    return TINY_SIZES if tiny_models_only else CPU_SIZES


def _median_graph_s(fns: list[Callable[[], object]], device, reps: int) -> float:
    """Median seconds per call of a sequence of calls, replayed as one CUDA graph on CUDA.

    On the CPU the sequence runs as a plain loop. Returns time of the whole sequence / len(fns).
    """
    import torch

    def run_all():
        for fn in fns:
            fn()

    if device.type != "cuda":
        return median_s(run_all, device, warmup=1, reps=reps) / len(fns)
    from calibrate.timing import side_stream

    side = side_stream(device)  # one per device: see calibrate.timing.side_stream
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            run_all()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all()
    t = median_s(graph.replay, device, warmup=2, reps=reps)
    del graph
    return t / len(fns)


def copy_and_read_bandwidth(device, buffer_bytes: int, reps: int = 10) -> dict[str, float]:
    """Copy bandwidth (read + written bytes) and read bandwidth (sum reduction), bytes/s."""
    import torch

    n = int(buffer_bytes // 2)
    src = _random_bf16(n, device)
    dst = torch.empty_like(src)
    copy_s = median_s(lambda: dst.copy_(src), device, warmup=3, reps=reps)
    del dst
    read_s = median_s(lambda: src.sum(), device, warmup=3, reps=reps)
    nbytes = 2 * n
    result = {
        "buffer_bytes": nbytes,
        "copy_s": copy_s,
        "copy_bandwidth_bytes_per_s": 2 * nbytes / copy_s,
        "read_s": read_s,
        "read_bandwidth_bytes_per_s": nbytes / read_s,
    }
    if device.type == "cpu":
        # A CPU may sum bf16 slower than it can read it (a conversion per element): fp32 too.
        as_fp32 = src[: n - n % 2].view(torch.float32)  # the same bytes read as fp32 (finite values)
        read32_s = median_s(lambda: as_fp32.sum(), device, warmup=2, reps=reps)
        result["read_fp32_s"] = read32_s
        result["read_fp32_bandwidth_bytes_per_s"] = 4 * as_fp32.numel() / read32_s
    del src
    return result


def _random_bf16(n: int, device):
    """n random bf16 values. On the CPU a 1 MiB random block is tiled (drawing 2^29 normals on
    one or two cores takes seconds; a CPU does not compress data, so repetition costs nothing)."""
    import torch

    if device.type == "cuda":
        return torch.randn(n, dtype=torch.bfloat16, device=device)
    block = torch.randn(min(n, MiB // 2), dtype=torch.bfloat16, device=device)
    return block.repeat(math.ceil(n / block.numel()))[:n].contiguous()


def square_gemm(device, n: int, reps: int = 20) -> dict[str, float]:
    """bf16 and fp32 n x n x n matrix products on random data: FLOP/s (2 n^3 per product).

    fp32 is true fp32 unless the user allowed TF32 (torch's default on a GPU: not allowed).
    """
    import torch

    out: dict[str, float] = {"n": n}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        a = torch.randn(n, n, dtype=dtype, device=device)
        b = torch.randn(n, n, dtype=dtype, device=device)
        t = median_s(lambda: a @ b, device, warmup=3, reps=reps)
        key = "gemm_s" if name == "bf16" else f"gemm_{name}_s"
        out[key] = t
        out[f"gemm_{name}_flop_per_s"] = 2.0 * n**3 / t
        del a, b
    return out


def linear_shapes(config: dict) -> list[tuple[str, int, int, int]]:
    """(name, N out, K in, count per decode step) of each linear layer, as the graph engine fuses them."""
    from roofline.config_families import read_family

    f = read_family(config, str(config.get("model_type") or "config"))  # every family's own keys
    hidden, heads, head_dim = f["hidden_size"], f["num_attention_heads"], f["head_dim"]
    kv_heads = f.get("num_key_value_heads") or heads
    inter, layers, vocab = f["intermediate_size"], f["num_hidden_layers"], f["vocab_size"]
    gated = f.get("mlp_gated", True)
    return [
        ("qkv", (heads + 2 * kv_heads) * head_dim, hidden, layers),
        ("o", hidden, heads * head_dim, layers),
        ("gate_up" if gated else "up", (2 if gated else 1) * inter, hidden, layers),
        ("down", hidden, inter, layers),
        ("lm_head", vocab, hidden, 1),
    ]


def model_linear_ceilings(
    device, config: dict, batches: list[int], rotate_bytes: int, reps: int = 10
) -> dict:
    """Time every linear shape of ``config`` at M = each batch; plus per-batch sums per decode step.
    On a CPU, the step's linear layers as the model runs them instead (``_cpu_decode_linear``)."""
    import torch
    import torch.nn.functional as F

    if device.type != "cuda":
        return _cpu_decode_linear(device, config, batches, reps)

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


def _cpu_decode_linear(device, config: dict, batches: list[int], reps: int) -> dict:
    """A decode step's linear layers on a CPU, timed as the model runs them: each layer's own weights
    (the model's whole footprint, so nothing stays in cache that would not), in layer order, then the
    LM head; median of ``reps`` steps at M = each batch. Rotating copies of one shape at a time (the
    GPU's method) read 25-40% slower than the model's own step on a 2-core EPYC VM (46-52 ms against
    the whole decode step's 48 ms for qwen2.5-0.5b) and varied from run to run; this reads 35-38 ms,
    stable (docs/cpu.md)."""
    import torch
    import torch.nn.functional as F

    shapes = linear_shapes(config)
    per_layer = [(n, k) for name, n, k, count in shapes if name != "lm_head"]
    layers = int(config["num_hidden_layers"])
    head = next((n, k) for name, n, k, _ in shapes if name == "lm_head")
    weights = [[_random_bf16(n * k, device).view(n, k) for n, k in per_layer] for _ in range(layers)]
    head_w = _random_bf16(head[0] * head[1], device).view(*head)
    per_step = []
    for m in sorted({int(b) for b in batches}):
        xs = [torch.randn(m, k, dtype=torch.bfloat16, device=device) for _, k in per_layer]
        xh = torch.randn(m, head[1], dtype=torch.bfloat16, device=device)

        def step():
            for ws in weights:
                for x, w in zip(xs, ws):
                    F.linear(x, w)
            F.linear(xh, head_w)

        t = median_s(step, device, warmup=1, reps=reps)
        per_step.append({"m": m, "linear_s": t})
        del xs, xh
    weight_bytes_step = sum(2 * n * k * c for _, n, k, c in shapes)
    for point in per_step:
        point["weight_bytes_per_s"] = weight_bytes_step / point["linear_s"]
    del weights, head_w
    return {"shapes": [{"name": name, "n": n, "k": k, "count_per_step": c} for name, n, k, c in shapes],
            "method": "the model's own linear weights, each layer's, in layer order (CPU)",
            "linear_weight_bytes_per_step": weight_bytes_step, "decode_linear": per_step}


def measure_ceilings(
    device: str = "cuda",
    model_configs: dict[str, dict] | None = None,
    batches: list[int] | None = None,
    progress: Callable[[str], None] = lambda msg: None,
    sizes: CeilingSizes | None = None,
) -> dict:
    """All ceilings as one JSON-ready dict, base units in unit-suffixed keys.

    ``sizes`` defaults to ``default_sizes(device type)``.
    """
    import torch

    from calibrate.timing import cpu_model_name, environment, mem_available_bytes, nvidia_smi, torch_device, utc_now

    dev = torch_device(device)
    cuda = dev.type == "cuda"
    sizes = sizes or default_sizes(dev.type)
    torch.manual_seed(0)
    result: dict = {"timestamp": utc_now(), "device": str(dev), **environment(dev)}
    result["sizes"] = {k: getattr(sizes, k) for k in sizes.__dataclass_fields__}
    if not cuda:
        result["threads"] = torch.get_num_threads()
        result["cpu_count"] = os.cpu_count()
        result["cpu_model"] = cpu_model_name()
        result["cpu_capability"] = _cpu_capability()
        result["mem_available_bytes"] = mem_available_bytes()
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        result["sm_count"] = props.multi_processor_count
        result["l2_cache_bytes"] = getattr(props, "L2_cache_size", None)
        result["total_memory_bytes"] = props.total_memory
        result["nvidia_smi_before"] = nvidia_smi(
            "clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,mig.mode.current"
        )
    bw = copy_and_read_bandwidth(dev, sizes.buffer_bytes, reps=sizes.reps)
    threads = "" if cuda else f" ({result['threads']} threads)"
    progress(
        f"ceilings: copy {bw['copy_bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s (read+written), "
        f"read {bw['read_bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s on {bw['buffer_bytes'] / GiB:.2f} GiB{threads}"
    )
    gemm = square_gemm(dev, sizes.gemm_n, reps=sizes.gemm_reps)
    progress(f"ceilings: GEMM {gemm['n']}^3 bf16 {gemm['gemm_bf16_flop_per_s'] / 1e12:,.2f} TFLOP/s, "
             f"fp32 {gemm['gemm_fp32_flop_per_s'] / 1e12:,.2f} TFLOP/s")
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
        models[name] = model_linear_ceilings(dev, config, batches or [1], sizes.rotate_bytes, reps=sizes.reps)
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
        "past L2 (the last-level cache on a CPU) and replay the calls as one CUDA graph (a plain "
        "loop on a CPU)"
    )
    return result


def _cpu_capability() -> str:
    """The CPU instruction set torch dispatches to (e.g. AVX2, AVX512), or '' where unknown."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return ""
