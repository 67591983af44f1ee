"""A fingerprint of roofline's numbers, for a change meant to leave every one as it was (a
speed-up, a refactor): it must leave every line of this output as it was. Run it at both commits
and compare:

    .venv/bin/python benchmarks/fingerprint.py > /tmp/new.txt
    git worktree add /tmp/old REV && cp benchmarks/fingerprint.py /tmp/old/benchmarks/
    (cd /tmp/old && /work/main/.venv/bin/python benchmarks/fingerprint.py) > /tmp/old.txt
    diff /tmp/old.txt /tmp/new.txt; git worktree remove --force /tmp/old

* predict: every batch 1..4096 on each card x model of the v0.1 catalog (the sweep
  benchmarks/bench_predict.py times), every column hashed, one line per card; and every catalog
  model (windowed, MoE and latent-attention ones among them) on the H200 and the RTX 4090;
* simulate: nine configurations (fused and serving-loop costs, 8 to 256 slots, a binding pool,
  chunked prefill, Poisson arrivals under both schedules (one under load, below capacity), a
  pass-time scale, the H200 graph calibration with its attention kernel table) on a
  30,000-request stream, each call's whole JSON (per-request times included) hashed.

The twenty-fourth session's speed-ups (roofline.pass_costs' memos, the shipped calibrations read
once, roofline.step's in-place pnorm and shared uncapped terms, the kernel table's factor on
each axis's own shape) left every line identical to 89d29f6's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_predict import V01_CARDS, V01_MODELS  # noqa: E402
from bench_simulate import LOOP, stream  # noqa: E402

CASES = {
    "fused, 8 slots": dict(card="rtx3060", model="qwen2.5-1.5b", batch=8),
    "fused, 64 slots": dict(card="rtx3060", model="qwen2.5-1.5b", batch=64),
    "fused, 256 slots, half the card": dict(card="rtx3060", model="qwen2.5-1.5b", batch=256,
                                            gpu_memory_utilization=0.5),
    "fused, chunked prefill": dict(card="rtx3060", model="qwen2.5-1.5b", batch=64, max_num_batched_tokens=2048),
    "serving loop": dict(batch=64, **LOOP),
    "h200 graph, 8 slots": dict(card="h200", model="qwen2.5-7b", engine="graph", batch=8),
    "poisson, prefill-first": dict(card="h200", model="llama-3.2-1b", batch=32, arrival_rate=40.0,
                                   schedule="prefill-first"),
    "pass time x1.07": dict(card="rtx3060", model="qwen2.5-1.5b", batch=16, pass_time_scale=1.07),
    "poisson, decode-first, 16 slots": dict(card="rtx3060", model="qwen2.5-1.5b", batch=16, arrival_rate=2.0),
}


def digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def main() -> None:
    import warnings

    import numpy as np

    from roofline.api import predict, simulate

    batches = np.arange(1, 4097)
    for card in V01_CARDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a 72B model on a 24 GB card warns; its numbers count
            cols = [{k: np.asarray(v).tolist() for k, v in predict(card, model, batches).columns.items()}
                    for model in V01_MODELS]
        print(f"predict {card:26} {digest(cols)}", flush=True)
    from roofline.model_spec import catalog_names

    for card in ("h200", "rtx4090"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cols = [{k: np.asarray(v).tolist() for k, v in predict(card, model, batches).columns.items()}
                    for model in catalog_names()]
        print(f"predict {card:26} every catalog model ({len(cols)}) {digest(cols)}", flush=True)
    requests = stream(30_000)
    for label, kw in CASES.items():
        result = simulate(requests=requests, keep_requests=True, **kw)
        print(f"simulate {label:34} {digest(result)}  TTFT p99 {result['continuous']['ttft_p99_s']!r} s",
              flush=True)


if __name__ == "__main__":
    main()
