"""Device call 73's probe: the experts one decode step touches in the graph engine's random-weight
models, gpt-oss-20b as built and with its biases zeroed (qwen3-30b-a3b, without biases, beside it).
Question: do gpt-oss's attention and expert biases (random, std 0.02, the same vector added to every
token's residual stream, layer after layer) correlate its router's logits across a batch's tokens,
so that a step touches fewer experts than uniform routing (0.77-1.02 of it at batch 16,
benchmarks/moe_harness_routing.py)? Evidence only: the harness is not changed.

    python3 calibrate/runs/moe_routing_biases.py OUT.json [DEVICE [MODEL ...]]

Writes {"points": [{"model", "variant", "batch", "prompt", "touched_mean", "touched_by_layer",
"uniform"}]}: touched per MoE layer of one eager decode step after a prefill of random prompts
(calibrate.graph_engine.GraphEngine.experts_touched), and E (1 - (1 - k/E)^batch).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BATCHES = (4, 16, 64)
PROMPT = 1024
#: variant -> the weights zeroed (LayerWeights / MoEWeights attributes)
VARIANTS = {"as built": (), "router bias 0": ("router_bias",),
            "expert biases 0": ("gate_up_bias", "down_bias"),
            "attention biases 0": ("bqkv", "bo"),
            "all biases 0": ("router_bias", "gate_up_bias", "down_bias", "bqkv", "bo")}


def main() -> None:
    import torch

    from calibrate.configs import load_model_config
    from calibrate.graph_engine import GraphEngine
    from calibrate.timing import environment

    out = Path(sys.argv[1])
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    models = sys.argv[3:] or ["gpt-oss-20b", "qwen3-30b-a3b"]
    result = {"probe": "moe-routing-biases", "environment": environment(torch.device(device)),
              "method": __doc__.split("\n\n")[0], "points": []}
    for model in models:
        eng = GraphEngine(load_model_config(model), device=device, use_graph=False)
        s = eng.shapes
        saved = {}
        for variant, zeroed in VARIANTS.items():
            if model != models[0] and zeroed:
                continue
            for lw in eng.weights.layers:
                for name in zeroed:
                    for obj in (lw, lw.moe):
                        t = getattr(obj, name, None) if obj is not None else None
                        if t is not None:
                            saved.setdefault((id(obj), name), (obj, t.clone()))
                            t.zero_()
            for batch in BATCHES:
                st = eng.new_state(batch, PROMPT + 8)
                with torch.inference_mode():
                    eng._prefill(st, batch, PROMPT)
                    st.moe_stats = []
                    st.pos.fill_(PROMPT)
                    from calibrate.graph_engine import decode_step

                    decode_step(eng.weights, s, st)
                    by_layer = [float(x) for x in torch.stack(st.moe_stats).float().tolist()]
                    st.moe_stats = None
                uniform = s.experts * (1 - (1 - s.top_k / s.experts) ** batch)
                point = {"model": model, "variant": variant, "batch": batch, "prompt": PROMPT,
                         "touched_mean": sum(by_layer) / len(by_layer), "touched_by_layer": by_layer, "uniform": uniform}
                result["points"].append(point)
                print(f"{model} {variant:20s} b{batch:3d}: touched {point['touched_mean']:6.2f} of uniform {uniform:6.2f} "
                      f"({point['touched_mean'] / uniform:.3f}); first/last layers {by_layer[0]:.0f}/{by_layer[-1]:.0f}",
                      flush=True)
                del st
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
            for (_, name), (obj, t) in saved.items():  # restore before the next variant
                getattr(obj, name).copy_(t)
            out.write_text(json.dumps(result, indent=1))
        del eng
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
