"""`predict`'s time for each catalog model on one card (every batch 1..4096, mean of 3 after one warm
call), for the checkout given (default: this one) -- to tell a model whose pricing got slower from a
slower machine. Run it for an older commit's worktree and for this checkout back to back:

    git worktree add --detach /tmp/old REV
    .venv/bin/python benchmarks/predict_per_model.py /tmp/old > /tmp/old.txt
    .venv/bin/python benchmarks/predict_per_model.py > /tmp/new.txt
    paste /tmp/old.txt /tmp/new.txt
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path


def main() -> None:
    root = str(Path(sys.argv[1]).resolve()) if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1])
    card = sys.argv[2] if len(sys.argv) > 2 else "h200"
    sys.path.insert(0, root)
    import numpy as np

    import roofline
    from roofline.api import predict
    from roofline.model_spec import catalog_names

    assert roofline.__file__.startswith(root), roofline.__file__
    batches = np.arange(1, 4097)
    warnings.simplefilter("ignore")  # a model too big for the card warns; its time counts
    for model in catalog_names():
        predict(card, model, batches)
        t = time.perf_counter()
        for _ in range(3):
            predict(card, model, batches)
        print(f"{model:28} {(time.perf_counter() - t) / 3 * 1000:7.1f} ms", flush=True)


if __name__ == "__main__":
    main()
