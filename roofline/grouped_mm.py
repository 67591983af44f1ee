"""The experts' grouped matmul as measured: a table of torch._grouped_mm's time at generic shapes
(calibrate.probes --what grouped-mm), and a model's experts priced from it.

The grouped-mm probe times one grouped matmul alone, weights beyond the L2, at G experts (groups) of
r routed rows each x an inner width K x an output width N, every one a power of two
(``Calibration.expert_gemm_table`` holds the times, seconds). A mixture-of-experts layer runs two:
the gate-up (K = hidden, N = 2 x expert width) and the down (K = expert width, N = hidden). A pass
of T tokens touches E_touched(T) experts (roofline.step.StepModel.experts_touched) with T·k / E_touched
rows each on average, and is priced at that point of the table:

* in K and N, between the probed widths: log time linear in log K and log N (the rate per byte
  changes smoothly with the shape, docs/method.md section 13); beyond them, time ∝ K·N from the edge;
* in G and r, the same in log G and log r, at the shape's own times; beyond the probed rows or
  experts, time ∝ r or ∝ G (every tile already full: compute that many more rows or experts).

A cell the probe skipped (its weights, rows or FLOPs over the grid's limits) is filled before any of
that: from the last measured rows at that G (∝ r), then from the last measured G (∝ G).

Why a table: the grouped GEMM's rate per touched byte and per tile FLOP depends on the shape in a
way neither the bytes at one bandwidth nor waves of tiles follow (gpt-oss's 2,880-wide experts read
1.9 TB/s at one token, qwen3-30b-a3b's 2.9), as a dense matmul's does; measured at generic shapes it
prices every catalog MoE model without measuring any of them.
"""

from __future__ import annotations

import bisect
import math
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError

#: the table's axes, in the order of its ``seconds`` array: K, N, groups, rows
AXES = ("ks", "ns", "groups", "rows")


def read_grouped_mm(paths) -> dict:
    """``Calibration.expert_gemm_table`` from grouped-mm probe files (pooled; a later file's point
    replaces an earlier one's): {"ks", "ns", "groups", "rows": ascending lists, "seconds": K x N x
    groups x rows nested lists}, cells the probe skipped filled as the module says."""
    from roofline.atomic import read_json

    cells: dict = {}
    for path in ([paths] if isinstance(paths, (str, Path)) else list(paths)):
        data = read_json(path, "grouped-mm probe")
        if data.get("probe") != "grouped-mm":
            raise RooflineError(f"{path} is not a grouped-mm probe file (probe: {data.get('probe')!r})")
        for p in data.get("points", []):
            if p.get("series") or p.get("error") or not p.get("s") or p["groups"] != p.get("groups_total", p["groups"]):
                continue
            cells[(int(p["k"]), int(p["n"]), int(p["groups"]), int(p["rows"]))] = float(p["s"])
    if not cells:
        raise RooflineError("the grouped-mm probe files hold no timed point")
    axes = [sorted({key[i] for key in cells}) for i in range(4)]
    if any(len(a) < 2 for a in axes):
        raise RooflineError("the grouped-mm probe needs two or more of each of K, N, groups and rows")
    seconds = np.full([len(a) for a in axes], np.nan)
    for (k, n, g, r), s in cells.items():
        seconds[axes[0].index(k), axes[1].index(n), axes[2].index(g), axes[3].index(r)] = s
    groups, rows = np.array(axes[2], dtype=float), np.array(axes[3], dtype=float)
    for i in range(len(axes[0])):
        for j in range(len(axes[1])):
            block = seconds[i, j]
            for gi in range(len(groups)):  # along the rows: ∝ r from the last measured
                known = np.flatnonzero(~np.isnan(block[gi]))
                if len(known):
                    last = known[-1]
                    for ri in range(last + 1, len(rows)):
                        block[gi, ri] = block[gi, last] * rows[ri] / rows[last]
            for ri in range(len(rows)):  # along the groups: ∝ G from the last measured
                known = np.flatnonzero(~np.isnan(block[:, ri]))
                if len(known):
                    last = known[-1]
                    for gi in range(last + 1, len(groups)):
                        block[gi, ri] = block[last, ri] * groups[gi] / groups[last]
            if np.isnan(block).any():
                raise RooflineError(f"the grouped-mm probe has no point at K {axes[0][i]} N {axes[1][j]} to fill "
                                    "the table's cells from (every shape needs one expert of one row at least)")
    return {"ks": [float(x) for x in axes[0]], "ns": [float(x) for x in axes[1]],
            "groups": [float(x) for x in axes[2]], "rows": [float(x) for x in axes[3]],
            "seconds": [[[[float(f"{v:.4g}") for v in row] for row in block] for block in plane] for plane in seconds]}


def check_table(table: dict) -> None:
    """Raise ValueError unless ``table`` is a well-formed expert_gemm_table."""
    try:
        axes = [np.asarray(table[a], dtype=float) for a in AXES]
        seconds = np.asarray(table["seconds"], dtype=float)
    except (KeyError, TypeError, ValueError):
        raise ValueError("expert_gemm_table is {ks, ns, groups, rows, seconds}") from None
    if any(a.ndim != 1 or len(a) < 2 or np.any(a <= 0) or np.any(np.diff(a) <= 0) for a in axes):
        raise ValueError("expert_gemm_table: ks, ns, groups and rows ascending, positive, two or more each")
    if seconds.shape != tuple(len(a) for a in axes) or not np.all(np.isfinite(seconds)) or np.any(seconds <= 0):
        raise ValueError("expert_gemm_table: seconds is K x N x groups x rows, positive")


def _bracket(grid_log: np.ndarray, x_log: float) -> tuple[int, float]:
    """(lower index, fraction) of ``x_log`` between two nodes of ``grid_log``; outside, the edge pair,
    the fraction past 0 or 1 (linear extrapolation)."""
    i = int(np.clip(np.searchsorted(grid_log, x_log) - 1, 0, len(grid_log) - 2))
    return i, (x_log - grid_log[i]) / (grid_log[i + 1] - grid_log[i])


def shape_log_seconds(table: dict, k: float, n: float) -> np.ndarray:
    """log seconds of one grouped matmul of inner width ``k`` and output width ``n`` at the table's
    (groups x rows) nodes: bilinear in log K and log N between the probed widths; beyond them, the
    edge's times scaled ∝ K·N."""
    logs = np.log(np.asarray(table["seconds"], dtype=float))
    lk, ln = np.log(np.asarray(table["ks"], dtype=float)), np.log(np.asarray(table["ns"], dtype=float))
    out = 0.0
    xk, xn = math.log(k), math.log(n)
    ck, cn = min(max(xk, lk[0]), lk[-1]), min(max(xn, ln[0]), ln[-1])
    ik, fk = _bracket(lk, ck)
    i_n, fn = _bracket(ln, cn)
    for a, wa in ((ik, 1.0 - fk), (ik + 1, fk)):
        for b, wb in ((i_n, 1.0 - fn), (i_n + 1, fn)):
            if wa * wb:
                out = out + wa * wb * logs[a, b]
    return out + (xk - ck) + (xn - cn)  # beyond the probed widths: ∝ K·N from the edge


def layer_nodes(table: dict, hidden: float, inter: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log groups, log rows, log seconds at those nodes) of one MoE layer's two grouped matmuls, its
    gate-up (K = ``hidden``, N = 2 x ``inter``) and its down (K = ``inter``, N = ``hidden``), added."""
    seconds = np.exp(shape_log_seconds(table, hidden, 2.0 * inter)) + np.exp(shape_log_seconds(table, inter, hidden))
    return (np.log(np.asarray(table["groups"], dtype=float)), np.log(np.asarray(table["rows"], dtype=float)),
            np.log(seconds))


def nodes_seconds(nodes, touched, rows):
    """Seconds of a layer's grouped matmuls (``layer_nodes``) at ``touched`` experts of ``rows`` rows
    each (floats or arrays, at least 1): bilinear in log groups and log rows; past the last node, ∝
    the count; before the first (fewer than one), the first node's."""
    lg, lr, ls = nodes
    if type(touched) is float and type(rows) is float:  # the simulators' hot loop: no numpy per call
        return _node_seconds(nodes, touched, rows)
    xg = np.log(np.maximum(np.asarray(touched, dtype=float), 1.0))
    xr = np.log(np.maximum(np.asarray(rows, dtype=float), 1.0))
    ig = np.clip(np.searchsorted(lg, xg) - 1, 0, len(lg) - 2)
    ir = np.clip(np.searchsorted(lr, xr) - 1, 0, len(lr) - 2)
    cg, cr = np.minimum(xg, lg[-1]), np.minimum(xr, lr[-1])
    fg = (cg - lg[ig]) / (lg[ig + 1] - lg[ig])
    fr = (cr - lr[ir]) / (lr[ir + 1] - lr[ir])
    out = ((1 - fg) * (1 - fr) * ls[ig, ir] + fg * (1 - fr) * ls[ig + 1, ir]
           + (1 - fg) * fr * ls[ig, ir + 1] + fg * fr * ls[ig + 1, ir + 1])
    out = np.exp(out + (xg - cg) + (xr - cr))
    return float(out) if out.ndim == 0 else out


def _node_seconds(nodes, touched: float, rows: float) -> float:
    """``nodes_seconds`` for one float pair, in plain Python (the same arithmetic)."""
    lg, lr, ls = nodes
    xg, xr = math.log(max(touched, 1.0)), math.log(max(rows, 1.0))
    ig = min(max(bisect.bisect_left(lg, xg) - 1, 0), len(lg) - 2)
    ir = min(max(bisect.bisect_left(lr, xr) - 1, 0), len(lr) - 2)
    cg, cr = min(xg, lg[-1]), min(xr, lr[-1])
    fg = (cg - lg[ig]) / (lg[ig + 1] - lg[ig])
    fr = (cr - lr[ir]) / (lr[ir + 1] - lr[ir])
    v = ((1 - fg) * (1 - fr) * ls[ig][ir] + fg * (1 - fr) * ls[ig + 1][ir]
         + (1 - fg) * fr * ls[ig][ir + 1] + fg * fr * ls[ig + 1][ir + 1])
    return math.exp(v + (xg - cg) + (xr - cr))
