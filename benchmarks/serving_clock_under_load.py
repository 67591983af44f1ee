"""The GPU's clock while the serving loop is overloaded (device call 93, docs/serving.md, "Why the
remaining tails miss"): no GPU needed.

    .venv/bin/python benchmarks/serving_clock_under_load.py

Calls 93 and 94 (the same script, `calibrate/runs/h200-call93.sh`, on two H100 machines) served
call 91's two llama-3.1-8b streams (256 slots of 512 rows, short requests at 150 and 250 req/s)
with nvidia-smi sampling the SM clock, the power draw and the throttle reasons every 100 ms
(docs/data/h100-2026-12-05/call93/ and call94/, clocks-*.csv). For each run this prints,
over the samples inside its serving window (the run's ``times.started``, to the second, through
its ``serve_wall_s`` and one second more): the SM clock's mean, median and least, its mean over
the card's 1,980 MHz boost clock, the median power and how many samples carried the SW power cap
reason (bit 0x4); and beside them the run's passes' median device time over their price
(roofline.serving_replay.pass_ratios, the "GPU / price" column of `roofline compare-serving`).
These runs were read at first as the clock slowing the compute-bound prefill graphs; device calls
95-96 showed the graphs' extra time was the 256 slots' empty attention tiles instead (the clock
read every 5 ms did not follow it): benchmarks/prefill_empty_tiles.py, docs/serving.md.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: (call, its clock samples' folder, its serving runs' folder)
CALLS = tuple((call, ROOT / "docs" / "data" / "h100-2026-12-05" / call,
               ROOT / "hardware_profiles" / "measurements" / "serving" / f"h100-sxm-graph-{call}")
              for call in ("call93", "call94"))
RUNS = (("l8a", "llama-3.1-8b-short-r150-n600-s703"), ("l8b", "llama-3.1-8b-short-r250-n600-s703"))
BOOST_MHZ = 1980.0  # nvidia-smi clocks.max.sm on the lent H100s and H200s (docs/data/*/clocks.txt)
POWER_CAP_BIT = 0x4  # clocks_event_reasons: SW power cap


def read_samples(path: Path) -> list[tuple]:
    """(time, SM MHz, power W, reasons) per nvidia-smi line; lines that are not samples skipped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6:
            continue
        try:
            t = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            out.append((t, float(parts[1].split()[0]), float(parts[3].split()[0]), int(parts[5], 16)))
        except ValueError:
            continue
    return out


def window(samples, run_json: dict) -> list[tuple]:
    """The samples inside the run's serving window."""
    times = run_json["times"]
    start = dt.datetime.fromisoformat(times["started"]).replace(tzinfo=None)
    end = start + dt.timedelta(seconds=float(times["serve_wall_s"]) + 1.0)
    return [s for s in samples if start <= s[0] <= end]


def run_window(clocks: Path, folder: Path, label: str, name: str) -> list[tuple]:
    """The samples of run ``name`` (its sampler's file ``clocks-LABEL.csv``) inside its window."""
    return window(read_samples(clocks / f"clocks-{label}.csv"),
                  json.loads((folder / f"run-{name}.json").read_text(encoding="utf-8")))


def main() -> None:
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import pass_ratios
    from roofline.serving_runs import read_run

    terms = load_loop_terms(card="h100-sxm", engine="graph")
    print("call    run                                  samples  SM MHz mean / median / least  mean/boost  power W  "
          "power-capped  GPU / price: decode  prefill")
    for call, clocks, folder in CALLS:
        for label, name in RUNS:
            inside = run_window(clocks, folder, label, name)
            sm = np.array([s[1] for s in inside])
            power = np.array([s[2] for s in inside])
            capped = sum(1 for s in inside if s[3] & POWER_CAP_BIT)
            ratios = pass_ratios(read_run(folder, name), terms)
            print(f"{call:7s} {name:36s} {len(inside):7d}  {sm.mean():6.0f} / {np.median(sm):6.0f} / {sm.min():6.0f}  "
                  f"{sm.mean() / BOOST_MHZ:10.3f}  {np.median(power):7.0f}  {capped:5d} of {len(inside):3d}  "
                  f"{ratios['decode']:19.3f}  {ratios['prefill']:7.3f}")


if __name__ == "__main__":
    main()
