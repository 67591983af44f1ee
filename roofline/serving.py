"""One request stream served two ways: static batching and continuous (iteration-level) batching.

Both servers hold at most ``slots`` (N) sequences. Time advances pass by pass; each pass's time
comes from the one pass model (roofline.step.StepModel.pass_s) for the work it does. The simulations assume a dynamic KV cache: a sequence that has produced k
tokens attends to prompt + k cached tokens in its next decode step (as roofline.decode does).

Static: whenever the server is free it takes up to N requests that have arrived (in arrival
order; it does not wait to fill the batch), prefills them in one pass (the prefill of the sum of
their prompt tokens, each prompt causal on its own; logits of the last position only, as
roofline.prefill), then decodes until the longest member is done. Members that have finished
keep their slot and keep computing (their KV keeps growing), so every decode step of a batch of
n costs ``pass_s(decode_work(n, sum(prompt) + n * i))``. A member's first token comes out of the
prefill; with ``return_policy="early-return"`` its end-to-end time ends at its own last token, with
``"whole-batch"`` at the batch's last step.

Continuous: each iteration, requests that finished in the previous one have left, arrived
requests fill the free slots (up to N, in arrival order), and the newcomers' prefill joins the
iteration's pass: ``PassWork(D, kv, P, pairs, k)`` with D the sequences already running, kv the
sum of their contexts, P the sum of the newcomers' prompts, pairs the sum of p(p+1)/2 and k the
newcomers (one LM-head row each). A newcomer's first token comes out of that iteration; a pass
that only prefills pays the prefill's overhead, one that mixes pays the larger of the two.

Slot accounting: every pass (a prefill or a decode step) offers N slot-steps; a slot-step is
useful when it produces a token some request needs. Useful slot-steps therefore equal the total
generated tokens under both policies; idle slot-steps = N x passes - useful, covering both empty
slots and finished members still computing. ``mean_occupancy`` = useful / (N x passes) and
``waste_fraction`` = idle / (N x passes).

Speed: the hot loops price passes with Python floats through the one pass model
(``StepModel.pass_s``, whose float path avoids numpy); a static batch's decode steps are priced
all at once with numpy arrays through the same function.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from dataclasses import dataclass

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
    """One policy's outcome: per-request times (input order) and slot accounting."""

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    finish_s: np.ndarray
    slots: int
    passes: int
    useful_slot_steps: int
    makespan_s: float

    @property
    def slot_steps(self) -> int:
        return self.slots * self.passes

    @property
    def idle_slot_steps(self) -> int:
        return self.slot_steps - self.useful_slot_steps

    def summary(self) -> dict:
        out = {
            "requests": int(len(self.e2e_s)),
            "generated_tokens": self.useful_slot_steps,
            "makespan_s": self.makespan_s,
            "throughput_tok_s": self.useful_slot_steps / self.makespan_s if self.makespan_s > 0 else float("inf"),
        }
        for name, values in (("ttft", self.ttft_s), ("e2e", self.e2e_s)):
            for q, v in zip(PERCENTILES, np.percentile(values, PERCENTILES)):
                out[f"{name}_p{q}_s"] = float(v)
        out.update(
            mean_occupancy=self.useful_slot_steps / self.slot_steps,
            waste_fraction=self.idle_slot_steps / self.slot_steps,
            idle_slot_steps=self.idle_slot_steps,
            slot_steps=self.slot_steps,
            passes=self.passes,
        )
        return out


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
        j = min(i + slots, bisect_right(arr_list, t, i))
        pre, cum = static_batch_times(model, p[i:j], g[i:j])
        first = t + pre
        ttft[i:j] = first
        t = first + cum[-1]
        finish[i:j] = t if whole else first + cum[g[i:j] - 1]
        passes += len(cum)
        i = j
    ttft -= arr
    e2e = finish - arr
    ttft, e2e, finish = _unsort(order, ttft, e2e, finish)
    start = float(arr[0]) if n else 0.0
    return Served(ttft, e2e, finish, slots, passes, int(g.sum()), float(finish.max()) - start if n else 0.0)


def serve_continuous(model: StepModel, prompt_tokens, gen_tokens, arrival_s, slots: int) -> Served:
    """Continuous batching: finished requests leave, arrived ones join at every iteration."""
    pass_s = model.pass_s
    order, p_arr, g_arr, arr = _sorted_stream(prompt_tokens, gen_tokens, arrival_s)
    n = len(g_arr)
    p = p_arr.tolist()
    g = g_arr.tolist()
    arr_list = arr.tolist()
    # prefix sums so a group of newcomers' prompt tokens and pairs cost O(1)
    pf = p_arr.astype(float)
    cum_p = [0.0] + np.cumsum(pf).tolist()
    cum_pairs = [0.0] + np.cumsum(pf * (pf + 1.0) / 2.0).tolist()
    cum_p1 = [0.0] + np.cumsum(pf + 1.0).tolist()
    ttft = [0.0] * n
    finish = [0.0] * n
    ends: list = []  # heap of (iteration of its last token, request index)
    t = 0.0
    it = 0
    nxt = 0
    running = 0
    kv = 0.0  # sum over running sequences of prompt + tokens produced so far
    useful = 0
    while nxt < n or running:
        if running == 0 and arr_list[nxt] > t:
            t = arr_list[nxt]
        k = 0
        if running < slots and nxt < n:
            k = min(slots - running, bisect_right(arr_list, t, nxt) - nxt)
        if k:
            j = nxt + k
            # a PassWork is a tuple: the hot loop builds its five counts as a plain tuple, in its order
            t += pass_s((float(running), kv, cum_p[j] - cum_p[nxt], cum_pairs[j] - cum_pairs[nxt], float(k), None, None))
            it += 1
            kv += running + cum_p1[j] - cum_p1[nxt]
            for r in range(nxt, j):
                ttft[r] = t
                heapq.heappush(ends, (it + g[r] - 1, r))
            running += k
            nxt = j
        else:
            t += pass_s((float(running), kv, 0.0, 0.0, 0.0, None, None))
            it += 1
            kv += running
        useful += running
        while ends and ends[0][0] == it:
            r = heapq.heappop(ends)[1]
            finish[r] = t
            kv -= p[r] + g[r]
            running -= 1
    ttft_a = np.asarray(ttft) - arr
    finish_a = np.asarray(finish)
    e2e = finish_a - arr
    ttft_a, e2e, finish_a = _unsort(order, ttft_a, e2e, finish_a)
    start = float(arr[0]) if n else 0.0
    return Served(ttft_a, e2e, finish_a, slots, it, useful, float(finish_a.max()) - start if n else 0.0)


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
            row[f"{name}_ttft_p50_s"] = float(np.median(s.ttft_s[mine]))
            row[f"{name}_e2e_p50_s"] = float(np.median(s.e2e_s[mine]))
        rows.append(row)
    return rows
