"""One request stream served two ways: static batching and continuous (iteration-level) batching.

Both servers hold at most ``slots`` (N) sequences. Time advances pass by pass; each pass's time
comes from the core cost model (roofline.decode.StepModel, roofline.prefill) for the batch and
the context it holds. The simulations assume a dynamic KV cache: a sequence that has produced k
tokens attends to prompt + k cached tokens in its next decode step (as roofline.decode does).

Static: whenever the server is free it takes up to N requests that have arrived (in arrival
order; it does not wait to fill the batch), prefills them in one pass (the prefill of the sum of
their prompt tokens, each prompt causal on its own; logits of the last position only, as
roofline.prefill), then decodes until the longest member is done. Members that have finished
keep their slot and keep computing (their KV keeps growing), so every decode step of a batch of
n costs ``decode_step_s(n, sum(prompt) + n * i)``. A member's first token comes out of the
prefill; with ``policy="early-return"`` its end-to-end time ends at its own last token, with
``"whole-batch"`` at the batch's last step.

Continuous: each iteration, requests that finished in the previous one have left, arrived
requests fill the free slots (up to N, in arrival order), and the newcomers' prefill joins the
iteration's pass: ``StepModel.mixed_step_s(D, kv, P, pairs)`` with D the sequences already
running, kv the sum of their contexts, P the sum of the newcomers' prompts and pairs the sum of
p(p+1)/2. A newcomer's first token comes out of that iteration.

Slot accounting: every pass (a prefill or a decode step) offers N slot-steps; a slot-step is
useful when it produces a token some request needs. Useful slot-steps therefore equal the total
generated tokens under both policies; idle slot-steps = N x passes - useful, covering both empty
slots and finished members still computing. ``mean_occupancy`` = useful / (N x passes) and
``waste_fraction`` = idle / (N x passes).

Speed: the hot loops evaluate the cost model through ``FastStep``, the same formulas as
StepModel and roofline.prefill precomputed into plain Python floats (tests check they agree);
a static batch's decode steps are evaluated all at once with numpy.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from roofline.calibration import MAX_EXPONENT
from roofline.decode import StepModel

PERCENTILES = (50, 90, 99)
POLICIES = ("whole-batch", "early-return")


def _pnorm(a: float, b: float, p: float) -> float:
    """roofline.decode.pnorm for two Python floats (same branches: sum, max, blend)."""
    if p <= 1.0:
        return a + b
    if a >= b:
        hi, lo = a, b
    else:
        hi, lo = b, a
    if p >= MAX_EXPONENT or hi <= 0.0:
        return hi
    return hi * math.exp(math.log1p((lo / hi) ** p) / p)


class FastStep:
    """StepModel.pass_time as scalar functions of plain floats, for simulators' hot loops
    (tests hold it equal to StepModel.mixed_step_s and roofline.prefill to 1e-12)."""

    def __init__(self, model: StepModel):
        cal, spec = model.calibration, model.spec
        self.model = model
        self.weight_bytes = float(model.weight_read_bytes)
        self.kv_bytes_per_token = float(model.kv_bytes_per_token)
        self.act_bytes_per_token = float(model.act_bytes_per_token)
        self.prefill_act_bytes_per_token = float(model.prefill_act_bytes_per_token)
        self.kv_traffic = float(cal.kv_traffic_factor)
        self.s_per_byte = 1.0 / (cal.bandwidth_efficiency * model.bandwidth_bytes_per_s)
        self.s_per_decode_flop = 1.0 / (cal.compute_efficiency * model.peak_flop_per_s)
        self.s_per_attention_flop = 1.0 / (cal.attention_efficiency * model.peak_flop_per_s)
        self.s_per_prefill_flop = 1.0 / (cal.prefill_compute_efficiency * model.peak_flop_per_s)
        self.linear_flop_per_token = float(spec.linear_flop_per_token)
        self.body_linear_flop_per_token = float(spec.body_linear_flop_per_token)
        self.lm_head_flop_per_position = 2.0 * float(spec.lm_head_params)
        self.attention_flop_per_pair = float(spec.attention_flop_per_context_token)
        self.roofline_exponent = float(cal.roofline_exponent)
        self.overhead_exponent = float(cal.overhead_exponent)
        self.decode_overhead_s = float(model.decode_overhead_s)
        self.prefill_overhead_s = float(cal.prefill_overhead_s)
        self.mixed_prefill_overhead_s = max(self.decode_overhead_s, self.prefill_overhead_s)

    def _pass(self, overhead_s, gemm_comp_s, kv_bytes, attn_comp_s, act_bytes) -> float:
        p = self.roofline_exponent
        work = (
            _pnorm(self.weight_bytes * self.s_per_byte, gemm_comp_s, p)
            + _pnorm(kv_bytes * self.s_per_byte, attn_comp_s, p)
            + act_bytes * self.s_per_byte
        )
        return _pnorm(overhead_s, work, self.overhead_exponent)

    def mixed_s(
        self,
        decode_batch: float,
        kv_tokens_read: float,
        prefill_tokens: float = 0.0,
        prefill_pairs: float = 0.0,
        prefill_sequences: float = 0.0,
    ) -> float:
        """StepModel.mixed_step_s for scalars (decode_step_s when nothing is prefilled)."""
        kv_bytes = self.kv_bytes_per_token * (self.kv_traffic * kv_tokens_read + decode_batch + prefill_tokens)
        gemm = decode_batch * self.linear_flop_per_token * self.s_per_decode_flop + (
            prefill_tokens * self.body_linear_flop_per_token + prefill_sequences * self.lm_head_flop_per_position
        ) * self.s_per_prefill_flop
        attn = (
            kv_tokens_read * self.attention_flop_per_pair * self.s_per_attention_flop
            + prefill_pairs * self.attention_flop_per_pair * self.s_per_prefill_flop
        )
        act = decode_batch * self.act_bytes_per_token + prefill_tokens * self.prefill_act_bytes_per_token
        overhead_s = self.mixed_prefill_overhead_s if prefill_tokens > 0 else self.decode_overhead_s
        return self._pass(overhead_s, gemm, kv_bytes, attn, act)

    def prefill_s(self, sequences: float, prompt_tokens: float, prompt_pairs: float) -> float:
        """roofline.prefill's TTFT for prompts of different lengths processed together:
        ``prompt_tokens`` in total, ``prompt_pairs`` = sum of p(p+1)/2, last-position logits."""
        gemm = (
            prompt_tokens * self.body_linear_flop_per_token + sequences * self.lm_head_flop_per_position
        ) * self.s_per_prefill_flop
        attn = prompt_pairs * self.attention_flop_per_pair * self.s_per_prefill_flop
        return self._pass(
            self.prefill_overhead_s,
            gemm,
            prompt_tokens * self.kv_bytes_per_token,
            attn,
            prompt_tokens * self.prefill_act_bytes_per_token,
        )


def static_batch_times(fast: FastStep, prompt_tokens: np.ndarray, gen_tokens: np.ndarray):
    """(prefill_s, cum_s) of one static batch: token k (1-based) of every member is out at
    ``prefill_s + cum_s[k - 1]``; the batch ends at ``prefill_s + cum_s[-1]``."""
    n = len(gen_tokens)
    longest = int(gen_tokens.max())
    p = prompt_tokens.astype(float)
    prompt_sum = float(p.sum())
    pre = fast.prefill_s(n, prompt_sum, float((p * (p + 1.0)).sum() / 2.0))
    i = np.arange(1, longest, dtype=float)
    steps = fast.model.decode_step_s(float(n), prompt_sum + n * i)
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


def serve_static(model: StepModel, prompt_tokens, gen_tokens, arrival_s, slots: int, policy: str = "early-return") -> Served:
    """Static batching: when free, take up to ``slots`` arrived requests; run them to the longest."""
    fast = FastStep(model)
    order, p, g, arr = _sorted_stream(prompt_tokens, gen_tokens, arrival_s)
    n = len(g)
    ttft = np.empty(n)
    finish = np.empty(n)
    arr_list = arr.tolist()
    t = 0.0
    i = 0
    passes = 0
    whole = policy == "whole-batch"
    while i < n:
        if arr_list[i] > t:
            t = arr_list[i]
        j = min(i + slots, bisect_right(arr_list, t, i))
        pre, cum = static_batch_times(fast, p[i:j], g[i:j])
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
    fast = FastStep(model)
    step = fast.mixed_s
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
            t += step(running, kv, cum_p[j] - cum_p[nxt], cum_pairs[j] - cum_pairs[nxt], k)
            it += 1
            kv += running + cum_p1[j] - cum_p1[nxt]
            for r in range(nxt, j):
                ttft[r] = t
                heapq.heappush(ends, (it + g[r] - 1, r))
            running += k
            nxt = j
        else:
            t += step(running, kv)
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
