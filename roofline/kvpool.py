"""A serving engine's KV pool: how many tokens of KV cache the card holds for running sequences.

Engines (vLLM, SGLang, TensorRT-LLM) reserve the pool once, at start-up, from the memory left
after everything else:

    pool bytes = gpu_memory_utilization x card memory - weights - workspace - activations
                 - engine reserve
    blocks     = floor(pool bytes / (block_size x KV bytes per token))
    capacity   = blocks x block_size tokens

* ``gpu_memory_utilization`` (vLLM's name; SGLang's ``mem_fraction_static``): the fraction of the
  card the engine may use, 0.9 by default as in vLLM.
* weights, workspace: roofline.memory's (the weight bytes of one GPU's share; the calibration's
  fixed ``workspace_bytes``).
* activations: what the engine's profiling forward holds at its peak -- vLLM runs one dummy
  prefill of ``max_num_batched_tokens`` tokens before sizing the pool; roofline.memory's
  activations and logits of one prefill forward of that many tokens (``profile_tokens``).
* engine reserve: anything else the engine keeps out of the pool (CUDA-graph pools, NCCL
  buffers): the engine profile's ``kv_pool_reserve_bytes`` fact when it has one, else 0, or the
  caller's figure.
* KV bytes per token: roofline.step.StepModel.kv_bytes_per_token, one GPU's share (every layer's
  K and V at the KV dtype; a windowed layer is counted as a full one: the pool is sized per token).

Blocks (``block_size`` tokens, 16 by default as vLLM's) are the unit of admission: a sequence
whose KV holds c tokens holds ceil(c / block_size) blocks. ``kv_capacity_tokens`` given
directly (as the real runs set it) replaces the memory sizing: blocks = its floor division by
the block size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from roofline import validate
from roofline.errors import RooflineError
from roofline.units import GiB

DEFAULT_BLOCK_SIZE = 16
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: Tokens of the profiling prefill when no max_num_batched_tokens is set (vLLM V1's default budget).
DEFAULT_PROFILE_TOKENS = 8192


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold ``tokens`` tokens: ceil(tokens / block_size)."""
    return -(-tokens // block_size)


@dataclass(frozen=True)
class KVPool:
    """The pool: ``num_blocks`` blocks of ``block_size`` tokens, and how it was sized (bytes)."""

    num_blocks: int
    block_size: int
    source: str  # "kv_capacity_tokens" (given) | "gpu_memory_utilization" (from memory) | "unlimited"
    kv_bytes_per_token: float
    memory_bytes: float | None = None
    gpu_memory_utilization: float | None = None
    weights_bytes: float | None = None
    workspace_bytes: float | None = None
    activations_bytes: float | None = None
    engine_reserve_bytes: float | None = None

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def as_dict(self) -> dict:
        return {"kv_capacity_tokens": self.capacity_tokens, **asdict(self)}


def unlimited_pool(block_size: int = DEFAULT_BLOCK_SIZE) -> KVPool:
    """A pool that never binds (only the slots limit the server): v0.1's continuous server."""
    return KVPool(2**50 // block_size, block_size, "unlimited", 0.0)


def kv_pool(step, *, gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION, block_size: int = DEFAULT_BLOCK_SIZE,
            kv_capacity_tokens: int | None = None, engine_reserve_bytes: float | None = None,
            profile_tokens: int = DEFAULT_PROFILE_TOKENS, engine: str | None = None) -> KVPool:
    """The KV pool of ``step``'s model on its card (module docstring). Errors name the argument."""
    block_size = validate.whole(block_size, "block_size", maximum=2**20)
    per_token = float(step.kv_bytes_per_token)
    if kv_capacity_tokens is not None:
        tokens = validate.whole(kv_capacity_tokens, "kv_capacity_tokens", maximum=2**50)
        if tokens < block_size:
            raise RooflineError(f"must hold at least one block of {block_size} tokens, not {tokens}", "kv_capacity_tokens")
        return KVPool(tokens // block_size, block_size, "kv_capacity_tokens", per_token)
    util = validate.positive(gpu_memory_utilization, "gpu_memory_utilization", "a fraction of the card's memory in (0, 1]",
                             maximum=1.0)
    if engine_reserve_bytes is None:
        engine_reserve_bytes = _engine_reserve_bytes(engine)
    reserve = validate.non_negative(engine_reserve_bytes, "engine_reserve_bytes")
    from roofline.memory import peak_memory

    profile = peak_memory(step, 1, validate.whole(profile_tokens, "max_num_batched_tokens"), 1, "dynamic")
    weights = float(profile["weights_bytes"])
    workspace = float(profile["workspace_bytes"])
    activations = float(profile["activations_bytes"] + profile["logits_bytes"])
    memory = float(step.card.memory_bytes)
    free = util * memory - weights - workspace - activations - reserve
    blocks = int(free // (block_size * per_token)) if free > 0 else 0
    if blocks < 1:
        raise RooflineError(
            f"no room for a KV cache: {util:g} x {memory / GiB:.1f} GiB = {util * memory / GiB:.2f} GiB, of which the "
            f"weights take {weights / GiB:.2f} GiB, workspace and activations {(workspace + activations) / GiB:.2f} GiB"
            + (f", the engine reserve {reserve / GiB:.2f} GiB" if reserve else "")
            + " (raise it, use a smaller model or dtype, more tensor parallelism, or give kv_capacity_tokens)",
            "gpu_memory_utilization")
    return KVPool(blocks, block_size, "gpu_memory_utilization", per_token, memory, util, weights, workspace,
                  activations, reserve)


def _engine_reserve_bytes(engine: str | None) -> float:
    """The engine profile's ``kv_pool_reserve_bytes`` fact, if it has one (else 0)."""
    if engine is None:
        return 0.0
    try:
        from roofline.engines import load_engine

        fact = load_engine(engine).facts.get("kv_pool_reserve_bytes")
    except RooflineError:
        return 0.0
    return float(fact.value) if fact is not None else 0.0
