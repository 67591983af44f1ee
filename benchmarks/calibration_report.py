"""Write docs/calibration.md from the committed measurements: every table in it is the output of
a command shown beside it, run by this script.

    .venv/bin/python benchmarks/calibration_report.py

It refits the shipped calibrations (hardware_profiles/calibrations/h200-*.json,
rtx3060-hf-eager.json) from the measurement CSVs, so rerunning it after new measurements
refreshes both the calibrations and the document.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = "hardware_profiles/measurements"
C = "hardware_profiles/calibrations"
CEILINGS = f"{M}/h200-ceilings.json"
TRAIN = ("qwen2.5-1.5b", "qwen2.5-7b")
HELD = ("qwen2.5-0.5b", "llama-3.1-8b")
ALL = TRAIN + HELD
ROOFLINE = str(Path(sys.executable).parent / "roofline")


def run(args: list[str]) -> str:
    """Run `roofline ARGS`; return a console block with the command and its output."""
    out = subprocess.run([ROOFLINE, *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return "```console\n$ roofline " + " ".join(shlex.quote(a) for a in args) + "\n" + out.rstrip() + "\n```\n"


def run_json(args: list[str]) -> dict:
    out = subprocess.run([ROOFLINE, *args, "--format", "json"], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def models_args(models) -> list[str]:
    return [x for m in models for x in ("--model", m)]


def ceilings_section() -> str:
    from roofline.hardware import load_card

    c = json.loads((ROOT / CEILINGS).read_text())
    card = load_card("h200")
    rows = [
        ("copy bandwidth (bytes read + written)", f"{c['copy_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s", f"{card.datasheet_bandwidth.value:,.0f} GB/s"),
        ("read bandwidth (the model's ceiling)", f"{c['read_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s", f"{card.datasheet_bandwidth.value:,.0f} GB/s"),
        ("bf16 GEMM 8192^3", f"{c['gemm_bf16_flop_per_s'] / 1e12:,.1f} TFLOP/s", f"{card.datasheet_bf16_flops.value:,.1f} TFLOP/s"),
        ("balance point", f"{c['balance_point_flop_per_byte']:.1f} FLOP/byte",
         f"{card.datasheet_bf16_flops.base / card.datasheet_bandwidth.base:.1f} FLOP/byte"),
    ]
    lines = ["| quantity | measured | datasheet |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {d} |" for a, b, d in rows]
    lines.append("")
    lines.append(
        f"{c['gpu']}, driver {c['driver']}, torch {c['torch']}, transformers {c['transformers']}, "
        f"{c['timestamp'][:10]}; 4 GiB buffers (L2 is {c['l2_cache_bytes'] / 2**20:.0f} MiB), CUDA events, medians. "
        "Per-shape GEMM/GEMV timings for each model's linear layers are in the same file."
    )
    return "\n".join(lines) + "\n"


def measured_knee(tpot_by_batch: dict[int, float]):
    """The first doubling of the measured sweep that costs more than sqrt(2) in TPOT: (lo, hi]."""
    bs = sorted(tpot_by_batch)
    for lo, hi in zip(bs, bs[1:]):
        if hi == 2 * lo and tpot_by_batch[hi] / tpot_by_batch[lo] > math.sqrt(2):
            return lo, hi
    return None


def bend_section(csv: str, engine: str, cal_path: str, models) -> str:
    from roofline.measurements import read_measurements

    rows = [r for r in read_measurements(ROOT / csv) if r.ok]
    lines = [
        "| model | measured: first doubling costing > 41% TPOT | predicted knee | predicted crossing | predicted region |",
        "|---|---|---|---|---|",
    ]
    for m in models:
        knee = measured_knee({r.batch: r.tpot_s for r in rows if r.model == m})
        b = run_json(["bend", "--card", "h200", "--model", m, "--engine", engine, "--calibration", cal_path])
        meas = "none up to 1024" if knee is None else f"({knee[0]}, {knee[1]}]"
        region = "-" if b["region_low_batch"] is None else f"({b['region_low_batch']}, {b['region_high_batch']}]"
        lines.append(f"| {m} | {meas} | {b['knee_batch']} | {b['crossing_batch']} | {region} |")
    return "\n".join(lines) + "\n"


def pure_section(csv: str, models) -> str:
    from roofline.calibration import Calibration
    from roofline.fitting import compare
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements
    from roofline.views import read_ceilings

    bw, fl = read_ceilings(ROOT / CEILINGS)
    rows = [r for r in read_measurements(ROOT / csv) if r.model in models]
    policy = rows[0].kv_cache
    pure = Calibration.uncalibrated("h200", policy).model_copy(
        update={"measured_bandwidth_bytes_per_s": bw, "measured_peak_flop_per_s": fl}
    )
    result = compare(pure, rows, load_card("h200"))
    lines = ["| model | batch | measured TPOT (ms) | pure roofline (ms) | error |", "|---|---|---|---|---|"]
    for r in result["rows"]:
        if r["batch"] in (1, 8, 64, 256, 1024):
            err = r["tpot_predicted_s"] / r["tpot_measured_s"] - 1
            lines.append(
                f"| {r['model']} | {r['batch']} | {r['tpot_measured_s'] * 1e3:.2f} | {r['tpot_predicted_s'] * 1e3:.2f} | {err:+.0%} |"
            )
    lines.append("")
    lines.append(f"TPOT MAPE of the pure roofline over all {result['points']} points: {result['tpot_mape_pct']:.1f}%.")
    return "\n".join(lines) + "\n"


def spread_section(csv: str) -> str:
    from roofline.measurements import read_measurements

    rows = [r for r in read_measurements(ROOT / csv) if r.ok]
    lines = ["| model | median p10-p90 spread / mean TPOT | worst | TPOT mean range (ms) |", "|---|---|---|---|"]
    for m in sorted({r.model for r in rows}):
        rs = [r for r in rows if r.model == m]
        spread = [(r.tpot_p90_s - r.tpot_p10_s) / r.tpot_s for r in rs]
        tp = [r.tpot_s * 1e3 for r in rs]
        lines.append(f"| {m} | {np.median(spread):.0%} | {max(spread):.0%} | {min(tp):.1f} - {max(tp):.1f} |")
    return "\n".join(lines) + "\n"


def engine_section(title: str, csv: str, engine: str, label: str, intro: str, statistic: str = "mean") -> str:
    cal = f"{C}/h200-{engine}.json"
    fit_args = ["fit", f"{M}/{csv}", "--card", "h200", *models_args(TRAIN), "--ceilings", CEILINGS,
                "--label", label, "-o", cal]
    if statistic != "mean":
        fit_args += ["--tpot-statistic", statistic]
    parts = [f"## {title}\n\n", intro, "\n### Fit on two models\n\n", run(fit_args)]
    parts.append("\n### Held-out models (never seen by the fit)\n\n")
    parts.append(run(["compare", "--calibration", cal, f"{M}/{csv}", *models_args(HELD)]))
    loo_cal = f"/tmp/roofline-{engine}-all.json"
    parts.append("\n### Leave one model out of four\n\n")
    parts.append(
        "Each model predicted by a calibration fitted on the other three (the `held out:` rows; "
        "the calibration written here is scratch):\n\n"
    )
    parts.append(run(["fit", f"{M}/{csv}", "--card", "h200", "--ceilings", CEILINGS, "-o", loo_cal]
                     + (["--tpot-statistic", statistic] if statistic != "mean" else [])))
    parts.append("\n### The pure roofline on the same measurements\n\n")
    parts.append("Measured ceilings, no overheads or efficiencies (`--no-calibration`):\n\n")
    parts.append(pure_section(f"{M}/{csv}", ALL))
    parts.append("\n### Which batch bends: measured vs predicted\n\n")
    parts.append(bend_section(f"{M}/{csv}", engine, cal, ALL))
    return "".join(parts)


def main() -> None:
    t0 = time.perf_counter()
    doc = [
        "# Calibration: the model against real bf16 decode\n\n",
        "Generated by `.venv/bin/python benchmarks/calibration_report.py` from the measurements committed in "
        "`hardware_profiles/measurements/` (how they were taken, on which machine and with which commands: "
        "[calibration-runs.md](calibration-runs.md)). Every block below is a command and its output. "
        "Method and formulas: [method.md](method.md).\n",
        "\n## Ceilings measured on the lent H200\n\n",
        ceilings_section(),
        "\nThe model uses the read bandwidth and the GEMM rate as the card's ceilings when a calibration "
        "carries them (`--ceilings`); `hardware_profiles/h200.json` keeps the datasheet and earlier measurements.\n\n",
        engine_section(
            "Engine `graph`: static KV cache, CUDA-graph decode",
            "h200-graph.csv",
            "graph",
            "graph engine (static KV cache, CUDA-graph decode) on the lent H200, qwen2.5-1.5b + qwen2.5-7b",
            "Our own minimal decoder (`calibrate/graph_engine.py`: RMSNorm, RoPE, GQA via SDPA, SwiGLU) with a "
            "preallocated KV cache and the decode step captured in one CUDA graph per batch: the floor a tuned "
            "engine reaches. Fitted on qwen2.5-1.5b and qwen2.5-7b, 11 batches each (1-1024, prompt 128, gen 128).\n",
        ),
        "\n### A 32B model the fit never saw, and the memory boundary\n\n",
        "qwen2.5-32b has 4 times the parameters of qwen2.5-7b and 21 times those of qwen2.5-1.5b, the two "
        "models the calibration was fitted on. Measured with the same engine (batch 1024 ran out of memory "
        "and is recorded as an `oom` row, which compare skips):\n\n",
        run(["compare", "--calibration", f"{C}/h200-graph.json", f"{M}/h200-graph-qwen2.5-32b.csv"]),
        "\nThe predicted peak memory says where the card runs out:\n\n",
        run(["predict", "--card", "h200", "--model", "qwen2.5-32b", "--engine", "graph", "--batches", "256,512,1024"]),
        "\nBatch 512 fits (110.45 GiB predicted, 109.94 measured) and batch 1024 does not (158.8 GiB of "
        "140.4): the run's first out-of-memory batch.\n",
        "\n",
        engine_section(
            "Engine `hf-eager`: transformers eager decode (the lesson's setup), cuDNN attention off",
            "h200-hf-eager-nocudnn.csv",
            "hf-eager",
            "HF transformers eager decode (cuDNN attention off) on the lent H200, qwen2.5-1.5b + qwen2.5-7b",
            "`AutoModelForCausalLM.from_config` with random bf16 weights, dynamic cache, greedy, `logits_to_keep=1`, "
            "a Python loop timing every step. PyTorch 2.11 picks cuDNN attention on Hopper, which rebuilds a plan "
            "for every new KV length and makes each step 55-100 ms; this run turns it off "
            "(`roofline calibrate --no-cudnn-attention`), as on the lesson's RTX 3060, where cuDNN attention is not "
            "chosen. The loop is bound by the host's Python and launches at every batch, on a shared VM CPU, so "
            "these measurements are noisy:\n\n" + spread_section(f"{M}/h200-hf-eager-nocudnn.csv")
            + "\nThe acceptance bar (TPOT within 8% on held-out models) is not met for this engine: the host's "
            "noise alone is larger. The per-layer overhead still transfers: the uncontended floor (p10) of every "
            "model is 0.63 ms per layer.\n",
        ),
        "\n## The default `hf-eager` (cuDNN attention on)\n\n",
        "Kept for reference: what the defaults give on this machine (55-100 ms per step, flat in batch).\n\n",
        spread_section(f"{M}/h200-hf-eager.csv"),
        "\n## The lesson's table (RTX 3060, HF eager): in-sample\n\n",
        "The shipped `rtx3060-hf-eager` calibration is fitted to the lesson's own section-2 table "
        "(`hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv`, the published numbers as data):\n\n",
        run(["fit", f"{M}/rtx3060-hf-eager-lesson.csv", "--card", "rtx3060", "--label",
             "fitted to the static-batching lesson's own section-2 table (HF eager, RTX 3060)",
             "-o", f"{C}/rtx3060-hf-eager.json"]),
        "\n",
        run(["compare", "--calibration", f"{C}/rtx3060-hf-eager.json", f"{M}/rtx3060-hf-eager-lesson.csv"]),
        "\nWith one model, attention and activation costs cannot be told from KV traffic and matmul FLOPs "
        "(they scale alike at a fixed context), so those terms are held at their defaults (`roofline/fitting.py: "
        "_unidentifiable`).\n",
        f"\n_Report generated in {{elapsed:.0f}} s on {time.strftime('%Y-%m-%d')}._\n",
    ]
    text = "".join(doc).replace("{elapsed:.0f}", f"{time.perf_counter() - t0:.0f}")
    from roofline.atomic import write_text_atomic

    write_text_atomic(ROOT / "docs" / "calibration.md", text)
    print(f"wrote docs/calibration.md in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
