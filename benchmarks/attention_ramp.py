"""The decode attention's time beyond its price, by cache size (docs/method.md, section 2.4): every
point of the five H200 attention probes (the engine's decode attention alone) against the shipped
graph calibration's attention family, without its ramp (``attention_ramp_s`` = 0) and with it, the
median time beyond the price in each band of KV cache bytes a layer; then, from 64 sequences, each
shape's measured time less the smallest band's median beyond the price (the launch-level time the
per-layer overhead holds), over the price with the ramp, by query heads a KV head and head width
(method.md section 13: many query heads on one KV head). No GPU needed.

    .venv/bin/python benchmarks/attention_ramp.py [CALIBRATION]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
PROBES = [M / f"h200-probe-attention{kind}.json" for kind in ("", "-groups", "-widths", "-batches", "-contexts")]
BANDS_MB = (0, 4, 16, 64, 256, 1024, 4096, float("inf"))


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.fitting import _probe_attention_s, _probe_models
    from roofline.hardware import load_card
    from roofline.probes import attention_points

    path = sys.argv[1] if len(sys.argv) > 1 else ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json"
    cal = load_calibration(path)
    card = load_card(cal.card)
    points = [p for f in PROBES for p in attention_points(f, "graph_attention")]
    specs = _probe_models(card, points)
    seconds = np.array([p.seconds for p in points])
    kv_mb = np.array([p.batch * p.context_tokens * p.kv_heads * p.head_dim * 2 * 2 for p in points]) / 1e6
    without = seconds - _probe_attention_s(card, cal.model_copy(update={"attention_ramp_s": 0.0}), specs, points)
    with_ramp = seconds - _probe_attention_s(card, cal, specs, points)
    print(f"{len(points)} points of {len(PROBES)} attention probes against {Path(path).name} "
          f"(ramp {cal.attention_ramp_s * 1e6:.2f} us, knee {cal.attention_ramp_knee_s * 1e6:.2f} us)")
    print("| KV cache a layer | points | beyond the price, no ramp (median) | with the ramp (median) |")
    print("|---|---:|---:|---:|")
    for lo, hi in zip(BANDS_MB, BANDS_MB[1:]):
        s = (kv_mb >= lo) & (kv_mb < hi)
        if s.any():
            band = f"over {lo:,.0f} MB" if hi == float("inf") else f"{lo:,.0f}-{hi:,.0f} MB"
            print(f"| {band} | {int(s.sum())} | {np.median(without[s]) * 1e6:+.1f} us | "
                  f"{np.median(with_ramp[s]) * 1e6:+.1f} us |")
    launch = float(np.median(with_ramp[kv_mb < BANDS_MB[1]]))
    ratio = (seconds - launch) / (seconds - with_ramp)
    print(f"\nfrom 64 sequences: (measured - {launch * 1e6:.1f} us) / price, by query heads a KV head x head width")
    print("| group x width | points | median | 10th-90th percentile |")
    print("|---|---:|---:|---:|")
    groups = sorted({(p.q_heads // p.kv_heads, p.head_dim) for p in points})
    for g, d in groups:
        s = np.array([p.batch >= 64 and p.q_heads // p.kv_heads == g and p.head_dim == d for p in points])
        if s.any():
            lo, hi = np.percentile(ratio[s], [10, 90])
            print(f"| {g} x {d} | {int(s.sum())} | {np.median(ratio[s]):.3f} | {lo:.3f}-{hi:.3f} |")


if __name__ == "__main__":
    main()
