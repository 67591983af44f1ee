"""Output formatting shared by the CLI commands: aligned tables, JSON and CSV.

JSON and CSV carry raw base-unit numbers under unit-suffixed keys; human units (ms, GiB,
GB/s, TFLOP/s) appear only in tables.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from roofline.units import GB, GiB, MS, TFLOP


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(data) -> str:
    return json.dumps(_plain(data), indent=2)


def to_csv(rows: list[dict], keys: list[str] | None = None) -> str:
    if not rows:
        return ""
    keys = keys or list(rows[0])
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(keys)
    for row in rows:
        writer.writerow(["" if row.get(k) is None else _plain(row.get(k)) for k in keys])
    return buf.getvalue()


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A plain aligned table: numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    align = align or "".join("r" for _ in headers)

    def fmt(values):
        out = []
        for v, w, a in zip(values, widths, align):
            out.append(v.rjust(w) if a == "r" else v.ljust(w))
        return "  ".join(out).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def thousands(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds / MS:.{digits}f}"


def gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / GiB:.{digits}f}"


def gb(n_bytes: float, digits: int = 3) -> str:
    return f"{n_bytes / GB:.{digits}f}"


def gb_per_s(x: float) -> str:
    return f"{x / GB:,.1f} GB/s"


def tflop_per_s(x: float) -> str:
    return f"{x / TFLOP:,.2f} TFLOP/s"


def batch_list(batches: list[int]) -> str:
    """``1, 2, 4`` or, for more than four, ``2048 .. 65536`` (first .. last)."""
    if len(batches) <= 4:
        return ", ".join(str(b) for b in batches)
    return f"{batches[0]} .. {batches[-1]}"
