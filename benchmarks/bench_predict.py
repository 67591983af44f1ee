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


#: The v0.1 catalog (11 cards x 12 models): the fixed set the sweep target was set on, so the
#: speed is comparable across versions as the catalog grows (the whole catalog is timed too).
V01_CARDS = ("a100-40gb", "a100-80gb", "h100-pcie", "h100-sxm", "h200", "l4", "l40s", "mi300x", "rtx3060", "rtx3090",
             "rtx4090")
V01_MODELS = ("llama-3.1-70b", "llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b-v0.3", "qwen2.5-0.5b",
              "qwen2.5-1.5b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-3b", "qwen2.5-72b", "qwen2.5-7b")


def sweep_s(repeats: int = 5, cards=V01_CARDS, models=V01_MODELS) -> tuple[list[float], int]:
    import warnings

    from roofline.api import predict
    from roofline.hardware import card_ids
    from roofline.model_spec import catalog_names

    batches = np.arange(1, 4097)
    cards = cards or card_ids()
    models = models or catalog_names()

    def sweep():
        n = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a 72B model on a 24 GB card warns; the sweep times the answer
            for card in cards:
                for model in models:
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
    whole, whole_points = sweep_s(repeats=3, cards=None, models=None)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    body = f"""Command: `.venv/bin/python benchmarks/bench_predict.py` ({time.strftime('%Y-%m-%d')}, {machine})

| what | target | median | runs (s) |
|---|---|---|---|
| `roofline predict --card rtx3060 --model qwen2.5-1.5b` cold start (process start to exit) | < 0.6 s | {statistics.median(cold):.3f} s | {', '.join(f'{t:.3f}' for t in cold)} |
| every batch 1..4096 x the v0.1 catalog (11 cards x 12 models, {points:,} predictions) | < 1 s | {statistics.median(sweep):.3f} s | {', '.join(f'{t:.3f}' for t in sweep)} |
| every batch 1..4096 x today's whole catalog (every card x every model, {whole_points:,} predictions) | - | {statistics.median(whole):.3f} s | {', '.join(f'{t:.3f}' for t in whole)} |
"""
    write_section("predict", body)
    print(body)


if __name__ == "__main__":
    main()
