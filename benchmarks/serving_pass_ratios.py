"""How far the serving loop's passes run from their price, run by run: the evidence behind the
loop's prefill graphs (docs/serving.md, "Why the prefill is a graph").

    .venv/bin/python benchmarks/serving_pass_ratios.py

For each committed folder of serving runs it prices every iteration with loop terms of the same
loop (the eager-prefill folders with terms fitted on call 2's two fit runs, as shipped before the
prefill graphs; the graph folders twice: with the graph prefill's earlier price -- the step
model's kernel time at the padded bucket plus a fixed time a layer, refitted on calls 5-7's fit
runs -- and with the shipped terms, whose linears come from the card's matmul table) and prints,
per run, the median and 90th percentile of measured device time / price for prefill passes and
decode steps; for the graph runs, the median per model; and the eager call-4 runs replayed with
call 2's terms (TTFT and TPOT p50 / p99 errors); and, for the chunked runs of calls 14-15, the
mixed iterations whose chunk continues after cached tokens priced with and without the chunk
table. No GPU needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIT = ["qwen2.5-1.5b-mixed-r40-n400-s1", "qwen2.5-7b-mixed-r25-n300-s1"]
SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"


def ratios(folder: Path, terms) -> list[tuple]:
    """(run, model, prefill ratios, decode ratios) per run: device_s / the loop's price of it."""
    from roofline.serving_replay import iteration_ratios
    from roofline.serving_runs import read_run, run_names

    out = []
    for name in run_names(folder):
        run = read_run(folder, name)
        _, pre, dec = iteration_ratios(run, terms)
        out.append((name, run.config["model"], np.array(pre), np.array([r for _, r in dec])))
    return out


def main() -> None:
    from roofline.pass_costs import LoopCost, load_loop_terms
    from roofline.serving_replay import _step, compare_rows, fit_loop_terms
    from roofline.serving_runs import read_run, run_names

    eager_terms = fit_loop_terms([read_run(SERVING / "h200-graph-eager-x2", n) for n in FIT])
    graph_terms = load_loop_terms(card="h200", engine="graph")
    # the graph prefill's earlier price: the step model's kernel time at the padded bucket plus a
    # fixed time a layer, refitted as it was shipped (calls 5-7's two fit runs, no matmul table)
    plain_terms = fit_loop_terms([read_run(SERVING / "h200-graph", n) for n in FIT], gemm_table=None)
    for folder, terms, how in (("h200-graph-eager-x2", eager_terms, "eager prefill"),
                               ("h200-graph-eager-call4", eager_terms, "eager prefill"),
                               ("h200-graph", plain_terms, "graph prefill, priced by the step model"),
                               ("h200-graph", graph_terms, "graph prefill, priced from the matmul table"),
                               ("h200-graph-call9", plain_terms, "graph prefill, priced by the step model"),
                               ("h200-graph-call9", graph_terms, "graph prefill, priced from the matmul table"),
                               ("h200-graph-probe", plain_terms, "graph prefill, priced by the step model"),
                               ("h200-graph-probe", graph_terms, "graph prefill, priced from the matmul table"),
                               ("h200-graph-call11", graph_terms, "graph prefill, priced from the matmul table"),
                               ("h200-graph-call12", graph_terms, "graph prefill, priced from the matmul table")):
        print(f"\n{folder} ({how}): device time / price")
        print(f"{'run':40} {'prefill p50':>11} {'p90':>6} {'decode p50':>11} {'p90':>6}")
        rows = ratios(SERVING / folder, terms)
        for name, _, pre, dec in rows:
            print(f"{name:40} {np.median(pre):11.2f} {np.quantile(pre, 0.9):6.2f} {np.median(dec):11.3f} "
                  f"{np.quantile(dec, 0.9):6.3f}")
        if terms.prefill_graphs:
            for model in sorted({m for _, m, _, _ in rows}):
                pre = np.concatenate([p for _, m, p, _ in rows if m == model])
                dec = np.concatenate([d for _, m, _, d in rows if m == model])
                print(f"  {model}: prefill median {np.median(pre):.2f} over {len(pre)} passes, decode median "
                      f"{np.median(dec):.3f} over {len(dec)} steps")
    print("\nhost time a decode step (next t_start - t_start - device_s; mean over steps followed by another "
          "without an idle wait), and the run's host probe (calibrate.serving_loop.host_probe) where it has one:")
    for folder in ("h200-graph", "h200-graph-call9", "h200-graph-probe", "h200-graph-call11", "h200-graph-call12",
                   "h200-graph-call14", "h200-graph-call15", "h200-graph-call17"):
        for name in run_names(SERVING / folder):
            run = read_run(SERVING / folder, name)
            its = run.iterations
            host = [b["t_start_s"] - a["t_start_s"] - a["device_s"] for a, b in zip(its, its[1:])
                    if a["kind"] == "decode" and b["t_start_s"] - a["t_end_s"] < 1e-3 and a["running"] > 0]
            probe, after = run.config.get("host_probe"), run.config.get("host_probe_after")
            seen = f"probe {probe['decode_host_s'] * 1e6:4.0f} us" if probe else "no probe"
            if after:
                seen += f", after the run {after['decode_host_s'] * 1e6:4.0f} us"
            print(f"  {folder:17} {name:40} {np.mean(host) * 1e6:5.0f} us  ({seen})")
    print("\nhost time a decode step (median; steps where nobody finished or was preempted) by tertile of the "
          "step's device time: on some machines the host's share grows with how long it waited for the GPU")
    for folder in ("h200-graph-probe", "h200-graph-call12"):
        for name in run_names(SERVING / folder):
            its = read_run(SERVING / folder, name).iterations
            host, dev = [], []
            for a, b in zip(its, its[1:]):
                if (a["kind"] == "decode" and b["t_start_s"] - a["t_end_s"] < 1e-3 and a["running"] > 0
                        and not a["finished"] and not a["preempted"]):
                    host.append(b["t_start_s"] - a["t_start_s"] - a["device_s"])
                    dev.append(a["device_s"])
            host, dev = np.array(host), np.array(dev)
            edges = np.quantile(dev, [0, 1 / 3, 2 / 3, 1])
            parts = [np.median(host[(dev >= lo) & (dev <= hi)]) * 1e6 for lo, hi in zip(edges, edges[1:])]
            print(f"  {folder:17} {name:40} device {edges[0] * 1e3:5.2f}-{edges[-1] * 1e3:5.2f} ms: host "
                  + " / ".join(f"{p:4.0f}" for p in parts) + " us")
    print("\nchunk graphs (calls 14-15, policy chunked): mixed iterations with one chunk, device time / price, "
          "median; a chunk after cached tokens priced with the chunk table (roofline.chunk_table) and without it "
          "(the copied-out cache's bytes only), and whole-prompt chunks for comparison:")
    bare = graph_terms.model_copy(update={"chunk_attention_table": None})
    for folder in ("h200-graph-call14", "h200-graph-call15"):
        for name in run_names(SERVING / folder):
            run = read_run(SERVING / folder, name)
            c = run.config
            if c["policy"] != "chunked":
                continue
            step = _step(run, "h200", "graph")
            costs = [LoopCost(step, t, c["max_model_len"], c["max_num_seqs"], c["max_num_batched_tokens"])
                     for t in (graph_terms, bare)]
            cont, whole = [], []
            for it in run.iterations:
                tokens, pairs = float(it["prefill_tokens"]), float(it["prefill_pairs"])
                if it["kind"] != "mixed" or it["prefill_seqs"] != 1:
                    continue
                cached = (pairs - tokens * (tokens + 1) / 2) / tokens  # one chunk: its cached tokens
                if cached < 0.5:
                    whole.append(it["device_s"] / (costs[0].prefill_device_s(tokens, pairs, 1.0)
                                                   + costs[0].decode_device_s[int(it["decode_seqs"])]))
                    continue
                slots = int(it["decode_seqs"]) + 1  # the decode graph covers the prefilling slot too
                cont.append([it["device_s"] / (cost.prefill_device_s(tokens, pairs, 1.0, tokens, cached)
                                               + cost.decode_device_s[slots]) for cost in costs])
            ratio = np.median(np.array(cont), axis=0) if cont else (float("nan"), float("nan"))
            print(f"  {folder:17} {name:40} continued ({len(cont):3}): {ratio[0]:.3f} with the table, "
                  f"{ratio[1]:.3f} without; whole prompts ({len(whole):3}): {np.median(whole):.3f}")
    print("\nh200-graph-eager-call4 replayed with call 2's terms (simulated / measured - 1):")
    for r in compare_rows(SERVING / "h200-graph-eager-call4", eager_terms):
        print(f"  {r['run']:40} " + "  ".join(f"{k.replace('_s', '')} {100 * r[k]['error']:+5.1f}%"
                                             for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")))


if __name__ == "__main__":
    main()
