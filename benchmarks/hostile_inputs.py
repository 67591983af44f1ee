"""Hostile and absurd input, timed (issue 15): each command below must end on its own, with a
one-line error or a warned answer, within 15 s and 4 GB. Writes the "hostile input" section of
docs/benchmarks.md (the tests check there is no traceback; time and memory are measured here).

    .venv/bin/python benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LIMIT_S, LIMIT_BYTES = 15.0, 4 * 2**30
M = "hardware_profiles/measurements"


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    blob = tmp / "blob.json"
    blob.write_bytes(os.urandom(4096))
    huge = tmp / "huge.csv"
    huge.write_text("prompt_tokens,gen_tokens\n" + "128,64\n" * 2_000_000)
    evil = tmp / "<img src=x onerror=alert(1)>"
    evil.mkdir(exist_ok=True)
    (evil / "config.json").write_text((ROOT / "roofline/catalog/qwen2.5-1.5b/config.json").read_text())
    card = ["--card", "rtx3060", "--model", "qwen2.5-1.5b"]
    return [
        ("binary card profile", ["predict", "--card", str(blob), "--model", "qwen2.5-1.5b"]),
        ("binary calibration", ["predict", *card, "--calibration", str(blob)]),
        ("model name of 100 kB", ["predict", "--card", "rtx3060", "--model", "m" * 100_000]),
        ("every batch 1..10^8", ["predict", *card, "--batches", "1-100000000"]),
        ("prompt of 10^30 tokens", ["predict", *card, "--prompt", str(10**30)]),
        ("prompt past the model's positions", ["predict", *card, "--prompt", "1000000", "--batches", "1"]),
        ("TP 10^6", ["predict", *card, "--tp", "1000000"]),
        ("routing skew 1e300", ["predict", "--card", "h200", "--model", "qwen3-30b-a3b", "--routing-skew", "1e300"]),
        ("another card's calibration", ["predict", *card, "--calibration", "hardware_profiles/calibrations/h200-graph.json"]),
        ("a 72B model on a 12 GB card", ["waste", "--mix", "8x32", "--card", "rtx3060", "--model", "qwen2.5-72b"]),
        ("waste of 10^9 requests", ["waste", "--mix", "1000000000x32", *card]),
        ("waste of 10^9-token answers", ["waste", "--mix", "8x1000000000", *card]),
        ("waste of 10^7-token answers (the limit)", ["waste", "--mix", "8x10000000", *card]),
        ("simulate 10^8 requests", ["simulate", "--mix", "8x32", "--count", "100000000", "--batch", "8", *card]),
        ("simulate a 2M-line request file", ["simulate", "--requests", str(huge), "--batch", "64", *card]),
        ("choose up to batch 10^9", ["choose", *card, "--max-batch", "1000000000"]),
        ("TPOT limit '50' (seconds?)", ["choose", *card, "--tpot-max", "50"]),
        ("choose-server at an absurd SLO", ["choose-server", *card, "--mix", "8x32,8x256", "--batch", "16",
                                            "--slo-ttft", "1us"]),
        ("chart of a model folder named as markup", ["chart", "--card", "rtx3060", "--model", str(evil), "-o",
                                                     str(tmp / "c.html")]),
        ("chart stream of 10^8 requests", ["chart", *card, "--count", "100000000", "-o", str(tmp / "c2.html")]),
        ("calibrate an unknown card", ["calibrate", "--card", "nope", "--model", "qwen2.5-0.5b", "--out", str(tmp / "x")]),
        ("calibrate a 72B model on this CPU", ["calibrate", "--card", "h200", "--model", "qwen2.5-72b", "--device",
                                               "cpu", "--out", str(tmp / "y"), "--no-fit"]),
        ("calibrate on a TPU", ["calibrate", "--card", "h200", "--model", "qwen2.5-0.5b", "--device", "tpu",
                                "--out", str(tmp / "z")]),
        ("fit the same CSV twice", ["fit", f"{M}/rtx3060-hf-eager-lesson.csv", f"{M}/rtx3060-hf-eager-lesson.csv",
                                    "--card", "rtx3060", "-o", str(tmp / "c.json")]),
        ("fit rows of another card", ["fit", f"{M}/rtx3060-hf-eager-lesson.csv", "--card", "h200", "-o",
                                      str(tmp / "d.json")]),
        ("compare a binary file", ["compare", str(blob), "--calibration",
                                   "hardware_profiles/calibrations/rtx3060-hf-eager.json"]),
        ("serve a mixture of experts", ["serve", "--card", "h200", "--model", "qwen3-30b-a3b", "--requests", str(huge),
                                        "--device", "cpu", "--out", str(tmp / "s1")]),
        ("serve with no slots", ["serve", "--card", "h200", "--model", "tiny-qwen2", "--requests", str(huge),
                                 "--max-num-seqs", "0", "--device", "cpu", "--out", str(tmp / "s2")]),
        ("serve 64 slots of 10^8 tokens on this CPU", ["serve", "--card", "h200", "--model", "qwen2.5-0.5b",
                                                       "--requests", str(huge), "--max-model-len", "100000000",
                                                       "--device", "cpu", "--out", str(tmp / "s3")]),
        ("unknown engine", ["predict", *card, "--engine", "tensorflow-serving"]),
        ("weight format 'q3_k_xs'", ["predict", *card, "--weight-dtype", "q3_k_xs"]),
    ]


def run(args: list[str]) -> tuple[int, float, int, str]:
    """(exit code, wall seconds, peak resident bytes of this one process, last line of its output)."""
    import threading

    exe = shutil.which("roofline", path=str(Path(sys.executable).parent)) or "roofline"
    with tempfile.TemporaryFile("w+") as out:
        t = time.perf_counter()
        proc = subprocess.Popen([exe, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(120, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        text = out.read().strip()
    last = text.splitlines()[-1] if text else ""
    if "Traceback" in text:
        last = "TRACEBACK: " + last
    return proc.returncode, wall, usage.ru_maxrss * 1024, last


def main() -> None:
    from benchmarks.bench_predict import write_section

    rows, worst_s, worst_b = [], 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, args in cases(Path(tmp)):
            rc, wall, peak, last = run(args)
            worst_s, worst_b = max(worst_s, wall), max(worst_b, peak)
            ok = rc in (0, 1, 2) and wall < LIMIT_S and peak < LIMIT_BYTES and not last.startswith("TRACEBACK")
            text = last.replace("|", "\\|")[:160]
            rows.append(f"| {label} | {rc} | {wall:.2f} | {peak / 2**20:,.0f} | {'ok' if ok else 'FAIL'} | {text} |")
            print(f"{'ok ' if ok else 'FAIL'} {wall:6.2f} s {peak / 2**20:7,.0f} MB  {label}: {text[:100]}")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    body = (f"Command: `.venv/bin/python benchmarks/hostile_inputs.py` ({time.strftime('%Y-%m-%d')}, {machine}). "
            f"Each command as a user would type it (process start to exit; peak resident memory of that process). "
            f"Limits: {LIMIT_S:g} s and 4 GiB.\n\n"
            "| input | exit | s | peak MB | within limits | last line of output |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows) + f"\n\nSlowest: {worst_s:.2f} s; largest peak: {worst_b / 2**20:,.0f} MB.\n")
    write_section("hostile input", body)


if __name__ == "__main__":
    main()
