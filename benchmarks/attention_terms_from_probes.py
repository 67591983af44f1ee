"""The decode attention's terms fitted on the attention probes alone, against the shipped fit (docs/method.md,
section 13, "Large dense decode batches"): kv_traffic_factor, attention_score_bytes,
attention_sequence_overhead_s, attention_efficiency and attention_lane_s_per_token refitted on the attention
and attention-groups probes' timings (what the shipped fit reads beside TPOT), the other terms as shipped;
prints both sets, their error on those probes and on the attention-batches and widths probes (held out),
and the TPOT MAPE of the held-out large-batch checks (device calls 54 and 56) with each. An experiment, not
used by the model.

    .venv/bin/python benchmarks/attention_terms_from_probes.py
"""
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
TERMS = ("kv_traffic_factor", "attention_score_bytes", "attention_sequence_overhead_s", "attention_efficiency",
         "attention_lane_s_per_token")
SCALE = np.array([1.0, 10.0, 1e-8, 0.1, 1e-9])


def main() -> None:
    from roofline import api
    from roofline import fitting
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.probes import attention_points

    shipped = load_calibration(ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json")
    card = load_card("h200")
    fit_on = attention_points(M / "h200-probe-attention.json") + attention_points(M / "h200-probe-attention-groups.json")
    held = attention_points(M / "h200-probe-attention-batches.json") + attention_points(M / "h200-probe-attention-widths.json")

    def residual(cal, points):  # as the shipped fit's probe residuals: the probe's floor + the family
        seconds = np.array([p.seconds for p in points])
        specs = fitting._probe_models(card, points)
        return (seconds.min() + fitting._probe_attention_s(card, cal, specs, points)) / seconds - 1.0

    def with_terms(x):
        return fitting._with(shipped, **{n: float(v) for n, v in zip(TERMS, x * SCALE)})

    x0 = np.array([getattr(shipped, n) for n in TERMS]) / SCALE
    probes_only = with_terms(least_squares(lambda x: residual(with_terms(x), fit_on), x0,
                                           bounds=(np.full(len(TERMS), 1e-6), np.full(len(TERMS), np.inf))).x)
    for label, cal in (("shipped", shipped), ("from the probes alone", probes_only)):
        r, h = residual(cal, fit_on), residual(cal, held)
        big_r, big_h = np.array([p.batch >= 16 for p in fit_on]), np.array([p.batch >= 16 for p in held])
        print(f"{label}: " + ", ".join(f"{n} {getattr(cal, n):.4g}" for n in TERMS))
        print(f"  probes fitted on: {100 * np.mean(np.abs(r)):.1f}% MAPE ({100 * np.mean(np.abs(r[big_r])):.1f}% from "
              f"batch 16); held-out probes: {100 * np.mean(np.abs(h)):.1f}% ({100 * np.mean(np.abs(h[big_h])):.1f}%)")
        for f in ("h200-graph-check-call54.csv", "h200-graph-check-call56.csv"):
            print(f"  {f}: TPOT {100 * api.compare([M / f], calibration=cal)['tpot_mape_fraction']:.2f}% MAPE")


if __name__ == "__main__":
    main()
