"""How far the serving replays' tails move with a few percent of device time, and what the
remaining TTFT p99 misses are made of (docs/serving.md, "Why the remaining tails miss").

    .venv/bin/python benchmarks/serving_tail_sensitivity.py

Over the held-out runs that carry the host probe (the set benchmarks/fit_serving_loop.py sums up:
prefill-first runs of calls 10-14, 17, 85, 88 and 89, chunked runs with chunk graphs of calls 14,
15, 17, 26, 85 and 88), with the shipped loop terms and calibration, no GPU needed:

1. the decode graph's device time over its price at bucket 16, per model and device call: the
   same graph of the same model, on the lent machine of each call;
2. every run replayed as `roofline compare-serving --pass-time-spread 0.03` replays it: as
   shipped, and with every pass's device time 3% faster and 3% slower (the host terms untouched;
   the range is the least and the most of the three TTFT p99s, a tail not being monotonic in the
   pass time near saturation): TTFT p99 measured, simulated, and the range;
3. the same runs replayed with their own decode steps' median device time / price
   (roofline.serving_replay.pass_ratios, the column compare-serving prints) as the decode scale
   (roofline.pass_costs.LoopCost's ``decode_scale``), then also with their own prefill passes'
   as ``prefill_scale`` (prefill-first runs; a chunked run's prefill
   iterations carry its decodes, so its prefill scale stays 1): not a prediction -- each run's
   own measured pass speed --, but it separates what the queue simulation gets wrong from what
   the pass prices do: how many TTFT p99s are within 20% (and TTFT p50s within 10%) each way, and
   with its own decode speed per bucket (``decode_time_scales``: what a perfect device probe
   would give); and, as a control on the host probe, with the host terms as fitted (not scaled
   by the run's host probe);
4. for the runs that carry a device probe (calibrate/serving_loop.device_probe: each decode bucket
   timed in the run's process before its clock, from device call 89 on): the decode speed the
   probe foretold beside the one the run measured, and TTFT p99 replayed as
   `roofline compare-serving --at-probed-speed` replays it -- a prediction from the machine's
   probe, not from the run's own passes.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_serving_loop import CHUNK_GRAPHS, FIT, PROBED  # noqa: E402

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
BOUND = 0.20
BOUND_P50 = 0.10
SPREAD = 0.03


def held_out_runs():
    """(folder, name) of every held-out probed run the acceptance summary counts."""
    from roofline.serving_runs import read_run, run_names

    out = [(SERVING / "h200-graph-probe", n) for n in run_names(SERVING / "h200-graph-probe") if n not in FIT]
    for sub in PROBED:
        for n in run_names(SERVING / sub):
            policy = read_run(SERVING / sub, n).config.get("policy", "prefill-first")
            if policy == "prefill-first" or sub in CHUNK_GRAPHS:
                out.append((SERVING / sub, n))
    return out


def own_bucket_scales(ratios) -> dict:
    """A run's own decode speed per bucket ({bucket: median device time / price}) from
    roofline.serving_replay.pass_ratios: the buckets of 5 steps or more (a median worth the name)
    whose factor replay accepts (0.5-2)."""
    steps = ratios["decode_steps_by_bucket"]
    return {b: v for b, v in ratios["decode_by_bucket"].items() if steps[b] >= 5 and 0.5 <= v <= 2.0}


def simulate(run, folder, terms, decode_scale=1.0, prefill_scale=1.0, *, card="h200",
             decode_bucket_scales=None) -> dict:
    """roofline.serving_replay.replay of ``run`` with its decode and prefill device times scaled
    apart (``pass_time_scale`` scales both together), on ``card``'s step model; with
    ``decode_bucket_scales`` ({bucket: factor}), each decode bucket's as well."""
    from roofline import api
    from roofline.pass_costs import LoopCost, run_host_probe, scaled_for_host
    from roofline.serving import serve_continuous
    from roofline.servers import ServerOptions, build
    from roofline.serving_replay import run_model
    from roofline.serving_runs import run_paths

    c = run.config
    options = ServerOptions("prefill-first" if c["policy"] == "prefill-first" else "decode-first",
                            c["max_num_batched_tokens"], c["max_model_len"], c["num_blocks"] * c["block_size"],
                            block_size=c["block_size"], pass_cost="serving-loop",
                            loop_terms=scaled_for_host(terms, run_host_probe(c)))
    stream = api.request_stream(run_paths(folder, run.name)["stream"])
    sc = api._scenario(card, run_model(run), None, {"engine": "graph", "calibration": "auto"})
    server = build(sc.step, options, c["max_num_seqs"], stream.prompt_tokens, stream.gen_tokens, sc.engine)
    cost = LoopCost(sc.step, server.cost.terms, server.config.max_model_len, c["max_num_seqs"],
                    server.config.max_num_batched_tokens, decode_scale=decode_scale, prefill_scale=prefill_scale,
                    decode_bucket_scales=decode_bucket_scales)
    served = serve_continuous(sc.step, stream.prompt_tokens, stream.gen_tokens, stream.arrival_s, c["max_num_seqs"],
                              pool=server.pool, max_model_len=server.config.max_model_len,
                              max_num_batched_tokens=server.config.max_num_batched_tokens,
                              schedule=server.config.schedule, cost=cost)
    return served.summary()


def main() -> None:
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import pass_ratios, probed_speed, replay
    from roofline.serving_runs import read_run

    terms = load_loop_terms(card="h200", engine="graph")
    runs = held_out_runs()
    machine = defaultdict(dict)  # model -> {call: each run's bucket-16 median ratio}
    rows = []
    for folder, name in runs:
        run = read_run(folder, name)
        c = run.config
        ratios = pass_ratios(run, terms)
        dec, pre = ratios["decode"], ratios["prefill"]
        if ratios["decode_steps_by_bucket"].get(16, 0) >= 20:
            machine[c["model"]].setdefault(folder.name.replace("h200-graph-", ""), []).append(
                ratios["decode_by_bucket"][16])
        measured = run.summary
        shipped = replay(run, folder, terms, pass_time_spread=SPREAD)  # compare-serving's replay and its range
        probed = None
        scales, _ = probed_speed(ratios)  # as compare-serving --at-probed-speed takes it
        if scales:
            probed = replay(run, folder, terms, decode_time_scales=scales)["ttft_p99_s"]
        own = simulate(run, folder, terms, dec)
        per_bucket = own_bucket_scales(ratios)
        own_bucket = replay(run, folder, terms, decode_time_scales=per_bucket)["ttft_p99_s"]
        if pre:
            own_p99_dp = simulate(run, folder, terms, dec, pre)["ttft_p99_s"]
        else:
            own_p99_dp = own["ttft_p99_s"]
        hostless = replay(run, folder, terms, scale_host=False)["ttft_p99_s"]
        check = simulate(run, folder, terms)["ttft_p99_s"]
        if abs(check - shipped["ttft_p99_s"]) > 1e-9 * max(1.0, abs(check)):  # simulate() is the same replay
            raise SystemExit(f"{name}: this replay {check} differs from serving_replay.replay's {shipped['ttft_p99_s']}")
        lo, hi = shipped["pass_time_spread"]["ttft_p99_s"]
        rows.append({"call": folder.name.replace("h200-graph-", ""), "run": name, "policy": c["policy"],
                     "preemptions": measured["preemptions"], "decode": dec, "prefill": pre,
                     "measured": measured["ttft_p99_s"], "shipped": shipped["ttft_p99_s"], "low": lo, "high": hi,
                     "own_decode": own["ttft_p99_s"], "own_both": own_p99_dp,
                     "probe": ratios["probe"], "at_probe": probed, "own_bucket": own_bucket, "hostless": hostless,
                     "p50": (measured["ttft_p50_s"], shipped["ttft_p50_s"], own["ttft_p50_s"])})

    print("1. The decode graph at bucket 16 (16 running sequences, 1,280 cache positions each): median device time "
          "/ price by device call (each call a lent machine; the median of its runs' medians)")
    for model in sorted(machine):
        by_call = {k: float(np.median(v)) for k, v in machine[model].items()}
        if by_call:
            vals = list(by_call.values())
            print(f"  {model:18} " + "  ".join(f"{k}: {v:.3f}" for k, v in sorted(by_call.items()))
                  + f"   (spread {100 * (max(vals) / min(vals) - 1):.1f}%)")

    def err(s, m):
        return (s - m) / m

    print(f"\n2-3. TTFT p99 (ms), measured / simulated (error); the simulation's range with every pass's device "
          f"time -{100 * SPREAD:.0f}% .. +{100 * SPREAD:.0f}%; with the run's own median decode (d) and prefill (p) "
          f"device time / price")
    print(f"{'call':12} {'run':40} {'policy':13} {'pre':>4} {'d':>6} {'p':>5}  {'measured':>9} {'shipped':>17} "
          f"{'range -3%..+3%':>22} {'own d':>17} {'own d+p':>17}")
    for r in rows:
        m = r["measured"]
        cell = lambda v: f"{v * 1e3:8.1f} ({100 * err(v, m):+6.1f}%)"  # noqa: E731
        inside = "in" if r["low"] <= m <= r["high"] else "  "
        print(f"{r['call']:12} {r['run']:40} {r['policy']:13} {r['preemptions']:4d} {r['decode']:6.3f} "
              f"{r['prefill'] or 1.0:5.2f}  {m * 1e3:9.1f} {cell(r['shipped'])} "
              f"{r['low'] * 1e3:8.1f}..{r['high'] * 1e3:8.1f} {inside} {cell(r['own_decode'])} {cell(r['own_both'])}")
    n = len(rows)

    def within(key, bound=BOUND):
        return sum(1 for r in rows if abs(err(r[key], r["measured"])) <= bound)

    spans = [r["high"] / r["low"] - 1 for r in rows]
    preempting = [s for s, r in zip(spans, rows) if r["preemptions"] > 0]
    print(f"\n{n} held-out runs: TTFT p99 within {100 * BOUND:.0f}%: {within('shipped')} as shipped, "
          f"{within('own_decode')} with each run's own decode speed, {within('own_both')} with its own decode and "
          f"prefill speed, {within('own_bucket')} with its own decode speed per bucket (what a device probe that "
          "foretold the run exactly would give: part 4)")
    print(f"TTFT p99 within {100 * BOUND:.0f}% with the host terms as fitted (not scaled by each run's host probe): "
          f"{within('hostless')} of {n}")
    shipped_err = np.array([err(r["shipped"], r["measured"]) for r in rows])
    print(f"TTFT p99 error as shipped: mean {100 * shipped_err.mean():+.1f}%, median size "
          f"{100 * np.median(np.abs(shipped_err)):.1f}%")
    p50 = [r["p50"] for r in rows]
    print(f"TTFT p50 within {100 * BOUND_P50:.0f}%: {sum(1 for m, s, _ in p50 if abs(err(s, m)) <= BOUND_P50)} as "
          f"shipped, {sum(1 for m, _, o in p50 if abs(err(o, m)) <= BOUND_P50)} with each run's own decode speed")
    print(f"measured TTFT p99 inside the simulated range at -{100 * SPREAD:.0f}%..+{100 * SPREAD:.0f}% device time: "
          f"{sum(1 for r in rows if r['low'] <= r['measured'] <= r['high'])} of {n}")
    print(f"the range's width (high / low - 1): median {100 * np.median(spans):.0f}% over all runs, "
          f"{100 * np.median(preempting):.0f}% over the {len(preempting)} runs that preempted, "
          f"{100 * np.median([s for s, r in zip(spans, rows) if r['preemptions'] == 0]):.0f}% over the others")

    probed = [r for r in rows if r["probe"] is not None]
    print(f"\n4. Runs with a device probe: {len(probed)} of {n}")
    if not probed:
        print("  none: the probe came with session 24; device call 89 (calibrate/runs/h200-call89.sh) took the "
              "first")
    else:
        for r in probed:
            m = r["measured"]
            at = "not replayed (compare-serving's note says why)" if r["at_probe"] is None else \
                f"{100 * err(r['at_probe'], m):+.1f}%"
            print(f"  {r['call']:12} {r['run']:40} decode / price measured {r['decode']:.3f}, probe {r['probe']:.3f}; "
                  f"TTFT p99 {m * 1e3:.1f} ms, shipped {100 * err(r['shipped'], m):+.1f}%, at the probed speed {at}")
        gap = np.array([r["probe"] - r["decode"] for r in probed])
        replayed = [r for r in probed if r["at_probe"] is not None]
        sizes = lambda key: np.mean([abs(err(r[key], r["measured"])) for r in replayed])  # noqa: E731
        print(f"  mean TTFT p99 error size over those replayed: {100 * sizes('shipped'):.1f}% as shipped, "
              f"{100 * sizes('at_probe'):.1f}% at the probed speed")
        print(f"  probe - measured decode ratio: mean {gap.mean():+.4f}, largest size {np.abs(gap).max():.4f}; TTFT "
              f"p99 within {100 * BOUND:.0f}% over the {len(replayed)} replayed at the probe: "
              f"{sum(1 for r in replayed if abs(err(r['shipped'], r['measured'])) <= BOUND)} as shipped, "
              f"{sum(1 for r in replayed if abs(err(r['at_probe'], r['measured'])) <= BOUND)} at the probed speed")


if __name__ == "__main__":
    main()
