"""Are the matmul table's slow points the card's or the measurement's? (device call 113)

A card's gemm table (calibrate.probes gemm: each (M, N, K) timed once, the median of 5 graph
replays) has points slower than the same (N, K) at a larger M by 10% or more: 424 of the H100
table's 7,901, 230 of the H200's. Some are cuBLAS choosing another kernel at that size (which a
run would meet too), some may be a slow moment of the measurement: the H100 table's (64, 16384,
4096) reads 103 us where call 112 timed the same shape alone at 49 us. This re-times the WORST
such points of the committed table of the card it runs on and, beside each, the next larger M
it was slower than, three times each, interleaved, as the gemm probe times them:

    python3 calibrate/runs/gemm_recheck.py OUT.json [WORST]

WORST (default 24): how many points, the largest ratios first, those with M >= 16 (the prefill
graphs' buckets start at 16 tokens). PROBE_DEVICE=cpu is a smoke run against the H200's table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def slow_points(points: list[dict], worst: int, min_m: int = 16) -> list[dict]:
    """The ``worst`` points slower than the same (N, K) at some larger M by 10% or more (M >=
    ``min_m``): {m, n, k, seconds, m_after, seconds_after (the fastest larger M), ratio}."""
    by: dict = {}
    for p in points:
        by.setdefault((int(p["n"]), int(p["k"])), []).append((int(p["m"]), float(p["seconds"])))
    out = []
    for (n, k), pts in by.items():
        pts.sort()
        for i, (m, t) in enumerate(pts[:-1]):
            m2, t2 = min(pts[i + 1:], key=lambda x: x[1])
            if m >= min_m and t > 1.10 * t2:
                out.append({"m": m, "n": n, "k": k, "seconds": t, "m_after": m2, "seconds_after": t2, "ratio": t / t2})
    return sorted(out, key=lambda p: -p["ratio"])[:worst]


def main() -> None:
    import torch

    from calibrate.runs.prefill_kernel_walk import time_linear

    out, worst = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 24
    device = torch.device(os.environ.get("PROBE_DEVICE", "cuda"))
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    card = "h200" if "H200" in name or device.type == "cpu" else "h100-sxm"
    table = ROOT / "hardware_profiles" / "measurements" / f"{card}-probe-gemm.json"
    points = slow_points(json.loads(table.read_text(encoding="utf-8"))["points"], worst)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cpu":  # a smoke run: the smallest three, tiny and few
        points = sorted(points, key=lambda p: p["m"] * p["n"] * p["k"])[:3]
    for p in points:
        p["again_s"], p["after_again_s"] = [], []
        for _ in range(3):
            p["again_s"].append(time_linear(p["m"], p["n"], p["k"], device, dtype))
            p["after_again_s"].append(time_linear(p["m_after"], p["n"], p["k"], device, dtype))
        print(f"({p['m']}, {p['n']}, {p['k']}): table {p['seconds'] * 1e6:.1f} us, again "
              f"{', '.join(f'{t * 1e6:.1f}' for t in p['again_s'])}; M {p['m_after']}: table "
              f"{p['seconds_after'] * 1e6:.1f}, again {', '.join(f'{t * 1e6:.1f}' for t in p['after_again_s'])}",
              flush=True)
    tmp = str(out) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"gpu": name, "table": str(table.relative_to(ROOT)), "points": points}, f, indent=1)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
