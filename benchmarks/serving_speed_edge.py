"""How a served stream's TPOT and TTFT medians move with the decode steps' speed: the replay of a
committed run with every decode step's GPU time scaled by a factor (roofline.serving_replay.replay's
``decode_time_scales``, the same factor at every bucket), the host terms and the prefill as
shipped. No GPU needed:

    .venv/bin/python benchmarks/serving_speed_edge.py > docs/data/cpu/call143-predictions.txt

A lent H200 machine runs the decode graphs at 0.96-1.05x their price (docs/serving.md, "Why the
remaining tails miss"); a stream whose running count sits near a decode bucket's edge (64 -> 96
slots for llama-3.2-3b's chat stream at 20 req/s) turns that into a far larger move of its TPOT
p50: a slower step keeps more sequences running, which crosses into the wider bucket, whose step is
slower again. Written before device call 143 (calibrate/runs/h200-call143.sh), which serves the
same streams again on another machine: its runs' device probes read that machine's decode speed,
and the rows here say what the replay gives at it. Call 145 (calibrate/runs/h100-call145.sh) asks
the same of the H100, with call 144's four runs of qwen2.5-1.5b and qwen2.5-7b:

    .venv/bin/python benchmarks/serving_speed_edge.py --folder h100-sxm-graph-call144 --card h100-sxm \
        --run qwen2.5-1.5b-chat-s893-r40 --run qwen2.5-1.5b-chat-s893-r60 --run qwen2.5-7b-reason-s891-r3 \
        --run qwen2.5-7b-reason-s891-r5 --scales 0.92,0.94,0.96,0.98,1.00,1.02 > docs/data/cpu/call145-predictions.txt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
#: The runs of the forty-sixth session's H200 (device calls 141-142's scripts) that call 143 serves again.
RUNS = ("llama-3.2-3b-chat-s885-r20", "llama-3.2-3b-chat-s885-r30", "qwen2.5-7b-chat-s881-r15",
        "qwen2.5-7b-chat-s881-r25")
SCALES = (0.96, 0.98, 1.00, 1.02, 1.04, 1.06)


def main() -> None:
    from roofline.buckets import capture_sizes
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import pass_ratios, replay
    from roofline.serving_runs import read_run, run_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="h200-graph-call141", help="a folder under measurements/serving/")
    parser.add_argument("--run", action="append", help="a run of the folder (repeat; default: call 143's four)")
    parser.add_argument("--card", default="h200", help="the card whose loop terms price the replays (default h200; "
                        "another Hopper card gets the H200's terms transferred, as compare-serving does)")
    parser.add_argument("--scales", type=lambda t: tuple(float(x) for x in t.split(",")), default=SCALES,
                        help="the decode speed factors, comma-separated (default " + ",".join(map(str, SCALES)) + ")")
    args = parser.parse_args()
    folder = SERVING / args.folder
    if not folder.is_dir():
        raise SystemExit(f"error: no folder of serving runs {folder}")
    names = args.run or RUNS
    missing = [n for n in names if n not in run_names(folder)]
    if missing:
        raise SystemExit(f"error: no run {missing[0]!r} in {folder}")
    terms = load_loop_terms(card=args.card, engine="graph")
    which = "the shipped H200 loop terms" if args.card == "h200" else f"the H200 loop terms transferred to {args.card}"
    print(f"Replays of measurements/serving/{args.folder}/ with every decode step's GPU time x scale "
          f"({which}; host and prefill as shipped). Columns: simulated TPOT p50, "
          "TTFT p50 and p99, max running.")
    for name in names:
        run = read_run(folder, name)
        buckets = capture_sizes(run.config["max_num_seqs"])  # the loop's decode graphs
        meas = run.summary
        ratio = pass_ratios(run, terms)
        print(f"\n{name}: measured TPOT p50 {meas['tpot_p50_s'] * 1e3:.2f} ms, TTFT p50 "
              f"{meas['ttft_p50_s'] * 1e3:.1f} ms, p99 {meas['ttft_p99_s'] * 1e3:.1f} ms, max running "
              f"{meas['max_running']}; its decode steps ran {ratio['decode']:.3f}x their price "
              f"(its device probe {ratio['probe']:.3f}x)")
        print(f"{'decode x':>9} {'TPOT p50 ms':>12} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'max running':>12}")
        for scale in args.scales:
            sim = replay(run, folder, terms, decode_time_scales={b: scale for b in buckets})
            print(f"{scale:9.2f} {sim['tpot_p50_s'] * 1e3:12.2f} {sim['ttft_p50_s'] * 1e3:12.1f} "
                  f"{sim['ttft_p99_s'] * 1e3:12.1f} {sim['max_running']:12d}")


if __name__ == "__main__":
    main()
