"""A large dense decode batch built from components measured alone, against the step model and the
measured step (docs/method.md, section 13, "Large dense decode batches"): device call 54's points at
prompt 512 + 64 from batch 256, each priced as
    the attention-batches probe's attention per sequence and layer (its shape's, at 576 positions,
    the nearest batch, scaled to the step's mean context) x batch x layers
  + the model's weight matmuls' FLOPs at the gemm probe's median rate over products of 1,024-4,096
    rows (N and K from 2,048; at batch 256 and 512 the probe's rate at those rows instead)
  + the step model's own elementwise and overhead parts.
Only the models whose attention shape the probe ran (32 x 8, 24 x 8, 40 x 8 query x KV heads of 128).
Not used by the model.

    .venv/bin/python benchmarks/large_batch_components.py
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
SHAPES = {(32, 8, 128): "g4-128", (24, 8, 128): "g3-128", (40, 8, 128): "g5-128"}


def main() -> None:
    from roofline import api
    from roofline.calibration import load_calibration
    from roofline.decode import mean_decode
    from roofline.hardware import load_card
    from roofline.model_spec import load_model
    from roofline.step import StepModel

    cal = load_calibration(ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json")
    card = load_card("h200")
    attention = defaultdict(dict)
    for p in json.loads((M / "h200-probe-attention-batches.json").read_text())["points"]:
        if p["op"] == "graph_attention" and p["context_tokens"] == 576:
            attention[p["shape"]][p["batch"]] = p["s"] / p["batch"]
    gemm = json.loads((M / "h200-probe-gemm.json").read_text())["points"]

    def gemm_rate(rows_lo, rows_hi):
        return statistics.median(p["flop"] / p["seconds"] for p in gemm
                                 if rows_lo <= p["m"] <= rows_hi and p["n"] >= 2048 and p["k"] >= 2048)

    rows = api.compare([M / "h200-graph-check-call54.csv"], calibration=cal)["rows"]
    print("model             batch  measured  components  step model (ms)")
    errs_c, errs_m = [], []
    for r in rows:
        spec = load_model(r["model"])
        shape = SHAPES.get((spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim))
        if shape is None or r["prompt_tokens"] != 512 or r["batch"] < 256 or not r["tpot_measured_s"]:
            continue
        b = r["batch"]
        m = StepModel(spec, card, cal)
        ctx = r["prompt_tokens"] + r["gen_tokens"] / 2.0  # the decode's mean cached length
        per_seq = attention[shape][min(attention[shape], key=lambda x: abs(x - b))]
        attn_s = per_seq * ctx / 576.0 * b * spec.num_hidden_layers
        rate = gemm_rate(1024, 4096) if b >= 1024 else gemm_rate(b, b)
        matmul_s = float(spec.linear_flop_per_token) * b / rate
        dec = mean_decode(m, np.array([float(b)]), r["prompt_tokens"], r["gen_tokens"], "static")
        parts = m.pass_parts((float(b), float(b * ctx), 0.0, 0.0, 0.0, None, None))
        total = attn_s + matmul_s + float(parts.elementwise_s) + float(parts.overhead_s)
        meas = r["tpot_measured_s"]
        errs_c.append(total / meas - 1)
        errs_m.append(float(dec["step_s"][0]) / meas - 1)
        print(f"{r['model']:16s} {b:6d} {meas * 1e3:9.2f} {total * 1e3:11.2f} ({100 * (total / meas - 1):+.1f}%) "
              f"{dec['step_s'][0] * 1e3:9.2f} ({100 * (dec['step_s'][0] / meas - 1):+.1f}%)")
    print(f"MAPE: components {100 * np.mean(np.abs(errs_c)):.1f}%, step model {100 * np.mean(np.abs(errs_m)):.1f}% "
          f"over {len(errs_c)} points")


if __name__ == "__main__":
    main()
