"""The continuous server as a user configures it: options -> scheduler config, KV pool, pass costs.

``ServerOptions`` holds the knobs by their engine names (all keyword, validated here once):

    schedule="decode-first"        or "prefill-first" (roofline.scheduler)
    max_num_batched_tokens=None    tokens one iteration takes (decode-first: chunked prefill; None:
                                   no limit, nothing is cut); prefill-first: None is vLLM V0's
                                   default, max(max_model_len, 2048)
    max_model_len=None             longest prompt + generation - 1 a request may need (None: the
                                   model's max_position_embeddings; serving-loop: the loop's default,
                                   the stream's longest rounded up to 256)
    kv_capacity_tokens=None        the pool, given (as the real runs set it); else sized from memory:
    gpu_memory_utilization=0.9     (roofline.kvpool), None: a pool that never binds (v0.1's server)
    block_size=16, engine_reserve_bytes=None
    pass_cost="fused"              or "serving-loop" (roofline.pass_costs), with loop_terms=None (the
                                   shipped file of card + engine) or a path / LoopTerms
    pass_time_scale=1.0            every pass's GPU time multiplied (the serving loop's host terms
                                   not): 1.03 asks what a GPU 3% slower than priced serves
    decode_time_scales=None        serving-loop: {bucket: factor} on each decode step's GPU time
                                   besides (a run's device probe over the price: the speed its GPU
                                   ran the loop's decode steps at; roofline.pass_costs)

``build`` turns them, with a scenario's step model and the stream, into what
roofline.serving.serve_continuous takes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from roofline import validate
from roofline.errors import RooflineError
from roofline.kvpool import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_PROFILE_TOKENS, kv_pool, \
    unlimited_pool
from roofline.pass_costs import PASS_COSTS, FusedCost, LoopCost, load_loop_terms
from roofline.scheduler import SCHEDULES, ServerConfig

#: The most running sequences a server may hold (beyond any engine's default of 256-1024).
MAX_NUM_SEQS = 65536


@dataclass(frozen=True)
class ServerOptions:
    schedule: str = "decode-first"
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    kv_capacity_tokens: int | None = None
    gpu_memory_utilization: float | None = DEFAULT_GPU_MEMORY_UTILIZATION
    block_size: int = DEFAULT_BLOCK_SIZE
    engine_reserve_bytes: float | None = None
    pass_cost: str = "fused"
    loop_terms: object = None
    pass_time_scale: float = 1.0
    decode_time_scales: object = None

    def __post_init__(self):
        validate.choice(self.schedule, "schedule", SCHEDULES)
        validate.choice(self.pass_cost, "pass_cost", PASS_COSTS)
        for name in ("max_num_batched_tokens", "max_model_len", "kv_capacity_tokens"):
            if getattr(self, name) is not None:
                validate.whole(getattr(self, name), name, maximum=2**50)
        validate.whole(self.block_size, "block_size", maximum=2**20)
        if self.gpu_memory_utilization is not None:
            validate.positive(self.gpu_memory_utilization, "gpu_memory_utilization",
                              "a fraction of the card's memory in (0, 1]", maximum=1.0)
        if self.loop_terms is not None and self.pass_cost != "serving-loop":
            raise RooflineError("goes with pass_cost serving-loop", "loop_terms")
        scale = validate.positive(self.pass_time_scale, "pass_time_scale",
                                  "a factor on every pass's GPU time (1.03: 3% slower)", maximum=10.0)
        if scale < 0.1:
            raise RooflineError(f"must be at least 0.1, not {scale:g}", "pass_time_scale")
        if self.decode_time_scales is not None:
            if self.pass_cost != "serving-loop":
                raise RooflineError("goes with pass_cost serving-loop", "decode_time_scales")
            try:
                items = dict(self.decode_time_scales).items()
            except (TypeError, ValueError):
                raise RooflineError("give {bucket: factor} pairs, e.g. {16: 1.03}", "decode_time_scales") from None
            pairs = []
            for b, f in items:
                b = validate.whole(b, "decode_time_scales", maximum=MAX_NUM_SEQS)
                f = validate.positive(f, "decode_time_scales", f"bucket {b}'s factor, in 0.5-2", maximum=2.0)
                if f < 0.5:
                    raise RooflineError(f"bucket {b}'s factor {f:g} is outside 0.5-2", "decode_time_scales")
                if any(b == seen for seen, _ in pairs):
                    raise RooflineError(f"bucket {b} is given twice", "decode_time_scales")
                pairs.append((b, f))
            if not pairs:
                raise RooflineError("give at least one {bucket: factor} pair", "decode_time_scales")
            pairs = tuple(sorted(pairs))
            object.__setattr__(self, "decode_time_scales", pairs)  # frozen: a hashable, sorted form


@dataclass(frozen=True)
class BuiltServer:
    config: ServerConfig
    pool: object  # roofline.kvpool.KVPool
    cost: object  # roofline.pass_costs.FusedCost | LoopCost

    def nothing_served(self, stream) -> RooflineError:
        """The error when every request of ``stream`` is rejected: which limit each one breaks."""
        c, pool = self.config, self.pool
        need = int(np.min(np.asarray(stream.prompt_tokens) + np.asarray(stream.gen_tokens) - 1))
        if c.max_model_len is not None and need > c.max_model_len:
            return RooflineError(f"every request is rejected: the shortest needs {need:,} tokens, more than "
                                 f"max_model_len {c.max_model_len:,}", "max_model_len")
        if c.schedule == "prefill-first" and c.max_num_batched_tokens is not None and need > c.max_num_batched_tokens:
            return RooflineError(f"every request is rejected: the shortest needs {need:,} tokens, more than a "
                                 f"prefill-first pass takes ({c.max_num_batched_tokens:,})", "max_num_batched_tokens")
        field = "kv_capacity_tokens" if pool.source == "kv_capacity_tokens" else "gpu_memory_utilization"
        return RooflineError(f"every request is rejected: the shortest needs {need:,} tokens of KV, the pool holds "
                             f"{pool.capacity_tokens:,}", field)

    def meta(self, options: ServerOptions) -> dict:
        c = self.config
        out = {
            "schedule": c.schedule,
            "max_num_seqs": c.max_num_seqs,
            "max_num_batched_tokens": c.max_num_batched_tokens,
            "max_model_len": c.max_model_len,
            "block_size": c.block_size,
            "num_blocks": self.pool.num_blocks if self.pool.source != "unlimited" else None,
            "kv_capacity_tokens": self.pool.capacity_tokens if self.pool.source != "unlimited" else None,
            "kv_pool_source": self.pool.source,
            "pass_cost": options.pass_cost,
        }
        if options.pass_time_scale != 1.0:
            out["pass_time_scale"] = options.pass_time_scale
        if options.decode_time_scales:
            out["decode_time_scales"] = {str(b): f for b, f in options.decode_time_scales}
        if self.pool.source == "gpu_memory_utilization":
            p = asdict(self.pool)
            out["kv_pool_bytes"] = {k: p[k] for k in ("memory_bytes", "gpu_memory_utilization", "weights_bytes",
                                                      "workspace_bytes", "activations_bytes", "engine_reserve_bytes",
                                                      "kv_bytes_per_token")}
        if isinstance(self.cost, LoopCost):
            out["loop_terms"] = self.cost.terms.model_dump()
        return out


def build(step, options: ServerOptions, max_num_seqs: int, prompt_tokens, gen_tokens, engine: str | None = None) -> BuiltServer:
    """The scheduler config, pool and pass costs of ``options`` for ``step``'s model on its card."""
    max_num_seqs = validate.whole(max_num_seqs, "batch", maximum=MAX_NUM_SEQS)
    loop = options.pass_cost == "serving-loop"
    max_model_len = options.max_model_len
    if max_model_len is None:
        if loop:  # the loop's default: the longest request, rounded up to 256
            longest = int(np.max(np.asarray(prompt_tokens) + np.asarray(gen_tokens) - 1))
            max_model_len = -(-longest // 256) * 256
        else:
            max_model_len = step.spec.max_position_embeddings
    batched = options.max_num_batched_tokens
    if batched is None and options.schedule == "prefill-first" and max_model_len is not None:
        batched = max(max_model_len, 2048)  # vLLM V0's default without chunked prefill
    if options.gpu_memory_utilization is None and options.kv_capacity_tokens is None:
        pool = unlimited_pool(options.block_size)
    else:
        pool = kv_pool(step, gpu_memory_utilization=options.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
                       block_size=options.block_size, kv_capacity_tokens=options.kv_capacity_tokens,
                       engine_reserve_bytes=options.engine_reserve_bytes,
                       profile_tokens=min(batched or DEFAULT_PROFILE_TOKENS, 2**24), engine=engine)
    config = ServerConfig(max_num_seqs, pool.num_blocks, pool.block_size, max_model_len, batched, options.schedule)
    if loop:
        terms = load_loop_terms(options.loop_terms, card=step.card.id, engine=engine)
        cost = LoopCost(step, terms, max_model_len, max_num_seqs, batched, decode_scale=options.pass_time_scale,
                        prefill_scale=options.pass_time_scale,
                        decode_bucket_scales=dict(options.decode_time_scales or ()))
    else:
        cost = FusedCost(step, scale=options.pass_time_scale)
    return BuiltServer(config, pool, cost)
