"""Engine ``graph``: the floor a tuned engine reaches. Own decoder, static KV cache, CUDA graphs.

A minimal decoder with the same weight shapes as the Hugging Face model and random bf16 weights.
Architectures (read from config.json): llama, mistral, qwen2, qwen3 (dense), and
qwen3_moe, mixtral, gpt_oss, deepseek_v2, deepseek_v3 (mixture of experts).

* Attention: GQA (qkv bias where the model has one, o bias for gpt_oss, per-head q/k RMSNorm for
  qwen3 and qwen3_moe, one learned sink logit per head for gpt_oss), or MLA (deepseek: the cache
  holds the normalised latent and the rope key; decode uses the absorbed form).
* Sliding windows (``layer_types`` / ``sliding_window``): a windowed layer's cache is a ring of
  min(prompt + gen, window) slots, written at pos % slots; every slot with index <= pos is valid.
* Feed-forward: SwiGLU, dense or mixture of experts with the routing computed on the device
  (``moe_forward``): router -> top-k -> sort the (token, k) pairs by expert -> counts and
  cumulative offsets -> ``torch._grouped_mm`` for gate_up and down on CUDA (a loop over experts on
  the CPU) -> weighted sum with ``index_add_``. No host synchronisation in the decode step.
  The router's logits carry a fixed random offset per routed token and layer (``ROUTINGS``), so
  every token chooses its experts uniformly at random: a random model's own logits correlate across
  a batch after a real prefill (gpt-oss), which a trained router balanced for load does not.
* q/k/v (and MLA's q with the latent projection) and gate/up are fused into one weight each: the
  same bytes and FLOPs as the HF model's separate projections, in fewer launches (as serving
  engines do).

Measurement:

* The KV cache is preallocated for prompt + gen tokens (windowed layers: capped at the window),
  filled with random values, never read unmasked. Every decode step reads the WHOLE cache with a
  validity mask, so its bytes do not depend on how far decoding has got: kv_cache ``static``.
* Prefill runs eagerly (SDPA). TTFT = prefill + argmax of the first token, synchronised.
* The decode step (embedding -> layers -> lm_head -> argmax, written back into the token buffer)
  is captured in ONE CUDA graph per batch size. The position is a device tensor updated in place
  before each replay; the masks, ring slots and RoPE angles are computed from it inside the graph.
  Each replay is timed with CUDA events around it; tpot_s is the mean replay.
* On the CPU the same step runs without capture, so CI exercises this code.

Simplified (the work and the bytes are the same; the numbers are not the trained model's):

* RoPE is the plain rotary embedding: ``rope_scaling`` (llama3, yarn...) only changes the angles,
  not the work or the bytes, so it is ignored (deepseek's yarn softmax scale is kept).
* Every weight is bf16, gpt-oss's MXFP4 experts included (``weight_dtype`` bf16 in the rows);
  deepseek's router, fp32 in HF, is bf16 here too (64-256 x hidden: negligible bytes).
* MLA decode reads the latent cache twice (scores, then probs x latent), as two batched matmuls;
  a fused kernel (FlashMLA) reads it once.

We write our own decoder because capturing transformers' StaticCache in a manual CUDA graph hit
a device-side index assert on the H200 in an earlier probe.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from roofline.errors import RooflineError

WARMUP_DECODE_STEPS = 3
#: Every model prefills at most this many tokens per forward (whole sequences, at least one, one
#: forward after another, like a serving engine's token budget), so that a large batch at a long
#: prompt is not refused for the prefill's transient activations. (v0.1 prefilled a dense model's
#: whole batch in one forward; its measurements say so by their missing prefill_chunk_tokens.)
PREFILL_CHUNK_TOKENS = 32768
#: Tests set this to run torch._grouped_mm on the CPU (where torch has it) instead of the loop.
GROUPED_MM_ON_CPU = False
MOE_MODEL_TYPES = ("qwen3_moe", "mixtral", "gpt_oss", "deepseek_v2", "deepseek_v3")
MLA_MODEL_TYPES = ("deepseek_v2", "deepseek_v3")
QK_NORM_MODEL_TYPES = ("qwen3", "qwen3_moe", "gemma3_text", "olmo2")  # olmo2 norms q and k whole: same bytes
#: Every cache (a windowed layer's ring, the whole static cache) holds a multiple of this many slots,
#: the ones past the window or the sequence masked. A row of scores of another length (phi-3-mini's
#: 2,047-token window, a static cache of 2,053 positions) makes cuBLAS run the attention's batched
#: matmuls as GEMV or fp32 kernels, 4-10x slower (the kernels probe, device calls 21 and 22).
RING_ALIGN = 8
#: How a MoE layer routes (GraphEngine ``routing``). ``uniform`` (the default since device call 74):
#: router logits plus a fixed random offset per routed token and layer, std ROUTING_OFFSET_STD (the
#: random weights' own logits: std about 1), so each token picks its top-k at random, as the step
#: model's uniform routing prices it. ``weights``: the random weights' logits alone (calls 1-73).
#: Why: a random model's attention is near uniform, so after a real prefill every sequence's
#: attention output tends to its cache's mean, much the same across a batch; with gpt-oss's biases
#: (the same vector added to every token) its batch-16 steps after 4,096-token prompts touched 77%
#: of the uniform count of experts, and 100% after a skipped prefill (docs/method.md section 4).
ROUTINGS = ("uniform", "weights")
ROUTING_OFFSET_STD = {"softmax": 8.0, "sigmoid_group": 2.0}  # sigmoid scores: unsaturated, beside score_bias
ROUTING_OFFSET_STRIDE = 1021  # rows between two layers' offsets (prime: no two layers' rows line up)


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of RING_ALIGN."""
    return -(-n // RING_ALIGN) * RING_ALIGN
WEIGHT_DTYPE = "bf16"
KV_DTYPE = "bf16"


# --------------------------------------------------------------------------------------------
# Shapes from config.json
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shapes:
    """Everything the decoder needs from config.json. Per-layer facts are tuples of length layers."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int  # dense MLP width (dense layers, deepseek's first layers)
    vocab: int
    eps: float
    rope_theta: float
    qkv_bias: bool
    tied: bool
    model_type: str = ""
    o_bias: bool = False
    qk_norm: bool = False
    sinks: bool = False
    windows: tuple = ()  # per layer: 0 = full attention, else the sliding window in tokens
    # mixture of experts (experts == 0: dense model)
    experts: int = 0
    top_k: int = 0
    moe_inter: int = 0  # width of one routed expert
    shared_inter: int = 0  # width of the shared expert MLP (deepseek: moe_inter x n_shared_experts)
    moe_layers: tuple = ()  # per layer: True where the MLP is a mixture of experts
    router: str = ""  # "softmax_topk" | "topk_softmax" (gpt_oss) | "sigmoid_group" (deepseek_v3)
    norm_topk: bool = False
    routed_scale: float = 1.0
    router_bias: bool = False
    expert_bias: bool = False
    n_group: int = 1
    topk_group: int = 1
    act: str = "silu"  # "silu": silu(gate) * up; "gpt_oss": clamped swiglu with alpha, (up + 1); "gelu": plain MLP
    gated: bool = True  # the dense MLP's first matrix holds gate and up (False: up only, gpt-neox, gpt-j, falcon)
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    # multi-head latent attention (deepseek; kv_lora_rank == 0: GQA)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0
    rope_interleaved: bool = False
    attn_scale: float = 0.0  # 0: head_dim ** -0.5

    @classmethod
    def from_config(cls, config: dict) -> "Shapes":
        """The engine's shapes of ``config``. The structure that costs time and memory -- widths,
        heads, layers, vocabulary, tied embeddings, per-layer windows, gated or plain MLP, biases --
        is read by roofline's own config reader (roofline.config_families, what ModelSpec is built
        from: the model the predictions price), so the harness measures the model ``roofline
        predict`` prices; the rest (routing, MLA, sinks, rope) from the config as transformers reads
        it. No pydantic on this path (the GPU image may lack it)."""
        from roofline.config_families import read_family

        spec = read_family(config, str(config.get("_name_or_path") or config.get("model_type") or "config"))
        if isinstance(config.get("text_config"), dict):  # gemma-3: the decoder's fields are nested
            config = {**config["text_config"], "model_type": config["text_config"].get("model_type", "")}
        heads = spec["num_attention_heads"]
        hidden = spec["hidden_size"]
        layers = spec["num_hidden_layers"]
        rope = config.get("rope_parameters") or {}
        theta = config.get("rope_theta") or rope.get("rope_theta") or 10000.0
        model_type = config.get("model_type", "")
        experts = int(config.get("num_local_experts") or config.get("num_experts")
                      or config.get("n_routed_experts") or 0)
        if experts and model_type not in MOE_MODEL_TYPES:
            raise RooflineError(f"graph engine: mixture-of-experts model_type {model_type!r} is not supported "
                                f"(supported: {', '.join(MOE_MODEL_TYPES)})")
        mla = model_type in MLA_MODEL_TYPES
        attention_bias = bool(config.get("attention_bias", model_type in ("qwen2", "gpt_oss")))
        head_dim = spec["head_dim"]
        kw: dict = {}
        if mla:
            if attention_bias:
                raise RooflineError("graph engine: MLA with attention_bias is not supported")
            nope, rope_dim = int(config["qk_nope_head_dim"]), int(config["qk_rope_head_dim"])
            head_dim = nope + rope_dim
            kw.update(q_lora_rank=int(config.get("q_lora_rank") or 0), kv_lora_rank=int(config["kv_lora_rank"]),
                      qk_rope_dim=rope_dim, qk_nope_dim=nope, v_head_dim=int(config["v_head_dim"]),
                      rope_interleaved=model_type == "deepseek_v2" or bool(config.get("rope_interleave", True)),
                      attn_scale=_mla_scale(config, head_dim))
        if experts:
            kw.update(_moe_fields(config, model_type, experts, layers))
        elif not spec.get("mlp_gated", True):  # gpt-neox, gpt-j, falcon: up, GELU, down
            kw.update(gated=False, act="gelu")
        return cls(
            hidden=hidden,
            layers=layers,
            heads=heads,
            kv_heads=spec["num_key_value_heads"],
            head_dim=head_dim,
            inter=spec["intermediate_size"],
            vocab=spec["vocab_size"],
            eps=float(config.get("rms_norm_eps") or config.get("layer_norm_eps") or config.get("layer_norm_epsilon")
                      or 1e-6),
            rope_theta=float(theta),
            qkv_bias=bool(spec["qkv_bias"]) and not mla,
            tied=spec["tie_word_embeddings"],
            model_type=model_type,
            o_bias=bool(spec.get("o_bias", False)) and not mla,
            qk_norm=model_type in QK_NORM_MODEL_TYPES,
            sinks=model_type == "gpt_oss",
            windows=tuple(w or 0 for w in spec["layer_windows"]) if spec.get("layer_windows") else (0,) * layers,
            **kw,
        )

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def rope_dim(self) -> int:
        return self.qk_rope_dim if self.mla else self.head_dim

    @property
    def scale(self) -> float:
        return self.attn_scale or self.head_dim ** -0.5

    def window(self, layer: int) -> int:
        return self.windows[layer] if self.windows else 0

    def is_moe(self, layer: int) -> bool:
        return bool(self.moe_layers) and self.moe_layers[layer]

    def cache_slots(self, layer: int, max_len: int) -> int:
        """Token slots of one sequence's cache in ``layer``: ``max_len`` rounded up to RING_ALIGN
        slots (the ones past the sequence are masked), a windowed layer's ring its window rounded
        up likewise (at most that), the slots past the window masked."""
        full = aligned(max_len)
        w = self.window(layer)
        return min(full, aligned(w)) if w else full

    def cache_shapes(self, layer: int, batch: int, max_len: int) -> tuple[tuple, tuple | None]:
        """(key shape, value shape or None) of one layer's cache; MLA: one (B, T, latent + rope) tensor."""
        t = self.cache_slots(layer, max_len)
        if self.mla:
            return (batch, t, self.kv_lora_rank + self.qk_rope_dim), None
        return (batch, self.kv_heads, t, self.head_dim), (batch, self.kv_heads, t, self.head_dim)


def layer_windows(config: dict) -> tuple:
    """Per layer: the sliding window (tokens), or 0 for full attention, as transformers decides it."""
    layers = int(config["num_hidden_layers"])
    model_type = config.get("model_type", "")
    window = int(config.get("sliding_window") or 0)
    if model_type in ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe") and not config.get("use_sliding_window", False):
        window = 0
    types = config.get("layer_types")
    if types is None and model_type == "gpt_oss":
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if types is None and model_type in ("qwen2", "qwen3"):
        first = int(config.get("max_window_layers", layers))
        types = ["sliding_attention" if window and i >= first else "full_attention" for i in range(layers)]
    if types is not None:
        return tuple(window if t == "sliding_attention" else 0 for t in types)
    if model_type in ("mistral", "mixtral", "qwen3_moe", "qwen2_moe"):
        return (window,) * layers
    return (0,) * layers


def _moe_fields(config: dict, model_type: str, experts: int, layers: int) -> dict:
    top_k = int(config.get("num_experts_per_tok") or config.get("experts_per_token") or 0)
    moe_inter = int(config.get("moe_intermediate_size") or config["intermediate_size"])
    if model_type in ("deepseek_v2", "deepseek_v3"):
        first_dense = int(config.get("first_k_dense_replace") or 0)
        freq = int(config.get("moe_layer_freq") or 1)
        moe_layers = tuple(i >= first_dense and i % freq == 0 for i in range(layers))
    elif model_type == "qwen3_moe":
        only_mlp = set(config.get("mlp_only_layers") or [])
        step = int(config.get("decoder_sparse_step") or 1)
        moe_layers = tuple(i not in only_mlp and (i + 1) % step == 0 for i in range(layers))
    else:
        moe_layers = (True,) * layers
    out = dict(experts=experts, top_k=top_k, moe_inter=moe_inter, moe_layers=moe_layers)
    if model_type == "gpt_oss":
        out.update(router="topk_softmax", router_bias=True, expert_bias=True, act="gpt_oss",
                   swiglu_alpha=float(config.get("swiglu_alpha", 1.702)),
                   swiglu_limit=float(config.get("swiglu_limit", 7.0)))
    elif model_type == "deepseek_v3":
        out.update(router="sigmoid_group", norm_topk=bool(config.get("norm_topk_prob", True)),
                   routed_scale=float(config.get("routed_scaling_factor", 2.5)),
                   n_group=int(config.get("n_group") or 1), topk_group=int(config.get("topk_group") or 1),
                   shared_inter=moe_inter * int(config.get("n_shared_experts") or 0))
    elif model_type == "deepseek_v2":  # transformers' V2 router never renormalises (norm_topk_prob unused)
        grouped = config.get("topk_method", "greedy") == "group_limited_greedy"
        out.update(router="softmax_topk", routed_scale=float(config.get("routed_scaling_factor", 1.0)),
                   n_group=int(config.get("n_group") or 1) if grouped else 1,
                   topk_group=int(config.get("topk_group") or 1) if grouped else 1,
                   shared_inter=moe_inter * int(config.get("n_shared_experts") or 0))
    else:  # mixtral always renormalises; qwen3_moe when norm_topk_prob
        out.update(router="softmax_topk",
                   norm_topk=model_type == "mixtral" or bool(config.get("norm_topk_prob", False)))
    return out


def _mla_scale(config: dict, qk_head_dim: int) -> float:
    """Softmax scale of deepseek's MLA: qk_head_dim^-0.5 times yarn's mscale squared (HF's rule)."""
    scale = qk_head_dim ** -0.5
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    mscale_all_dim = rope.get("mscale_all_dim", 0)
    factor = float(rope.get("factor", 1.0))
    if kind not in ("default", None) and mscale_all_dim and factor > 1:
        mscale = 0.1 * mscale_all_dim * math.log(factor) + 1.0
        scale *= mscale * mscale
    return scale


def kv_cache_bytes(s: Shapes, batch: int, max_len: int, dtype_bytes: int = 2) -> list[int]:
    """Bytes of each layer's KV cache for ``batch`` sequences of ``max_len`` tokens (windowed: capped;
    slots rounded up to RING_ALIGN: Shapes.cache_slots)."""
    out = []
    for i in range(s.layers):
        k, v = s.cache_shapes(i, batch, max_len)
        out.append(dtype_bytes * (math.prod(k) + (math.prod(v) if v else 0)))
    return out


# --------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------


@dataclass
class MoEWeights:
    """One mixture-of-experts layer. Expert matrices are stored (E, out, in), like nn.Linear."""

    router: object  # (E, hidden)
    router_bias: object | None  # (E,) gpt_oss
    gate_up: object  # (E, 2 I, hidden): gate rows first, then up rows
    gate_up_bias: object | None  # (E, 2 I) gpt_oss
    down: object  # (E, hidden, I)
    down_bias: object | None  # (E, hidden) gpt_oss
    score_bias: object | None = None  # (E,) deepseek_v3's e_score_correction_bias (choice only)
    #: (rows, E) router logit offsets, one row a routed token (ROUTING_OFFSET_STD): the engine's
    #: uniform routing (GraphEngine ``routing``); None: route on the random weights' logits alone
    route_offsets: object | None = None
    shared_gu: object | None = None  # (2 Is, hidden) deepseek shared experts, fused gate_up
    shared_down: object | None = None  # (hidden, Is)


@dataclass
class MLAWeights:
    """One MLA layer: [q or q_a ; kv_a] fused into ``w_in``; kv_b as (heads, nope + v, kv_lora_rank)."""

    w_in: object  # (q_out + kv_lora_rank + rope, hidden); q_out = q_lora_rank or heads x qk_head_dim
    q_a_norm: object | None  # (q_lora_rank,)
    q_b: object | None  # (heads x qk_head_dim, q_lora_rank)
    kv_a_norm: object  # (kv_lora_rank,)
    kv_b: object  # (heads, nope + v, kv_lora_rank): W_UK = [:, :nope], W_UV = [:, nope:]


@dataclass
class LayerWeights:
    in_norm: object
    wqkv: object | None  # None for MLA layers
    bqkv: object | None
    wo: object
    post_norm: object
    wgu: object | None  # gate rows first, then up rows; None for MoE layers
    wdown: object | None
    bo: object | None = None
    q_norm: object | None = None  # (head_dim,) qwen3
    k_norm: object | None = None
    sinks: object | None = None  # (heads,) gpt_oss
    moe: MoEWeights | None = None
    mla: MLAWeights | None = None
    qk_norm_w: object | None = None  # (heads + kv_heads, head_dim), built from q_norm, k_norm on first use


@dataclass
class Weights:
    embed: object
    layers: list[LayerWeights]
    final_norm: object
    lm_head: object  # the embedding itself when tied


def random_weights(s: Shapes, device, dtype, seed: int = 0, std: float = 0.02) -> Weights:
    import torch

    meta = torch.device(device).type == "meta"  # shapes only (parameter counts), no data
    gen = None if meta else torch.Generator(device=device).manual_seed(seed)

    def rnd(*shape):
        if meta:
            return torch.empty(*shape, device=device, dtype=dtype)
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen).mul_(std)

    def norm(n=s.hidden):
        return rnd(n).add_(1.0)

    def layer(i: int) -> LayerWeights:
        moe = s.is_moe(i)
        in_norm = norm()  # drawn in the original order, so dense models keep their values
        if s.mla:
            wqkv = bqkv = None
        else:
            wqkv = rnd(s.q_dim + 2 * s.kv_dim, s.hidden)
            bqkv = rnd(s.q_dim + 2 * s.kv_dim) if s.qkv_bias else None
        o_in = s.heads * s.v_head_dim if s.mla else s.q_dim
        lw = LayerWeights(
            in_norm=in_norm, wqkv=wqkv, bqkv=bqkv, wo=rnd(s.hidden, o_in), post_norm=norm(),
            wgu=None if moe else rnd((2 if s.gated else 1) * s.inter, s.hidden),
            wdown=None if moe else rnd(s.hidden, s.inter),
        )
        if s.o_bias:
            lw.bo = rnd(s.hidden)
        if s.qk_norm:
            lw.q_norm, lw.k_norm = norm(s.head_dim), norm(s.head_dim)
        if s.sinks:
            lw.sinks = rnd(s.heads)
        if s.mla:
            q_out = s.q_lora_rank or s.q_dim
            lw.mla = MLAWeights(
                w_in=rnd(q_out + s.kv_lora_rank + s.qk_rope_dim, s.hidden),
                q_a_norm=norm(s.q_lora_rank) if s.q_lora_rank else None,
                q_b=rnd(s.q_dim, s.q_lora_rank) if s.q_lora_rank else None,
                kv_a_norm=norm(s.kv_lora_rank),
                kv_b=rnd(s.heads, s.qk_nope_dim + s.v_head_dim, s.kv_lora_rank),
            )
        if moe:
            e, mi = s.experts, s.moe_inter
            lw.moe = MoEWeights(
                router=rnd(e, s.hidden), router_bias=rnd(e) if s.router_bias else None,
                gate_up=rnd(e, 2 * mi, s.hidden), gate_up_bias=rnd(e, 2 * mi) if s.expert_bias else None,
                down=rnd(e, s.hidden, mi), down_bias=rnd(e, s.hidden) if s.expert_bias else None,
                score_bias=rnd(e) if s.router == "sigmoid_group" else None,
                shared_gu=rnd(2 * s.shared_inter, s.hidden) if s.shared_inter else None,
                shared_down=rnd(s.hidden, s.shared_inter) if s.shared_inter else None,
            )
        return lw

    layers = [layer(i) for i in range(s.layers)]
    embed = rnd(s.vocab, s.hidden)
    return Weights(embed=embed, layers=layers, final_norm=norm(),
                   lm_head=embed if s.tied else rnd(s.vocab, s.hidden))


def weight_count(w: Weights) -> int:
    """Parameters held (the tied embedding once)."""
    seen: set[int] = set()
    total = 0

    def add(t):
        nonlocal total
        if t is not None and hasattr(t, "numel") and id(t) not in seen:
            seen.add(id(t))
            total += t.numel()

    for t in (w.embed, w.final_norm, w.lm_head):
        add(t)
    for lw in w.layers:
        for name in ("in_norm", "wqkv", "bqkv", "wo", "post_norm", "wgu", "wdown", "bo", "q_norm", "k_norm", "sinks"):
            add(getattr(lw, name))
        for part in (lw.moe, lw.mla):
            if part is not None:
                for t in vars(part).values():
                    add(t)
    return total


def weights_from_hf(model, s: Shapes) -> Weights:
    """The same weights as a transformers model of a supported architecture (for the equivalence tests)."""
    import torch

    def d(t):
        return None if t is None else t.detach()

    m = model.model
    layers = []
    for i, layer in enumerate(m.layers):
        att, mlp = layer.self_attn, layer.mlp
        lw = LayerWeights(in_norm=d(layer.input_layernorm.weight), wqkv=None, bqkv=None,
                          wo=d(att.o_proj.weight), post_norm=d(layer.post_attention_layernorm.weight),
                          wgu=None, wdown=None, bo=d(att.o_proj.bias))
        if s.mla:
            q = att.q_proj.weight if s.q_lora_rank == 0 else att.q_a_proj.weight
            lw.mla = MLAWeights(
                w_in=torch.cat([q, att.kv_a_proj_with_mqa.weight]).detach(),
                q_a_norm=d(att.q_a_layernorm.weight) if s.q_lora_rank else None,
                q_b=d(att.q_b_proj.weight) if s.q_lora_rank else None,
                kv_a_norm=d(att.kv_a_layernorm.weight),
                kv_b=d(att.kv_b_proj.weight).view(s.heads, s.qk_nope_dim + s.v_head_dim, s.kv_lora_rank),
            )
        else:
            lw.wqkv = torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]).detach()
            if s.qkv_bias:
                lw.bqkv = torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]).detach()
        if s.qk_norm:
            lw.q_norm, lw.k_norm = d(att.q_norm.weight), d(att.k_norm.weight)
        if s.sinks:
            lw.sinks = d(att.sinks)
        if s.is_moe(i):
            lw.moe = _moe_from_hf(mlp, s)
        else:
            lw.wgu = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
            lw.wdown = d(mlp.down_proj.weight)
        layers.append(lw)
    embed = d(m.embed_tokens.weight)
    return Weights(embed=embed, layers=layers, final_norm=d(m.norm.weight),
                   lm_head=embed if s.tied else d(model.lm_head.weight))


def _moe_from_hf(mlp, s: Shapes) -> MoEWeights:
    import torch

    if s.model_type == "gpt_oss":  # (E, hidden, 2I) with gate/up interleaved -> (E, 2I, hidden), gate rows first
        ex, gu, gub = mlp.experts, mlp.experts.gate_up_proj.detach(), mlp.experts.gate_up_proj_bias.detach()
        return MoEWeights(
            router=mlp.router.weight.detach(), router_bias=mlp.router.bias.detach(),
            gate_up=torch.cat([gu[..., ::2], gu[..., 1::2]], dim=-1).transpose(1, 2).contiguous(),
            gate_up_bias=torch.cat([gub[:, ::2], gub[:, 1::2]], dim=-1),
            down=ex.down_proj.detach().transpose(1, 2).contiguous(), down_bias=ex.down_proj_bias.detach(),
        )
    shared = getattr(mlp, "shared_experts", None)
    score_bias = getattr(mlp.gate, "e_score_correction_bias", None)
    return MoEWeights(
        router=mlp.gate.weight.detach(), router_bias=None,
        gate_up=mlp.experts.gate_up_proj.detach(), gate_up_bias=None,
        down=mlp.experts.down_proj.detach(), down_bias=None,
        score_bias=None if score_bias is None else score_bias.detach(),
        shared_gu=None if shared is None else torch.cat([shared.gate_proj.weight, shared.up_proj.weight]).detach(),
        shared_down=None if shared is None else shared.down_proj.weight.detach(),
    )


# --------------------------------------------------------------------------------------------
# RoPE and norms
# --------------------------------------------------------------------------------------------


def rope_tables(s: Shapes, max_len: int, device, dtype):
    """cos, sin of shape (max_len, rope_dim), computed in fp32 then cast (as HF does).

    Half-split layout (rotate_half) by default; deepseek's interleaved pairs when s.rope_interleaved.
    """
    import torch

    dim = s.rope_dim
    inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    pos = torch.arange(max_len, device=device, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = freqs.repeat_interleave(2, dim=-1) if s.rope_interleaved else torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rope(x, cos, sin, swap=None):
    """Rotary embedding: x*cos + rotate(x)*sin; rotate_half unless ``swap`` (a rope_swap matrix) is given."""
    import torch

    if swap is not None:
        return x * cos + torch.matmul(x, swap) * sin
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_matrix(cos, sin, eye, swap):
    """The (hd, hd) matrix R with x @ R == _rope(x, cos, sin) for one position (cos, sin: (1, hd)).

    One small matmul per layer instead of five elementwise kernels in the decode step.
    ``eye`` is the identity, ``swap`` the signed permutation of rotate_half (see rope_swap).
    """
    return eye * cos + swap * sin


def rope_swap(head_dim: int, device, dtype, interleaved: bool = False):
    """P with x @ P == rotate_half(x) == cat(-x2, x1); interleaved: (x0, x1, ...) -> (-x1, x0, ...)."""
    import torch

    p = torch.zeros(head_dim, head_dim, device=device, dtype=dtype)
    if interleaved:
        even = torch.arange(0, head_dim, 2, device=device)
        p[even + 1, even] = -1.0  # out[2i] = -x[2i + 1]
        p[even, even + 1] = 1.0  # out[2i + 1] = x[2i]
        return p
    half = head_dim // 2
    idx = torch.arange(half, device=device)
    p[idx + half, idx] = -1.0  # out[j] = -x[j + half] for j < half
    p[idx, idx + half] = 1.0  # out[j + half] = x[j]
    return p


def _rms(x, weight, eps):
    """RMSNorm (one fused kernel where torch has one); same function as HF's Qwen2/LlamaRMSNorm."""
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), weight, eps)


# --------------------------------------------------------------------------------------------
# Feed-forward: dense SwiGLU and mixture of experts
# --------------------------------------------------------------------------------------------


def _act(gate_up, s: Shapes):
    """gate_up (..., 2 I) with gate first -> (..., I); a plain MLP's up (..., I) -> GELU(up)."""
    import torch
    import torch.nn.functional as F

    if s.act == "gelu":
        return F.gelu(gate_up, approximate="tanh")

    gate, up = gate_up.chunk(2, dim=-1)
    if s.act == "gpt_oss":
        gate = gate.clamp(max=s.swiglu_limit)
        up = up.clamp(min=-s.swiglu_limit, max=s.swiglu_limit)
        return (up + 1) * (gate * torch.sigmoid(gate * s.swiglu_alpha))
    return F.silu(gate) * up


def _dense_ffn(h, wgu, wdown, s: Shapes):
    import torch.nn.functional as F

    return F.linear(_act(F.linear(h, wgu), s), wdown)


def _mlp(x, lw: LayerWeights, s: Shapes):
    """Residual + dense SwiGLU MLP of a dense layer (kept for the helpers that import it)."""
    return x + _dense_ffn(_rms(x, lw.post_norm, s.eps), lw.wgu, lw.wdown, s)


def route(h, m: MoEWeights, s: Shapes):
    """Router of ``h`` (T, hidden): (weights (T, k) in h's dtype, expert ids (T, k) int64), as HF routes."""
    import torch
    import torch.nn.functional as F

    if m.route_offsets is None:
        logits = F.linear(h, m.router, m.router_bias)  # (T, E)
    else:  # one GEMM all the same (its bias a matrix): the offsets, not the random weights, choose
        logits = torch.addmm(_offset_rows(m.route_offsets, h.shape[0]), h, m.router.t())
    k = s.top_k
    if s.router == "topk_softmax":  # gpt_oss: top-k logits, softmax over those k
        top, idx = torch.topk(logits, k, dim=-1)
        return torch.softmax(top.float(), dim=-1).to(h.dtype), idx
    if s.router == "sigmoid_group":  # deepseek_v3: sigmoid, biased choice within the best groups
        scores = logits.float().sigmoid()
        choice = scores + m.score_bias.float()
        tokens, per = choice.shape[0], s.experts // s.n_group
        groups = choice.view(tokens, s.n_group, per).topk(2, dim=-1)[0].sum(dim=-1)
        keep = torch.zeros_like(groups).scatter_(1, torch.topk(groups, s.topk_group, dim=-1)[1], 1.0)
        choice = choice.masked_fill(keep.repeat_interleave(per, dim=1) == 0, float("-inf"))
        idx = torch.topk(choice, k, dim=-1)[1]
        weights = scores.gather(1, idx)
        if s.norm_topk:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return (weights * s.routed_scale).to(h.dtype), idx
    probs = torch.softmax(logits.float(), dim=-1)  # softmax, top-k (qwen3_moe, mixtral, deepseek_v2)
    if s.n_group > 1:  # deepseek_v2 group_limited_greedy
        tokens, per = probs.shape[0], s.experts // s.n_group
        groups = probs.view(tokens, s.n_group, per).max(dim=-1).values
        keep = torch.zeros_like(groups).scatter_(1, torch.topk(groups, s.topk_group, dim=-1)[1], 1.0)
        probs = probs * keep.repeat_interleave(per, dim=1)
    weights, idx = torch.topk(probs, k, dim=-1)
    if s.norm_topk:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return (weights * s.routed_scale).to(h.dtype), idx


def _offset_rows(offsets, tokens: int):
    """The first ``tokens`` rows of a layer's routing offsets (a view; repeated past its rows)."""
    if tokens <= offsets.shape[0]:
        return offsets[:tokens]
    return offsets.repeat(-(-tokens // offsets.shape[0]), 1)[:tokens]


def routing_offsets(s: Shapes, device, dtype, seed: int = 0):
    """{MoE layer index: (rows, E) logit offsets}: views into one table of independent N(0, std)
    draws (ROUTING_OFFSET_STD), each layer's ROUTING_OFFSET_STRIDE rows further on, so every routed
    token of a pass (a prefill's row, a decode step's sequence) and every layer chooses its experts
    independently and uniformly, whatever its hidden state. Rows: a prefill chunk's tokens."""
    import torch

    moe = [i for i in range(s.layers) if s.is_moe(i)]
    if not moe:
        return {}
    rows = max(PREFILL_CHUNK_TOKENS, 1)
    std = ROUTING_OFFSET_STD["sigmoid_group" if s.router == "sigmoid_group" else "softmax"]
    gen = torch.Generator(device=device).manual_seed(seed + 7919)
    table = torch.randn(rows + ROUTING_OFFSET_STRIDE * len(moe), s.experts, device=device, dtype=dtype,
                        generator=gen).mul_(std)
    return {i: table[j * ROUTING_OFFSET_STRIDE:j * ROUTING_OFFSET_STRIDE + rows] for j, i in enumerate(moe)}


def expert_mm(x, w, offs):
    """Rows of ``x`` (sorted by expert) times their expert's matrix: out[r] = x[r] @ w[e(r)].T.

    ``w`` is (E, out, in); ``offs`` (E,) int32 holds the cumulative row ends. CUDA: one
    ``torch._grouped_mm`` (no host sync). CPU: a loop over the experts (reads offs on the host).
    """
    import torch

    if x.device.type != "cpu" or GROUPED_MM_ON_CPU:  # cuda (and meta, for the shape-only tests)
        return torch._grouped_mm(x, w.transpose(1, 2), offs=offs)
    out = x.new_empty(x.shape[0], w.shape[1])
    start = 0
    for e, end in enumerate(offs.tolist()):
        if end > start:
            out[start:end] = x[start:end] @ w[e].T
        start = end
    return out


def moe_forward(h, m: MoEWeights, s: Shapes, stats: list | None = None):
    """Mixture of experts of ``h`` (T, hidden), routing on the device; optional shared experts added.

    The T x k (token, expert) pairs are sorted by expert (stable argsort); counts come from a
    scatter-add, offsets from their cumsum; both expert matmuls are grouped over the sorted rows;
    each row is scaled by its routing weight and added back to its token with index_add_. Every
    shape is fixed by T, so the whole function can be captured in a CUDA graph. ``stats``, when
    given, receives the number of distinct experts chosen (a device scalar).
    """
    import torch

    k = s.top_k
    weights, idx = route(h, m, s)
    flat = idx.reshape(-1)  # (T k,)
    order = torch.argsort(flat, stable=True)
    row_token = torch.div(order, k, rounding_mode="floor")
    row_expert = flat.index_select(0, order)
    counts = torch.zeros(s.experts, dtype=torch.int64, device=h.device).scatter_add_(0, flat, torch.ones_like(flat))
    offs = torch.cumsum(counts, 0).to(torch.int32)
    if stats is not None:
        stats.append((counts > 0).sum())
    gu = expert_mm(h.index_select(0, row_token), m.gate_up, offs)
    if m.gate_up_bias is not None:
        gu = gu + m.gate_up_bias.index_select(0, row_expert)
    out = expert_mm(_act(gu, s), m.down, offs)
    if m.down_bias is not None:
        out = out + m.down_bias.index_select(0, row_expert)
    out = out * weights.reshape(-1).index_select(0, order).unsqueeze(1)
    y = torch.zeros_like(h).index_add_(0, row_token, out)
    if m.shared_gu is not None:
        y = y + _dense_ffn(h, m.shared_gu, m.shared_down, s)
    return y


def moe_reference(h, m: MoEWeights, s: Shapes):
    """The same mixture as ``moe_forward``, one token and one chosen expert at a time (for tests)."""
    import torch
    import torch.nn.functional as F

    weights, idx = route(h, m, s)
    y = torch.zeros_like(h)
    for t in range(h.shape[0]):
        for j in range(s.top_k):
            e = int(idx[t, j])
            gu = F.linear(h[t], m.gate_up[e], None if m.gate_up_bias is None else m.gate_up_bias[e])
            out = F.linear(_act(gu, s), m.down[e], None if m.down_bias is None else m.down_bias[e])
            y[t] += weights[t, j] * out
    if m.shared_gu is not None:
        y = y + _dense_ffn(h, m.shared_gu, m.shared_down, s)
    return y


def _ffn(h, lw: LayerWeights, s: Shapes, stats: list | None = None):
    if lw.moe is not None:
        return moe_forward(h, lw.moe, s, stats)
    return _dense_ffn(h, lw.wgu, lw.wdown, s)


# --------------------------------------------------------------------------------------------
# Prefill (eager)
# --------------------------------------------------------------------------------------------


def _write_prefill(cache, new, plen: int, dim: int) -> None:
    """Positions 0..plen-1 of ``new`` into ``cache`` along ``dim`` at slot p % slots (a ring when short)."""
    import torch

    slots = cache.shape[dim]
    if plen <= slots:
        cache.narrow(dim, 0, plen).copy_(new)
        return
    pos = torch.arange(plen - slots, plen, device=cache.device)
    cache.index_copy_(dim, pos % slots, new.narrow(dim, plen - slots, slots))


def _prefill_mask(plen: int, window: int, device, sink: bool = False):
    """Boolean (P, P [+1]) mask: causal, within the window when there is one; a last always-on column for a sink."""
    import torch

    i = torch.arange(plen, device=device)
    allowed = i[None, :] <= i[:, None]
    if window:
        allowed &= i[None, :] > i[:, None] - window
    if sink:
        allowed = torch.cat([allowed, torch.ones(plen, 1, dtype=torch.bool, device=device)], dim=1)
    return allowed


def _prefill_attention(q, k, v, s: Shapes, window: int, sinks=None):
    """q (B, H, P, hd), k, v (B, kv, P, hd) -> (B, H, P, hd). SDPA; sinks via one extra key.

    A sink adds exp(sink_h) to head h's softmax denominator and nothing to its output. SDPA has
    no such input, so the head dimension grows by one (padded to a multiple of 8): the query
    carries sink_h / scale there, a zero-valued extra key carries 1 there and 0 elsewhere, so its
    score is exactly sink_h. Masked prefill expands K/V to all heads (mem-efficient SDPA kernel).
    """
    import torch
    import torch.nn.functional as F

    batch, heads, plen, hd = q.shape
    plain = not window or window >= plen
    if sinks is None and plain:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    if sinks is None:
        mask = _prefill_mask(plen, window, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    pad = aligned(hd + 1) - hd
    scale = s.scale
    extra_q = (sinks.to(q.dtype) / scale).view(1, heads, 1, 1).expand(batch, heads, plen, 1)
    q2 = torch.cat([q, extra_q, q.new_zeros(batch, heads, plen, pad - 1)], dim=-1)
    k2 = torch.cat([k, k.new_zeros(batch, heads, plen, pad)], dim=-1)
    sink_key = k.new_zeros(batch, heads, 1, hd + pad)
    sink_key[..., hd] = 1.0
    k2 = torch.cat([k2, sink_key], dim=2)
    v2 = torch.cat([v, v.new_zeros(batch, heads, 1, hd)], dim=2)
    mask = _prefill_mask(plen, 0 if plain else window, q.device, sink=True)
    return F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask, scale=scale)


def _prefill_gqa(h, lw: LayerWeights, s: Shapes, i: int, ck, cv, cos_p, sin_p):
    import torch.nn.functional as F

    batch, plen = h.shape[:2]
    qkv = F.linear(h, lw.wqkv, lw.bqkv)
    q, k, v = qkv.split([s.q_dim, s.kv_dim, s.kv_dim], dim=-1)
    q = q.view(batch, plen, s.heads, s.head_dim)
    k = k.view(batch, plen, s.kv_heads, s.head_dim)
    if s.qk_norm:
        q, k = _rms(q, lw.q_norm, s.eps), _rms(k, lw.k_norm, s.eps)
    q = _rope(q, cos_p, sin_p).transpose(1, 2)
    k = _rope(k, cos_p, sin_p).transpose(1, 2)
    v = v.view(batch, plen, s.kv_heads, s.head_dim).transpose(1, 2)
    _write_prefill(ck, k, plen, 2)
    _write_prefill(cv, v, plen, 2)
    attn = _prefill_attention(q, k, v, s, s.window(i), lw.sinks)
    return F.linear(attn.transpose(1, 2).reshape(batch, plen, s.q_dim), lw.wo, lw.bo)


def _mla_project(h, a: MLAWeights, s: Shapes):
    """h (..., hidden) -> q (..., heads, nope + rope), latent (..., kv_lora_rank) normalised, k_rope (..., rope)."""
    import torch.nn.functional as F

    q_out = s.q_lora_rank or s.q_dim
    hin = F.linear(h, a.w_in)
    q, ckv = hin[..., :q_out], hin[..., q_out:]
    if s.q_lora_rank:
        q = F.linear(_rms(q, a.q_a_norm, 1e-6), a.q_b)
    q = q.reshape(*h.shape[:-1], s.heads, s.head_dim)
    latent = _rms(ckv[..., : s.kv_lora_rank], a.kv_a_norm, 1e-6)
    return q, latent, ckv[..., s.kv_lora_rank:]


def _prefill_mla(h, lw: LayerWeights, s: Shapes, cache, cos_p, sin_p, swap):
    """Naive (decompressed) MLA over the prompt; writes [latent, rope key] into the cache."""
    import torch
    import torch.nn.functional as F

    batch, plen = h.shape[:2]
    a, nope = lw.mla, s.qk_nope_dim
    q, latent, k_rope = _mla_project(h, a, s)  # (B, P, H, qk), (B, P, r), (B, P, rope)
    q_rope = _rope(q[..., nope:], cos_p, sin_p, swap)
    k_rope = _rope(k_rope, cos_p[:, :, 0], sin_p[:, :, 0], swap)
    _write_prefill(cache, torch.cat([latent, k_rope], dim=-1), plen, 1)
    kv = F.linear(latent, a.kv_b.reshape(-1, s.kv_lora_rank)).view(batch, plen, s.heads, nope + s.v_head_dim)
    k = torch.cat([kv[..., :nope], k_rope[:, :, None, :].expand(batch, plen, s.heads, s.qk_rope_dim)], dim=-1)
    q = torch.cat([q[..., :nope], q_rope], dim=-1)
    v = F.pad(kv[..., nope:], (0, s.head_dim - s.v_head_dim))  # same head dim as q, k: flash-eligible
    attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          is_causal=True, scale=s.scale)[..., : s.v_head_dim]
    return F.linear(attn.transpose(1, 2).reshape(batch, plen, s.heads * s.v_head_dim), lw.wo, lw.bo)


def prefill(w: Weights, s: Shapes, ids, cache_k, cache_v, cos, sin):
    """Eager prefill of ``ids`` (B, P): fills each layer's cache, returns last-position logits (B, V).

    ``cache_k[i]``, ``cache_v[i]``: layer i's cache (a stacked (L, ...) tensor or a list); a windowed
    layer's ring keeps the last positions at slot p % slots; MLA layers use cache_k only.
    """
    import torch.nn.functional as F

    plen = ids.shape[1]
    x = F.embedding(ids, w.embed)
    cos_p, sin_p = cos[:plen][None, :, None, :], sin[:plen][None, :, None, :]
    swap = rope_swap(s.rope_dim, cos.device, cos.dtype, interleaved=True) if s.rope_interleaved else None
    for i, lw in enumerate(w.layers):
        h = _rms(x, lw.in_norm, s.eps)
        if lw.mla is not None:
            x = x + _prefill_mla(h, lw, s, cache_k[i], cos_p, sin_p, swap)
        else:
            x = x + _prefill_gqa(h, lw, s, i, cache_k[i], cache_v[i], cos_p, sin_p)
        h = _rms(x, lw.post_norm, s.eps)
        x = x + _ffn(h.reshape(-1, s.hidden), lw, s).view_as(x)
    return F.linear(_rms(x[:, -1], w.final_norm, s.eps), w.lm_head)


# --------------------------------------------------------------------------------------------
# Decode step (captured in one CUDA graph)
# --------------------------------------------------------------------------------------------


@dataclass
class StepState:
    """The static buffers one decode step reads and writes (fixed addresses for graph replay)."""

    tok: object  # (B,) int64: input token; the step writes the next token here
    pos: object  # (1,) int64: position of ``tok``; updated in place before each replay
    key_pos: object  # (T,) int64: 0..T-1
    cache_k: object  # GQA: (L, B, kv_heads, T, head_dim) or a list of (B, kv_heads, T_i, head_dim)
    cache_v: object  # MLA: cache_k[i] is (B, T, kv_lora_rank + rope) and cache_v is None
    cos: object  # (T, rope_dim)
    sin: object
    eye: object = None  # (rope_dim, rope_dim) identity, for rope_matrix
    swap: object = None  # (rope_dim, rope_dim) rotate_half permutation, for rope_matrix
    logits: object | None = None
    moe_stats: list | None = None  # when a list, each MoE layer appends its distinct-expert count


def _gqa_decode(h, lw: LayerWeights, s: Shapes, ck, cv, rot, bias, slot):
    """GQA attention of one token per sequence over all T slots of the layer's cache."""
    import torch
    import torch.nn.functional as F

    batch, total = h.shape[0], ck.shape[2]
    group = s.heads // s.kv_heads
    qkv = F.linear(h, lw.wqkv, lw.bqkv)  # (B, q+2kv)
    qk = qkv[:, : s.q_dim + s.kv_dim].view(batch, s.heads + s.kv_heads, s.head_dim)
    if s.qk_norm:
        if lw.qk_norm_w is None:  # built on the first (eager, warm-up) call, reused by the graph
            lw.qk_norm_w = torch.cat([lw.q_norm.expand(s.heads, s.head_dim), lw.k_norm.expand(s.kv_heads, s.head_dim)])
        qk = F.rms_norm(qk, (s.head_dim,), None, s.eps) * lw.qk_norm_w
    qk = torch.matmul(qk, rot)
    q = qk[:, : s.heads].reshape(batch * s.kv_heads, group, s.head_dim)  # grouped by kv head
    k = qk[:, s.heads:].unsqueeze(2)  # (B, kv, 1, hd)
    v = qkv[:, s.q_dim + s.kv_dim:].view(batch, s.kv_heads, 1, s.head_dim)
    ck.index_copy_(2, slot, k)
    cv.index_copy_(2, slot, v)
    if lw.sinks is None:
        attn = decode_attention(q, ck, cv, bias, s.scale)  # (B*kv, g, hd)
    else:  # the sink logit joins the softmax denominator; its probability is dropped
        scores = torch.baddbmm(bias, q, ck.view(batch * s.kv_heads, total, s.head_dim).transpose(1, 2),
                               alpha=s.scale)  # (B*kv, g, T)
        sink = lw.sinks.to(scores.dtype).view(1, s.kv_heads, group, 1).expand(batch, -1, -1, -1)
        # -inf columns after the sink keep each row a multiple of RING_ALIGN long: the slice below
        # is then an aligned operand (an odd row made cuBLAS run P V as a GEMV kernel, ~4x slower)
        pad = scores.new_full((batch * s.kv_heads, group, -(total + 1) % RING_ALIGN), float("-inf"))
        probs = torch.softmax(torch.cat([scores, sink.reshape(batch * s.kv_heads, group, 1), pad], dim=-1), dim=-1)
        attn = torch.bmm(probs[..., :total], cv.view(batch * s.kv_heads, total, s.head_dim))
    return F.linear(attn.view(batch, s.q_dim), lw.wo, lw.bo)


def decode_attention(q, ck, cv, bias, scale):
    """One layer's decode attention over the WHOLE static cache (calibrate/probes.py times it alone).

    q: (B*kv, group, d), query heads grouped by their KV head; ck, cv: (B, kv, T, d); bias: (T,),
    0 for valid slots and -inf after the current position. Returns (B*kv, group, d): one baddbmm
    (scores, mask added), a softmax, one bmm (the weighted sum of values).
    """
    import torch

    batch, kv_heads, total, head_dim = ck.shape
    scores = torch.baddbmm(bias, q, ck.view(batch * kv_heads, total, head_dim).transpose(1, 2),
                           alpha=scale)  # (B*kv, g, T)
    probs = torch.softmax(scores, dim=-1)
    return torch.bmm(probs, cv.view(batch * kv_heads, total, head_dim))


def _mla_decode(h, lw: LayerWeights, s: Shapes, cache, rot, bias, slot):
    """Absorbed MLA: scores and outputs in the latent space, reading the (B, T, r + rope) cache.

    q_latent = q_nope @ W_UK (per head); scores = scale * [q_latent, q_rope] . [c_kv, k_rope];
    out_latent = probs @ c_kv; out = out_latent @ W_UV^T per head; then o_proj.
    """
    import torch
    import torch.nn.functional as F

    batch, r, nope = h.shape[0], s.kv_lora_rank, s.qk_nope_dim
    q, latent, k_rope = _mla_project(h, lw.mla, s)  # (B, H, qk), (B, r), (B, rope)
    q_rope = torch.matmul(q[..., nope:], rot)
    cache.index_copy_(1, slot, torch.cat([latent, torch.matmul(k_rope, rot)], dim=-1).unsqueeze(1))
    kv_b = lw.mla.kv_b  # (H, nope + v, r)
    q_lat = torch.bmm(q[..., :nope].transpose(0, 1), kv_b[:, :nope])  # (H, B, r)
    q_full = torch.cat([q_lat.transpose(0, 1), q_rope], dim=-1)  # (B, H, r + rope)
    scores = torch.baddbmm(bias, q_full, cache.transpose(1, 2), alpha=s.scale)  # (B, H, T)
    probs = torch.softmax(scores, dim=-1)
    out_lat = torch.bmm(probs, cache[..., :r])  # (B, H, r)
    out = torch.bmm(out_lat.transpose(0, 1), kv_b[:, nope:].transpose(1, 2))  # (H, B, v)
    return F.linear(out.transpose(0, 1).reshape(batch, s.heads * s.v_head_dim), lw.wo, lw.bo)


def ring_bias(key_pos, pos, slots: int, window: int, dtype):
    """Additive mask over a layer's ``slots`` cache slots at position ``pos`` (a device scalar):
    slot j holds the latest position p <= pos with p % slots == j (a ring when slots < T); it is
    attended iff that position was written (j <= pos) and lies in the window (the last ``window``
    positions; 0: no window). A ring of exactly the window: every written slot is in it."""
    import torch

    keys = key_pos[:slots]
    ok = keys <= pos
    if window:
        ok = ok & (torch.remainder(pos - keys, slots) < window)
    zero = torch.zeros((), device=keys.device, dtype=dtype)
    return torch.where(ok, zero, torch.full((), float("-inf"), device=keys.device, dtype=dtype))


def decode_step(w: Weights, s: Shapes, st: StepState) -> None:
    """One decode step over the whole static cache; writes the greedy next token into st.tok.

    Per layer: RMSNorm, attention (GQA: fused qkv (+bias), q/k norm, RoPE as one (hd x hd) matmul,
    cache write at ``pos`` (ring slot pos % T for a windowed layer), scores = scale * q K^T + mask
    over ALL T cache slots (one baddbmm), softmax (with the sink), P V, o proj; MLA: absorbed),
    residual, RMSNorm, SwiGLU MLP or mixture of experts, residual. Query heads are grouped by
    their KV head (GQA) so each cache byte is read once.
    """
    import torch
    import torch.nn.functional as F

    mla = s.mla
    if st.eye is None:
        st.eye = torch.eye(s.rope_dim, device=st.cos.device, dtype=st.cos.dtype)
        st.swap = rope_swap(s.rope_dim, st.cos.device, st.cos.dtype, interleaved=s.rope_interleaved)
    x = F.embedding(st.tok, w.embed)  # (B, H)
    rot = rope_matrix(st.cos.index_select(0, st.pos), st.sin.index_select(0, st.pos), st.eye, st.swap)
    full = st.key_pos.shape[0]
    masks: dict[int, tuple] = {}  # cache slots -> (additive mask over the slots, write slot)
    for i, lw in enumerate(w.layers):
        ck = st.cache_k[i]
        slots = ck.shape[1 if mla else 2]
        key = (slots, 0 if mla else s.window(i))
        if key not in masks:
            bias = ring_bias(st.key_pos, st.pos, slots, key[1], x.dtype)
            masks[key] = (bias, st.pos if slots == full else torch.remainder(st.pos, slots))
        bias, slot = masks[key]
        h = _rms(x, lw.in_norm, s.eps)
        if mla:
            x = x + _mla_decode(h, lw, s, ck, rot, bias, slot)
        else:
            x = x + _gqa_decode(h, lw, s, ck, st.cache_v[i], rot, bias, slot)
        x = x + _ffn(_rms(x, lw.post_norm, s.eps), lw, s, st.moe_stats)
    logits = F.linear(_rms(x, w.final_norm, s.eps), w.lm_head)
    st.tok.copy_(logits.argmax(dim=-1))
    st.logits = logits


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------


def _batch_slice(cache, b0: int, b1: int):
    """Sequences b0..b1-1 of a cache (stacked (L, B, ...) tensor or per-layer list), as views."""
    if cache is None:
        return None
    if isinstance(cache, list):
        return [c[b0:b1] for c in cache]
    return cache[:, b0:b1]


class GraphEngine:
    """One model's weights built once; ``measure`` runs one (batch, prompt, gen) point."""

    name = "graph"
    kv_cache = "static"
    weight_dtype = WEIGHT_DTYPE
    kv_dtype = KV_DTYPE

    def __init__(self, config: dict, device: str = "cuda", seed: int = 0, use_graph: bool | None = None,
                 routing: str = "uniform"):
        import torch

        if routing not in ROUTINGS:
            raise RooflineError(f"routing must be one of {', '.join(ROUTINGS)}, not {routing!r}")
        self.device = torch.device(device)
        self.dtype = torch.bfloat16
        self.shapes = Shapes.from_config(config)
        self.seed = seed
        self.routing = routing
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        self.weights = random_weights(self.shapes, self.device, self.dtype, seed)
        if routing == "uniform":
            for i, offsets in routing_offsets(self.shapes, self.device, self.dtype, seed).items():
                self.weights.layers[i].moe.route_offsets = offsets
        self._graph = None
        self.prefill_chunk_tokens = PREFILL_CHUNK_TOKENS

    def prefill_chunk_seqs(self, batch: int, prompt_tokens: int) -> int:
        """Sequences per prefill forward: the whole batch, or as many as the token budget holds (>= 1)."""
        if self.prefill_chunk_tokens is None:
            return batch
        return max(1, min(batch, self.prefill_chunk_tokens // prompt_tokens))

    def routing_in_use(self) -> str:
        """``uniform`` when the MoE layers carry routing offsets, else ``weights`` (weights swapped in
        after construction, weights_from_hf's say, carry none)."""
        moe = [lw.moe for lw in self.weights.layers if lw.moe is not None]
        return "uniform" if moe and all(m.route_offsets is not None for m in moe) else "weights"

    def extra_columns(self) -> dict[str, str]:
        """Facts a fit needs, as CSV strings. Dense full-attention GQA models keep the two original keys."""
        s = self.shapes
        out = {"attn_implementation": "own-mla-absorbed" if s.mla else "own-gqa-matmul",
               "cuda_graph": str(self.use_graph).lower()}
        if self.prefill_chunk_tokens is not None:
            out["prefill_chunk_tokens"] = str(self.prefill_chunk_tokens)
        if s.experts:
            out.update(moe_impl="grouped_mm" if self.device.type == "cuda" else "loop", moe_routing=self.routing_in_use(),
                       experts=str(s.experts), top_k=str(s.top_k), moe_layers=str(sum(s.moe_layers)),
                       expert_intermediate=str(s.moe_inter), shared_intermediate=str(s.shared_inter))
        windowed = [w for w in s.windows if w]
        if windowed:
            out.update(window_layers=str(len(windowed)), window=str(max(windowed)))
        if s.sinks:
            out["attention_sinks"] = "true"
        if s.qk_norm:
            out["qk_norm"] = "true"
        return out

    def new_state(self, batch: int, max_len: int) -> StepState:
        import torch

        s, dev = self.shapes, self.device
        gen = torch.Generator(device=dev).manual_seed(self.seed + 1)
        shapes = [s.cache_shapes(i, batch, max_len) for i in range(s.layers)]

        def alloc(which: int):
            if shapes[0][which] is None:
                return None
            if all(sh == shapes[0] for sh in shapes):  # one stacked tensor, as for dense models
                return torch.randn((s.layers, *shapes[0][which]), dtype=self.dtype, device=dev, generator=gen)
            return [torch.randn(sh[which], dtype=self.dtype, device=dev, generator=gen) for sh in shapes]

        cache_k, cache_v = alloc(0), alloc(1)
        cos, sin = rope_tables(s, aligned(max_len), dev, self.dtype)
        return StepState(
            tok=torch.zeros(batch, dtype=torch.long, device=dev),
            pos=torch.zeros(1, dtype=torch.long, device=dev),
            key_pos=torch.arange(aligned(max_len), device=dev),
            cache_k=cache_k,
            cache_v=cache_v,
            cos=cos,
            sin=sin,
        )

    def _prefill(self, st: StepState, batch: int, prompt_tokens: int) -> float:
        """Prefill random prompts into ``st``; returns TTFT in seconds (synchronised)."""
        import torch

        from calibrate.timing import synchronize

        gen = torch.Generator(device=self.device).manual_seed(self.seed + batch)
        ids = torch.randint(0, self.shapes.vocab, (batch, prompt_tokens), device=self.device, generator=gen)
        step = self.prefill_chunk_seqs(batch, prompt_tokens)
        synchronize(self.device)
        t0 = time.perf_counter()
        for b0 in range(0, batch, step):
            b1 = min(batch, b0 + step)
            logits = prefill(self.weights, self.shapes, ids[b0:b1], _batch_slice(st.cache_k, b0, b1),
                             _batch_slice(st.cache_v, b0, b1), st.cos, st.sin)
            st.tok[b0:b1].copy_(logits.argmax(dim=-1))
        synchronize(self.device)
        return time.perf_counter() - t0

    def _capture(self, st: StepState, prompt_tokens: int):
        """Warm the step up on a side stream, then capture it in one CUDA graph."""
        import torch

        step = lambda: decode_step(self.weights, self.shapes, st)  # noqa: E731
        if not self.use_graph:
            return step
        from calibrate.timing import side_stream

        side = side_stream(self.device)  # one per device: see calibrate.timing.side_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for j in range(WARMUP_DECODE_STEPS):
                st.pos.fill_(prompt_tokens + j)
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        self._graph = graph
        return graph.replay

    def experts_touched(self, st: StepState, position: int) -> float | None:
        """Mean over MoE layers of the distinct experts one eager (untimed) decode step routes to."""
        import torch

        if not self.shapes.experts:
            return None
        st.moe_stats = []
        st.pos.fill_(position)
        decode_step(self.weights, self.shapes, st)
        counts = torch.stack(st.moe_stats).float()
        st.moe_stats = None
        return float(counts.mean())

    def measure(self, batch: int, prompt_tokens: int, gen_tokens: int,
                timed_prefill: bool = True, warmup_prefill: bool = True) -> dict:
        """One point: {ttft_s, step_s, e2e_s, peak_mem_gib, peak_reserved_gib, weight_dtype, kv_dtype,
        kv_cache_bytes, experts_touched_mean}.

        ``timed_prefill=False``: no prefill at all (the static cache is random already and every
        step reads all of it), random input tokens, ttft_s and e2e_s None; the peak then holds no
        prefill activations. The untimed warm-up prefill is one forward of each shape the timed
        prefill runs: its first chunk of sequences and, where the batch is not a whole number of
        chunks, its last, smaller one; ``warmup_prefill=False`` skips it: the timed prefill is then
        the first at these shapes (slower by first-time allocations and tuning).

        Peak memory is read before the untimed experts-touched step (which runs after the graph is
        released); experts_touched_mean is None for dense models or when that step runs out of memory.
        """
        import torch

        from calibrate.timing import Marks, is_oom, peak_gib, reset_peak, synchronize

        synchronize(self.device)
        reset_peak(self.device)
        max_len = prompt_tokens + gen_tokens
        with torch.inference_mode():
            st = self.new_state(batch, max_len)
            if warmup_prefill and timed_prefill:
                # warm-up (untimed): one prefill forward of each shape the timed prefill runs (its
                # first chunk, the largest, so its transient's memory is cached, and a last smaller
                # chunk's), so every shape is tuned: a first forward at a shape pays 60-85 ms more on
                # the H200 (cuDNN's attention plan, device call 83), which had come into the TTFT of
                # batches of unequal chunks (qwen2.5-0.5b at 3,000 + 72, batch 16: 10 + 6 sequences);
                # at most two chunks' cost
                chunk = self.prefill_chunk_seqs(batch, prompt_tokens)
                self._prefill(st, chunk, prompt_tokens)
                if batch % chunk:
                    self._prefill(st, batch % chunk, prompt_tokens)
            else:
                gen = torch.Generator(device=self.device).manual_seed(self.seed + batch)
                st.tok.copy_(torch.randint(0, self.shapes.vocab, (batch,), device=self.device, generator=gen))
            replay = self._capture(st, prompt_tokens)
            for j in range(WARMUP_DECODE_STEPS):  # warm-up replays (untimed)
                st.pos.fill_(prompt_tokens + j)
                replay()
            synchronize(self.device)
            t0 = time.perf_counter()
            ttft_s = self._prefill(st, batch, prompt_tokens) if timed_prefill else None
            marks = Marks(self.device, 2 * gen_tokens)
            for j in range(gen_tokens - 1):
                st.pos.fill_(prompt_tokens + j)  # position of the token fed in this step
                marks.mark()
                replay()
                marks.mark()
            synchronize(self.device)
            e2e_s = time.perf_counter() - t0 if timed_prefill else None
            step_s = marks.pairs()
            peak, reserved = peak_gib(self.device)
            self._graph = None
            del replay
            try:
                touched = self.experts_touched(st, max_len - 2)
            except Exception as exc:  # noqa: BLE001 - only OOM is tolerated here
                if not is_oom(exc):
                    raise
                touched = None
        cache_bytes = sum(kv_cache_bytes(self.shapes, batch, max_len))
        del st
        return {"ttft_s": ttft_s, "step_s": step_s, "e2e_s": e2e_s,
                "peak_mem_gib": peak, "peak_reserved_gib": reserved,
                "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype,
                "kv_cache_bytes": cache_bytes, "experts_touched_mean": touched}

    def close(self) -> None:
        self.weights = None
        self._graph = None
