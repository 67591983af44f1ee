"""Device call 74's rows beside the earlier ones at the same model, prompt and batch: what making the
graph engine's routing uniform (calibrate.graph_engine.ROUTINGS) changed, and the step model's TPOT
error on the new rows (no GPU needed).

    .venv/bin/python benchmarks/moe_routing_uniform.py [CALIBRATION]

For each row of hardware_profiles/measurements/h200-graph-moe-check-call74.csv: its TPOT and the
experts one step touched over the uniform count E·(1 − (1 − k/E)^B), beside the same point's in the
earlier MoE files (the routing of the random weights), whether its prefill ran (a skipped prefill
leaves a random cache: the weights' routing was uniform there already), and the calibration's TPOT
error on the new row.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
EARLIER = ("h200-graph-moe.csv", "h200-graph-moe-call19.csv", "h200-graph-call22.csv", "h200-graph-check-call25.csv",
           "h200-graph-moe-check-call32.csv", "h200-graph-moe-check-call34.csv", "h200-graph-moe-check-call40.csv",
           "h200-graph-moe-check-call51.csv", "h200-graph-moe-check-call53.csv")


def uniform(row) -> float:
    e, k = int(row.extra["experts"]), int(row.extra["top_k"])
    return e * (1.0 - (1.0 - k / e) ** row.batch)


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.fitting import compare
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements

    cal = load_calibration(sys.argv[1] if len(sys.argv) > 1 else ROOT / "hardware_profiles/calibrations/h200-graph.json")
    new = [r for r in read_measurements(M / "h200-graph-moe-check-call74.csv") if r.ok]
    old = {}
    for name in EARLIER:  # the later file's row replaces an earlier one (call 22 re-measured gpt-oss-20b)
        for r in read_measurements(M / name):
            if r.ok and r.extra.get("moe_routing", "weights") == "weights":
                old[(r.model, r.prompt_tokens, r.batch)] = r
    predicted = {}
    for model in sorted({r.model for r in new}):
        for p in compare(cal, [r for r in new if r.model == model], load_card(cal.card))["rows"]:
            predicted[(model, p["prompt_tokens"], p["batch"])] = p["tpot_predicted_s"]
    print(f"{'model':17s} {'prompt':>6s} {'batch':>5s} prefill  TPOT ms new / old (change)   touched/uniform new / old  "
          f"predicted error (new)")
    for r in new:
        o = old.get((r.model, r.prompt_tokens, r.batch))
        t_new = float(r.extra["experts_touched_mean"]) / uniform(r)
        line = f"{r.model:17s} {r.prompt_tokens:6d} {r.batch:5d} {r.extra.get('prefill', ''):7s} {1e3 * r.tpot_s:7.2f}"
        if o is not None:
            line += (f" / {1e3 * o.tpot_s:7.2f} ({100 * (r.tpot_s / o.tpot_s - 1):+5.1f}%)   "
                     f"{t_new:.2f} / {float(o.extra['experts_touched_mean']) / uniform(o):.2f}")
        else:
            line += f"{'':27s}{t_new:.2f}"
        err = predicted.get((r.model, r.prompt_tokens, r.batch))
        if err is not None and r.model not in cal.fitted_on:
            line += f"     {100 * (err / r.tpot_s - 1):+5.1f}%"
        print(line)


if __name__ == "__main__":
    main()
