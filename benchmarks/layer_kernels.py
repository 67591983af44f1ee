"""What one decode layer's time is made of, model by model (device call 61's kernels probe).

    .venv/bin/python benchmarks/layer_kernels.py [hardware_profiles/measurements/h200-probe-kernels-call61.json]

The probe profiled each model's eager decode step cut to 2 and 4 layers (batches 1 and 2, a
256-position static cache), kernel by kernel, beside the same step replayed from a CUDA graph. Half
the difference of 4 and 2 layers is one layer: its graph time, its kernels' device time, the gaps
between them (graph less kernels), its weight bytes at the shipped graph calibration's bandwidth, the
kernels' time beyond those bytes, and of it the RMSNorm kernel's (two a layer; PyTorch's
vectorized layer-norm kernel, one block a row) and cuBLAS's split-K reduction's (a kernel of its own,
for the matmul shapes cuBLAS splits along K). Prints a markdown table (microseconds).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT = ROOT / "hardware_profiles" / "measurements" / "h200-probe-kernels-call61.json"


def kernel_s(point: dict, needle: str) -> float:
    """Device seconds a step of the point's kernels whose name holds ``needle`` (of the kept ones)."""
    return sum(k["seconds"] for k in point["kernels"] if needle in k["name"])


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.model_spec import load_model

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    points = {(p["model"], p["layers"], p["batch"]): p for p in json.loads(path.read_text())["points"]}
    cal = load_calibration(ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json")
    bandwidth = cal.bandwidth_efficiency * cal.measured_bandwidth_bytes_per_s
    print("| model | hidden | batch | layer (graph) | kernels | gaps | weights at the fitted bandwidth "
          "| kernels beyond the weights | of it RMSNorm (2) | split-K reduce |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    norms, hidden = [], []
    for model in dict.fromkeys(m for m, _, _ in points):
        spec = load_model(model)
        weights_s = 2.0 * (spec.linear_params_per_layer + spec.bias_params_per_layer) / bandwidth
        for batch in (1, 2):
            two, four = points.get((model, 2, batch)), points.get((model, 4, batch))
            if two is None or four is None:
                continue
            layer = lambda f: (f(four) - f(two)) / 2.0  # noqa: E731
            graph, kernels = layer(lambda p: p["graph_step_s"]), layer(lambda p: p["kernel_s"])
            # the norm kernel and the reduction run in every layer: the 4-layer step's share a layer
            # (the step's own final norm counted as a fifth of the 4-layer step's norms)
            norm = kernel_s(four, "layer_norm_kernel") * 2.0 / 9.0
            reduce = kernel_s(four, "splitKreduce") / 4.0
            if batch == 1:
                norms.append(norm)
                hidden.append(spec.hidden_size)
            print(f"| {model} | {spec.hidden_size:,} | {batch} | {graph * 1e6:.1f} | {kernels * 1e6:.1f} | "
                  f"{(graph - kernels) * 1e6:.1f} | {weights_s * 1e6:.1f} | {(kernels - weights_s) * 1e6:.1f} | "
                  f"{norm * 1e6:.1f} | {reduce * 1e6:.1f} |")
    slope, icpt = np.polyfit(np.array(hidden, dtype=float), np.array(norms), 1)
    print(f"\nRMSNorm a layer at batch 1 (two calls): {icpt * 1e6:.2f} us + {slope * 1e9:.2f} ns x hidden "
          f"(least squares over {len(norms)} models; {slope * 1e9 / 2:.2f} ns an element a call)")


if __name__ == "__main__":
    main()
