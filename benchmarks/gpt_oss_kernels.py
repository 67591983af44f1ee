"""Where gpt-oss-20b's decode step goes, layer by layer, beside qwen3-30b-a3b's (the fitted MoE model),
from device call 74's kernels probe, and what the step model prices a layer (no GPU needed).

    .venv/bin/python benchmarks/gpt_oss_kernels.py [CALIBRATION]

The probe profiled each model cut to 2 and 6 layers (hardware_profiles/measurements/
h200-probe-kernels-call74.json, and call 75's batches 2-8, -call75.json): a layer is the difference
over 4. Part 1: a layer's CUDA-graph time measured and priced (roofline.probes.variant_spec cut
alike, roofline.step.StepModel), by batch and cache length. Part 2: a layer's kernel time by family
at two points, both models. Part 3: a layer's row gathers and scatters by batch (PyTorch's
index_select and index_add_ kernels for few indices, "SmallIndex").
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PROBES = [ROOT / "hardware_profiles" / "measurements" / f"h200-probe-kernels-call{n}.json" for n in (74, 75)]
MODELS = ("gpt-oss-20b", "qwen3-30b-a3b")


def family(name: str) -> str:
    """A kernel's family: the grouped GEMM, cuBLAS's (with a bias epilogue, a batched add), else its op."""
    if "GemmUniversal" in name:
        return "grouped GEMM (experts)"
    if name.startswith("nvjet"):
        return "cuBLAS GEMM" + (" + bias" if "bias" in name else " (batched, attention)" if "badd" in name or "NNT" in name
                                else "")
    name = re.sub(r"<.*", "", name.replace("void ", "").replace("at::native::", "").replace("(anonymous namespace)::", ""))
    return name[:56]


def main() -> None:
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.probes import variant_spec
    from roofline.step import StepModel, decode_work

    cal = load_calibration(sys.argv[1] if len(sys.argv) > 1 else ROOT / "hardware_profiles/calibrations/h200-graph.json")
    card = load_card(cal.card)
    points = {(p["model"], p["layers"], p["batch"], p["context"]): p
              for path in PROBES for p in json.loads(path.read_text())["points"]}

    def priced(model, layers, batch, context):
        step = StepModel(variant_spec(model, (), layers), card, cal)
        window = min(context, 128)  # gpt-oss's windowed layers read their ring of 128
        return step.pass_s(decode_work(float(batch), float(batch * context), float(batch * window)))

    print("1. a layer's graph time (6-layer cut - 2-layer cut) / 4, measured and priced")
    for model in MODELS:
        for batch in (1, 2, 4, 8, 16, 64, 256):
            for context in (520, 4104):
                a, b = points.get((model, 2, batch, context)), points.get((model, 6, batch, context))
                if not a or not b:
                    continue
                measured = (b["graph_step_s"] - a["graph_step_s"]) / 4
                price = (priced(model, 6, batch, context) - priced(model, 2, batch, context)) / 4
                print(f"   {model:14s} batch {batch:3d} cache {context:5d}: {1e6 * measured:7.1f} us measured, "
                      f"{1e6 * price:7.1f} priced ({100 * (price / measured - 1):+5.1f}%)")
    print("2. a layer's kernel time by family, us: gpt-oss-20b / qwen3-30b-a3b")
    for batch, context in ((1, 520), (256, 520)):
        per = {}
        for model in MODELS:
            a, b = points[(model, 2, batch, context)], points[(model, 6, batch, context)]
            fam: dict = {}
            for p, sign in ((b, 1.0), (a, -1.0)):
                for k in p["kernels"]:
                    fam[family(k["name"])] = fam.get(family(k["name"]), 0.0) + sign * k["seconds"] / 4
                fam["(the rest, summed)"] = fam.get("(the rest, summed)", 0.0) + sign * p["other_kernels_s"] / 4
                fam["(graph gaps)"] = fam.get("(graph gaps)", 0.0) + sign * (p["graph_step_s"] - p["kernel_s"]) / 4
            per[model] = fam
        g, q = per[MODELS[0]], per[MODELS[1]]
        print(f"   batch {batch}, cache {context}: total {1e6 * sum(g.values()):.1f} / {1e6 * sum(q.values()):.1f}")
        for k in sorted(set(g) | set(q), key=lambda k: -(g.get(k, 0.0) + q.get(k, 0.0))):
            if max(abs(g.get(k, 0.0)), abs(q.get(k, 0.0))) > 1e-6:
                print(f"     {1e6 * g.get(k, 0.0):7.2f} / {1e6 * q.get(k, 0.0):7.2f}  {k}")
    small_index(points)


def small_index(points) -> None:
    print("3. a layer's SmallIndex gather and scatter kernels (index_select / index_add_ of few rows), us, 520 positions")
    for model in MODELS:
        cells = []
        for batch in (1, 2, 4, 8, 16):
            a, b = points.get((model, 2, batch, 520)), points.get((model, 6, batch, 520))
            if not a or not b:
                continue
            t = sum(sign * k["seconds"] for p, sign in ((b, 1.0), (a, -1.0)) for k in p["kernels"]
                    if "SmallIndex" in k["name"]) / 4
            cells.append(f"batch {batch}: {1e6 * t:5.1f}")
        print(f"   {model:14s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
