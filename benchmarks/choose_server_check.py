"""choose-server against the real server loop: is the rate it names the rate where the real server
crosses the SLO?

`roofline choose-server` answers "the highest arrival rate at which this server keeps TTFT p99 and
TPOT p99 within the SLOs". This check takes one stream shape and one pair of SLOs, asks
choose-server for that rate R* on a card with the serving loop's price (`--pass-cost serving-loop`,
the loop's configuration: prefill-first, the slots, the slot length; ``check`` the run's own pool), has the
real loop (calibrate/serving_loop.py) serve the same stream -- the same lengths and, at each rate,
the same Poisson arrivals (the job's generator is roofline.batching's, same seed) -- at rates around
R*, and reports, per rate, the measured p99s against the SLOs and against choose-server's own
simulation of that rate; then the rate at which the measured TPOT p99 crosses its SLO
(interpolated in log rate and log p99 between the two runs that bracket it) against R*.

choose-server is used as a user would: the loop terms as shipped (carried over to the H100 where it
runs there, docs/serving.md "Leave one card out"), no host probe of the machine that ran it (the
replays of `roofline compare-serving` use it; these do not).

    .venv/bin/python benchmarks/choose_server_check.py pick [--card h200|h100-sxm]
    .venv/bin/python benchmarks/choose_server_check.py check DIR [--card CARD]

``pick`` prints R* and the rates to serve (R* x RATE_FACTORS, rounded to 0.1 req/s), and writes the
stream's lengths to docs/data/cpu/choose-server-check-lengths.csv; ``check`` reads the serving runs
(requests-*.csv[.gz], run-*.json) in DIR. No GPU needed.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: the check's stream, server and SLOs (chosen before any run: docs/serving.md, "choose-server,
#: checked against the real loop")
MODEL = "llama-3.1-8b"
STREAM, COUNT, SEED = "mixed", 400, 851
SLOTS, MAX_MODEL_LEN = 64, 1280
SLO_TTFT_S, SLO_TPOT_S = 0.5, 0.016
RATE_FACTORS = (0.7, 0.85, 1.0, 1.15, 1.3)
LENGTHS = ROOT / "docs" / "data" / "cpu" / "choose-server-check-lengths.csv"


def lengths() -> list[tuple[int, int]]:
    """The stream's (prompt, generation) lengths as the serving job draws them
    (calibrate.serving_job.stream_requests)."""
    from calibrate.serving_job import stream_requests

    return [(r.prompt_tokens, r.gen_tokens) for r in stream_requests(STREAM, COUNT, None, seed=SEED)]


def write_lengths(path: Path = LENGTHS) -> Path:
    """The stream's lengths as a request file (what ``pick`` commits beside its answer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["prompt_tokens", "gen_tokens"])
        w.writerows(lengths())
    tmp.replace(path)
    return path


def choose(card: str, rates=None, kv_capacity_tokens=None, whole: bool = False):
    """choose-server's answer for the check's stream on ``card`` (at ``rates`` if given): its best
    candidate, or (``whole``) the whole answer."""
    import numpy as np

    import roofline
    from roofline.batching import Requests

    prompts, gens = zip(*lengths())
    answer = roofline.choose_server(card, MODEL, engine="graph", batch=SLOTS,
                                    requests=Requests(np.array(prompts), np.array(gens), source=f"{STREAM} seed {SEED}"),
                                    seed=SEED, slo_ttft_s=SLO_TTFT_S, slo_tpot_s=SLO_TPOT_S,
                                    schedule="prefill-first", max_model_len=MAX_MODEL_LEN,
                                    kv_capacity_tokens=kv_capacity_tokens, pass_cost="serving-loop",
                                    rates=rates).as_dict()
    return answer if whole else answer["best"]


def pick(card: str) -> None:
    write_lengths()
    best = choose(card)
    r = best["best_rate_req_s"]
    rates = [round(r * f, 1) for f in RATE_FACTORS]
    print(f"{MODEL} {STREAM} x {COUNT} seed {SEED}, {SLOTS} slots of {MAX_MODEL_LEN}, prefill-first, on {card}: "
          f"SLOs TTFT p99 <= {SLO_TTFT_S * 1e3:.0f} ms, TPOT p99 <= {SLO_TPOT_S * 1e3:.0f} ms")
    print(f"choose-server: best rate {r:.2f} req/s ({best['utilization']:.0%} of its capacity "
          f"{best['capacity_req_s']:.2f}), binding {best['binding']}, KV pool {best['at_best']['kv_capacity_tokens']:,} tokens")
    print("rates to serve: " + ",".join(f"{x:g}" for x in rates))


def measured(folder: Path) -> list[dict]:
    """Per run in ``folder`` of the check's model, stream and seed: its rate, pool and measured p99s."""
    from roofline.serving_runs import read_run, run_names

    out = []
    for name in run_names(folder):
        run = read_run(folder, name)
        st = run.run.get("stream", {})
        if run.config.get("model") != MODEL or st.get("stream") != STREAM or st.get("seed") != SEED:
            continue
        out.append({"name": name, "rate": float(st["rate_per_s"]), "pool": run.config["kv_capacity_tokens"],
                    "ttft_p99_s": run.summary["ttft_p99_s"], "tpot_p99_s": run.summary["tpot_p99_s"],
                    "unserved": run.summary["unserved"]})
    return sorted(out, key=lambda x: x["rate"])


def crossing(rates, p99s, slo):
    """The rate where p99 crosses ``slo``, log-linear between the bracketing rates; None without a
    bracket (with which side it lies)."""
    for (r0, y0), (r1, y1) in zip(zip(rates, p99s), zip(rates[1:], p99s[1:])):
        if y0 <= slo < y1:
            w = (math.log(slo) - math.log(y0)) / (math.log(y1) - math.log(y0))
            return math.exp(math.log(r0) + w * (math.log(r1) - math.log(r0))), "between"
    if p99s and p99s[0] > slo:
        return None, "below the lowest rate served"
    return None, "above the highest rate served"


def check(folder: Path, card: str) -> int:
    runs = measured(folder)
    if not runs:
        print(f"no runs of {MODEL} {STREAM} seed {SEED} in {folder}")
        return 1
    pool = runs[0]["pool"]
    best = choose(card, kv_capacity_tokens=pool)
    r_star = best["best_rate_req_s"]
    # each rate on its own (a sweep of given rates stops at the first that breaks an SLO)
    sim = {x["rate"]: choose(card, rates=[x["rate"]], kv_capacity_tokens=pool, whole=True)["candidates"][0]["points"][0]
           for x in runs}
    print(f"{MODEL} {STREAM} x {COUNT} seed {SEED} on {card}, SLOs TTFT p99 <= {SLO_TTFT_S * 1e3:.0f} ms, "
          f"TPOT p99 <= {SLO_TPOT_S * 1e3:.0f} ms; choose-server's rate {r_star:.2f} req/s (binding {best['binding']})")
    print(f"{'rate':>6}  {'x R*':>5}  {'TTFT p99 meas / sim (ms)':>25}  {'TPOT p99 meas / sim (ms)':>25}  "
          f"{'SLOs met: meas / sim':>20}")
    rates, tpots = [], []
    for x in runs:
        ttft, tpot = x["ttft_p99_s"], x["tpot_p99_s"]
        s = sim[x["rate"]]
        meets = ttft <= SLO_TTFT_S and tpot <= SLO_TPOT_S
        print(f"{x['rate']:6.2f}  {x['rate'] / r_star:5.2f}  {ttft * 1e3:11.1f} / {s['ttft_p99_s'] * 1e3:8.1f}  "
              f"{tpot * 1e3:11.2f} / {s['tpot_p99_s'] * 1e3:8.2f}  {'yes' if meets else 'no':>11} / "
              f"{'yes' if s['meets'] else 'no'}")
        if x["unserved"]:
            print(f"        {x['name']}: {x['unserved']} requests unserved (the job's deadline): its p99s are not the stream's")
        rates.append(x["rate"])
        tpots.append(tpot)
    r_meas, where = crossing(rates, tpots, SLO_TPOT_S)
    if r_meas is None:
        print(f"measured TPOT p99 crosses its SLO {where}")
    else:
        print(f"measured TPOT p99 crosses its SLO at {r_meas:.2f} req/s; choose-server named {r_star:.2f} "
              f"({(r_star - r_meas) / r_meas:+.1%})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["pick", "check"])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--card", default="h200")
    a = ap.parse_args(argv)
    if a.what == "pick":
        pick(a.card)
        return 0
    if not a.folder:
        ap.error("check needs the folder of the runs")
    return check(Path(a.folder), a.card)


if __name__ == "__main__":
    raise SystemExit(main())
