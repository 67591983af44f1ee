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
from functools import lru_cache
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


def _files(paths) -> list:
    """A probe argument's files: one path -> [it], several -> them."""
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def _graph_attention_points(paths) -> list[AttentionPoint]:
    """The ``graph_attention`` points of one or several attention probe files, pooled."""
    return [p for f in _files(paths) for p in attention_points(f, "graph_attention")]


def _card_for(card, calibration):
    """``card`` if it is a CardProfile, else the profile it names (or the calibration's card)."""
    from roofline.hardware import load_card

    return card if hasattr(card, "bandwidth_bytes_per_s") else load_card(card or calibration.card)


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


def softmax_warp_floor(paths, most: float = 2048.0, max_rows: int = 128, shortest: int = 256) -> tuple[float, float]:
    """The decode softmax's walk along a row while rows run PyTorch's warp kernel, from attention probe
    files that time the softmax alone (``graph_softmax``: the attention probe, the attention-widths
    probe): (seconds per position of a row per layer, the positions after which the walk outlasts the
    kernel's shortest time) -- Calibration.attention_softmax_warp_s_per_token and _after_tokens.

    With few rows (batch x query heads at most ``max_rows``: every row's warp runs at once) the kernel
    takes max(its shortest time, a + s x positions): each (file, shape, batch) series over rows of
    ``shortest`` to ``most`` positions gives a least-squares line (a, s), the answer's s is their
    median; the shortest time is the median of the series' points at fewer than ``shortest`` positions
    (the fitted per-layer time holds it: every layer pays it), so the walk costs beyond it from
    (shortest time - median a) / s positions on (0 where no shorter row was timed)."""
    import numpy as np

    lines, short = [], []
    for f in _files(paths):
        series: dict[tuple, list[tuple[int, float]]] = {}
        for p in attention_points(f, "graph_softmax"):
            if p.batch * p.q_heads > max_rows or p.context_tokens > most:
                continue
            if p.context_tokens < shortest:
                short.append(p.seconds)
            else:
                series.setdefault((p.shape, p.q_heads, p.kv_heads, p.head_dim, p.batch), []).append(
                    (p.context_tokens, p.seconds))
        for pts in series.values():
            x = np.array([t for t, _ in pts], dtype=float)
            if np.ptp(x) < 0.5 * most:
                continue
            slope, intercept = np.polyfit(x, np.array([s for _, s in pts], dtype=float), 1)
            lines.append((float(slope), float(intercept)))
    if not lines:
        raise RooflineError(f"no softmax series of at most {max_rows} rows over {shortest}-{most:.0f} positions "
                            "(graph_softmax points of the attention or attention-widths probe)")
    slope = max(0.0, float(np.median([a for a, _ in lines])))
    after = 0.0
    if short and slope > 0.0:
        after = max(0.0, (float(np.median(short)) - float(np.median([b for _, b in lines]))) / slope)
    return slope, after


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


def _moe_stage_pairs(path, models, min_tokens: int, stages: tuple[str, str], size) -> dict[tuple, dict]:
    """{(model, tokens): {stage: seconds, "size": size(point)}} of the MoE probe's points of ``models``
    at ``min_tokens`` tokens and more, for the two ``stages``; only keys with both stages."""
    data = read_json(Path(path), "MoE probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not a MoE probe file (no points)")
    wanted = set(models)
    by: dict[tuple, dict] = {}
    try:
        for p in data["points"]:
            if p["model"] in wanted and int(p["tokens"]) >= min_tokens and p["stage"] in stages:
                by.setdefault((p["model"], int(p["tokens"])), {"size": size(p)})[p["stage"]] = float(p["seconds"])
    except (KeyError, TypeError, ValueError):
        raise RooflineError(f"{path}: a point lacks model, tokens, stage, rows, hidden, top_k, moe_inter or "
                            "seconds") from None
    out = {k: v for k, v in by.items() if all(st in v for st in stages)}
    if not out:
        raise RooflineError(f"{path}: no {' and '.join(stages)} timings of {', '.join(sorted(wanted)) or 'any model'} "
                            f"at {min_tokens} tokens or more")
    if min(v[st] for v in out.values() for st in stages) <= 0:
        raise RooflineError(f"{path}: a timing must be positive")
    return out


def moe_row_seconds_per_element(path: str | Path, models, min_tokens: int = 4096) -> float:
    """Seconds per element of a routed row's hidden-wide work outside the expert matmuls (the
    ``gather`` of each (token, expert) row and the weighted ``combine`` back into its token), from
    the MoE probe's points of ``models`` at ``min_tokens`` tokens and more, where that work has
    long outgrown the kernels' fixed cost: the median of (gather + combine) / (rows x hidden)."""
    import statistics

    by = _moe_stage_pairs(path, models, min_tokens, ("gather", "combine"),
                          lambda p: float(p["rows"]) * float(p["hidden"]))
    return statistics.median((v["gather"] + v["combine"]) / v["size"] for v in by.values())


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


#: the per-token element counts a prefill layer's non-matmul kernels scale with
#: (roofline.model_spec.ModelSpec.prefill_elementwise_elements, the calibration's
#: ``prefill_elementwise_bytes_per_element``): the hidden width (its two norms and two residual adds),
#: the MLP's intermediate width (the activation: gated's chunk, silu and product; a plain MLP's
#: GELU), the queries' and the keys' widths (rope, the K/V cache writes, the attention output's
#: copy), and the q/k norms' width (queries + keys, where the model norms them); the first six are
#: what the prefill-kernels probe's generic shapes identify; ``clamped_intermediate`` is gpt-oss's
#: clamped SwiGLU (its experts' activation), set from the MoE probe's activation stage
#: (clamped_activation_extra_s_per_element) and priced as ``gated_intermediate`` where absent;
#: ``expert_bias`` is an expert's biases on its routed rows (gpt-oss: gate-up's and down's), each
#: gathered per row and added, two one-pass kernels: twice ``plain_intermediate`` where absent
#: An MLA layer's prefill (decompressed: the graph engine's, transformers' and vLLM's) has kinds of
#: its own: ``mla_rope`` (the roped elements: heads x rope of the queries, rope of the key),
#: ``mla_heads`` (heads x (nope + rope): the queries' and keys' concatenations and the values'
#: padding to that width), ``mla_out`` (heads x value width: the output's copy), ``mla_latent``
#: (the latent and rope key written to the cache, the latents' norms)
PROBED_KINDS = ("hidden", "gated_intermediate", "plain_intermediate", "query", "key_value", "qk_norm",
                "mla_rope", "mla_heads", "mla_out", "mla_latent")
ELEMENTWISE_KINDS = PROBED_KINDS + ("clamped_intermediate", "expert_bias")
#: kernel names (CUDA kernels on a GPU; aten ops on the CPU) of the matmul and attention families;
#: every other kernel of a prefill is elementwise work (norms, rope, activation, copies, adds)
_MATMUL_KERNEL = ("gemm", "nvjet", "xmma", "cutlass", "cublas", "splitk", "sm90_", "grouped",
                  "aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "aten::_grouped_mm")
_ATTENTION_KERNEL = ("flash", "fmha", "attention", "cudnn", "sdpa")


def kernel_family(name: str) -> str:
    """"attention", "matmul" or "elementwise": the family a profiled kernel's name belongs to."""
    low = name.lower()
    if any(k in low for k in _ATTENTION_KERNEL):
        return "attention"
    if any(k in low for k in _MATMUL_KERNEL):
        return "matmul"
    return "elementwise"


def generic_elements(shapes: dict) -> dict[str, float]:
    """One layer's per-token elements of each PROBED_KINDS kind, from a prefill-kernels probe
    point's engine shapes (dense layers: the probe's generic shapes)."""
    heads = float(shapes["heads"])
    inter = float(shapes["inter"])
    gated = bool(shapes["gated"])
    out = {"hidden": float(shapes["hidden"]), "gated_intermediate": inter if gated else 0.0,
           "plain_intermediate": 0.0 if gated else inter}
    if shapes.get("mla"):
        rope, nope, v = float(shapes["qk_rope_dim"]), float(shapes["qk_nope_dim"]), float(shapes["v_head_dim"])
        latent = float(shapes["kv_lora_rank"]) + rope + float(shapes.get("q_lora_rank") or 0)
        return {**out, "query": 0.0, "key_value": 0.0, "qk_norm": 0.0, "mla_rope": heads * rope + rope,
                "mla_heads": heads * (nope + rope), "mla_out": heads * v, "mla_latent": latent}
    q = heads * float(shapes["head_dim"])
    kv = float(shapes["kv_heads"]) * float(shapes["head_dim"])
    return {**out, "query": q, "key_value": kv, "qk_norm": q + kv if shapes["qk_norm"] else 0.0,
            "mla_rope": 0.0, "mla_heads": 0.0, "mla_out": 0.0, "mla_latent": 0.0}


def prefill_kernel_layer_seconds(point: dict) -> dict[str, float]:
    """{family: seconds per (prompt token x layer)} of a prefill-kernels probe point: its two cuts'
    kernels by family, the difference over the difference of their layer counts, per token."""
    try:
        lo, hi = sorted(point["cuts"], key=lambda c: int(c["layers"]))[:2] if len(point["cuts"]) >= 2 else (None, None)
        if lo is None:
            raise ValueError
        layers = int(hi["layers"]) - int(lo["layers"])
        tokens = float(point["batch"]) * float(point["prompt"])

        def by_family(cut) -> dict[str, float]:
            out = {"matmul": 0.0, "attention": 0.0, "elementwise": 0.0}
            for k in cut["kernels"]:
                out[kernel_family(str(k["name"]))] += float(k["seconds"])
            return out

        a, b = by_family(lo), by_family(hi)
        if layers <= 0 or tokens <= 0:
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise RooflineError("a prefill-kernels point lacks two cuts of different layer counts with kernels, "
                            "or batch and prompt") from None
    out = {f: (b[f] - a[f]) / layers / tokens for f in a}
    out["prefill"] = (float(hi["prefill_s"]) - float(lo["prefill_s"])) / layers / tokens
    return out


def prefill_elementwise_costs(path, min_tokens: int = 8192) -> dict[str, float]:
    """{kind: seconds per element} of a prefill layer's elementwise kernels (PROBED_KINDS),
    from the prefill-kernels probe's generic points (one file or several, their points pooled)
    of ``min_tokens`` tokens a forward and more
    (all of them where none is that large; a batch of 16 and more, the TTFTs that matter, runs
    8,192-32,768): the non-negative least-squares fit of each point's elementwise seconds per
    (token x layer), relative, to its elements of each kind. A kind no point has (no MLA shape in
    an older file, say) is left out: the step model prices it as it did before (roofline.step)."""
    import numpy as np
    from scipy.optimize import nnls

    paths = [path] if isinstance(path, (str, Path)) else list(path)
    generic = []
    for one in paths:
        data = read_json(Path(one), "prefill-kernels probe")
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise RooflineError(f"{one}: not a prefill-kernels probe file (no points)")
        generic += [p for p in data["points"] if isinstance(p, dict) and p.get("kind") == "generic"]
    path = ", ".join(str(p) for p in paths)
    try:
        large = [p for p in generic if int(p["batch"]) * int(p["prompt"]) >= min_tokens]
    except (KeyError, TypeError, ValueError):
        raise RooflineError(f"{path}: a generic point lacks batch or prompt") from None
    rows, target = [], []
    for p in large or generic:
        try:
            elements = generic_elements(p["shapes"])
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}: a generic point lacks its engine shapes") from None
        rows.append([elements[k] for k in PROBED_KINDS])
        target.append(prefill_kernel_layer_seconds(p)["elementwise"])
    a, y = np.asarray(rows).reshape(len(rows), len(PROBED_KINDS)), np.asarray(target)
    seen = [i for i, k in enumerate(PROBED_KINDS) if a[:, i].any()]
    if len(rows) < len(seen) or not seen:
        raise RooflineError(f"{path}: {len(rows)} generic points; the fit needs at least {max(len(seen), 1)}")
    if min(target) <= 0:
        raise RooflineError(f"{path}: a point's elementwise time per layer must be positive")
    # relative residuals: each row scaled by its own time, so small and large layers weigh alike
    coef, _ = nnls(a[:, seen] / y[:, None], np.ones_like(y))
    return {PROBED_KINDS[i]: float(c) for i, c in zip(seen, coef)}


def clamped_activation_extra_s_per_element(path: str | Path, min_tokens: int = 4096) -> float:
    """Seconds per element that gpt-oss's clamped SwiGLU costs beyond silu's SwiGLU, from the MoE
    probe's ``act`` stage (calibrate.graph_engine._act over the routed rows, rows x expert width
    elements) at ``min_tokens`` tokens and more: the median per element over its gpt-oss models
    minus the median over its other models. The kernels are elementwise, so the cost per element
    does not depend on the shape."""
    import statistics

    from roofline.model_spec import load_model

    data = read_json(Path(path), "MoE probe")
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise RooflineError(f"{path}: not a MoE probe file (no points)")
    clamped, silu, kinds = [], [], {}
    try:
        for p in data["points"]:
            if p["stage"] != "act" or int(p["tokens"]) < min_tokens:
                continue
            name = p["model"]
            if name not in kinds:
                kinds[name] = load_model(name).clamped_swiglu
            per = float(p["seconds"]) / (float(p["rows"]) * float(p["moe_inter"]))
            (clamped if kinds[name] else silu).append(per)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise RooflineError(f"{path}: an act point lacks model, tokens, rows, moe_inter or seconds") from None
    if not clamped or not silu:
        raise RooflineError(f"{path}: the clamped activation needs act timings of a gpt-oss model and of another "
                            f"at {min_tokens} tokens or more")
    return max(0.0, statistics.median(clamped) - statistics.median(silu))


def moe_grouped_flop_per_s(path: str | Path, models, min_tokens: int = 16384) -> float:
    """FLOP/s of the engine's grouped expert matmuls (the MoE probe's ``gemm_gate_up`` and
    ``gemm_down`` stages: tokens x k routed rows through gate-up and down, 2 FLOPs a weight) at
    ``models``' shapes, ``min_tokens`` tokens and more (a prefill's size): the median."""
    import statistics

    by = _moe_stage_pairs(path, models, min_tokens, ("gemm_gate_up", "gemm_down"),
                          lambda p: 2.0 * 3.0 * int(p["tokens"]) * int(p["top_k"]) * int(p["hidden"])
                          * int(p["moe_inter"]))
    return statistics.median(v["size"] / (v["gemm_gate_up"] + v["gemm_down"]) for v in by.values())


def moe_tile_efficiencies(path: str | Path, models, peak_flop_per_s: float) -> tuple[float, float, dict]:
    """(small-tile, large-tile efficiency, report): the rates of the engine's grouped expert matmuls
    per FLOP of the tiles they compute (roofline.step.tile_rows_table: an expert's routed rows in
    whole tiles of 64 rows x 128 columns, or 128 x 256 from 129 rows an expert on average), as
    fractions of ``peak_flop_per_s``. Fitted on the MoE probe's ``gemm_gate_up`` + ``gemm_down``
    points of ``models`` (every token count) as max(tile FLOPs / R, touched experts' bytes / BW) +
    f, R one per path, BW and f free (relative least squares); the report holds the fit's BW, f and
    its error."""
    import numpy as np
    from scipy.optimize import least_squares

    from roofline.step import (LARGE_TILE, SMALL_TILE, SMALL_TILE_ROWS_PER_EXPERT, table_tile_rows, tile_row_flop,
                               tile_rows_table)

    by = _moe_stage_pairs(path, models, 1, ("gemm_gate_up", "gemm_down"), lambda p: p)
    points = []
    for (_, tokens), v in sorted(by.items()):
        p = v["size"]
        try:
            experts, k, hidden, inter = int(p["experts"]), int(p["top_k"]), float(p["hidden"]), float(p["moe_inter"])
            touched = float(p["experts_touched"])
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}: a point lacks experts, top_k, hidden, moe_inter or experts_touched") from None
        small = tokens * k < SMALL_TILE_ROWS_PER_EXPERT * experts
        cols = SMALL_TILE[1] if small else LARGE_TILE[1]
        tile_rows = table_tile_rows(tile_rows_table(experts, k, 0.0), float(k), float(tokens))
        points.append((small, tile_rows * tile_row_flop(hidden, inter, cols), touched * 3.0 * hidden * inter * 2.0,
                       v["gemm_gate_up"] + v["gemm_down"]))
    if not any(pt[0] for pt in points) or all(pt[0] for pt in points):
        raise RooflineError(f"{path}: the tile fit needs points on both tile paths (few and many tokens)")

    def priced(x, pt):
        small, flop, nbytes, _ = pt
        return max(flop / ((x[0] if small else x[1]) * 1e12), nbytes / (x[2] * 1e12)) + x[3] * 1e-6

    fit = least_squares(lambda x: [priced(x, pt) / pt[3] - 1.0 for pt in points], [300.0, 600.0, 3.0, 20.0],
                        bounds=([10.0, 10.0, 0.1, 0.0], [5000.0, 5000.0, 20.0, 1000.0]))
    errors = [abs(priced(fit.x, pt) / pt[3] - 1.0) for pt in points]
    report = {"bandwidth_bytes_per_s": float(fit.x[2]) * 1e12, "fixed_s": float(fit.x[3]) * 1e-6,
              "points": len(points), "mape_fraction": float(np.mean(errors)), "models": sorted(set(models))}
    return float(fit.x[0]) * 1e12 / peak_flop_per_s, float(fit.x[1]) * 1e12 / peak_flop_per_s, report


#: decode-layer features whose own kernels cost a decode step a fixed time per layer that has them
#: (ModelSpec.decode_layer_features, the calibration's ``layer_feature_overhead_s``): ``qk_norm``, the
#: per-head RMSNorm of queries and keys (qwen3, gemma-3, olmo-2: a norm and a scale); ``mla``, the
#: absorbed multi-head latent attention's decode beside a GQA layer's (the latent projections, the
#: queries' absorption, the rope part's concatenation: deepseek); ``shared_experts``, a MoE layer's
#: shared experts (a dense MLP beside the routed ones: its matmuls, activation and add);
#: ``biased_experts``, gpt-oss's MoE layer beside a plain one (its experts' biases gathered per routed
#: row and added, the clamped SwiGLU, the attention sink's concatenation and padding)
LAYER_FEATURES = ("qk_norm", "mla", "shared_experts", "biased_experts")


def cut_config(config: dict, layers: int | None = None, overrides=()) -> dict:
    """``config`` (a config.json's dict) with ``overrides`` ((key, value) pairs) applied and, given
    ``layers``, cut to its first ``layers`` layers (the per-layer lists cut alike; Gemma 3's nested
    text_config too): how the layers and layer-features probes build their engines."""
    def cut(c: dict) -> dict:
        if layers is None:
            return c
        c = {**c, "num_hidden_layers": layers}
        for key in ("layer_types", "max_window_layers"):
            if isinstance(c.get(key), list):
                c[key] = c[key][:layers]
        return c

    config = cut({**config, **dict(overrides)})
    if isinstance(config.get("text_config"), dict):
        config["text_config"] = cut(config["text_config"])
    return config


def variant_spec(model: str, overrides=(), layers: int | None = None):
    """The ModelSpec of catalog ``model``'s config.json, ``cut_config`` with ``overrides`` and ``layers``."""
    import json

    from roofline.model_spec import ModelSpec, resolve_model_config_path

    config = json.loads(resolve_model_config_path(model).read_text())
    return ModelSpec.from_config_dict(cut_config(config, layers, overrides), model)


@dataclass(frozen=True)
class LayerFeaturesRuns:
    """One or several layer-features probe files, read: ``grid`` {(model, variant): overrides},
    ``cuts`` {(model, variant, batch, file index): {layers: (step seconds, context)}}."""

    files: tuple
    grid: dict
    cuts: dict

    def per_layer_s(self, model: str, variant: str, batch: int, k: int):
        """(seconds a layer: the two cuts' difference over their layer counts, (fewer, more layers),
        context) of one variant at one batch in file ``k``; None without two cuts."""
        by = self.cuts.get((model, variant, batch, k), {})
        if len(by) < 2:
            return None
        lo, hi = min(by), max(by)
        return (by[hi][0] - by[lo][0]) / (hi - lo), (lo, hi), by[hi][1]

    def features(self, model: str, variant: str):
        """(each LAYER_FEATURES feature's share of the variant's layers, its head shape)."""
        return _variant_features(model, self.grid[(model, variant)])

    def reference(self, model: str, variant: str) -> str:
        """What a variant is compared with: its model where that has the variant's head shape, else
        the sibling of that shape listed before it in the grid that differs in the fewest features
        (MHA with q/k norms: MHA), else its model."""
        f_v, shape_v = self.features(model, variant)
        if self.features(model, "")[1] == shape_v:
            return ""
        best = None
        for m, w in self.grid:
            if (m, w) == (model, variant):
                break
            if m != model or self.features(m, w)[1] != shape_v:
                continue
            n = sum(a != b for a, b in zip(f_v, self.features(m, w)[0]))
            if n and (best is None or n < best[0]):
                best = (n, w)
        return best[1] if best else ""


def read_layer_features(paths) -> LayerFeaturesRuns:
    """One or several layer-features probe files (their points pooled; a variant must have the same
    overrides in each)."""
    grid: dict[tuple, tuple] = {}
    cuts: dict[tuple, dict[int, tuple[float, int]]] = {}
    files = tuple(_files(paths))
    for k, path in enumerate(files):
        data = read_json(Path(path), "layer-features probe")
        if not isinstance(data, dict) or data.get("probe") != "layer-features" or not isinstance(data.get("points"), list):
            raise RooflineError(f"{path}: not a layer-features probe file")
        try:
            for m, v, ov in data["grid"]["models"]:
                o = tuple(tuple(x) for x in ov)
                if grid.setdefault((str(m), str(v)), o) != o:
                    raise RooflineError(f"{path}: variant {m} {v!r} has other overrides than in {files[0]}")
            for p in data["points"]:
                cuts.setdefault((str(p["model"]), str(p["variant"]), int(p["batch"]), k), {})[int(p["layers"])] = \
                    (float(p["step_s"]), int(p["context"]))
        except (KeyError, TypeError, ValueError):
            raise RooflineError(f"{path}: a point or the grid lacks model, variant, layers, batch, context or "
                                f"step_s") from None
    return LayerFeaturesRuns(files, grid, cuts)


@lru_cache(maxsize=None)
def _variant_features(model: str, overrides: tuple):
    spec = variant_spec(model, overrides)
    n = spec.decode_layer_features
    return ([n.get(f, 0) / spec.num_hidden_layers for f in LAYER_FEATURES],
            (spec.attention_kind, spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim))


def priced_per_layer_s(calibration, card, model: str, overrides, layers: tuple[int, int], batch: int,
                       context: int) -> float:
    """What ``calibration`` prices a layer of ``model`` (with ``overrides``) at: its decode step cut
    to the two layer counts, the difference over their counts (as the probes measure it)."""
    from roofline.step import StepModel, decode_work

    lo, hi = layers
    t = [float(StepModel(spec=variant_spec(model, overrides, n), card=card, calibration=calibration)
               .pass_s(decode_work(batch, batch * context))) for n in (lo, hi)]
    return (t[1] - t[0]) / (hi - lo)


def layer_feature_seconds(paths, calibration=None, card=None, max_batch: int = 16) -> dict[str, float]:
    """{feature: seconds per layer} from one or several layer-features probe files. At each fitted
    model's shape and each batch up to ``max_batch`` (where a feature's kernels cost a fixed time), a
    variant's per-layer step time (its two layer cuts' difference over their layer counts) minus its
    reference's (LayerFeaturesRuns.reference), less what ``calibration`` (on ``card``; its feature
    terms left out) prices that difference at (the bytes and FLOPs a variant adds or removes: MLA's
    latent cache, shared experts' weights). Each variant's median of these over the batches and
    files is one equation in the variant's features minus its reference's (per layer, from
    roofline's own config reader: the features the step model prices); least squares over the
    equations, clipped at 0. Without a calibration the price difference is taken as 0. Variants
    that switch no feature (MHA, head widths: evidence for other terms) are left out."""
    import statistics

    import numpy as np

    runs = read_layer_features(paths)
    cal = card_p = None
    if calibration is not None:
        cal = calibration.model_copy(update={"layer_feature_overhead_s": None})
        card_p = _card_for(card, cal)

    def net(model, variant, batch, k):
        got = runs.per_layer_s(model, variant, batch, k)
        if got is None or cal is None:
            return None if got is None else got[0]
        seconds, layers, context = got
        return seconds - priced_per_layer_s(cal, card_p, model, runs.grid[(model, variant)], layers, batch, context)

    rows, deltas = [], []
    for model, variant in runs.grid:
        if not variant or (model, "") not in runs.grid:
            continue
        ref = runs.reference(model, variant)
        df = [a - b for a, b in zip(runs.features(model, variant)[0], runs.features(model, ref)[0])]
        if not any(df):
            continue
        diffs = []
        for (m, v, batch, k) in sorted(runs.cuts):
            if m == model and v == variant and batch <= max_batch:
                s_v, s_0 = net(model, variant, batch, k), net(model, ref, batch, k)
                if s_v is not None and s_0 is not None:
                    diffs.append(s_v - s_0)
        if diffs:
            rows.append(df)
            deltas.append(statistics.median(diffs))
    if not rows:
        raise RooflineError(f"{', '.join(map(str, runs.files))}: no variant with a feature switched on at its "
                            f"model's shape, timed at two layer counts at a batch of at most {max_batch}")
    a, b = np.array(rows, dtype=float), np.array(deltas, dtype=float)
    seen = [j for j in range(len(LAYER_FEATURES)) if np.any(a[:, j])]
    x, *_ = np.linalg.lstsq(a[:, seen], b, rcond=None)
    return {LAYER_FEATURES[j]: max(0.0, float(v)) for j, v in zip(seen, x)}


#: the decode attention's points where its time is its work (the KV it streams and the scores it
#: writes and re-reads): batches from 64 sequences and caches from 1,024 positions (below either, a
#: fixed launch time and the serial reduction over each sequence's cache weigh in: the lane term)
STREAM_MIN_BATCH = 64
STREAM_MIN_CONTEXT = 1024
#: where PyTorch's CUDA softmax over a row of bf16 scores changes kernel (the graph engine's decode
#: attention runs it over each query head's row of cached positions): a warp a row up to 2,048
#: elements (softmax_warp_forward); past it a 1,024-thread block a row holding the row in registers
#: while that takes fewer than ten elements a thread, up to 9,216 (cunn_SoftMaxForwardReg); past that
#: staged in shared memory, or read from global memory past its 48 KiB (the kernels probe names the
#: first two at 2,048 and 2,053-8,208 positions)
SOFTMAX_ROW_REGIMES = (2048, 9 * 1024)
#: points in a regime its score factor needs (fewer: not fitted, the regime before it applies)
ROW_REGIME_MIN_POINTS = 4


def attention_stream_terms(paths, calibration, card=None, min_batch: int = STREAM_MIN_BATCH,
                           min_context: int = STREAM_MIN_CONTEXT, regimes=SOFTMAX_ROW_REGIMES) -> dict:
    """The decode attention's cost per KV byte and per score element (``kv_traffic_factor``,
    ``attention_score_bytes``, both in bytes at ``calibration``'s bandwidth ceiling x its bandwidth
    efficiency; the latter in rows of up to ``regimes[0]`` positions) and the score elements' factor
    in rows past each of ``regimes`` (``attention_score_row_factors``: the softmax's other kernels; a
    regime with fewer than ROW_REGIME_MIN_POINTS points is left out), fitted on attention probe files' points of at least
    ``min_batch`` sequences and ``min_context`` cached positions: each point priced as a fixed time
    (one, free) plus the step model's attention family for that shape with ``calibration``'s other
    terms, a robust loss on the relative error (a cache length in one of cuBLAS's slower-kernel
    windows does not pull the fit).

    Why from probes: the models a calibration is fitted on (grouped heads of 128, four to seven query
    heads a KV head) move a KV byte and write a score element in nearly fixed proportion, so their
    steps fix only a blend of the two costs; the probes' shapes (one to 64 query heads a KV head,
    heads of 64-256) fix each (docs/method.md, section 2.1)."""
    import numpy as np
    from scipy.optimize import least_squares

    from roofline.fitting import _probe_attention_s, _probe_models

    calibration = calibration.model_copy(update={"attention_kernel_table": None})  # read against the smooth price
    card_p = _card_for(card, calibration)
    points = [p for p in _graph_attention_points(paths) if p.batch >= min_batch and p.context_tokens >= min_context]
    shapes = {(p.q_heads, p.kv_heads, p.head_dim) for p in points}
    if len(points) < 8 or len({q / kv for q, kv, _ in shapes}) < 2:
        raise RooflineError(f"the attention probes have {len(points)} points of {min_batch}+ sequences over "
                            f"{min_context}+ positions at {len(shapes)} shapes: at least 8 points and two "
                            "ratios of query heads to KV heads are needed to split the KV's cost from the scores'")
    seconds = np.array([p.seconds for p in points])
    specs = _probe_models(card_p, points)
    bounds = [*regimes, float("inf")]
    fitted = [a for a, b in zip(bounds, bounds[1:])
              if sum(a < p.context_tokens <= b for p in points) >= ROW_REGIME_MIN_POINTS]
    old = dict(calibration.attention_score_row_factors or ())
    scale = np.array([1.0, 10.0, 1e-5] + [1.0] * len(fitted))

    def terms(x) -> dict:
        kv, score, _, *factors = x * scale
        return {"kv_traffic_factor": float(kv), "attention_score_bytes": float(score),
                "attention_score_row_factors": [(float(a), float(f)) for a, f in zip(fitted, factors)] or None}

    def residual(x):
        cal = calibration.model_copy(update=terms(x))
        return (x[2] * scale[2] + _probe_attention_s(card_p, cal, specs, points)) / seconds - 1.0

    lower = np.array([0.2, 0.0, 0.0] + [0.1] * len(fitted))
    upper = np.array([5.0, 20.0, 10.0] + [5.0] * len(fitted))
    start = np.clip(np.array([float(calibration.kv_traffic_factor), float(calibration.attention_score_bytes), 0.0]
                             + [old.get(float(a), 1.0) for a in fitted]) / scale, lower + 1e-6, upper - 1e-6)
    fit = least_squares(residual, start, bounds=(lower, upper), loss="soft_l1", f_scale=0.05)
    return terms(fit.x)


def attention_ramp_terms(paths, calibration, card=None) -> dict:
    """The decode attention's fill-and-drain time beyond its price (``attention_ramp_s``, seconds a
    layer at most, and ``attention_ramp_knee_s``, the priced attention a layer at half of it), fitted
    on every point of attention probe files (every batch and cache length): each point priced as a
    fixed time (free: the kernels' launch-level time, which the step model's fitted per-layer
    overhead holds) plus ``calibration``'s attention family for that shape plus the ramp, a robust loss
    on the relative error as in attention_stream_terms (a cache length in a slower-kernel window does
    not pull the fit).

    Why: the probes' attention runs ~9 us beyond its price at the smallest shapes and ~14-20 us from
    16 MB to 1 GB of cache a layer, at every batch (docs/method.md, section 2.4): its three dependent
    kernels each fill the card and drain it, a time that grows with the work until a kernel runs
    several waves. Without it the fit's per-layer extra of two or more sequences
    (``batch_layer_overhead_s``) carries the ramp's average, too much for short contexts."""
    import numpy as np
    from scipy.optimize import least_squares

    from roofline.fitting import _probe_attention_s, _probe_models

    card_p = _card_for(card, calibration)
    calibration = calibration.model_copy(update={"attention_kernel_table": None})  # read against the smooth price
    points = _graph_attention_points(paths)
    sizes = {(p.batch, p.context_tokens) for p in points}
    if len(points) < 16 or len(sizes) < 8:
        raise RooflineError(f"the attention probes have {len(points)} points at {len(sizes)} batch x cache sizes: "
                            "at least 16 points at 8 sizes are needed to fit how the attention's time beyond its "
                            "price grows with its size")
    seconds = np.array([p.seconds for p in points])
    specs = _probe_models(card_p, points)
    scale = np.array([1e-5, 1e-5, 1e-5])

    def terms(x) -> dict:
        _, ramp, knee = x * scale
        return {"attention_ramp_s": float(ramp), "attention_ramp_knee_s": float(knee)}

    def residual(x):
        cal = calibration.model_copy(update=terms(x))
        return (x[0] * scale[0] + _probe_attention_s(card_p, cal, specs, points)) / seconds - 1.0

    lower, upper = np.array([0.0, 0.0, 0.01]), np.array([10.0, 20.0, 100.0])
    start = np.array([0.9, 0.5, 2.0])
    fit = least_squares(residual, start, bounds=(lower, upper), loss="soft_l1", f_scale=0.05)
    return terms(fit.x)


def attention_context_residuals(points, calibration, card=None, trend_tolerance: float = 0.06) -> dict:
    """{(query heads, KV heads, head width, batch): {cache length: log residual}} of attention probe
    points: each series' measured time over ``calibration``'s price (its windows left out), less a
    quadratic trend in log length (three passes, points more than ``trend_tolerance`` off it left
    out of the trend); series of fewer than five lengths are left out."""
    import math

    import numpy as np

    from roofline.fitting import _probe_attention_s, _probe_models

    card_p = _card_for(card, calibration)
    cal = calibration.model_copy(update={"attention_context_factors": None, "attention_kernel_table": None})
    priced = _probe_attention_s(card_p, cal, _probe_models(card_p, points), points)
    series: dict = {}
    for p, s in zip(points, priced):
        if s > 0 and p.seconds > 0:
            series.setdefault((p.q_heads, p.kv_heads, p.head_dim, p.batch), {})[p.context_tokens] = \
                math.log(p.seconds / s)
    out = {}
    for key, by in series.items():
        if len(by) < 5:
            continue
        t = np.array(sorted(by), dtype=float)
        y = np.array([by[int(x)] for x in t])
        x = np.log(t)
        keep = np.ones(len(t), dtype=bool)
        for _ in range(3):
            r = y - np.polyval(np.polyfit(x[keep], y[keep], 2), x)
            keep = np.abs(r) < trend_tolerance
            if keep.sum() < 3:
                break
        out[key] = {int(ti): float(ri) for ti, ri in zip(t, r)}
    return out


def attention_context_factors(paths, calibration, card=None, threshold: float = 0.08,
                              trend_tolerance: float = 0.06) -> list[tuple]:
    """Windows of cache lengths where the engine's decode attention runs a slower kernel, from one
    or several attention-contexts probe files (the engine's decode attention alone at generic
    shapes over cache lengths around the powers of two). Each (shape, batch)'s residual from its
    trend (attention_context_residuals); their median over shapes and batches at each probed
    length; a run of consecutive probed lengths whose median is more than
    ``threshold`` above the trend is a window, from just past the probed length before it (at most
    8 positions: the engine's cache is rounded up to 8) to its last. Its factor is taken at the
    probe's largest batch, where the attention's time is its work (at small batches a fixed launch
    time that the step model prices in the layer's overhead dilutes the slowdown): the median of
    the run's residuals there, one factor per probed head width, each holding from the geometric
    midpoint to the next width's; and only for the probe's query heads a KV head (others run other
    tiles). [] where no length stands out."""
    import math

    import numpy as np

    points = _graph_attention_points(paths)
    series = attention_context_residuals(points, calibration, card, trend_tolerance)
    residuals: dict[int, list[float]] = {}
    at_width: dict[tuple[int, int], list[float]] = {}  # (head width, length): the largest batch's residuals
    largest = {}
    for q, kv, d, b in series:
        largest[d] = max(largest.get(d, 0), b)
    widths = sorted(largest)
    groups = (float(min(p.q_heads / p.kv_heads for p in points)), float(max(p.q_heads / p.kv_heads for p in points)))
    for (q, kv, d, b), by in series.items():
        for ti, ri in by.items():
            residuals.setdefault(ti, []).append(ri)
            if b == largest[d]:
                at_width.setdefault((d, ti), []).append(ri)
    if not residuals:
        raise RooflineError("the attention-contexts probe has no shape and batch timed at five cache lengths or more")
    lengths = sorted(residuals)
    high = [float(np.median(residuals[t])) > math.log1p(threshold) for t in lengths]
    windows, i = [], 0
    while i < len(lengths):
        if not high[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(lengths) and high[j + 1]:
            j += 1
        before = lengths[i - 1] if i else 0
        for k, d in enumerate(widths):
            run = [r for t in lengths[i:j + 1] for r in at_width.get((d, t), [])]
            if not run:
                continue
            d_lo = float(d) if k == 0 else math.sqrt(widths[k - 1] * d)
            d_hi = float(d) if k == len(widths) - 1 else math.sqrt(d * widths[k + 1])
            windows.append((float(max(before, lengths[i] - 8)), float(lengths[j]), float(math.exp(np.median(run))),
                            d_lo, d_hi, *groups))
        i = j + 1
    return windows


#: the sustained-matmul probe's bins (seconds of load): each window's rate goes to the bin holding its midpoint
LOAD_BINS_S = (0.0, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0)


def sustained_matmul_curve(paths, series: str | None = None) -> list[tuple[float, float]]:
    """The card's rate against time under load, from calibrate.probes sustained-matmul files (one or
    several, pooled): [(seconds of load, rate / the first bin's)], one pair per bin of ``LOAD_BINS_S``
    that holds a window's midpoint (the bin's median rate at its midpoint; the first bin's at 0 s),
    every load phase pooled (each starts after an idle gap that lets the clock recover).

    ``series``: the windows of this series ("gemm": one GEMM back to back; "prefill MODEL BxP": the
    graph engine's prefill forwards back to back, each a window); None: the prefill series with the
    most windows (the finest in time), else the GEMM's (a file of before the prefill series had only it)."""
    import numpy as np

    from roofline.atomic import read_json

    windows: dict[str, list] = {}
    for path in _files(paths):
        for w in read_json(Path(path), "sustained-matmul probe").get("windows") or ():
            windows.setdefault(str(w.get("series", "gemm")), []).append(w)
    if series is None:
        prefills = sorted((len(v), k) for k, v in windows.items() if k.startswith("prefill"))
        series = prefills[-1][1] if prefills else "gemm"
    if series not in windows:
        raise RooflineError(f"the sustained-matmul probe has no series {series!r} (it has: {', '.join(sorted(windows))})")
    rates: dict[int, list[float]] = {}
    for w in windows[series]:
        end, seconds = float(w.get("load_s", -1.0)), float(w.get("seconds", 0.0))
        if end < 0 or not seconds > 0:
            continue
        i = int(np.searchsorted(LOAD_BINS_S, end - 0.5 * seconds, side="right")) - 1
        if 0 <= i < len(LOAD_BINS_S) - 1:
            rates.setdefault(i, []).append(1.0 / seconds)  # each window of a series does the same work
    if 0 not in rates or len(rates) < 3:
        raise RooflineError("the sustained-matmul probe has no windows in its first bins: no curve to read")
    burst = float(np.median(rates[0]))
    return [(0.0 if i == 0 else 0.5 * (LOAD_BINS_S[i] + LOAD_BINS_S[i + 1]), float(np.median(r)) / burst)
            for i, r in sorted(rates.items())]


#: the price (seconds a layer) from which an attention-table point's factor is read in full; under
#: half of it the launch-level time taken off the measurement (8 us on the H200) is most of it and the
#: factor is 1; between the two, the reading blended with 1 in proportion to the price. 10 us, not the
#: 30 of device call 64's table: a factor read at a price p carries the launch-level time's spread
#: over p (its points' 10-90% range is 3.9 us, docs/method.md section 2.5), and the few matrices of
#: one to four sequences over long caches are priced 10-30 us, where the kernel runs 1.1-1.35x the
#: price (device call 68)
KERNEL_TABLE_MIN_PRICE_S = 10e-6
#: the price under which a point's time beyond it is its launch-level time (the median is taken off
#: every point's measurement: the step model's fitted per-layer overhead holds it)
KERNEL_TABLE_LAUNCH_PRICE_S = 10e-6


def kernel_table_launch_s(seconds, priced) -> float:
    """The attention-table probe's launch-level time: the median of its points' measured ``seconds``
    beyond their ``priced`` seconds, over the points priced under KERNEL_TABLE_LAUNCH_PRICE_S (arrays
    alike; at least 8 of them)."""
    import numpy as np

    seconds, priced = np.asarray(seconds, dtype=float), np.asarray(priced, dtype=float)
    small = priced < KERNEL_TABLE_LAUNCH_PRICE_S
    if int(small.sum()) < 8:
        raise RooflineError(f"the attention-table probe has {int(small.sum())} points priced under "
                            f"{KERNEL_TABLE_LAUNCH_PRICE_S * 1e6:.0f} us: at least 8 are needed to read the "
                            "kernels' launch-level time")
    return float(np.median(seconds[small] - priced[small]))


def attention_kernel_table(paths, calibration, card=None, min_price_s: float = KERNEL_TABLE_MIN_PRICE_S) -> list[dict]:
    """``Calibration.attention_kernel_table`` from attention-table probe files (calibrate.probes: the
    graph engine's decode attention alone at head shapes x batched matrices x cache lengths): per shape
    (head width, query heads a KV head), each point's measured time less the launch-level time (the
    median time beyond the price of the points priced under KERNEL_TABLE_LAUNCH_PRICE_S, which the
    fitted per-layer overhead holds) over ``calibration``'s price of it without a table (its windows,
    row factors and ramp included); 1 where the price is under half ``min_price_s``, in full from
    ``min_price_s``, the two blended in proportion to the price between; a point the probe
    skipped (its K + V over the probe's limit) takes its row's value at the next shorter length.

    Why: cuBLAS picks the decode attention's QK kernel by the number of batched matrices as well as by
    the length (docs/method.md, section 2.5): at 64-wide heads the probe runs 1,024-2,048 matrices at
    1.3-1.7x the price at some lengths and ~1.0 at their neighbours, which no smooth term follows."""
    import numpy as np

    from roofline.fitting import _probe_attention_s, _probe_models

    card_p = _card_for(card, calibration)
    points = _graph_attention_points(paths)
    cal = calibration.model_copy(update={"attention_kernel_table": None})
    priced = _probe_attention_s(card_p, cal, _probe_models(card_p, points), points)
    seconds = np.array([p.seconds for p in points])
    launch = kernel_table_launch_s(seconds, priced)
    shapes: dict = {}
    for p, s, price in zip(points, seconds, priced):
        key = (p.head_dim, p.q_heads // p.kv_heads)
        # read in full from min_price_s, not at all under half of it, in proportion between: a hard
        # edge would flip the points priced near it between 1 and their reading as the fitted terms
        # move a little between the fit's rounds, which then do not settle
        weight = min(max((price - 0.5 * min_price_s) / (0.5 * min_price_s), 0.0), 1.0)
        f = 1.0 + weight * ((s - launch) / price - 1.0) if weight > 0.0 else 1.0
        shapes.setdefault(key, {})[(p.batch * p.kv_heads, p.context_tokens)] = float(min(max(f, 0.1), 10.0))
    out = []
    for (head_dim, group), cells in sorted(shapes.items()):
        matrices = sorted({m for m, _ in cells})
        contexts = sorted({c for _, c in cells})
        if len(matrices) < 2 or len(contexts) < 2:
            continue
        factors = []
        for m in matrices:
            row, last = [], 1.0
            for c in contexts:
                last = cells.get((m, c), last)
                row.append(round(last, 4))
            factors.append(row)
        out.append({"head_dim": float(head_dim), "group": float(group), "matrices": [float(m) for m in matrices],
                    "contexts": [float(c) for c in contexts], "factors": factors})
    if not out:
        raise RooflineError("the attention-table probe has no shape at two or more batched matrices and lengths")
    return out
