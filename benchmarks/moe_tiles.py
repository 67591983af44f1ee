"""The MoE probe's grouped matmuls (gate-up + down) against a tile count, the evidence for a next step
of the MoE decode model (docs/method.md, section 13): an expert's r routed rows run ceil(r/64) 64-row
tiles (torch._grouped_mm's small path, up to 128 rows an expert averaged over all experts, 128 columns
a tile) or ceil(r/128) 128-row tiles of 256 columns (its large path), r ~ Binomial(T k, 1/E);
time = max(tile FLOPs / R, touched experts' bytes / BW) + f, with R (one per path), BW and f fitted on
qwen3-30b-a3b's points alone and every other shape held out. Not used by the model.

    .venv/bin/python benchmarks/moe_tiles.py
"""
import json
import math
from pathlib import Path
from collections import defaultdict

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
d = json.load(open(ROOT / 'hardware_profiles/measurements/h200-probe-moe.json'))
t = defaultdict(dict)
for p in d['points']:
    k = (p['model'], p['tokens']); t[k][p['stage']] = p['seconds']; t[k]['p'] = p


def exp_tiles(n, E, h):  # E[sum over experts of ceil(r/h)], r ~ Bin(n, 1/E)
    out, j = 0.0, 0
    while True:
        sf = binom.sf(h * j, n, 1.0 / E)  # P(r > h j)
        if sf < 1e-9: break
        out += sf; j += 1
    return E * out


def parts(p):
    T, k, E, h, I = p['tokens'], p['top_k'], p['experts'], p['hidden'], p['moe_inter']
    n = T * k
    small = n / E <= 128
    tm = 64 if small else 128; tn = 128 if small else 256
    flop = 0.0
    for N, K in ((2 * I, h), (h, I)):
        flop += exp_tiles(n, E, tm) * math.ceil(N / tn) * tm * tn * K * 2
    bytes_ = p['experts_touched'] * 3 * h * I * 2
    return small, flop, bytes_


rows = []
for (m, T), s in t.items():
    if 'gemm_gate_up' in s and 'gemm_down' in s:
        small, flop, b = parts(s['p'])
        rows.append((m, T, small, flop, b, s['gemm_gate_up'] + s['gemm_down']))
q = [r for r in rows if r[0] == 'qwen3-30b-a3b']


def model(x, r):
    Rs, Rb, BW, f = x
    m, T, small, flop, b, meas = r
    return max(flop / ((Rs if small else Rb) * 1e12), b / (BW * 1e12)) + f * 1e-6


def routed(p):  # the same without tiles: the routed rows' own FLOPs, one rate on both paths
    T, k, h, I = p['tokens'], p['top_k'], p['hidden'], p['moe_inter']
    return 2.0 * 3.0 * T * k * h * I


fit = least_squares(lambda x: [model(x, r) / r[5] - 1 for r in q], [300, 600, 3.0, 15], bounds=([50, 100, 0.5, 0], [1000, 1000, 5, 100]))
print('fitted on qwen3-30b-a3b: small-tile %.0f TFLOP/s, large-tile %.0f, bytes %.2f TB/s, fixed %.1f us' % tuple(fit.x))
for m in sorted({r[0] for r in rows}):
    errs = [(r[1], model(fit.x, r) / r[5] - 1) for r in rows if r[0] == m]
    print(f"{m:16s} MAPE {100*np.mean([abs(e) for _, e in errs]):5.1f}% | " + " ".join(f"{T}:{100*e:+.0f}" for T, e in errs if T <= 4096))
# the baseline: rows' own FLOPs at one rate (what the step model's form amounts to), fitted alike
base = [(m, T, True, routed(t[(m, T)]['p']), b, meas) for m, T, small, flop, b, meas in rows]
qb = [r for r in base if r[0] == 'qwen3-30b-a3b']
fit_b = least_squares(lambda x: [model(x, r) / r[5] - 1 for r in qb], [300, 600, 3.0, 15],
                      bounds=([50, 100, 0.5, 0], [1000, 1000, 5, 100]))
print('without tiles (rows at one rate), fitted alike: %.0f TFLOP/s, bytes %.2f TB/s, fixed %.1f us'
      % (fit_b.x[0], fit_b.x[2], fit_b.x[3]))
for m in sorted({r[0] for r in base}):
    errs = [(r[1], model(fit_b.x, r) / r[5] - 1) for r in base if r[0] == m]
    print(f"{m:16s} MAPE {100*np.mean([abs(e) for _, e in errs]):5.1f}% | " + " ".join(f"{T}:{100*e:+.0f}" for T, e in errs if T <= 4096))
