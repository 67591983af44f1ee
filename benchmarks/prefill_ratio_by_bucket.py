"""The loop's prefill passes against their price, by token bucket and by attention layout: full
multi-head attention (K/V heads = query heads) against grouped queries (docs/serving.md, "What the
thirty-third session's device calls said").

    .venv/bin/python benchmarks/prefill_ratio_by_bucket.py

For every committed prefill-first graph run on the H200 with the host probe (the folders
benchmarks/fit_serving_loop.py counts, the fit runs left out): each prefill pass's device time over
the shipped terms' price (roofline.serving_replay.iteration_ratios), grouped by the power-of-two
bucket of its prompt tokens; printed per model (median, passes) and then per layout, each the
median of its models' medians. The loop runs two K/V repeats a layer with grouped queries and
none with full attention (calibrate/serving_loop.py, ``_forward``); the price's bytes know it
(``loop_elementwise_elements``), its fixed time a layer was fitted on two grouped-query models. No
GPU needed (~3 s).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"


def main() -> None:
    from benchmarks.fit_serving_loop import FIT, PROBED
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import iteration_ratios
    from roofline.serving_runs import read_run, run_names

    terms = load_loop_terms(card="h200", engine="graph")
    per_model: dict = defaultdict(lambda: defaultdict(list))
    layout = {}
    for sub in ("h200-graph-probe", *PROBED):
        for name in run_names(SERVING / sub):
            run = read_run(SERVING / sub, name)
            if name in FIT or run.config.get("policy", "prefill-first") != "prefill-first":
                continue
            cost, prefill, _ = iteration_ratios(run, terms)
            spec, model = cost.step.spec, run.config["model"]
            layout[model] = "full" if spec.num_key_value_heads == spec.num_attention_heads else "grouped"
            passes = [it for it in run.iterations if it["kind"] == "prefill"]
            for it, ratio in zip(passes, prefill):
                bucket = 1 << int(np.ceil(np.log2(max(float(it["prefill_tokens"]), 1.0))))
                per_model[model][bucket].append(ratio)
    buckets = sorted({b for m in per_model.values() for b in m if b >= 64})
    print("prefill passes' device time / price (shipped terms, H200), median (passes) by prompt-token bucket")
    print(f"{'model':18s} {'attention':9s} " + " ".join(f"{b:>12d}" for b in buckets))
    for model in sorted(per_model, key=lambda m: (layout[m], m)):
        cells = [f"{np.median(v):.3f} ({len(v):3d})" if len(v := per_model[model].get(b, [])) >= 5 else f"{'-':>12s}"
                 for b in buckets]
        print(f"{model:18s} {layout[model]:9s} " + " ".join(f"{c:>12s}" for c in cells))
    print()
    for kind in ("grouped", "full"):
        models = [m for m in per_model if layout[m] == kind]
        cells = []
        for b in buckets:
            meds = [float(np.median(per_model[m][b])) for m in models if len(per_model[m].get(b, [])) >= 5]
            cells.append(f"{np.median(meds):.3f} ({len(meds):2d}m)" if meds else "-")
        print(f"{kind:9s} attention, the median of {len(models)} models' medians: " + "  ".join(
            f"{b}: {c}" for b, c in zip(buckets, cells)))


if __name__ == "__main__":
    main()
