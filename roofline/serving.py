"""One request stream served two ways: static batching and continuous (iteration-level) batching.

Both servers hold at most ``slots`` (N) sequences. Time advances pass by pass; each pass's time
comes from the one pass model (roofline.step.StepModel.pass_s) for the work it does. Both price a
sequence's decode by its context so far (a sequence that has produced k tokens attends to prompt
+ k cached tokens in its next decode step, as roofline.decode does with a dynamic cache).

Static: whenever the server is free it takes up to N requests that have arrived (in arrival
order; it does not wait to fill the batch), prefills them in one pass (the prefill of the sum of
their prompt tokens, each prompt causal on its own; logits of the last position only, as
roofline.prefill), then decodes until the longest member is done. Members that have finished
keep their slot and keep computing (their KV keeps growing), so every decode step of a batch of
n costs ``pass_s(decode_work(n, sum(prompt) + n * i))``. A member's first token comes out of the
prefill; with ``return_policy="early-return"`` its end-to-end time ends at its own last token, with
``"whole-batch"`` at the batch's last step.

Continuous: roofline.scheduler (a KV pool of blocks, FIFO admission by free blocks, preemption
by recompute, decode-first with chunked prefill or prefill-first), its iterations priced by a
roofline.pass_costs object. By default (a pool that never binds, decode-first without a token
budget, ``FusedCost``) each iteration is v0.1's: requests that finished in the previous one have
left, arrived requests fill the free slots (up to N, in arrival order), and the newcomers'
prefill joins the iteration's pass: ``PassWork(D, kv, P, pairs, k)`` with D the sequences
already running, kv the sum of their contexts, P the sum of the newcomers' prompts, pairs the sum
of p(p+1)/2 and k the newcomers (one LM-head row each). A newcomer's first token comes out of
that iteration; a pass that only prefills pays the prefill's overhead, one that mixes pays the
larger of the two.

Per request: TTFT = first token - arrival, TPOT = (finish - first token) / (gen - 1) (none for
one token), E2E = finish - arrival; percentiles are numpy's linear ones over the served requests
(``latency_percentiles``); ``goodput`` counts the requests within an SLO.

Slot accounting: every pass (a prefill or a decode step) offers N slot-steps; a slot-step is
useful when it produces a token some request needs. Useful slot-steps therefore equal the total
generated tokens under both policies; idle slot-steps = N x passes - useful, covering both empty
slots and finished members still computing. ``mean_occupancy`` = useful / (N x passes) and
``waste_fraction`` = idle / (N x passes).

Speed: the hot loops price passes with Python floats through the one pass model
(``StepModel.pass_s``, whose float path avoids numpy); a static batch's decode steps, and the
continuous server's quiet stretches of decode steps, are priced all at once with numpy arrays
through the same function.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from roofline.step import StepModel, decode_work, prefill_work

PERCENTILES = (50, 90, 99)
RETURN_POLICIES = ("whole-batch", "early-return")


def static_batch_times(model: StepModel, prompt_tokens: np.ndarray, gen_tokens: np.ndarray):
    """(prefill_s, cum_s) of one static batch: token k (1-based) of every member is out at
    ``prefill_s + cum_s[k - 1]``; the batch ends at ``prefill_s + cum_s[-1]``. The batch is
    prefilled in one pass (last-position logits); decode step i of n members attends to
    sum(prompt) + n * i cached tokens."""
    n = len(gen_tokens)
    longest = int(gen_tokens.max())
    p = prompt_tokens.astype(float)
    prompt_sum = float(p.sum())
    pre = model.pass_s(prefill_work(prompt_sum, float((p * (p + 1.0)).sum() / 2.0), float(n)))
    i = np.arange(1, longest, dtype=float)
    steps = model.pass_s(decode_work(float(n), prompt_sum + n * i))
    cum = np.empty(longest)
    cum[0] = 0.0
    np.cumsum(steps, out=cum[1:])
    return pre, cum


@dataclass(frozen=True)
class Served:
    """One policy's outcome: per-request times (input order; NaN for a rejected request, TPOT
    NaN when it generated one token) and slot accounting. ``extra`` holds the continuous
    server's counters (preemptions, max_running, rejected, the KV pool)."""

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    finish_s: np.ndarray
    slots: int
    passes: int
    useful_slot_steps: int
    makespan_s: float
    tpot_s: np.ndarray | None = None
    gen_tokens: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def slot_steps(self) -> int:
        return self.slots * self.passes

    @property
    def idle_slot_steps(self) -> int:
        return self.slot_steps - self.useful_slot_steps

    def summary(self, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None) -> dict:
        """Throughput, latency percentiles (over the served requests; TPOT over those with more
        than one token), slot accounting, the continuous server's counters, and with an SLO the
        goodput (``latency_percentiles`` and ``goodput``)."""
        out = {
            "requests": int(len(self.e2e_s)),
            "generated_tokens": self.useful_slot_steps,
            "makespan_s": self.makespan_s,
            "throughput_tok_s": self.useful_slot_steps / self.makespan_s if self.makespan_s > 0 else float("inf"),
        }
        served = ~np.isnan(self.e2e_s)
        pct = latency_percentiles(self.ttft_s[served], self.tpot_s[served] if self.tpot_s is not None else None,
                                  self.e2e_s[served])
        out.update({k: v for k, v in pct.items() if not k.startswith("tpot")})
        steps = self.slot_steps or float("nan")  # no pass at all: every request rejected
        out.update(
            mean_occupancy=self.useful_slot_steps / steps,
            waste_fraction=self.idle_slot_steps / steps,
            idle_slot_steps=self.idle_slot_steps,
            slot_steps=self.slot_steps,
            passes=self.passes,
        )
        out.update({k: v for k, v in pct.items() if k.startswith("tpot")})
        out.update(self.extra)
        if slo_ttft_s is not None or slo_tpot_s is not None:
            out.update(goodput(self, slo_ttft_s, slo_tpot_s))
        return out


def latency_percentiles(ttft_s, tpot_s, e2e_s) -> dict:
    """``ttft/e2e/tpot_p{50,90,99}_s``: numpy's linear percentiles (roofline.serving_runs.percentile
    is the same definition) over the given requests; TPOT over the finite values (a request of
    one token has none); None where there is nothing to take them over."""
    out = {}
    for name, values in (("ttft", ttft_s), ("e2e", e2e_s), ("tpot", tpot_s)):
        if values is None:
            continue
        values = np.asarray(values, dtype=float)
        values = values[np.isfinite(values)]
        qs = np.percentile(values, PERCENTILES) if len(values) else [None] * len(PERCENTILES)
        for q, v in zip(PERCENTILES, qs):
            out[f"{name}_p{q}_s"] = None if v is None else float(v)
    return out


def goodput(served: Served, slo_ttft_s: float | None, slo_tpot_s: float | None) -> dict:
    """Requests meeting the SLO: TTFT <= ``slo_ttft_s`` and TPOT <= ``slo_tpot_s`` (each when
    given; a request of one token meets any TPOT limit; a rejected one meets none).
    ``slo_attainment`` = their fraction of all requests; ``goodput_req_s`` and ``goodput_tok_s``
    = their count and tokens per second of makespan."""
    ok = ~np.isnan(served.e2e_s)
    if slo_ttft_s is not None:
        ok &= served.ttft_s <= slo_ttft_s
    if slo_tpot_s is not None and served.tpot_s is not None:
        ok &= ~(served.tpot_s > slo_tpot_s)  # NaN (one token) passes
    n = len(served.e2e_s)
    span = served.makespan_s
    tokens = float(served.gen_tokens[ok].sum()) if served.gen_tokens is not None else float("nan")
    return {
        "slo_ttft_s": slo_ttft_s,
        "slo_tpot_s": slo_tpot_s,
        "slo_attainment": float(ok.sum() / n) if n else 0.0,
        "goodput_req_s": float(ok.sum() / span) if span > 0 else float("inf"),
        "goodput_tok_s": tokens / span if span > 0 else float("inf"),
    }


def tpot_of(first_s, finish_s, gen_tokens) -> np.ndarray:
    """(finish - first token) / (gen - 1) per request; NaN for one-token requests."""
    gen = np.asarray(gen_tokens, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(gen > 1, (np.asarray(finish_s) - np.asarray(first_s)) / np.maximum(gen - 1.0, 1.0), np.nan)


def _sorted_stream(prompt_tokens, gen_tokens, arrival_s):
    arrival = np.zeros(len(gen_tokens)) if arrival_s is None else np.asarray(arrival_s, dtype=float)
    order = np.argsort(arrival, kind="stable")
    return order, np.asarray(prompt_tokens, dtype=np.int64)[order], np.asarray(gen_tokens, dtype=np.int64)[order], arrival[order]


def _unsort(order, *arrays):
    out = []
    for a in arrays:
        back = np.empty_like(a)
        back[order] = a
        out.append(back)
    return out


#: A backlog of at least this many full static batches is priced in one vectorised call, at most
#: BACKLOG_MAX_STEPS decode steps at a time.
BACKLOG_MIN_BATCHES, BACKLOG_MAX_STEPS = 4, 1 << 21


def _decode_prices(model: StepModel, slots: float, kv_read: np.ndarray) -> np.ndarray:
    """model.pass_s(decode_work(slots, kv_read)) for a backlog's decode steps, each distinct read
    priced once: a backlog of B batches reads whole numbers of tokens spanning about a batch's
    prompts and answers x slots, while its steps number that many times B. Read from a table over
    the span, the same numbers (an elementwise formula); every step priced (one array call, as
    before) where the reads are not whole or span more numbers than there are steps."""
    at = kv_read.astype(np.int64)
    lo, hi = (int(at.min()), int(at.max())) if len(at) else (0, -1)
    if lo < 0 or hi - lo + 1 > len(at) or not np.array_equal(at, kv_read):
        return model.pass_s(decode_work(slots, kv_read))
    at -= lo
    used = np.zeros(hi - lo + 1, dtype=bool)
    used[at] = True
    reads = np.flatnonzero(used)
    table = np.empty(hi - lo + 1)
    table[reads] = model.pass_s(decode_work(slots, (reads + lo).astype(float)))
    return table[at]


def _backlog(model: StepModel, p, g, i: int, batches: int, slots: int, t: float):
    """Consecutive full static batches of ``slots`` from request i, started back to back from t
    (static_batch_times for all of them in one call each for prefills and decode steps): (the
    index after them, first-token time per batch, end per batch, each member's last token after
    its batch's first token, decode steps + prefills)."""
    g_all = g[i:i + batches * slots].reshape(batches, slots)
    longest = g_all.max(axis=1)
    batches = max(1, int(np.searchsorted(np.cumsum(longest), BACKLOG_MAX_STEPS, side="right")))
    j = i + batches * slots
    pb = p[i:j].reshape(batches, slots).astype(float)
    gb, longest = g_all[:batches], longest[:batches]
    psum = pb.sum(axis=1)
    pre = model.pass_s(prefill_work(psum, (pb * (pb + 1.0)).sum(axis=1) / 2.0, float(slots)))
    steps = longest - 1
    start = np.concatenate([[0], np.cumsum(steps)[:-1]])
    step_no = np.arange(int(steps.sum())) - np.repeat(start, steps) + 1.0
    costs = _decode_prices(model, float(slots), np.repeat(psum, steps) + slots * step_no)
    total = np.concatenate([[0.0], np.cumsum(costs)])  # within a batch: differences of this sum
    base = total[start]
    last = total[start + steps] - base
    member_done = total[np.repeat(start, slots) + (gb.ravel() - 1)] - np.repeat(base, slots)
    firsts, ends = np.empty(batches), np.empty(batches)
    for k, (pre_k, last_k) in enumerate(zip(np.broadcast_to(pre, (batches,)).tolist(), last.tolist())):
        t = t + pre_k  # the clock added up batch by batch, as the loop does
        firsts[k] = t
        t = t + last_k
        ends[k] = t
    return j, firsts, ends, member_done, int(longest.sum())


def serve_static(model: StepModel, prompt_tokens, gen_tokens, arrival_s, slots: int,
                 return_policy: str = "whole-batch") -> Served:
    """Static batching: when free, take up to ``slots`` arrived requests; run them to the longest."""
    order, p, g, arr = _sorted_stream(prompt_tokens, gen_tokens, arrival_s)
    n = len(g)
    ttft = np.empty(n)
    finish = np.empty(n)
    arr_list = arr.tolist()
    t = 0.0
    i = 0
    passes = 0
    whole = return_policy == "whole-batch"
    while i < n:
        if arr_list[i] > t:
            t = arr_list[i]
        avail = bisect_right(arr_list, t, i)
        if (avail - i) // slots >= BACKLOG_MIN_BATCHES:
            # a backlog: the next batches are full and consecutive whatever the clock does
            j, firsts, ends, member_done, steps = _backlog(model, p, g, i, (avail - i) // slots, slots, t)
            t = ends[-1]
            ttft[i:j] = np.repeat(firsts, slots)
            finish[i:j] = np.repeat(ends, slots) if whole else np.repeat(firsts, slots) + member_done
            passes += steps
            i = j
            continue
        j = min(i + slots, avail)
        pre, cum = static_batch_times(model, p[i:j], g[i:j])
        first = t + pre
        ttft[i:j] = first
        t = first + cum[-1]
        finish[i:j] = t if whole else first + cum[g[i:j] - 1]
        passes += len(cum)
        i = j
    tpot = tpot_of(ttft, finish, g)
    ttft -= arr
    e2e = finish - arr
    ttft, e2e, finish, tpot, gen = _unsort(order, ttft, e2e, finish, tpot, g)
    start = float(arr[0]) if n else 0.0
    return Served(ttft, e2e, finish, slots, passes, int(g.sum()), float(finish.max()) - start if n else 0.0,
                  tpot, gen)


def serve_continuous(model: StepModel, prompt_tokens, gen_tokens, arrival_s, slots: int, *, pool=None,
                     max_model_len: int | None = None, max_num_batched_tokens: int | None = None,
                     schedule: str = "decode-first", cost=None) -> Served:
    """Continuous batching (roofline.scheduler): at most ``slots`` running sequences, a KV pool of
    blocks (``pool``, a roofline.kvpool.KVPool; None: one that never binds), admission, preemption
    by recompute, chunked prefill under ``max_num_batched_tokens``, ``schedule`` decode-first or
    prefill-first; pass times from ``cost`` (roofline.pass_costs; default FusedCost(model)).
    With the defaults it is v0.1's server: newcomers' prefills join the running decodes' pass."""
    from roofline.kvpool import unlimited_pool
    from roofline.pass_costs import FusedCost
    from roofline.scheduler import ServerConfig, serve_stream

    pool = pool or unlimited_pool()
    config = ServerConfig(slots, pool.num_blocks, pool.block_size, max_model_len, max_num_batched_tokens, schedule)
    order, p, g, arr = _sorted_stream(prompt_tokens, gen_tokens, arrival_s)
    run = serve_stream(p, g, arr, config, cost or FusedCost(model))
    first, finish = run.first_token_s, run.finish_s
    tpot = tpot_of(first, finish, g)
    ttft, e2e = first - arr, finish - arr
    pre = run.preemptions
    ttft, e2e, finish, tpot, gen, pre_u, rej = _unsort(order, ttft, e2e, finish, tpot, g, pre, run.rejected)
    served = ~rej
    start = float(arr[0]) if len(g) else 0.0
    makespan = float(np.max(finish[served])) - start if served.any() else 0.0
    extra = {
        "preemptions": int(pre.sum()),
        "preempted_requests": int((pre > 0).sum()),
        "max_running": run.max_running,
        "rejected": int(rej.sum()),
        "prefill_iterations": run.prefill_iterations,
        "decode_iterations": run.decode_iterations,
        "kv_capacity_tokens": pool.capacity_tokens if pool.source != "unlimited" else None,
    }
    return Served(ttft, e2e, finish, slots, run.iterations, run.generated_tokens, makespan, tpot, gen, extra)


def by_generation_length(gen_tokens, served: dict, max_lengths: int = 8) -> list[dict] | None:
    """Median TTFT and E2E per generation length and policy, when there are few lengths."""
    gen_tokens = np.asarray(gen_tokens)
    lengths = np.unique(gen_tokens)
    if len(lengths) > max_lengths:
        return None
    rows = []
    for g in lengths:
        mine = gen_tokens == g
        row = {"gen_tokens": int(g), "requests": int(mine.sum())}
        for name, s in served.items():
            for key, values in (("ttft", s.ttft_s[mine]), ("e2e", s.e2e_s[mine])):
                values = values[~np.isnan(values)]  # rejected requests have no times
                row[f"{name}_{key}_p50_s"] = float(np.median(values)) if len(values) else None
        rows.append(row)
    return rows
