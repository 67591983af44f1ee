"""What a folder's serving runs miss by once the replay runs at the machine's own pass speeds: each
run replayed as `roofline compare-serving` replays it (the shipped prices), at its device probe's
decode speed per bucket (`--at-probed-speed`: a prediction from the probe taken before the run's
clock), at that speed with its prefill passes at their own measured median device time / price, and
with its own decode steps' median device time / price per bucket (of 5 steps or more) and its own
prefill's. The last two are not predictions -- no probe foretells the run's prefill speed, and the
last uses the run's own passes --, but they say how much of a miss is the passes' price on that
machine and how much the queue's simulation (as benchmarks/serving_tail_sensitivity.py does for the
H200's runs). A chunked run's prefill iterations carry its decode steps: its prefill is left at
its price. No GPU needed:

    .venv/bin/python benchmarks/serving_own_speed.py FOLDER [FOLDER ...] [--run NAME ...]

Ends with a tally per way: how many runs' figures are within the acceptance bounds. Output of the
forty-eighth session over every H100 folder (leave one card out: no H100 run set a term),
docs/data/cpu/serving-own-speed-h100.txt:

    .venv/bin/python benchmarks/serving_own_speed.py $(ls hardware_profiles/measurements/serving | grep h100)

(docs/serving.md, "What the forty-seventh session's device call said").
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
#: the figures compared, with their titles (their bounds: roofline.serving_replay.COMPARED, issue 14's)
FIGURES = (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"), ("tpot_p50_s", "TPOT p50"), ("tpot_p99_s", "TPOT p99"))


def main() -> None:
    from serving_tail_sensitivity import own_bucket_scales, simulate

    from roofline.pass_costs import host_ratios, load_loop_terms, run_host_probe
    from roofline.serving_replay import COMPARED, pass_ratios, probed_speed, replay, run_card
    from roofline.serving_runs import read_run, run_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="+", help="a folder under hardware_profiles/measurements/serving/ (or several)")
    parser.add_argument("--run", action="append", help="a run of the folder (repeat; default: all; one folder only)")
    args = parser.parse_args()
    if args.run and len(args.folder) > 1:
        raise SystemExit("error: --run goes with one folder")
    jobs = []
    for sub in args.folder:
        folder = SERVING / sub
        if not folder.is_dir():
            raise SystemExit(f"error: no folder of serving runs {folder}")
        present = run_names(folder)
        names = args.run or present
        missing = [n for n in names if n not in present]
        if missing:
            raise SystemExit(f"error: no run {missing[0]!r} in {folder}")
        jobs += [(folder, n) for n in names]
    print(f"measurements/serving/{', '.join(args.folder)}: simulated / measured (error): as shipped; at the run's "
          "device probe's decode speed per bucket; at that speed with the prefill passes at the run's own measured "
          "speed; at the run's own decode and prefill speeds. x: outside the acceptance bound.")
    terms_by_card, tally = {}, defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for folder, name in jobs:
        run = read_run(folder, name)
        card = run_card(run)
        terms = terms_by_card.setdefault(card, load_loop_terms(card=card, engine="graph"))
        ratios = pass_ratios(run, terms)
        scales, why = probed_speed(ratios)
        if scales is None:
            print(f"\n{folder.name}/{name}: no device probe ({why})")
            continue
        prefill = ratios["prefill"]
        own = own_bucket_scales(ratios)
        sims = [("shipped", replay(run, folder, terms)),
                ("probed decode", replay(run, folder, terms, decode_time_scales=scales))]
        if prefill is not None:
            sims.append(("probed decode, own prefill",
                         simulate(run, folder, terms, prefill_scale=prefill, card=card, decode_bucket_scales=scales)))
        sims.append(("own decode and prefill", simulate(run, folder, terms, prefill_scale=prefill or 1.0, card=card,
                                                        decode_bucket_scales=own)))
        host = host_ratios(terms, run_host_probe(run.config))
        host_text = "-" if host is None else f"{host[0]:.2f}x decode, {host[1]:.2f}x prefill"
        print(f"\n{folder.name}/{name} ({card}; decode GPU / price {ratios['decode']:.3f}, its probe "
              f"{ratios['probe']:.3f}; prefill {'-' if prefill is None else f'{prefill:.3f}'}; host probe over the "
              f"fit runs' {host_text})")
        meas = run.summary
        for label, sim in sims:
            cells = []
            for key, title in FIGURES:
                bound = COMPARED[key]
                err = sim[key] / meas[key] - 1.0
                mark = " x" if abs(err) > bound else "  "
                cells.append(f"{title} {sim[key] * 1e3:8.1f} / {meas[key] * 1e3:8.1f} ms ({err:+6.1%}){mark}")
                tally[label][title][0] += abs(err) <= bound
                tally[label][title][1] += 1
            print(f"  {label:<26} " + "  ".join(cells))
    print("\nwithin the acceptance bound, of the runs replayed each way:")
    for label, figures in tally.items():
        print(f"  {label:<26} " + ", ".join(f"{title} {k} of {n}" for title, (k, n) in figures.items()))


if __name__ == "__main__":
    main()
