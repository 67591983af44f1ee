"""The continuous-batching server's scheduler: a KV pool of blocks, admission, preemption, chunks.

Every decision mirrors calibrate/serving_loop.py (the real loop it is checked against, decision
for decision: tests/test_serving_parity.py runs both on a virtual clock); the pass times come
from a cost object (roofline.pass_costs). Terms:

* A request has ``p`` prompt and ``g`` (>= 1) generated tokens and an arrival time. Inside the
  server it is a *sequence*; after producing k tokens its KV holds p + k - 1 tokens (the last
  token is the next decode step's input) and it holds ceil(KV / block_size) blocks of the pool.
* Knobs (``ServerConfig``): ``max_num_seqs`` S (running sequences at most), ``num_blocks`` N,
  ``block_size`` B, ``max_model_len`` T (None: no limit), ``max_num_batched_tokens`` M (tokens
  one iteration takes; None: no limit), ``schedule``.
* Requests the server could never serve are *rejected* before the clock, as the loop refuses
  them (vLLM ignores them): p + g - 1 > T, more blocks than the pool holds, or, prefill-first, a
  recompute prefill of p + g - 1 tokens > M. They are reported, not served.
* The waiting queue holds every request not running, in arrival order (ties: input order);
  preempted ones go back to its FRONT. Admission is FIFO without skipping: the first head that
  does not fit stops it.
* Preemption (recompute): when running sequences need more blocks than are free, the most
  recently admitted running sequence is preempted -- its blocks freed, its KV dropped, back to
  the front of the queue with the tokens it has produced; readmitted, it prefills prompt +
  produced tokens again. Every running request arrived before every waiting one, so "most
  recently admitted" is also "latest arrival" (vLLM V0's FCFS victim). TTFT is a request's FIRST
  first token (a recompute does not reset it).

``prefill-first`` (vLLM V0 without chunked prefill; the loop's default). Each iteration, at its
start time: admit arrived heads while running + admitted < S, their prefill blocks ceil(n / B)
fit in the free blocks and the iteration's prefill tokens + n <= M (n = p + tokens already
produced). If any were admitted: ONE prefill pass over them, each gets its next token, running
sequences do not decode. Otherwise one decode step of every running sequence; before it, each
whose KV grows into a new block takes one, and while more are needed than are free the latest
running sequence is preempted (its need goes with it).

``decode-first`` (vLLM V1 / SGLang style chunked prefill; the loop's ``chunked`` policy; the
default). Each iteration has a budget of M tokens. Running sequences in admission order: a
decoding one takes 1 token (and a block when its KV grows into one), a *prefilling* one -- at
most one, the latest admitted, whose prompt was cut -- takes t = min(what is left of its prefill,
the budget) and the blocks for it; while a sequence needs more blocks than are free the latest
running one is preempted (stop when that is itself). Only when nobody was preempted: admit
arrived heads while running < S and budget > 0, each taking t = min(n, budget) tokens and
ceil(t / B) blocks (stop when they are not free). The iteration runs the decodes and the chunks;
a chunk that completes its sequence's prefill gives its next token. With M = None nothing is
ever cut: every newcomer prefills whole in the iteration that admits it, alongside the running
sequences' decodes (v0.1's continuous server when the pool never binds).

After every iteration, sequences that have produced g tokens leave and free their blocks. When
nothing runs and no head has arrived the server waits for the next arrival (plus the cost
object's ``wake_s``).

Speed: O(1) Python work per iteration outside admissions, leaves and preemptions. A decoding
sequence's KV is ``base + D`` (D = decode steps so far), so the sequences that need a block at
step D are those with (-base) % B == D % B: a count per residue answers "how many need a block"
without visiting them; finish steps sit in a heap. A *quiet stretch* -- decode steps during which
no head can be admitted (none has arrived, or it does not fit: blocks only shrink until someone
leaves), nobody finishes before its last step and the blocks taken fit -- is priced with one vectorised call of the
cost object's ``decode_run`` (or ``decode_costs``) and the clock advanced step by step over its prices (the same
additions, so the same times up to the last bit of the pass formula's float vs array path).
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np

from roofline import validate
from roofline.errors import RooflineError

SCHEDULES = ("decode-first", "prefill-first")
INF = float("inf")
#: Quiet stretches of decode steps at least this long are priced in one vectorised call (shorter
#: ones one step at a time: a numpy call costs as much as 10-20 scalar ones), at most FAST_MAX at once.
FAST_MIN, FAST_MAX = 16, 4096
_ARANGE = np.arange(FAST_MAX, dtype=float)
#: The work one simulation takes, bounded before it starts: requests, the longest generation (a
#: static batch's decode steps are one array of that length) and decode steps (generated tokens /
#: running-sequence limit: about a microsecond each, so at most a minute or two).
MAX_REQUESTS = 10_000_000
MAX_GEN_TOKENS = 10_000_000
MAX_DECODE_STEPS = 50_000_000


def check_work(gen_tokens, max_num_seqs: int, field: str, length_field: str | None = None) -> None:
    """Refuse a stream whose simulation would not end in reasonable time or memory (one line
    naming ``field``, the argument that sets the stream's size, or ``length_field`` its lengths)."""
    gen = np.asarray(gen_tokens)
    if len(gen) > MAX_REQUESTS:
        raise RooflineError(f"at most {MAX_REQUESTS:,} requests in one simulation, not {len(gen):,}", field)
    longest = int(gen.max())
    if longest > MAX_GEN_TOKENS:
        raise RooflineError(f"a generation of {longest:,} tokens: at most {MAX_GEN_TOKENS:,} in one simulation",
                            length_field or field)
    steps = int(gen.sum()) // max_num_seqs
    if steps > MAX_DECODE_STEPS:
        raise RooflineError(f"about {steps:,} decode steps (generated tokens / the running-sequence limit): at most "
                            f"{MAX_DECODE_STEPS:,} in one simulation; use fewer requests or a larger --batch", field)


@dataclass(frozen=True)
class ServerConfig:
    """The knobs of the continuous server (module docstring)."""

    max_num_seqs: int
    num_blocks: int
    block_size: int = 16
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    schedule: str = "decode-first"

    def __post_init__(self):
        validate.whole(self.max_num_seqs, "max_num_seqs")
        validate.whole(self.num_blocks, "num_blocks")
        validate.whole(self.block_size, "block_size")
        validate.choice(self.schedule, "schedule", SCHEDULES)
        if self.max_model_len is not None:
            validate.whole(self.max_model_len, "max_model_len")
        if self.max_num_batched_tokens is not None:
            validate.whole(self.max_num_batched_tokens, "max_num_batched_tokens")
            if self.schedule == "decode-first" and self.max_num_batched_tokens < self.max_num_seqs:
                raise RooflineError(
                    f"must be at least the running-sequence limit ({self.max_num_seqs}) under decode-first "
                    f"scheduling: every running sequence's decode takes one token of it, not "
                    f"{self.max_num_batched_tokens}", "max_num_batched_tokens")


@dataclass
class ServerRun:
    """One stream served (arrays in the stream's sorted order; NaN where a request was rejected)."""

    first_token_s: np.ndarray
    finish_s: np.ndarray
    preemptions: np.ndarray  # per request
    rejected: np.ndarray  # bool per request
    iterations: int
    prefill_iterations: int  # iterations with a prefill (pass or chunk)
    decode_iterations: int  # iterations with a decode step
    max_running: int
    generated_tokens: int


def rejected_mask(prompt, gen, config: ServerConfig) -> np.ndarray:
    """Requests the server could never serve (module docstring)."""
    most = np.asarray(prompt, dtype=np.int64) + np.asarray(gen, dtype=np.int64) - 1
    bad = -(-most // config.block_size) > config.num_blocks
    if config.max_model_len is not None:
        bad |= most > config.max_model_len
    if config.schedule == "prefill-first" and config.max_num_batched_tokens is not None:
        bad |= most > config.max_num_batched_tokens
    return bad


def serve_stream(prompt, gen, arrival, config: ServerConfig, cost) -> ServerRun:
    """Serve a stream sorted by arrival (ties in input order) under ``config``; pass times from
    ``cost`` (``decode_s(slots, decoding, kv_read)``, ``pass_s(slots, decoding, kv_read,
    prefill_tokens, prefill_pairs, chunks, cont_tokens=0, cont_cached=0, longest=0)``, ``wake_s``;
    roofline.pass_costs)."""
    prompt = np.asarray(prompt, dtype=np.int64)
    gen = np.asarray(gen, dtype=np.int64)
    arrival = np.asarray(arrival, dtype=float)
    rejected = rejected_mask(prompt, gen, config)
    state = _State(prompt, gen, arrival, rejected)
    run = _prefill_first if config.schedule == "prefill-first" else _decode_first
    counters = run(state, config, cost)
    return ServerRun(np.asarray(state.first), np.asarray(state.finish), np.asarray(state.pre, dtype=np.int64),
                     rejected, *counters)


class _State:
    def __init__(self, prompt, gen, arrival, rejected):
        n = len(gen)
        self.p = prompt.tolist()
        self.g = gen.tolist()
        self.arr = arrival.tolist()
        self.order = np.flatnonzero(~rejected).tolist()  # the requests to serve, in arrival order
        self.first = [float("nan")] * n
        self.finish = [float("nan")] * n
        self.pre = [0] * n


def _prefill_first(s: _State, cfg: ServerConfig, cost):
    p, g, arr, order, first, finish, pre = s.p, s.g, s.arr, s.order, s.first, s.finish, s.pre
    n = len(p)
    S, B, M = cfg.max_num_seqs, cfg.block_size, cfg.max_num_batched_tokens or float("inf")
    decode_s, pass_s, wake = cost.decode_s, cost.pass_s, cost.wake_s
    fin_cost = getattr(cost, "finish_s", 0.0)  # host time a sequence leaving adds to its iteration
    k = [0] * n  # tokens produced (at its last admission, for a running sequence)
    base = [0] * n  # a decoding sequence's KV = base + D
    fin_step = [-1] * n
    fh: list = []  # heap of (finish step, sequence); stale entries skipped by fin_step
    counts = [0] * B  # decoding sequences per residue (-base) % B
    running: dict[int, None] = {}  # admission order
    requeue: list[int] = []  # preempted, the front of the queue last
    free, D, sum_base, t = cfg.num_blocks, 0, 0, 0.0
    nxt, total = 0, len(order)
    iterations = prefills = max_running = tokens_out = 0
    run_prices = _run_prices(cost)
    while nxt < total or requeue or running:
        if not running and not requeue and arr[order[nxt]] > t:
            t = arr[order[nxt]] + wake  # idle: wait for the next arrival
        if running and run_prices is not None and (not fh or fh[0][0] - D + 1 >= FAST_MIN):
            # a quiet stretch of decode steps, priced at once
            until = _quiet_until_prefill_first(s, k, requeue, nxt, total, len(running), S, B, M, free, t)
            if until is not None:
                m = len(running)
                quiet = _quiet_stretch(run_prices, fh, fin_step, finish, base, running, counts, D, B, m, free,
                                       sum_base, t, until, fin_cost)
                if quiet is not None:
                    t, done, free, sum_base = quiet
                    D += done
                    iterations += done
                    tokens_out += m * done
                    continue
        # 1. admit, FIFO without skipping
        adm = []
        if len(running) < S:
            tokens = taken = longest = 0
            pairs = 0.0
            while len(running) + len(adm) < S:
                if requeue:
                    h = requeue[-1]
                elif nxt < total and arr[order[nxt]] <= t:
                    h = order[nxt]
                else:
                    break
                nn = p[h] + k[h]
                need = -(-nn // B)
                if need > free - taken or tokens + nn > M:
                    break
                if requeue:
                    requeue.pop()
                else:
                    nxt += 1
                adm.append(h)
                tokens += nn
                taken += need
                pairs += nn * (nn + 1) / 2.0
                if nn > longest:
                    longest = nn
        iterations += 1
        if adm:  # 2. one prefill pass
            prefills += 1
            t += pass_s(len(adm), 0, 0.0, float(tokens), pairs, float(len(adm)), 0, 0, longest)
            free -= taken
            for h in adm:
                running[h] = None
            if len(running) > max_running:
                max_running = len(running)
            left = 0
            for h in adm:
                freed, b = _prefilled(h, p[h] + k[h], D, B, t, k, g, first, finish, running, base, counts, fin_step, fh)
                if freed:  # it left: its one token was its last
                    free += freed
                    left += 1
                sum_base += b
            t += fin_cost * left
            tokens_out += len(adm)
            continue
        # 3. one decode step of every running sequence
        r = D % B
        needy = counts[r]
        if needy > free:
            while needy > free:
                v = next(reversed(running))
                bv = base[v]
                kv = bv + D
                free += -(-kv // B)
                del running[v]
                rv = -bv % B
                counts[rv] -= 1
                sum_base -= bv
                if rv == r:
                    needy -= 1
                k[v] = kv - p[v] + 1
                fin_step[v] = -1
                pre[v] += 1
                requeue.append(v)
        free -= needy
        m = len(running)
        if m > max_running:
            max_running = m
        t += decode_s(m, m, float(sum_base + m * (D + 1)))
        tokens_out += m
        D += 1
        if fh and fh[0][0] < D:
            freed, gone, left = _retire(fh, fin_step, finish, base, running, counts, D, B, t)
            free += freed
            sum_base -= gone
            t += fin_cost * left
    return iterations, prefills, iterations - prefills, max_running, tokens_out


def _decode_first(s: _State, cfg: ServerConfig, cost):
    p, g, arr, order, first, finish, pre = s.p, s.g, s.arr, s.order, s.first, s.finish, s.pre
    n = len(p)
    S, B = cfg.max_num_seqs, cfg.block_size
    M = cfg.max_num_batched_tokens or (1 << 62)
    decode_s, pass_s, wake = cost.decode_s, cost.pass_s, cost.wake_s
    fin_cost = getattr(cost, "finish_s", 0.0)  # host time a sequence leaving adds to its iteration
    k = [0] * n
    base = [0] * n
    fin_step = [-1] * n
    fh: list = []
    counts = [0] * B
    running: dict[int, None] = {}
    requeue: list[int] = []
    free, D, sum_base, t = cfg.num_blocks, 0, 0, 0.0
    pf, pf_c = -1, 0  # the prefilling sequence (the latest admitted) and its cached tokens
    nxt, total = 0, len(order)
    iterations = prefills = decodes = max_running = tokens_out = 0
    run_prices = _run_prices(cost)
    while nxt < total or requeue or running:
        if not running and not requeue and arr[order[nxt]] > t:
            t = arr[order[nxt]] + wake
        if running and pf < 0 and run_prices is not None and (not fh or fh[0][0] - D + 1 >= FAST_MIN):
            # a quiet stretch of decode steps, priced at once
            m = len(running)
            until = _quiet_until_decode_first(s, k, requeue, nxt, total, m, S, B, M, free - counts[D % B], t)
            if until is not None:
                quiet = _quiet_stretch(run_prices, fh, fin_step, finish, base, running, counts, D, B, m, free,
                                       sum_base, t, until, fin_cost)
                if quiet is not None:
                    t, done, free, sum_base = quiet
                    D += done
                    iterations += done
                    decodes += done
                    tokens_out += m * done
                    continue
        if running and pf < 0:
            m = len(running)
            needy = counts[D % B]
            if needy <= free and (m >= S or _quiet_until_decode_first(s, k, requeue, nxt, total, m, S, B, M,
                                                                      free - needy, t) is not None):
                # one decode step with nothing to admit and its blocks free: the steps below, without
                # their lists (the same arithmetic in the same order)
                free -= needy
                iterations += 1
                decodes += 1
                if m > max_running:
                    max_running = m
                t += decode_s(m, m, float(sum_base + m * (D + 1)))
                tokens_out += m
                D += 1
                if fh and fh[0][0] < D:
                    freed, gone, left = _retire(fh, fin_step, finish, base, running, counts, D, B, t)
                    free += freed
                    sum_base -= gone
                    t += fin_cost * left
                continue
        budget = M
        chunks = []  # (sequence, tokens, cached before)
        n_dec = len(running) - (pf >= 0)
        r = D % B
        needy = counts[r] if n_dec else 0
        pf_t = pf_need = 0
        if pf >= 0:
            pf_t = min(p[pf] + k[pf] - pf_c, budget - n_dec)
            if pf_t > 0:
                pf_need = -(-(pf_c + pf_t) // B) - (-(-pf_c // B))
        preempted = False
        if needy + pf_need > free:  # 1'. the slow path: in admission order, preempting the latest
            preempted = True
            for h in list(running):
                if h not in running:
                    break
                if h == pf:
                    if pf_t <= 0:
                        continue
                    need = pf_need
                else:
                    need = 1 if (base[h] + D) % B == 0 else 0
                while need > free and h in running:
                    v = next(reversed(running))
                    del running[v]
                    if v == pf:
                        free += -(-pf_c // B)
                        pf, pf_c, pf_t = -1, 0, 0
                    else:
                        bv = base[v]
                        kv = bv + D
                        free += -(-kv // B)
                        counts[-bv % B] -= 1
                        sum_base -= bv
                        k[v] = kv - p[v] + 1
                        fin_step[v] = -1
                    pre[v] += 1
                    requeue.append(v)
                if h not in running:
                    break
                free -= need
            n_dec = len(running) - (pf >= 0)
        else:
            free -= needy + pf_need
        budget -= n_dec
        if pf >= 0 and pf_t > 0:
            chunks.append((pf, pf_t, pf_c))
            budget -= pf_t
        slots = len(running)  # the decode step runs over these (a prefilling one's slot too)
        # 2. admission, only when nobody was preempted
        if not preempted:
            while budget > 0 and len(running) < S:
                if requeue:
                    h = requeue[-1]
                elif nxt < total and arr[order[nxt]] <= t:
                    h = order[nxt]
                else:
                    break
                nn = p[h] + k[h]
                tt = nn if nn <= budget else budget
                need = -(-tt // B)
                if need > free:
                    break
                if requeue:
                    requeue.pop()
                else:
                    nxt += 1
                free -= need
                running[h] = None
                chunks.append((h, tt, 0))
                budget -= tt
        # 3. execute
        iterations += 1
        m = len(running)
        if m > max_running:
            max_running = m
        if chunks:
            prefills += 1
            tokens = longest = 0
            pairs = 0.0
            for _, tt, c in chunks:
                tokens += tt
                pairs += tt * c + tt * (tt + 1) / 2.0
                if tt > longest:
                    longest = tt
            kv_read = float(sum_base + n_dec * (D + 1)) if n_dec else 0.0
            _, cont_t, cont_c = chunks[0]  # a chunk after cached tokens comes first (c > 0), if any
            t += pass_s(slots, n_dec, kv_read, float(tokens), pairs, float(len(chunks)),
                        cont_t if cont_c else 0, cont_c, longest)
        else:
            t += decode_s(slots, n_dec, float(sum_base + n_dec * (D + 1)))
        left = 0
        if n_dec:
            decodes += 1
            tokens_out += n_dec
            D += 1
            if fh and fh[0][0] < D:
                freed, gone, left = _retire(fh, fin_step, finish, base, running, counts, D, B, t)
                free += freed
                sum_base -= gone
        for h, tt, c in chunks:
            cached = c + tt
            if cached < p[h] + k[h]:  # cut: still prefilling
                pf, pf_c = h, cached
                continue
            if h == pf:
                pf, pf_c = -1, 0
            freed, b = _prefilled(h, cached, D, B, t, k, g, first, finish, running, base, counts, fin_step, fh)
            if freed:  # it left: its one token was its last
                free += freed
                left += 1
            sum_base += b
            tokens_out += 1
        t += fin_cost * left  # the iteration's leavers, after every token of it is out
    return iterations, prefills, decodes, max_running, tokens_out


def _prefilled(h, kv, D, B, t, k, g, first, finish, running, base, counts, fin_step, fh):
    """Sequence ``h``'s prefill is complete (its KV holds ``kv`` tokens) at time ``t``, before decode
    step D: its next token comes out; if that was its last it leaves ((blocks freed, 0)), else it
    joins the decode bookkeeping -- its base, block residue and finishing step ((0, its base))."""
    kh = k[h] + 1
    k[h] = kh
    if kh == 1:
        first[h] = t
    if kh == g[h]:
        finish[h] = t
        del running[h]
        return -(-kv // B), 0
    b = kv - D
    base[h] = b
    counts[-b % B] += 1
    fs = D + g[h] - kh - 1
    fin_step[h] = fs
    heappush(fh, (fs, h))
    return 0, b


# ---- quiet stretches: decode steps with nothing to admit, nobody to finish or preempt ---------
def _retire(fh, fin_step, finish, base, running, counts, D, B, t):
    """Finish, at time ``t``, every running sequence whose last decode step came before step ``D``
    (heap entries of sequences preempted since are stale and skipped): (KV blocks freed, the sum of
    their bases, how many left). Called only when the heap's head has finished, so a step costs no call."""
    freed = gone = left = 0
    while fh and fh[0][0] < D:
        fs, h = heappop(fh)
        if fin_step[h] != fs:
            continue  # preempted since (a stale entry)
        fin_step[h] = -1
        finish[h] = t
        b = base[h]
        freed += -(-(b + D) // B)
        del running[h]
        counts[-b % B] -= 1
        gone += b
        left += 1
    return freed, gone, left


def _quiet_until_prefill_first(s, k, requeue, nxt, total, m, S, B, M, free, t):
    """None if this iteration could admit; else the time until which none can (inf: until a
    sequence leaves, since blocks only shrink while nothing leaves)."""
    if m >= S:
        return INF
    h = requeue[-1] if requeue else (s.order[nxt] if nxt < total else -1)
    if h < 0:
        return INF
    if s.arr[h] > t:
        return s.arr[h]
    nn = s.p[h] + k[h]
    return INF if -(-nn // B) > free or nn > M else None


def _quiet_until_decode_first(s, k, requeue, nxt, total, m, S, B, M, free_after_needs, t):
    """As _quiet_until_prefill_first under decode-first admission (after the decodes' blocks)."""
    budget = M - m
    if m >= S or budget <= 0:
        return INF
    h = requeue[-1] if requeue else (s.order[nxt] if nxt < total else -1)
    if h < 0:
        return INF
    if s.arr[h] > t:
        return s.arr[h]
    nn = s.p[h] + k[h]
    return INF if -(-min(nn, budget) // B) > free_after_needs else None


def _quiet_steps(fh, fin_step, counts, D, B, m, free) -> int:
    """How many decode steps from step D run with the same sequences -- up to and including the
    next step at which one finishes -- and no preemption (the blocks they take fit in ``free``);
    at most FAST_MAX."""
    while fh and fin_step[fh[0][1]] != fh[0][0]:
        heappop(fh)  # stale entries of preempted sequences
    steps = fh[0][0] - D + 1 if fh else FAST_MAX
    if steps < FAST_MIN:
        return steps
    cycles = free // m  # every B steps each running sequence takes exactly one block
    fit = cycles * B
    if fit < steps:
        left = free - cycles * m
        for j in range(B):
            left -= counts[(D + j) % B]
            if left < 0:
                break
            fit += 1
    return min(steps, fit, FAST_MAX)


def _need(counts, D, B, m, steps) -> int:
    """Blocks taken by ``steps`` decode steps from step D."""
    cycles, rest = divmod(steps, B)
    if not rest:
        return cycles * m
    r = D % B  # the residues D, D + 1, ..., D + rest - 1 (mod B): one slice, or two around the end
    end = r + rest
    return cycles * m + (sum(counts[r:end]) if end <= B else sum(counts[r:]) + sum(counts[:end - B]))


def _quiet_stretch(run_prices, fh, fin_step, finish, base, running, counts, D, B, m, free, sum_base, t, until,
                   fin_cost):
    """Run a quiet stretch of the ``m`` running sequences from step D, priced in one call, and
    retire those its last step finished: (time, steps run, free blocks, sum of the running bases)
    after it; None when fewer than FAST_MIN steps are quiet (the caller goes one step at a time)."""
    steps = _quiet_steps(fh, fin_step, counts, D, B, m, free)
    if steps < FAST_MIN:
        return None
    t, done = _run_quiet(run_prices(m, sum_base + m * (D + 1), m, steps), t, until)
    free -= _need(counts, D, B, m, done)
    if fh and fh[0][0] < D + done:  # the stretch's last step finished someone
        freed, gone, left = _retire(fh, fin_step, finish, base, running, counts, D + done, B, t)
        free += freed
        sum_base -= gone
        t += fin_cost * left
    return t, done, free, sum_base


def _run_prices(cost):
    """The quiet stretches' prices from ``cost``: f(decoding, first, stride, steps) -> a list of the
    steps' seconds, reading first, first + stride, ... cached tokens. The cost object's
    ``decode_run`` (whole numbers in, no index array), else its ``decode_costs`` over the reads as
    floats; None without either (every step priced alone)."""
    run = getattr(cost, "decode_run", None)
    if run is not None:
        return run
    costs = getattr(cost, "decode_costs", None)
    if costs is None:
        return None

    def prices(decoding, first, stride, steps):
        return costs(decoding, decoding, float(first) + stride * _ARANGE[:steps]).tolist()

    return prices


def _run_quiet(costs, t, until):
    """Advance the clock step by step (the same additions as one step at a time) over the list
    ``costs`` while the next step starts before ``until``; (time, steps run)."""
    done = 0
    for c in costs:
        if t >= until:
            break
        t += c
        done += 1
    return t, done
