"""Why the loop's prefill graphs ran slower with more slots: the attention's empty query tiles, and
how little the power cap had to do with it (device calls 95-96; docs/serving.md, "The prefill
graphs' empty attention tiles"). No GPU needed:

    .venv/bin/python benchmarks/prefill_empty_tiles.py

1. Device call 96's probe (calibrate/runs/prefill_config_probe.py, an H100): llama-3.1-8b's prefill
   graphs at 64 and 256 slots (of 512 and 1,280 rows) and qwen2.5-1.5b's at 64 and 128, each bucket
   timed cool, back to back and after a decode step of every slot; then the time per empty
   attention tile fitted on them (roofline.pass_costs.empty_tile_s_from_probe) and each point's
   extra time beside the fit; then device call 97's probe (qwen2.5-7b, llama-3.2-3b, other slot
   counts), held out, beside that price; then the same probe on an H200 (calls 98 and 99), its
   own slope and its points beside the H100's price.
2. Every committed prefill-first run of llama-3.1-8b (64 and 256 slots), qwen2.5-1.5b's in the
   calls that served it at 64 and 128 slots (91, 92 and H100 calls 1, 3) and llama-3.2-3b's at 256
   slots: the prefill passes' median device time over their price, with the loop's terms as
   shipped (no tile term) and with the tiles priced (both fitted on the same two runs); then the
   spread of that ratio over every committed prefill-first run, both ways; then the bounds the
   replays miss both ways, over the runs served after the term was written (H200 calls 98-100)
   and every H100 run.
3. Device calls 95 and 100's fixed-workload power probe (calibrate/runs/power_probe.py, on an H100
   and an H200, with the 5 ms sampler): per phase, NVML's instantaneous power, the SM clock, the share of samples carrying the
   SW power cap reason, and the units' time late in the phase over their first ones.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBE = ROOT / "hardware_profiles" / "measurements" / "h100-sxm-probe-prefill-slots-call96.json"
HELD_OUT = ROOT / "hardware_profiles" / "measurements" / "h100-sxm-probe-prefill-slots-call97.json"
#: the same probe on an H200 (device calls 98 and 99)
H200_PROBES = tuple(ROOT / "hardware_profiles" / "measurements" / f"h200-probe-prefill-slots-call{n}.json"
                    for n in (98, 99))
SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
#: the power probe's folders: call 95 on an H100, call 100 (the same script) on an H200
POWER = (ROOT / "docs" / "data" / "h100-2026-12-05" / "call95", ROOT / "docs" / "data" / "h200-2026-12-05" / "call100")
FIT = ["qwen2.5-1.5b-mixed-r40-n400-s1", "qwen2.5-7b-mixed-r25-n300-s1"]
MODELS = ("llama-3.1-8b", "qwen2.5-1.5b", "llama-3.2-3b")
#: the folders whose qwen2.5-1.5b runs are at 64 and at 128 slots side by side
SLOTS_128 = ("h200-graph-call91", "h200-graph-call92", "h100-sxm-graph-call1", "h100-sxm-graph-call3")


def probe_part() -> None:
    from roofline.pass_costs import empty_tile_s_from_probe

    probe = json.loads(PROBE.read_text(encoding="utf-8"))
    print(f"1. Device call 96 ({probe['gpu']}): prefill graph device time, ms (prompts of 256 tokens filling the bucket)")
    print("model          slots x rows  bucket     cool      hot   loaded   (decode step of every slot)")
    for c in probe["configs"]:
        for bucket, t in c["buckets"].items():
            print(f"{c['model']:14s} {c['slots']:5d} x {c['rows']:4d}  {int(bucket):6d}  {t['cool_s'] * 1e3:7.2f}  "
                  f"{t['hot_s'] * 1e3:7.2f}  {t['loaded_s'] * 1e3:7.2f}   ({t['decode_s'] * 1e3:.2f})")
    per_tile, points = empty_tile_s_from_probe(PROBE)
    print(f"\ntime per empty attention tile (least squares through the origin): {per_tile * 1e9:.3f} ns")
    _points(points, per_tile)
    held = json.loads(HELD_OUT.read_text(encoding="utf-8"))
    print(f"\n1b. Held out: device call 97 ({held['gpu']}), qwen2.5-7b at 32 and 192 slots of 1,024 rows, "
          "llama-3.2-3b at 64 and 256 of 512, priced at call 96's time per tile")
    _points(empty_tile_s_from_probe(HELD_OUT)[1], per_tile)
    for path in H200_PROBES:
        probe = json.loads(path.read_text(encoding="utf-8"))
        slope, points = empty_tile_s_from_probe(path)
        print(f"\n1c. {path.name} ({probe['gpu']}): {slope * 1e9:.3f} ns a tile by its own least squares")
        _points(points, per_tile)


def _points(points, per_tile: float) -> None:
    print("model          slots (vs)   bucket  extra ms measured  extra empty tiles  priced ms")
    for p in points:
        print(f"{p['model']:14s} {p['slots']:4d} ({p['base_slots']:3d})  {p['bucket']:6d}  {p['extra_s'] * 1e3:17.3f}  "
              f"{p['extra_tiles']:17,.0f}  {per_tile * p['extra_tiles'] * 1e3:9.3f}")


def graph_runs():
    """(folder, name, run) of every committed graph-loop serving run (not the eager ones, not the
    probe folder of the fit runs)."""
    from roofline.serving_runs import read_run, run_names

    for folder in sorted(SERVING.iterdir()):
        if "graph" not in folder.name or "eager" in folder.name or folder.name.endswith("probe"):
            continue
        for name in run_names(folder):
            yield folder, name, read_run(folder, name)


@functools.cache
def variants() -> dict:
    """{label: LoopTerms}: the shipped terms (no tile term) and the terms with the tiles priced
    (fit_loop_terms(empty_tile_probe=EMPTY_TILE_PROBE), refitted on the same two runs)."""
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import EMPTY_TILE_PROBE, fit_loop_terms
    from roofline.serving_runs import read_run

    fit_runs = [read_run(SERVING / "h200-graph-probe", n) for n in FIT]
    return {"shipped": load_loop_terms(card="h200", engine="graph"),
            "tiles priced": fit_loop_terms(fit_runs, empty_tile_probe=EMPTY_TILE_PROBE)}


def on_card(terms, card: str):
    """``terms`` as a run on ``card`` is replayed with them (carried over to another card)."""
    from roofline.pass_costs import carried_to

    return terms if card == terms.card else carried_to(terms, card)


def prefill_ratio(run, terms) -> float:
    """The run's prefill passes' median device time / price under ``terms`` on its own card."""
    from roofline.serving_replay import iteration_ratios, run_card

    return float(np.median(iteration_ratios(run, on_card(terms, run_card(run)))[1]))


def serving_part() -> None:
    from roofline.serving_replay import run_card

    print("\n2. Prefill passes' median device time / price, the loop's terms as shipped (no tile term) and with the "
          "tiles priced (fit_loop_terms(empty_tile_probe=EMPTY_TILE_PROBE), refitted on the same two runs)")
    print("card      folder                  run                                   slots  passes shipped  tiles")
    for folder, name, run in graph_runs():
        c = run.config
        if c["model"] not in MODELS or c.get("policy") != "prefill-first":
            continue
        if c["model"] == "qwen2.5-1.5b" and folder.name not in SLOTS_128:
            continue
        if c["model"] == "llama-3.2-3b" and c["max_num_seqs"] <= 64:
            continue
        ratios = [prefill_ratio(run, terms) for terms in variants().values()]
        print(f"{run_card(run):9s} {folder.name[-22:]:22s}  {name[:37]:37s} {c['max_num_seqs']:5d}  "
              f"{sum(1 for i in run.iterations if i['kind'] == 'prefill'):6d}  {ratios[0]:6.3f}  {ratios[1]:6.3f}")


def spread_part() -> None:
    """The spread over every committed prefill-first graph run of its prefill passes' median device
    time / price (the log's standard deviation), as shipped and with the tiles priced."""
    logs = {label: [] for label in variants()}
    for _, _, run in graph_runs():
        if run.config.get("policy") != "prefill-first":
            continue
        for label, terms in variants().items():
            logs[label].append(float(np.log(prefill_ratio(run, terms))))
    print(f"\n2b. Over every committed prefill-first graph run ({len(logs['shipped'])}, both cards), the prefill "
          "passes' median device time / price per run:")
    for label, values in logs.items():
        v = np.array(values)
        print(f"  {label:13s} mean {np.exp(v.mean()):.3f}, spread (std of the log) {v.std():.3f}, "
              f"farthest {np.exp(v[np.argmax(np.abs(v))]):.3f}")


#: the runs served after the tile term was written, and every H100 run (leave one card out)
AFTER = (("h200", ("h200-graph-call98", "h200-graph-call99", "h200-graph-call100")),
         ("h100-sxm", ("h100-sxm-graph-call1", "h100-sxm-graph-call3", "h100-sxm-graph-call93",
                       "h100-sxm-graph-call94", "h100-sxm-graph-call95", "h100-sxm-graph-call97")))
BOUNDS = {"throughput_tok_s": 0.05, "ttft_p50_s": 0.10, "tpot_p50_s": 0.10, "ttft_p99_s": 0.20, "tpot_p99_s": 0.20}


def replay_part() -> None:
    """The replays (compare-serving) of the runs served after the term was written, as shipped and
    with the tiles priced: how many of issue 14's bounds each misses."""
    from roofline.serving_replay import compare_rows

    print("\n2c. Bounds missed (issue 14's: throughput 5%, TTFT and TPOT p50 10%, p99 20%, the preemption "
          "behaviour) by the replays of the runs served after the term was written, and of every H100 run")
    for card, folders in AFTER:
        for label, terms in variants().items():
            runs = missed = 0
            for folder in folders:
                for r in compare_rows(SERVING / folder, on_card(terms, card), fitted=()):
                    runs += 1
                    missed += sum(abs(r[k]["error"]) > b for k, b in BOUNDS.items())
                    missed += not r["same_preemption_behaviour"]
            print(f"  {card:9s} {runs:3d} runs, {label:13s}: {missed} bounds missed")


def power_part(folder: Path, call: str) -> None:
    probe = json.loads((folder / "power-probe.json").read_text(encoding="utf-8"))
    with gzip.open(folder / "power-probe.csv.gz", "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    t = np.array([float(r["t_unix_s"]) for r in rows])
    sm = np.array([float(r["sm_mhz"]) for r in rows])
    watts = np.array([float(r["power_instant_w"] or "nan") for r in rows])
    capped = np.array([int(r["reasons"], 16) & 0x4 > 0 for r in rows])
    print(f"\n3. Device call {call}'s power probe ({probe['gpu']}, {len(rows):,} samples, median "
          f"{np.median(np.diff(t)) * 1e3:.1f} ms apart)")
    print("phase            units  power W median  SM MHz mean  capped  unit time late / first")
    for phase in probe["phases"]:
        t0, units = phase["t_origin_unix_s"], phase["units"]
        if not units:
            inside = (t >= t0) & (t <= t0 + 2.0)
            print(f"{phase['name']:16s} {0:5d}  {np.nanmedian(watts[inside]):14.0f}  {sm[inside].mean():11.0f}  "
                  f"{capped[inside].mean():6.2f}")
            continue
        end = t0 + units[-1][1] + units[-1][2] / 1e3
        inside = (t >= t0) & (t <= end)
        late = []
        for label in sorted({u[0] for u in units}):
            ms = [u[2] for u in units if u[0] == label]
            late.append(f"{label} {np.median(ms[len(ms) // 2:]) / np.median(ms[:6]):.3f}")
        print(f"{phase['name']:16s} {len(units):5d}  {np.nanmedian(watts[inside]):14.0f}  {sm[inside].mean():11.0f}  "
              f"{capped[inside].mean():6.2f}  {', '.join(late)}")


def main() -> None:
    probe_part()
    serving_part()
    spread_part()
    replay_part()
    for folder, call in zip(POWER, ("95", "100")):
        power_part(folder, call)


if __name__ == "__main__":
    main()
