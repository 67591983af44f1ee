"""The attention and layers probes' measurements (calibrate.probes), read for the fit.

``calibrate.probes`` times the graph engine's decode attention alone -- one layer, in a CUDA
graph, over batches x cached tokens x shapes (query heads, KV heads, head width) -- so the fit
can see what the attention kernels cost per cached byte, per score element and per sequence
without the rest of the step in the way (docs/method.md, attention). Its ``layers`` probe times
the engine's whole decode step of a model cut to a few layer counts, which splits a step's fixed
time into the step's own and each layer's (models of 28-32 layers alone cannot). Stdlib only.
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


@dataclass(frozen=True)
class LayersPoint:
    """The graph engine's whole decode step of ``model`` cut to ``layers`` layers, timed:
    ``batch`` sequences over a static cache of ``context`` positions (the ``layers`` probe)."""

    model: str
    layers: int
    batch: int
    context: int
    seconds: float


def layers_points(path: str | Path) -> list[LayersPoint]:
    """The layers probe's timings of catalog models as they are (head-split variants left out)."""
    data = read_json(Path(path), "layers probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not a layers probe file (no points)")
    out = []
    for p in data["points"]:
        if not isinstance(p, dict) or p.get("variant"):
            continue
        try:
            out.append(LayersPoint(str(p["model"]), int(p["layers"]), int(p["batch"]), int(p["context"]),
                                   float(p["step_s"])))
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}: a point lacks model, layers, batch, context or step_s") from None
    if not out:
        raise RooflineError(f"{path}: no points of a model as it is")
    return out


def moe_row_seconds_per_element(path: str | Path, models, min_tokens: int = 4096) -> float:
    """Seconds per element of a routed row's hidden-wide work outside the expert matmuls (the
    ``gather`` of each (token, expert) row and the weighted ``combine`` back into its token), from
    the MoE probe's points of ``models`` at ``min_tokens`` tokens and more, where that work has
    long outgrown the kernels' fixed cost: the median of (gather + combine) / (rows x hidden)."""
    import statistics

    data = read_json(Path(path), "MoE probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not a MoE probe file (no points)")
    wanted = set(models)
    by: dict[tuple, dict] = {}
    try:
        for p in data["points"]:
            if p["model"] in wanted and int(p["tokens"]) >= min_tokens and p["stage"] in ("gather", "combine"):
                key = (p["model"], int(p["tokens"]))
                by.setdefault(key, {"elements": float(p["rows"]) * float(p["hidden"])})[p["stage"]] = float(p["seconds"])
    except (KeyError, TypeError, ValueError):
        raise RooflineError(f"{path}: a point lacks model, tokens, stage, rows, hidden or seconds") from None
    per = [(v["gather"] + v["combine"]) / v["elements"] for v in by.values() if "gather" in v and "combine" in v]
    if not per:
        raise RooflineError(f"{path}: no gather and combine timings of {', '.join(sorted(wanted)) or 'any model'} "
                            f"at {min_tokens} tokens or more")
    if min(per) <= 0:
        raise RooflineError(f"{path}: a timing must be positive")
    return statistics.median(per)


def masked_attention_rates(path: str | Path, min_prompt_tokens: int = 2048) -> dict[str, float]:
    """{computed head width: FLOP/s}: the masked-attention probe's median rate of the engine's
    masked prefill path per head width as computed (a sinks layer's padded one) over its prompts of
    ``min_prompt_tokens`` and more (all of them where none is that long)."""
    return _median_rates(path, "masked-attention", "computed_head_dim", min_prompt_tokens)


def prefill_attention_rates(path: str | Path, min_prompt_tokens: int = 4096) -> dict[str, float]:
    """{head_dim: FLOP/s}: the prefill-attention probe's median rate per head width over its prompts
    of ``min_prompt_tokens`` and more (all of its prompts where none is that long): the rate a
    long prompt's attention runs at, which is where attention matters in a prefill."""
    return _median_rates(path, "prefill-attention", "head_dim", min_prompt_tokens)


def _median_rates(path: str | Path, probe: str, width: str, min_prompt_tokens: int) -> dict[str, float]:
    """{points' ``width``: median flop_per_s} over the prompts of ``min_prompt_tokens`` and more (all
    of a width's where none is that long), from a ``probe`` file."""
    import statistics

    data = read_json(Path(path), f"{probe} probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not a {probe} probe file (no points)")
    by: dict[int, list] = {}
    try:
        for p in data["points"]:
            by.setdefault(int(p[width]), []).append((int(p["prompt_tokens"]), float(p["flop_per_s"])))
    except (KeyError, TypeError, ValueError):
        raise RooflineError(f"{path}: a point lacks {width}, prompt_tokens or flop_per_s") from None
    if not by:
        raise RooflineError(f"{path}: no points")
    out = {}
    for hd, pts in sorted(by.items()):
        long = [r for n, r in pts if n >= min_prompt_tokens] or [r for _, r in pts]
        if min(long) <= 0:
            raise RooflineError(f"{path}: a FLOP rate must be positive")
        out[str(hd)] = statistics.median(long)
    return out
