"""A card's measured price of the serving loop's chunk graph: how much longer one layer's
attention takes when the pass's first sequence is a chunk after cached tokens.

The table is the ``chunk`` probe of calibrate.probes (``probe-chunk.json``): one layer's attention
of a pass of ``bucket`` tokens, a chunk of t tokens after c cached ones and one whole prompt of
the rest, timed as the loop's chunk graph runs it (the chunk's slot's cache rows copied out and
placed before the pass's own keys, one varlen call) and as its prefill graph runs the same tokens
without the cache, at the served models' head shapes. Why a table: the chunk's queries sit in a
few thread blocks, each walking all c + t keys one block after another, so the time grows with c
far beyond the attention's FLOPs (on the H200, ~0.05 us a cached token a layer at qwen2.5-1.5b's
shape, 0.8 ms a pass at c = 500; the FLOPs say ~0.03 ms), and only once the chunk's walk is the
longest of the pass (``hardware_profiles/measurements/h200-probe-chunk.json``).

``ChunkTable.extra_s(q_heads, kv_heads, head_dim, bucket, t, c)``: chunk graph minus prefill
graph, one layer, at the table's cache rows a slot (its grid's ``rows``). The nearest measured
head shape (same head width first, then the nearest K/V heads, then query heads); linear in log
bucket and in t / bucket between the grid's points (clamped at its ends); linear in c, extended
beyond the largest c by the last segment's slope.

The chunk graph also copies all of its slot's rows out, so its time grows with the rows:
``copy_s_per_row(table, other, shape)`` is that growth, one layer, a row, from the same probe at
other rows (over the points both measured, the median of their difference over the rows'
difference; on the H200, call 90, the copies ran at 0.8-1.2 TB/s); a shape the other table lacks
is priced from the nearest one both measured, in proportion to the K/V width.
"""

from __future__ import annotations

from bisect import bisect_left
from math import log
from pathlib import Path

from roofline.errors import RooflineError


def _bracket(v: float, grid: list, log_scale: bool = False) -> tuple:
    """(lower, upper, weight of upper) of ``v`` on ``grid``, clamped at the ends."""
    if v <= grid[0]:
        return grid[0], grid[0], 0.0
    if v >= grid[-1]:
        return grid[-1], grid[-1], 0.0
    i = bisect_left(grid, v)
    a, b = grid[i - 1], grid[i]
    if log_scale:
        return a, b, (log(v) - log(a)) / (log(b) - log(a))
    return a, b, (v - a) / (b - a)


def _nearest(shapes, shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """The one of ``shapes`` that stands for ``shape`` (q_heads, kv_heads, head_dim): the same head
    width first, then the nearest K/V heads, then query heads (in ratio)."""
    q, kv, hd = shape
    return min(shapes, key=lambda s: (s[2] != hd, abs(log(s[1] / kv)), abs(log(s[0] / q))))


class ChunkTable:
    """Measured chunk-graph attention minus prefill-graph attention on one card (module docstring)."""

    def __init__(self, points: list[dict], source: str, rows: int | None = None):
        """``rows``: the cache rows a slot (the loop's max_model_len T) the probe measured at
        (its grid's ``rows``; None where the file does not say)."""
        if not points:
            raise RooflineError(f"{source}: the chunk table has no points", "chunk_table")
        self.source = source
        self.rows = rows
        # shape -> bucket -> fraction -> [(c, extra seconds)]
        self._by: dict = {}
        # shape -> (bucket, t) -> [prefill seconds]: the prefill graph's attention (prefill_attention_s)
        self._prefill: dict = {}
        for p in points:
            shape = (int(p["q_heads"]), int(p["kv_heads"]), int(p["head_dim"]))
            bucket, t, c = int(p["bucket"]), int(p["chunk_tokens"]), int(p["cached"])
            extra = float(p["chunk_s"]) - float(p["prefill_s"])
            if bucket < 1 or not 1 <= t <= bucket or c < 0:
                raise RooflineError(f"{source}: a point needs bucket >= chunk_tokens >= 1 and cached >= 0 (got {p})",
                                    "chunk_table")
            self._by.setdefault(shape, {}).setdefault(bucket, {}).setdefault(t / bucket, []).append((c, extra))
            self._prefill.setdefault(shape, {}).setdefault((bucket, t), []).append(float(p["prefill_s"]))
        for buckets in self._by.values():
            for fractions in buckets.values():
                for f, cs in fractions.items():
                    cs.sort()
                    if len(cs) < 2:
                        raise RooflineError(f"{source}: every (shape, bucket, chunk) needs two cached sizes or more",
                                            "chunk_table")
        self.shapes = sorted(self._by)
        # the grids' sorted keys, and the measured cached sizes of each line, read once here
        self._buckets = {shape: sorted(by) for shape, by in self._by.items()}
        self._fractions = {(shape, b): sorted(fr) for shape, by in self._by.items() for b, fr in by.items()}
        self._near: dict = {}
        self._lines: dict = {}

    def nearest_shape(self, q_heads: int, kv_heads: int, head_dim: int) -> tuple[int, int, int]:
        """The measured head shape that stands for (q_heads, kv_heads, head_dim)."""
        key = (q_heads, kv_heads, head_dim)
        if key not in self._near:
            self._near[key] = _nearest(self.shapes, key)
        return self._near[key]

    def points(self, shape: tuple[int, int, int]) -> dict:
        """{(bucket, t / bucket, c): extra seconds} measured at ``shape``."""
        return {(b, f, c): e for b, fractions in self._by[shape].items() for f, cs in fractions.items()
                for c, e in cs}

    @staticmethod
    def _along_c(cs: list, c: float) -> float:
        if c >= cs[-1][0]:
            (c0, e0), (c1, e1) = cs[-2], cs[-1]
            return e1 + (e1 - e0) / (c1 - c0) * (c - c1)
        i = bisect_left(cs, (c,))
        if i == 0:
            return cs[0][1]
        (c0, e0), (c1, e1) = cs[i - 1], cs[i]
        return e0 + (e1 - e0) * (c - c0) / (c1 - c0)

    def extra_s(self, q_heads: int, kv_heads: int, head_dim: int, bucket: float, t: float, c: float) -> float:
        """One layer: the chunk graph's attention minus the prefill graph's, seconds (>= 0)."""
        shape = self.nearest_shape(q_heads, kv_heads, head_dim)
        by = self._by[shape]
        b0, b1, wb = _bracket(bucket, self._buckets[shape], log_scale=True)
        total = 0.0
        for b, w in ((b0, 1.0 - wb), (b1, wb)):
            if w == 0.0:
                continue
            fractions = by[b]
            f0, f1, wf = _bracket(min(t / bucket, 1.0), self._fractions[(shape, b)])
            for f, v in ((f0, 1.0 - wf), (f1, wf)):
                if v:
                    total += w * v * self._along_c(fractions[f], c)
        return max(total, 0.0)

    def prefill_points(self, shape: tuple[int, int, int]) -> dict:
        """{(bucket, t): the prefill graph's attention of one layer, seconds}: the probe's prefill_s
        at ``shape`` (a prompt of t tokens and one of bucket - t), the median over its cached sizes."""
        from statistics import median

        return {k: median(v) for k, v in sorted(self._prefill[shape].items())}

    def prefill_line(self, shape: tuple[int, int, int]) -> tuple[float, float, float, float]:
        """(seconds, per token, per causal pair, per token of the longest sequence): the prefill
        graph's attention of one layer at ``shape``, a line through the probe's prefill_s points
        (the median over its cached sizes, which the prefill graph does not read), least squares on
        the relative error. Why these four: the varlen call and the K/V repeats launch at a fixed
        cost; the repeats and the attention's reads and writes grow with the tokens; the score
        tiles with the causal pairs once the call fills the SMs; and a call of few tiles lasts as
        long as its longest sequence's walk (the last query tile's, one block of keys after
        another). No part is negative (non-negative least squares): at few heads the call never
        fills the SMs, and the longest sequence carries what the pairs would."""
        line = self._lines.get(shape)
        if line is None:
            import numpy as np

            rows, times = [], []
            for (b, t), seconds in self.prefill_points(shape).items():
                rest = b - t
                rows.append([1.0, b, (t * (t + 1) + rest * (rest + 1)) / 2.0, max(t, rest)])
                times.append(seconds)
            if len({tuple(r) for r in rows}) < 4:
                raise RooflineError(f"{self.source}: the prefill attention at head shape {shape} needs four "
                                    "(bucket, chunk) points or more", "chunk_table")
            from scipy.optimize import nnls

            x, y = np.array(rows), np.array(times)
            coef = nnls(x / y[:, None], np.ones(len(y)))[0]
            line = self._lines[shape] = tuple(float(c) for c in coef)
        return line

    def prefill_attention_s(self, q_heads: int, kv_heads: int, head_dim: int, bucket: float, tokens: float,
                            pairs: float, longest: float = 0) -> float:
        """One layer of a prefill graph's attention (its K/V repeats and one varlen call), seconds:
        ``tokens`` prompt tokens with ``pairs`` causal pairs padded to ``bucket`` tokens, the
        padding one more causal sequence (roofline.pass_costs.padded_prefill). From the nearest
        measured head shape's ``prefill_line``: its per-token and per-pair parts scaled by the
        query width's ratio (heads x head width: the bytes and the FLOPs), its per-longest part by
        the head width's (one tile's walk); the longest sequence is the padding or the longest
        prompt, whichever is longer: ``longest`` where the caller knows it (the simulator's passes),
        else the prompts' token-weighted mean length (2 pairs / tokens - 1: a lone prompt's own).
        The line was fitted on the true longest (max(t, bucket - t)); a served run's pass of
        prompts of unequal lengths records only their count, tokens and pairs, so there the mean
        stands in, which is shorter (a 400-token prompt beside a 100-token one: 340). The probe's
        shapes are all grouped-query: a model with as many K/V heads as query heads (pythia-6.9b)
        is priced with the K/V repeats its loop does not run."""
        shape = self.nearest_shape(q_heads, kv_heads, head_dim)
        fixed, per_token, per_pair, per_longest = self.prefill_line(shape)
        pad = max(bucket - tokens, 0.0)
        if not longest:
            longest = 2.0 * pairs / tokens - 1.0 if tokens > 0 else 0.0
        longest = max(longest, pad)
        width = q_heads * head_dim / (shape[0] * shape[2])
        return max(fixed + width * (per_token * bucket + per_pair * (pairs + pad * (pad + 1) / 2.0))
                   + per_longest * longest * head_dim / shape[2], 0.0)


def copy_s_per_row(table: ChunkTable, other: ChunkTable, shape: tuple[int, int, int]) -> float:
    """One layer's chunk graph, seconds more a cache row of its slot at ``shape``: over the points
    ``table`` and ``other`` (the same probe at other rows) both measured at ``shape``, the median of
    (extra at other's rows - extra at table's) / (the rows' difference).

    Where ``other`` did not measure ``shape`` (or shares no point with ``table`` there), the copy is
    the same kernel over a K/V row of another width: the nearest shape both measured (the order of
    ``ChunkTable.nearest_shape``) stands in, scaled by the K/V widths' ratio. A pair with no shape
    in common, or whose copy does not take longer at more rows, is refused in one line."""
    if table.rows is None or other.rows is None or table.rows == other.rows:
        raise RooflineError(f"{other.source}: a chunk table at other rows needs both tables' grid rows, and "
                            f"different ones (got {table.rows} and {other.rows})", "chunk_table")

    def median_at(s: tuple) -> float | None:
        if s not in table.shapes or s not in other.shapes:
            return None
        mine, theirs = table.points(s), other.points(s)
        both = sorted((theirs[k] - mine[k]) / (other.rows - table.rows) for k in mine.keys() & theirs.keys())
        if not both:
            return None
        mid = len(both) // 2
        return both[mid] if len(both) % 2 else 0.5 * (both[mid - 1] + both[mid])

    found, at = median_at(shape), shape
    if found is None:
        medians = {s: m for s in table.shapes if (m := median_at(s)) is not None}
        if not medians:
            raise RooflineError(f"{other.source}: no point in common with {table.source} at any head shape",
                                "chunk_table")
        at = _nearest(medians, shape)
        found = medians[at] * (shape[1] * shape[2]) / (at[1] * at[2])
    if not found > 0.0:
        raise RooflineError(f"{other.source}: the chunk graph is not slower at {max(table.rows, other.rows)} rows "
                            f"than at {min(table.rows, other.rows)} (head shape {at}: {found:.3g} s a row); "
                            "are the tables' grid rows swapped?", "chunk_table")
    return found


def load_chunk_table(path: str | Path) -> ChunkTable:
    """The table in ``path`` (a chunk probe's JSON); relative paths are read under hardware_profiles/."""
    from roofline.gemm import probe_table

    return probe_table(path, _build, "chunk table", "chunk", "q_heads, kv_heads, head_dim, bucket, chunk_tokens, "
                       "cached, chunk_s and prefill_s", "chunk_table")


def _build(points: list[dict], source: str, data: dict) -> ChunkTable:
    grid = data.get("grid")
    if grid is not None and not isinstance(grid, dict):
        raise RooflineError(f"{source}: the chunk table's grid must be an object (got {type(grid).__name__})",
                            "chunk_table")
    rows = (grid or {}).get("rows")
    if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 1):
        raise RooflineError(f"{source}: the chunk table's grid rows must be a positive whole number (got {rows!r})",
                            "chunk_table")
    return ChunkTable(points, source, rows)
