"""How far TPOT's 16-block mean (roofline.decode.mean_decode: the generation's steps in 16 equal
blocks, each priced at its mean context) is from the step-by-step mean, over random generations
(docs/method.md section 6). No GPU needed.

    .venv/bin/python benchmarks/tpot_blocks_error.py [--examples N] [--seed S]

Draws N (card, catalog model, prompt 1..8192, gen 64..8192, batch 1..4096, calibration auto or none)
with numpy's default_rng(S), a third of them on the H200, and prints, for the H200's graph
calibration, every other calibration, and the uncalibrated roofline apart: the largest relative
error (and the case), how often it exceeds 0.1% plus a sixteenth of the largest jump between two
consecutive steps (the bound section 6 gave before the twenty-fourth session), and the most any
generation used of 0.1% plus roofline.decode.block_spread (the bound that always holds: a block
priced at a context inside it is off its own steps' mean by at most the price's spread over them).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BLOCKS = 16


def one(card, model, prompt, gen, cal, batch):
    """(relative error, the jump bound, the spread bound) of one generation."""
    from roofline.decode import block_spread, decode_step, mean_decode
    from roofline.scenario import make_scenario

    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal)
    each = decode_step(sc.step, batch, prompt + np.arange(1, max(gen - 1, 1) + 1))["step_s"]
    exact = float(each.mean())
    jump = float(np.max(np.abs(np.diff(each)))) if len(each) > 1 else 0.0
    blocks = float(mean_decode(sc.step, np.array([batch]), prompt, gen, "dynamic")["step_s"][0])
    return abs(blocks / exact - 1.0), 1e-3 + jump / exact / BLOCKS, 1e-3 + block_spread(each) / exact, \
        sc.step.calibration.label


def main() -> None:
    from roofline.hardware import card_ids
    from roofline.model_spec import catalog_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cards, models = card_ids(), catalog_names()
    groups = defaultdict(list)
    warnings.simplefilter("ignore")  # contexts past a model's max_position_embeddings warn; priced all the same
    for _ in range(args.examples):
        card = "h200" if rng.random() < 1 / 3 else cards[rng.integers(len(cards))]
        case = (card, models[rng.integers(len(models))], int(rng.integers(1, 8193)), int(rng.integers(64, 8193)),
                ["auto", None][rng.integers(2)], int(rng.integers(1, 4097)))
        err, jump_bound, spread_bound, label = one(*case)
        group = "h200/graph" if label == "h200/graph" else ("uncalibrated" if label is None else "other calibrations")
        groups[group].append((err, jump_bound, spread_bound, case))
    for group in ("h200/graph", "other calibrations", "uncalibrated"):
        rows = groups.get(group, [])
        if not rows:
            continue
        errs = np.array([r[0] for r in rows])
        over_jump = sum(1 for e, j, _, _ in rows if e > j)
        used = max(e / s for e, _, s, _ in rows)
        worst = max(rows, key=lambda r: r[0])
        print(f"{group}: {len(rows)} generations; error median {100 * np.median(errs):.4f}%, 99th percentile "
              f"{100 * np.percentile(errs, 99):.3f}%, largest {100 * worst[0]:.3f}% {worst[3]}; over 0.1% + a sixteenth "
              f"of the largest jump: {over_jump}; the most of 0.1% + the blocks' spread / 16 any used: "
              f"{100 * used:.1f}% (at most 100%: that bound holds everywhere)")


if __name__ == "__main__":
    main()
