"""PyTorch's small-index kernels inside four MoE models' decode steps, beside the index probe's table
(no GPU needed).

    .venv/bin/python benchmarks/index_kernels_in_steps.py [CALIBRATION]

The kernels probe profiled each model's decode step cut to 2 and 6 layers (a layer is the difference
over 4): gpt-oss-20b and qwen3-30b-a3b in device calls 74 and 75, deepseek-v2-lite and mixtral-8x7b
in call 76 (hardware_profiles/measurements/h200-probe-kernels-call7{4,5}.json and -call76.json). Per
model and batch: the MoE layer's index kernels (index_select and index_add_: ``SmallIndex`` with at
most 16 routed rows, the large-index kernels above), their sum, and at the batches of at most 16
routed rows the excess over the large-index kernels of the model's smallest probed batch above the
switch, beside what the calibration's ``index_kernel_table`` (the index probe, generic shapes)
prices it at (roofline.index_kernels.layer_excess_s).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
PROBES = [M / f"h200-probe-kernels-call{n}.json" for n in (74, 75, 76)]
MODELS = ("qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite", "mixtral-8x7b")
CACHE = 520


def index_kernel(name: str) -> bool:
    """A kernel of index_select / index_add_ (small- or large-index; the 1-D large path's scatter-gather)."""
    return ("SmallIndex" in name or "LargeIndex" in name or "vectorized_gather_kernel" in name
            or ("_scatter_gather_elementwise_kernel" in name and "OpaqueType" in name))


def layer_index_s(points, model: str, batch: int) -> float | None:
    """One layer's index kernels' device seconds (6-layer cut - 2-layer cut) / 4, or None unprobed."""
    a, b = points.get((model, 2, batch, CACHE)), points.get((model, 6, batch, CACHE))
    if not a or not b:
        return None
    return sum(sign * k["seconds"] for p, sign in ((b, 1.0), (a, -1.0)) for k in p["kernels"]
               if index_kernel(k["name"])) / 4


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.index_kernels import SMALL_INDEX_MAX_ROWS, layer_excess_s, moe_index_ops
    from roofline.model_spec import load_model

    cal = load_calibration(sys.argv[1] if len(sys.argv) > 1 else ROOT / "hardware_profiles/calibrations/h200-graph.json")
    points = {(p["model"], p["layers"], p["batch"], p["context"]): p
              for path in PROBES for p in json.loads(path.read_text())["points"]}
    print(f"a MoE layer's index kernels in the decode step, us (kernels probe, {CACHE}-position cache), and the excess "
          f"over the large-index kernels: in the step / priced by the index table")
    for model in MODELS:
        spec = load_model(model)
        k = spec.experts_per_token
        batches = sorted({b for m, _, b, c in points if m == model and c == CACHE})
        sums = {b: s for b in batches if (s := layer_index_s(points, model, b)) is not None}
        above = [b for b in sums if b * k > SMALL_INDEX_MAX_ROWS]
        if not above:  # mixtral-8x7b (k 2) was probed at batches 1-8 only: 2-16 rows
            print(f"  {model} (k {k}; no probed batch above the switch): " + ", ".join(
                f"batch {b} ({b * k} rows) {1e6 * s:.1f}" for b, s in sums.items()))
            continue
        large = sums[min(above)]
        priced = layer_excess_s(cal.index_kernel_table, moe_index_ops(spec), float(k)) if cal.index_kernel_table else None
        cells = []
        for b, s in sums.items():
            rows = b * k
            cell = f"batch {b} ({rows} rows): {1e6 * s:5.1f}"
            if rows <= SMALL_INDEX_MAX_ROWS:
                cell += f", excess {1e6 * (s - large):5.1f}" + (f" / {1e6 * priced[rows]:5.1f}" if priced else "")
            cells.append(cell)
        print(f"  {model} (k {k}; large-index at batch {min(above)}: {1e6 * large:.1f} us)")
        for cell in cells:
            print(f"    {cell}")


if __name__ == "__main__":
    main()
