"""Peak memory of the held-out rows with and without one layer's decode attention scores
(roofline.memory.decode_score_bytes: the graph engine's ``decode_score_buffers`` fact, 2), no GPU
needed.

    .venv/bin/python benchmarks/decode_score_memory.py [CALIBRATION]

Every held-out row of the calibration's dense and MoE validation files (benchmarks/heldout_acceptance.py's
rows, every prompt) is compared by ``roofline compare`` twice: as the calibration has it and with
``decode_score_buffers`` 0. Prints the peak-memory MAPE, the worst point and the points over 3% of
each, and the ten points the term moves most. Where a model has many query heads and one KV head
(falcon-7b: 71 over 1) a layer's scores are 3.5% of its whole cache (2 x 71 / (32 layers x 2 x 64)).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    from heldout_acceptance import held_rows

    from roofline.calibration import load_calibration
    from roofline.fitting import compare
    from roofline.hardware import load_card

    path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "hardware_profiles/calibrations/h200-graph.json")
    cal = load_calibration(path)
    card = load_card(cal.card)
    without = cal.model_copy(update={"decode_score_buffers": 0.0})
    print(f"{path}: decode_score_buffers {cal.decode_score_buffers:g}")
    for kind in ("dense", "moe"):
        rows = held_rows(cal, kind)
        points = []
        for model in sorted({r.model for r in rows}):
            mine = [r for r in rows if r.model == model]
            a, b = (compare(c, mine, card)["rows"] for c in (cal, without))
            for x, y in zip(a, b):
                if x["peak_mem_measured_bytes"]:
                    points.append((x["peak_mem_predicted_bytes"] / x["peak_mem_measured_bytes"] - 1.0,
                                   y["peak_mem_predicted_bytes"] / y["peak_mem_measured_bytes"] - 1.0,
                                   model, x["prompt_tokens"], x["gen_tokens"], x["batch"]))
        with_, without_ = np.array([p[0] for p in points]), np.array([p[1] for p in points])
        print(f"{kind}: {len(points)} points; peak memory MAPE without the scores {100 * np.mean(np.abs(without_)):.2f}% "
              f"(worst {100 * np.max(np.abs(without_)):.2f}%, over 3%: {int(np.sum(np.abs(without_) > 0.03))}), "
              f"with them {100 * np.mean(np.abs(with_)):.2f}% (worst {100 * np.max(np.abs(with_)):.2f}%, "
              f"over 3%: {int(np.sum(np.abs(with_) > 0.03))})")
        for p in sorted(points, key=lambda p: -abs(p[0] - p[1]))[:10]:
            print(f"   {p[2]} {p[3]}/{p[4]} batch {p[5]}: {100 * p[1]:+.2f}% -> {100 * p[0]:+.2f}%")


if __name__ == "__main__":
    main()
