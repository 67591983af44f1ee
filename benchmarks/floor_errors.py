"""How far the pure roofline (a card's ceilings alone, no calibration) is from measured decode.

    .venv/bin/python benchmarks/floor_errors.py      # writes hardware_profiles/measurements/floor-errors.json

A card without a calibration gets the pure roofline, whose times are floors. ``roofline predict``
says so and by how much such floors have been off (roofline.confidence): the signed and absolute
relative errors of TPOT, TTFT (batch 64 and up) and peak memory over every committed measurement
of a real engine -- the H200 graph and hf-eager runs and the RTX 3060 lesson table -- predicted
with the datasheet ceilings only (``Calibration.uncalibrated``), per source and pooled.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
SOURCES = {
    "h200 graph (dense grid + held-out)": ("h200", ["h200-graph-grid.csv", "h200-graph-heldout.csv"]),
    "h200 graph (mixture of experts)": ("h200", ["h200-graph-moe.csv"]),
    "h200 hf-eager": ("h200", ["h200-hf-eager-grid.csv"]),
    "rtx3060 hf-eager (the lesson's table)": ("rtx3060", ["rtx3060-hf-eager-lesson.csv"]),
}
OUT = ROOT / "hardware_profiles" / "measurements" / "floor-errors.json"


def _stats(pred: list[float], meas: list[float]) -> dict | None:
    p, m = np.asarray(pred, float), np.asarray(meas, float)
    if not len(m):
        return None
    e = p / m - 1.0
    return {"mean_signed_fraction": float(e.mean()), "mape_fraction": float(np.abs(e).mean()),
            "worst_fraction": float(e[np.argmax(np.abs(e))]), "points": int(len(e))}


def main() -> None:
    import json

    from roofline.atomic import write_text_atomic
    from roofline.calibration import Calibration
    from roofline.fitting import compare
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements

    per_source, pooled = {}, {"tpot": ([], []), "ttft": ([], []), "peak_mem": ([], [])}
    for label, (card, files) in SOURCES.items():
        rows = [r for f in files for r in read_measurements(M / f)]
        kv_cache = rows[0].kv_cache
        result = compare(Calibration.uncalibrated(card, kv_cache), rows, load_card(card), tpot_statistic="mean")
        got = {"tpot": ([], []), "ttft": ([], []), "peak_mem": ([], [])}
        for r in result["rows"]:
            got["tpot"][0].append(r["tpot_predicted_s"]), got["tpot"][1].append(r["tpot_measured_s"])
            if r["ttft_measured_s"] is not None and r["batch"] >= 64:
                got["ttft"][0].append(r["ttft_predicted_s"]), got["ttft"][1].append(r["ttft_measured_s"])
            if r["peak_mem_measured_bytes"] is not None:
                got["peak_mem"][0].append(r["peak_mem_predicted_bytes"])
                got["peak_mem"][1].append(r["peak_mem_measured_bytes"])
        per_source[label] = {"files": files, **{k: _stats(*v) for k, v in got.items()}}
        for k, (p, m) in got.items():
            pooled[k][0].extend(p), pooled[k][1].extend(m)
    data = {
        "what": "the pure roofline (datasheet ceilings, no calibration) against measured decode: pred / measured - 1",
        "command": "python benchmarks/floor_errors.py",
        "pooled": {k: _stats(*v) for k, v in pooled.items()},
        "per_source": per_source,
    }
    write_text_atomic(OUT, json.dumps(data, indent=2) + "\n")
    for k, v in data["pooled"].items():
        print(f"{k:9s} mean signed {100 * v['mean_signed_fraction']:+.1f}%  MAPE {100 * v['mape_fraction']:.1f}%  "
              f"worst {100 * v['worst_fraction']:+.1f}%  ({v['points']} points)")


if __name__ == "__main__":
    main()
