"""A decode layer's time (the layers probe) less its four linears priced two ways: their weights'
bytes at the card's read bandwidth, and the gemm probe's measured F.linear times (roofline.gemm).

    .venv/bin/python benchmarks/layers_vs_gemm_table.py

A layer's time is the slope of the step time over the 2, 4, 8 and 12 layers the probe cut each
model to (device call 16, hardware_profiles/measurements/h200-probe-layers.json, a 256-position
static cache); the step's own time is the intercept. If one pricing of the linears were right, the
layer's leftover (norms, rotary, attention, the gaps between kernels) would be nearly the same on
every model; docs/method.md, section 2.5, reads the result. No GPU needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"


def main() -> None:
    from roofline.gemm import GemmTable

    # the read bandwidth the graph calibration prices weights at (its ceilings probe's stream)
    bandwidth = json.loads((ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json").read_text())[
        "measured_bandwidth_bytes_per_s"]
    print(f"read bandwidth {bandwidth / 1e9:,.0f} GB/s (h200-graph.json)")
    table = GemmTable(json.loads((M / "h200-probe-gemm.json").read_text())["points"], "h200-probe-gemm.json")
    probe = json.loads((M / "h200-probe-layers.json").read_text())
    print("model            batch  layer_us  gemm_us  left_gemm_us  bytes_us  left_bytes_us  step_own_us")
    for batch in sorted({p["batch"] for p in probe["points"]}):
        by_model: dict = {}
        for p in probe["points"]:
            if not p["variant"] and p["batch"] == batch:
                by_model.setdefault(p["model"], []).append((p["layers"], p["step_s"]))
        for model, pts in by_model.items():
            layer_s, own_s = np.polyfit([a for a, _ in pts], [b for _, b in pts], 1)
            c = json.loads((ROOT / "roofline" / "catalog" / model / "config.json").read_text())
            h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
            hd = c.get("head_dim") or h // heads
            q, kvd, inter = heads * hd, kv * hd, c["intermediate_size"]
            shapes = [(q + 2 * kvd, h), (h, q), (2 * inter, h), (h, inter)]  # qkv, o, gate+up, down
            gemm_s = sum(table.seconds(batch, n, k) for n, k in shapes)
            bytes_s = 2 * sum(n * k for n, k in shapes) / bandwidth
            print(f"{model:16s} {batch:5d} {layer_s * 1e6:9.1f} {gemm_s * 1e6:8.1f} {(layer_s - gemm_s) * 1e6:13.1f}"
                  f" {bytes_s * 1e6:9.1f} {(layer_s - bytes_s) * 1e6:14.1f} {own_s * 1e6:12.1f}")


if __name__ == "__main__":
    main()
