"""The decode attention's cost per score element by the row's length, kernel by kernel, from the
attention probes (no GPU needed): the evidence for Calibration.attention_score_row_factors.

    .venv/bin/python benchmarks/score_cost_by_row_length.py [CALIBRATION] [--min-batch 64]

For each probe point of at least ``--min-batch`` sequences (the attention's time is its work
there): the time beyond reading the KV once at the calibration's cost per KV byte, in bytes per
score element at the calibration's bandwidth (its measured ceiling x its efficiency), for the
whole attention and, where the probe timed them alone, the QK product (less K) and the softmax
with the values' product (the whole attention less the QK product, less V). The softmax's kernel
changes past 2,048 and past 9,216 positions (roofline.probes.SOFTMAX_ROW_REGIMES): compare the
rows on either side.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
PROBES = [M / f"h200-probe-attention{kind}.json" for kind in ("", "-contexts")]


def main() -> None:
    from roofline.atomic import read_json
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.probes import SOFTMAX_ROW_REGIMES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calibration", nargs="?", default=str(ROOT / "hardware_profiles/calibrations/h200-graph.json"))
    ap.add_argument("--min-batch", type=int, default=64)
    a = ap.parse_args()
    cal = load_calibration(a.calibration)
    bw = (cal.measured_bandwidth_bytes_per_s or load_card(cal.card).bandwidth_bytes_per_s) * cal.bandwidth_efficiency
    kv_factor = cal.kv_traffic_factor
    print(f"bytes per score element beyond the KV at {kv_factor:.3f} x its bytes, at {bw / 1e12:.2f} TB/s "
          f"({Path(a.calibration).name}); the softmax changes kernel past "
          + " and ".join(f"{r:,}" for r in SOFTMAX_ROW_REGIMES) + " positions")
    print(f"{'probe':10} {'q/kv':>5} {'width':>5} {'batch':>5} {'positions':>9}  {'attention':>9}  {'QK':>6}  "
          f"{'softmax+PV':>10}")
    for path in PROBES:
        times = defaultdict(dict)
        for p in read_json(path, "attention probe")["points"]:
            if "s" in p and p["batch"] >= a.min_batch and p["context_tokens"] >= 2048:
                key = (p["q_heads"], p["kv_heads"], p["head_dim"], p["batch"], p["context_tokens"])
                times[key][p["op"]] = p["s"]
        for (q, kv, d, b, t), ops in sorted(times.items()):
            if "graph_attention" not in ops:
                continue
            scores, half_kv_s = b * q * t, kv_factor * b * kv * t * d * 2 / bw  # K (or V) bytes' time
            whole = (ops["graph_attention"] - 2 * half_kv_s) * bw / scores
            qk = (ops["graph_qk"] - half_kv_s) * bw / scores if "graph_qk" in ops else None
            rest = ((ops["graph_attention"] - ops["graph_qk"] - half_kv_s) * bw / scores
                    if "graph_qk" in ops else None)
            print(f"{path.stem.replace('h200-probe-attention', 'attention'):10} {q // kv:5d} {d:5d} {b:5d} {t:9,}  "
                  f"{whole:9.1f}  " + (f"{qk:6.1f}  {rest:10.1f}" if qk is not None else f"{'-':>6}  {'-':>10}"))


if __name__ == "__main__":
    main()
