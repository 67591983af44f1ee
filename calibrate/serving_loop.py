"""A continuous-batching server loop: the real run ``roofline simulate`` is checked against.

The loop serves a request stream on one GPU with the graph engine's dense decoder (random bf16
weights; llama, qwen2, mistral, qwen3 with its q/k norms, biased attention, plain GELU MLPs;
``check_servable`` refuses, in one line, mixtures of experts, latent attention, and a sliding
window narrower than ``max_model_len``). It is deliberately simple, so that a simulator can
mirror its scheduling decision for decision; every rule it follows is written here.

Terms
-----
* A request has ``prompt_tokens`` p, ``gen_tokens`` g (>= 1) and ``arrival_s`` (seconds after
  the clock starts). Its prompt is p random token ids (seeded by the request id).
* A *sequence* is a request inside the server. After producing k tokens its KV holds p + k - 1
  tokens (the last produced token is fed to the next decode step, which writes its KV). Its
  *length* is p + k.
* Blocks (logical, as vLLM's block manager): ``block_size`` tokens per block, ``num_blocks`` in
  the pool. A sequence whose KV holds c tokens holds ceil(c / block_size) blocks. The pool is
  accounting only: the physical cache is the static one below, which never runs out.
* ``max_num_seqs`` (S) slots, ``max_num_batched_tokens`` M (the most tokens one iteration
  takes: prefill tokens, and under ``chunked`` decodes too), ``max_model_len`` (T, the slot
  capacity in tokens; the executor's cache holds T rounded up to a multiple of 8 rows a slot, the
  rest masked, as calibrate.graph_engine.RING_ALIGN: a score row of another length runs cuBLAS's
  GEMV fallback).

Policy ``prefill-first`` (vLLM V0's default scheduler without chunked prefill)
--------------------------------------------------------------------------
The waiting queue holds every request not running, in arrival order (ties: file order);
requests not yet arrived sit at its tail. Each iteration, at time ``now`` (its start):

1. Admit. While the queue's head has arrived (arrival_s <= now), running + admitted < S, the
   head's prefill blocks ceil(n / block_size) <= the free blocks (minus those taken by requests
   admitted in this iteration), and the iteration's prefill tokens + n <= max_num_batched_tokens:
   admit it (n = p for a new request, p + k for a preempted one with k tokens already produced).
   FIFO without skipping: the first head that fails stops admission.
2. If any were admitted: ONE prefill pass over them (packed: every linear layer on all their
   tokens at once; attention per sequence, causal). Each admitted sequence's next token comes
   out of it (a new request's first token; token k + 1 of a preempted one). Running sequences
   do not decode in this iteration.
3. Otherwise, if any sequence runs: one decode step of all of them. Before it, every sequence
   whose KV grows into a new block (holds c tokens with ceil((c + 1) / block_size) > its blocks)
   takes one; while more are needed than are free, the most recently admitted running sequence
   is preempted (recompute): its blocks are freed, its KV dropped, and it goes back to the FRONT
   of the waiting queue with the tokens it has produced. Preempting a sequence that needed a
   block also removes its need. Readmitted, it is prefilled with prompt + produced tokens.
4. Otherwise (nothing runs, nothing admissible) wait until the head's arrival.
5. After the pass, sequences that have produced g tokens leave and free their blocks (also right
   after a prefill: g = 1, or a readmitted sequence with k + 1 = g).

Invariants that follow: every running request arrived before every waiting one, so admission
order among the running is arrival order and "most recently admitted" is also "latest arrival"
(vLLM V0's FCFS victim). A request's TTFT is its FIRST first token (a recompute does not reset
it); its TPOT = (finish - first token) / (g - 1), its E2E = finish - arrival. Requests that can
never be served (p + g - 1 > T, more blocks than the pool, or a recompute prefill of p + g - 1
tokens > max_num_batched_tokens) are refused before the clock starts.

Policy ``chunked`` (vLLM V1 style: decodes and prefill chunks share a token budget)
-------------------------------------------------------------------------------
A sequence is *decoding* once its prefill is complete, else *prefilling* (its KV holds c of its
n = p + k prefill tokens). Each iteration, with budget M = max_num_batched_tokens (>= S):

1. Running sequences, in admission order: a decoding one takes 1 token, a prefilling one
   t = min(n - c, budget left) (skipped when 0). It needs ceil((c + t) / block_size) blocks;
   while it holds fewer plus the free ones, the most recently admitted running sequence is
   preempted (recompute, to the front of the waiting queue); if that is itself, stop here.
   Otherwise it takes the blocks and t tokens of the budget.
2. Only if nobody was preempted in this iteration: admit waiting requests, FIFO without
   skipping, while the head has arrived, running < S and budget > 0: it takes
   t = min(n, budget) tokens and needs ceil(t / block_size) free blocks (else stop).
3. Execute: if any decoding sequence was scheduled, one decode step over slots [0, r) with r
   the running sequences after step 1 (a prefilling one's slot computes but is ignored, bucket
   of r); then one prefill pass over the chunks (token j of a chunk at position c + j; a chunk
   with c > 0 attends to its slot's cache, causally); one host sync. A chunk that completes
   its sequence's prefill gives its next token (a new request's first token).
4. Sequences that have produced g tokens leave (as in prefill-first).

At most one sequence is prefilling between iterations (a chunk is cut only when the budget runs
out, and the cut one is then the latest admitted), so the decode step's r counts it. A prompt
longer than M is prefilled over several iterations. ``kind`` is ``mixed`` when an iteration both
decodes and prefills.

Physical KV and execution
-------------------------
* Static cache: (layers, S, kv_heads, T, head_dim) for K and for V, preallocated. Running
  sequences are kept COMPACT in slots [0, n): when one leaves (finish or preemption) the
  sequence in the last running slot moves into the hole (its valid KV prefix is copied: c x KV
  bytes per token, queued after the pass and run before the next one; small next to a step).
* Decode step: one CUDA graph per *bucket*, the smallest capture size >= n (CAPTURE_SIZES: 1, 2,
  4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, ... up to S, and S itself); slots n..bucket-1 are
  padding (their results are ignored; they write only into free slots). Every step reads the
  whole T capacity of every bucket slot with a validity mask per slot (``key_pos <= pos[slot]``):
  its KV bytes are bucket x T x KV bytes per token, whatever the contexts. Each slot has its own
  position (a device tensor updated in place before replay), RoPE angle and mask. Graphs are
  captured up front, before the clock starts (capture time is recorded separately).
* Prefill pass: eager. Linear layers on the packed tokens, RoPE per token position, K/V
  scattered into the slots' cache rows, causal attention of each sequence on itself (K/V heads
  repeated for GQA), logits of each sequence's last position only, argmax. Attention is one
  flash call for all sequences (``torch.nn.attention.varlen``) where torch has it and it agrees
  with SDPA on a test batch before the clock starts, else one SDPA call per sequence and layer
  (``prefill_attention`` in the run's config says which). cuDNN SDPA is turned off on CUDA: it
  builds a plan for every new length.
  With CUDA graphs and varlen attention (``prefill_graphs`` in the run's config), a whole-prompt
  pass is instead one CUDA-graph replay of the same computation padded to a *token bucket*
  (PREFILL_TOKEN_BUCKETS: 16, 32, ..., 512, 768, 1024, 1536, 2048, ... up to
  max_num_batched_tokens, and it): the padding is one more sequence (position 0, its K/V
  written into a spare slot past the last), the sequence offsets and last positions are read
  from a device buffer, and logits are computed for max_num_seqs rows. Eager, the pass was bound
  by Python launching ~50 kernels a layer (~0.4 ms a layer on the H200's host), whose speed
  varied by up to 1.6x from run to run and machine to machine; as a graph it is the GPU's work.
  Under policy ``chunked`` the same holds for an iteration's prefill (after its decode step):
  whole prompts replay a prefill graph; a pass whose first sequence is a chunk after c cached
  tokens (there is at most one: the one cut last time) replays a *chunk graph* of its bucket, the
  same computation but for attention: one varlen call whose keys are the chunk's slot's T cache
  rows (copied out by a device index and concatenated: ~8 x T x KV width elements a layer) and
  then the pass's own, with separate query and key offsets, causal from the bottom right (chunk
  token j at position c + j sees rows 0..c + j), K/V heads not repeated (``chunk_graphs`` in the
  run's config; checked against SDPA before the clock, else those chunks run eagerly, as all of
  them did before). The simulator prices it from the card's chunk table (roofline.chunk_table).
* Every iteration ends with a host sync (the tokens come back to the host, as an engine samples
  there); its start and end are ``time.perf_counter`` readings. On CUDA a pair of events around
  the pass also gives its device time.

Host probe
----------
The host's share of an iteration (scheduling, packing, the token sync: ~0.05-0.4 ms) is Python on
the machine's CPU, and its speed differed 1.8-3.5x between the lent H200 machines. Before a run's
clock starts, ``host_probe`` serves a fixed stream on the same executor three times and records the
median host time of its prefill and decode iterations in the run's config (``host_probe``): the
simulator scales the loop's host terms to the run's machine with it
(roofline.pass_costs.scaled_for_host). The same probe runs again after the run's clock stops
(``host_probe_after``); replay takes the geometric mean of the two (roofline.pass_costs.run_host_probe),
so a host whose speed drifts during the run, or a slow moment one probe caught, counts half.

Device probe
------------
The same decode graph ran up to 6% apart against its price on different lent H200s (and by model
on one machine), and near saturation a few percent of pass time moves a TTFT p99 by tens of
percent. ``device_probe`` times each capture size's decode step, in the run's own process, before
the clock starts and again after it stops (``device_probe``, ``device_probe_after`` in the run's
config); ``roofline compare-serving --at-probed-speed`` replays the run with its decode steps at
that speed (roofline.pass_costs.probed_decode_scales).

Without a GPU the same loop runs on the CPU (no graphs): that is what the tests exercise.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from roofline.buckets import capture_sizes, prefill_token_buckets  # noqa: F401 - the loop's buckets
from roofline.errors import RooflineError

POLICIES = ("prefill-first", "chunked")
DEFAULT_BLOCK_SIZE = 16


def bucket_for(n: int, sizes: list[int]) -> int:
    """The smallest capture size >= n."""
    for size in sizes:
        if size >= n:
            return size
    raise ValueError(f"{n} sequences exceed the largest bucket {sizes[-1]}")


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass(frozen=True)
class Request:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    gen_tokens: int


@dataclass(frozen=True)
class SchedulerConfig:
    """The knobs of the policy (the simulator needs exactly these)."""

    max_num_seqs: int
    max_model_len: int
    num_blocks: int
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_batched_tokens: int | None = None  # None: max(max_model_len, 2048), vLLM V0's default
    policy: str = "prefill-first"

    @property
    def batched_tokens(self) -> int:
        return self.max_num_batched_tokens or max(self.max_model_len, 2048)

    def check(self, requests: list[Request]) -> None:
        """Refuse a configuration or a request the loop could never serve (before any clock)."""
        if self.policy not in POLICIES:
            raise RooflineError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        for name in ("max_num_seqs", "max_model_len", "num_blocks", "block_size", "batched_tokens"):
            if getattr(self, name) < 1:
                raise RooflineError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.policy == "chunked" and self.batched_tokens < self.max_num_seqs:
            raise RooflineError(f"policy chunked needs max_num_batched_tokens ({self.batched_tokens}) >= "
                                f"max_num_seqs ({self.max_num_seqs}): every decode takes one token of the budget")
        for r in requests:
            most = r.prompt_tokens + r.gen_tokens - 1  # KV tokens at the last decode step
            if r.prompt_tokens < 1 or r.gen_tokens < 1:
                raise RooflineError(f"request {r.request_id}: prompt and gen tokens must be at least 1")
            if not (math.isfinite(r.arrival_s) and r.arrival_s >= 0):
                raise RooflineError(f"request {r.request_id}: arrival_s must be a finite number >= 0")
            if most > self.max_model_len:
                raise RooflineError(f"request {r.request_id}: prompt {r.prompt_tokens} + gen {r.gen_tokens} - 1 "
                                    f"tokens exceed max_model_len {self.max_model_len}")
            if blocks_for(most, self.block_size) > self.num_blocks:
                raise RooflineError(f"request {r.request_id}: needs {blocks_for(most, self.block_size)} blocks, "
                                    f"the pool has {self.num_blocks}")
            if most > self.batched_tokens and self.policy == "prefill-first":
                raise RooflineError(f"request {r.request_id}: a recompute prefill of {most} tokens would exceed "
                                    f"max_num_batched_tokens {self.batched_tokens}")


# ---- the scheduler ------------------------------------------------------------------------
@dataclass(eq=False)
class _Seq:
    req: Request
    prompt_ids: object  # numpy int64 array
    generated: list = field(default_factory=list)
    kv_tokens: int = 0  # tokens whose KV is in the cache
    blocks: int = 0
    slot: int = -1
    preemptions: int = 0
    decoding: bool = False  # its prefill is complete (its last token is the next decode input)
    prefilled_tokens: int = 0  # all prefill tokens, recomputes included
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    finish_s: float | None = None

    def prefill_ids(self):
        import numpy as np

        if not self.generated:
            return self.prompt_ids
        return np.concatenate([self.prompt_ids, np.asarray(self.generated, dtype=np.int64)])

    @property
    def prefill_tokens(self) -> int:
        return self.req.prompt_tokens + len(self.generated)

    @property
    def done(self) -> bool:
        return len(self.generated) >= self.req.gen_tokens


@dataclass
class ServeResult:
    """Per-request records (request order), one dict per iteration, and how the run ended."""

    requests: list[dict]
    iterations: list[dict]
    started_at: float  # the clock's reading at t = 0
    wall_s: float
    deadline_s: float | None
    deadline_hit: bool
    preemptions: int
    max_running: int


def prompt_ids_for(request: Request, vocab: int, seed: int = 0):
    """The request's prompt: ``prompt_tokens`` ids from numpy default_rng([seed, request_id])."""
    import numpy as np

    return np.random.default_rng([seed, request.request_id]).integers(0, vocab, request.prompt_tokens, dtype=np.int64)


def serve(
    requests: list[Request],
    executor,
    config: SchedulerConfig,
    *,
    clock=time.perf_counter,
    sleep=time.sleep,
    deadline_s: float | None = None,
    seed: int = 0,
    progress=None,
) -> ServeResult:
    """Serve ``requests`` with ``executor`` under ``config.policy`` (the module docstring).

    ``executor`` runs the passes (ModelExecutor on a device, CostExecutor on a virtual clock):
    ``prefill(items)`` with items [(slot, ids, start)] (start > 0: a chunk after ``start``
    cached tokens; the next token of each item comes back), ``decode(tokens, positions)`` for
    slots 0..n-1, ``mixed(tokens, positions, items)`` (a decode step, then a prefill pass, one
    sync: policy ``chunked``), each returning the tokens and the device seconds;
    ``move(src, dst, kv_tokens)``; ``left(n)`` after ``n`` sequences finished and left;
    ``buckets`` (the capture sizes); ``vocab``. ``deadline_s``:
    no admission from then on (the running sequences still finish; requests never admitted are
    reported unserved).
    """
    config.check(requests)
    return _Server(requests, executor, config, clock, sleep, deadline_s, seed, progress).run()


#: The host probe's stream: HOST_PROBE_SEQS requests, all arrived at once, each admitted alone
#: (the probe's token budget holds one prompt), then decoding together until they all finish.
HOST_PROBE_SEQS, HOST_PROBE_PROMPT, HOST_PROBE_GEN, HOST_PROBE_REPEATS = 16, 48, 24, 3


def host_probe(executor, max_num_seqs: int, max_model_len: int, *, clock=time.perf_counter, sleep=time.sleep,
               seed: int = 0, repeats: int = HOST_PROBE_REPEATS, seqs: int | None = None) -> dict:
    """How fast this machine's host runs the loop, measured before a run's clock starts, on a
    fixed stream whatever the run's: the median host time (next iteration's start - this one's
    start - its device time) of the probe's prefill iterations (one sequence each) and of its
    decode iterations (HOST_PROBE_SEQS sequences, none finishing), ``repeats`` times (after a
    garbage collection each), and the median of the repeats' medians (one repeat disturbed by
    something else on the machine then does not count). The simulator scales the loop's host
    terms by this run's figures over those of the runs the terms were fitted on
    (roofline.pass_costs.scaled_for_host): the host's speed is the machine's, not the stream's --
    the same loop ran its host work 1.8-3.5x slower on some H200 machines than on others.
    ``seqs`` (default HOST_PROBE_SEQS, capped by the slots) sets how many sequences it serves:
    serving_job's ``--wide-host-probe`` also takes it with every slot decoding, a record the replay
    does not read (device call 148)."""
    import gc
    import statistics

    seqs = min(seqs or HOST_PROBE_SEQS, max_num_seqs)
    prompt = max(1, min(HOST_PROBE_PROMPT, max_model_len // 2))
    gen = max(3, min(HOST_PROBE_GEN, prompt, max_model_len - prompt + 1))
    requests = [Request(i, 0.0, prompt, gen) for i in range(seqs)]
    config = SchedulerConfig(max_num_seqs=seqs, max_model_len=max_model_len,
                             num_blocks=seqs * blocks_for(prompt + gen, DEFAULT_BLOCK_SIZE),
                             max_num_batched_tokens=prompt + gen - 1)  # one prompt an iteration (prompt >= gen)
    each = []
    for _ in range(max(1, repeats)):
        gc.collect()
        its = serve(requests, executor, config, clock=clock, sleep=sleep, seed=seed).iterations
        host = {"prefill": [], "decode": []}
        for a, b in zip(its, its[1:]):
            if not a["finished"] and not a["preempted"]:
                host[a["kind"]].append(b["t_start_s"] - a["t_start_s"] - a["device_s"])
        if not host["prefill"] or not host["decode"]:
            raise RuntimeError("the host probe ran no prefill or no decode iteration to measure")
        each.append({"prefill_host_s": statistics.median(host["prefill"]),
                     "decode_host_s": statistics.median(host["decode"]),
                     "prefill_iterations": len(host["prefill"]), "decode_iterations": len(host["decode"])})
    return {"prefill_host_s": statistics.median(e["prefill_host_s"] for e in each),
            "decode_host_s": statistics.median(e["decode_host_s"] for e in each),
            "prefill_iterations": each[0]["prefill_iterations"], "decode_iterations": each[0]["decode_iterations"],
            "decode_seqs": seqs, "prompt_tokens": prompt, "gen_tokens": gen, "repeats": each}


#: The device probe: every capture size's decode step DEVICE_PROBE_REPEATS times (after
#: DEVICE_PROBE_WARMUP unrecorded ones), each slot at its own position (``probe_positions``).
DEVICE_PROBE_REPEATS, DEVICE_PROBE_WARMUP = 24, 3


def device_probe(executor, max_model_len: int, *, repeats: int = DEVICE_PROBE_REPEATS,
                 warmup: int = DEVICE_PROBE_WARMUP) -> dict:
    """How fast this run's GPU runs the loop's decode steps, measured before a run's clock starts
    on a fixed workload whatever the run's: each capture size's decode step at a typical fill
    (``probe_fill``: midway between the bucket below and it; the slots beyond padded at position 0
    as the server pads them), each running slot at its own position, spread over the cache as a
    server's are (``probe_positions``), ``repeats`` times, one step at a time as the server runs
    them (its inputs staged from the host, the token sync), timed as the run times its steps
    (roofline.serving_runs' ``device_s``), and the median per bucket. The same graph of
    the same model ran up to 6% apart against its price on different lent H200s, and a TTFT p99
    near saturation moves by tens of percent with a few percent of pass time (docs/serving.md, "Why
    the remaining tails miss"); this is that speed, taken in the run's own process (its weights,
    its graphs), so ``roofline compare-serving --at-probed-speed`` can replay the run at it
    (roofline.pass_costs.probed_decode_scales). The decode attention reads every slot's
    max_model_len positions, so the positions do not change the work, but slots at positions of
    their own cost 1.4-4 us a layer more than slots at one (device call 87), so the probe spreads
    them as a server's are; the cache rows it writes lie beyond each sequence's length until the
    sequence writes them itself."""
    import statistics

    by_bucket, fills = {}, {}
    for bucket, n in probe_fill(executor.buckets).items():
        tokens, positions = [1] * n, probe_positions(n, max_model_len)
        fills[str(bucket)] = n
        times = []
        for i in range(max(0, warmup) + max(1, repeats)):
            _, seconds = executor.decode(tokens, positions)
            if i >= warmup:
                times.append(seconds)
        by_bucket[str(bucket)] = statistics.median(times)
    return {"decode_device_s": by_bucket, "decode_seqs": fills, "repeats": max(1, repeats),
            "positions": "running slot i of n at (i + 1) x max_model_len // (n + 1), the rest of the bucket at 0"}


def probe_fill(buckets: list[int]) -> dict[int, int]:
    """{bucket: the sequences the device probe runs in it}: midway between the bucket below (0 for
    the first) and the bucket, rounded up (1 -> 1, 2 -> 2, 4 -> 3, 8 -> 6, 16 -> 12, 64 after 48 -> 56)."""
    out, below = {}, 0
    for b in buckets:
        out[b] = (below + 1 + b) // 2
        below = b
    return out


def probe_positions(bucket: int, max_model_len: int) -> list[int]:
    """The device probe's positions: slot i of ``bucket`` at (i + 1) x max_model_len // (bucket + 1),
    spread over the cache, distinct while bucket < max_model_len."""
    return [min(max_model_len - 1, (i + 1) * max_model_len // (bucket + 1)) for i in range(bucket)]


class _Server:
    """One run's state; ``run`` loops over iterations of the configured policy."""

    def __init__(self, requests, executor, config, clock, sleep, deadline_s, seed, progress):
        self.requests, self.ex, self.cfg = requests, executor, config
        self.clock, self.sleep, self.deadline_s, self.progress = clock, sleep, deadline_s, progress
        order = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
        self.seqs = {r.request_id: _Seq(r, prompt_ids_for(r, executor.vocab, seed)) for r in order}
        self.waiting: deque[_Seq] = deque(self.seqs[r.request_id] for r in order)
        self.running: list[_Seq] = []  # admission order
        self.slots: list[_Seq] = []  # slots[i] is the sequence in slot i (compact)
        self.free = config.num_blocks
        self.iterations: list[dict] = []
        self.preemptions = 0
        self.max_running = 0
        self.stopped = False
        self.t0 = 0.0

    def _now(self) -> float:
        return self.clock() - self.t0

    # -- shared pieces
    def _leave(self, seq: _Seq) -> None:
        """Free the sequence's blocks and slot; the last slot's sequence moves into the hole."""
        self.free += seq.blocks
        seq.blocks = 0
        hole, last = seq.slot, len(self.slots) - 1
        if hole != last:
            moved = self.slots[last]
            self.ex.move(last, hole, moved.kv_tokens)
            moved.slot = hole
            self.slots[hole] = moved
        self.slots.pop()
        seq.slot = -1
        self.running.remove(seq)

    def _preempt_latest(self, record: dict) -> _Seq:
        """Recompute preemption of the most recently admitted running sequence."""
        victim = self.running[-1]
        self._leave(victim)
        victim.kv_tokens = 0
        victim.decoding = False
        victim.preemptions += 1
        self.waiting.appendleft(victim)
        record["preempted"] += 1
        self.preemptions += 1
        return victim

    def _admit(self, seq: _Seq, now: float, blocks: int) -> None:
        self.waiting.popleft()
        seq.blocks = blocks
        self.free -= blocks
        seq.slot = len(self.slots)
        self.slots.append(seq)
        self.running.append(seq)
        if seq.first_scheduled_s is None:
            seq.first_scheduled_s = now

    def _head_arrived(self, now: float) -> bool:
        return bool(self.waiting) and self.waiting[0].req.arrival_s <= now

    @staticmethod
    def _token(seq: _Seq, token: int, t_end: float) -> None:
        seq.generated.append(int(token))
        seq.decoding = True
        if seq.first_token_s is None:
            seq.first_token_s = t_end

    # -- the loop
    def run(self) -> ServeResult:
        step = {"prefill-first": self._prefill_first, "chunked": self._chunked}[self.cfg.policy]
        self.t0 = self.clock()
        while self.waiting or self.running:
            now = self._now()
            if self.deadline_s is not None and now >= self.deadline_s and not self.stopped:
                self.stopped = True
                if self.progress:
                    self.progress(f"deadline {self.deadline_s:.1f} s reached: {len(self.waiting)} request(s) "
                                  "not admitted")
            if not self.running and (self.stopped or not self._head_arrived(now)):
                if self.stopped or not self.waiting:
                    break
                target = self.t0 + self.waiting[0].req.arrival_s  # idle: wait for the next arrival
                while (left := target - self.clock()) > 0:
                    self.sleep(left)
                continue
            record = {"iteration": len(self.iterations), "t_start_s": now, "preempted": 0}
            in_pass, t_end = step(now, record)
            self.max_running = max(self.max_running, len(self.running))
            finished = sorted((seq for seq in in_pass if seq.done), key=lambda q: -q.slot)
            for seq in finished:  # highest slot first: a moved sequence is never one that leaves
                seq.finish_s = t_end
                self._leave(seq)
            if finished:
                self.ex.left(len(finished))
            record.update(t_end_s=t_end, finished=len(finished), running=len(self.running),
                          used_blocks=self.cfg.num_blocks - self.free)
            self.iterations.append(record)
        wall_s = self._now()
        records = [_request_record(self.seqs[r.request_id]) for r in sorted(self.requests, key=lambda r: r.request_id)]
        return ServeResult(records, self.iterations, self.t0, wall_s, self.deadline_s, self.stopped,
                           self.preemptions, self.max_running)

    def _decode_blocks(self, record: dict) -> None:
        """Every running sequence whose KV grows into a new block takes one; while more are needed
        than are free, preempt the most recently admitted (prefill-first, step 3)."""
        bs = self.cfg.block_size
        needy = [seq for seq in self.running if blocks_for(seq.kv_tokens + 1, bs) > seq.blocks]
        while len(needy) > self.free:
            victim = self._preempt_latest(record)
            if victim in needy:
                needy.remove(victim)
        for seq in needy:
            seq.blocks += 1
            self.free -= 1

    def _prefill_first(self, now: float, record: dict):
        cfg, bs = self.cfg, self.cfg.block_size
        admitted = []
        if not self.stopped:
            tokens = taken = 0
            for head in self.waiting:  # FIFO from the head, no skipping
                if head.req.arrival_s > now or len(self.running) + len(admitted) >= cfg.max_num_seqs:
                    break
                n, need = head.prefill_tokens, blocks_for(head.prefill_tokens, bs)
                if need > self.free - taken or tokens + n > cfg.batched_tokens:
                    break
                admitted.append(head)
                tokens += n
                taken += need
        if admitted:
            for seq in admitted:
                self._admit(seq, now, blocks_for(seq.prefill_tokens, bs))
            items = [(seq.slot, seq.prefill_ids(), 0) for seq in admitted]
            out, device_s = self.ex.prefill(items)
            t_end = self._now()
            for seq, tok in zip(admitted, out):
                seq.kv_tokens = seq.prefill_tokens
                seq.prefilled_tokens += seq.prefill_tokens
                self._token(seq, tok, t_end)
            lens = [len(ids) for _, ids, _ in items]
            record.update(kind="prefill", decode_seqs=0, prefill_seqs=len(items), prefill_tokens=sum(lens),
                          prefill_pairs=sum(p * (p + 1) // 2 for p in lens), kv_tokens=sum(lens), bucket="",
                          device_s=device_s)
            return admitted, t_end
        self._decode_blocks(record)
        n = len(self.slots)
        if n == 0:  # cannot happen: the last sequence alone always fits (config.check)
            raise RuntimeError("preemption emptied the server")
        positions = [seq.kv_tokens for seq in self.slots]
        out, device_s = self.ex.decode([seq.generated[-1] for seq in self.slots], positions)
        t_end = self._now()
        for seq, tok in zip(self.slots, out):
            seq.kv_tokens += 1
            self._token(seq, tok, t_end)
        record.update(kind="decode", decode_seqs=n, prefill_seqs=0, prefill_tokens=0, prefill_pairs=0,
                      kv_tokens=sum(positions) + n, bucket=bucket_for(n, self.ex.buckets), device_s=device_s)
        return list(self.slots), t_end

    def _chunked(self, now: float, record: dict):
        cfg, bs = self.cfg, self.cfg.block_size
        budget = cfg.batched_tokens
        scheduled: list[tuple[_Seq, int]] = []
        for seq in list(self.running):  # running first, in admission order
            if seq.slot < 0:  # preempted in this iteration: so is every later one
                break
            t = 1 if seq.decoding else min(seq.prefill_tokens - seq.kv_tokens, budget)
            if t == 0:
                continue
            need = blocks_for(seq.kv_tokens + t, bs) - seq.blocks
            while need > self.free and seq.slot >= 0:
                self._preempt_latest(record)
            if seq.slot < 0:
                break
            seq.blocks += need
            self.free -= need
            scheduled.append((seq, t))
            budget -= t
        graph_slots = len(self.slots)  # the decode step runs over these (a partial prefill's slot too)
        if not record["preempted"] and not self.stopped:  # then waiting requests, FIFO, chunked
            while self._head_arrived(now) and len(self.running) < cfg.max_num_seqs and budget > 0:
                head = self.waiting[0]
                t = min(head.prefill_tokens, budget)
                if blocks_for(t, bs) > self.free:
                    break
                self._admit(head, now, blocks_for(t, bs))
                scheduled.append((head, t))
                budget -= t
        if not scheduled:  # cannot happen: one running sequence alone always fits (config.check)
            raise RuntimeError("nothing to schedule")
        decoding = [seq for seq, _ in scheduled if seq.decoding]
        chunks = [(seq, t) for seq, t in scheduled if not seq.decoding]
        tokens, positions = [], []
        if decoding:
            view = self.slots[:graph_slots]
            tokens = [seq.generated[-1] if seq.decoding else 0 for seq in view]
            positions = [seq.kv_tokens for seq in view]
        items = [(seq.slot, seq.prefill_ids()[seq.kv_tokens:seq.kv_tokens + t], seq.kv_tokens) for seq, t in chunks]
        decode_context = sum(seq.kv_tokens + 1 for seq in decoding)
        dec_out, chunk_out, device_s = self.ex.mixed(tokens, positions, items)
        t_end = self._now()
        for seq in decoding:
            seq.kv_tokens += 1
            self._token(seq, dec_out[seq.slot], t_end)
        in_pass = list(decoding)
        for (seq, t), tok in zip(chunks, chunk_out):
            seq.kv_tokens += t
            seq.prefilled_tokens += t
            if seq.kv_tokens == seq.prefill_tokens:  # the prefill is complete: its next token
                self._token(seq, tok, t_end)
                in_pass.append(seq)
        starts = [start for _, _, start in items]
        lens = [t for _, t in chunks]
        record.update(
            kind="mixed" if decoding and chunks else ("decode" if decoding else "prefill"),
            decode_seqs=len(decoding), prefill_seqs=len(chunks), prefill_tokens=sum(lens),
            prefill_pairs=sum(t * s + t * (t + 1) // 2 for t, s in zip(lens, starts)),
            kv_tokens=decode_context + sum(s + t for t, s in zip(lens, starts)),
            bucket=bucket_for(graph_slots, self.ex.buckets) if decoding else "", device_s=device_s)
        return in_pass, t_end


def _request_record(seq: _Seq) -> dict:
    r = seq.req
    done = seq.finish_s is not None
    tpot = None
    if done and r.gen_tokens > 1:
        tpot = (seq.finish_s - seq.first_token_s) / (r.gen_tokens - 1)
    return {
        "request_id": r.request_id, "arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
        "gen_tokens": r.gen_tokens, "first_token_s": seq.first_token_s, "finish_s": seq.finish_s,
        "ttft_s": None if seq.first_token_s is None else seq.first_token_s - r.arrival_s,
        "tpot_s": tpot, "e2e_s": seq.finish_s - r.arrival_s if done else None,
        "preemptions": seq.preemptions, "first_scheduled_s": seq.first_scheduled_s,
        "prefilled_tokens": seq.prefilled_tokens, "tokens": list(seq.generated),
    }


# ---- a virtual clock: the policy without a model ------------------------------------------
class VirtualClock:
    """A clock that moves only when told: ``advance`` (a pass) or ``sleep`` (waiting)."""

    def __init__(self, start: float = 0.0):
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    sleep = advance


class CostExecutor:
    """Runs nothing: each pass advances a VirtualClock by a cost function's seconds.

    ``prefill_s(lengths, starts)`` (tokens of each sequence in the pass, and the cached tokens
    before them: 0 unless a chunk continues) and ``decode_s(n, bucket, context_tokens)`` (n slots
    in the step, context = the tokens each slot attends to, its position + 1) give a pass's time;
    ``mixed_s(decode args, prefill args)`` a chunked iteration's (default: the sum). Tokens are a
    fixed function of the input (no model). With the simulator's step model as the cost
    functions, ``serve`` gives the exact schedule the simulator must reproduce.
    """

    def __init__(self, clock: VirtualClock, prefill_s, decode_s, max_num_seqs: int, vocab: int = 1000,
                 mixed_s=None, leave_s: float = 0.0):
        self.clock, self.prefill_s, self.decode_s, self.mixed_s = clock, prefill_s, decode_s, mixed_s
        self.leave_s = leave_s  # host time each sequence that finishes adds after its pass
        self.buckets = capture_sizes(max_num_seqs)
        self.vocab = vocab
        self.moves: list[tuple[int, int, int]] = []

    def _prefill_args(self, items):
        return [len(ids) for _, ids, _ in items], [start for _, _, start in items]

    def _decode_args(self, tokens, positions):
        n = len(tokens)
        return n, bucket_for(n, self.buckets), [p + 1 for p in positions]

    def _tokens(self, items):
        return [int(ids[-1]) * 7 % self.vocab for _, ids, _ in items]

    def prefill(self, items):
        seconds = self.prefill_s(*self._prefill_args(items))
        self.clock.advance(seconds)
        return self._tokens(items), seconds

    def decode(self, tokens, positions):
        seconds = self.decode_s(*self._decode_args(tokens, positions))
        self.clock.advance(seconds)
        return [(t * 7 + 1) % self.vocab for t in tokens], seconds

    def mixed(self, tokens, positions, items):
        if self.mixed_s is not None:
            seconds = self.mixed_s(self._decode_args(tokens, positions) if tokens else None,
                                   self._prefill_args(items) if items else None)
        else:
            seconds = (self.decode_s(*self._decode_args(tokens, positions)) if tokens else 0.0) + (
                self.prefill_s(*self._prefill_args(items)) if items else 0.0)
        self.clock.advance(seconds)
        return [(t * 7 + 1) % self.vocab for t in tokens], self._tokens(items), seconds

    def left(self, n: int) -> None:
        self.clock.advance(self.leave_s * n)

    def move(self, src: int, dst: int, kv_tokens: int) -> None:
        self.moves.append((src, dst, kv_tokens))


# ---- the model on a device ----------------------------------------------------------------
def _rope(x, cos, sin):
    """x * cos + rotate_half(x) * sin (the graph engine's RoPE, half-split layout)."""
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def check_servable(s, max_model_len: int, name: str = "the model") -> None:
    """Refuse (one line) a model the loop cannot run as ``roofline predict`` prices it: the loop is
    a dense decoder with full attention (RMSNorm, RoPE, gated SwiGLU or a plain GELU MLP, q/k
    biases, q/k norms, an output bias). Mixture-of-experts feed-forwards, latent attention and
    attention sinks it does not have; a sliding window narrower than the slot it does not apply,
    so such a model is served only with ``max_model_len`` <= its narrowest window (where the window
    never drops a token and attention is full)."""
    if s.experts:
        what = "a mixture of experts"
    elif s.mla:
        what = "multi-head latent attention"
    elif s.sinks:
        what = "attention sinks"
    else:
        narrowest = min((w for w in s.windows if w), default=0)
        if narrowest and narrowest < max_model_len:
            raise RooflineError(f"the serving loop runs full attention only: {name} has a {narrowest}-token sliding "
                                f"window, narrower than max_model_len {max_model_len}; serve it with "
                                f"--max-model-len {narrowest} or less (the window then drops nothing)")
        return
    raise RooflineError(f"the serving loop runs dense decoders only: {name} ({s.model_type or 'config'}) has {what}; "
                        "`roofline simulate` prices it, but `roofline serve` cannot run it")


def static_cache_shape(s, max_num_seqs: int, max_model_len: int, spare: bool = True) -> tuple:
    """The executor's K (and V) cache: (layers, slots, kv_heads, rows, head_dim), ``max_num_seqs``
    slots plus the ``spare`` one prefill graphs pad into, ``max_model_len`` rounded up to
    graph_engine.RING_ALIGN rows."""
    from calibrate.graph_engine import aligned

    return (s.layers, max_num_seqs + int(spare), s.kv_heads, aligned(max_model_len), s.head_dim)


def _qk_norm(qk, lw, s):
    """Qwen3's q/k RMSNorm over each head, q heads then K/V heads in one call (as the graph engine)."""
    import torch
    import torch.nn.functional as F

    if lw.qk_norm_w is None:  # built on the first (eager, warm-up) call, reused by the graphs
        lw.qk_norm_w = torch.cat([lw.q_norm.expand(s.heads, s.head_dim), lw.k_norm.expand(s.kv_heads, s.head_dim)])
    return F.rms_norm(qk, (s.head_dim,), None, s.eps) * lw.qk_norm_w


def decode_slots(w, s, bufs: "_Buffers", batch: int) -> None:
    """One decode step of slots 0..batch-1, each at its own position; writes next tokens to bufs.out.

    As graph_engine.decode_step, with per-slot positions: RoPE as one (hd x hd) matrix per slot,
    the K/V of each slot written at its position (scatter), and a validity mask per slot over
    all T cache positions.
    """
    import torch
    import torch.nn.functional as F

    from calibrate.graph_engine import _mlp, _rms, rope_matrix

    total = bufs.key_pos.shape[0]
    group = s.heads // s.kv_heads
    tok, pos = bufs.inp[0, :batch], bufs.inp[1, :batch]
    x = F.embedding(tok, w.embed)  # (B, H)
    cos = bufs.cos.index_select(0, pos).unsqueeze(1)  # (B, 1, hd)
    sin = bufs.sin.index_select(0, pos).unsqueeze(1)
    rot = rope_matrix(cos, sin, bufs.eye, bufs.swap)  # (B, hd, hd)
    neg_inf = torch.full((), float("-inf"), device=x.device, dtype=x.dtype)
    zero = torch.zeros((), device=x.device, dtype=x.dtype)
    bias = torch.where(bufs.key_pos.unsqueeze(0) <= pos.unsqueeze(1), zero, neg_inf)  # (B, T)
    bias = bias.view(batch, 1, 1, total).expand(batch, s.kv_heads, 1, total).reshape(batch * s.kv_heads, 1, total)
    where = pos.view(batch, 1, 1, 1).expand(batch, s.kv_heads, 1, s.head_dim)
    scale = s.head_dim ** -0.5
    for i, lw in enumerate(w.layers):
        qkv = F.linear(_rms(x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)  # (B, q+2kv)
        qk = qkv[:, : s.q_dim + s.kv_dim].reshape(batch, s.heads + s.kv_heads, s.head_dim)
        if s.qk_norm:
            qk = _qk_norm(qk, lw, s)
        qk = torch.bmm(qk, rot)
        q = qk[:, : s.heads].reshape(batch * s.kv_heads, group, s.head_dim)
        k = qk[:, s.heads:].unsqueeze(2)  # (B, kv, 1, hd)
        v = qkv[:, s.q_dim + s.kv_dim:].reshape(batch, s.kv_heads, 1, s.head_dim)
        ck, cv = bufs.cache_k[i, :batch], bufs.cache_v[i, :batch]  # (B, kv, T, hd)
        ck.scatter_(2, where, k)
        cv.scatter_(2, where, v)
        scores = torch.baddbmm(bias, q, ck.view(batch * s.kv_heads, total, s.head_dim).transpose(1, 2), alpha=scale)
        probs = torch.softmax(scores, dim=-1)
        attn = torch.bmm(probs, cv.view(batch * s.kv_heads, total, s.head_dim))  # (B*kv, g, hd)
        x = x + F.linear(attn.view(batch, s.q_dim), lw.wo, lw.bo)
        x = _mlp(x, lw, s)
    logits = F.linear(_rms(x, w.final_norm, s.eps), w.lm_head)
    bufs.out[:batch].copy_(logits.argmax(dim=-1))


def varlen_kernel():
    """(torch's varlen_attn, its causal keyword, its GQA keyword) as this torch spells them, or
    None where it has no varlen attention (raises ImportError where the module is missing)."""
    import inspect

    from torch.nn.attention.varlen import varlen_attn

    params = inspect.signature(varlen_attn).parameters
    if "is_causal" in params:  # torch 2.10-2.11
        causal = {"is_causal": True}
    elif "window_size" in params:  # later: (-1, 0) is causal
        causal = {"window_size": (-1, 0)}
    else:
        return None
    return varlen_attn, causal, ({"enable_gqa": True} if "enable_gqa" in params else {})


def chunk_attention(varlen_kv, cache_k, cache_v, slot, q, k, v, cu_q, cu_k, max_q: int, max_k: int, group: int = 1):
    """One layer's attention in a chunk graph (``ModelExecutor._chunk_graph_body``): the chunk's
    slot's T cache rows of this layer's ``cache_k``/``cache_v`` (slots, kv_heads, T, hd), picked by
    the device index ``slot`` and copied out, placed before the pass's own K/V, repeated ``group``
    times per head first where the kernel needs it; then ``varlen_kv(q, keys, values, cu_q, cu_k,
    max_q, max_k)``."""
    import torch

    ck = cache_k.index_select(0, slot)[0].transpose(0, 1)  # (T, kv_heads, hd)
    cv = cache_v.index_select(0, slot)[0].transpose(0, 1)
    if group > 1:
        ck, cv = ck.repeat_interleave(group, dim=1), cv.repeat_interleave(group, dim=1)
    return varlen_kv(q, torch.cat([ck, k]), torch.cat([cv, v]), cu_q, cu_k, max_q, max_k)


def sdpa_varlen_kv(q, k, v, cu_q, cu_k, max_q=None, max_k=None):
    """varlen attention with separate query and key offsets as a loop of SDPA calls: segment i's
    queries see its keys causally from the bottom right (query r of nq sees keys 0..nk - nq + r),
    K/V heads repeated for GQA, rows outside every segment left zero. The CPU's stand-in for the
    flash call the chunk graphs make (tests, the chunk probe on a CPU)."""
    import torch
    import torch.nn.functional as F

    group = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    qs, ks = [int(x) for x in cu_q], [int(x) for x in cu_k]
    for a, b, c, d in zip(qs, qs[1:], ks, ks[1:]):
        if b > a:
            nq, nk = b - a, d - c
            keys, queries = torch.arange(nk, device=q.device), torch.arange(nq, device=q.device)
            mask = keys.unsqueeze(0) <= (nk - nq + queries).unsqueeze(1)
            qi = q[a:b].transpose(0, 1).unsqueeze(0)
            ki, vi = (t[c:d].repeat_interleave(group, dim=1).transpose(0, 1).unsqueeze(0) for t in (k, v))
            out[a:b] = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask)[0].transpose(0, 1)
    return out


@dataclass
class _Packed:
    """A prefill pass's sequences packed one after another (device tensors, host lists)."""

    ids: object  # (N,) token ids
    positions: object  # (N,) position of each token in its sequence
    slot_of: object  # (N,) the slot of each token's sequence
    cu: object  # (k + 1,) int64: cumulated lengths, 0 first
    lens: list
    starts: list  # where each sequence starts in the packed tensors
    max_len: int
    cu32: object = None  # cu as int32 (varlen attention)
    offsets: list = field(default_factory=list)  # cached tokens before each chunk (0: a whole prefill)
    slots: list = field(default_factory=list)


@dataclass
class _Buffers:
    cache_k: object  # (L, S, kv_heads, T, hd)
    cache_v: object
    cos: object  # (T, hd)
    sin: object
    eye: object
    swap: object
    key_pos: object  # (T,)
    inp: object  # (2, S) int64 on the device: row 0 input tokens, row 1 positions
    out: object  # (S,) int64: next tokens
    host_inp: object  # (2, S) int64 on the host (pinned on CUDA)


class ModelExecutor:
    """The dense decoder with a static KV cache of ``max_num_seqs`` slots x ``max_model_len``.

    Random weights from graph_engine.random_weights(seed), or ``weights`` given (tests).
    """

    def __init__(self, config: dict, device: str = "cuda", max_num_seqs: int = 64, max_model_len: int = 2048,
                 seed: int = 0, dtype: str = "bfloat16", use_graph: bool | None = None, weights=None,
                 max_num_batched_tokens: int | None = None, prefill_graphs: bool | None = None,
                 spin_wait: bool = False, chunk_graphs: bool = True):
        import torch

        from calibrate.graph_engine import Shapes, aligned, random_weights, rope_swap, rope_tables

        # spin_wait: the host polls the pass's end event instead of blocking in the token sync (a
        # host that blocks may sleep, and on some machines wakes the later the longer it slept)
        self.spin_wait = spin_wait

        self.device = torch.device(device)
        if self.device.type == "cuda":
            # cuDNN SDPA builds a plan per new sequence length (35-70 ms of host time each on the
            # H200, docs/calibration-runs.md); prompts of every length would pay it over and over
            torch.backends.cuda.enable_cudnn_sdp(False)
        self.dtype = getattr(torch, dtype)
        self.shapes = s = Shapes.from_config(config)
        check_servable(s, max_model_len, str(config.get("_name_or_path") or "the model"))
        self.vocab = s.vocab
        self.max_num_seqs, self.max_model_len = max_num_seqs, max_model_len
        # cache rows per slot: max_model_len rounded up to a multiple of 8, the rest masked (a score
        # row of another length runs cuBLAS's GEMV fallback, 4-10x slower: graph_engine.RING_ALIGN)
        self.cache_len = aligned(max_model_len)
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        self.buckets = capture_sizes(max_num_seqs)
        self.weights = weights if weights is not None else random_weights(s, self.device, self.dtype, seed)
        dev, dt = self.device, self.dtype
        self.max_num_batched_tokens = max_num_batched_tokens or max(max_model_len, 2048)
        # whole-prompt prefill passes replayed as CUDA graphs, padded to a token bucket (CUDA and
        # varlen attention only; decided once the attention backend is known, below); padding
        # tokens write their K/V into one spare slot past the last, which nothing reads
        want_prefill_graphs = self.use_graph if prefill_graphs is None else prefill_graphs
        shape = static_cache_shape(s, max_num_seqs, max_model_len, spare=bool(want_prefill_graphs))
        cos, sin = rope_tables(s, self.cache_len, dev, dt)
        cuda = self.device.type == "cuda"
        self.bufs = _Buffers(
            cache_k=torch.zeros(shape, dtype=dt, device=dev), cache_v=torch.zeros(shape, dtype=dt, device=dev),
            cos=cos, sin=sin, eye=torch.eye(s.head_dim, device=dev, dtype=dt), swap=rope_swap(s.head_dim, dev, dt),
            key_pos=torch.arange(self.cache_len, device=dev),
            inp=torch.zeros(2, max_num_seqs, dtype=torch.long, device=dev),
            out=torch.zeros(max_num_seqs, dtype=torch.long, device=dev),
            host_inp=torch.zeros(2, max_num_seqs, dtype=torch.long, pin_memory=cuda),
        )
        self.graphs: dict[int, object] = {}
        self.prefill_attention_note = ""
        self.prefill_attention = self._choose_prefill_attention()
        self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
        self.prefill_graphs = bool(want_prefill_graphs and self.use_graph and self.prefill_attention == "varlen")
        self.prefill_buckets: list[int] = []
        self.prefill_graph_note = ""
        self.prefill_graph_of: dict[int, object] = {}  # bucket -> CUDA graph (or, in tests, a callable)
        # chunk graphs: a prefill whose first sequence is a chunk after cached tokens (policy chunked)
        self.chunk_graph_of: dict[int, object] = {}
        self.chunk_graph_note = ""
        self.chunk_graphs = False
        self.chunk_gqa = "native"  # K/V heads as stored; "repeated": to every query head first
        if self.prefill_graphs:
            self._prefill_buffers()
            if chunk_graphs:
                notes = []
                for self.chunk_gqa in ("native", "repeated"):
                    notes.append(self._check_chunk_attention())
                    if not notes[-1]:
                        break
                self.chunk_graphs = not notes[-1]
                self.chunk_graph_note = "; ".join(n for n in notes if n)

    def _prefill_buffers(self) -> None:
        """The static buffers prefill graphs read and write (the cache's spare slot is made in __init__)."""
        import torch

        self.prefill_buckets = prefill_token_buckets(self.max_num_batched_tokens)
        top, k = self.prefill_buckets[-1], self.max_num_seqs
        # one int64 row, host (pinned on CUDA) and device: ids | positions | slots (top each) | cu (k + 2)
        # | last (k) | and for a chunk after cached tokens: cu_q (k + 3) | cu_k (k + 3) | its slot (1)
        self._pf_layout = (top, k)
        size = 3 * top + 4 * k + 9
        self._pf_host = torch.zeros(size, dtype=torch.long, pin_memory=self.device.type == "cuda")
        self._pf_dev = torch.zeros(size, dtype=torch.long, device=self.device)
        self._pf_out = torch.zeros(k, dtype=torch.long, device=self.device)

    def _pf_fields(self) -> dict:
        """Where each field of the prefill graphs' static row starts and ends."""
        top, k = self._pf_layout
        bounds, at = {}, 0
        for name, n in (("ids", top), ("positions", top), ("slots", top), ("cu", k + 2), ("last", k),
                        ("cu_q", k + 3), ("cu_k", k + 3), ("chunk_slot", 1)):
            bounds[name] = slice(at, at + n)
            at += n
        return bounds

    # -- sizes
    @property
    def kv_bytes_per_token(self) -> int:
        s = self.shapes
        return 2 * s.layers * s.kv_dim * self.bufs.cache_k.element_size()

    @property
    def static_kv_bytes(self) -> int:
        return 2 * self.bufs.cache_k.numel() * self.bufs.cache_k.element_size()

    @property
    def weight_bytes(self) -> int:
        seen, total = set(), 0
        w = self.weights
        tensors = [w.embed, w.final_norm, w.lm_head]
        for lw in w.layers:
            tensors += [lw.in_norm, lw.wqkv, lw.bqkv, lw.wo, lw.bo, lw.q_norm, lw.k_norm, lw.post_norm, lw.wgu, lw.wdown]
        for t in tensors:
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * t.element_size()
        return total

    # -- passes
    def _timed(self, fn):
        if self._events is None:
            t0 = time.perf_counter()
            result = fn()
            return result, time.perf_counter() - t0
        start, end = self._events
        start.record()
        result = fn()
        end.record()
        if self.spin_wait:
            while not end.query():
                pass
        return result, end

    def _pack(self, items) -> "_Packed":
        """[(slot, ids, start)] -> the packed device tensors of one prefill pass (token j of an
        item sits at position start + j of its slot)."""
        import numpy as np
        import torch

        lens = [len(ids) for _, ids, _ in items]
        offsets = [int(start) for _, _, start in items]
        ids = torch.from_numpy(np.concatenate([np.asarray(x, dtype=np.int64) for _, x, _ in items]))
        positions = torch.from_numpy(np.concatenate([np.arange(o, o + n, dtype=np.int64) for o, n in zip(offsets, lens)]))
        slots = [int(slot) for slot, _, _ in items]
        slot_of = torch.from_numpy(np.repeat(np.array(slots, dtype=np.int64), lens))
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        host = torch.cat([ids, positions, slot_of, torch.from_numpy(cu)])
        if self.device.type == "cuda":
            host = host.pin_memory()
        dev = host.to(self.device, non_blocking=True)
        total = len(ids)
        return _Packed(ids=dev[:total], positions=dev[total:2 * total], slot_of=dev[2 * total:3 * total],
                       cu=dev[3 * total:], lens=lens, starts=cu[:-1].tolist(), max_len=max(lens),
                       offsets=offsets, slots=slots)

    def prefill(self, items):
        """One packed prefill pass over [(slot, ids, start)]; returns (next token per item, device s)."""
        import torch

        if self._graph_fits(items):
            with torch.inference_mode():
                runner = self._stage_graph(items)
                _, marker = self._timed(getattr(runner, "replay", runner))
                tokens = self._pf_out[:len(items)].tolist()  # the host sync
            return tokens, self._seconds(marker)
        seq = self._pack(items)
        with torch.inference_mode():
            out, marker = self._timed(lambda: self._prefill(seq))
            tokens = out.tolist()  # the host sync
        return tokens, self._seconds(marker)

    def _prefill(self, seq: "_Packed"):
        """The eager prefill of a packed pass (whole prompts or chunks after cached tokens)."""
        return self._forward(seq.ids, seq.positions, seq.slot_of, seq.cu[1:] - 1,
                             lambda q, k, v, layer: self._attend(q, k, v, seq, layer))

    def _forward(self, ids, positions, slot_of, last, attend, expand_gqa: bool = True):
        """The decoder over packed tokens: every linear on all of them, RoPE at ``positions``, K/V
        written into the cache at (``slot_of``, ``positions``), ``attend(q, k, v, layer)`` (K/V
        heads repeated for GQA unless ``expand_gqa`` is False), logits of the rows ``last``;
        returns their argmax."""
        import torch.nn.functional as F

        from calibrate.graph_engine import _mlp, _rms

        s, w, b = self.shapes, self.weights, self.bufs
        total, group = ids.shape[0], s.heads // s.kv_heads
        x = F.embedding(ids, w.embed)  # (N, H)
        cos, sin = b.cos[positions].unsqueeze(1), b.sin[positions].unsqueeze(1)  # (N, 1, hd)
        for i, lw in enumerate(w.layers):
            qkv = F.linear(_rms(x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)
            q, k, v = qkv.split([s.q_dim, s.kv_dim, s.kv_dim], dim=-1)
            q, k = q.view(total, s.heads, s.head_dim), k.view(total, s.kv_heads, s.head_dim)
            if s.qk_norm:
                q, k = _rms(q, lw.q_norm, s.eps), _rms(k, lw.k_norm, s.eps)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            v = v.view(total, s.kv_heads, s.head_dim)
            b.cache_k[i][slot_of, :, positions] = k
            b.cache_v[i][slot_of, :, positions] = v
            if group > 1 and expand_gqa:  # GQA expanded here, so every attention backend takes it
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            attn = attend(q, k, v, i)  # (N, heads, hd)
            x = x + F.linear(attn.reshape(total, s.q_dim), lw.wo, lw.bo)
            x = _mlp(x, lw, s)
        logits = F.linear(_rms(x.index_select(0, last), w.final_norm, s.eps), w.lm_head)
        return logits.argmax(dim=-1)

    def _graph_fits(self, items) -> bool:
        """Whether a prefill graph runs ``items``: at most max_num_seqs sequences and the largest
        bucket's tokens, and either whole prompts or (with chunk graphs) one chunk after cached
        tokens first, then whole prompts."""
        if not self.prefill_graph_of or len(items) > self.max_num_seqs \
                or sum(len(ids) for _, ids, _ in items) > self.prefill_buckets[-1]:
            return False
        if any(int(start) for _, _, start in items[1:]):
            return False
        return not int(items[0][2]) or bool(self.chunk_graph_of)

    def _stage_graph(self, items):
        """Stage ``items`` (``_graph_fits``) and return the graph that runs them."""
        bucket = self._stage_prefill(items)
        return (self.chunk_graph_of if int(items[0][2]) else self.prefill_graph_of)[bucket]

    def _stage_prefill(self, items) -> int:
        """Write a prefill's packed inputs, padded to its token bucket, into the static buffer the
        prefill graphs read (one host-to-device copy); returns the bucket. A first item with
        ``start`` c > 0 (a chunk of t tokens after c cached ones) also gets the chunk graph's
        offsets: its queries attend to its slot's cache rows [0, c + t) (cu_k's first sequence, the
        cache's T rows placed before the pass's own keys), then an empty sequence skips the rest of
        those T rows and the chunk's own fresh keys, then the whole prompts attend to themselves."""
        import numpy as np

        top, k = self._pf_layout
        f = self._pf_fields()
        lens = [len(ids) for _, ids, _ in items]
        starts = [int(start) for _, _, start in items]
        total, n = sum(lens), len(items)
        bucket = bucket_for(total, self.prefill_buckets)
        h = self._pf_host.numpy()
        h[:total] = np.concatenate([np.asarray(x, dtype=np.int64) for _, x, _ in items])
        h[total:bucket] = 0
        h[top:top + total] = np.concatenate([np.arange(c, c + m, dtype=np.int64) for c, m in zip(starts, lens)])
        h[top + total:top + bucket] = 0
        h[2 * top:2 * top + total] = np.repeat(np.array([int(slot) for slot, _, _ in items], dtype=np.int64), lens)
        h[2 * top + total:2 * top + bucket] = self.max_num_seqs  # the spare slot
        cu = h[3 * top:3 * top + k + 2]
        cu[0] = 0
        cu[1:n + 1] = np.cumsum(lens)
        cu[n + 1:] = bucket  # the padding as one more sequence, then empty ones
        last = h[f["last"]]
        last[:n] = cu[1:n + 1] - 1
        last[n:] = 0
        if starts[0]:
            T, first = self.cache_len, lens[0]
            cu_q, cu_k = h[f["cu_q"]], h[f["cu_k"]]
            cu_q[0] = 0
            cu_q[1] = first
            cu_q[2:] = cu[1:]  # the empty sequence, then the whole prompts, the padding, empty ones
            cu_k[0] = 0
            cu_k[1] = starts[0] + first
            cu_k[2:] = cu_q[2:] + T
            h[f["chunk_slot"]] = int(items[0][0])
        self._pf_dev.copy_(self._pf_host, non_blocking=True)
        return bucket

    def _prefill_graph_body(self, bucket: int) -> None:
        """The whole-prompt prefill of ``bucket`` packed tokens read from the static buffer (what a
        prefill graph replays): ``_forward`` with one varlen attention call of max length ``bucket``."""
        import torch

        top, k = self._pf_layout
        f, row = self._pf_fields(), self._pf_dev
        cu = row[f["cu"]].to(torch.int32)
        out = self._forward(row[:bucket], row[top:top + bucket], row[2 * top:2 * top + bucket], row[f["last"]],
                            lambda q, kk, v, layer: self._varlen_attention(q, kk, v, cu, bucket))
        self._pf_out.copy_(out)

    def _chunk_graph_body(self, bucket: int) -> None:
        """A prefill whose first sequence is a chunk after cached tokens (what a chunk graph
        replays): ``_forward`` with K/V heads not repeated and one varlen call whose keys are the
        chunk's slot's T cache rows (copied out by a device index) followed by the pass's own, with
        separate query and key offsets (``_stage_prefill``); causal from the bottom right, so the
        chunk's token j at position c + j sees cache rows 0..c + j."""
        import torch

        top, k = self._pf_layout
        f, row, b = self._pf_fields(), self._pf_dev, self.bufs
        cu_q, cu_k = row[f["cu_q"]].to(torch.int32), row[f["cu_k"]].to(torch.int32)
        slot = row[f["chunk_slot"]]
        span = self.cache_len + bucket

        group = self.shapes.heads // self.shapes.kv_heads if self.chunk_gqa == "repeated" else 1

        def attend(q, kk, v, layer):
            return chunk_attention(self._varlen_kv, b.cache_k[layer], b.cache_v[layer], slot, q, kk, v, cu_q, cu_k,
                                   bucket, span, group)

        out = self._forward(row[:bucket], row[top:top + bucket], row[2 * top:2 * top + bucket], row[f["last"]],
                            attend, expand_gqa=group > 1)
        self._pf_out.copy_(out)

    def _varlen_kv(self, q, k, v, cu_q, cu_k, max_q: int, max_k: int):
        """varlen attention with separate query and key offsets, K/V with fewer heads than Q (GQA),
        causal from the bottom right (tests on a CPU replace it with a loop)."""
        return self._varlen(q, k, v, cu_q, cu_k, max_q, max_k, **self._varlen_kw, **self._gqa_kw)

    def _varlen_attention(self, q, k, v, cu, max_len: int):
        """Causal attention of the sequences cu delimits (int32 offsets; empty ones allowed), one
        varlen call (tests on a CPU replace it with a loop)."""
        return self._varlen(q, k, v, cu, cu, max_len, max_len, **self._varlen_kw)

    def _attend(self, q, k, v, seq: "_Packed", layer: int = 0, mode: str | None = None):
        """Causal attention of each packed sequence: q, k, v (N, heads, hd) -> (N, heads, hd).

        ``varlen``: one flash call for all (torch.nn.attention.varlen, CUDA only, whole prefills
        only); ``sdpa-loop``: one SDPA call per sequence. A chunk after ``offset`` cached tokens
        attends to its slot's cache (positions 0..offset + n - 1, written already), masked
        causally: always one SDPA call of its own."""
        import torch
        import torch.nn.functional as F

        mode = mode or self.prefill_attention
        if mode == "varlen" and not any(seq.offsets):
            if seq.cu32 is None:
                seq.cu32 = seq.cu.to(torch.int32)
            return self._varlen(q, k, v, seq.cu32, seq.cu32, seq.max_len, seq.max_len, **self._varlen_kw)
        group = self.shapes.heads // self.shapes.kv_heads
        outs = []
        for start, n, offset, slot in zip(seq.starts, seq.lens, seq.offsets or [0] * len(seq.lens),
                                          seq.slots or [0] * len(seq.lens)):
            qi = q[start:start + n].transpose(0, 1).unsqueeze(0)
            if offset == 0:
                ki, vi = (t[start:start + n].transpose(0, 1).unsqueeze(0) for t in (k, v))
                outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=True)[0])
                continue
            length = offset + n
            kc = self.bufs.cache_k[layer, slot, :, :length].repeat_interleave(group, dim=0).unsqueeze(0)
            vc = self.bufs.cache_v[layer, slot, :, :length].repeat_interleave(group, dim=0).unsqueeze(0)
            mask = self.bufs.key_pos[:length].unsqueeze(0) <= seq.positions[start:start + n].unsqueeze(1)
            outs.append(F.scaled_dot_product_attention(qi, kc, vc, attn_mask=mask)[0])
        return torch.cat(outs, dim=1).transpose(0, 1)

    def _choose_prefill_attention(self) -> str:
        """``varlen`` on CUDA when torch has it and it agrees with the SDPA loop on a test batch
        (checked once, before the clock); ``sdpa-loop`` otherwise."""
        import torch

        if self.device.type != "cuda":
            return "sdpa-loop"
        try:
            kernel = varlen_kernel()
            if kernel is None:
                return "sdpa-loop"
            self._varlen, self._varlen_kw, self._gqa_kw = kernel
            s = self.shapes
            lens = [37, 300, 1]
            total = sum(lens)
            gen = torch.Generator(device=self.device).manual_seed(0)
            q, k, v = (torch.randn(total, s.heads, s.head_dim, device=self.device, dtype=self.dtype, generator=gen)
                       for _ in range(3))
            cu_host = [0, 37, 337, 338]
            seq = _Packed(ids=None, positions=None, slot_of=None, lens=lens, starts=cu_host[:-1], max_len=max(lens),
                          cu=torch.tensor(cu_host, device=self.device))
            with torch.inference_mode():
                want = self._attend(q, k, v, seq, mode="sdpa-loop").float()
                got = self._attend(q, k, v, seq, mode="varlen").float()
            err = float((got - want).abs().max())
            if err > 0.05:
                self.prefill_attention_note = f"varlen disagrees with SDPA by {err:.3g}"
                return "sdpa-loop"
            return "varlen"
        except Exception as exc:  # noqa: BLE001 - any failure: the loop is always there
            self.prefill_attention_note = f"varlen unavailable: {type(exc).__name__}: {str(exc)[:200]}"
            return "sdpa-loop"

    def _check_chunk_attention(self) -> str:
        """'' when ``_varlen_kv`` as the chunk graphs call it (a chunk of 37 tokens after 50 cached
        ones, its keys read from a cache of 96 rows, then a whole prompt of 20; K/V heads as
        ``chunk_gqa`` says) agrees with SDPA (checked once, before the clock); else why not. If
        neither K/V layout passes, chunks after cached tokens run eagerly."""
        import torch
        import torch.nn.functional as F

        s, dev, dt = self.shapes, self.device, self.dtype
        rows, c, t1, l2 = 96, 50, 37, 20
        group = s.heads // s.kv_heads
        try:
            gen = torch.Generator(device=dev).manual_seed(1)

            def rand(*shape):
                return torch.randn(*shape, device=dev, dtype=dt, generator=gen)

            q, fresh_k, fresh_v = rand(t1 + l2, s.heads, s.head_dim), rand(t1 + l2, s.kv_heads, s.head_dim), \
                rand(t1 + l2, s.kv_heads, s.head_dim)
            cache_k, cache_v = rand(rows, s.kv_heads, s.head_dim), rand(rows, s.kv_heads, s.head_dim)
            cache_k[c:c + t1], cache_v[c:c + t1] = fresh_k[:t1], fresh_v[:t1]  # the chunk's own K/V, written
            cu_q = torch.tensor([0, t1, t1, t1 + l2], device=dev, dtype=torch.int32)
            cu_k = torch.tensor([0, c + t1, rows + t1, rows + t1 + l2], device=dev, dtype=torch.int32)
            rep = group if self.chunk_gqa == "repeated" else 1
            with torch.inference_mode():
                keys, values = (torch.cat([a, b]).repeat_interleave(rep, dim=1)
                                for a, b in ((cache_k, fresh_k), (cache_v, fresh_v)))
                got = self._varlen_kv(q, keys, values, cu_q, cu_k, t1 + l2, rows + t1 + l2).float()

                def heads(x):
                    return x.repeat_interleave(group, dim=1).transpose(0, 1).unsqueeze(0)

                mask = torch.arange(c + t1, device=dev).unsqueeze(0) <= torch.arange(c, c + t1, device=dev).unsqueeze(1)
                chunk = F.scaled_dot_product_attention(q[:t1].transpose(0, 1).unsqueeze(0), heads(cache_k[:c + t1]),
                                                       heads(cache_v[:c + t1]), attn_mask=mask)
                whole = F.scaled_dot_product_attention(q[t1:].transpose(0, 1).unsqueeze(0), heads(fresh_k[t1:]),
                                                       heads(fresh_v[t1:]), is_causal=True)
                want = torch.cat([chunk[0], whole[0]], dim=1).transpose(0, 1).float()
            err = float((got - want).abs().max())
            if err <= 0.05:
                return ""
            return f"chunk attention ({self.chunk_gqa} K/V heads) disagrees with SDPA by {err:.3g}"
        except Exception as exc:  # noqa: BLE001 - the eager chunk is always there
            return f"chunk attention ({self.chunk_gqa} K/V heads) unavailable: {type(exc).__name__}: {str(exc)[:200]}"

    def _launch_decode(self, tokens, positions) -> None:
        """Queue one decode step of slots 0..n-1, padded to the bucket; tokens go to bufs.out."""
        import torch

        n = len(tokens)
        bucket = bucket_for(n, self.buckets)
        b = self.bufs
        b.host_inp[0, :n] = torch.tensor(tokens, dtype=torch.long)
        b.host_inp[1, :n] = torch.tensor(positions, dtype=torch.long)
        b.host_inp[:, n:bucket] = 0
        b.inp[:, :bucket].copy_(b.host_inp[:, :bucket], non_blocking=True)
        graph = self.graphs.get(bucket)
        if graph is not None:
            graph.replay()
        else:
            decode_slots(self.weights, self.shapes, b, bucket)

    def decode(self, tokens, positions):
        """One decode step of slots 0..n-1 (padded to the bucket); returns (next tokens, device s)."""
        import torch

        with torch.inference_mode():
            _, marker = self._timed(lambda: self._launch_decode(tokens, positions))
            out = self.bufs.out[:len(tokens)].tolist()  # the host sync
        return out, self._seconds(marker)

    def mixed(self, tokens, positions, items):
        """A decode step of slots 0..n-1 (if ``tokens``), then a prefill pass over ``items`` (if
        any), one host sync: (decode tokens, prefill tokens, device s). Policy ``chunked``."""
        import torch

        graph = bool(items) and self._graph_fits(items)
        seq = self._pack(items) if items and not graph else None
        with torch.inference_mode():
            runner = self._stage_graph(items) if graph else None

            def both():
                if tokens:
                    self._launch_decode(tokens, positions)
                if runner is not None:
                    getattr(runner, "replay", runner)()
                    return None
                return self._prefill(seq) if items else None

            out, marker = self._timed(both)
            dec = self.bufs.out[:len(tokens)].tolist() if tokens else []  # the host sync
            chunk = (self._pf_out[:len(items)].tolist() if graph else out.tolist()) if items else []
        return dec, chunk, self._seconds(marker)

    def _seconds(self, marker) -> float:
        if isinstance(marker, float):
            return marker
        return self._events[0].elapsed_time(marker) * 1e-3  # synchronised by the .tolist() before

    def left(self, n: int) -> None:
        """``n`` sequences finished and left (their host work is real time here: nothing to do)."""

    def move(self, src: int, dst: int, kv_tokens: int) -> None:
        """Copy slot ``src``'s valid KV prefix into slot ``dst`` (compaction)."""
        import torch

        b = self.bufs
        with torch.inference_mode():
            b.cache_k[:, dst, :, :kv_tokens].copy_(b.cache_k[:, src, :, :kv_tokens])
            b.cache_v[:, dst, :, :kv_tokens].copy_(b.cache_v[:, src, :, :kv_tokens])

    # -- before the clock
    def warm_up(self, max_num_batched_tokens: int) -> None:
        """Prefill passes of a few shapes (up to the batched-token budget) and every decode bucket,
        eagerly: kernels chosen and loaded, the allocator's peak reached. Writes only garbage
        into free slots."""
        import numpy as np

        longest = min(self.max_model_len, max_num_batched_tokens)
        full = [longest] * (max_num_batched_tokens // longest)
        if max_num_batched_tokens % longest:
            full.append(max_num_batched_tokens % longest)
        for lens in ([16], [longest], full[: self.max_num_seqs], [16] * min(8, self.max_num_seqs)):
            self.prefill([(slot, np.zeros(n, dtype=np.int64), 0) for slot, n in enumerate(lens)])
        for bucket in self.buckets:
            self.decode([0] * bucket, [0] * bucket)

    def capture(self) -> None:
        """One CUDA graph per bucket, largest first, sharing one memory pool (CUDA only)."""
        import torch

        if not self.use_graph:
            return
        pool = torch.cuda.graph_pool_handle()
        b = self.bufs
        b.inp.zero_()
        with torch.inference_mode():
            for bucket in reversed(self.buckets):
                from calibrate.timing import side_stream

                side = side_stream(self.device)  # one per device: see calibrate.timing.side_stream
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    for _ in range(2):
                        decode_slots(self.weights, self.shapes, b, bucket)
                torch.cuda.current_stream(self.device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    decode_slots(self.weights, self.shapes, b, bucket)
                self.graphs[bucket] = graph
            if self.prefill_graphs:
                try:
                    self._capture_prefill(pool)
                except Exception as exc:  # noqa: BLE001 - the eager prefill is always there
                    torch.cuda.synchronize(self.device)
                    self.prefill_graph_of.clear()
                    self.chunk_graph_of.clear()
                    self.prefill_graphs = self.chunk_graphs = False
                    self.prefill_graph_note = f"prefill graphs failed, eager prefill: {type(exc).__name__}: {str(exc)[:200]}"
            if self.chunk_graphs:
                try:
                    self._capture_prefill(pool, chunk=True)
                except Exception as exc:  # noqa: BLE001 - the eager chunk is always there
                    torch.cuda.synchronize(self.device)
                    self.chunk_graph_of.clear()
                    self.chunk_graphs = False
                    self.chunk_graph_note = f"chunk graphs failed, eager chunks: {type(exc).__name__}: {str(exc)[:200]}"
        torch.cuda.synchronize(self.device)

    def _capture_prefill(self, pool, chunk: bool = False) -> None:
        """One prefill graph (``chunk``: chunk graph) per token bucket, largest first, in the decode
        graphs' pool."""
        import torch

        from calibrate.timing import side_stream

        # staged once with one short sequence in the spare slot (padding goes there too; a chunk
        # after one cached token): warm-ups and captures write only into it
        n = min(16, self.max_model_len - 1)
        self._stage_prefill([(self.max_num_seqs, [0] * n, 1 if chunk else 0)])
        body, graphs = (self._chunk_graph_body, self.chunk_graph_of) if chunk else \
            (self._prefill_graph_body, self.prefill_graph_of)
        for bucket in reversed(self.prefill_buckets):
            side = side_stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):
                    body(bucket)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                body(bucket)
            graphs[bucket] = graph

    def close(self) -> None:
        self.graphs.clear()
        self.prefill_graph_of.clear()
        self.chunk_graph_of.clear()
        self.weights = None
        self.bufs = None


def kv_pool_blocks(total_memory_bytes: int, gpu_memory_utilization: float, weight_bytes: int,
                   workspace_bytes: int, kv_bytes_per_token: int, block_size: int) -> int:
    """vLLM's sizing: (utilization x total - weights - workspace) / (block_size x KV bytes per token)."""
    usable = gpu_memory_utilization * total_memory_bytes - weight_bytes - workspace_bytes
    return max(0, int(usable // (block_size * kv_bytes_per_token)))
