"""The MoE probe's grouped matmuls at few tokens against a count of waves, the evidence for why
gpt-oss-20b's decode at batches 1-4 is still priced fast (docs/method.md, section 13). Not used by
the model. Its last lines fit both forms on every shape at once.

On the small-tile path torch._grouped_mm runs clusters of two 64-row CTAs along M that share each
128-column tile of weights, persistent over the H200's 132 SMs: 66 clusters a wave. An expert's r
rows take ceil(r / 128) cluster tiles per 128 columns (r ~ Binomial(T, k/E)); a matmul of N
columns over K costs ceil(cluster tiles / 66) waves, each reading K x 128 x 2 bytes a cluster, plus
a fixed time. Fitted on qwen3-30b-a3b's points alone (the small path: T k < 129 E), every other
shape held out; beside it, the touched experts' bytes at one bandwidth plus a fixed time, fitted
alike (what the step model's bytes side amounts to).

    .venv/bin/python benchmarks/moe_waves.py
"""
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS_A_WAVE = 132 // 2  # the H200's SMs, two CTAs a cluster
data = json.load(open(ROOT / "hardware_profiles/measurements/h200-probe-moe.json"))
stages = defaultdict(dict)
for p in data["points"]:
    stages[(p["model"], p["tokens"])][p["stage"]] = p["seconds"]
    stages[(p["model"], p["tokens"])]["point"] = p


def cluster_tiles(tokens, experts, top_k):
    """E[Σ_e ceil(r_e / 128)]: each cluster holds 128 of an expert's rows (two 64-row tiles)."""
    r = np.arange(tokens + 1)
    return experts * float(np.dot(binom.pmf(r, tokens, top_k / experts), np.ceil(r / 128)))


points = []
for (model, tokens), s in sorted(stages.items()):
    p = s["point"]
    e, k, h, inter = p["experts"], p["top_k"], p["hidden"], p["moe_inter"]
    if "gemm_gate_up" not in s or tokens * k >= 129 * e:
        continue
    units = cluster_tiles(tokens, e, k)
    waves = [(math.ceil(units * math.ceil(n / 128) / CLUSTERS_A_WAVE), kk * 128 * 2) for n, kk in ((2 * inter, h), (h, inter))]
    points.append((model, tokens, waves, p["experts_touched"] * 3 * h * inter * 2, s["gemm_gate_up"] + s["gemm_down"]))


def by_waves(x, pt):
    return sum(w * nbytes / (x[0] * 1e9) + x[1] * 1e-6 for w, nbytes in pt[2])


def by_bytes(x, pt):
    return pt[3] / (x[0] * 1e12) + x[1] * 1e-6


for name, price, start, lo, hi, units in (("waves", by_waves, [40, 10], [1, 0], [1000, 100], "GB/s a cluster, %.1f us a matmul"),
                                          ("bytes", by_bytes, [3, 20], [0.1, 0], [20, 200], "TB/s, %.1f us")):
    fit_on = [pt for pt in points if pt[0] == "qwen3-30b-a3b"]
    fit = least_squares(lambda x: [price(x, pt) / pt[4] - 1 for pt in fit_on], start, bounds=(lo, hi))
    print(f"by {name}, fitted on qwen3-30b-a3b: %.2f {units}" % tuple(fit.x))
    for model in sorted({pt[0] for pt in points}):
        errs = [(pt[1], price(fit.x, pt) / pt[4] - 1) for pt in points if pt[0] == model]
        print(f"  {model:16s} MAPE {100 * np.mean([abs(x) for _, x in errs]):5.1f}% | "
              + " ".join(f"{t}:{100 * x:+.0f}" for t, x in errs))

# the same two forms fitted on every shape's points at once (in sample): a shape whose mean signed
# error stays far from 0 runs at a rate of its own that neither form carries
for name, price, start, lo, hi in (("waves", by_waves, [40, 10], [1, 0], [1000, 100]),
                                   ("bytes", by_bytes, [3, 20], [0.1, 0], [20, 200])):
    fit = least_squares(lambda x: [price(x, pt) / pt[4] - 1 for pt in points], start, bounds=(lo, hi))
    print(f"by {name}, fitted on all seven shapes: mean signed error by model | "
          + " ".join(f"{m}: {100 * np.mean([price(fit.x, pt) / pt[4] - 1 for pt in points if pt[0] == m]):+.1f}%"
                     for m in sorted({pt[0] for pt in points})))
