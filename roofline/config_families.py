"""Reading a Hugging Face ``config.json``, family by family, into roofline.model_spec.ModelSpec's
fields (``read_family``). Plain Python, no pydantic: the GPU-side harness (calibrate.graph_engine)
builds its models from the same reading, so what it measures is what ``roofline predict`` prices.
"""

from __future__ import annotations

from roofline.errors import RooflineError

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
