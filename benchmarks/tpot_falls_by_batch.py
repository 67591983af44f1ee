"""Where the H200 graph calibration's TPOT falls as the batch grows: the decode attention's measured
kernel table (Calibration.attention_kernel_table) times more batched matrices faster than fewer at
some cache lengths, and the predicted step follows it (docs/method.md, section 2.5, "Time can fall
with the batch"). Every dense catalog model at one generated token, prompts of 64-8,191 tokens every
7, batches 1-128; with the table and without it.

    .venv/bin/python benchmarks/tpot_falls_by_batch.py [CARD]

CARD defaults to h200 (calibration auto: the shipped h200-graph). Prints, per model, how many prompts
have a fall and the largest ones (relative to the larger batch's TPOT). No GPU needed; ~10 min.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def falls(card: str, model: str, calibration) -> list[tuple[float, int, int]]:
    from roofline.api import predict

    found = []
    for prompt in range(64, 8192, 7):
        tpot = predict(card, model, np.arange(1, 129), prompt_tokens=prompt, gen_tokens=1,
                       calibration=calibration).columns["tpot_s"]
        rel = np.diff(tpot) / tpot[1:]
        i = int(np.argmin(rel))
        if rel[i] < 0:
            found.append((float(rel[i]), prompt, i + 1))
    return sorted(found)


def main(argv: list[str]) -> int:
    from roofline.model_spec import catalog_names, load_model
    from roofline.scenario import make_scenario

    card = argv[0] if argv else "h200"
    warnings.simplefilter("ignore")
    worst = (0.0, "", 0, 0)
    for model in catalog_names():
        spec = load_model(model)
        if spec.moe_layers:  # the table prices dense models only (roofline.step)
            continue
        sc = make_scenario(card=card, model=model, prompt_tokens=64, gen_tokens=1, calibration="auto")
        if sc.step._kernel_table is None:
            print(f"{model:24s} no kernel table at its head shape")
            continue
        with_table = falls(card, model, "auto")
        smooth = falls(card, model, sc.calibration.model_copy(update={"attention_kernel_table": None}))
        top = ", ".join(f"{-r:.3%} at prompt {p}, batch {b} -> {b + 1}" for r, p, b in with_table[:3])
        print(f"{model:24s} prompts with a fall: {len(with_table):4d} with the table, {len(smooth)} without"
              + (f"; largest {top}" if top else ""), flush=True)
        if with_table and -with_table[0][0] > worst[0]:
            worst = (-with_table[0][0], model, with_table[0][1], with_table[0][2])
    if worst[1]:
        print(f"largest fall: {worst[0]:.3%} ({worst[1]}, prompt {worst[2]}, batch {worst[3]} -> {worst[3] + 1})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
