"""choose-server against the real server loop: is the rate it names the rate where the real server
crosses the SLO?

`roofline choose-server` answers "the highest arrival rate at which this server keeps TTFT p99 and
TPOT p99 within the SLOs". This check takes one stream shape and a pair of SLOs (a *case*), asks
choose-server for that rate R* on a card with the serving loop's price (`--pass-cost serving-loop`,
the loop's configuration: prefill-first, the slots, the slot length; ``check`` the run's own pool), has the
real loop (calibrate/serving_loop.py) serve the same stream -- the same lengths and, at each rate,
the same Poisson arrivals (the job's generator is roofline.batching's, same seed) -- at rates around
R*, and reports, per rate, the measured p99s against the SLOs and against choose-server's own
simulation of that rate; then the rate at which each measured p99 crosses its SLO (interpolated in
log rate and log p99 between the two runs that bracket it), the lower of the two -- the highest
rate the real server sustains within both -- against R*.

Three cases (each chosen before any run of it):

- ``tpot`` (device call 136): TTFT p99 <= 500 ms, TPOT p99 <= 16 ms. TPOT binds, at about half the
  capacity, where the p99 rises slowly with the rate.
- ``ttft`` (the thirty-eighth session): TTFT p99 <= 200 ms, TPOT p99 <= 40 ms. TTFT binds, near the
  capacity, where the queue's tail climbs steeply with the rate. The p99 there is fragile, but the
  rate where it crosses follows the capacity: ``pick`` prints R* with every pass's GPU time 3%
  slower and faster, -2.9% .. +3.1% on the H200 (the tpot case: -11% .. +6%, its p99 rising slowly).
- ``chunked`` (the thirty-eighth session): another stream and server -- qwen2.5-7b's long prompts
  on 32 slots of 1,792 rows, chunked at 512 tokens beside the decodes (simulated decode-first with
  512 batched tokens) --, TTFT p99 <= 500 ms, TPOT p99 <= 30 ms. TTFT binds at ~80% of the capacity.

choose-server is used as a user would: the loop terms as shipped (carried over to the H100 where it
runs there, docs/serving.md "Leave one card out"), no host probe of the machine that ran it (the
replays of `roofline compare-serving` use it; these do not).

    .venv/bin/python benchmarks/choose_server_check.py pick [--card h200|h100-sxm] [--case tpot|ttft|chunked]
    .venv/bin/python benchmarks/choose_server_check.py check DIR [--card CARD] [--case tpot|ttft|chunked]

``pick`` prints R* and the rates to serve (R* x the case's rate factors, rounded to 0.1 req/s), and
writes the stream's lengths to docs/data/cpu/ (the case's ``lengths_file``); ``check`` reads the
serving runs (requests-*.csv[.gz], run-*.json) in DIR of the case's stream and server, every rate
there whichever case picked it. No GPU needed.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT / "docs" / "data" / "cpu"


@dataclass(frozen=True)
class Case:
    """A stream, the server that serves it, a pair of SLOs to size it by, and the rates (x R*) to
    serve around choose-server's answer. ``policy`` is the loop's: ``prefill-first``, or
    ``chunked`` (simulated as decode-first with ``max_num_batched_tokens``)."""

    slo_ttft_s: float
    slo_tpot_s: float
    rate_factors: tuple[float, ...]
    model: str = "llama-3.1-8b"
    stream: str = "mixed"
    count: int = 400
    seed: int = 851
    slots: int = 64
    max_model_len: int = 1280
    policy: str = "prefill-first"
    max_num_batched_tokens: int | None = None
    lengths_file: str = "choose-server-check-lengths.csv"

    @property
    def schedule(self) -> str:
        return "prefill-first" if self.policy == "prefill-first" else "decode-first"

    def server(self) -> str:
        chunks = f", chunks of {self.max_num_batched_tokens}" if self.max_num_batched_tokens else ""
        return f"{self.slots} slots of {self.max_model_len}, {self.policy}{chunks}"


#: the cases (each chosen before any run of it: docs/serving.md, "choose-server, checked against the
#: real loop")
CASES = {
    # TPOT binds at about half the capacity (device call 136)
    "tpot": Case(slo_ttft_s=0.5, slo_tpot_s=0.016, rate_factors=(0.7, 0.85, 1.0, 1.15, 1.3)),
    # the same stream and server; TTFT binds near the capacity, where its p99 climbs steeply, so the
    # rates sit closer together (device call 137)
    "ttft": Case(slo_ttft_s=0.2, slo_tpot_s=0.040, rate_factors=(0.85, 0.93, 1.0, 1.07, 1.15)),
    # long prompts chunked at 512 tokens beside the decodes; TTFT binds at ~80% of the capacity
    "chunked": Case(slo_ttft_s=0.5, slo_tpot_s=0.030, rate_factors=(0.7, 0.85, 1.0, 1.15, 1.3),
                    model="qwen2.5-7b", stream="long-prompt", seed=861, slots=32, max_model_len=1792,
                    policy="chunked", max_num_batched_tokens=512,
                    lengths_file="choose-server-check-lengths-chunked.csv"),
}
#: the stream of the tpot and ttft cases
LENGTHS = DATA / CASES["tpot"].lengths_file


def lengths(case: str = "tpot") -> list[tuple[int, int]]:
    """The case's stream's (prompt, generation) lengths as the serving job draws them
    (calibrate.serving_job.stream_requests)."""
    from calibrate.serving_job import stream_requests

    c = CASES[case]
    return [(r.prompt_tokens, r.gen_tokens) for r in stream_requests(c.stream, c.count, None, seed=c.seed)]


def write_lengths(case: str = "tpot") -> Path:
    """The case's stream's lengths as a request file (what ``pick`` commits beside its answer)."""
    path = DATA / CASES[case].lengths_file
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["prompt_tokens", "gen_tokens"])
        w.writerows(lengths(case))
    tmp.replace(path)
    return path


def choose(card: str, rates=None, kv_capacity_tokens=None, whole: bool = False, case: str = "tpot",
           pass_time_spread: float | None = None):
    """choose-server's answer for the check's stream and ``case``'s SLOs on ``card`` (at ``rates``
    if given; with ``pass_time_spread``, also the answer with every pass that much slower and
    faster): its best candidate, or (``whole``) the whole answer."""
    import numpy as np

    import roofline
    from roofline.batching import Requests

    c = CASES[case]
    prompts, gens = zip(*lengths(case))
    answer = roofline.choose_server(card, c.model, engine="graph", batch=c.slots,
                                    requests=Requests(np.array(prompts), np.array(gens), source=f"{c.stream} seed {c.seed}"),
                                    seed=c.seed, slo_ttft_s=c.slo_ttft_s, slo_tpot_s=c.slo_tpot_s,
                                    schedule=c.schedule, max_num_batched_tokens=c.max_num_batched_tokens,
                                    max_model_len=c.max_model_len,
                                    kv_capacity_tokens=kv_capacity_tokens, pass_cost="serving-loop",
                                    rates=rates, pass_time_spread=pass_time_spread).as_dict()
    return answer if whole else answer["best"]


def slos(case: str) -> str:
    c = CASES[case]
    return f"SLOs TTFT p99 <= {c.slo_ttft_s * 1e3:.0f} ms, TPOT p99 <= {c.slo_tpot_s * 1e3:.0f} ms"


def describe(case: str) -> str:
    c = CASES[case]
    return f"{c.model} {c.stream} x {c.count} seed {c.seed}"


def pick(card: str, case: str = "tpot") -> None:
    write_lengths(case)
    answer = choose(card, case=case, whole=True, pass_time_spread=0.03)
    best, spread = answer["best"], answer["meta"].get("pass_time_spread", {})
    print(f"{describe(case)}, {CASES[case].server()}, on {card}: {slos(case)}")
    if best is None:
        print("choose-server: no rate meets the SLOs")
        return
    r = best["best_rate_req_s"]
    rates = [round(r * f, 1) for f in CASES[case].rate_factors]
    print(f"choose-server: best rate {r:.2f} req/s ({best['utilization']:.0%} of its capacity "
          f"{best['capacity_req_s']:.2f}), binding {best['binding']}, KV pool {best['at_best']['kv_capacity_tokens']:,} tokens")
    print("rates to serve: " + ",".join(f"{x:g}" for x in rates))
    lo, hi = spread.get("best_rate_req_s_slower"), spread.get("best_rate_req_s_faster")
    if lo is None or hi is None:
        print("with every pass's GPU time 3% slower or faster: no rate meets the SLOs")
    else:
        print(f"with every pass's GPU time 3% slower .. 3% faster: best rate {lo:.2f} .. {hi:.2f} req/s "
              f"({lo / r - 1:+.1%} .. {hi / r - 1:+.1%})")


def measured(folder: Path, case: str = "tpot") -> list[dict]:
    """Per run in ``folder`` of the case's model, stream, seed and server: its rate, pool and
    measured p99s."""
    from roofline.serving_runs import read_run, run_names

    c = CASES[case]
    out = []
    for name in run_names(folder):
        run = read_run(folder, name)
        st, cfg = run.run.get("stream", {}), run.config
        if (cfg.get("model"), st.get("stream"), st.get("seed"), st.get("count")) != (c.model, c.stream, c.seed, c.count):
            continue
        if (cfg.get("max_num_seqs"), cfg.get("max_model_len"), cfg.get("policy", "prefill-first")) != (
                c.slots, c.max_model_len, c.policy):
            continue
        if c.max_num_batched_tokens is not None and cfg.get("max_num_batched_tokens") != c.max_num_batched_tokens:
            continue
        out.append({"name": name, "rate": float(st["rate_per_s"]), "pool": cfg["kv_capacity_tokens"],
                    "ttft_p99_s": run.summary["ttft_p99_s"], "tpot_p99_s": run.summary["tpot_p99_s"],
                    "unserved": run.summary["unserved"]})
    return sorted(out, key=lambda x: x["rate"])


def crossing(rates, p99s, slo):
    """The rate where p99 crosses ``slo``: log-linear between the first run over it and the one
    before; None without such a pair (with which side it lies: a first run already over it is
    below, whatever the later runs measured)."""
    over = [i for i, y in enumerate(p99s) if y > slo]
    if not over:
        return None, "above the highest rate served"
    i = over[0]
    if i == 0:
        return None, "below the lowest rate served"
    (r0, y0), (r1, y1) = (rates[i - 1], p99s[i - 1]), (rates[i], p99s[i])
    w = (math.log(slo) - math.log(y0)) / (math.log(y1) - math.log(y0))
    return math.exp(math.log(r0) + w * (math.log(r1) - math.log(r0))), "between"


def meets(x: dict, case: str) -> bool:
    """Does a run (or a simulated point) keep both of ``case``'s p99s within their SLOs?"""
    c = CASES[case]
    return x["ttft_p99_s"] <= c.slo_ttft_s and x["tpot_p99_s"] <= c.slo_tpot_s


def sustained(runs: list[dict], case: str) -> tuple[float | None, list[str]]:
    """The highest rate the runs sustain within both SLOs: the lower of the two p99s' crossings;
    0.0 when the lowest rate already breaks one, None when neither breaks at any rate served; with
    a line per SLO saying where it crossed."""
    c = CASES[case]
    rates = [x["rate"] for x in runs]
    found, lines = [], []
    for what, key, slo in (("TTFT", "ttft_p99_s", c.slo_ttft_s), ("TPOT", "tpot_p99_s", c.slo_tpot_s)):
        r, where = crossing(rates, [x[key] for x in runs], slo)
        if r is None:
            lines.append(f"measured {what} p99 crosses its SLO {where}")
            if where == "below the lowest rate served":
                found.append(0.0)
        else:
            lines.append(f"measured {what} p99 crosses its SLO at {r:.2f} req/s")
            found.append(r)
    return (min(found) if found else None), lines


def check(folder: Path, card: str, case: str = "tpot") -> int:
    runs = measured(folder, case)
    if not runs:
        print(f"no runs of {describe(case)} on {CASES[case].server()} in {folder}")
        return 1
    pool = runs[0]["pool"]
    best = choose(card, kv_capacity_tokens=pool, case=case)
    r_star = best["best_rate_req_s"]
    # each rate on its own (a sweep of given rates stops at the first that breaks an SLO)
    sim = {x["rate"]: choose(card, rates=[x["rate"]], kv_capacity_tokens=pool, whole=True,
                             case=case)["candidates"][0]["points"][0]
           for x in runs}
    print(f"{describe(case)} on {card}, {slos(case)}; choose-server's rate "
          f"{r_star:.2f} req/s (binding {best['binding']})")
    print(f"{'rate':>6}  {'x R*':>5}  {'TTFT p99 meas / sim (ms)':>25}  {'TPOT p99 meas / sim (ms)':>25}  "
          f"{'SLOs met: meas / sim':>20}")
    for x in runs:
        s = sim[x["rate"]]
        print(f"{x['rate']:6.2f}  {x['rate'] / r_star:5.2f}  {x['ttft_p99_s'] * 1e3:11.1f} / {s['ttft_p99_s'] * 1e3:8.1f}  "
              f"{x['tpot_p99_s'] * 1e3:11.2f} / {s['tpot_p99_s'] * 1e3:8.2f}  {'yes' if meets(x, case) else 'no':>11} / "
              f"{'yes' if s['meets'] else 'no'}")
        if x["unserved"]:
            print(f"        {x['name']}: {x['unserved']} requests unserved (the job's deadline): its p99s are not the stream's")
    r_meas, lines = sustained(runs, case)
    for line in lines:
        print(line)
    if r_meas is None:
        print("the runs do not bracket the highest rate within both SLOs")
    elif r_meas == 0.0:
        print("the real loop missed an SLO at every rate served")
    else:
        print(f"the real loop sustains both SLOs up to {r_meas:.2f} req/s; choose-server named {r_star:.2f} "
              f"({(r_star - r_meas) / r_meas:+.1%})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["pick", "check"])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--card", default="h200")
    ap.add_argument("--case", choices=sorted(CASES), default="tpot", help="which SLOs to size by (module docstring)")
    a = ap.parse_args(argv)
    if a.what == "pick":
        pick(a.card, a.case)
        return 0
    if not a.folder:
        ap.error("check needs the folder of the runs")
    return check(Path(a.folder), a.card, a.case)


if __name__ == "__main__":
    raise SystemExit(main())
