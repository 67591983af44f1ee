"""Speed of `roofline simulate`: one request stream served by static and by continuous batching.

Targets (issue 3): 20,000 requests simulated both ways in under 10 s, 100,000 in under 30 s, on
the 2-core dev machine. Times the whole API call (reading no file: the stream is generated here),
median of a few runs, and writes its section of docs/benchmarks.md.

The stream: prompts uniform in 32..512 tokens; 75% short answers (8..64 tokens), 25% long ones
(256..1024), from numpy's default_rng(0). Qwen2.5-1.5B on the RTX 3060 with the shipped calibration.

    .venv/bin/python benchmarks/bench_simulate.py
"""

from __future__ import annotations

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

CASES = [  # (requests, slots, Poisson rate per s or None for all queued at t=0)
    (20_000, 64, None),
    (20_000, 64, 10.0),
    (20_000, 8, None),
    (100_000, 64, None),
    (100_000, 64, 10.0),
    (100_000, 8, None),
]
TARGET_S = {20_000: 10.0, 100_000: 30.0}


def stream(n: int):
    from roofline.batching import Requests

    rng = np.random.default_rng(0)
    prompts = rng.integers(32, 513, n)
    long = rng.random(n) < 0.25
    gens = np.where(long, rng.integers(256, 1025, n), rng.integers(8, 65, n))
    return Requests(prompts, gens, None, f"bench stream of {n:,}")


def time_case(n: int, slots: int, rate, runs: int = 3):
    from roofline.api import simulate

    req = stream(n)
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = simulate("rtx3060", "qwen2.5-1.5b", batch=slots, requests=req, arrival_rate=rate, seed=0)
        times.append(time.perf_counter() - t)
    return times, result


def main() -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [
        f"Command: `.venv/bin/python benchmarks/bench_simulate.py` ({time.strftime('%Y-%m-%d')}, {machine})",
        "",
        "One `roofline.simulate` call = the stream served by static and by continuous batching. Stream: prompts "
        "32..512, 75% of answers 8..64 tokens and 25% 256..1024 (seeded); qwen2.5-1.5b on rtx3060.",
        "",
        "| requests | slots | arrivals | target | median | runs (s) | passes static / continuous |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, slots, rate in CASES:
        times, r = time_case(n, slots, rate)
        arrivals = "all at t=0" if rate is None else f"Poisson {rate:g}/s"
        lines.append(
            f"| {n:,} | {slots} | {arrivals} | < {TARGET_S[n]:g} s | {statistics.median(times):.2f} s | "
            f"{', '.join(f'{t:.2f}' for t in times)} | {r['static']['passes']:,} / {r['continuous']['passes']:,} |"
        )
        print(lines[-1], flush=True)
    write_section("simulate", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
