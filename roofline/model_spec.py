"""Model shapes read from a Hugging Face ``config.json``, and the counts that follow from them.

Decoder-only transformers, layer by layer, as transformers builds them: GQA/MQA attention (any
number of KV heads, optional q/k/v/o biases, per-head or whole-projection q/k norms, attention
sinks, sliding windows per layer) or DeepSeek's multi-head latent attention (MLA); a gated MLP
(SwiGLU/GeGLU: 3 matrices) or a plain one (2 matrices: GPT-NeoX, GPT-J, Falcon); dense or
mixture-of-experts MLPs (routed experts, top-k, shared experts, routers with or without a bias,
expert biases); RMSNorm or LayerNorm, 1, 2 or 4 norms a layer; tied or untied LM head (with a
bias in GPT-J). Field names are Hugging Face's where a field has one, so any local
``config.json`` of a family in ``FAMILIES`` is valid input; a multimodal Gemma 3 config is read
through its ``text_config`` (the text model decodes; the vision tower is not counted).

Every parameter count equals transformers' own (``model.parameters()``, a tied tensor once) for
each catalog model: tests/test_model_spec.py builds them on the meta device.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from roofline.atomic import probe_path, short
from roofline.errors import RooflineError
from roofline.units import dtype_bytes

CATALOG_DIR = Path(__file__).parent / "catalog"


@dataclass(frozen=True)
class AttentionGroup:
    """Layers that share one attention shape and window.

    ``layers`` is how many layers the group holds (``indices`` says which). Per layer:
    ``kv_elements_per_token`` = cached elements one token adds (GQA: keys and values,
    2·kv_heads·head_dim; MLA: the latent and the shared rope key, kv_lora_rank + qk_rope_head_dim),
    ``flop_per_pair`` = FLOPs of one query token against one cached token (GQA: QK^T and AV,
    4·q_heads·head_dim; MLA with the up-projections absorbed: 2·q_heads·(kv_lora_rank + rope) for
    the scores and 2·q_heads·kv_lora_rank for the weighted sum). ``window``: a token attends to at
    most this many cached tokens (itself included) and the cache keeps no more; None = all.
    For MLA, ``kv_heads`` is 1 (one latent shared by every head) and ``head_dim`` the latent width
    a score is a dot product over (kv_lora_rank + qk_rope_head_dim).
    """

    layers: int
    kind: Literal["gqa", "mla"]
    window: int | None
    q_heads: int
    kv_heads: int
    head_dim: int
    kv_elements_per_token: int
    flop_per_pair: int
    sinks: bool
    indices: tuple[int, ...] = ()


class ModelSpec(BaseModel):
    """The shape of a decoder-only model, in Hugging Face config.json names where they exist.

    Dense models need only the first block of fields (as before); the rest default to a dense,
    full-attention, RMSNorm, gated-MLP transformer.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="catalog name or where the config came from")
    model_type: str
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0, description="width of a dense layer's MLP (config.json's value)")
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0, description="query/key head width (MLA: qk_nope_head_dim + qk_rope_head_dim)")
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool
    qkv_bias: bool = Field(description="q, k and v projections carry a bias (Qwen2)")
    o_bias: bool = Field(default=False, description="the output projection carries a bias")
    mlp_bias: bool = Field(default=False, description="dense MLPs and shared experts carry biases")
    max_position_embeddings: int | None = Field(default=None, gt=0)

    # ---- attention ----
    attention_kind: Literal["gqa", "mla"] = "gqa"
    layer_windows: tuple[int | None, ...] | None = Field(
        default=None, description="sliding window of each layer (None: full attention); None: no window anywhere"
    )
    attention_sinks: bool = Field(default=False, description="one learned sink logit per head per layer (gpt-oss)")
    qk_norm: Literal["none", "head", "full"] = Field(
        default="none", description="RMSNorm on q and k: over each head (Qwen3, Gemma 3) or the whole projection (OLMo 2)"
    )
    q_lora_rank: int | None = Field(default=None, gt=0)
    kv_lora_rank: int | None = Field(default=None, gt=0)
    qk_nope_head_dim: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    v_head_dim: int | None = Field(default=None, gt=0)

    # ---- MLP ----
    mlp_gated: bool = Field(default=True, description="gate, up and down (SwiGLU/GeGLU); False: up and down only")
    moe_layer_indices: tuple[int, ...] = Field(default=(), description="layers whose MLP is a mixture of experts")
    num_experts: int = Field(default=0, ge=0, description="routed experts in a MoE layer")
    experts_per_token: int = Field(default=0, ge=0, description="top-k routed experts a token uses")
    moe_intermediate_size: int = Field(default=0, ge=0, description="width of one routed expert")
    shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: int = Field(default=0, ge=0, description="total width of the shared experts")
    router_bias: bool = False
    expert_bias: bool = Field(default=False, description="routed experts carry biases (gpt-oss)")
    router_correction_bias: bool = Field(
        default=False, description="per-expert score-correction buffer (DeepSeek-V3 e_score_correction_bias)"
    )

    # ---- norms, head, layout ----
    norm_bias: bool = Field(default=False, description="LayerNorm (weight and bias) rather than RMSNorm (weight)")
    norms_per_layer: int = Field(default=2, ge=0)
    lm_head_bias: bool = False
    parallel_attention: bool = Field(
        default=False, description="attention and MLP read the same input (GPT-J, GPT-NeoX, Falcon): same counts"
    )

    # ---- the checkpoint's own storage formats (quantization_config), for defaults; bytes come from formats ----
    native_weight_format: str | None = Field(
        default=None, description="quant_method of the checkpoint's linear layers (e.g. fp8); None: unquantised"
    )
    native_expert_format: str | None = Field(
        default=None, description="storage of the routed experts when it differs (gpt-oss: mxfp4)"
    )

    @model_validator(mode="after")
    def _check_shape(self) -> "ModelSpec":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.layer_windows is not None:
            if len(self.layer_windows) != self.num_hidden_layers:
                raise ValueError(f"layer_windows names {len(self.layer_windows)} layers, not {self.num_hidden_layers}")
            if any(w is not None and w <= 0 for w in self.layer_windows):
                raise ValueError("a sliding window must be a positive number of tokens")
        if self.attention_kind == "mla":
            missing = [k for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"MLA attention needs {', '.join(missing)}")
        idx = self.moe_layer_indices
        if list(idx) != sorted(set(idx)) or any(not 0 <= i < self.num_hidden_layers for i in idx):
            raise ValueError(f"moe_layer_indices must be distinct layers in 0..{self.num_hidden_layers - 1}, ascending")
        if idx:
            for key in ("num_experts", "experts_per_token", "moe_intermediate_size"):
                if getattr(self, key) <= 0:
                    raise ValueError(f"{key} must be positive in a model with MoE layers")
            if self.experts_per_token > self.num_experts:
                raise ValueError(
                    f"num_experts_per_tok ({self.experts_per_token}) exceeds the experts ({self.num_experts})"
                )
        if bool(self.shared_experts) != bool(self.shared_expert_intermediate_size):
            raise ValueError("shared_experts and shared_expert_intermediate_size go together")
        return self

    def with_layers(self, layers: int) -> "ModelSpec":
        """This model with ``layers`` layers (the layers probe's cut models), validated anew: a
        ``model_copy`` would keep the derived figures already cached on this one (dense_layers...).
        Per-layer windows repeat their pattern; MoE layers past the cut are dropped."""
        data = self.model_dump()
        data["num_hidden_layers"] = layers
        if self.layer_windows is not None:
            data["layer_windows"] = tuple(self.layer_windows[i % len(self.layer_windows)] for i in range(layers))
        data["moe_layer_indices"] = tuple(i for i in self.moe_layer_indices if i < layers)
        return type(self)(**data)

    # ---- layer layout ----
    @cached_property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return len(self.moe_layer_indices)

    @cached_property
    def dense_layers(self) -> int:
        return self.num_hidden_layers - self.moe_layers

    @cached_property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @cached_property
    def kv_dim(self) -> int:
        """Width of the k (or v) projection of GQA attention."""
        return self.num_key_value_heads * self.head_dim

    # ---- attention, per layer (every layer has the same attention shape) ----
    @cached_property
    def attention_params_per_layer(self) -> int:
        """Weights of the attention matmuls of one layer (q, k, v, o; MLA: q_a/q_b or q, kv_a, kv_b, o)."""
        h, n = self.hidden_size, self.num_attention_heads
        if self.attention_kind == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = h * n * qk if self.q_lora_rank is None else h * self.q_lora_rank + self.q_lora_rank * n * qk
            kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_b = self.kv_lora_rank * n * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_a + kv_b + n * self.v_head_dim * h
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h

    @cached_property
    def attention_bias_params_per_layer(self) -> int:
        """Attention biases of one layer (MLA: q_a, kv_a and o carry one with attention_bias)."""
        if self.attention_kind == "mla":
            if not self.qkv_bias:
                return 0
            q = self.q_lora_rank or 0
            return q + self.kv_lora_rank + self.qk_rope_head_dim + (self.hidden_size if self.o_bias else 0)
        return (self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0) + (self.hidden_size if self.o_bias else 0)

    @cached_property
    def attention_norm_params_per_layer(self) -> int:
        """q/k norms (per head or whole projection) and MLA's q_a and kv_a norms, one layer."""
        if self.attention_kind == "mla":
            return (self.q_lora_rank or 0) + self.kv_lora_rank
        return {"none": 0, "head": 2 * self.head_dim, "full": self.q_dim + self.kv_dim}[self.qk_norm]

    @cached_property
    def sink_params_per_layer(self) -> int:
        return self.num_attention_heads if self.attention_sinks else 0

    # ---- MLP, per layer ----
    def _mlp_params(self, width: int) -> int:
        return (3 if self.mlp_gated else 2) * self.hidden_size * width

    def _mlp_bias(self, width: int) -> int:
        return (2 if self.mlp_gated else 1) * width + self.hidden_size

    @cached_property
    def dense_mlp_params(self) -> int:
        """Weights of a dense layer's MLP."""
        return self._mlp_params(self.intermediate_size)

    @cached_property
    def dense_mlp_bias_params(self) -> int:
        return self._mlp_bias(self.intermediate_size) if self.mlp_bias else 0

    @cached_property
    def routed_expert_weight_params(self) -> int:
        """Weights of ONE routed expert in ONE layer (gate, up and down: experts are gated)."""
        return 3 * self.hidden_size * self.moe_intermediate_size if self.moe_layers else 0

    @cached_property
    def routed_expert_bias_params(self) -> int:
        return 2 * self.moe_intermediate_size + self.hidden_size if self.moe_layers and self.expert_bias else 0

    @cached_property
    def routed_expert_params(self) -> int:
        """Parameters of ONE routed expert in ONE layer, biases included (0 for a dense model)."""
        return self.routed_expert_weight_params + self.routed_expert_bias_params

    @cached_property
    def shared_expert_params(self) -> int:
        """Weights of a MoE layer's shared experts (one gated MLP of their total width)."""
        return 3 * self.hidden_size * self.shared_expert_intermediate_size

    @cached_property
    def shared_expert_bias_params(self) -> int:
        if not (self.mlp_bias and self.shared_expert_intermediate_size):
            return 0
        return 2 * self.shared_expert_intermediate_size + self.hidden_size

    @cached_property
    def router_params(self) -> int:
        """A MoE layer's router: hidden x experts, plus a bias (gpt-oss)."""
        if not self.moe_layers:
            return 0
        return self.num_experts * self.hidden_size + (self.num_experts if self.router_bias else 0)

    @cached_property
    def router_buffer_params(self) -> int:
        """Per-expert buffers a MoE layer keeps beside its parameters (DeepSeek-V3's e_score_correction_bias)."""
        return self.num_experts if self.router_correction_bias and self.moe_layers else 0

    # ---- whole-model counts ----
    @cached_property
    def linear_params_per_layer(self) -> int:
        """Weights of the matmuls of one dense layer: attention and the MLP (the dense-model figure)."""
        return self.attention_params_per_layer + self.dense_mlp_params

    @cached_property
    def bias_params_per_layer(self) -> int:
        """Biases of one dense layer (attention and MLP)."""
        return self.attention_bias_params_per_layer + self.dense_mlp_bias_params

    @cached_property
    def layer_norm_params_per_layer(self) -> int:
        return self.norms_per_layer * self.hidden_size * (2 if self.norm_bias else 1)

    @cached_property
    def norm_params(self) -> int:
        """Every norm's weights (and LayerNorm biases): the layers' norms, q/k or MLA norms, the final norm."""
        per_layer = self.layer_norm_params_per_layer + self.attention_norm_params_per_layer
        return self.num_hidden_layers * per_layer + self.hidden_size * (2 if self.norm_bias else 1)

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @cached_property
    def lm_head_params(self) -> int:
        """Weights of the LM-head matmul (shared with the embedding when tied)."""
        return self.vocab_size * self.hidden_size

    @cached_property
    def lm_head_bias_params(self) -> int:
        return self.vocab_size if self.lm_head_bias else 0

    @cached_property
    def body_linear_params(self) -> int:
        """Weights of every matmul in the layers, all experts included (routers are not counted here)."""
        moe = self.num_experts * self.routed_expert_weight_params + self.shared_expert_params
        return (
            self.num_hidden_layers * self.attention_params_per_layer
            + self.dense_layers * self.dense_mlp_params
            + self.moe_layers * moe
        )

    @cached_property
    def _other_params(self) -> int:
        """Everything stored in the other dtype: biases, norms, sinks, routers (untied embedding and
        buffers apart)."""
        moe = (
            self.num_experts * self.routed_expert_bias_params
            + self.router_params
            + self.shared_expert_bias_params
        )
        return (
            self.num_hidden_layers * (self.attention_bias_params_per_layer + self.sink_params_per_layer)
            + self.dense_layers * self.dense_mlp_bias_params
            + self.moe_layers * moe
            + self.norm_params
            + self.lm_head_bias_params
        )

    @cached_property
    def param_count(self) -> int:
        """Parameters as transformers counts them (a tied embedding once; buffers not counted)."""
        embedding = 0 if self.tie_word_embeddings else self.embedding_params
        return self.body_linear_params + self.lm_head_params + self._other_params + embedding

    @cached_property
    def active_param_count(self) -> int:
        """Parameters a token uses: all but the routed experts it is not routed to (and the embedding
        table's other rows: the embedding counts in full, as published "active" figures do)."""
        idle = self.moe_layers * (self.num_experts - self.experts_per_token) * self.routed_expert_params
        return self.param_count - idle

    # ---- bytes ----
    def _weight_rates(self, weight_dtype: str, other_dtype: str) -> tuple[float, float, float, float]:
        """Bytes per weight of (block matrices, routed experts, LM head, untied embedding) in weight
        format ``weight_dtype`` (roofline.units.weight_storage_bytes: true bits, scales included;
        formats that leave the head or embedding unquantised say so). A checkpoint whose own format
        quantises only its experts (gpt-oss: ``native_expert_format`` mxfp4) keeps the rest in
        ``other_dtype`` when given that format."""
        from roofline.units import weight_dtype_name, weight_storage_bytes

        rates = weight_storage_bytes(weight_dtype)
        other = dtype_bytes(other_dtype)
        embedding = rates.embedding if rates.embedding is not None else other
        if self.native_expert_format is not None and weight_dtype_name(weight_dtype) == self.native_expert_format:
            return other, rates.linear, other, other
        return rates.linear, rates.linear, rates.lm_head, embedding

    def weight_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Resident weight bytes, every expert included. Matmul weights and the LM head are stored in
        ``weight_dtype`` (a weight format of roofline/formats.py, at its true bits per weight for each
        tensor category; routed experts in ``weight_dtype`` too, see ``native_expert_format``); norms,
        biases, sinks, routers, buffers in ``other_dtype``; an untied embedding table in ``other_dtype``
        unless the format stores it (llama.cpp's)."""
        linear_b, expert_b, head_b, embed_b = self._weight_rates(weight_dtype, other_dtype)
        ob = dtype_bytes(other_dtype)
        experts = self.moe_layers * self.num_experts * self.routed_expert_weight_params
        other = self._other_params + self.moe_layers * self.router_buffer_params
        total = (self.body_linear_params - experts) * linear_b + experts * expert_b + self.lm_head_params * head_b
        if not self.tie_word_embeddings:
            total += self.embedding_params * embed_b
        return total + other * ob

    def decode_weight_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Weight bytes one decode step reads when every expert is touched: everything but an untied
        embedding table (of which a step reads only the batch's rows)."""
        total = self.weight_bytes(weight_dtype, other_dtype)
        if not self.tie_word_embeddings:
            total -= self.embedding_params * self._weight_rates(weight_dtype, other_dtype)[3]
        return total

    def routed_expert_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Bytes of ONE routed expert in ONE layer: weights in ``weight_dtype``, biases in ``other_dtype``."""
        return (self.routed_expert_weight_params * self._weight_rates(weight_dtype, other_dtype)[1]
                + self.routed_expert_bias_params * dtype_bytes(other_dtype))

    def all_routed_expert_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Bytes of every routed expert of every MoE layer (the part of ``decode_weight_bytes`` a step
        reads only where its tokens were routed)."""
        return self.moe_layers * self.num_experts * self.routed_expert_bytes(weight_dtype, other_dtype)

    # ---- attention layout, KV cache ----
    @cached_property
    def windows(self) -> tuple[int | None, ...]:
        return self.layer_windows if self.layer_windows is not None else (None,) * self.num_hidden_layers

    @cached_property
    def attention_groups(self) -> tuple[AttentionGroup, ...]:
        """The layers grouped by window (full-attention layers first, then windows ascending)."""
        n = self.num_attention_heads
        if self.attention_kind == "mla":
            latent = self.kv_lora_rank + self.qk_rope_head_dim
            shape = dict(kind="mla", q_heads=n, kv_heads=1, head_dim=latent, kv_elements_per_token=latent,
                         flop_per_pair=2 * n * latent + 2 * n * self.kv_lora_rank)
        else:
            shape = dict(kind="gqa", q_heads=n, kv_heads=self.num_key_value_heads, head_dim=self.head_dim,
                         kv_elements_per_token=2 * self.kv_dim, flop_per_pair=4 * self.q_dim)
        by_window: dict[int | None, list[int]] = {}
        for i, w in enumerate(self.windows):
            by_window.setdefault(w, []).append(i)
        order = sorted(by_window, key=lambda w: (w is not None, w or 0))
        return tuple(
            AttentionGroup(layers=len(by_window[w]), window=w, sinks=self.attention_sinks,
                           indices=tuple(by_window[w]), **shape)
            for w in order
        )

    @cached_property
    def kv_elements_per_token(self) -> int:
        """Cached elements one token adds over all layers (no window applied)."""
        return sum(g.layers * g.kv_elements_per_token for g in self.attention_groups)

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> float:
        """KV-cache bytes one token adds, every layer, windows ignored (a short context's rate)."""
        return self.kv_elements_per_token * dtype_bytes(kv_dtype)

    def kv_bytes(self, context_tokens, kv_dtype: str = "bf16"):
        """KV-cache bytes ONE sequence holds at ``context_tokens`` (scalar or array): each windowed
        layer keeps at most its window. Equals ``context_tokens * kv_bytes_per_token`` up to the
        smallest window."""
        c = np.asarray(context_tokens, dtype=float)
        total = np.zeros_like(c)
        for g in self.attention_groups:
            held = c if g.window is None else np.minimum(c, g.window)
            total = total + g.layers * g.kv_elements_per_token * held
        total = total * dtype_bytes(kv_dtype)
        return float(total) if total.ndim == 0 else total

    def logits_bytes_per_position(self, logits_dtype: str = "bf16") -> float:
        return self.vocab_size * dtype_bytes(logits_dtype)

    # ---- FLOPs ----
    @cached_property
    def lm_head_flop_per_position(self) -> float:
        """The LM head for one position: 2 per weight, plus its bias (GPT-J)."""
        return float(2 * self.lm_head_params + self.lm_head_bias_params)

    @cached_property
    def linear_flop_per_token(self) -> float:
        """FLOPs of the weight matmuls one token uses (2 per weight, one add per bias): attention,
        dense MLPs, the top-k routed experts, shared experts, routers and the LM head. For a dense
        model the lesson's ``2P``; for a MoE model the ACTIVE FLOPs."""
        attention = 2 * self.attention_params_per_layer + self.attention_bias_params_per_layer
        dense = 2 * self.dense_mlp_params + self.dense_mlp_bias_params
        routed = 2 * self.routed_expert_weight_params + self.routed_expert_bias_params
        router = 2 * self.num_experts * self.hidden_size + (self.num_experts if self.router_bias else 0)
        moe = (
            self.experts_per_token * routed
            + 2 * self.shared_expert_params + self.shared_expert_bias_params
            + router
        )
        body = self.num_hidden_layers * attention + self.dense_layers * dense + self.moe_layers * moe
        return float(body) + self.lm_head_flop_per_position

    @cached_property
    def body_linear_flop_per_token(self) -> float:
        """As ``linear_flop_per_token`` without the LM head (prefill computes it only where logits are kept)."""
        return self.linear_flop_per_token - self.lm_head_flop_per_position

    @cached_property
    def attention_flop_per_context_token(self) -> float:
        """FLOPs of one query token against one cached token, summed over all layers (no window applied)."""
        return float(sum(g.layers * g.flop_per_pair for g in self.attention_groups))

    def attention_flop_per_query(self, context_tokens):
        """Attention FLOPs of one query token at ``context_tokens`` (scalar or array), windows applied."""
        c = np.asarray(context_tokens, dtype=float)
        total = np.zeros_like(c)
        for g in self.attention_groups:
            seen = c if g.window is None else np.minimum(c, g.window)
            total = total + g.layers * g.flop_per_pair * seen
        return float(total) if total.ndim == 0 else total

    # ---- activations ----
    @cached_property
    def active_intermediate_per_layer(self) -> tuple[int, ...]:
        """The MLP width a token passes through in each layer (MoE: top-k experts plus shared experts)."""
        moe = set(self.moe_layer_indices)
        moe_width = self.experts_per_token * self.moe_intermediate_size + self.shared_expert_intermediate_size
        return tuple(moe_width if i in moe else self.intermediate_size for i in range(self.num_hidden_layers))

    @cached_property
    def activation_width_per_token(self) -> int:
        """Sum over layers of (hidden + active intermediate): elements of the per-token activations."""
        return self.num_hidden_layers * self.hidden_size + sum(self.active_intermediate_per_layer)

    @cached_property
    def widest_intermediate(self) -> int:
        """The largest active intermediate width of any layer (the prefill's transient)."""
        return max(self.active_intermediate_per_layer)

    @cached_property
    def attention_label(self) -> str:
        """mha, gqa, mqa or mla (for display)."""
        if self.attention_kind == "mla":
            return "mla"
        kv = self.num_key_value_heads
        return "mha" if kv == self.num_attention_heads else "mqa" if kv == 1 else "gqa"

    def summary(self, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> dict:
        return {
            "model": self.name,
            "model_type": self.model_type,
            "params": self.param_count,
            "active_params": self.active_param_count,
            "weight_bytes": self.weight_bytes(weight_dtype),
            "kv_bytes_per_token": self.kv_bytes_per_token(kv_dtype),
            "logits_bytes_per_position": self.logits_bytes_per_position(),
            "num_hidden_layers": self.num_hidden_layers,
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "attention": self.attention_label,
            "windows": sorted({w for w in self.windows if w is not None}),
            "moe_layers": self.moe_layers,
            "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
            "tie_word_embeddings": self.tie_word_embeddings,
        }

    # ---- construction ----
    @classmethod
    def from_config_dict(cls, config: dict, name: str) -> "ModelSpec":
        """Build from the dict of a Hugging Face config.json; errors name the field."""
        fields = read_family(config, name)
        try:
            return cls(name=name, **fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "config"
            msg = err["msg"].removeprefix("Value error, ")
            raise RooflineError(f"{name}: {loc}: {msg}" if loc != "config" else f"{name}: {msg}") from None


def supported_model_types() -> list[str]:
    return sorted(FAMILIES)


@lru_cache(maxsize=1)
def catalog_index() -> dict:
    """The catalog index: name -> {hf_repos, family, params, source}."""
    path = CATALOG_DIR / "catalog.json"
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["models"]


def catalog_names(include_test: bool = False) -> list[str]:
    """Catalog models; the tiny test-only configs (for CPU runs of the harness) on request."""
    return sorted(n for n, e in catalog_index().items() if include_test or not e.get("test_only"))


def resolve_model_config_path(name_or_path: str) -> Path:
    """A catalog name, a catalog model's HF repo id, a config.json path or a folder holding one."""
    index = catalog_index()
    key = name_or_path.strip()
    lowered = key.lower()
    if lowered in index:
        return CATALOG_DIR / lowered / "config.json"
    for name, entry in index.items():
        if any(lowered == repo.lower() for repo in entry.get("hf_repos", [])):
            return CATALOG_DIR / name / "config.json"
    path = Path(key).expanduser()
    is_dir, is_file = probe_path(key)
    if is_dir:
        cfg = path / "config.json"
        if not cfg.is_file():
            raise RooflineError(f"model folder {short(key)} holds no config.json")
        return cfg
    if is_file:
        return path
    if len(key) > 255:
        raise RooflineError(f"model {short(key)!r}: no catalog name, repo id or file is that long")
    if path.suffix == ".json" or "/" in key and not _looks_like_repo(key, index):
        raise RooflineError(f"model file {short(key)} not found")
    candidates = list(index) + [r for e in index.values() for r in e.get("hf_repos", [])]
    near = difflib.get_close_matches(lowered, [c.lower() for c in candidates], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else "; `roofline models` lists them"
    raise RooflineError(f"unknown model {short(key)!r}{hint}")


def _looks_like_repo(key: str, index: dict) -> bool:
    return key.count("/") == 1 and not key.startswith((".", "/", "~"))


@lru_cache(maxsize=64)
def load_model(name_or_path: str) -> ModelSpec:
    """Resolve ``name_or_path`` (see resolve_model_config_path) and read its config.json."""
    from roofline.atomic import read_json

    path = resolve_model_config_path(name_or_path)
    config = read_json(path, "model config")
    in_catalog = path.parent.parent == CATALOG_DIR
    name = path.parent.name if in_catalog else str(name_or_path)
    return ModelSpec.from_config_dict(config, name)


# ---------------------------------------------------------------------------------------------
# Reading config.json, family by family. Each reader follows its family's configuration_*.py
# (defaults, derived fields) and modeling_*.py (which tensors exist) in transformers 5.24; the
# comments name the quirks. Keys a model cannot do without must be present; the others take the
# family's transformers default, as AutoConfig would.
# ---------------------------------------------------------------------------------------------

_MISSING = object()
_ROPE_TYPES = {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "su"}  # su: Phi-3's old longrope
_LAYER_TYPES = {"full_attention", "sliding_attention"}


class _Config:
    """A config.json dict read with one family's defaults; every error names the field."""

    def __init__(self, raw: dict, name: str, defaults: dict, prefix: str = ""):
        self.raw, self.name, self.defaults, self.prefix = raw, name, defaults, prefix

    def fail(self, key: str, what: str) -> RooflineError:
        return RooflineError(f"{self.name}: config.json: {self.prefix}{key} {what}")

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, default=_MISSING):
        """The value as written (null included); absent: the family's default."""
        if key in self.raw:
            return self.raw[key]
        if default is not _MISSING:
            return default
        return self.defaults.get(key)

    def int(self, key: str, default=_MISSING, minimum: int = 1) -> int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise self.fail(key, f"must be {rule}, got {value!r}")
        return value

    def opt_int(self, key: str, default=_MISSING) -> int | None:
        """An integer, or None where the field is null or absent without a default."""
        value = self.get(key, default)
        return None if value is None else self.int(key, default)

    def bool(self, key: str, default=_MISSING) -> bool:
        value = self.get(key, default)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def require(self, *keys: str) -> None:
        """Keys a model cannot do without, unless the family's config class defaults them."""
        missing = [k for k in keys if k not in self.raw and self.defaults.get(k) is None]
        if missing:
            raise RooflineError(f"{self.name}: config.json lacks {', '.join(self.prefix + k for k in missing)}")


def _check_rope(c: _Config) -> None:
    """rope_scaling (or rope_parameters): a type transformers knows. RoPE changes no count."""
    for key in ("rope_scaling", "rope_parameters"):
        rope = c.get(key, None)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            raise c.fail(key, f"must be an object, got {rope!r}")
        nested = rope and all(isinstance(v, dict) for v in rope.values())
        for sub, params in (rope.items() if nested else [("", rope)]):
            kind = params.get("rope_type", params.get("type", "default"))
            if kind not in _ROPE_TYPES:
                where = f"{key}.{sub + '.' if sub else ''}type"
                raise c.fail(where, f"{kind!r} is not supported (known: {', '.join(sorted(_ROPE_TYPES))})")


def _heads(c: _Config, heads_key: str = "num_attention_heads", kv_key: str | None = "num_key_value_heads",
           hidden_key: str = "hidden_size", head_dim_key: str | None = "head_dim") -> dict:
    """Query/KV heads and head_dim: KV heads default to the query heads (null too); head_dim to
    hidden // heads (transformers reads an explicit head_dim even where its config class has none)."""
    hidden, heads = c.int(hidden_key), c.int(heads_key)
    kv = c.opt_int(kv_key) if kv_key else None
    kv = heads if kv is None else kv
    head_dim = c.opt_int(head_dim_key) if head_dim_key else None
    if head_dim is None:
        if hidden % heads:
            raise c.fail(hidden_key, f"({hidden}) is not a multiple of {heads_key} ({heads})")
        head_dim = hidden // heads
    return {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim}


def _windows_from_layer_types(c: _Config, layers: int, window: int | None, default_types) -> tuple | None:
    """Per-layer windows from ``layer_types`` (or the family's default list): a sliding layer keeps
    ``sliding_window`` tokens; a null sliding_window means no window anywhere."""
    types = c.get("layer_types", None)
    if types is None:
        types = default_types
    elif not isinstance(types, list) or len(types) != layers:
        raise c.fail("layer_types", f"must list one type for each of the {layers} layers")
    for i, t in enumerate(types):
        if t not in _LAYER_TYPES:
            raise c.fail(f"layer_types[{i}]", f"{t!r} is not supported (known: {', '.join(sorted(_LAYER_TYPES))})")
    if window is None or "sliding_attention" not in types:
        return None
    return tuple(window if t == "sliding_attention" else None for t in types)


def _all_layers(layers: int, window: int | None) -> tuple | None:
    return None if window is None else (window,) * layers


def _quantization(c: _Config) -> dict:
    """The checkpoint's storage format (quantization_config.quant_method): transformers' mxfp4
    quantizer converts only the routed experts (gpt-oss); other methods name every linear layer."""
    q = c.get("quantization_config", None)
    if q is None:
        return {}
    if not isinstance(q, dict) or not isinstance(q.get("quant_method"), str):
        raise c.fail("quantization_config.quant_method", "must be a string")
    method = q["quant_method"]
    if method == "mxfp4":
        return {"native_expert_format": "mxfp4"}
    return {"native_weight_format": method}


def _base(c: _Config, mt: str, defaults_tie: bool = False) -> dict:
    c.require("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    _check_rope(c)
    out = {
        "model_type": mt,
        "num_hidden_layers": c.int("num_hidden_layers"),
        "vocab_size": c.int("vocab_size"),
        "tie_word_embeddings": c.bool("tie_word_embeddings", c.defaults.get("tie_word_embeddings", defaults_tie)),
        "max_position_embeddings": c.opt_int("max_position_embeddings"),
        **_heads(c),
        **_quantization(c),
    }
    return out


def _dense(c: _Config) -> dict:
    c.require("intermediate_size")
    return {"intermediate_size": c.int("intermediate_size")}


def _read_llama(c: _Config, mt: str) -> dict:
    bias = c.bool("attention_bias", False)
    return {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "mlp_bias": c.bool("mlp_bias", False)}


def _read_mistral(c: _Config, mt: str) -> dict:
    # MistralConfig: sliding_window defaults to 4096 and applies to every layer (null: none).
    out = {**_base(c, mt), **_dense(c), "qkv_bias": False, "o_bias": False}
    out["layer_windows"] = _all_layers(out["num_hidden_layers"], c.opt_int("sliding_window"))
    return out


def _qwen_windows(c: _Config, layers: int) -> tuple | None:
    # Qwen2/Qwen3: use_sliding_window=false nulls sliding_window; otherwise the layers from
    # max_window_layers on are sliding (unless layer_types says otherwise).
    window = c.opt_int("sliding_window") if c.bool("use_sliding_window") else None
    start = c.int("max_window_layers", minimum=0) if window is not None else layers
    return _windows_from_layer_types(c, layers, window, [
        "sliding_attention" if i >= start else "full_attention" for i in range(layers)])


def _read_qwen2(c: _Config, mt: str) -> dict:
    # Qwen2: q, k and v always carry a bias, o never does.
    out = {**_base(c, mt), **_dense(c), "qkv_bias": True, "o_bias": False}
    out["layer_windows"] = _qwen_windows(c, out["num_hidden_layers"])
    return out


def _read_qwen3(c: _Config, mt: str) -> dict:
    # Qwen3: attention_bias on q, k, v and o; RMSNorm on each head's q and k.
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "qk_norm": "head"}
    out["layer_windows"] = _qwen_windows(c, out["num_hidden_layers"])
    return out


def _read_qwen3_moe(c: _Config, mt: str) -> dict:
    # Qwen3-MoE: a layer is sparse unless listed in mlp_only_layers, when (i + 1) % decoder_sparse_step
    # == 0; dense layers use intermediate_size. The window (use_sliding_window) covers every layer.
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "qk_norm": "head"}
    layers = out["num_hidden_layers"]
    window = c.opt_int("sliding_window") if c.bool("use_sliding_window") else None
    out["layer_windows"] = _all_layers(layers, window)
    experts = c.int("num_experts", minimum=0)
    step = c.int("decoder_sparse_step")
    dense = c.get("mlp_only_layers") or []
    if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
        raise c.fail("mlp_only_layers", f"must be a list of layer indices, got {dense!r}")
    moe = tuple(i for i in range(layers) if i not in dense and experts > 0 and (i + 1) % step == 0)
    if moe:
        out.update(moe_layer_indices=moe, num_experts=experts, experts_per_token=c.int("num_experts_per_tok"),
                   moe_intermediate_size=c.int("moe_intermediate_size"))
    return out


def _read_mixtral(c: _Config, mt: str) -> dict:
    # Mixtral: every layer sparse; intermediate_size is one expert's width; no dense MLP.
    out = {**_base(c, mt), **_dense(c), "qkv_bias": False, "o_bias": False}
    layers = out["num_hidden_layers"]
    out["layer_windows"] = _all_layers(layers, c.opt_int("sliding_window"))
    out.update(moe_layer_indices=tuple(range(layers)), num_experts=c.int("num_local_experts"),
               experts_per_token=c.int("num_experts_per_tok"), moe_intermediate_size=out["intermediate_size"])
    return out


def _read_gpt_oss(c: _Config, mt: str) -> dict:
    # gpt-oss: every layer sparse (intermediate_size = one expert); router and experts carry biases;
    # q, k, v, o biases (attention_bias, default true); one sink logit per head; layer_types
    # alternate sliding (128) and full, sliding first.
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "attention_sinks": True}
    layers = out["num_hidden_layers"]
    out["layer_windows"] = _windows_from_layer_types(c, layers, c.opt_int("sliding_window"), [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)])
    out.update(moe_layer_indices=tuple(range(layers)), num_experts=c.int("num_local_experts"),
               experts_per_token=c.int("num_experts_per_tok"), moe_intermediate_size=out["intermediate_size"],
               router_bias=True, expert_bias=True)
    return out


def _read_phi3(c: _Config, mt: str) -> dict:
    # Phi-3: fused qkv_proj and gate_up_proj (same counts as separate q, k, v, gate, up); no biases;
    # sliding_window (2047 in Phi-3-mini) applies to every layer.
    out = {**_base(c, mt), **_dense(c), "qkv_bias": False, "o_bias": False}
    out["layer_windows"] = _all_layers(out["num_hidden_layers"], c.opt_int("sliding_window"))
    return out


def _read_gemma2(c: _Config, mt: str) -> dict:
    # Gemma 2: four RMSNorms a layer (pre/post attention, pre/post MLP); GeGLU MLP; tied head;
    # layer_types alternate sliding (4096) and full, sliding first.
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "norms_per_layer": 4}
    layers = out["num_hidden_layers"]
    out["layer_windows"] = _windows_from_layer_types(c, layers, c.opt_int("sliding_window"), [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)])
    return out


def _read_gemma3_text(c: _Config, mt: str) -> dict:
    # Gemma 3: as Gemma 2 plus per-head q/k norms; every sliding_window_pattern-th layer (6) is full.
    if c.bool("use_bidirectional_attention"):
        raise c.fail("use_bidirectional_attention", "true is not supported (not a causal decoder)")
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "norms_per_layer": 4, "qk_norm": "head"}
    layers = out["num_hidden_layers"]
    pattern = c.int("sliding_window_pattern", c.get("_sliding_window_pattern", 6))
    out["layer_windows"] = _windows_from_layer_types(c, layers, c.opt_int("sliding_window"), [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)])
    return out


def _read_gemma3(c: _Config, mt: str) -> dict:
    # Gemma 3 multimodal (Gemma3ForConditionalGeneration): the text model is text_config with
    # Gemma3TextConfig's defaults (the published configs name only what differs).
    text = c.get("text_config", None)
    if not isinstance(text, dict):
        raise c.fail("text_config", "must be an object (the text model's config)")
    tc = _Config(text, c.name, _DEFAULTS["gemma3_text"], prefix="text_config.")
    out = _read_gemma3_text(tc, "gemma3")
    return out


def _read_olmo2(c: _Config, mt: str) -> dict:
    # OLMo 2: norms after attention and after the MLP only (2 a layer); q/k RMSNorm over the whole
    # projection (q_dim and kv_dim wide).
    bias = c.bool("attention_bias")
    return {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "qk_norm": "full"}


def _read_internlm2(c: _Config, mt: str) -> dict:
    # InternLM2 (remote code, modeling_internlm2.py): wqkv (hidden -> (heads + 2 kv_heads) * head_dim)
    # and wo carry a bias when config "bias" (default true); w1, w3, w2 (SwiGLU) never do;
    # attention_norm, ffn_norm and the final norm are RMSNorms; the head (output) is untied.
    bias = c.bool("bias")
    return {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias}


def _read_gpt_neox(c: _Config, mt: str) -> dict:
    # GPT-NeoX/Pythia: fused query_key_value (3 x hidden) and dense with attention_bias (default
    # true); plain MLP (dense_h_to_4h, dense_4h_to_h) always with biases; two LayerNorms a layer;
    # use_parallel_residual (default true) changes the data flow, not the counts.
    bias = c.bool("attention_bias")
    out = {**_base(c, mt), **_dense(c), "qkv_bias": bias, "o_bias": bias, "mlp_bias": True, "mlp_gated": False,
           "norm_bias": True, "parallel_attention": c.bool("use_parallel_residual")}
    if out["num_key_value_heads"] != out["num_attention_heads"]:
        raise c.fail("num_key_value_heads", "is not supported: GPT-NeoX attention has one KV head per query head")
    return out


def _read_gptj(c: _Config, mt: str) -> dict:
    # GPT-J: n_embd/n_layer/n_head (hidden_size etc. accepted too); q, k, v, out_proj without bias;
    # fc_in/fc_out (n_inner, default 4 x n_embd) with biases; one LayerNorm a layer (attention and
    # MLP in parallel); the LM head carries a bias.
    alias = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
             "max_position_embeddings": "n_positions"}
    raw = dict(c.raw)
    for hf, gptj in alias.items():
        if gptj in raw:
            raw[hf] = raw.pop(gptj)
    g = _Config(raw, c.name, {**c.defaults, **{k: c.defaults.get(v) for k, v in alias.items()}}, c.prefix)
    g.require("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    _check_rope(g)
    hidden = g.int("hidden_size")
    out = {
        "model_type": mt, "num_hidden_layers": g.int("num_hidden_layers"), "vocab_size": g.int("vocab_size"),
        "tie_word_embeddings": g.bool("tie_word_embeddings", False),
        "max_position_embeddings": g.opt_int("max_position_embeddings"),
        **_heads(g, kv_key=None, head_dim_key=None), **_quantization(g),
        "intermediate_size": g.opt_int("n_inner") or 4 * hidden,
        "qkv_bias": False, "o_bias": False, "mlp_bias": True, "mlp_gated": False, "norm_bias": True,
        "norms_per_layer": 1, "lm_head_bias": True, "parallel_attention": True,
    }
    return out


def _read_falcon(c: _Config, mt: str) -> dict:
    # Falcon: fused query_key_value. new_decoder_architecture: num_kv_heads KV heads (transformers'
    # own cache then stores them broadcast to every query head; the model's KV is num_kv_heads);
    # otherwise multi_query (default true): one KV head; else one per query head. bias covers
    # qkv, dense and both MLP matrices (plain MLP, ffn_hidden_size default 4 x hidden). LayerNorms:
    # two a layer without parallel_attn or with new_decoder_architecture (num_ln_in_parallel_attn
    # 2), else one. Tied head by default.
    c.require("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    _check_rope(c)
    hidden, heads = c.int("hidden_size"), c.int("num_attention_heads")
    if hidden % heads:
        raise c.fail("hidden_size", f"({hidden}) is not a multiple of num_attention_heads ({heads})")
    new = c.bool("new_decoder_architecture")
    if new:
        kv = c.opt_int("num_kv_heads")
        kv = heads if kv is None else kv
    else:
        kv = 1 if c.bool("multi_query") else heads
    parallel = c.bool("parallel_attn")
    ln = c.opt_int("num_ln_in_parallel_attn")
    if ln is None and new:
        ln = 2
    norms = 2 if not parallel or ln == 2 else 1
    bias = c.bool("bias")
    return {
        "model_type": mt, "num_hidden_layers": c.int("num_hidden_layers"), "vocab_size": c.int("vocab_size"),
        "tie_word_embeddings": c.bool("tie_word_embeddings"), "max_position_embeddings": c.opt_int("max_position_embeddings"),
        "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hidden // heads,
        "intermediate_size": c.opt_int("ffn_hidden_size") or 4 * hidden, **_quantization(c),
        "qkv_bias": bias, "o_bias": bias, "mlp_bias": bias, "mlp_gated": False, "norm_bias": True,
        "norms_per_layer": norms, "parallel_attention": parallel,
    }


def _read_deepseek(c: _Config, mt: str) -> dict:
    # DeepSeek-V2/V3: MLA (q_lora_rank null: one q_proj; kv_a -> kv_lora_rank + rope, kv_b
    # up-projects to every head's nope key and value); layers from first_k_dense_replace on are
    # MoE (n_routed_experts, top num_experts_per_tok, n_shared_experts shared experts as one MLP of
    # n_shared x moe_intermediate_size); routers have no bias (V3 keeps e_score_correction_bias as a
    # buffer); V2's mlp_bias covers dense MLPs and shared experts; attention_bias covers q_a, kv_a, o.
    # transformers ignores moe_layer_freq (every configuration published uses 1).
    out = {**_base(c, mt), **_dense(c)}
    bias = c.bool("attention_bias")
    freq = c.get("moe_layer_freq", 1)
    if freq != 1:
        raise c.fail("moe_layer_freq", f"{freq!r} is not supported (transformers builds every layer from "
                                        "first_k_dense_replace on as MoE)")
    layers = out["num_hidden_layers"]
    nope, rope, v = c.int("qk_nope_head_dim"), c.int("qk_rope_head_dim"), c.int("v_head_dim")
    out.update(attention_kind="mla", q_lora_rank=c.opt_int("q_lora_rank"), kv_lora_rank=c.int("kv_lora_rank"),
               qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=v, head_dim=nope + rope,
               qkv_bias=bias, o_bias=bias, mlp_bias=mt == "deepseek_v2" and c.bool("mlp_bias"))
    first = c.int("first_k_dense_replace", minimum=0)
    experts = c.int("n_routed_experts", minimum=0)
    moe = tuple(range(min(first, layers), layers)) if experts else ()
    if moe:
        if c.get("num_experts_per_tok") is None:
            raise RooflineError(f"{c.name}: config.json lacks num_experts_per_tok")
        moe_i = c.int("moe_intermediate_size")
        shared = c.int("n_shared_experts", minimum=0)
        out.update(moe_layer_indices=moe, num_experts=experts, experts_per_token=c.int("num_experts_per_tok"),
                   moe_intermediate_size=moe_i, shared_experts=shared, shared_expert_intermediate_size=shared * moe_i,
                   router_correction_bias=mt == "deepseek_v3")
    return out


#: transformers' defaults (configuration_*.py, 5.24) for the keys these readers take from them.
_DEFAULTS: dict[str, dict] = {
    "llama": {"tie_word_embeddings": False},
    "mistral": {"num_key_value_heads": 8, "sliding_window": 4096},
    "qwen2": {"num_key_value_heads": 32, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28},
    "qwen3": {"num_key_value_heads": 32, "head_dim": 128, "attention_bias": False, "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 28},
    "qwen3_moe": {"num_key_value_heads": 4, "attention_bias": False, "use_sliding_window": False,
                  "sliding_window": 4096, "decoder_sparse_step": 1, "moe_intermediate_size": 768,
                  "num_experts_per_tok": 8, "num_experts": 128, "mlp_only_layers": []},
    "mixtral": {"num_key_value_heads": 8, "sliding_window": None, "num_experts_per_tok": 2, "num_local_experts": 8},
    "gpt_oss": {"num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128, "num_local_experts": 128,
                "num_experts_per_tok": 4, "attention_bias": True},
    "phi3": {"sliding_window": None},
    "gemma2": {"num_key_value_heads": 4, "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False,
               "sliding_window": 4096},
    "gemma3_text": {"num_key_value_heads": 4, "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False,
                    "sliding_window": 4096, "use_bidirectional_attention": False, "vocab_size": 262208,
                    "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
                    "max_position_embeddings": 131072},
    "gemma3": {},
    "olmo2": {"attention_bias": False},
    "internlm2": {"bias": True},
    "gpt_neox": {"attention_bias": True, "use_parallel_residual": True},
    "gptj": {"n_inner": None},
    "falcon": {"num_kv_heads": None, "new_decoder_architecture": False, "multi_query": True, "parallel_attn": True,
               "bias": False, "ffn_hidden_size": None, "tie_word_embeddings": True, "num_ln_in_parallel_attn": None},
    "deepseek_v2": {"attention_bias": False, "mlp_bias": False, "first_k_dense_replace": 0, "kv_lora_rank": 512,
                    "q_lora_rank": 1536, "n_routed_experts": 64, "n_shared_experts": 2, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "num_experts_per_tok": None,
                    "moe_intermediate_size": 1407},
    "deepseek_v3": {"attention_bias": False, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
                    "n_routed_experts": 256, "n_shared_experts": 1, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 2048},
}

#: model_type -> reader. Gemma 3's multimodal config is read through its text_config.
FAMILIES = {
    "llama": _read_llama, "mistral": _read_mistral, "qwen2": _read_qwen2, "qwen3": _read_qwen3,
    "qwen3_moe": _read_qwen3_moe, "mixtral": _read_mixtral, "gpt_oss": _read_gpt_oss, "phi3": _read_phi3,
    "gemma2": _read_gemma2, "gemma3_text": _read_gemma3_text, "gemma3": _read_gemma3, "olmo2": _read_olmo2,
    "internlm2": _read_internlm2, "gpt_neox": _read_gpt_neox, "gptj": _read_gptj, "falcon": _read_falcon,
    "deepseek_v2": _read_deepseek, "deepseek_v3": _read_deepseek,
}


def read_family(config: dict, name: str) -> dict:
    """The normalised ModelSpec fields of a config.json dict (everything but ``name``)."""
    if not isinstance(config, dict):
        raise RooflineError(f"{name}: config.json must hold a JSON object")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise RooflineError(
            f"{name}: model_type {model_type!r} is not supported: not a decoder-only model we read "
            f"(supported: {', '.join(sorted(FAMILIES))})"
        )
    return FAMILIES[model_type](_Config(config, name, _DEFAULTS[model_type]), model_type)
