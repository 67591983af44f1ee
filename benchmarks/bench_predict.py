"""Speed of `roofline predict`: cold start of the command, and a full sweep of the catalog.

Targets (issue 2): cold start under 0.6 s median on the 2-core dev machine; every integer batch
1..4096 for every catalog model on every card in under 1 s. Writes its section of
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_predict.py
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cold_start_s(runs: int = 15) -> list[float]:
    exe = shutil.which("roofline", path=str(Path(sys.executable).parent)) or shutil.which("roofline")
    cmd = [exe, "predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b"]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return times


def sweep_s(repeats: int = 5) -> tuple[list[float], int]:
    from roofline.api import predict
    from roofline.hardware import card_ids
    from roofline.model_spec import catalog_names

    batches = np.arange(1, 4097)

    def sweep():
        n = 0
        for card in card_ids():
            for model in catalog_names():
                n += len(predict(card, model, batches).columns["tpot_s"])
        return n

    sweep()  # warm caches (profiles, configs)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        n = sweep()
        times.append(time.perf_counter() - t)
    return times, n


def write_section(name: str, body: str, path: Path = ROOT / "docs" / "benchmarks.md") -> None:
    """Replace the '## name' section of docs/benchmarks.md (or append it), atomically."""
    from roofline.atomic import write_text_atomic

    text = path.read_text() if path.exists() else "# Benchmarks\n\nEach section is written by the script it names; rerun it to refresh.\n"
    head = f"## {name}\n"
    block = head + body.rstrip() + "\n"
    if head in text:
        start = text.index(head)
        nxt = text.find("\n## ", start + len(head))
        text = text[:start] + block + ("" if nxt < 0 else text[nxt + 1:])
    else:
        text = text.rstrip() + "\n\n" + block
    write_text_atomic(path, text)


def main() -> None:
    cold = cold_start_s()
    sweep, points = sweep_s()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    body = f"""Command: `.venv/bin/python benchmarks/bench_predict.py` ({time.strftime('%Y-%m-%d')}, {machine})

| what | target | median | runs (s) |
|---|---|---|---|
| `roofline predict --card rtx3060 --model qwen2.5-1.5b` cold start (process start to exit) | < 0.6 s | {statistics.median(cold):.3f} s | {', '.join(f'{t:.3f}' for t in cold)} |
| every batch 1..4096 x every catalog model x every card ({points:,} predictions) | < 1 s | {statistics.median(sweep):.3f} s | {', '.join(f'{t:.3f}' for t in sweep)} |
"""
    write_section("predict", body)
    print(body)


if __name__ == "__main__":
    main()
