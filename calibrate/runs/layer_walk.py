"""Device call 79's probe: a walk between two MoE layers, one architecture difference at a time, to
find what gpt-oss-20b's decode layer pays that the step model does not price (7-9% fast at batch 1,
3-7% at 4-256, at every length: h200-graph-moe-check-call76.csv). Each variant is the graph engine's
decode step of a catalog model with config overrides (roofline.probes.cut_config, as the layers and
layer-features probes build theirs), cut to 2 and 6 layers: a layer is the difference over 4.

From gpt-oss-20b one difference is switched to qwen3-30b-a3b's (no windows; no attention bias;
qwen3's heads 32/4 x 128; qwen3's experts, 128 of 768 wide, top 8; hidden 2,048); from qwen3-30b-a3b
with gpt-oss's MoE layer (the layer-features probe's ``gpt_oss`` variant) one of gpt-oss's is switched
on. Evidence: which difference carries the unpriced time; no term is fitted on gpt-oss-20b from it.

    python3 calibrate/runs/layer_walk.py OUT.json [budget seconds]

Each point: the step replayed from a CUDA graph (median of REPS), and one eager step under
torch.profiler: every kernel's name, launches and device time per step, compact. OUT.json is
written after every variant.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

_GPT_OSS_MOE = (("model_type", "gpt_oss"), ("num_local_experts", 128), ("intermediate_size", 768))
VARIANTS = (
    ("gpt-oss-20b", "", ()),
    ("qwen3-30b-a3b", "", ()),
    ("qwen3-30b-a3b", "gpt_oss", _GPT_OSS_MOE),
    ("gpt-oss-20b", "no windows", (("layer_types", ["full_attention"] * 24),)),
    ("gpt-oss-20b", "no attention bias", (("attention_bias", False),)),
    ("gpt-oss-20b", "heads 32/4 x 128", (("num_attention_heads", 32), ("num_key_value_heads", 4), ("head_dim", 128))),
    ("gpt-oss-20b", "experts 128 x 768 top 8", (("num_local_experts", 128), ("num_experts_per_tok", 8),
                                                ("experts_per_token", 8), ("intermediate_size", 768))),
    ("gpt-oss-20b", "hidden 2048", (("hidden_size", 2048),)),
    ("qwen3-30b-a3b", "gpt_oss hidden 2880", _GPT_OSS_MOE + (("hidden_size", 2880),)),
    ("qwen3-30b-a3b", "gpt_oss experts 32 top 4", _GPT_OSS_MOE[:1] + (("num_local_experts", 32),
                                                                       ("num_experts_per_tok", 4),
                                                                       ("intermediate_size", 768))),
    ("qwen3-30b-a3b", "gpt_oss experts 32 x 2880 top 4", _GPT_OSS_MOE[:1] + (("num_local_experts", 32),
                                                                              ("num_experts_per_tok", 4),
                                                                              ("intermediate_size", 2880),
                                                                              ("moe_intermediate_size", 2880))),
    ("qwen3-30b-a3b", "gpt_oss heads 64/8 x 64", _GPT_OSS_MOE + (("num_attention_heads", 64),
                                                                 ("num_key_value_heads", 8), ("head_dim", 64))),
    ("qwen3-30b-a3b", "gpt_oss windows", _GPT_OSS_MOE + (("sliding_window", 128),)),
    ("qwen3-30b-a3b", "gpt_oss attention bias", _GPT_OSS_MOE + (("attention_bias", True),)),
)
LAYERS = (2, 6)
POINTS = ((1, 520), (4, 520), (16, 520), (1, 4104))  # (batch, cache positions)
REPS = 30


def kernels_of_one_step(step, dev) -> list:
    """[(name, launches, device seconds)] of one eager ``step`` under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    from calibrate.timing import synchronize

    step()
    synchronize(dev)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        synchronize(dev)
    out: dict[str, list] = {}
    for ev in prof.events():
        if ev.device_type.name != "CUDA":
            continue
        cell = out.setdefault(ev.name[:100], [0, 0.0])
        cell[0] += 1
        cell[1] += ev.device_time * 1e-6
    return [[k, n, round(s, 9)] for k, (n, s) in sorted(out.items(), key=lambda kv: -kv[1][1])]


def main() -> None:
    import torch

    from calibrate.graph_engine import GraphEngine, decode_step
    from calibrate.probes import _cut_config
    from calibrate.timing import environment, free_memory, median_s, synchronize, torch_device

    out = Path(sys.argv[1])
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 400.0
    t0 = time.monotonic()
    dev = torch_device("cuda" if torch.cuda.is_available() else "cpu")
    result = {"probe": "layer-walk", "environment": environment(dev), "method": __doc__, "layers": LAYERS,
              "variants": [[m, v, [list(o) for o in ov]] for m, v, ov in VARIANTS], "points": [], "errors": [],
              "stopped": None}
    for model, variant, overrides in VARIANTS:
        if time.monotonic() - t0 > budget:
            result["stopped"] = f"budget of {budget:.0f} s spent before {model} {variant!r}"
            break
        for layers in LAYERS:
            engine = None
            try:
                engine = GraphEngine(_cut_config(model, layers, overrides), device=str(dev))
                for batch, context in POINTS:
                    st = engine.new_state(batch, context)
                    with torch.inference_mode():
                        st.pos.fill_(context - 8)
                        graph_s = median_s(engine._capture(st, context - 8), dev, warmup=3, reps=REPS)
                        engine._graph = None
                        st.pos.fill_(context - 8)
                        kernels = kernels_of_one_step(lambda: decode_step(engine.weights, engine.shapes, st), dev)
                    result["points"].append({"model": model, "variant": variant, "layers": layers, "batch": batch,
                                             "context": context, "graph_step_s": round(graph_s, 9),
                                             "kernels": kernels})
                    del st
                    synchronize(dev)
            except Exception as exc:  # noqa: BLE001 - record and go on
                result["errors"].append({"model": model, "variant": variant, "layers": layers,
                                         "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            del engine
            free_memory()
        result["wall_s"] = round(time.monotonic() - t0, 1)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, separators=(",", ":")))
        tmp.replace(out)
        print(f"{model} {variant!r} done at {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
