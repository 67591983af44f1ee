"""What a calibration run measures (prompts x batches), what each point costs, and what fits.

* ``Grid``: prompt lengths, the tokens generated at each, and the batches every prompt climbs
  (until its first out-of-memory). ``DEFAULT_GRID`` is the grid that identifies every term of the
  step model (see its comment).
* ``check_model_config``: a config's shape fields, checked before any tensor is built.
* ``ModelSize``: the bytes and FLOPs of one model as the harness builds it (``graph_engine.Shapes``).
* ``point_memory_bytes`` / ``check_fits_in_ram``: memory of one point; the CPU's refusal to start a
  run that would not fit in RAM (an out-of-memory on the CPU kills the process; it cannot be caught).
* ``estimate_point_s``: a rough roofline of what one point costs in wall time (prefills, decode
  steps, cache fill, fixed costs), used to size grids (``python3 -m calibrate.gpu_job --estimate``)
  and to scale one measured point's time to the next (``max_seconds_per_point``).

Stdlib only: the estimate runs without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from roofline.errors import RooflineError
from roofline.units import GB, GiB

#: Above this many prompt tokens in one batch (batch x prompt) the prefill is not timed: the KV
#: cache is filled without it and ttft_s is left blank. At 65,536 tokens a 7B prefill is ~1 PFLOP
#: (~1.5 s on an H200); at batch 64 x 16k it would be ~16 PFLOP and ~25 s, with tens of GiB of
#: activations, and no engine prefills that much at once.
DEFAULT_TTFT_MAX_TOKENS = 65_536
#: Above this many tokens the untimed warm-up prefill is skipped. The first prefill at a shape pays
#: one-time costs (the caching allocator's cudaMalloc of the transient, kernel tuning): measured on
#: the H200, "cold" TTFTs of 16k-64k tokens were up to 30% slower than warm ones and erratic
#: (docs/calibration-runs.md). The graph engine's warm-up is a prefill forward of each chunk shape
#: (at most two 32,768-token chunks), so every timed point is warm; hf-eager's warm-up is a whole prefill.
DEFAULT_WARMUP_PREFILL_MAX_TOKENS = DEFAULT_TTFT_MAX_TOKENS


@dataclass(frozen=True)
class Grid:
    """Prompts (ascending), the tokens generated at each (same order), and the batches each climbs."""

    prompts: tuple[int, ...]
    gens: tuple[int, ...]
    batches: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.prompts:
            raise RooflineError("no prompt length given")
        if not self.batches:
            raise RooflineError("no batch size given")
        if len(self.gens) != len(self.prompts):
            raise RooflineError(f"{len(self.gens)} gen length(s) for {len(self.prompts)} prompt length(s); "
                                "give one gen length, or one per prompt length")
        for name, values, low in (("prompt tokens", self.prompts, 1), ("gen tokens", self.gens, 2),
                                  ("batch sizes", self.batches, 1)):
            bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool) or v < low]
            if bad:
                rule = "integers >= 2 (at least one decode step)" if low == 2 else "positive integers"
                raise RooflineError(f"{name} must be {rule}, got {bad}")
        if list(self.prompts) != sorted(set(self.prompts)):
            raise RooflineError(f"prompt lengths must be distinct and ascending, got {list(self.prompts)}")
        if list(self.batches) != sorted(set(self.batches)):
            raise RooflineError(f"batch sizes must be distinct and ascending, got {list(self.batches)}")

    @classmethod
    def of(cls, prompts: int | Iterable[int], gens: int | Sequence[int] | Mapping[int, int],
           batches: Iterable[int]) -> "Grid":
        """Normalise user input: one int or a list of prompts; one gen for all, one per prompt (in
        the order given), or {prompt: gen}; batches in any order, duplicates dropped."""
        plist = [prompts] if isinstance(prompts, int) else list(prompts)
        plist = [_as_int("prompt tokens", p) for p in plist]
        if isinstance(gens, Mapping):
            missing = [p for p in plist if p not in gens]
            if missing:
                raise RooflineError(f"no gen length for prompt length(s) {missing}")
            pairs = {p: gens[p] for p in plist}
        elif isinstance(gens, int):
            pairs = {p: gens for p in plist}
        else:
            glist = list(gens)
            if len(glist) == 1:
                glist = glist * len(plist)
            if len(glist) != len(plist):
                raise RooflineError(f"{len(glist)} gen length(s) for {len(plist)} prompt length(s); "
                                    "give one gen length, or one per prompt length")
            if len(set(plist)) != len(plist):
                raise RooflineError(f"prompt lengths must be distinct, got {plist}")
            pairs = dict(zip(plist, glist))
        order = sorted(pairs)
        blist = [_as_int("batch sizes", b) for b in batches]
        if not blist:
            raise RooflineError("no batch size given")
        bad = [b for b in blist if b <= 0]
        if bad:
            raise RooflineError(f"batch sizes must be positive integers, got {bad}")
        return cls(tuple(order), tuple(_as_int("gen tokens", pairs[p]) for p in order), tuple(sorted(set(blist))))

    def gen_for(self, prompt: int) -> int:
        return self.gens[self.prompts.index(prompt)]

    def points(self) -> list[tuple[int, int, int]]:
        """(prompt, gen, batch) in the order a run measures them: prompts ascending, then batches."""
        return [(p, g, b) for p, g in zip(self.prompts, self.gens) for b in self.batches]


def _as_int(name: str, value) -> int:
    if isinstance(value, bool):
        raise RooflineError(f"{name} must be integers, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise RooflineError(f"{name} must be integers, got {value!r}")


#: The grid that identifies every term of the step model (decode: weight bytes, KV bytes per
#: token of context, compute per token, fixed cost per step and per layer; the attention terms
#: need the context to vary at fixed batch and the batch at fixed context; TTFT: prefill FLOPs,
#: linear and quadratic in the prompt). Prompts 128-16k at every power-of-two batch until the
#: first OOM; 128 generated tokens at prompt 128 (as the shipped v0.1 runs, so those points
#: compare directly), 64 at 512 and 2048, 32 at 8k and 16k, where every step reads GiBs of KV
#: and 31 steps time it well. Two 7-8B models on an H200, graph engine: about 2.6 minutes of
#: points (94 points, 5 OOM attempts) + ~20 s of start-up and ceilings, i.e. ~3 minutes
#: (``python3 -m calibrate.gpu_job --grid default --engines graph --estimate``).
DEFAULT_GRID = Grid(
    prompts=(128, 512, 2048, 8192, 16384),
    gens=(128, 64, 64, 32, 32),
    batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)


# ---- model shapes -----------------------------------------------------------------------------

def check_model_config(name: str, config: dict) -> None:
    """Raise a RooflineError naming the field when ``config``'s shape fields cannot build a model
    (missing, not a positive integer, heads not a multiple of KV heads, odd head_dim, ...): the
    config is read as roofline reads it (roofline.config_families, every family's own keys:
    GPT-J's n_embd, Falcon's ffn width, Gemma 3's text_config), then checked for the engine."""
    from roofline.config_families import read_family

    f = read_family(config, name)
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "head_dim"):
        value = f.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise RooflineError(f"{name}: {key} must be a positive integer, got {value!r}")
    inter = f.get("intermediate_size")
    if inter is not None and (isinstance(inter, bool) or not isinstance(inter, int) or inter <= 0):
        raise RooflineError(f"{name}: intermediate_size must be a positive integer, got {inter!r}")
    heads, kv_heads = f["num_attention_heads"], f.get("num_key_value_heads") or f["num_attention_heads"]
    if heads % kv_heads:
        raise RooflineError(f"{name}: num_attention_heads ({heads}) must be a multiple of "
                            f"num_key_value_heads ({kv_heads})")
    if f["head_dim"] % 2:
        raise RooflineError(f"{name}: head_dim ({f['head_dim']}) must be even (rotary embedding)")


@dataclass(frozen=True)
class ModelSize:
    """Bytes and FLOPs of one model as the harness builds it (bf16 weights and KV cache)."""

    name: str
    layers: int
    hidden: int
    q_dim: int
    kv_dim: int
    inter: int
    vocab: int
    params: int  # every weight, embedding included
    body_params: int  # weights of the layers, multiplied per token (embedding and LM head excluded)
    lm_head_params: int  # multiplied once per sequence per step (logits of the last position only)

    @classmethod
    def from_config(cls, name: str, config: dict) -> "ModelSize":
        from calibrate.graph_engine import Shapes

        check_model_config(name, config)
        s = Shapes.from_config(config)
        qkv = s.q_dim + 2 * s.kv_dim
        mlp = (3 if s.gated else 2) * s.hidden * s.inter
        layer = qkv * s.hidden + (qkv if s.qkv_bias else 0) + s.hidden * s.q_dim + mlp + 2 * s.hidden
        embed = s.vocab * s.hidden
        lm_head = s.vocab * s.hidden
        params = embed + s.layers * layer + s.hidden + (0 if s.tied else lm_head)
        return cls(name=name, layers=s.layers, hidden=s.hidden, q_dim=s.q_dim, kv_dim=s.kv_dim, inter=s.inter,
                   vocab=s.vocab, params=params, body_params=s.layers * layer, lm_head_params=lm_head)

    @property
    def weight_bytes(self) -> int:
        return 2 * self.params

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of every layer for one token of one sequence, bf16."""
        return self.layers * 2 * self.kv_dim * 2

    def step_flop(self, batch: int) -> float:
        """Linear FLOPs of one decode step (2 per weight per sequence), LM head included."""
        return 2.0 * (self.body_params + self.lm_head_params) * batch

    def prefill_flop(self, batch: int, prompt: int) -> float:
        """Linear layers (2 per weight per token), the LM head at the last position only, and causal
        attention (QK^T and PV: 2 P^2 q_dim per layer)."""
        return (2.0 * self.body_params * batch * prompt + 2.0 * self.lm_head_params * batch
                + 2.0 * self.layers * self.q_dim * prompt**2 * batch)

    def prefill_activation_bytes(self, batch: int, prompt: int) -> int:
        """The largest tensors one prefill layer holds at once (residual, qkv, gate_up, SiLU*up), bf16,
        plus the first token's logits in fp32."""
        tokens = batch * prompt
        width = 3 * self.hidden + self.q_dim + 2 * self.kv_dim + 3 * self.inter
        return 2 * tokens * width + 4 * batch * self.vocab


def point_memory_bytes(size: ModelSize, batch: int, prompt: int, gen: int, prefill: bool = True) -> int:
    """Weights + KV cache for prompt + gen tokens of every sequence + the prefill's activations
    (when a prefill runs) + one decode step's scores and logits. A rough upper bound, not the fit."""
    kv = batch * (prompt + gen) * size.kv_bytes_per_token
    step = 4 * batch * (size.vocab + size.q_dim // max(1, size.kv_dim) * (prompt + gen))
    acts = size.prefill_activation_bytes(batch, prompt) if prefill else 0
    return size.weight_bytes + kv + max(acts, step)


def check_fits_in_ram(sizes: Mapping[str, ModelSize], grid: Grid, available_bytes: int | None,
                      ttft_max_tokens: int, headroom: float = 0.9) -> None:
    """Refuse (RooflineError) a CPU run whose largest point would not fit in ``headroom`` x the
    available RAM: on the CPU an out-of-memory ends the process instead of raising."""
    if available_bytes is None:
        return
    limit = headroom * available_bytes
    for name, size in sizes.items():
        need, at = 0, None
        for prompt, gen, batch in grid.points():
            n = point_memory_bytes(size, batch, prompt, gen, prefill=batch * prompt <= ttft_max_tokens)
            if n > need:
                need, at = n, (batch, prompt, gen)
        if size.weight_bytes > limit:
            raise RooflineError(
                f"{name} does not fit in this machine's RAM: its weights alone are {size.weight_bytes / GB:.1f} GB, "
                f"{available_bytes / GB:.1f} GB available (MemAvailable); pick a smaller model")
        if need > limit:
            batch, prompt, gen = at
            raise RooflineError(
                f"{name} does not fit in this machine's RAM at batch {batch}, prompt {prompt}, gen {gen}: "
                f"needs about {need / GB:.1f} GB (weights {size.weight_bytes / GB:.1f} GB + KV cache "
                f"{batch * (prompt + gen) * size.kv_bytes_per_token / GB:.1f} GB + activations), "
                f"{available_bytes / GB:.1f} GB available (MemAvailable); use smaller batches or prompts"
            )


# ---- cost estimate ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Speeds:
    """What the estimate assumes of a machine (achieved, not datasheet, figures)."""

    name: str
    flop_per_s: float  # bf16 on large products (prefill)
    bytes_per_s: float  # memory read bandwidth (decode)
    layer_step_s: float  # graph engine: kernel floor per layer per decode step
    host_layer_step_s: float  # hf-eager: host time (Python, launches) per layer per decode step
    fill_bytes_per_s: float  # random fill of a static cache / weights
    point_overhead_s: float  # per point: allocation, CUDA-graph capture, Python
    memory_bytes: float  # what the allocator can hand out before an OOM
    decode_flop_per_s: float = 0.0  # FLOP/s of a decode step's small-M products (0: flop_per_s)
    host_serial: bool = False  # the host's per-step work adds to the compute (a CPU) or overlaps it (a GPU)

    @property
    def step_flop_per_s(self) -> float:
        return self.decode_flop_per_s or self.flop_per_s


#: H200 (docs/calibration-runs.md): ~700 TFLOP/s on prefill-sized products (789 measured on
#: 8192^3), 3.5 TB/s on decode reads, 40 us per layer per graph step (qwen2.5-1.5b batch 1:
#: 2.16 ms for 3.09 GB over 28 layers), 0.65 ms per layer per hf-eager step (cuDNN SDPA off),
#: 0.4 s per point besides (capture, allocation, Python: v0.1's 11-batch sweeps took 12.2 s for
#: qwen2.5-1.5b and 27.7 s for qwen2.5-7b, which this reproduces within 10%).
H200 = Speeds("h200", 700e12, 3.5e12, 40e-6, 0.65e-3, 1.0e12, 0.40, 139 * GiB)
#: This 2-core AMD EPYC (AVX512-BF16), qwen2.5-0.5b at prompt 128 on 2026-11-30, load ~1.7:
#: hf-eager TTFT 0.21 / 2.9 / 10.9 s at batch 1 / 16 / 64 (~0.54 TFLOP/s of prefill), decode
#: steps 65 / 113 / 253 ms (graph engine: 52 / 80 / 144 ms): ~19 GB/s on the weights at batch 1,
#: 0.3-0.7 TFLOP/s per added sequence, ~0.55 ms of Python per layer per hf-eager step, serial.
CPU_2CORE = Speeds("cpu-2core", 0.54e12, 19e9, 0.0, 0.55e-3, 2e9, 1.0, 20 * GiB,
                   decode_flop_per_s=0.45e12, host_serial=True)
#: The same machine shared with seven other sessions (load ~5.5): TTFT 2.3 / 10.2 / 29.8 s, decode
#: steps 0.45 / 1.0 / 1.9 s. An upper bound on a run's time there.
CPU_2CORE_LOADED = Speeds("cpu-2core-loaded", 0.2e12, 2.3e9, 0.0, 1.0e-3, 1e9, 2.0, 20 * GiB,
                          decode_flop_per_s=43e9, host_serial=True)
SPEEDS = {s.name: s for s in (H200, CPU_2CORE, CPU_2CORE_LOADED)}


def _graph_step_s(size: ModelSize, batch: int, context: int, sp: Speeds) -> float:
    """Static cache: every step reads the weights and the whole cache; compute adds (no overlap assumed)."""
    nbytes = size.weight_bytes + batch * context * size.kv_bytes_per_token
    flop = size.step_flop(batch) + 4.0 * size.layers * size.q_dim * context * batch
    return nbytes / sp.bytes_per_s + flop / sp.step_flop_per_s + size.layers * sp.layer_step_s


def _eager_step_s(size: ModelSize, batch: int, context: int, sp: Speeds) -> float:
    """Dynamic cache: torch.cat reads and writes the cache, attention reads it again; on a GPU the
    host issues the step in parallel (the slower of the two counts), on a CPU it adds."""
    kv = batch * context * size.kv_bytes_per_token
    work = (size.weight_bytes + 3 * kv) / sp.bytes_per_s + size.step_flop(batch) / sp.step_flop_per_s
    host = size.layers * sp.host_layer_step_s
    return work + host if sp.host_serial else max(work, host)


def prefill_s(size: ModelSize, batch: int, prompt: int, sp: Speeds) -> float:
    return size.prefill_flop(batch, prompt) / sp.flop_per_s + size.layers * sp.layer_step_s


@dataclass(frozen=True)
class PointPlan:
    """How one point runs: whether its prefill is timed, and whether a warm-up prefill runs first."""

    timed_prefill: bool
    warmup_prefill: bool

    @property
    def label(self) -> str:
        """The ``prefill`` column: timed, timed-cold (no warm-up prefill before it) or none."""
        if not self.timed_prefill:
            return "none"
        return "timed" if self.warmup_prefill else "timed-cold"


def plan_point(batch: int, prompt: int, ttft_max_tokens: int = DEFAULT_TTFT_MAX_TOKENS,
               warmup_prefill_max_tokens: int = DEFAULT_WARMUP_PREFILL_MAX_TOKENS) -> PointPlan:
    tokens = batch * prompt
    timed = tokens <= ttft_max_tokens
    return PointPlan(timed_prefill=timed, warmup_prefill=timed and tokens <= warmup_prefill_max_tokens)


def estimate_point_s(size: ModelSize, engine: str, batch: int, prompt: int, gen: int, plan: PointPlan,
                     sp: Speeds = H200) -> dict[str, float]:
    """Seconds one point takes, by part: {prefill_s, decode_s, setup_s, total_s}. Rough (a roofline
    with the fixed costs above), meant for sizing grids and scaling one measured point to the next."""
    prefills = int(plan.timed_prefill) + int(plan.warmup_prefill)
    pre = prefills * prefill_s(size, batch, prompt, sp)
    kv_bytes = batch * (prompt + gen) * size.kv_bytes_per_token
    if engine == "graph":
        step = _graph_step_s(size, batch, prompt + gen, sp)
        decode = (gen - 1 + 4) * step  # timed steps + capture + 3 warm-up replays
        setup = sp.point_overhead_s + kv_bytes / sp.fill_bytes_per_s
    else:
        warm = min(gen, 4)
        decode = sum(_eager_step_s(size, batch, prompt + j, sp) for j in range(gen - 1))
        decode += (warm - 1) * _eager_step_s(size, batch, prompt, sp)
        fills = 2 - prefills  # random caches built instead of a prefill
        setup = sp.point_overhead_s + fills * kv_bytes / sp.fill_bytes_per_s
    return {"prefill_s": pre, "decode_s": decode, "setup_s": setup, "total_s": pre + decode + setup}


def estimate_grid(sizes: Mapping[str, ModelSize], engine: str, grid: Grid, sp: Speeds = H200,
                  ttft_max_tokens: int = DEFAULT_TTFT_MAX_TOKENS,
                  warmup_prefill_max_tokens: int = DEFAULT_WARMUP_PREFILL_MAX_TOKENS,
                  oom_attempt_s: float = 0.3, model_load_s: float = 1.0) -> list[dict]:
    """One row per (model, prompt, gen, batch) a run would visit, as the runner climbs: a point whose
    memory exceeds ``sp.memory_bytes`` is an OOM attempt (its larger batches, and those batches at
    longer prompts, are not visited). Keys: model, prompt, gen, batch, status (ok|oom), prefill,
    memory_bytes, and the estimate's parts in seconds. The first row of each model carries the load."""
    rows = []
    for name, size in sizes.items():
        cap = None
        first = True
        for prompt, gen in zip(grid.prompts, grid.gens):
            for batch in grid.batches:
                if cap is not None and batch >= cap:
                    break
                plan = plan_point(batch, prompt, ttft_max_tokens, warmup_prefill_max_tokens)
                mem = point_memory_bytes(size, batch, prompt, gen, prefill=plan.timed_prefill or plan.warmup_prefill)
                load = (model_load_s + size.weight_bytes / sp.fill_bytes_per_s) if first else 0.0
                first = False
                if mem > sp.memory_bytes:
                    rows.append({"model": name, "prompt": prompt, "gen": gen, "batch": batch, "status": "oom",
                                 "prefill": plan.label, "memory_bytes": mem, "prefill_s": 0.0, "decode_s": 0.0,
                                 "setup_s": oom_attempt_s + load, "total_s": oom_attempt_s + load})
                    cap = batch
                    break
                est = estimate_point_s(size, engine, batch, prompt, gen, plan, sp)
                est["setup_s"] += load
                est["total_s"] += load
                rows.append({"model": name, "prompt": prompt, "gen": gen, "batch": batch, "status": "ok",
                             "prefill": plan.label, "memory_bytes": mem, **est})
    return rows


def format_estimate(rows: list[dict], engine: str, sp: Speeds) -> str:
    """The estimate as a text table: seconds per (model, prompt) and in all, points and OOM attempts."""
    lines = [f"estimate: engine {engine} on {sp.name} ({sp.flop_per_s / 1e12:,.1f} TFLOP/s, "
             f"{sp.bytes_per_s / 1e9:,.0f} GB/s, {sp.memory_bytes / GiB:.0f} GiB)",
             f"{'model':<16} {'prompt':>6} {'gen':>4} {'batches (n), OOM, untimed TTFT from':<36} {'prefill s':>9} {'decode s':>9} "
             f"{'other s':>8} {'total s':>8}"]
    total = 0.0
    keys: list[tuple[str, int, int]] = []
    for r in rows:
        if (r["model"], r["prompt"], r["gen"]) not in keys:
            keys.append((r["model"], r["prompt"], r["gen"]))
    for model, prompt, gen in keys:
        sel = [r for r in rows if (r["model"], r["prompt"], r["gen"]) == (model, prompt, gen)]
        ok = [r["batch"] for r in sel if r["status"] == "ok"]
        oom = [r["batch"] for r in sel if r["status"] == "oom"]
        span = f"{ok[0]}-{ok[-1]} ({len(ok)})" if ok else "-"
        if oom:
            span += f", OOM {oom[0]}"
        untimed = [r["batch"] for r in sel if r["prefill"] == "none"]
        if untimed:
            span += f", no TTFT from {untimed[0]}"
        parts = [sum(r[k] for r in sel) for k in ("prefill_s", "decode_s", "setup_s", "total_s")]
        total += parts[3]
        lines.append(f"{model:<16} {prompt:>6} {gen:>4} {span:<36} {parts[0]:>9.1f} {parts[1]:>9.1f} "
                     f"{parts[2]:>8.1f} {parts[3]:>8.1f}")
    for model in dict.fromkeys(r["model"] for r in rows):
        lines.append(f"{model}: {sum(r['total_s'] for r in rows if r['model'] == model):.0f} s")
    lines.append(f"total: {total:.0f} s ({total / 60:.1f} min), {sum(r['status'] == 'ok' for r in rows)} points, "
                 f"{sum(r['status'] == 'oom' for r in rows)} OOM attempts")
    return "\n".join(lines)
