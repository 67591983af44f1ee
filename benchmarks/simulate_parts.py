"""Where one `simulate` call's time goes: its static server (roofline.serving.serve_static) and the
whole call without it (`simulate(..., static=False)`: the continuous server, its pool from memory)
timed apart, on benchmarks/bench_simulate.py's stream (qwen2.5-1.5b on the RTX 3060, all arrivals
at t=0), and the per-call time of a quiet stretch's known prices (FusedCost.decode_run, its table
already filled) beside decode_costs over the same reads as an array.

    .venv/bin/python benchmarks/simulate_parts.py                  # 1,000,000 requests, 8 slots
    .venv/bin/python benchmarks/simulate_parts.py --requests 200000 --slots 64

At an older commit (a worktree with this file copied in) it times the two servers alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_simulate import stream  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args()
    from roofline.api import simulate
    from roofline.pass_costs import FusedCost
    from roofline.scenario import make_scenario
    from roofline.serving import serve_static

    req = stream(args.requests)
    step = make_scenario(card="rtx3060", model="qwen2.5-1.5b").step
    p, g, arrivals = np.asarray(req.prompt_tokens), np.asarray(req.gen_tokens), np.zeros(args.requests)
    t = time.perf_counter()
    serve_static(step, p, g, arrivals, args.slots)
    print(f"static server                      {time.perf_counter() - t:6.2f} s  ({args.requests:,} requests, {args.slots} slots)")
    t = time.perf_counter()
    simulate(card="rtx3060", model="qwen2.5-1.5b", batch=args.slots, requests=req, static=False)
    print(f"simulate without the static server {time.perf_counter() - t:6.2f} s")
    cost, n = FusedCost(step), 20_000
    if not hasattr(cost, "decode_run"):  # a commit before 4bb6d1a (run there to compare)
        return
    cost.decode_run(8, 3000, 8, 4096)  # the table filled: every call below is a lookup
    t = time.perf_counter()
    for i in range(n):
        cost.decode_run(8, 3000 + 8 * (i % 500), 8, 20)
    slice_us = (time.perf_counter() - t) / n * 1e6
    reads = [3000.0 + 8 * (i % 500) + 8 * np.arange(20.0) for i in range(n)]
    t = time.perf_counter()
    for kv in reads:
        cost.decode_costs(8, 8, kv).tolist()
    array_us = (time.perf_counter() - t) / n * 1e6
    print(f"a 20-step stretch's known prices: decode_run {slice_us:.1f} us, decode_costs + tolist {array_us:.1f} us")


if __name__ == "__main__":
    main()
