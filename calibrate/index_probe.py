"""The ``index`` probe: PyTorch's row gathers and scatters alone, as the graph engine's MoE layer runs them.

    python3 -m calibrate.probes --out DIR --what index [--budget-s 120]      -> DIR/probe-index.json

``calibrate.graph_engine.moe_forward`` moves a pass's routed rows with ``index_select`` and
``index_add_``: the expert ids sorted (a 1-D int64 gather), the tokens' hidden states gathered into
expert order, with expert biases (gpt-oss) the bias rows of each routed row's expert gathered from
the weight tables, the routing weights gathered (1-D, the activation's dtype) and the rows added
back into their tokens. PyTorch runs each on one of two kernels by the number of indices
(aten/src/ATen/native/cuda/Indexing.cu): with at most 16, a *small-index* kernel whose every
thread walks all the indices one after another, each step waiting on a load, so its time grows
with the rows whatever their width; with more, kernels that spread the rows over threads, whose
time barely moves at a decode step's sizes. The kernels probe found the small-index kernels in
gpt-oss-20b's and qwen3-30b-a3b's decode steps at batches 1-4 (device call 75, docs/method.md
section 4); this probe measures them at generic widths and rows, with no model.

Each point is one op of ``IndexGrid.ops`` at ``rows`` indices, a row ``width`` (1 for the 1-D
ops) and ``repeat`` routed rows a token (the engine's top-k: its T tokens' T x k rows), with the
engine's index patterns: each token picks ``repeat`` distinct experts of ``table_rows`` at random,
``order`` sorts the rows by expert (stable), the 1-D ops gather a just-written vector of the rows
by ``order``, the tokens' rows are gathered (and added back) by ``order // repeat`` (each token's row
``repeat`` times: cache hits after the first), the bias rows by the sorted expert ids; the first
``rows`` of them when ``rows`` is not a multiple of ``repeat``. Each is profiled with torch.profiler
over ``reps`` calls of: write a buffer larger than the L2 (``flush_bytes``: what the decode step's
other layers do to it), write the op's warm inputs (a decode step's activations and indices were
just written by the kernel before), run the op. The point's seconds are its own kernels' device time
per call: the kernels whose names the same sequence without the op does not run. Ops:

``gather``          ``h.index_select(0, row_token)``: bf16 rows of an activation just written (in L2)
``gather-weights``  ``table.index_select(0, row_expert)``: bf16 rows of a weight table left cold (an
                    expert bias: read from memory after the other layers' weights)
``select-1d``       ``w.index_select(0, order)``: a 1-D bf16 vector just written (the routing weights)
``select-1d-long``  the same of int64 (the expert ids)
``index-add``       ``y.index_add_(0, row_token, src)``: bf16 rows added into a zeroed activation (the combine)

Device call 76 ran an earlier grid, before the patterns and ``repeat``: every index drawn at random
over 128 source rows (its points carry no ``repeat``).

On the CPU (CI) the same code runs tiny sizes and the profiler's CPU op times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from roofline.units import MiB

#: the ops the probe times, in moe_forward's order of use
OPS = ("select-1d-long", "gather", "gather-weights", "select-1d", "index-add")
#: ops whose row is one element (their width is 1)
ONE_D = ("select-1d-long", "select-1d")


@dataclass(frozen=True)
class IndexGrid:
    ops: tuple[str, ...]
    widths: tuple[int, ...]  # row widths of the 2-D ops, most wanted first (a budget keeps the first)
    repeats: tuple[int, ...]  # routed rows a token (the engine's top-k)
    rows: tuple[int, ...]  # indices a call
    table_rows: int  # rows of a weight table (experts)
    flush_bytes: int  # written before each call (0: none)
    reps: int


FULL_INDEX = IndexGrid(ops=OPS, widths=(2048, 4096, 1024, 8192), repeats=(1, 2, 4, 8),
                       rows=tuple(range(1, 21)) + (24, 28, 32, 48, 64), table_rows=32, flush_bytes=256 * MiB, reps=20)
TINY_INDEX = IndexGrid(ops=OPS, widths=(16, 32), repeats=(1, 4), rows=tuple(range(1, 18)), table_rows=4, flush_bytes=1 * MiB,
                       reps=2)


def engine_indices(rows: int, repeat: int, experts: int, gen, device):
    """(order, row_token, row_expert) of calibrate.graph_engine.moe_forward for ``rows`` routed rows,
    ``repeat`` a token (each token's experts distinct, at random), the first ``rows`` of them."""
    import torch

    if not 1 <= repeat <= experts:
        raise ValueError(f"repeat {repeat}: 1 to the table's {experts} experts")
    tokens = -(-rows // repeat)
    flat = torch.stack([torch.randperm(experts, device=device, generator=gen)[:repeat] for _ in range(tokens)]).reshape(-1)
    order = torch.argsort(flat, stable=True)
    return order[:rows].clone(), torch.div(order, repeat, rounding_mode="floor")[:rows].clone(), flat[order][:rows].clone()


def index_probe(device: str, grid: IndexGrid, out_path: Path, deadline: float | None,
                progress: Callable[[str], None]) -> dict:
    """Time ``grid``'s ops (module docstring); writes ``out_path`` after each (op, width, repeat)."""
    import torch

    from calibrate.probes import _finished, _new_result, _out_of_budget, _short, _write
    from calibrate.timing import torch_device

    dev = torch_device(device)
    result = _new_result("index", dev, grid,
                         "torch.profiler over reps calls of (write flush_bytes; write the op's warm inputs; the op): "
                         "the op's own kernels' device time per call (the kernels the sequence without the op does not "
                         "run); CPU: the profiler's CPU op times")
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    flush = torch.empty(max(grid.flush_bytes // 4, 1), dtype=torch.float32, device=dev)

    with torch.inference_mode():
        for op in grid.ops:
            for width in ((1,) if op in ONE_D else grid.widths):
                for repeat in grid.repeats:
                    where = f"{op} width {width} repeat {repeat}"
                    if _out_of_budget(deadline, result, out_path, progress, "index", where):
                        return result
                    for rows in grid.rows:
                        point = {"op": op, "width": width, "repeat": repeat, "rows": rows}
                        try:
                            point.update(_timed(op, width, repeat, rows, grid, flush, gen, dev))
                        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: record it, go on
                            point["error"] = _short(exc)
                        result["points"].append(point)
                    _write(out_path, result)
            progress(f"index: {op} done ({time.monotonic() - t0:.1f} s)")
    return _finished(result, out_path, t0)


def _timed(op: str, width: int, repeat: int, rows: int, grid: IndexGrid, flush, gen, dev) -> dict:
    """One point: {s, kernels, path}."""
    import torch

    from calibrate.probes import _profile_kernels

    bf16 = torch.bfloat16
    order0, token0, expert0 = engine_indices(rows, repeat, grid.table_rows, gen, dev)
    tokens = -(-rows // repeat)
    if op in ONE_D:  # a just-written vector of the routed rows, gathered by order
        src0 = torch.arange(tokens * repeat, device=dev).to(torch.int64 if op == "select-1d-long" else bf16)
        idx0 = order0
    else:
        src0 = torch.randn(rows if op == "index-add" else tokens, width, device=dev, dtype=bf16, generator=gen)
        idx0 = expert0 if op == "gather-weights" else token0
    src, idx = torch.empty_like(src0), torch.empty_like(idx0)
    table = torch.randn(grid.table_rows, width, device=dev, dtype=bf16, generator=gen) if op == "gather-weights" else None
    dst = torch.zeros(tokens, width, device=dev, dtype=bf16) if op == "index-add" else None

    def warm():
        flush.zero_()
        idx.copy_(idx0)
        src.copy_(src0)
        if dst is not None:
            dst.zero_()

    if op == "index-add":
        def call():
            return dst.index_add_(0, idx, src)
    else:  # every other op is an index_select: of the bias table, else of the just-written source
        source = table if op == "gather-weights" else src

        def call():
            return source.index_select(0, idx)
    warm()
    call()  # warm-up: the kernels' first launch
    base = set(_profile_kernels(warm, dev, grid.reps))  # the kernels of the sequence without the op
    both = _profile_kernels(lambda: (warm(), call()), dev, grid.reps)
    own = {k: v for k, v in both.items() if k not in base}
    return {"s": sum(own.values()), "kernels": {k[:120]: v for k, v in own.items()},
            "path": "small" if any("SmallIndex" in k for k in own) else "large" if dev.type == "cuda" else "cpu"}
