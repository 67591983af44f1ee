"""Variants of the H200 graph calibration's overhead terms, refitted and held out: what was tried
for qwen2.5-0.5b's over-predicted small-batch steps (issue 9; docs/calibration.md).

    .venv/bin/python benchmarks/overhead_variants.py

Each variant holds some decode terms at a value and refits the rest exactly as
benchmarks/make_calibrations.py fits the shipped calibration (the default grid of qwen2.5-1.5b,
qwen2.5-7b, llama-3.1-8b; the attention and layers probes; no cross-validation), then prints the TPOT MAPE
of the held-out models: the five of h200-graph-heldout.csv (prompts 512-16384) and the prompt 128
/ gen 128 runs of device call 4 (h200-graph-128-call4.csv). Nothing is written. ~1 minute.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
GRID_MODELS = ("qwen2.5-1.5b", "qwen2.5-7b", "llama-3.1-8b")

#: (label, held terms, with the layers probe?)
VARIANTS = (
    ("shipped (all fitted, with the layers probe)", {}, True),
    ("without the layers probe (as shipped before)", {}, False),
    ("additive overhead (exponent 1)", {"overhead_exponent": 1.0}, True),
    ("no step overhead, additive", {"overhead_exponent": 1.0, "step_overhead_s": 0.0}, True),
    ("step overhead 0.10 ms", {"step_overhead_s": 1.0e-4}, True),
    ("step overhead 0.15 ms, additive", {"step_overhead_s": 1.5e-4, "overhead_exponent": 1.0}, True),
)


def main() -> None:
    from roofline import api
    from roofline.fitting import compare, fit_calibration
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements
    from roofline.probes import attention_points, layers_points

    card = load_card("h200")
    rows = api.read_measurement_files([M / "h200-graph-grid.csv"], GRID_MODELS)
    bw, fl = api.read_ceilings(M / "h200-ceilings-grid.json")
    probe = attention_points(M / "h200-probe-attention.json")
    cuts = layers_points(M / "h200-probe-layers.json")
    held = {"held-out 512-16k": read_measurements(M / "h200-graph-heldout.csv"),
            "128/128 call 4": [r for r in read_measurements(M / "h200-graph-128-call4.csv") if r.model not in GRID_MODELS]}
    for label, fixed, with_cuts in VARIANTS:
        cal = fit_calibration(rows, card, measured_bandwidth_bytes_per_s=bw, measured_peak_flop_per_s=fl,
                              attention_probe=probe, cross_validate=False, fixed=fixed,
                              layers_probe=cuts if with_cuts else ())
        print(f"{label}: step {cal.step_overhead_s * 1e3:.3f} ms + {cal.layer_overhead_s * 1e6:.1f} us/layer, "
              f"exponent {cal.overhead_exponent:.3f}; in-sample TPOT {100 * cal.fit_report['in_sample']['tpot_mape_fraction']:.1f}%")
        for name, rs in held.items():
            res = compare(cal, rs, card)
            print(f"  {name}: " + ", ".join(f"{m} {100 * e['tpot_mape_fraction']:.1f}%" for m, e in sorted(res["per_model"].items())))


if __name__ == "__main__":
    main()
