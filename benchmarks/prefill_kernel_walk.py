"""The loop's prefill graph part by part against its price (docs/serving.md, "What the
thirty-fourth session's device calls said").

    .venv/bin/python benchmarks/prefill_kernel_walk.py

1. The K/V repeats' cost (calibrate/runs/kv_repeat_probe.py, device calls 107-110 and 112 on H100s): per
   model, the line of the paired difference a layer against the bytes the extra kernels move; its
   intercept is their fixed time (roofline.pass_costs.kv_repeat_s_from_probe takes the median of
   the grouped-query models' as the shipped terms' prefill_kv_repeat_s_per_layer).
2. The kernel walk (calibrate/runs/prefill_kernel_walk.py, device calls 110, 112 and 117, H100s): each pass's
   kernels (eager, under torch.profiler) by kind -- matmuls, the varlen attention, the rest
   (elementwise: norms, RoPE, K/V writes and repeats, SwiGLU, residuals) -- a layer, their
   launches a layer, the graph's time beyond its kernels; beside them the price's parts with the
   terms carried to the H100 (roofline.pass_costs.LoopCost): the floor (and the repeats), the
   linears from the H100's matmul table, the step model's attention, the elementwise bytes at
   the fitted rate.
3. The matmul table against the matmuls themselves: the layer's four linears and the LM head
   timed alone at their exact shapes in the same call, over the table's interpolation.
4. The elementwise kernels' launches (roofline.pass_costs.launch_s_from_walks, the shipped terms'
   prefill_launch_s): each walked model's elementwise kernels at the 64-token bucket, their time a
   layer against their launches a layer and their bytes, through the origin; beside each model its
   launches as counted from the loop's code (loop_elementwise_launches, plus the two K/V repeats
   with grouped queries); then call 121's walk (four models on one H100, two of them walked by
   no earlier call) against the same line, held out.
5. The q/k norms timed in the graph itself (calibrate/runs/qk_norm_probe.py, device calls 120 and
   126 on two H100s): the line of the paired difference a layer against the norms' bytes, beside the four
   launches' price.
6. The same on an H200 (device calls 128-129, the acceptance card; in no term): the walk on four
   layouts against the H100s' line and alone, the q/k norms and the K/V repeats in the graph.

No GPU needed (~3 s).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "docs" / "data" / "h100-2026-12-06"
REPEAT_PROBES = [DATA / c / "kv-repeat.json" for c in ("call107", "call108", "call109", "call110", "call112", "call117")]
WALKS = [ROOT / "hardware_profiles" / "measurements" / f"h100-sxm-probe-kernel-walk-{c}.json"
         for c in ("call110", "call112", "call117")]
QK_NORM_PROBES = [DATA / c / "qk-norm.json" for c in ("call120", "call126")]
HELD_OUT_WALK = DATA / "call121" / "kernel-walk.json"
H200_DATA = ROOT / "docs" / "data" / "h200-2026-12-06"
H200_WALK = H200_DATA / "call128" / "kernel-walk.json"
H200_QK_NORM = H200_DATA / "call128" / "qk-norm.json"
H200_KV_REPEAT = H200_DATA / "call129" / "kv-repeat.json"
CARD = "h100-sxm"


def repeats() -> None:
    from roofline.pass_costs import paired_lines

    print("1. The extra kernels' paired difference a layer: fixed time (intercept) and rate over the buckets 64-2,048")
    for path in REPEAT_PROBES:
        for entry, intercept, slope in paired_lines(path):
            first = abs(next(iter(entry["buckets"].values()))["diff_s"]) / entry["layers"]
            what = "K/V repeated vs as stored" if entry["variants"][0] == "repeated" else "two copies added"
            print(f"  {path.parent.name}  {entry['model']:14s} {what:26s} fixed {intercept * 1e6:5.2f} us a layer, "
                  f"{1e-12 / slope:4.2f} TB/s; at 64 tokens {first * 1e6:5.2f} us a layer")
    from roofline.pass_costs import load_loop_terms

    terms = load_loop_terms(card="h200", engine="graph")
    rep = terms.prefill_kv_repeat_s_per_layer
    print(f"  shipped prefill_kv_repeat_s_per_layer: {rep.value * 1e6:.2f} us (the grouped-query models' median); "
          f"floor {terms.prefill_floor_s_per_layer.value * 1e6:.2f} us a layer")


def walk() -> None:
    from roofline.gemm import load_gemm_table
    from roofline.pass_costs import LoopCost, attention_and_collectives_s, load_loop_terms, padded_prefill
    from roofline.scenario import make_scenario
    from roofline.step import prefill_work

    from roofline.pass_costs import walk_kernel_kind as kind

    walks = [json.loads(p.read_text(encoding="utf-8")) for p in WALKS]
    terms = load_loop_terms(card=CARD, engine="graph")
    table = load_gemm_table(terms.prefill_gemm_table)
    print(f"\n2. Each pass a layer, us (a lone prompt of 7/8 the bucket; {walks[0]['gpu']}, calls 110, 112, 117): "
          "measured | priced (terms carried to the H100)")
    print(f"  {'model':14s} {'bucket':>6s} | {'graph':>6s} {'matmul':>6s} {'attn':>5s} {'elem':>5s} {'(n)':>5s} "
          f"{'gap':>5s} | {'price':>6s} {'floor':>5s} {'linear':>6s} {'attn':>5s} {'elem':>5s} | price/graph")
    rows3 = []
    for m in (m for data in walks for m in data["models"]):
        if "buckets" not in m:
            continue
        step = make_scenario(card=CARD, model=m["model"], engine="graph").step
        cost = LoopCost(step, terms, m["rows"], m["slots"])
        layers = m["layers"]
        for bucket, by in m["buckets"].items():
            parts = {"matmul": [0.0, 0.0], "attention": [0.0, 0.0], "elementwise": [0.0, 0.0]}
            for name, (calls, seconds) in by["kernels"].items():
                parts[kind(name)][0] += calls
                parts[kind(name)][1] += seconds
            total = sum(p[1] for p in parts.values())
            n = by["prompt"]
            work = prefill_work(*padded_prefill(n, n * (n + 1) / 2, 1, cost.prefill_buckets, cost.logit_rows))
            linears = cost.linears_s(work.prefill_tokens, work.logit_rows)
            attention = attention_and_collectives_s(step, work)
            elementwise = cost.elementwise_s_per_token * work.prefill_tokens
            price = cost.prefill_device_s(n, n * (n + 1) / 2, 1)

            def us(s):
                return s / layers * 1e6
            print(f"  {m['model']:14s} {bucket:>6s} | {us(by['graph_s']):6.1f} {us(parts['matmul'][1]):6.1f} "
                  f"{us(parts['attention'][1]):5.1f} {us(parts['elementwise'][1]):5.1f} "
                  f"{parts['elementwise'][0] / layers:5.1f} {us(by['graph_s'] - total):5.1f} | {us(price):6.1f} "
                  f"{us(cost.fixed_s):5.1f} {us(linears):6.1f} {us(attention):5.1f} "
                  f"{us(elementwise):5.1f} | {price / by['graph_s']:.3f}")
            alone = by["linears_alone_s"]
            cells = {name: table.seconds(m["slots"] if name == "lm_head" else int(bucket), nn, kk) / alone[name]
                     for name, (nn, kk) in m["linears"].items()}
            weight = {name: (1 if name == "lm_head" else layers) for name in alone}
            all_table = sum(table.seconds(m["slots"] if name == "lm_head" else int(bucket), *m["linears"][name])
                            * weight[name] for name in alone)
            all_alone = sum(alone[name] * weight[name] for name in alone)
            rows3.append((m["model"], bucket, all_table / all_alone, parts["matmul"][1] / (all_alone),
                          cells))
    print("  (n): elementwise launches a layer; gap: the graph's time beyond its kernels' sum")
    print("\n3. The matmuls: the table's interpolation over the shape timed alone; inside the pass over alone")
    for model, bucket, ratio, inside, cells in rows3:
        print(f"  {model:14s} {bucket:>6s} table/alone {ratio:5.3f}, inside/alone {inside:5.3f} | "
              + "  ".join(f"{k} {v:5.3f}" for k, v in cells.items()))


def launch_rows(points, line) -> None:
    """One line a walked model: its launches (as counted from the code), its elementwise time and the line's."""
    from roofline.model_spec import load_model
    from roofline.pass_costs import loop_walk_launches

    for p in points:
        fitted = (p["launches"] * line[0] + p["bytes"] * line[1]) * 1e6
        print(f"  {p['walk']:40s} {p['model']:15s} {p['launches']:5.2f} ({loop_walk_launches(load_model(p['model'])):2d})"
              f"              {p['seconds'] * 1e6:7.1f}  {fitted:7.1f}")


def launches() -> None:
    from roofline.pass_costs import launch_line, launch_s_from_walks, load_loop_terms

    _, points = launch_s_from_walks(WALKS)
    line = launch_line(points)
    terms = load_loop_terms(card=CARD, engine="graph")
    print("\n4. The elementwise kernels' launches (roofline.pass_costs.launch_s_from_walks): at the smallest bucket "
          f"(64 tokens), their time a layer = {line[0] * 1e6:.2f} us a launch + their bytes at {1e-12 / line[1]:.2f} TB/s "
          "(least squares through the origin)")
    print(f"  {'walk':40s} {'model':15s} launches (counted + repeats)  time us  fitted us")
    launch_rows(points, line)
    _, held = launch_s_from_walks([HELD_OUT_WALK])
    print(f"  held out ({HELD_OUT_WALK.parent.name}'s walk, one machine, not in the line; gemma-2-9b and gpt-neox-20b "
          "no walk had):")
    launch_rows(held, line)
    print(f"  shipped prefill_launch_s: {terms.prefill_launch_s.value * 1e6:.2f} us; floor "
          f"{terms.prefill_floor_s_per_layer.value * 1e6:.2f} us a layer beyond the kernels")


def qk_norms() -> None:
    from roofline.pass_costs import LAUNCHES_QK_NORM, load_loop_terms, paired_lines

    terms = load_loop_terms(card=CARD, engine="graph")
    four = LAUNCHES_QK_NORM * terms.prefill_launch_s.value
    print("\n5. The q/k norms in the graph (calibrate/runs/qk_norm_probe.py, device calls 120 and 126, two H100s: the "
          "prefill graph with and without them, interleaved): the line of the paired difference a layer against their bytes "
          f"(4 x (q + kv) a token); priced: {LAUNCHES_QK_NORM} launches x {terms.prefill_launch_s.value * 1e6:.2f} us = "
          f"{four * 1e6:.2f} us a layer fixed")
    for path in QK_NORM_PROBES:
        for entry, fixed, per_byte in paired_lines(path):
            at = "  ".join(f"{b}: {abs(by['diff_s']) / entry['layers'] * 1e6:6.1f}"
                           for b, by in entry["buckets"].items())
            print(f"  {path.parent.name}  {entry['model']:12s} fixed {fixed * 1e6:5.2f} us a layer, "
                  f"{1e-12 / per_byte:4.2f} TB/s | us a layer by bucket  {at}")


def on_the_h200() -> None:
    from roofline.pass_costs import LAUNCHES_QK_NORM, launch_line, launch_s_from_walks, load_loop_terms, paired_lines
    from roofline.serving_replay import LAUNCH_WALKS

    terms = load_loop_terms(card="h200", engine="graph")
    shipped = terms.prefill_launch_s.value
    _, points = launch_s_from_walks([ROOT / "hardware_profiles" / p for p in LAUNCH_WALKS])
    value, per_byte = launch_line(points)
    _, h200 = launch_s_from_walks([H200_WALK])
    h200_value, h200_rate = launch_line(h200)
    print("\n6. On an H200 (device calls 128-129, the acceptance card; not in any term): the walk's elementwise "
          "kernels at 64 tokens against the H100s' line, the line of the H200's four models alone, the q/k norms "
          "and the K/V repeats in the graph")
    for p in h200:
        print(f"  {p['model']:12s} {p['launches']:5.2f} launches a layer, {p['seconds'] * 1e6:5.1f} us (the H100s' line "
              f"{(p['launches'] * value + p['bytes'] * per_byte) * 1e6:5.1f})")
    print(f"  the H200's own line: {h200_value * 1e6:.2f} us a launch (shipped {shipped * 1e6:.2f}, from H100s), "
          f"{1e-12 / h200_rate:.2f} TB/s")
    for path, what, priced in ((H200_QK_NORM, "q/k norms", LAUNCHES_QK_NORM * shipped),
                               (H200_KV_REPEAT, "K/V repeats", terms.prefill_kv_repeat_s_per_layer.value)):
        for entry, fixed, slope in paired_lines(path):
            print(f"  {what:11s} {entry['model']:12s} fixed {fixed * 1e6:5.2f} us a layer (priced {priced * 1e6:.2f}), "
                  f"{1e-12 / slope:.2f} TB/s")


def main() -> None:
    repeats()
    walk()
    launches()
    qk_norms()
    on_the_h200()


if __name__ == "__main__":
    main()
