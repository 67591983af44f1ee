"""The shipped graph calibration's decode attention against the attention probes' timings of the
attention alone (docs/method.md, section 13; evidence, not used by the model): for each probed shape
(query heads, KV heads, head width), batch and cache length, the step model's attention family
(its memory and compute parts blended as in a pass) / the probe's ``graph_attention`` time, and the
probe's time per score element (batch x query heads x positions). At batch 1 the ratio is small by
design: the kernels' fixed launch time is in the calibration's per-layer overhead, not here.

    .venv/bin/python benchmarks/attention_probes_vs_model.py [PROBE.json ...]
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
PROBES = ("h200-probe-attention-groups.json", "h200-probe-attention-batches.json", "h200-probe-attention-widths.json")


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.model_spec import ModelSpec
    from roofline.step import StepModel, decode_work, pnorm

    cal = load_calibration(ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json")
    card = load_card("h200")
    for path in sys.argv[1:] or [M / p for p in PROBES]:
        table = defaultdict(dict)
        for x in json.loads(Path(path).read_text())["points"]:
            if x["op"] != "graph_attention":
                continue
            q, kv, hd, b, ctx = x["q_heads"], x["kv_heads"], x["head_dim"], x["batch"], x["context_tokens"]
            spec = ModelSpec.from_config_dict(dict(
                model_type="llama", hidden_size=q * hd, intermediate_size=128, num_hidden_layers=1,
                num_attention_heads=q, num_key_value_heads=kv, head_dim=hd, vocab_size=128,
                max_position_embeddings=1 << 20), "probe-shape")
            parts = StepModel(spec, card, cal).pass_parts(decode_work(float(b), float(b * ctx)))
            priced = pnorm(parts.attention_memory_s, parts.attention_compute_s, cal.roofline_exponent)
            table[(q, kv, hd, ctx)][b] = (priced / x["s"], x["s"] / (b * q * ctx) * 1e12)
        print(f"{Path(path).name}: model / probe at each batch (ps per score element)")
        for (q, kv, hd, ctx), row in sorted(table.items()):
            print(f"  {q:3d} q / {kv:2d} kv x {hd:3d}, {ctx:5d} positions: "
                  + " ".join(f"{b}:{r:.2f} ({ps:.1f})" for b, (r, ps) in sorted(row.items())))


if __name__ == "__main__":
    main()
