"""Does a run's host probe read the run's own host? For each run of the given folders: its host time (the
next iteration's start - this one's start - its device time, summed), the median of that over its decode
iterations, the host probe's decode figure (16 sequences; the geometric mean of before and after the clock,
as the replay takes it), the wide probe's where the run has one (`python -m calibrate.serving_job
--wide-host-probe`: every slot decoding), and the TTFT p50; then, over the runs, the rank correlation
(Spearman) of each probe and of the TTFT p50 with the host time, among the runs of one stream (same
name). Device calls 146-148 served one stream
again and again on one machine for this (docs/serving.md, "What call 147 said").

    .venv/bin/python benchmarks/serving_host_probe_width.py h100-sxm-graph-call147-rep1 ...
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"


def _probe_s(config: dict, key: str) -> float | None:
    before, after = config.get(key), config.get(f"{key}_after")
    if not before:
        return None
    if not after:
        return before["decode_host_s"]
    return math.sqrt(before["decode_host_s"] * after["decode_host_s"])


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    for rank, i in enumerate(order):
        out[i] = float(rank)
    return out


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (no ties expected: these are measured times); None under 3 points."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


def rows(folders: list[str]) -> list[dict]:
    from roofline.serving_runs import read_run, run_names

    out = []
    for folder in folders:
        path = Path(folder) if Path(folder).is_dir() else SERVING / folder
        for name in run_names(path):
            run = read_run(path, name)
            its = run.iterations
            gaps = [(a["kind"], b["t_start_s"] - a["t_start_s"] - a["device_s"]) for a, b in zip(its, its[1:])]
            decode = [g for kind, g in gaps if kind == "decode"]
            out.append({"folder": path.name, "run": name, "host_s": sum(g for _, g in gaps),
                        "decode_host_median_s": statistics.median(decode) if decode else None,
                        "probe_s": _probe_s(run.config, "host_probe"),
                        "wide_probe_s": _probe_s(run.config, "host_probe_wide"),
                        "ttft_p50_s": run.summary["ttft_p50_s"]})
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    table = rows(argv)
    if not table:
        print("no complete serving run in those folders", file=sys.stderr)
        return 1
    print(f"{'folder':38} {'run':36} {'host s':>7} {'decode ms':>9} {'probe ms':>8} {'wide ms':>8} {'TTFT p50 ms':>11}")
    for r in table:
        wide = f"{1e3 * r['wide_probe_s']:8.3f}" if r["wide_probe_s"] is not None else f"{'-':>8}"
        probe = f"{1e3 * r['probe_s']:8.3f}" if r["probe_s"] is not None else f"{'-':>8}"
        print(f"{r['folder']:38} {r['run']:36} {r['host_s']:7.3f} {1e3 * r['decode_host_median_s']:9.3f} {probe} "
              f"{wide} {1e3 * r['ttft_p50_s']:11.1f}")
    for name in sorted({r["run"] for r in table}):  # one stream's runs against each other
        same = [r for r in table if r["run"] == name]
        for label, key in (("probe (16 sequences)", "probe_s"), ("wide probe (every slot)", "wide_probe_s"),
                           ("TTFT p50", "ttft_p50_s")):
            pairs = [(r[key], r["host_s"]) for r in same if r[key] is not None]
            rho = spearman([p for p, _ in pairs], [h for _, h in pairs])
            print(f"{name}: rank correlation with the host time, {label:24} " +
                  (f"{rho:+.2f} over {len(pairs)} runs" if rho is not None else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
