"""The decode attention at few batched matrices over long caches: what the real step's kernels take
(device call 68's kernels probe), what the attention alone takes against the price (its
attention-table probe, batched matrices from 1), and how well the table repeats device call 64's.

    .venv/bin/python benchmarks/attention_few_matrices.py [CALIBRATION]

CALIBRATION defaults to the shipped hardware_profiles/calibrations/h200-graph.json; the price is its
decode attention without the table. docs/method.md, section 2.5, reads the output. No GPU needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"

from roofline.atomic import read_json  # noqa: E402  (plain or gzip-compressed)
#: the values' weighted sum, the scores' product and the softmax: cuBLAS's and PyTorch's kernel names
ATTENTION_KERNELS = ("_NNT", "badd", "SoftMax", "softmax")


def kernels(cal, card) -> None:
    from roofline.model_spec import load_model
    from roofline.step import StepModel, decode_work, pnorm

    probe = json.loads((M / "h200-probe-kernels-call68.json").read_text())
    at = {(p["model"], p["layers"], p["batch"], p["context"]): p for p in probe["points"]}
    print("the real step, one layer (4-layer step less 2-layer step, / 2), us: graph replay; the attention's "
          "kernels (eager, profiled); the weighted sum's kernel alone; the price of the attention")
    print("model          batch  positions  graph  attention  weighted_sum  price")
    for model, batch in sorted({(m, b) for m, _, b, _ in at}):
        spec = load_model(model)
        sm = StepModel(spec.with_layers(1), card, cal)
        for context in sorted({c for m, _, b, c in at if (m, b) == (model, batch)}):
            two, four = at[(model, 2, batch, context)], at[(model, 4, batch, context)]
            per = {}
            for p, sign in ((two, -0.5), (four, 0.5)):
                for k in p["kernels"]:
                    per[k["name"]] = per.get(k["name"], 0.0) + sign * k["seconds"]
            att = sum(v for n, v in per.items() if any(t in n for t in ATTENTION_KERNELS))
            wsum = sum(v for n, v in per.items() if n.startswith("nvjet") and n.endswith("_v_bz_NNT"))
            parts = sm.pass_parts(decode_work(float(batch), float(batch * context)))
            price = float(pnorm(parts.attention_memory_s, parts.attention_compute_s, cal.roofline_exponent))
            graph = (four["graph_step_s"] - two["graph_step_s"]) / 2
            print(f"{model:14s} {batch:5d} {context:10d} {graph * 1e6:6.1f} {att * 1e6:10.1f} {wsum * 1e6:13.1f}"
                  f" {price * 1e6:6.1f}")


def table(cal, card) -> None:
    from roofline.fitting import _probe_attention_s, _probe_models
    from roofline.probes import KERNEL_TABLE_LAUNCH_PRICE_S, _graph_attention_points, kernel_table_launch_s

    points = _graph_attention_points([M / "h200-probe-attention-table-call68.json"])
    priced = _probe_attention_s(card, cal, _probe_models(card, points), points)
    seconds = np.array([p.seconds for p in points])
    small = priced < KERNEL_TABLE_LAUNCH_PRICE_S
    beyond = (seconds[small] - priced[small]) * 1e6
    launch = kernel_table_launch_s(seconds, priced)  # as roofline.probes.attention_kernel_table reads it
    at = {(p.head_dim, p.q_heads // p.kv_heads, p.batch * p.kv_heads, p.context_tokens): i for i, p in enumerate(points)}
    print(f"\nthe attention alone (call 68): {len(points)} points; launch-level time (median beyond the price of the "
          f"{int(small.sum())} priced under {KERNEL_TABLE_LAUNCH_PRICE_S * 1e6:.0f} us) {launch * 1e6:.2f} us, "
          f"10-90% {np.percentile(beyond, 10):.2f}-{np.percentile(beyond, 90):.2f} us")
    print("(measured - launch) / price at few matrices, 128-wide heads 7 a KV head and 64-wide 4 a KV head:")
    for head_dim, group in ((128, 7), (64, 4)):
        print(f"  {head_dim}-wide, {group} a KV head; positions:    1,024  4,096  8,192 16,384")
        for m in (1, 2, 4, 8, 16, 32, 64):
            row = []
            for c in (1024, 4096, 8192, 16384):
                i = at.get((head_dim, group, m, c))
                row.append("      -" if i is None else f"{(seconds[i] - launch) / priced[i]:6.2f} ({priced[i] * 1e6:5.1f} us)")
            print(f"    {m:5d} matrices: " + "  ".join(row))


def repeat() -> None:
    old = read_json(M / "h200-probe-attention-table.json")["points"]
    new = read_json(M / "h200-probe-attention-table-call68.json")["points"]
    key = lambda p: (p["shape"], p["batch"], p["kv_heads"], p["context_tokens"])  # noqa: E731
    first = {key(p): p["s"] for p in old if p.get("s")}
    ratio = np.array([p["s"] / first[key(p)] for p in new if p.get("s") and key(p) in first])
    print(f"\ncall 68 against call 64 at the {len(ratio)} points both measured: median ratio {np.median(ratio):.4f}, "
          f"mean |ratio - 1| {100 * np.mean(np.abs(ratio - 1)):.2f}%, 10-90% {np.percentile(ratio, 10):.3f}-"
          f"{np.percentile(ratio, 90):.3f}")


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card

    path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "hardware_profiles/calibrations/h200-graph.json")
    cal = load_calibration(path)
    cal = cal.model_copy(update={"attention_kernel_table": None})
    card = load_card(cal.card)
    kernels(cal, card)
    table(cal, card)
    repeat()


if __name__ == "__main__":
    main()
