"""The highest arrival rate a continuous server sustains within latency SLOs, and which server.

For one request stream shape (its prompt and generation lengths; arrivals are replaced) and one
server -- a card, a tensor-parallel degree, a running-sequence limit (``max_num_seqs``), and the
continuous server's options (roofline.servers) -- ``sweep``:

1. *Capacity*: the stream served with every request queued at t = 0; ``capacity_req_s`` =
   requests / makespan. Above it the queue grows without bound, whatever the SLO says about a
   finite stream.
2. Poisson arrivals (roofline.batching.Requests.with_poisson_arrivals, the same seed at every
   rate, so arrival times scale exactly as 1 / rate) at a geometric grid of rates from 2% to
   110% of capacity; at each, the continuous server's TTFT, TPOT and E2E percentiles.
3. A rate *meets the SLOs* when the ``slo_percentile`` (99 by default) of TTFT <= ``slo_ttft_s``
   and of TPOT <= ``slo_tpot_s`` (each when given) and the rate <= capacity. The answer is the
   highest rate below the first grid rate that fails, refined by bisection between the two
   (to 1% of the rate); ``binding`` names what the next rate breaks (``ttft``, ``tpot``,
   ``capacity``), or ``none`` when the smallest rate already fails.

``choose_server`` sweeps every candidate (cards x TP degrees x running-sequence limits) and picks
the highest rate per GPU (rate / TP), ties to fewer GPUs, then the smaller limit; given
``spread_options`` (the server options with every pass slower, then faster), it sweeps the best
candidate again under each and puts its answer there in ``meta["pass_time_spread"]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofline import validate
from roofline.errors import RooflineError

GRID_POINTS = 14
GRID_LOW, GRID_HIGH = 0.02, 1.1
BISECT_REL = 0.01
#: Candidates x requests one choose-server may take (each is simulated at ~22 rates; the work is
#: bounded before it starts: about a minute on a 2-core machine at the limit).
MAX_WORK_REQUESTS = 200_000


@dataclass(frozen=True)
class Candidate:
    scenario: object  # roofline.scenario.Scenario
    max_num_seqs: int

    @property
    def label(self) -> str:
        return f"{self.scenario.card.id} tp {self.scenario.tp} max_num_seqs {self.max_num_seqs}"


@dataclass
class Sweep:
    """One candidate's sweep: every simulated rate (sorted), the capacity and the answer."""

    candidate: Candidate
    capacity_req_s: float
    points: list = field(default_factory=list)  # dicts: rate_req_s, meets, and the continuous summary's keys
    best: dict | None = None
    binding: str = "none"
    server: dict = field(default_factory=dict)

    @property
    def best_rate_req_s(self) -> float | None:
        return self.best["rate_req_s"] if self.best else None

    @property
    def per_gpu(self) -> float:
        return (self.best_rate_req_s or 0.0) / self.candidate.scenario.tp

    def as_dict(self) -> dict:
        sc = self.candidate.scenario
        return {"card": sc.card.id, "model": sc.model.name, "tp": sc.tp, "max_num_seqs": self.candidate.max_num_seqs,
                "capacity_req_s": self.capacity_req_s, "best_rate_req_s": self.best_rate_req_s,
                "utilization": self.best_rate_req_s / self.capacity_req_s if self.best else None,
                "best_rate_req_s_per_gpu": self.per_gpu if self.best else None, "binding": self.binding,
                "at_best": self.best, "points": self.points, "server": self.server}


@dataclass
class ServerChoice:
    best: Sweep | None
    sweeps: list
    slo: dict
    meta: dict

    def as_dict(self) -> dict:
        return {"best": self.best.as_dict() if self.best else None, "slo": self.slo, "meta": self.meta,
                "candidates": [s.as_dict() for s in self.sweeps]}


def _meets(summary: dict, rate: float, capacity: float, slo: dict) -> tuple[bool, list]:
    q = slo["slo_percentile"]
    broken = []
    for name in ("ttft", "tpot"):
        limit = slo[f"slo_{name}_s"]
        value = summary.get(f"{name}_p{q}_s")
        if limit is not None and value is not None and value > limit:
            broken.append(name)
    if rate > capacity:
        broken.append("capacity")
    return not broken, broken


def sweep(candidate: Candidate, stream, options, slo: dict, seed: int = 0, rates=None) -> Sweep:
    """One candidate's capacity and its highest rate within the SLOs (module docstring)."""
    from roofline.serving import serve_continuous
    from roofline.servers import build

    step = candidate.scenario.step
    server = build(step, options, candidate.max_num_seqs, stream.prompt_tokens, stream.gen_tokens,
                   candidate.scenario.engine)
    q = slo["slo_percentile"]

    def run(arrivals):
        served = serve_continuous(step, stream.prompt_tokens, stream.gen_tokens, arrivals, candidate.max_num_seqs,
                                  pool=server.pool, max_model_len=server.config.max_model_len,
                                  max_num_batched_tokens=server.config.max_num_batched_tokens,
                                  schedule=server.config.schedule, cost=server.cost)
        return served.summary(slo["slo_ttft_s"], slo["slo_tpot_s"]) | _extra_percentile(served, q)

    full = run(None)
    served_requests = full["requests"] - full.get("rejected", 0)
    if served_requests == 0:
        raise RooflineError(f"{candidate.label}: every request is rejected (longer than max_model_len or the KV pool)")
    capacity = served_requests / full["makespan_s"]
    base = stream.with_poisson_arrivals(1.0, seed).arrival_s  # arrivals at rate r: base / r
    out = Sweep(candidate, capacity, server=server.meta(options))
    cache = {}

    def point(rate):
        if rate not in cache:
            summary = run(base / rate)
            ok, broken = _meets(summary, rate, capacity, slo)
            cache[rate] = {"rate_req_s": rate, "meets": ok, "broken": broken, **summary}
        return cache[rate]

    grid = sorted(set(rates)) if rates else list(np.geomspace(GRID_LOW, GRID_HIGH, GRID_POINTS) * capacity)
    first_fail = None
    last_ok = None
    for rate in grid:
        p = point(float(rate))
        if p["meets"]:
            last_ok = p
        else:
            first_fail = p
            break
    if not rates and first_fail is not None and last_ok is not None:
        lo, hi = last_ok["rate_req_s"], first_fail["rate_req_s"]
        while hi - lo > BISECT_REL * lo:
            mid = math.sqrt(lo * hi)
            p = point(mid)
            if p["meets"]:
                lo, last_ok = mid, p
            else:
                hi, first_fail = mid, p
    out.points = [cache[r] for r in sorted(cache)]
    out.best = last_ok
    if first_fail is not None:
        out.binding = ",".join(first_fail["broken"]) if last_ok is not None else "none"
    else:
        out.binding = "rates"  # every rate asked for meets the SLOs
    return out


def _extra_percentile(served, q: int) -> dict:
    """The SLO's percentile of TTFT and TPOT when it is not one of 50/90/99."""
    if q in (50, 90, 99):
        return {}
    ok = ~np.isnan(served.e2e_s)
    tpot = served.tpot_s[ok]
    tpot = tpot[np.isfinite(tpot)]
    return {f"ttft_p{q}_s": float(np.percentile(served.ttft_s[ok], q)),
            f"tpot_p{q}_s": float(np.percentile(tpot, q)) if len(tpot) else None}


def choose_server(candidates: list[Candidate], stream, options, *, slo_ttft_s=None, slo_tpot_s=None,
                  slo_percentile: int = 99, seed: int = 0, rates=None, spread_options=None,
                  spread: float | None = None) -> ServerChoice:
    """Sweep every candidate; the best is the highest rate per GPU; with ``spread_options``
    (slower, faster; ``spread`` the fraction they stand for) the best again under each (module
    docstring)."""
    if slo_ttft_s is None and slo_tpot_s is None:
        raise RooflineError("give at least one SLO: a TTFT or a TPOT limit", "slo_ttft_s")
    slo = {"slo_ttft_s": slo_ttft_s, "slo_tpot_s": slo_tpot_s,
           "slo_percentile": validate.whole(slo_percentile, "slo_percentile", maximum=100)}
    if rates is not None:
        rates = [validate.positive(r, "rates", "a positive number of requests per second") for r in rates]
        if not rates:
            raise RooflineError("give one or more rates", "rates")
    if spread_options and rates is not None:
        raise RooflineError("not with given rates: the spread's sweeps take the automatic grid", "pass_time_spread")
    sweeps_asked = len(candidates) + (len(spread_options) if spread_options else 0)
    work = sweeps_asked * len(stream)
    if work > MAX_WORK_REQUESTS:
        what = f"({len(candidates)} candidate(s) + the spread's {len(spread_options)} sweeps)" if spread_options \
            else f"{len(candidates)} candidate(s)"
        raise RooflineError(f"{what} x {len(stream):,} requests = {work:,}: at most "
                            f"{MAX_WORK_REQUESTS:,} (each is simulated at about {GRID_POINTS + 8} rates); use fewer "
                            "requests or candidates", "count")
    sweeps = [sweep(c, stream, options, slo, seed, rates) for c in candidates]
    feasible = [s for s in sweeps if s.best is not None]
    best = max(feasible, key=lambda s: (s.per_gpu, -s.candidate.scenario.tp, -s.candidate.max_num_seqs)) \
        if feasible else None
    meta = {"requests": len(stream), "source": stream.source, "seed": seed, "model": candidates[0].scenario.model.name}
    if spread_options and best is not None:
        slower, faster = (sweep(best.candidate, stream, o, slo, seed) for o in spread_options)
        meta["pass_time_spread"] = {
            "fraction": spread, "candidate": best.candidate.label,
            "best_rate_req_s_slower": slower.best_rate_req_s, "best_rate_req_s_faster": faster.best_rate_req_s,
            "binding_slower": slower.binding, "binding_faster": faster.binding}
    return ServerChoice(best, sweeps, slo, meta)
