"""How far two measurements of the same stream are apart: the serving loop's noise floor.

Several streams were served twice on the H200 (same model, configuration, stream and seed; a
different call, often a different machine): calls 5-7 and call 10, calls 11 and 12, the fit
streams in call 12 again, three of call 12's streams in call 13. This prints, for every such pair (prefill-first runs), the second
measurement against the first: throughput, TTFT and TPOT p50 / p99, and the preemptions. No
simulator can be closer to one measurement than the measurements are to each other: the spread
is the floor under the replay's errors (docs/serving.md).

    .venv/bin/python benchmarks/serving_repeatability.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
#: folder -> the calls it holds, in the order they were measured
FOLDERS = (("h200-graph", "5-7"), ("h200-graph-probe", "10"), ("h200-graph-call11", "11"), ("h200-graph-call12", "12"),
           ("h200-graph-call13-sync", "13"))
KEYS = ("throughput_tok_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


def pairs() -> list[tuple[str, str, str, dict, dict]]:
    """(run, first call, later call, first summary, later summary) for every stream served twice or more."""
    from roofline.serving_runs import read_run, run_names

    seen: dict[str, list] = {}
    for folder, call in FOLDERS:
        for name in run_names(SERVING / folder):
            run = read_run(SERVING / folder, name)
            if run.config.get("policy", "prefill-first") == "prefill-first":
                seen.setdefault(name, []).append((call, run.summary))
    out = []
    for name, runs in sorted(seen.items()):
        for (c0, s0), (c1, s1) in zip(runs, runs[1:]):
            out.append((name, c0, c1, s0, s1))
    return out


def main() -> None:
    rows = pairs()
    print(f"{'run':40} {'calls':>8} " + " ".join(f"{k.removesuffix('_s'):>13}" for k in KEYS) + "  preemptions")
    worst = dict.fromkeys(KEYS, 0.0)
    for name, c0, c1, s0, s1 in rows:
        errs = {k: s1[k] / s0[k] - 1 for k in KEYS}
        for k in KEYS:
            worst[k] = max(worst[k], abs(errs[k]))
        print(f"{name:40} {c0 + '/' + c1:>8} " + " ".join(f"{100 * errs[k]:+12.1f}%" for k in KEYS)
              + f"  {s0['preemptions']} / {s1['preemptions']}")
    print(f"{len(rows)} pairs; largest difference: " + ", ".join(f"{k.removesuffix('_s')} {100 * v:.1f}%"
                                                              for k, v in worst.items()))


if __name__ == "__main__":
    main()
