"""The grouped-mm table (device call 72: torch._grouped_mm alone at generic shapes) against what was
measured at the catalog models' own shapes, which it never saw: the MoE probe's grouped matmuls of
seven MoE models at 1-32,768 tokens, and device call 70's gpt-oss widths (K and N stepped around
2,880, 1-256 tokens). No GPU needed.

    .venv/bin/python benchmarks/grouped_mm_table.py [--table FILE ...]

Each point is priced as the step model prices a MoE layer's matmuls (roofline.grouped_mm): at the
experts the point's routing touched and the rows each got, interpolated in log time over log K, N,
experts and rows. The MoE probe's gemm stages of gpt-oss (which has expert biases) include the
biases' gather and add (two small kernels the step model prices apart): its rows read a few us slow
against the table for that. Also printed: call 71's table (the powers of two alone, exact rows an
expert), to show what the 1.5x ladder and the routed rows changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
TABLES = {"call 72 (shipped)": [M / "h200-probe-grouped-mm-call72.json"],
          "call 71 (powers of two, exact rows)": [M / "h200-probe-grouped-mm-call71.json"]}


def priced_s(table, k, n, touched, rows):
    from roofline.grouped_mm import nodes_seconds, shape_log_seconds

    nodes = (np.log(table["groups"]), np.log(table["rows"]), shape_log_seconds(table, k, n))
    return nodes_seconds(nodes, touched, rows / touched)


def moe_probe_errors(table) -> dict:
    """{model: [(tokens, relative error)]}: gate-up + down of the MoE probe against the table."""
    data = json.loads((M / "h200-probe-moe.json").read_text())
    by = {}
    for p in data["points"]:
        if p["stage"] in ("gemm_gate_up", "gemm_down"):
            by.setdefault((p["model"], p["tokens"]), {})[p["stage"]] = p
    out = {}
    for (model, tokens), stages in sorted(by.items(), key=lambda kv: (data["grid"]["models"].index(kv[0][0]), kv[0][1])):
        if len(stages) < 2:
            continue
        p = stages["gemm_gate_up"]
        h, i, touched, rows = p["hidden"], p["moe_inter"], p["experts_touched"], p["rows"]
        priced = priced_s(table, h, 2 * i, touched, rows) + priced_s(table, i, h, touched, rows)
        measured = stages["gemm_gate_up"]["seconds"] + stages["gemm_down"]["seconds"]
        out.setdefault(model, []).append((tokens, priced / measured - 1.0))
    return out


def widths_errors(table) -> list:
    """[(N, K, tokens, relative error)] of device call 70's points against the table."""
    data = json.loads((M / "h200-probe-grouped-mm-widths-call70.json").read_text())
    return [(p["n"], p["k"], p["tokens"], priced_s(table, p["k"], p["n"], p["touched"], p["rows"]) / p["seconds"] - 1.0)
            for p in data["points"]]


def main() -> None:
    from roofline.grouped_mm import read_grouped_mm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="append", help="grouped-mm probe file(s) instead of the two committed")
    a = ap.parse_args()
    tables = {"given": a.table} if a.table else TABLES
    for label, files in tables.items():
        table = read_grouped_mm(files)
        print(f"== table: {label}")
        print("MoE probe, gate-up + down at the models' own shapes (priced / measured - 1, by tokens):")
        for model, errs in moe_probe_errors(table).items():
            e = np.array([x for _, x in errs])
            decode = np.array([x for t, x in errs if t <= 256])
            print(f"  {model:16s} MAPE {100 * np.mean(np.abs(e)):5.1f}% (1-256 tokens {100 * np.mean(np.abs(decode)):4.1f}%)  "
                  + " ".join(f"{t}:{100 * x:+.0f}" for t, x in errs))
        w = widths_errors(table)
        by_tokens = {}
        for n, k, t, x in w:
            by_tokens.setdefault(t, []).append(x)
        print("call 70's widths around 2,880 (K and N), by tokens: mean / range of priced / measured - 1")
        print("  " + "  ".join(f"{t}: {100 * np.mean(v):+.1f}% [{100 * min(v):+.0f}, {100 * max(v):+.0f}]"
                             for t, v in sorted(by_tokens.items())))
        gpt = [(n, k, t, x) for n, k, t, x in w if (n, k) in ((5760, 2880), (2880, 2880))]
        print("  gpt-oss's own two (N x K 5,760 x 2,880 and 2,880 x 2,880): "
              + "  ".join(f"{n}x{k} T{t} {100 * x:+.0f}%" for n, k, t, x in gpt))


if __name__ == "__main__":
    main()
