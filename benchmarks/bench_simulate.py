"""Speed of `roofline simulate`: one request stream served by static and by continuous batching.

Targets: issue 14, 1,000,000 requests simulated in under 30 s on the 2-core dev machine (issue 3's
20,000 in 10 s and 100,000 in 30 s are kept as one case). Times the whole API call
(roofline.simulate: both servers; the stream is generated here, no file read), median of 3 runs,
and writes the `simulate` section of docs/benchmarks.md.

The stream: prompts uniform in 32..512 tokens; 75% short answers (8..64 tokens), 25% long ones
(256..1024), from numpy's default_rng(0). Qwen2.5-1.5B on the RTX 3060 (the KV pool sized from
its 12 GiB), and on the H200 with the serving loop's pass costs (calibrate/serving_loop.py).

    .venv/bin/python benchmarks/bench_simulate.py            # every case, 3 runs each
    .venv/bin/python benchmarks/bench_simulate.py --quick    # one run each, nothing written
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_predict import write_section  # noqa: E402

M = 1_000_000
LOOP = dict(card="h200", model="qwen2.5-1.5b", engine="graph", pass_cost="serving-loop", schedule="prefill-first",
            max_model_len=1536, kv_capacity_tokens=40_000)
#: (label, requests, slots, Poisson rate per s or None for all queued at t=0, target s, simulate's options)
CASES = [
    ("fused, pool from memory", M, 64, None, 30.0, {}),
    ("fused, pool from memory", M, 64, 10.0, 30.0, {}),
    ("fused, 256 slots, half the card (the pool binds)", M, 256, None, 30.0, {"gpu_memory_utilization": 0.5}),
    ("fused, chunked prefill (2,048 tokens an iteration)", M, 64, None, 30.0, {"max_num_batched_tokens": 2048}),
    ("serving loop on the H200, 40k-token pool", M, 64, None, 30.0, LOOP),
    ("fused, 8 slots", M, 8, None, 30.0, {}),
    ("fused, 8 slots (issue 3's case)", 100_000, 8, None, 30.0, {}),
]


def stream(n: int):
    from roofline.batching import Requests

    rng = np.random.default_rng(0)
    prompts = rng.integers(32, 513, n)
    long = rng.random(n) < 0.25
    gens = np.where(long, rng.integers(256, 1025, n), rng.integers(8, 65, n))
    return Requests(prompts, gens, None, f"bench stream of {n:,}")


def time_case(n: int, slots: int, rate, options: dict, runs: int):
    from roofline.api import simulate

    req = stream(n)
    kw = {"card": "rtx3060", "model": "qwen2.5-1.5b", **options}
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = simulate(batch=slots, requests=req, arrival_rate=rate, seed=0, **kw)
        times.append(time.perf_counter() - t)
    return times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each case; write nothing")
    args = parser.parse_args()
    runs = 1 if args.quick else 3
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"Command: `.venv/bin/python benchmarks/bench_simulate.py` ({time.strftime('%Y-%m-%d')}, {machine}; "
        f"load average {load:.1f} at the start: the machine is shared)",
        "",
        "One `roofline.simulate` call = the stream served by static and by continuous batching (the continuous server "
        "with its KV pool, admission, preemption; docs/serving.md). Stream: prompts 32..512, 75% of answers 8..64 "
        "tokens and 25% 256..1024 (seeded); qwen2.5-1.5b on rtx3060 unless the case says otherwise. Median of "
        f"{runs} runs.",
        "",
        "| case | requests | slots | arrivals | target | median | runs (s) | passes static / continuous | preemptions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, n, slots, rate, target, options in CASES:
        times, r = time_case(n, slots, rate, options, runs)
        arrivals = "all at t=0" if rate is None else f"Poisson {rate:g}/s"
        lines.append(
            f"| {label} | {n:,} | {slots} | {arrivals} | < {target:g} s | {statistics.median(times):.2f} s | "
            f"{', '.join(f'{t:.2f}' for t in times)} | {r['static']['passes']:,} / {r['continuous']['passes']:,} | "
            f"{r['continuous']['preemptions']:,} |"
        )
        print(lines[-1], flush=True)
    if not args.quick:
        write_section("simulate", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
