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
from roofline.catalogs import CATALOG_DIR, catalog_config_path
from roofline.config_families import FAMILIES, read_family
from roofline.errors import RooflineError
from roofline.units import dtype_bytes



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
    a score is a dot product over (kv_lora_rank + qk_rope_head_dim). ``prefill_flop_per_pair``: the
    same for a prompt's (query, key) pairs; MLA prefills decompressed, each head's keys and values
    built from the latent (as transformers, vLLM and the graph engine do): 2·q_heads·qk_head_dim
    for the scores and as much for the values, padded to the keys' width for flash kernels
    (qk_head_dim = nope + rope); GQA: ``flop_per_pair``.
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
    prefill_flop_per_pair: int = 0  # 0: flop_per_pair


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
                         flop_per_pair=2 * n * latent + 2 * n * self.kv_lora_rank,
                         prefill_flop_per_pair=4 * n * (self.qk_nope_head_dim + self.qk_rope_head_dim))
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
    def routed_expert_flop_per_token(self) -> float:
        """Matmul FLOPs of one token's k routed experts, all MoE layers (2 a weight; biases aside):
        the part of ``body_linear_flop_per_token`` a prefill runs as grouped GEMMs."""
        return float(self.moe_layers * self.experts_per_token * 2 * self.routed_expert_weight_params)

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
    def prefill_elementwise_elements(self) -> dict[str, float]:
        """Per prompt token, all layers: the elements a prefill's non-matmul kernels touch, by the
        kinds whose costs the prefill-kernels probe measures (roofline.probes.ELEMENTWISE_KINDS):
        the hidden width, the MLP's active intermediate (gated or plain), the queries' and keys'
        widths and the q/k norms' (queries + keys); gpt-oss's intermediate is its own kind (a
        clamped SwiGLU, about twice silu's cost per element); an expert's biases on its routed rows
        (gpt-oss) are gathered per row and added. An MLA layer's prefill decompresses its latent
        into per-head keys and values: its kinds are its own (roofline.probes.PROBED_KINDS: the
        roped elements, the heads' concatenations and padding, the output's copy, the latent)."""
        layers = float(self.num_hidden_layers)
        inter = float(sum(self.active_intermediate_per_layer))
        mla = self.attention_kind == "mla"
        q, kv = (0.0, 0.0) if mla else (layers * self.q_dim, layers * self.kv_dim)
        clamped = self.clamped_swiglu
        gated = inter if self.mlp_gated and not clamped else 0.0
        return {"hidden": layers * self.hidden_size, "gated_intermediate": gated,
                "plain_intermediate": 0.0 if self.mlp_gated else inter, "query": q, "key_value": kv,
                "qk_norm": q + kv if self.qk_norm != "none" else 0.0,
                "clamped_intermediate": inter if clamped else 0.0,
                "expert_bias": float(self.moe_layers * self.experts_per_token * self.routed_expert_bias_params),
                **self._mla_elements(layers)}

    @cached_property
    def clamped_swiglu(self) -> bool:
        """The MLP's activation is gpt-oss's clamped SwiGLU, ``(clamp(up) + 1) * (clamp(gate) *
        sigmoid(alpha clamp(gate)))``: more elementwise passes and intermediates than silu's."""
        return self.model_type == "gpt_oss"

    @cached_property
    def decode_layer_features(self) -> dict[str, int]:
        """Layers that have each decode-layer feature whose own kernels a decode step pays a fixed time
        for (roofline.probes.LAYER_FEATURES, the calibration's ``layer_feature_overhead_s``): the
        q/k norms (qwen3, gemma-3, olmo-2), MLA's absorbed decode (deepseek), a MoE layer's shared
        experts, and gpt-oss's MoE layer (its experts' biases gathered per routed row, the clamped
        SwiGLU, the attention sink joining the softmax)."""
        return {"qk_norm": self.num_hidden_layers if self.qk_norm != "none" else 0,
                "mla": self.num_hidden_layers if self.attention_kind == "mla" else 0,
                "shared_experts": self.moe_layers if self.shared_experts else 0,
                "biased_experts": self.moe_layers if self.expert_bias else 0}

    def _mla_elements(self, layers: float) -> dict[str, float]:
        """An MLA model's prefill elements of the MLA kinds, all layers (0 for GQA)."""
        if self.attention_kind != "mla":
            return {"mla_rope": 0.0, "mla_heads": 0.0, "mla_out": 0.0, "mla_latent": 0.0}
        n, rope = self.num_attention_heads, self.qk_rope_head_dim
        return {"mla_rope": layers * (n * rope + rope), "mla_heads": layers * n * (self.qk_nope_head_dim + rope),
                "mla_out": layers * n * self.v_head_dim,
                "mla_latent": layers * (self.kv_lora_rank + rope + (self.q_lora_rank or 0))}

    @cached_property
    def widest_intermediate(self) -> int:
        """The largest active intermediate width of any layer (the prefill's transient)."""
        return max(self.active_intermediate_per_layer)

    @cached_property
    def prefill_transient_width(self) -> float:
        """The prefill's transient MLP buffers per token, in units of a gated MLP's intermediate
        width: at its peak a gated MLP holds gate-up (2 I), the activation (I) and the product (I);
        a plain one (GPT-NeoX, GPT-J, Falcon) only up (I) and GELU(up) (I), half as much
        (measured: the three plain-MLP models' peaks in h200-graph-dense-call20.csv); gpt-oss's
        clamped SwiGLU, ``(clamp(up) + 1) * (clamp(gate) * sigmoid(alpha clamp(gate)))``, holds
        seven at its last product (gate-up, the clamped gate and up, up + 1, the gated sigmoid and
        the product: counted from the graph engine's calibrate/graph_engine._act), 7/4 as much."""
        if self.clamped_swiglu:
            return self.widest_intermediate * 7.0 / 4.0
        return self.widest_intermediate * (1.0 if self.mlp_gated else 0.5)

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
    key = name_or_path.strip()
    lowered = key.lower()
    in_catalog = catalog_config_path(key)
    if in_catalog is not None:
        return in_catalog
    index = catalog_index()
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
