"""Does a dense matmul whose K or N is an odd multiple of 64 run slower than its bytes say? Device
call 78's probe read (no GPU needed).

    .venv/bin/python benchmarks/linear_alignment.py

hardware_profiles/measurements/h200-probe-linear-alignment-call78.json (calibrate/runs/linear_alignment.py)
timed F.linear at 1-64 rows with K stepped by 64 at N = 4,096 and N stepped at K = 4,096, around
2,048, 3,072, 4,608 and 6,144, with and without a bias. Each odd width (B - 64, B + 64) is set beside
the line through its two multiple-of-128 neighbours (B - 128 and B, or B and B + 128): its time over
that line's. Then the whole step: falcon-7b (hidden 4,544 = 71 x 64) beside mistral-7b-v0.3 (4,096),
each cut to 2 and 6 layers, a layer's CUDA-graph time and its cuBLAS kernels (the kernels probe,
h200-probe-kernels-call78.json).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
M = ROOT / "hardware_profiles" / "measurements"


def main() -> None:
    data = json.loads((M / "h200-probe-linear-alignment-call78.json").read_text())
    t = {(p["n"], p["k"], p["bias"], p["m"]): p["seconds"] for p in data["points"]}
    ratios: dict = {}
    for (n, k, bias, m), s in t.items():
        sweep, w, other = ("K", k, n) if n == 4096 and k % 128 else ("N", n, k) if k == 4096 and n % 128 else (None,) * 3
        if sweep is None:
            continue
        at = (lambda x: t.get((other, x, bias, m))) if sweep == "K" else (lambda x: t.get((x, other, bias, m)))
        lo, hi = at(w - 64), at(w + 64)
        if lo is None or hi is None:
            continue
        ratios.setdefault((sweep, bias), []).append((w, m, s / ((lo + hi) / 2)))
    print("an odd multiple of 64 over the mean of its two multiple-of-128 neighbours, F.linear at 1-64 rows:")
    for (sweep, bias), vals in sorted(ratios.items()):
        r = [x for _, _, x in vals]
        worst = max(vals, key=lambda v: abs(v[2] - 1.0))
        print(f"  {sweep} stepped, bias {bias!s:5}: median {statistics.median(r):.3f}, range {min(r):.3f}-{max(r):.3f} "
              f"({len(r)} points; farthest: width {worst[0]} at {worst[1]} rows, {worst[2]:.3f})")
    kernels = json.loads((M / "h200-probe-kernels-call78.json").read_text())["points"]
    pts = {(p["model"], p["layers"], p["batch"]): p for p in kernels}
    print("a layer's time, us (6-layer cut - 2-layer cut) / 4: CUDA graph / cuBLAS kernels")
    for model in ("falcon-7b", "mistral-7b-v0.3"):
        for batch in (1, 4):
            a, b = pts[(model, 2, batch)], pts[(model, 6, batch)]
            gemm = sum(sign * k["seconds"] for p, sign in ((b, 1.0), (a, -1.0)) for k in p["kernels"]
                       if k["name"].startswith("nvjet") or "splitK" in k["name"]) / 4
            print(f"  {model:16s} batch {batch}: {1e6 * (b['graph_step_s'] - a['graph_step_s']) / 4:6.1f} / {1e6 * gemm:6.1f}")


if __name__ == "__main__":
    sys.exit(main())
