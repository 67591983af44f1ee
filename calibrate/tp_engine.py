"""Engine ``graph`` at tensor parallelism N: the graph engine's decoder split Megatron-style over N ranks.

One process per GPU (torch.distributed: NCCL on CUDA, gloo on the CPU); calibrate/tp_job.py
starts them. Same decoder as calibrate/graph_engine.py (random weights, static KV cache read
whole every step, eager SDPA prefill, the decode step captured in ONE CUDA graph per batch),
split as vLLM splits it:

* q/k/v column-parallel (one fused weight): each rank holds heads/N query heads and kv_heads/N
  KV heads; when N exceeds the KV heads each rank holds ONE KV head, replicated on N/kv_heads
  ranks (vLLM's QKVParallelLinear). qkv bias and qwen3's q/k norms follow their heads.
* o row-parallel, then an all-reduce of the (tokens, hidden) partial sums.
* gate/up column-parallel (intermediate/N each), down row-parallel, then an all-reduce.
* embedding vocab-parallel: rows vocab/N; ids outside a rank's shard read zeros; all-reduce
  (vLLM's VocabParallelEmbedding).
* LM head vocab-parallel: each rank computes its shard's logits, an all-gather assembles the
  (batch, vocab) logits on EVERY rank and every rank takes the argmax. This is vLLM V1's
  LogitsProcessor._gather_logits (all-gather, not gather; sampling runs on every rank), so a
  step moves batch x vocab x 2 bytes through the all-gather, not just (max, argmax) pairs.

A decode step therefore has 2 all-reduces per layer plus 1 (embedding) of batch x hidden
elements, and one all-gather. The collectives are captured inside the decode step's CUDA graph.

Fail-soft collectives (``Comm``): a rank whose local work raises (out of memory, say) must not
leave its peers waiting inside a collective. Every piece of local work between two collectives
runs through ``Comm.local``; after a failure the rank skips its work but still joins every
remaining collective with a buffer of the right shape (zeros), until the next ``Comm.agree``
(a gloo all-gather of each rank's failure), where all ranks learn of it together and take the
same branch: skip the point (OOM) or raise (any other error). Buffers the failure path needs
(the residual stream, the logits buffers) are allocated, and agreed on, before the collectives.

Test seam: ``ROOFLINE_TP_FAULT="rank=1,batch=4,phase=prefill,kind=oom"`` makes that rank fail
there (phases: load, alloc, prefill, decode; kinds: oom, error, hang).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from calibrate.graph_engine import Shapes, _rms, aligned, rope_matrix, rope_swap, rope_tables
from roofline.errors import RooflineError

WARMUP_DECODE_STEPS = 3
DENSE_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
QK_NORM_MODEL_TYPES = ("qwen3",)
FAULT_ENV = "ROOFLINE_TP_FAULT"


# ---------------------------------------------------------------------------------------------
# What each rank holds


@dataclass(frozen=True)
class TPPlan:
    """The slice of the model rank ``rank`` of ``world`` holds (counts are per rank)."""

    world: int
    rank: int
    heads: int  # query heads on this rank
    kv_heads: int  # KV heads on this rank (1 when replicated)
    kv_replicas: int  # ranks that hold each KV head (1 unless world > the model's KV heads)
    q_head_start: int
    kv_head_start: int
    inter: int  # intermediate width on this rank
    inter_start: int
    vocab: int  # rows of the embedding / LM head shard (the last shard padded with zero rows)
    vocab_start: int

    def q_dim(self, head_dim: int) -> int:
        return self.heads * head_dim

    def kv_dim(self, head_dim: int) -> int:
        return self.kv_heads * head_dim


def plan_tp(s: Shapes, world: int, rank: int) -> TPPlan:
    """Rank ``rank``'s share; RooflineError when the model does not split over ``world`` ranks."""
    if world < 1 or not 0 <= rank < world:
        raise RooflineError(f"tp: rank {rank} of {world} is not a rank")
    if s.heads % world:
        raise RooflineError(f"tp {world}: {s.heads} attention heads do not split over {world} ranks")
    if s.kv_heads % world and world % s.kv_heads:
        raise RooflineError(f"tp {world}: {s.kv_heads} KV heads neither split over nor replicate onto {world} ranks")
    if s.inter % world:
        raise RooflineError(f"tp {world}: intermediate size {s.inter} does not split over {world} ranks")
    heads = s.heads // world
    if world <= s.kv_heads:
        kv, replicas = s.kv_heads // world, 1
        kv_start = rank * kv
    else:
        kv, replicas = 1, world // s.kv_heads
        kv_start = rank // replicas
    inter = s.inter // world
    vocab = -(-s.vocab // world)
    return TPPlan(world=world, rank=rank, heads=heads, kv_heads=kv, kv_replicas=replicas,
                  q_head_start=rank * heads, kv_head_start=kv_start, inter=inter, inter_start=rank * inter,
                  vocab=vocab, vocab_start=rank * vocab)


def check_dense(config: dict) -> bool:
    """True when the model has per-head q/k RMSNorms (qwen3); RooflineError for other architectures."""
    model_type = config.get("model_type", "")
    if model_type not in DENSE_MODEL_TYPES or config.get("num_experts") or config.get("num_local_experts"):
        raise RooflineError(f"tp engine: model type {model_type!r} is not one of "
                            f"{', '.join(DENSE_MODEL_TYPES)} (dense)")
    return model_type in QK_NORM_MODEL_TYPES


@dataclass
class TPLayer:
    in_norm: object
    wqkv: object  # (q + 2 kv rows of this rank, hidden)
    bqkv: object | None
    wo: object  # (hidden, q columns of this rank)
    post_norm: object
    wgu: object  # (2 x inter of this rank, hidden): gate rows, then up rows
    wdown: object  # (hidden, inter of this rank)
    q_norm: object | None = None  # (head_dim,) qwen3
    k_norm: object | None = None
    qk_norm: object | None = None  # (heads + kv_heads of this rank, head_dim): both, for the decode step


@dataclass
class TPWeights:
    embed: object  # (vocab shard, hidden)
    layers: list[TPLayer]
    final_norm: object
    lm_head: object  # (vocab shard, hidden); the embedding shard itself when tied


def _qk_norm_rows(q_norm, k_norm, plan: TPPlan):
    import torch

    if q_norm is None:
        return None
    return torch.cat([q_norm.expand(plan.heads, -1), k_norm.expand(plan.kv_heads, -1)]).contiguous()


def random_tp_weights(s: Shapes, plan: TPPlan, qk_norm: bool, device, dtype, seed: int = 0,
                      std: float = 0.02) -> TPWeights:
    """This rank's shards drawn directly (the full model is never built: 70B does not fit one GPU)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed + 7919 * plan.rank)
    hd, hidden = s.head_dim, s.hidden

    def rnd(*shape, mean=0.0):
        return torch.empty(*shape, device=device, dtype=dtype).normal_(mean, std, generator=gen)

    rows = plan.q_dim(hd) + 2 * plan.kv_dim(hd)
    layers = []
    for _ in range(s.layers):
        q_norm, k_norm = (rnd(hd, mean=1.0), rnd(hd, mean=1.0)) if qk_norm else (None, None)
        layers.append(TPLayer(
            in_norm=rnd(hidden, mean=1.0), wqkv=rnd(rows, hidden), bqkv=rnd(rows) if s.qkv_bias else None,
            wo=rnd(hidden, plan.q_dim(hd)), post_norm=rnd(hidden, mean=1.0),
            wgu=rnd(2 * plan.inter, hidden), wdown=rnd(hidden, plan.inter),
            q_norm=q_norm, k_norm=k_norm, qk_norm=_qk_norm_rows(q_norm, k_norm, plan),
        ))
    embed = rnd(plan.vocab, hidden)
    return TPWeights(embed=embed, layers=layers, final_norm=rnd(hidden, mean=1.0),
                     lm_head=embed if s.tied else rnd(plan.vocab, hidden))


def shard_weights(full, s: Shapes, plan: TPPlan, qk_norms=None) -> TPWeights:
    """This rank's shards of full weights (graph_engine.Weights); ``qk_norms``: per layer (q_norm, k_norm)."""
    import torch

    hd = s.head_dim
    q0, q1 = plan.q_head_start * hd, (plan.q_head_start + plan.heads) * hd
    k0, k1 = s.q_dim + plan.kv_head_start * hd, s.q_dim + (plan.kv_head_start + plan.kv_heads) * hd
    v0, v1 = k0 + s.kv_dim, k1 + s.kv_dim
    i0, i1 = plan.inter_start, plan.inter_start + plan.inter

    def qkv_rows(t):
        return torch.cat([t[q0:q1], t[k0:k1], t[v0:v1]]).contiguous()

    def vocab_rows(t):
        part = t[plan.vocab_start: plan.vocab_start + plan.vocab]
        pad = plan.vocab - part.shape[0]
        return torch.cat([part, part.new_zeros(pad, part.shape[1])]) if pad else part.contiguous()

    layers = []
    for i, lw in enumerate(full.layers):
        q_norm, k_norm = qk_norms[i] if qk_norms else (None, None)
        layers.append(TPLayer(
            in_norm=lw.in_norm, wqkv=qkv_rows(lw.wqkv), bqkv=None if lw.bqkv is None else qkv_rows(lw.bqkv),
            wo=lw.wo[:, q0:q1].contiguous(), post_norm=lw.post_norm,
            wgu=torch.cat([lw.wgu[i0:i1], lw.wgu[s.inter + i0: s.inter + i1]]).contiguous(),
            wdown=lw.wdown[:, i0:i1].contiguous(),
            q_norm=q_norm, k_norm=k_norm, qk_norm=_qk_norm_rows(q_norm, k_norm, plan),
        ))
    embed = vocab_rows(full.embed)
    return TPWeights(embed=embed, layers=layers, final_norm=full.final_norm,
                     lm_head=embed if s.tied else vocab_rows(full.lm_head))


# ---------------------------------------------------------------------------------------------
# Collectives


def describe_failure(exc: BaseException) -> str:
    """'oom: <message>' for an out-of-memory error, else 'error: <traceback>'."""
    import traceback

    from calibrate.timing import is_oom

    if is_oom(exc):
        return "oom: " + ((str(exc) or type(exc).__name__).splitlines() or [""])[0][:300]
    return "error: " + "".join(traceback.format_exception(exc))[-3000:]


def settle(failures: list[str | None]) -> str | None:
    """None when no rank failed; the first OOM message when every failure is an OOM; raises otherwise."""
    bad = [(r, f) for r, f in enumerate(failures) if f]
    errors = [f"rank {r}: {f}" for r, f in bad if not f.startswith("oom: ")]
    if errors:
        raise RuntimeError("tensor-parallel worker failed\n" + "\n".join(errors))
    return f"rank {bad[0][0]}: {bad[0][1][5:]}" if bad else None


class Comm:
    """This rank's collectives. Tensors go through ``group`` (NCCL on CUDA, gloo on the CPU), small
    Python objects (failures, decisions, results) through ``ctrl`` (gloo), so that agreeing never
    touches a GPU stream. With world 1 every collective is a no-op (TP1 = the graph engine)."""

    def __init__(self, world: int = 1, rank: int = 0, group=None, ctrl=None):
        self.world, self.rank, self.group, self.ctrl = world, rank, group, ctrl
        self.failure: str | None = None

    def local(self, fn):
        """``fn()``, or None when this rank has failed (now or since the last ``agree``)."""
        if self.failure is not None:
            return None
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - recorded, then agreed on by every rank
            self.failure = describe_failure(exc)
            return None

    def all_reduce_(self, t) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(t, group=self.group)

    def all_gather(self, out, t) -> None:
        """``out`` (world x rows, ...) <- every rank's ``t`` (rows, ...), in rank order."""
        import torch.distributed as dist

        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(out, t, group=self.group)

    def agree(self) -> list[str | None]:
        """Every rank's failure since the last agree (None where none), the same list on every rank."""
        mine, self.failure = self.failure, None
        return self.gather(mine)

    def gather(self, obj) -> list:
        """Every rank's ``obj``, on every rank."""
        if self.world == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.ctrl)
        return out

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank."""
        if self.world == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.ctrl)
        return box[0]

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier(group=self.ctrl)


_FAULTS: list[dict] | None = None
_fault_model = ""  # the model being built or measured (set by TPEngine), for the seam's model= key


def fault(phase: str, rank: int, batch: int | None = None) -> None:
    """The test seam: raise (or hang) where ``ROOFLINE_TP_FAULT`` says; nothing when unset.

    Entries are separated by ';', each of keys phase, rank, and optionally batch, model, kind."""
    global _FAULTS
    if _FAULTS is None:
        text = os.environ.get(FAULT_ENV, "")
        _FAULTS = [dict(kv.split("=", 1) for kv in entry.split(",") if "=" in kv) for entry in text.split(";")]
    for f in _FAULTS:
        if not f or f.get("phase") != phase or int(f.get("rank", -1)) != rank:
            continue
        if "batch" in f and batch is not None and int(f["batch"]) != batch:
            continue
        if "model" in f and f["model"] != _fault_model:
            continue
        kind = f.get("kind", "oom")
        if kind == "hang":
            time.sleep(10**6)
        if kind == "oom":
            import torch

            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (simulated on rank {rank}, {phase}, batch {batch})")
        raise ValueError(f"simulated failure on rank {rank} ({phase}, batch {batch})")


# ---------------------------------------------------------------------------------------------
# The decoder


@dataclass
class LogitBuffers:
    local: object  # (batch, vocab shard): this rank's logits
    gathered: object  # (world x batch, vocab shard): every rank's, in rank order (= local at world 1)


def _rope(x, cos, sin):
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def _reduce_add(comm: Comm, x, partial) -> None:
    """x += all_reduce(partial()); after a failure the rank all-reduces zeros in x's place."""
    p = comm.local(partial)
    if p is None:
        x.zero_()
        comm.all_reduce_(x)
        return
    comm.all_reduce_(p)
    x.add_(p)


def _embed(comm: Comm, w: TPWeights, plan: TPPlan, ids, x) -> None:
    """x <- embedding of ids (vocab-parallel: each rank its rows, zeros elsewhere, all-reduced)."""
    import torch.nn.functional as F

    def part():
        if plan.world == 1:
            return F.embedding(ids, w.embed)
        local = ids - plan.vocab_start
        inside = (local >= 0) & (local < plan.vocab)
        return F.embedding(local * inside, w.embed) * inside.unsqueeze(-1).to(w.embed.dtype)

    p = comm.local(part)
    if p is None:
        x.zero_()
    else:
        x.copy_(p)
    comm.all_reduce_(x)


def _greedy(comm: Comm, w: TPWeights, s: Shapes, plan: TPPlan, hidden, bufs: LogitBuffers, tok):
    """Logits of ``hidden()`` (batch, hidden), all-gathered; argmax written into ``tok``. Returns logits."""
    import torch

    if comm.local(lambda: torch.matmul(hidden(), w.lm_head.t(), out=bufs.local)) is None:
        bufs.local.zero_()
    if plan.world > 1:
        comm.all_gather(bufs.gathered, bufs.local)

    def pick():
        batch = tok.shape[0]
        logits = bufs.gathered
        if plan.world > 1:  # vLLM: all_gather, movedim, reshape, then drop the vocab padding
            logits = logits.view(plan.world, batch, plan.vocab).permute(1, 0, 2).reshape(batch, -1)
        logits = logits[:, : s.vocab]
        tok.copy_(logits.argmax(dim=-1))
        return logits

    return comm.local(pick)


def _mlp_partial(x, lw: TPLayer, s: Shapes, rank: int, phase: str):
    import torch.nn.functional as F

    fault(phase, rank, x.shape[0])
    gate, up = F.linear(_rms(x, lw.post_norm, s.eps), lw.wgu).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, lw.wdown)


def tp_prefill(w: TPWeights, s: Shapes, plan: TPPlan, comm: Comm, ids, x, cache_k, cache_v, cos, sin,
               bufs: LogitBuffers, tok):
    """Eager prefill of ``ids`` (B, P) into the cache (local heads); ``x`` (B, P, hidden) is the
    residual stream, preallocated. Writes the first greedy token into ``tok``; returns the logits."""
    import torch.nn.functional as F

    batch, plen = ids.shape
    hd, hl, kvl = s.head_dim, plan.heads, plan.kv_heads
    cos_p, sin_p = cos[:plen][None, :, None, :], sin[:plen][None, :, None, :]

    def attention(i, lw):
        qkv = F.linear(_rms(x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)
        q, k, v = qkv.split([hl * hd, kvl * hd, kvl * hd], dim=-1)
        q, k = q.view(batch, plen, hl, hd), k.view(batch, plen, kvl, hd)
        if lw.q_norm is not None:
            q, k = _rms(q, lw.q_norm, s.eps), _rms(k, lw.k_norm, s.eps)
        q = _rope(q, cos_p, sin_p).transpose(1, 2)
        k = _rope(k, cos_p, sin_p).transpose(1, 2)
        v = v.view(batch, plen, kvl, hd).transpose(1, 2)
        cache_k[i][:, :, :plen].copy_(k)
        cache_v[i][:, :, :plen].copy_(v)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.linear(attn.transpose(1, 2).reshape(batch, plen, hl * hd), lw.wo)

    _embed(comm, w, plan, ids, x)
    for i, lw in enumerate(w.layers):
        _reduce_add(comm, x, lambda: attention(i, lw))
        _reduce_add(comm, x, lambda: _mlp_partial(x, lw, s, plan.rank, "prefill"))
    return _greedy(comm, w, s, plan, lambda: _rms(x[:, -1], w.final_norm, s.eps), bufs, tok)


@dataclass
class TPState:
    """The static buffers one decode step reads and writes (fixed addresses for graph replay)."""

    tok: object  # (B,) int64: input token; the step writes the next token here
    pos: object  # (1,) int64: position of ``tok``
    key_pos: object  # (T,) int64: 0..T-1
    cache_k: object  # (L, B, kv heads of this rank, T, head_dim)
    cache_v: object
    cos: object  # (T, head_dim)
    sin: object
    eye: object
    swap: object
    x: object  # (B, hidden): the residual stream of the decode step
    bufs: LogitBuffers
    logits: object | None = None  # the decode step's logits (inside the graph's pool once captured)
    prefill_logits: object | None = None


def tp_decode_step(w: TPWeights, s: Shapes, plan: TPPlan, comm: Comm, st: TPState) -> None:
    """One decode step over the whole static cache (graph_engine.decode_step on this rank's heads,
    with the two all-reduces per layer); writes the greedy next token into st.tok."""
    import torch
    import torch.nn.functional as F

    batch, total = st.tok.shape[0], st.key_pos.shape[0]
    hd, hl, kvl = s.head_dim, plan.heads, plan.kv_heads
    scale = hd ** -0.5

    def inputs():
        rot = rope_matrix(st.cos.index_select(0, st.pos), st.sin.index_select(0, st.pos), st.eye, st.swap)
        neg_inf = torch.full((), float("-inf"), device=st.x.device, dtype=st.x.dtype)
        zero = torch.zeros((), device=st.x.device, dtype=st.x.dtype)
        return rot, torch.where(st.key_pos <= st.pos, zero, neg_inf)

    def attention(i, lw):
        rot, bias = pre
        qkv = F.linear(_rms(st.x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)  # (B, q+2kv of this rank)
        qk = qkv[:, : (hl + kvl) * hd].view(batch, hl + kvl, hd)
        if lw.qk_norm is not None:
            qk = F.rms_norm(qk, (hd,), None, s.eps) * lw.qk_norm
        qk = torch.matmul(qk, rot)
        q = qk[:, :hl].reshape(batch * kvl, hl // kvl, hd)  # grouped by KV head
        k = qk[:, hl:].unsqueeze(2)
        v = qkv[:, (hl + kvl) * hd:].view(batch, kvl, 1, hd)
        ck, cv = st.cache_k[i], st.cache_v[i]
        ck.index_copy_(2, st.pos, k)
        cv.index_copy_(2, st.pos, v)
        scores = torch.baddbmm(bias, q, ck.view(batch * kvl, total, hd).transpose(1, 2), alpha=scale)
        attn = torch.bmm(torch.softmax(scores, dim=-1), cv.view(batch * kvl, total, hd))
        return F.linear(attn.view(batch, hl * hd), lw.wo)

    _embed(comm, w, plan, st.tok, st.x)
    pre = comm.local(inputs)
    for i, lw in enumerate(w.layers):
        _reduce_add(comm, st.x, lambda: attention(i, lw))
        _reduce_add(comm, st.x, lambda: _mlp_partial(st.x, lw, s, plan.rank, "decode"))
    st.logits = _greedy(comm, w, s, plan, lambda: _rms(st.x, w.final_norm, s.eps), st.bufs, st.tok)


# ---------------------------------------------------------------------------------------------
# The engine: one model on this rank, one (batch, prompt, gen) point at a time


class TPEngine:
    """This rank's part of one model; ``measure`` runs one point in step with the other ranks.

    Every method that runs collectives must be called by every rank in the same order."""

    name = "graph"
    kv_cache = "static"

    def __init__(self, config: dict, comm: Comm, device: str = "cuda", seed: int = 0, dtype=None,
                 use_graph: bool | None = None, warm_prefill: bool = True, weights: TPWeights | None = None,
                 model: str = ""):
        import torch

        global _fault_model
        _fault_model = model
        self.comm = comm
        self.device = torch.device(device)
        self.dtype = dtype or torch.bfloat16
        self.shapes = Shapes.from_config(config)
        self.qk_norm = check_dense(config)
        self.plan = plan_tp(self.shapes, comm.world, comm.rank)
        self.seed = seed
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        self.warm_prefill = warm_prefill
        fault("load", comm.rank)
        self.weights = weights or random_tp_weights(self.shapes, self.plan, self.qk_norm, self.device,
                                                    self.dtype, seed)
        self._graph = None

    def extra_columns(self) -> dict[str, str]:
        p = self.plan
        return {"attn_implementation": "own-gqa-matmul", "cuda_graph": str(self.use_graph).lower(),
                "logits_gather": "all-gather", "kv_heads_per_rank": str(p.kv_heads),
                "kv_head_replicas": str(p.kv_replicas),
                "warm_prefill": "full" if self.warm_prefill else "none"}

    def new_state(self, batch: int, max_len: int) -> TPState:
        import torch

        s, p, dev = self.shapes, self.plan, self.device
        fault("alloc", p.rank, batch)
        gen = torch.Generator(device=dev).manual_seed(self.seed + 1 + p.rank)
        slots = aligned(max_len)  # as the graph engine: a multiple of RING_ALIGN, the rest masked
        shape = (s.layers, batch, p.kv_heads, slots, s.head_dim)
        cos, sin = rope_tables(s, slots, dev, self.dtype)
        local = torch.empty(batch, p.vocab, dtype=self.dtype, device=dev)
        gathered = torch.empty(p.world * batch, p.vocab, dtype=self.dtype, device=dev) if p.world > 1 else local
        return TPState(
            tok=torch.zeros(batch, dtype=torch.long, device=dev),
            pos=torch.zeros(1, dtype=torch.long, device=dev),
            key_pos=torch.arange(slots, device=dev),
            cache_k=torch.randn(shape, dtype=self.dtype, device=dev, generator=gen),
            cache_v=torch.randn(shape, dtype=self.dtype, device=dev, generator=gen),
            cos=cos, sin=sin,
            eye=torch.eye(s.head_dim, device=dev, dtype=self.dtype),
            swap=rope_swap(s.head_dim, dev, self.dtype),
            x=torch.zeros(batch, s.hidden, dtype=self.dtype, device=dev),
            bufs=LogitBuffers(local=local, gathered=gathered),
        )

    def prompts(self, batch: int, prompt_tokens: int):
        """Random prompt ids, the same on every rank (drawn on the CPU from the seed)."""
        import torch

        gen = torch.Generator().manual_seed(self.seed + batch)
        return torch.randint(0, self.shapes.vocab, (batch, prompt_tokens), generator=gen).to(self.device)

    def prefill(self, st: TPState, ids) -> tuple[float | None, str | None]:
        """(seconds, None), or (None, OOM message) agreed by every rank. Ranks start together."""
        import torch

        from calibrate.timing import synchronize

        comm, s = self.comm, self.shapes
        x = comm.local(lambda: torch.empty(*ids.shape, s.hidden, dtype=self.dtype, device=self.device))
        failure = settle(comm.agree())
        if failure:
            return None, failure
        synchronize(self.device)
        comm.barrier()
        t0 = time.perf_counter()
        st.prefill_logits = tp_prefill(self.weights, s, self.plan, comm, ids, x, st.cache_k, st.cache_v, st.cos, st.sin,
                               st.bufs, st.tok)
        synchronize(self.device)
        seconds = time.perf_counter() - t0
        del x
        return seconds, settle(comm.agree())

    def capture(self, st: TPState, prompt_tokens: int):
        """(replay function, None) or (None, OOM message). Warm-up steps on a side stream (they run
        the collectives for real, so NCCL is set up before capture), then ONE CUDA graph."""
        import torch

        comm = self.comm
        step = lambda: tp_decode_step(self.weights, self.shapes, self.plan, comm, st)  # noqa: E731
        if not self.use_graph:
            return step, None
        from calibrate.timing import side_stream

        side = side_stream(self.device)  # one per device: see calibrate.timing.side_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for j in range(WARMUP_DECODE_STEPS):
                st.pos.fill_(prompt_tokens + j)
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        failure = settle(comm.agree())
        if failure:
            return None, failure
        graph = torch.cuda.CUDAGraph()

        def record():
            # thread_local: the NCCL watchdog thread may query events while this thread captures
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                step()

        comm.local(record)  # a failure inside the step is already recorded and the step completed
        failure = settle(comm.agree())
        if failure:
            return None, failure
        self._graph = graph
        return graph.replay, None

    def measure(self, batch: int, prompt_tokens: int, gen_tokens: int) -> dict:
        """One point on this rank: {status: ok, ttft_s, step_s, e2e_s, peak_mem_gib, peak_reserved_gib}
        or {status: oom, message}; the status is the same on every rank."""
        import torch

        from calibrate.timing import Marks, free_memory, peak_gib, reset_peak, synchronize

        comm = self.comm
        synchronize(self.device)
        reset_peak(self.device)
        with torch.inference_mode():
            st = comm.local(lambda: self.new_state(batch, prompt_tokens + gen_tokens))
            ids = comm.local(lambda: self.prompts(batch, prompt_tokens))
            failure = settle(comm.agree())
            replay = None
            if not failure and self.warm_prefill:
                _, failure = self.prefill(st, ids)  # warm-up prefill (untimed), fills the cache
            if not failure:
                replay, failure = self.capture(st, prompt_tokens)
            if not failure:
                for j in range(WARMUP_DECODE_STEPS):  # warm-up replays (untimed)
                    st.pos.fill_(prompt_tokens + j)
                    replay()
                ttft_s, failure = self.prefill(st, ids)
            if failure:
                self._graph = None
                del st, ids, replay
                free_memory()
                return {"status": "oom", "message": failure}
            marks = Marks(self.device, 2 * gen_tokens)
            t0 = time.perf_counter()
            for j in range(gen_tokens - 1):
                st.pos.fill_(prompt_tokens + j)  # position of the token fed in this step
                marks.mark()
                replay()
                marks.mark()
            synchronize(self.device)
            e2e_s = ttft_s + (time.perf_counter() - t0)  # prefill + decode, not the agreements between
            step_s = marks.pairs()
            failure = settle(comm.agree())  # without a graph, a step can fail while being timed
            if failure:
                self._graph = None
                del st, replay
                free_memory()
                return {"status": "oom", "message": failure}
        peak, reserved = peak_gib(self.device)
        self._graph = None
        del st, replay
        return {"status": "ok", "ttft_s": ttft_s, "step_s": step_s, "e2e_s": e2e_s,
                "peak_mem_gib": peak, "peak_reserved_gib": reserved}

    def close(self) -> None:
        self.weights = None
        self._graph = None


# ---------------------------------------------------------------------------------------------
# The collectives probe: what the model's all-reduce (and logits all-gather) terms are fitted to

#: all-reduce sizes: 2 KiB .. 64 MiB (batch 1..4096 x hidden 896..8192 x 2 bytes), at 2^k and 1.5 x 2^k
ALL_REDUCE_BYTES = tuple(sorted({2 ** k for k in range(11, 27)} | {3 * 2 ** k for k in range(10, 25)}))
#: all-gather input per rank: 64 KiB .. 256 MiB (batch 1..1024 x vocab/N of 32k..152k x 2 bytes)
ALL_GATHER_BYTES = tuple(sorted({2 ** k for k in range(16, 29)} | {3 * 2 ** k for k in range(15, 27)}))


def _us(seconds) -> str:
    return "       -" if seconds is None else f"{seconds * 1e6:8.1f}"


def _median(xs):
    import numpy as np

    return float(np.median(xs)) if xs else None


def _time_collective(comm: Comm, device, op, eager_calls: int, graph_calls: int, graph_replays: int) -> dict:
    """Median seconds per call, eager (one event pair around each call) and inside a CUDA graph of
    ``graph_calls`` calls replayed ``graph_replays`` times (per call = replay / graph_calls)."""
    import numpy as np
    import torch

    from calibrate.timing import Marks, synchronize

    for _ in range(3):
        op()
    synchronize(device)
    comm.barrier()
    marks = Marks(device, 2 * eager_calls)
    for _ in range(eager_calls):
        marks.mark()
        op()
        marks.mark()
    eager = marks.pairs()
    out = {"eager_s_median": _median(eager), "eager_s_p10": float(np.percentile(eager, 10)),
           "graph_s_per_call": None}
    if device.type != "cuda" or not graph_calls:
        return out
    graph = torch.cuda.CUDAGraph()

    def record():
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(graph_calls):
                op()

    comm.local(record)
    failed = [f for f in comm.agree() if f]
    if failed:  # every rank skips the replays: none waits in a collective the other never runs
        out["graph_error"] = failed[0][:500]
        return out
    graph.replay()
    synchronize(device)
    comm.barrier()
    marks = Marks(device, 2 * graph_replays)
    for _ in range(graph_replays):
        marks.mark()
        graph.replay()
        marks.mark()
    out["graph_s_per_call"] = _median(marks.pairs()) / graph_calls
    del graph
    return out


def collective_probe(comm: Comm, device, dtype=None, all_reduce_bytes=ALL_REDUCE_BYTES,
                     all_gather_bytes=ALL_GATHER_BYTES, eager_calls: int = 50, graph_calls: int = 32,
                     graph_replays: int = 10, progress=None) -> dict:
    """NCCL all-reduce (sum) and all-gather at decode sizes, eager and in a CUDA graph; rank 0's
    clock. Bandwidths as nccl-tests defines them: algbw = bytes / time; busbw = algbw x 2(N-1)/N for
    all-reduce (bytes = the buffer), algbw x (N-1)/N for all-gather (bytes = the gathered output)."""
    import torch

    from calibrate.timing import free_memory

    dtype = dtype or torch.bfloat16
    size = torch.tensor([], dtype=dtype).element_size()
    world = comm.world
    result = {"world": world, "dtype": str(dtype).replace("torch.", ""), "eager_calls": eager_calls,
              "graph_calls": graph_calls, "graph_replays": graph_replays, "all_reduce": [], "all_gather": []}
    for nbytes in all_reduce_bytes:
        buf = comm.local(lambda: torch.zeros(nbytes // size, dtype=dtype, device=device))
        if settle(comm.agree()):
            break
        t = _time_collective(comm, device, lambda: comm.all_reduce_(buf), eager_calls, graph_calls, graph_replays)
        best = t["graph_s_per_call"] or t["eager_s_median"]
        algbw = nbytes / best
        busbw = algbw * 2 * (world - 1) / world
        result["all_reduce"].append({"bytes": nbytes, **t, "algbw_bytes_per_s": algbw,
                                     "busbw_bytes_per_s": busbw})
        if progress:
            progress(f"all-reduce {nbytes:>10} B: eager {t['eager_s_median'] * 1e6:8.1f} us, "
                     f"graph {_us(t['graph_s_per_call'])} us/call, busbw {busbw / 1e9:6.1f} GB/s")
        del buf
    for nbytes in all_gather_bytes:
        bufs = comm.local(lambda: (torch.zeros(nbytes // size, dtype=dtype, device=device),
                                   torch.empty(world * (nbytes // size), dtype=dtype, device=device)))
        if settle(comm.agree()):
            break
        inp, out = bufs
        t = _time_collective(comm, device, lambda: comm.all_gather(out, inp), eager_calls, graph_calls,
                             graph_replays)
        best = t["graph_s_per_call"] or t["eager_s_median"]
        algbw = world * nbytes / best
        result["all_gather"].append({"bytes_per_rank": nbytes, "bytes": world * nbytes, **t,
                                     "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": algbw * (world - 1) / world})
        if progress:
            progress(f"all-gather {nbytes:>10} B/rank: eager {t['eager_s_median'] * 1e6:8.1f} us, "
                     f"graph {_us(t['graph_s_per_call'])} us/call, busbw {algbw * (world - 1) / world / 1e9:6.1f} GB/s")
        del bufs, inp, out
    free_memory()
    return result


# ---------------------------------------------------------------------------------------------
# The correctness check: TP decode equals the single-process decoder on the same weights


def _hf_reference(config: dict, seed: int):
    """A float32 transformers model built from ``seed`` (norms and biases random too), on the CPU."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    drop = ("architectures", "torch_dtype", "dtype", "transformers_version")
    cfg = {k: v for k, v in config.items() if k not in drop}
    hf_config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.05)
    return model


def check_tp_decode(config: dict, comm: Comm, device, batch: int = 3, prompt_tokens: int = 7,
                    gen_tokens: int = 6, seed: int = 0) -> dict | None:
    """Prefill + decode with this rank's shards of the full float32 weights built from ``seed`` on
    every rank (CUDA graph on CUDA), against the single-process reference on rank 0:
    graph_engine.prefill/decode_step for llama/qwen2/mistral, transformers for qwen3 (q/k norms).
    Returns {tokens, ref_tokens, tokens_equal, max_rel_logit_err, reference} on rank 0, None elsewhere."""
    import torch

    from calibrate import graph_engine as ge

    device = torch.device(device)
    s = Shapes.from_config(config)
    qk_norm = check_dense(config)
    cpu = torch.device("cpu")
    hf = _hf_reference(config, seed) if qk_norm else None
    if hf is not None:
        full = ge.weights_from_hf(hf, s)
        norms = [(l.self_attn.q_norm.weight.detach(), l.self_attn.k_norm.weight.detach()) for l in hf.model.layers]
    else:
        full, norms = ge.random_weights(s, cpu, torch.float32, seed=seed, std=0.05), None
    plan = plan_tp(s, comm.world, comm.rank)
    shards = shard_weights(full, s, plan, norms)
    to = lambda t: None if t is None else t.to(device)  # noqa: E731
    shards.embed, shards.final_norm = to(shards.embed), to(shards.final_norm)
    shards.lm_head = shards.embed if s.tied else to(shards.lm_head)
    for lw in shards.layers:
        for name in ("in_norm", "wqkv", "bqkv", "wo", "post_norm", "wgu", "wdown", "q_norm", "k_norm", "qk_norm"):
            setattr(lw, name, to(getattr(lw, name)))
    engine = TPEngine(config, comm, str(device), seed=seed, dtype=torch.float32, weights=shards)
    total = prompt_tokens + gen_tokens
    ids = torch.randint(0, s.vocab, (batch, prompt_tokens), generator=torch.Generator().manual_seed(seed + 5))
    tokens, logits = [], []
    with torch.inference_mode():
        st = engine.new_state(batch, total)
        _, failure = engine.prefill(st, ids.to(device))
        if failure:
            raise RuntimeError(failure)
        tokens.append(st.tok.tolist())
        logits.append(st.prefill_logits.float().cpu().clone())
        replay, failure = engine.capture(st, prompt_tokens)
        if failure:
            raise RuntimeError(failure)
        # re-run the prefill: capture's warm-up steps advanced the cache; restart from the prompt
        engine.prefill(st, ids.to(device))
        for j in range(gen_tokens - 1):
            st.pos.fill_(prompt_tokens + j)
            replay()
            tokens.append(st.tok.tolist())
            logits.append(st.logits.float().cpu().clone())
    engine.close()
    if comm.rank != 0:
        return None
    ref_tokens, ref_logits = _reference_decode(config, s, full, hf, ids, gen_tokens)
    err = max(float((a - b).norm() / b.norm()) for a, b in zip(logits, ref_logits))
    return {"tokens": tokens, "ref_tokens": ref_tokens, "tokens_equal": tokens == ref_tokens,
            "max_rel_logit_err": err, "reference": "transformers" if hf is not None else "graph_engine",
            "world": comm.world, "cuda_graph": engine.use_graph}


def _reference_decode(config, s, full, hf, ids, gen_tokens):
    """Greedy tokens and logits per step of the single-process decoder (CPU, float32)."""
    import torch

    from calibrate import graph_engine as ge

    batch, plen = ids.shape
    tokens, logits = [], []
    with torch.inference_mode():
        if hf is not None:  # transformers over the whole sequence each step
            seq = ids
            for _ in range(gen_tokens):
                out = hf(input_ids=seq).logits[:, -1]
                tokens.append(out.argmax(-1).tolist())
                logits.append(out.clone())
                seq = torch.cat([seq, out.argmax(-1)[:, None]], dim=1)
            return tokens, logits
        total = aligned(plen + gen_tokens)  # the slots as GraphEngine.new_state lays them out
        shape = (s.layers, batch, s.kv_heads, total, s.head_dim)
        cos, sin = rope_tables(s, total, torch.device("cpu"), torch.float32)
        st = ge.StepState(tok=torch.zeros(batch, dtype=torch.long), pos=torch.zeros(1, dtype=torch.long),
                          key_pos=torch.arange(total), cache_k=torch.zeros(shape), cache_v=torch.zeros(shape),
                          cos=cos, sin=sin)
        out = ge.prefill(full, s, ids, st.cache_k, st.cache_v, cos, sin)
        st.tok.copy_(out.argmax(-1))
        tokens.append(st.tok.tolist())
        logits.append(out.clone())
        for j in range(gen_tokens - 1):
            st.pos.fill_(plen + j)
            ge.decode_step(full, s, st)
            tokens.append(st.tok.tolist())
            logits.append(st.logits.clone())
    return tokens, logits
