"""Why the grouped-mm table hands over to the tiles at many rows an expert (roofline.step.StepModel.
_measured_experts: the table up to TABLE_ROWS_UP_TO rows an expert, the tiles from TILE_ROWS_FROM, log
time blended between). No GPU needed.

    .venv/bin/python benchmarks/grouped_mm_blend.py

The held-out MoE rows of the shipped H200 graph calibration's validation, priced three ways, each with
the MoE terms refitted on qwen3-30b-a3b's rows as benchmarks/make_calibrations.py fits them: the
table alone (no hand-over), the tiles alone (no table), and the blend (shipped). Printed: TPOT MAPE
over every held-out MoE row and over prompts 512+, the worst rows, and mixtral-8x7b's batches of
80-256 rows an expert (its 8 experts: one routing draw's tiles stray furthest at few experts). Then
the table's level: its seconds scaled by a factor and the MoE overhead refitted at each, the fitted
model's (qwen3-30b-a3b's) in-sample TPOT MAPE by factor; and qwen3-30b-a3b's routed experts at one
token, a MoE layer, priced by the table and by the tiles.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
M = ROOT / "hardware_profiles" / "measurements"


def refit(grouped_mm: bool):
    from make_calibrations import MOE_FIT_MODEL

    from roofline import api
    from roofline.calibration import load_calibration
    from roofline.measurements import read_measurements, write_measurements

    # the shipped terms, less the table (put back by the fit where grouped_mm)
    base = load_calibration(ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json").model_copy(
        update={"expert_gemm_table": None})
    with tempfile.TemporaryDirectory() as tmp:
        rows = [r for r in read_measurements(M / "h200-graph-moe.csv") if r.model == MOE_FIT_MODEL]
        return api.fit([write_measurements(Path(tmp) / "moe.csv", rows)], card="h200",
                       base=base, moe_probe=M / "h200-probe-moe.json",
                       grouped_mm_probe=[M / "h200-probe-grouped-mm-call72.json"] if grouped_mm else None)


def main() -> None:
    import roofline.step as step
    from heldout_acceptance import held_rows

    from roofline.fitting import compare
    from roofline.hardware import load_card

    card = load_card("h200")
    shipped = (step.TABLE_ROWS_UP_TO, step.TILE_ROWS_FROM)
    for label, grouped_mm, edges in (("table alone", True, (1e12, 2e12)), ("tiles alone", False, shipped),
                                     ("blend (shipped)", True, shipped)):
        step.TABLE_ROWS_UP_TO, step.TILE_ROWS_FROM = edges
        cal = refit(grouped_mm)
        rows = held_rows(cal, "moe")
        out = []
        for model in sorted({r.model for r in rows}):
            for row in compare(cal, [r for r in rows if r.model == model], card)["rows"]:
                out.append((row["tpot_predicted_s"] / row["tpot_measured_s"] - 1.0, row["model"], row["prompt_tokens"],
                            row["gen_tokens"], row["batch"]))
        e = np.array([x[0] for x in out])
        long = np.array([x[0] for x in out if x[2] >= 512])
        worst = sorted(out, key=lambda x: -abs(x[0]))[:4]
        mixtral = [x for x in out if x[1] == "mixtral-8x7b" and 80 <= x[4] * 2 / 8 <= 256]
        print(f"== {label}: moe_layer_overhead_s {cal.moe_layer_overhead_s * 1e6:.1f} us; held-out TPOT MAPE "
              f"{100 * np.mean(np.abs(e)):.2f}% over {len(e)} rows, {100 * np.mean(np.abs(long)):.2f}% at prompts 512+")
        print("   worst: " + ", ".join(f"{m} {p}+{g} b{b} {100 * x:+.1f}%" for x, m, p, g, b in worst))
        print("   mixtral-8x7b at 80-256 rows an expert: " + ", ".join(
            f"{p}+{g} b{b} {100 * x:+.1f}%" for x, _, p, g, b in sorted(mixtral, key=lambda x: (x[2], x[4]))))
    step.TABLE_ROWS_UP_TO, step.TILE_ROWS_FROM = shipped
    from roofline.grouped_mm import read_grouped_mm
    from roofline.model_spec import load_model

    table = read_grouped_mm([M / "h200-probe-grouped-mm-call72.json"])
    print("== the table's seconds x factor, the MoE overhead refitted: qwen3-30b-a3b in-sample TPOT MAPE")
    base = refit(True)
    for factor in (0.9, 0.95, 1.0, 1.05, 1.1, 1.15):
        scaled = {**table, "seconds": (np.asarray(table["seconds"]) * factor).tolist()}
        cal = refit_with_table(base, scaled)
        print(f"   x{factor:.2f}: {100 * cal.fit_report['extra']['in_sample']['tpot_mape_fraction']:.2f}% "
              f"(overhead {cal.moe_layer_overhead_s * 1e6:.1f} us)")
    spec = load_model("qwen3-30b-a3b")
    tiles = refit(False)
    for label, cal in (("table", base), ("tiles", tiles)):
        parts = step.StepModel(spec, card, cal).pass_parts(step.decode_work(1.0, 1000.0))
        print(f"   qwen3-30b-a3b, one token, routed experts a MoE layer by the {label}: "
              f"{(parts.expert_memory_s + parts.expert_compute_s) / spec.moe_layers * 1e6:.1f} us")


def refit_with_table(base, table):
    """The MoE stage again, the table replaced by ``table`` (its seconds held as given)."""
    from make_calibrations import MOE_FIT_MODEL

    from roofline.fitting import fit_extra_terms
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements

    rows = [r for r in read_measurements(M / "h200-graph-moe.csv") if r.model == MOE_FIT_MODEL]
    return fit_extra_terms(base.model_copy(update={"expert_gemm_table": table}), rows, load_card("h200"))


if __name__ == "__main__":
    main()
