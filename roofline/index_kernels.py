"""PyTorch's small-index kernels: what an MoE pass of at most 16 routed rows pays for its row gathers.

The graph engine's MoE layer (calibrate.graph_engine.moe_forward) moves a pass's T x k routed rows
with ``index_select`` and ``index_add_``, one kernel each (``moe_index_ops``): the expert ids sorted
(1-D int64), the tokens' hidden states into expert order, with expert biases (gpt-oss) the bias rows
of each routed row's expert out of the gate-up and down bias tables, the routing weights (1-D) and
the combine back into the tokens. PyTorch runs each on one of two kernels by the number of indices
(aten/src/ATen/native/cuda/Indexing.cu): up to SMALL_INDEX_MAX_ROWS a *small-index* kernel, whose
every thread walks all the indices one after another, a dependent load each; above it kernels that
spread the rows over the threads. On the H200 the small-index kernels run 1.6-2.1 us at one row and
0.2-0.5 us more a row, whatever the width (the index probe: one block of threads covers a row of up
to 135k elements), where the large-index ones take 1.3-3.3 us at 17 rows and barely more at 64. A
token's k routed rows gather its one hidden row k times (cache hits after the first), so the probe
measures each op with the engine's index patterns at k = 1, 2, 4, 8 routed rows a token.

The step model's fitted terms price the large-index kernels (a fixed time a MoE layer, and the
gather and combine's bytes per routed row), since every pass they were fitted on but a few routed
more than 16 rows. A pass of r <= 16 routed rows (T tokens x k) pays, each MoE layer,

    excess(r) = sum over the layer's index ops of  small(op, width, r) - large(op, width)

with small the probe's time at r rows and large its time at the fewest rows above 16, both read at
the op's row width and the model's k (linear in log width and in log k between the probed ones, the
ends held; linear in r between integers). ``Calibration.index_kernel_table`` holds the probe's times (``read_index_probe``).
"""

from __future__ import annotations

import math
from pathlib import Path

from roofline.errors import RooflineError

#: PyTorch's switch: index_select and index_add_ with at most this many indices run the small-index kernels
SMALL_INDEX_MAX_ROWS = 16
#: the probe's ops (calibrate.index_probe.OPS) and whether each reads rows of a width (else one element)
OPS = {"select-1d-long": False, "gather": True, "gather-weights": True, "select-1d": False, "index-add": True}


def moe_index_ops(spec, tp: int = 1) -> list[tuple[str, float]]:
    """The (op, row width) of each index kernel one MoE layer of ``spec`` runs on the graph engine
    (calibrate.graph_engine.moe_forward, in its order); with tensor parallelism a GPU's share of the
    gate-up bias. Empty for a dense model."""
    if not spec.moe_layers:
        return []
    hidden = float(spec.hidden_size)
    ops = [("select-1d-long", 1.0), ("gather", hidden)]
    if spec.expert_bias:
        ops += [("gather-weights", 2.0 * spec.moe_intermediate_size / tp), ("gather-weights", hidden)]
    return ops + [("select-1d", 1.0), ("index-add", hidden)]


def read_index_probe(paths) -> dict:
    """``Calibration.index_kernel_table`` from index probe files (pooled; a later file's point replaces
    an earlier one's): {"rows": [1, ..., SMALL_INDEX_MAX_ROWS], "ops": {op: {"repeats": ascending,
    "widths": ascending, "small_s": [repeat][width][rows], "large_s": [repeat][width]}}}, large_s at the
    fewest probed rows above the switch. Points without a ``repeat`` (device call 76's grid, before the
    engine's index patterns) are not read."""
    from roofline.atomic import read_json

    cells: dict = {}
    for path in ([paths] if isinstance(paths, (str, Path)) else list(paths)):
        data = read_json(path, "index probe")
        if data.get("probe") != "index":
            raise RooflineError(f"{path} is not an index probe file (probe: {data.get('probe')!r})")
        for p in data.get("points", []):
            if p.get("error") or not p.get("s") or p.get("op") not in OPS or "repeat" not in p:
                continue
            cells[(p["op"], int(p["repeat"]), int(p["width"]), int(p["rows"]))] = float(p["s"])
    rows = list(range(1, SMALL_INDEX_MAX_ROWS + 1))
    probed: dict = {}  # (op, repeat, width) -> the rows probed there
    for op, k, w, r in cells:
        probed.setdefault((op, k, w), set()).add(r)
    # the large-index time: at the fewest rows probed above the switch (None: none probed above it)
    above = {key: min((r for r in got if r > SMALL_INDEX_MAX_ROWS), default=None) for key, got in probed.items()}

    def complete(op, k, w):
        return above.get((op, k, w)) is not None and probed[(op, k, w)].issuperset(rows)

    ops = {}
    for op in OPS:
        # the repeats and widths measured in full at each other (a grid cut short by its budget keeps fewer)
        repeats = sorted({k for o, k, _ in probed if o == op})
        widths = sorted({w for o, _, w in probed if o == op})
        widths = [w for w in widths if all(complete(op, k, w) for k in repeats)]
        repeats = [k for k in repeats if widths and all(complete(op, k, w) for w in widths)]
        if not repeats:
            continue
        ops[op] = {"repeats": [float(k) for k in repeats], "widths": [float(w) for w in widths],
                   "small_s": [[[cells[(op, k, w, r)] for r in rows] for w in widths] for k in repeats],
                   "large_s": [[cells[(op, k, w, above[(op, k, w)])] for w in widths] for k in repeats]}
    missing = [op for op in OPS if op not in ops]
    if missing:
        raise RooflineError(f"the index probe files lack {', '.join(missing)} at every row count 1-"
                            f"{SMALL_INDEX_MAX_ROWS} and one above (each op needs them at one width and repeat at least)")
    return {"rows": [float(r) for r in rows], "ops": ops}


def check_table(t: dict) -> None:
    """Raise ValueError unless ``t`` is an index_kernel_table (read_index_probe's shape)."""
    rows = t.get("rows")
    if rows != [float(r) for r in range(1, SMALL_INDEX_MAX_ROWS + 1)]:
        raise ValueError(f"index_kernel_table: rows must be 1-{SMALL_INDEX_MAX_ROWS}")
    ops = t.get("ops") or {}
    if set(ops) != set(OPS):
        raise ValueError(f"index_kernel_table: ops must be {', '.join(OPS)}")
    for op, e in ops.items():
        k, w = e.get("repeats") or [], e.get("widths") or []
        small, large = e.get("small_s") or [], e.get("large_s") or []
        seconds = [x for a in large for x in a] + [x for a in small for b in a for x in b]
        if (not k or not w or any(a != sorted(a) or len(set(a)) != len(a) or any(not (x > 0) for x in a) for a in (k, w))
                or len(small) != len(k) or len(large) != len(k) or any(len(a) != len(w) for a in small + large)
                or any(len(b) != len(rows) for a in small for b in a)
                or not all(math.isfinite(x) and 0 < x < 1.0 for x in seconds)):
            raise ValueError(f"index_kernel_table: {op}: ascending distinct repeats and widths > 0, small_s of "
                             f"{SMALL_INDEX_MAX_ROWS} seconds a repeat and width (each in (0, 1 s)), one large_s each")


def _interp_log(nodes, values, x: float):
    """``values`` (one per node, numbers or lists) at ``x``: linear in log x between the nodes, the ends held."""
    if x <= nodes[0]:
        return values[0]
    if x >= nodes[-1]:
        return values[-1]
    j = next(i for i in range(1, len(nodes)) if nodes[i] >= x)
    f = (math.log(x) - math.log(nodes[j - 1])) / (math.log(nodes[j]) - math.log(nodes[j - 1]))
    a, b = values[j - 1], values[j]
    if isinstance(a, list):
        return [_lerp(x_, y_, f) for x_, y_ in zip(a, b)]
    return a + f * (b - a)


def _lerp(a, b, f):
    return [_lerp(x, y, f) for x, y in zip(a, b)] if isinstance(a, list) else a + f * (b - a)


def layer_excess_s(table: dict, ops, repeat: float) -> list[float]:
    """Seconds a MoE layer running ``ops`` (moe_index_ops) with ``repeat`` routed rows a token (top-k)
    pays over the large-index kernels at 0, 1, ..., SMALL_INDEX_MAX_ROWS routed rows (0 at 0 rows)."""
    out = [0.0] * (SMALL_INDEX_MAX_ROWS + 1)
    for op, width in ops:
        e = table["ops"][op]
        small = _interp_log(e["widths"], _interp_log(e["repeats"], e["small_s"], repeat), width)
        large = _interp_log(e["widths"], _interp_log(e["repeats"], e["large_s"], repeat), width)
        for r in range(1, SMALL_INDEX_MAX_ROWS + 1):
            out[r] += small[r - 1] - large
    return out


def excess_at(excess: tuple, rows):
    """``excess`` (seconds at 0..SMALL_INDEX_MAX_ROWS rows) at ``rows`` routed rows: linear between
    integers, 0 above the switch. A float in, a float out; else numpy arrays."""
    if type(rows) is float:
        if rows <= 0.0 or rows > SMALL_INDEX_MAX_ROWS:
            return 0.0
        i = min(int(rows), SMALL_INDEX_MAX_ROWS - 1)
        return excess[i] + (rows - i) * (excess[i + 1] - excess[i])
    import numpy as np

    r = np.asarray(rows, dtype=float)
    out = np.interp(r, np.arange(SMALL_INDEX_MAX_ROWS + 1, dtype=float), np.asarray(excess, dtype=float))
    return np.where((r > 0) & (r <= SMALL_INDEX_MAX_ROWS), out, 0.0)
