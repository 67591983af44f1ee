"""Model shapes beyond the dense Llama/Qwen2 family: MoE, MLA, sliding windows, MQA, plain MLPs.

Every expected number below is derived by hand in the test from the config's shapes (or quoted
from the model's publisher, with the rounding it publishes), not read back from roofline.
"""

import json

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.model_spec import CATALOG_DIR, AttentionGroup, ModelSpec, catalog_index, catalog_names, load_model

BF16 = 2


# ---- KV cache, by hand ----
def test_mla_kv_is_the_latent_and_the_rope_key():
    # DeepSeek-V2-Lite: 27 layers cache kv_lora_rank (512) + qk_rope_head_dim (64) elements per token
    spec = load_model("deepseek-v2-lite")
    assert spec.kv_bytes_per_token("bf16") == 27 * (512 + 64) * 2 == 31_104
    assert spec.kv_bytes(10_000, "bf16") == 10_000 * 31_104  # no window
    assert spec.kv_bytes_per_token("fp8") == 27 * (512 + 64)
    (group,) = spec.attention_groups
    assert (group.kind, group.layers, group.kv_heads, group.q_heads, group.window) == ("mla", 27, 1, 16, None)
    # absorbed MLA: scores over the 576-wide latent+rope, weighted sum over the 512-wide latent, 16 heads
    assert group.flop_per_pair == 2 * 16 * 576 + 2 * 16 * 512
    assert spec.attention_flop_per_context_token == 27 * (2 * 16 * 576 + 2 * 16 * 512)


def test_gpt_oss_windowed_layers_hold_at_most_128_tokens():
    # gpt-oss-20b: 24 layers alternate sliding (window 128) and full; 8 KV heads x 64, keys and values
    spec = load_model("gpt-oss-20b")
    per_layer_token = 2 * 8 * 64 * BF16  # 2048 bytes
    assert spec.kv_bytes_per_token() == 24 * per_layer_token
    assert spec.kv_bytes(100) == 24 * 100 * per_layer_token == 4_915_200
    assert spec.kv_bytes(10_000) == 12 * 10_000 * per_layer_token + 12 * 128 * per_layer_token == 248_905_728
    full, sliding = spec.attention_groups
    assert (full.window, full.layers, full.indices[:3]) == (None, 12, (1, 3, 5))
    assert (sliding.window, sliding.layers, sliding.indices[:3]) == (128, 12, (0, 2, 4))
    assert full.sinks and sliding.sinks


def test_gemma2_at_ten_thousand_tokens():
    # gemma-2-9b: 42 layers, odd ones full, even ones sliding (4096); 8 KV heads x 256
    spec = load_model("gemma-2-9b")
    per_layer_token = 2 * 8 * 256 * BF16  # 8192 bytes
    assert spec.kv_bytes(10_000) == 21 * 10_000 * per_layer_token + 21 * 4096 * per_layer_token == 2_424_963_072
    assert spec.kv_bytes(4096) == 4096 * spec.kv_bytes_per_token()


def test_falcon_7b_is_multi_query():
    # falcon-7b: 71 query heads share ONE KV head of 64; 32 layers
    spec = load_model("falcon-7b")
    assert spec.kv_bytes_per_token() == 32 * 2 * 1 * 64 * BF16 == 8192
    assert spec.attention_label == "mqa"
    assert spec.attention_flop_per_context_token == 32 * 4 * 71 * 64


def test_kv_bytes_broadcasts_like_a_scalar_loop():
    spec = load_model("gemma-3-4b")
    c = np.array([[1, 500, 1024], [1025, 4000, 131_072]])
    assert np.array_equal(spec.kv_bytes(c, "fp8"), np.vectorize(lambda x: spec.kv_bytes(int(x), "fp8"))(c))
    assert np.array_equal(spec.attention_flop_per_query(c), np.vectorize(lambda x: spec.attention_flop_per_query(int(x)))(c))


@pytest.mark.parametrize("name", catalog_names(include_test=True))
def test_short_contexts_grow_at_the_per_token_rate(name):
    spec = load_model(name)
    smallest = min([w for w in spec.windows if w is not None] or [4096])
    assert spec.kv_bytes(smallest) == smallest * spec.kv_bytes_per_token()
    assert spec.kv_bytes(smallest + 1000) <= (smallest + 1000) * spec.kv_bytes_per_token()
    assert sum(g.layers for g in spec.attention_groups) == spec.num_hidden_layers


# ---- active FLOPs, by hand ----
def test_qwen3_30b_a3b_active_flops():
    # per layer: q 2048x(32x128), k and v 2048x(4x128), o (32x128)x2048; 8 of 128 experts of
    # gate/up/down 2048x768; a 128x2048 router. 48 layers and a 151936x2048 LM head; no biases.
    attention = 2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048
    experts = 8 * 3 * 2048 * 768
    router = 128 * 2048
    weights = 48 * (attention + experts + router) + 151_936 * 2048
    spec = load_model("qwen3-30b-a3b")
    assert spec.linear_flop_per_token == 2 * weights == 6_083_313_664
    assert spec.body_linear_flop_per_token == 2 * (weights - 151_936 * 2048)
    assert (spec.moe_layers, spec.num_experts, spec.experts_per_token, spec.shared_experts) == (48, 128, 8, 0)
    assert spec.routed_expert_params == 3 * 2048 * 768
    assert spec.activation_width_per_token == 48 * (2048 + 8 * 768)
    assert spec.widest_intermediate == 8 * 768


def test_mixtral_active_flops():
    # per layer: q and o 4096x4096, k and v 4096x1024; 2 of 8 experts of 3 x 4096x14336; router 8x4096
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    weights = 32 * (attention + 2 * 3 * 4096 * 14336 + 8 * 4096) + 32_000 * 4096
    assert load_model("mixtral-8x7b").linear_flop_per_token == 2 * weights == 25_497_174_016


def test_dense_flops_are_unchanged():
    spec = load_model("qwen2.5-1.5b")
    assert spec.linear_flop_per_token == spec.num_hidden_layers * (
        2 * spec.linear_params_per_layer + spec.bias_params_per_layer
    ) + 2 * spec.lm_head_params
    assert spec.moe_layers == spec.num_experts == spec.routed_expert_params == 0
    assert spec.routed_expert_bytes("bf16") == 0 and spec.widest_intermediate == spec.intermediate_size
    assert spec.activation_width_per_token == spec.num_hidden_layers * (spec.hidden_size + spec.intermediate_size)


def test_gpt_j_head_bias_and_plain_mlp():
    # GPT-J: one LayerNorm a layer; fc_in/fc_out (4 x 4096) with biases; LM head with a 50400 bias
    spec = load_model("gpt-j-6b")
    h, inter, v = 4096, 16384, 50400
    layer = 4 * h * h + 2 * h * inter + inter + h + 2 * h
    assert spec.param_count == 2 * v * h + v + 28 * layer + 2 * h
    assert spec.linear_flop_per_token == 28 * (2 * (4 * h * h + 2 * h * inter) + inter + h) + 2 * v * h + v
    assert spec.lm_head_flop_per_position == 2 * v * h + v


# ---- published totals, within their rounding (less than one unit of the last published digit:
# publishers round or truncate) ----
def _without_embedding(spec):
    return spec.active_param_count - spec.embedding_params


@pytest.mark.parametrize(
    "name, total_b, active_b, active, unit_b",
    [
        # Mistral: 46.7B total, 12.9B active (embedding counted)
        ("mixtral-8x7b", 46.7, 12.9, ModelSpec.active_param_count.func, 0.1),
        # Qwen3-30B-A3B card: 30.5B total, 3.3B activated (embedding counted: 3.35B; without it 3.04B)
        ("qwen3-30b-a3b", 30.5, 3.3, ModelSpec.active_param_count.func, 0.1),
        # OpenAI: gpt-oss-20b 20.91B total, 3.61B active; 120b 116.83B, 5.13B (embedding table not counted)
        ("gpt-oss-20b", 20.91, 3.61, _without_embedding, 0.01),
        ("gpt-oss-120b", 116.83, 5.13, _without_embedding, 0.01),
        # DeepSeek-V2-Lite: 15.7B total, 2.4B active (embedding not counted: 2.45B; with it 2.66B)
        ("deepseek-v2-lite", 15.7, 2.4, _without_embedding, 0.1),
        # DeepSeek-V3: 671B total, 37B active (MTP module left out, as the 671B leaves it out)
        ("deepseek-v3", 671, 37, _without_embedding, 1),
        # Qwen3-235B-A22B: 235B total, 22B active
        ("qwen3-235b-a22b", 235, 22, ModelSpec.active_param_count.func, 1),
    ],
)
def test_published_totals(name, total_b, active_b, active, unit_b):
    spec = load_model(name)
    assert abs(spec.param_count / 1e9 - total_b) < unit_b
    assert abs(active(spec) / 1e9 - active_b) < unit_b


def test_gpt_oss_keeps_its_mxfp4_experts_and_their_biases():
    spec = load_model("gpt-oss-20b")
    assert spec.native_expert_format == "mxfp4" and spec.native_weight_format is None
    h = inter = 2880
    assert spec.routed_expert_params == 3 * h * inter + 2 * inter + h
    assert spec.routed_expert_bytes("bf16") == spec.routed_expert_params * 2
    # int4: 4 bits + an fp16 scale per group of 128 (roofline/formats.py, issue 10)
    assert spec.routed_expert_bytes("int4", "bf16") == 3 * h * inter * (4 + 16 / 128) / 8 + (2 * inter + h) * 2
    # all experts are part of decode_weight_bytes (every expert touched) and of the resident bytes
    experts = spec.all_routed_expert_bytes("bf16")
    assert experts == 24 * 32 * spec.routed_expert_bytes("bf16")
    assert spec.decode_weight_bytes() - experts > 0
    assert spec.weight_bytes() == spec.param_count * 2


def test_deepseek_v3_correction_bias_is_resident_but_not_a_parameter():
    spec = load_model("deepseek-v3")
    assert spec.native_weight_format == "fp8"
    assert spec.weight_bytes("bf16") == (spec.param_count + 58 * 256) * 2
    assert (spec.moe_layers, spec.shared_experts, spec.shared_expert_intermediate_size) == (58, 1, 2048)
    assert spec.widest_intermediate == 18432 == 8 * 2048 + 2048


def test_weight_bytes_split_linear_and_other():
    spec = load_model("qwen3-30b-a3b")
    # int4 (4.125 bits with its group scale) quantises the layers' matrices; the LM head stays 16-bit
    assert spec.weight_bytes("bf16") - spec.weight_bytes("int4") == pytest.approx(
        spec.body_linear_params * (2 - (4 + 16 / 128) / 8))
    assert spec.weight_bytes() - spec.decode_weight_bytes() == spec.embedding_params * 2


# ---- windows as transformers sets them ----
def _hf_windows(cfg):
    """Per-layer windows as transformers' attention modules get them."""
    text = getattr(cfg, "text_config", cfg)
    layers = text.num_hidden_layers
    if getattr(text, "layer_types", None):
        return [text.sliding_window if t == "sliding_attention" else None for t in text.layer_types]
    return [getattr(text, "sliding_window", None)] * layers


@pytest.mark.parametrize(
    "name", [n for n in catalog_names(include_test=True) if catalog_index()[n]["family"] not in ("internlm2.5",)]
)
def test_windows_are_transformers_windows(name):
    transformers = pytest.importorskip("transformers")
    config = json.loads((CATALOG_DIR / name / "config.json").read_text())
    if config["model_type"] in ("gpt_neox", "gptj", "falcon", "llama", "olmo2", "deepseek_v2", "deepseek_v3"):
        hf = [None] * load_model(name).num_hidden_layers  # these families have no sliding window
    else:
        hf = _hf_windows(transformers.AutoConfig.for_model(**config))
    assert list(load_model(name).windows) == hf


def test_qwen2_use_sliding_window_false_means_no_window():
    cfg = json.loads((CATALOG_DIR / "qwen2.5-7b" / "config.json").read_text())
    assert cfg["sliding_window"] == 131072 and cfg["use_sliding_window"] is False
    assert load_model("qwen2.5-7b").layer_windows is None
    on = ModelSpec.from_config_dict({**cfg, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}, "x")
    assert on.windows == (None,) * 20 + (4096,) * 8


# ---- the tiny CPU configs ----
@pytest.mark.parametrize("name", ["tiny-qwen3-moe", "tiny-gpt-oss", "tiny-deepseek-v2", "tiny-mixtral"])
def test_tiny_configs_are_small_and_test_only(name):
    entry, spec = catalog_index()[name], load_model(name)
    assert entry["test_only"] and name not in catalog_names()
    assert 64 <= spec.hidden_size <= 128 and spec.num_hidden_layers <= 4 and 4 <= spec.num_experts <= 8
    assert all(w is None or w < 64 for w in spec.windows)


def test_attention_group_is_a_plain_dataclass():
    g = load_model("qwen2.5-1.5b").attention_groups[0]
    assert isinstance(g, AttentionGroup)
    assert (g.kind, g.layers, g.window, g.q_heads, g.kv_heads, g.head_dim) == ("gqa", 28, None, 12, 2, 128)
    assert (g.kv_elements_per_token, g.flop_per_pair, g.sinks) == (2 * 2 * 128, 4 * 12 * 128, False)


# ---- unsupported input: one clear line naming the field ----
LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "vocab_size": 10}


@pytest.mark.parametrize(
    "change, match",
    [
        ({"model_type": "bert"}, "model_type 'bert' is not supported: not a decoder-only model we read"),
        ({"rope_scaling": {"type": "xyz", "factor": 2.0}}, r"config.json: rope_scaling.type 'xyz' is not supported"),
        ({"num_attention_heads": -4}, "num_attention_heads must be a positive integer, got -4"),
        ({"num_key_value_heads": 0}, "num_key_value_heads must be a positive integer"),
        ({"vocab_size": 1.5}, "vocab_size must be a positive integer"),
        ({"model_type": "gemma2", "layer_types": ["sliding_attention", "chunked_attention"]},
         r"layer_types\[1\] 'chunked_attention' is not supported"),
        ({"model_type": "gemma2", "layer_types": ["full_attention"]}, "layer_types must list one type for each of the 2"),
        ({"model_type": "mixtral", "num_key_value_heads": 2, "num_local_experts": 2, "num_experts_per_tok": 3}, "exceeds the experts"),
        ({"model_type": "qwen3_moe", "mlp_only_layers": "0"}, "mlp_only_layers must be a list"),
        ({"model_type": "deepseek_v2", "moe_layer_freq": 2, "num_experts_per_tok": 2}, "moe_layer_freq 2 is not supported"),
        ({"model_type": "deepseek_v2"}, "lacks num_experts_per_tok"),
        ({"model_type": "gemma3"}, "text_config must be an object"),
        ({"model_type": "gemma3_text", "use_bidirectional_attention": True}, "not a causal decoder"),
        ({"quantization_config": {"bits": 4}}, "quantization_config.quant_method must be a string"),
        ({"model_type": "gpt_neox", "num_key_value_heads": 2}, "one KV head per query head"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
    ],
)
def test_unsupported_configs_name_the_field(tmp_path, change, match):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **change}))
    load_model.cache_clear()
    with pytest.raises(RooflineError, match=match) as err:
        load_model(str(path))
    assert "\n" not in str(err.value)


def test_a_gemma3_text_config_names_text_config_fields():
    cfg = json.loads((CATALOG_DIR / "gemma-3-4b" / "config.json").read_text())
    cfg["text_config"]["num_hidden_layers"] = 0
    with pytest.raises(RooflineError, match="text_config.num_hidden_layers must be a positive integer"):
        ModelSpec.from_config_dict(cfg, "g")


@pytest.mark.parametrize("name", ["tiny-gpt-oss", "tiny-deepseek-v2", "tiny-qwen3-moe"])
def test_kv_bytes_are_what_transformers_caches(name):
    # prefill n tokens and decode one on the CPU: transformers' cache then holds n + 1 tokens in full
    # layers, the MLA latent in DeepSeek's, and window - 1 tokens in a sliding layer (the step's own
    # token joins them while it attends: kv_bytes counts that moment, the window)
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(**json.loads((CATALOG_DIR / name / "config.json").read_text()))
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).eval()
    spec = load_model(name)
    for n in (10, 100):
        ids = torch.randint(0, cfg.vocab_size, (1, n))
        with torch.no_grad():
            cache = model(ids, use_cache=True).past_key_values
            cache = model(ids[:, :1], past_key_values=cache, use_cache=True).past_key_values
        held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
        past_window = sum(g.layers * g.kv_elements_per_token * BF16 for g in spec.attention_groups
                          if g.window is not None and n + 1 >= g.window)
        assert held == spec.kv_bytes(n + 1) - past_window


def test_a_spec_written_by_hand_is_checked():
    dense = dict(name="x", model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=100,
                 tie_word_embeddings=False, qkv_bias=False)
    assert ModelSpec(**dense).param_count == 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128) + 5 * 64 + 2 * 6400
    with pytest.raises(ValueError, match="num_experts must be positive"):
        ModelSpec(**dense, moe_layer_indices=(1,))
    with pytest.raises(ValueError, match="layer_windows names 1 layers"):
        ModelSpec(**dense, layer_windows=(8,))
    with pytest.raises(ValueError, match="MLA attention needs kv_lora_rank"):
        ModelSpec(**dense, attention_kind="mla")
    moe = ModelSpec(**dense, moe_layer_indices=(1,), num_experts=4, experts_per_token=2, moe_intermediate_size=32)
    # layer 0 dense, layer 1: 4 experts of 3 x 64 x 32 and a 4 x 64 router instead of the dense MLP
    assert moe.param_count == ModelSpec(**dense).param_count - 3 * 64 * 128 + 4 * 3 * 64 * 32 + 4 * 64
    assert moe.active_intermediate_per_layer == (128, 64)
