"""The attention probe's measurements (calibrate.probes), read for the fit.

``calibrate.probes`` times the graph engine's decode attention alone -- one layer, in a CUDA
graph, over batches x cached tokens x shapes (query heads, KV heads, head width) -- so the fit
can see what the attention kernels cost per cached byte, per score element and per sequence
without the rest of the step in the way (docs/method.md, attention). Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roofline.atomic import read_json
from roofline.errors import RooflineError


@dataclass(frozen=True)
class AttentionPoint:
    """One layer of decode attention, timed alone: ``batch`` sequences x ``context_tokens`` slots."""

    shape: str
    q_heads: int
    kv_heads: int
    head_dim: int
    batch: int
    context_tokens: int
    seconds: float


def attention_points(path: str | Path, op: str = "graph_attention") -> list[AttentionPoint]:
    """The probe's timings of ``op`` (the graph engine's whole decode attention by default)."""
    data = read_json(Path(path), "attention probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not an attention probe file (no points)")
    out = []
    for p in data["points"]:
        if p.get("op") != op or "s" not in p:
            continue
        try:
            out.append(AttentionPoint(str(p["shape"]), int(p["q_heads"]), int(p["kv_heads"]), int(p["head_dim"]),
                                      int(p["batch"]), int(p["context_tokens"]), float(p["s"])))
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}: a point lacks shape, heads, batch, context or seconds") from None
    if not out:
        raise RooflineError(f"{path}: no {op} points")
    return out
