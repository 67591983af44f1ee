"""How uniformly the graph harness's random-weight routers route, and what the step model's uniform
routing costs the MoE held-out TPOT where they do not (no GPU needed).

    .venv/bin/python benchmarks/moe_harness_routing.py [CALIBRATION]

Every MoE row of the calibration's ``fit_report["validation"]["moe"]`` files records
``experts_touched_mean``: the distinct experts one eager decode step at the end of the point routed
to, averaged over the MoE layers (calibrate.graph_engine.GraphEngine.experts_touched). Part 1 prints
it over the uniform expectation E·(1 − (1 − k/E)^B), by model and batch. Part 2 prices each held-out
row of a model whose ratio leaves 0.97-1.03 twice: as ``roofline compare`` does (uniform routing) and
at the routing skew s (roofline.step.routing_probabilities) whose E_touched(B) equals the measured
count (s = 0 where the measured count is at or above the uniform one), and prints the TPOT error of
each by context (prompts 512 and up). The measured count is one step's, so part 2 reads what the
routing explains, not a pricing `compare` uses.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def touched(experts: int, k: int, skew: float, batch: int) -> float:
    """E_touched(batch) at routing skew ``skew`` (0: uniform, E·(1 − (1 − k/E)^B)): Σ_i 1 − (1 − r_i)^B
    over roofline.step.routing_probabilities, as StepModel's table computes it."""
    from roofline.step import routing_probabilities

    return float(np.sum(1.0 - (1.0 - np.minimum(routing_probabilities(experts, k, skew), 1.0)) ** batch))


def skew_for(experts: int, k: int, batch: int, target: float) -> float:
    """The skew s in [0, 4] whose E_touched(batch) is ``target`` (touched falls as s grows), by bisection."""
    lo, hi = 0.0, 4.0
    if touched(experts, k, 0.0, batch) <= target:
        return 0.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if touched(experts, k, mid, batch) > target else (lo, mid)
    return 0.5 * (lo + hi)


def main() -> None:
    from heldout_acceptance import MIN_PROMPT, held_rows

    from roofline.calibration import load_calibration
    from roofline.decode import mean_tpot_s
    from roofline.hardware import load_card
    from roofline.model_spec import load_model
    from roofline.step import StepModel

    path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "hardware_profiles/calibrations/h200-graph.json")
    cal = load_calibration(path)
    card = load_card(cal.card)
    rows = [r for r in held_rows(cal, "moe") if r.extra.get("experts_touched_mean")]
    ratio = defaultdict(list)
    for r in rows:
        spec = load_model(r.model)
        ratio[(r.model, r.batch)].append(float(r.extra["experts_touched_mean"])
                                         / touched(spec.num_experts, spec.experts_per_token, 0.0, r.batch))
    print("1. measured experts touched over uniform routing's, by model and batch (min-max over the points)")
    skewed = set()
    for model in sorted({m for m, _ in ratio}):
        cells = [(b, min(v), max(v)) for (m, b), v in sorted(ratio.items()) if m == model and 1 < b <= 64]
        print(f"   {model:18s}", "  ".join(f"b{b}: {lo:.2f}-{hi:.2f}" for b, lo, hi in cells))
        if any(lo < 0.97 or hi > 1.03 for _, lo, hi in cells):
            skewed.add(model)
    print(f"2. TPOT error by context, uniform routing (as compare prices) vs the measured count's skew: {sorted(skewed)}")
    for model in sorted(skewed):
        spec = load_model(model)
        errs = defaultdict(lambda: ([], []))
        uniform = StepModel(spec, card, cal)
        for r in rows:
            if r.model != model or r.prompt_tokens < MIN_PROMPT or r.kv_cache != "static":
                continue
            args = (np.array([float(r.batch)]), np.array([float(r.prompt_tokens)]), np.array([float(r.gen_tokens)]), "static")
            s = skew_for(spec.num_experts, spec.experts_per_token, r.batch, float(r.extra["experts_touched_mean"]))
            for i, m in enumerate((uniform, StepModel(spec, card, cal, routing_skew=s) if s > 0 else uniform)):
                errs[(r.prompt_tokens, r.gen_tokens)][i].append(float(mean_tpot_s(m, *args)[0]) / r.tpot_s - 1.0)
        uni = [np.mean(np.abs(u)) for u, _ in errs.values()]
        mat = [np.mean(np.abs(v)) for _, v in errs.values()]
        print(f"   {model}: TPOT MAPE over its contexts {100 * np.mean(uni):.2f}% -> {100 * np.mean(mat):.2f}%; "
              f"contexts over 6%: {sum(x > 0.06 for x in uni)} -> {sum(x > 0.06 for x in mat)}")
        for (p, g), (u, v) in sorted(errs.items()):
            print(f"     {p}/{g}: {100 * np.mean(np.abs(u)):.1f}% -> {100 * np.mean(np.abs(v)):.1f}%")


if __name__ == "__main__":
    main()
