"""gpt-oss-20b's decode layer against qwen3-30b-a3b's, one architecture difference at a time (device
call 79's walk), and the layer-features probe's six runs by cache length (device call 80), read
against a calibration (no GPU needed).

    .venv/bin/python benchmarks/layer_walk.py [CALIBRATION]

Part 1: each walk variant's layer (its 6- and 2-layer cuts' graph step difference over 4), measured
and priced, with its kernel launches a layer (hardware_profiles/measurements/
h200-probe-layer-walk-call79.json). Part 2: where qwen3-30b-a3b's layer and its ``gpt_oss`` variant
differ at one sequence, kernel by kernel (launches and microseconds a layer; "(gaps)": the graph
step's time less the eager step's kernels). Part 3: the layer-features probe's qwen3-30b-a3b
variants in each run, measured less priced without the feature terms, and the feature times the
reader fits from each set of runs: the runs at 2,048 positions read gpt-oss's MoE layer low, since
qwen3-30b-a3b's own softmax there still runs the warp kernel and the gpt_oss variant's, with the
sink in its row, does not. Part 4: each walk variant's grouped GEMMs (torch._grouped_mm's kernel in
the eager step) against what the calibration prices the routed experts at.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
WALK = M / "h200-probe-layer-walk-call79.json"
RUNS = {"call 39 (2,048)": M / "h200-probe-layer-features.json", "call 39 again (2,048)": M / "h200-probe-layer-features-2.json",
        **{f"call 80 {r[:-1]} ({r[-1]})": M / f"h200-probe-layer-features-call80-{r}.json"
           for r in ("520a", "2048b", "4104c", "520d")}}


def _priced(cal, card, model, overrides, layers, batch, context):
    """A variant cut to ``layers`` layers priced at ``batch`` sequences of ``context`` positions (its
    windowed layers at their ring)."""
    from roofline.probes import variant_spec
    from roofline.step import StepModel, decode_work

    step = StepModel(variant_spec(model, overrides, layers), card, cal)
    ring = None if step.window is None else float(batch * min(context, step.window))
    return step.pass_s(decode_work(float(batch), float(batch * context), ring))


def _family(name: str) -> str:
    return re.sub(r"<.*", "", name)[:48]


def part_walk(cal, card) -> None:
    d = json.loads(WALK.read_text())
    ov = {(m, v): tuple(tuple(x) for x in o) for m, v, o in d["variants"]}
    pts = {(p["model"], p["variant"], p["layers"], p["batch"], p["context"]): p for p in d["points"]}
    lo, hi = d["layers"]
    print(f"1. a layer ({hi}-layer cut - {lo}-layer cut) / {hi - lo}, us: measured / priced (priced / measured - 1), "
          f"kernel launches a layer")
    for m, v in ov:
        cells = []
        for b, c in ((1, 520), (4, 520), (16, 520), (1, 4104)):
            a, z = pts.get((m, v, lo, b, c)), pts.get((m, v, hi, b, c))
            if not a or not z:
                continue
            meas = (z["graph_step_s"] - a["graph_step_s"]) / (hi - lo)
            price = (_priced(cal, card, m, ov[(m, v)], hi, b, c) - _priced(cal, card, m, ov[(m, v)], lo, b, c)) / (hi - lo)
            launches = (sum(k[1] for k in z["kernels"]) - sum(k[1] for k in a["kernels"])) / (hi - lo)
            cells.append(f"b{b}/{c}: {1e6 * meas:5.1f} / {1e6 * price:5.1f} ({100 * (price / meas - 1):+5.1f}%) {launches:.0f}")
        print(f"   {m:13s} {v or '(itself)':31s} " + " | ".join(cells))
    print("2. qwen3-30b-a3b's layer and its gpt_oss variant at one sequence, 520 positions: launches and us a layer")
    per = []
    for v in ("", "gpt_oss"):
        a, z = pts[("qwen3-30b-a3b", v, lo, 1, 520)], pts[("qwen3-30b-a3b", v, hi, 1, 520)]
        fam: dict = defaultdict(lambda: [0.0, 0.0])
        for p, sign in ((z, 1.0), (a, -1.0)):
            for name, n, s in p["kernels"]:
                fam[_family(name)][0] += sign * n / (hi - lo)
                fam[_family(name)][1] += sign * s / (hi - lo)
        fam["(gaps)"][1] = (z["graph_step_s"] - a["graph_step_s"]) / (hi - lo) - sum(x[1] for x in fam.values())
        per.append(fam)
    keys = sorted(set(per[0]) | set(per[1]), key=lambda k: -abs(per[1][k][1] - per[0][k][1]))
    for k in keys:
        x, y = per[0][k], per[1][k]
        if abs(y[1] - x[1]) >= 0.5e-6:
            print(f"   {x[0]:4.0f} {1e6 * x[1]:6.1f} | {y[0]:4.0f} {1e6 * y[1]:6.1f} | {1e6 * (y[1] - x[1]):+6.1f}  {k}")
    print(f"   total {1e6 * sum(x[1] for x in per[0].values()):.1f} | {1e6 * sum(y[1] for y in per[1].values()):.1f}")


def part_runs(cal, card) -> None:
    from roofline.probes import layer_feature_seconds, priced_per_layer_s, read_layer_features

    bare = cal.model_copy(update={"layer_feature_overhead_s": None})
    print("3. the layer-features probe's qwen3-30b-a3b variants, each run: a layer measured less priced "
          "without the feature terms, us, batches 1 / 4 / 16")
    for label, path in RUNS.items():
        runs = read_layer_features([path])
        cells = []
        for v in ("", "gpt_oss", "mla", "mla shared"):
            net = []
            for b in (1, 4, 16):
                got = runs.per_layer_s("qwen3-30b-a3b", v, b, 0)
                if got is None:
                    continue
                s, layers, context = got
                net.append(s - priced_per_layer_s(bare, card, "qwen3-30b-a3b", runs.grid[("qwen3-30b-a3b", v)],
                                                  layers, b, context))
            cells.append(f"{v or 'itself'}: " + " / ".join(f"{1e6 * x:5.1f}" for x in net))
        print(f"   {label:22s} " + " | ".join(cells))
    sets = {"the two runs at 2,048 (the fit until call 80)": [RUNS["call 39 (2,048)"], RUNS["call 39 again (2,048)"]],
            "call 80's four": [p for k, p in RUNS.items() if k.startswith("call 80")],
            "call 80's at 520 and 4,104": [p for k, p in RUNS.items() if k.startswith("call 80") and "2048" not in k],
            "all six (the shipped fit)": list(RUNS.values())}
    print("   feature times fitted from (us a layer):")
    for label, paths in sets.items():
        got = layer_feature_seconds(paths, cal, card)
        print(f"     {label:46s} " + "  ".join(f"{k} {1e6 * x:5.2f}" for k, x in got.items()))


def part_experts(cal, card) -> None:
    from roofline.probes import variant_spec
    from roofline.step import StepModel, decode_work

    d = json.loads(WALK.read_text())
    ov = {(m, v): tuple(tuple(x) for x in o) for m, v, o in d["variants"]}
    pts = {(p["model"], p["variant"], p["layers"], p["batch"], p["context"]): p for p in d["points"]}
    lo, hi = d["layers"]
    print("4. the grouped GEMMs a layer, us at 520 positions: the eager step's torch._grouped_mm kernel / "
          "the routed experts priced (priced / measured - 1)")
    for m, v in ov:
        cells = []
        for b in (1, 4, 16):
            a, z = pts[(m, v, lo, b, 520)], pts[(m, v, hi, b, 520)]
            grouped = [sum(s for k, _, s in p["kernels"] if "grouped_mm" in k) for p in (a, z)]
            meas = (grouped[1] - grouped[0]) / (hi - lo)
            parts = [StepModel(variant_spec(m, ov[(m, v)], n), card, cal).pass_parts(decode_work(float(b), float(b * 520)))
                     for n in (lo, hi)]
            price = (max(parts[1][7], parts[1][8]) - max(parts[0][7], parts[0][8])) / (hi - lo)
            cells.append(f"b{b}: {1e6 * meas:6.1f} / {1e6 * price:6.1f} ({100 * (price / meas - 1):+5.1f}%)")
        print(f"   {m:13s} {v or '(itself)':31s} " + " | ".join(cells))


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card

    cal = load_calibration(sys.argv[1] if len(sys.argv) > 1 else ROOT / "hardware_profiles/calibrations/h200-graph.json")
    card = load_card(cal.card)
    part_walk(cal, card)
    part_runs(cal, card)
    part_experts(cal, card)


if __name__ == "__main__":
    main()
