"""The tensor-parallel link as measured: NCCL all-reduce and all-gather timed at decode sizes by
the TP harness (calibrate/tp_engine.collective_probe), fitted to latency + bytes / bandwidth.

Ring algorithms on n GPUs: an all-reduce of b bytes moves 2(n-1)/n x b per GPU and direction,
an all-gather of b output bytes (n-1)/n x b. Times are the in-CUDA-graph ones (the decode step is
captured): ``graph_s_per_call``. Fitted (least squares on relative error):

    all-reduce(b) = a_reduce + 2(n-1)/n x b / bw      all-gather(b) = a_gather + (n-1)/n x b / bw

The three numbers go into a Calibration (allreduce_latency_s, allgather_latency_s,
allreduce_bandwidth_bytes_per_s) and price the collectives of roofline.step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from roofline.atomic import read_json
from roofline.errors import RooflineError


def _points(data: dict, key: str, world: int) -> tuple[np.ndarray, np.ndarray]:
    pts = [p for p in data.get(key, []) if p.get("graph_s_per_call")]
    if not pts:
        raise RooflineError(f"collectives file has no in-graph {key} timings")
    return np.array([float(p["bytes"]) for p in pts]), np.array([float(p["graph_s_per_call"]) for p in pts])


def link_terms(path: str | Path) -> dict:
    """{allreduce_latency_s, allgather_latency_s, allreduce_bandwidth_bytes_per_s} fitted to a file."""
    from scipy.optimize import least_squares

    data = read_json(Path(path), "collectives")
    if not isinstance(data, dict) or "world" not in data:
        raise RooflineError(f"{path}: not a collectives file (no world)")
    n = int(data["world"])
    rb, rt = _points(data, "all_reduce", n)
    gb, gt = _points(data, "all_gather", n)
    reduce_share, gather_share = 2.0 * (n - 1) / n, (n - 1) / n

    def residual(x):
        a_r, a_g, inv_bw = np.exp(x)
        return np.concatenate([(a_r + reduce_share * rb * inv_bw) / rt - 1.0,
                               (a_g + gather_share * gb * inv_bw) / gt - 1.0])

    x0 = np.log([float(rt.min()), float(gt.min()), 1.0 / 2e11])
    fit = least_squares(residual, x0)
    a_r, a_g, inv_bw = np.exp(fit.x)
    return {"allreduce_latency_s": float(a_r), "allgather_latency_s": float(a_g),
            "allreduce_bandwidth_bytes_per_s": float(1.0 / inv_bw)}


def link_errors(path: str | Path, terms: dict) -> dict:
    """Mean and worst relative error of the fitted link over the file's timings (for the report)."""
    data = read_json(Path(path), "collectives")
    n = int(data["world"])
    out = {}
    for key, latency, share in (("all_reduce", terms["allreduce_latency_s"], 2.0 * (n - 1) / n),
                                ("all_gather", terms["allgather_latency_s"], (n - 1) / n)):
        b, t = _points(data, key, n)
        err = np.abs((latency + share * b / terms["allreduce_bandwidth_bytes_per_s"]) / t - 1.0)
        out[key] = {"mape_fraction": float(err.mean()), "worst_fraction": float(err.max()), "points": int(len(b))}
    return out
