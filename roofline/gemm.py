"""A card's measured matmul times: ``F.linear(x (M, K), W (N, K))`` looked up by shape.

The table is the ``gemm`` probe of calibrate.probes (``probe-gemm.json``: every (M, N, K) of a
grid timed alone in a CUDA graph over copies of W beyond L2). Why a table and not a peak times
an efficiency: a matmul of a few hundred to a few thousand rows runs far below the rate of a
large one, by how much depending on N and K (how many output tiles there are to spread over the
SMs, how long each tile's reduction is). On the H200 a (1,024 x 1,536 x 1,536) matmul ran at
525 TFLOP/s, a (65,536 x 2,048 x 1,536) one at 645, a (64 x 1,536 x 1,536) one at 54
(``hardware_profiles/measurements/h200-probe-gemm.json``). A prefill at those sizes is what the
serving loop runs (roofline.pass_costs.LoopCost).

``GemmTable.seconds(m, n, k)`` interpolates log time linearly in log M, log N and log K between
the grid's points. Outside the grid: beyond the largest M measured for an (N, K) (the probe
stops where the rate has flattened) the time grows in proportion to M; beyond the largest N or
K in proportion to N or K (more tiles, or a longer reduction, at the same rate); below the
smallest the smallest's time (a kernel that small is all fixed cost).

Each point was timed once; re-timings committed beside a table (``<table>-recheck-*.json``,
calibrate/runs/gemm_recheck.py) correct the points they re-timed (``rechecked_points``).
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache
from math import exp, log
from pathlib import Path

from roofline.errors import RooflineError


class GemmTable:
    """Measured F.linear times on one card (module docstring)."""

    def __init__(self, points: list[dict], source: str):
        if not points:
            raise RooflineError(f"{source}: the matmul table has no points", "gemm_table")
        self.source = source
        self._t = {}
        for p in points:
            m, n, k, s = int(p["m"]), int(p["n"]), int(p["k"]), float(p["seconds"])
            if min(m, n, k) < 1 or not s > 0:
                raise RooflineError(f"{source}: a point needs m, n, k >= 1 and seconds > 0 (got {p})", "gemm_table")
            self._t[(m, n, k)] = s
        self.ns = sorted({n for _, n, _ in self._t})
        self.ks = sorted({k for _, _, k in self._t})
        by_nk: dict = {}
        for m, n, k in self._t:
            by_nk.setdefault((n, k), []).append(m)
        missing = [(n, k) for n in self.ns for k in self.ks if (n, k) not in by_nk]
        if missing:
            raise RooflineError(f"{source}: the table is not a full N x K grid (no point at N, K = {missing[0]})",
                                "gemm_table")
        self._ms = {nk: sorted(ms) for nk, ms in by_nk.items()}

    def _at_nk(self, m: float, n: int, k: int) -> float:
        """log seconds at one grid (N, K), interpolated (and extended) along M."""
        ms, t = self._ms[(n, k)], self._t
        if m <= ms[0]:
            return log(t[(ms[0], n, k)])
        if m >= ms[-1]:
            return log(t[(ms[-1], n, k)] * m / ms[-1])
        i = bisect_left(ms, m)
        a, b = ms[i - 1], ms[i]
        f = (log(m) - log(a)) / (log(b) - log(a))
        return (1.0 - f) * log(t[(a, n, k)]) + f * log(t[(b, n, k)])

    @staticmethod
    def _bracket(v: float, grid: list[int]) -> tuple:
        """(lower, upper, weight of upper, scale) of ``v`` on ``grid``: clamped at the ends, with
        ``scale`` v / largest beyond the top (the time then grows in proportion)."""
        if v <= grid[0]:
            return grid[0], grid[0], 0.0, 1.0
        if v >= grid[-1]:
            return grid[-1], grid[-1], 0.0, v / grid[-1]
        i = bisect_left(grid, v)
        a, b = grid[i - 1], grid[i]
        return a, b, (log(v) - log(a)) / (log(b) - log(a)), 1.0

    def seconds(self, m: float, n: float, k: float) -> float:
        """One F.linear of an (m, k) input by an (n, k) weight, seconds."""
        n0, n1, fn, sn = self._bracket(n, self.ns)
        k0, k1, fk, sk = self._bracket(k, self.ks)
        total = 0.0
        for nn, wn in ((n0, 1.0 - fn), (n1, fn)):
            if wn == 0.0:
                continue
            for kk, wk in ((k0, 1.0 - fk), (k1, fk)):
                if wk == 0.0:
                    continue
                total += wn * wk * self._at_nk(float(m), nn, kk)
        return exp(total) * sn * sk


def probe_table(path: str | Path, build, what: str, probe: str, fields: str, field: str):
    """``build(points, source, data)`` over the ``points`` of a probe's JSON ``data`` at ``path`` (relative paths
    under hardware_profiles/), read once per file, with one-line errors naming ``what`` (e.g.
    "matmul table"), the ``probe`` that writes it, the point ``fields`` it needs and the
    ``field`` errors carry."""
    from roofline.hardware import profiles_dir

    p = Path(path)
    if not p.is_absolute():
        p = profiles_dir() / p
    return _probe_table(str(p), build, what, probe, fields, field)


@lru_cache(maxsize=16)
def _probe_table(path: str, build, what: str, probe: str, fields: str, field: str):
    from roofline.atomic import read_json

    p = Path(path)
    data = read_json(p, f"the {what}")
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list):
        raise RooflineError(f"{p}: a {what} is the {probe} probe's JSON (a 'points' list)", field)
    try:
        return build(points, str(p), data)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise RooflineError(f"{p}: every point needs numbers {fields}", field) from None


def load_gemm_table(path: str | Path) -> GemmTable:
    """The table in ``path`` (a gemm probe's JSON); relative paths are read under hardware_profiles/.
    Re-timings beside it (``rechecks``) correct the points they re-timed."""
    return probe_table(path, _build, "matmul table", "gemm", "m, n, k and seconds", "gemm_table")


def rechecks(table_path: Path) -> list[Path]:
    """The re-timings of a gemm table's points (calibrate/runs/gemm_recheck.py), committed beside it
    as ``<table stem>-recheck-*.json``."""
    return sorted(table_path.parent.glob(f"{table_path.stem}-recheck-*.json"))


def rechecked_points(points: list[dict], recheck: dict) -> tuple[list[dict], int]:
    """``points`` with the re-timed ones corrected, and how many were. A re-timing holds a point
    slower than a larger M of the same (N, K) in the table, and that larger M, each timed three times
    on one machine, interleaved (calibrate/runs/gemm_recheck.py). The point becomes the table's
    larger-M time x the re-timed ratio of the two (medians): the shape of the curve as re-measured,
    at the level of the machine that measured the table (machines differ by a few percent; on the
    H100 the re-timing's ran ~4% faster at the larger Ms). Device call 114 re-timed the H100 table's
    151 such points with M >= 16: 104 were not slower than their larger M at all (the table had them
    ~19% slow, the worst 2.9x: (16, 24576, 3072) 157 us against 54), 47 were (another kernel at that
    size, as slow again)."""
    from statistics import median

    fixed = {}
    for r in recheck.get("points", []):
        key, after = (int(r["m"]), int(r["n"]), int(r["k"])), float(r["seconds_after"])
        fixed[key] = after * median(r["again_s"]) / median(r["after_again_s"])
    out, changed = [], 0
    for p in points:
        key = (int(p["m"]), int(p["n"]), int(p["k"]))
        if key in fixed:
            p = {**p, "seconds": fixed[key]}
            changed += 1
        out.append(p)
    return out, changed


def _build(points: list[dict], source: str, data: dict) -> GemmTable:
    from roofline.atomic import read_json

    notes = []
    for path in rechecks(Path(source)):
        points, changed = rechecked_points(points, read_json(path, "the matmul table's re-timing"))
        notes.append(f"{changed} points re-timed by {path.name}")
    return GemmTable(points, source + (f" ({'; '.join(notes)})" if notes else ""))
