"""A variant of the grouped-mm table's interpolation, not adopted: across output widths N, by waves of
the small-tile path's clusters instead of log N, at the table's nodes of up to 64 rows an expert
(one 64-row tile). No GPU needed.

    .venv/bin/python benchmarks/grouped_mm_waves.py

torch._grouped_mm's small-tile path runs 64 x 128 tiles in clusters of two CTAs along M, persistent
over the H200's 132 SMs: 66 clusters a wave. At G experts of one tile's rows a matmul of N columns is
ceil(G x ceil(N / 128) / 66) waves, and the probe's time steps with them (four experts, K 2,048: N
2,048 one wave, 21 us; 3,072-4,096 two, 30-36 us; 6,144 three, 48 us; h200-probe-grouped-mm-call72.json).
The variant interpolates between the two probed N either side linearly in waves where they differ
(gpt-oss's 5,760 columns at four experts are three waves, as 6,144's), in log N otherwise; everything
else as roofline.grouped_mm. Printed: the MoE probe's matmuls at 1-256 tokens and device call 70's
gpt-oss shapes, priced both ways (benchmarks/grouped_mm_table.py's comparisons); then the held-out
MoE rows at prompts 512+ (benchmarks/heldout_acceptance.py's bars) with the shipped calibration's
MoE terms refitted on qwen3-30b-a3b's rows as benchmarks/make_calibrations.py fits them, both ways.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
CLUSTERS_PER_WAVE = 66  # 132 SMs, two CTAs a cluster
ONE_TILE_ROWS = 64


def by_waves(table, k, n):
    """roofline.grouped_mm.shape_log_seconds with the N interpolation by waves (see the module doc)."""
    from roofline.grouped_mm import _bracket

    logs = np.log(np.asarray(table["seconds"], dtype=float))
    lk, ln = np.log(np.asarray(table["ks"], dtype=float)), np.log(np.asarray(table["ns"], dtype=float))
    xk, xn = math.log(k), math.log(n)
    ck, cn = min(max(xk, lk[0]), lk[-1]), min(max(xn, ln[0]), ln[-1])
    ik, fk = _bracket(lk, ck)
    i_n, fn = _bracket(ln, cn)
    lo, hi = table["ns"][i_n], table["ns"][i_n + 1]
    f = np.full((len(table["groups"]), len(table["rows"])), fn)
    for gi, g in enumerate(table["groups"]):
        def waves(width, g=g):
            return math.ceil(g * math.ceil(width / 128) / CLUSTERS_PER_WAVE)
        if waves(hi) > waves(lo) and lo <= n <= hi:
            fw = min(max((waves(n) - waves(lo)) / (waves(hi) - waves(lo)), 0.0), 1.0)
            f[gi, np.asarray(table["rows"]) <= ONE_TILE_ROWS] = fw
    out = sum(wa * ((1 - f) * logs[a, i_n] + f * logs[a, i_n + 1]) for a, wa in ((ik, 1 - fk), (ik + 1, fk)))
    return out + (xk - ck) + (xn - cn)


def main() -> None:
    import grouped_mm_table as bench

    from roofline.grouped_mm import nodes_seconds, read_grouped_mm, shape_log_seconds

    table = read_grouped_mm(bench.TABLES["call 72 (shipped)"])
    for label, shape in (("log N (shipped)", shape_log_seconds), ("waves", by_waves)):
        def priced(t, k, n, touched, rows, shape=shape):
            return nodes_seconds((np.log(t["groups"]), np.log(t["rows"]), shape(t, k, n)), touched, rows / touched)

        bench.priced_s = priced
        print(f"== across N by {label}: MoE probe matmuls, 1-256 tokens (priced / measured - 1)")
        for model, errs in bench.moe_probe_errors(table).items():
            decode = [(t, x) for t, x in errs if t <= 256]
            print(f"  {model:16s} MAPE {100 * np.mean([abs(x) for _, x in decode]):4.1f}%  "
                  + " ".join(f"{t}:{100 * x:+.0f}" for t, x in decode))
        gpt = [(n, k, t, x) for n, k, t, x in bench.widths_errors(table) if (n, k) in ((5760, 2880), (2880, 2880))]
        print("  call 70, gpt-oss's two shapes: " + "  ".join(f"{n}x{k} T{t} {100 * x:+.0f}%" for n, k, t, x in gpt))
    import roofline.grouped_mm as gm

    shipped = gm.shape_log_seconds
    for label, shape in (("log N (shipped)", shipped), ("waves", by_waves)):
        gm.shape_log_seconds = shape  # what roofline.grouped_mm.layer_nodes calls
        s = held_out_moe()
        print(f"== held-out MoE rows, prompts 512+, by {label}: TPOT MAPE {100 * s['tpot_mape']:.2f}%, contexts over 6%: "
              f"{s['contexts_over_bar']}, points over 15%: {s['points_over_bar']}  ("
              + ", ".join(f"{m} {p}/{g} {100 * v:.1f}%" for (m, p, g), v in sorted(s["per_context"].items()) if v > 0.06)
              + ")")
    gm.shape_log_seconds = shipped


def held_out_moe() -> dict:
    """The shipped calibration's MoE terms refitted (make_calibrations' MoE stage, on its dense terms),
    scored on the held-out MoE rows (benchmarks/heldout_acceptance.py)."""
    import tempfile

    from heldout_acceptance import errors, held_rows, summary
    from make_calibrations import MOE_FIT_MODEL

    from roofline import api
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements, write_measurements

    m = ROOT / "hardware_profiles" / "measurements"
    with tempfile.TemporaryDirectory() as tmp:
        rows = [r for r in read_measurements(m / "h200-graph-moe.csv") if r.model == MOE_FIT_MODEL]
        cal = api.fit([write_measurements(Path(tmp) / "moe.csv", rows)], card="h200",
                      base=ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json",
                      moe_probe=m / "h200-probe-moe.json", grouped_mm_probe=[m / "h200-probe-grouped-mm-call72.json"])
    return summary(errors(cal, held_rows(cal, "moe"), load_card("h200")))


if __name__ == "__main__":
    main()
