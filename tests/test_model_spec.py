import json

import pytest

from roofline.errors import RooflineError
from roofline.model_spec import (
    CATALOG_DIR,
    ModelSpec,
    catalog_index,
    catalog_names,
    load_model,
    resolve_model_config_path,
)
from roofline.units import GB, KiB

REQUIRED = [
    "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
    "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.3",
]


def test_catalog_holds_the_required_models():
    assert set(REQUIRED) <= set(catalog_index())


def test_qwen_1_5b_numbers_from_the_lessons():
    # lessons 01/02: 1,543,714,304 params = 3.087 GB in bf16; 28 KiB KV per token; 296.8 KiB logits per position
    spec = load_model("qwen2.5-1.5b")
    assert spec.param_count == 1_543_714_304
    assert spec.weight_bytes("bf16") / GB == pytest.approx(3.087, abs=0.0005)
    assert spec.kv_bytes_per_token("bf16") == 28 * KiB
    assert spec.logits_bytes_per_position("bf16") / KiB == pytest.approx(296.8, abs=0.06)  # 296.75 rounded


@pytest.mark.parametrize("name", REQUIRED)
def test_param_count_matches_the_published_count(name):
    # catalog.json "params": counted by transformers on the meta device (benchmarks/count_catalog_params.py)
    assert load_model(name).param_count == catalog_index()[name]["params"]


@pytest.mark.parametrize("name", REQUIRED)
def test_param_count_matches_transformers(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = json.loads((CATALOG_DIR / name / "config.json").read_text())
    cfg = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert load_model(name).param_count == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", catalog_names(include_test=True))
def test_every_catalog_count_is_the_recorded_transformers_count(name):
    # catalog.json "params": written by benchmarks/count_catalog_params.py --write (transformers on the meta device)
    assert load_model(name).param_count == catalog_index()[name]["params"]


def _internlm2_by_hand(cfg):
    # modeling_internlm2.py (internlm/internlm2_5-7b-chat, remote code): tok_embeddings V x h; per layer
    # attention.wqkv h -> (heads + 2 kv) * d and attention.wo, both with bias=config.bias, feed_forward w1/w3
    # (h -> I) and w2 (I -> h) without bias, attention_norm and ffn_norm; final norm; untied output h -> V
    h, inter, heads, kv = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // heads
    bias = cfg["bias"]
    wqkv = h * (heads + 2 * kv) * d + bias * (heads + 2 * kv) * d
    wo = heads * d * h + bias * h
    layer = wqkv + wo + 3 * h * inter + 2 * h
    return 2 * cfg["vocab_size"] * h + cfg["num_hidden_layers"] * layer + h


@pytest.mark.parametrize("name", catalog_names(include_test=True))
def test_every_catalog_model_matches_transformers(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = json.loads((CATALOG_DIR / name / "config.json").read_text())
    if config["model_type"] == "internlm2":  # remote code, not in transformers: by hand
        assert _internlm2_by_hand(config) == 7_737_708_544 == load_model(name).param_count
        return
    cfg = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        if config["model_type"] == "gemma3":  # the text model decodes; the vision tower is not counted
            model = transformers.Gemma3ForCausalLM(cfg.text_config)
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert load_model(name).param_count == sum(p.numel() for p in model.parameters())


def test_weight_bytes_follow_the_dtypes():
    spec = load_model("qwen2.5-7b")  # untied: embedding stays bf16, linear layers quantise
    bf16 = spec.weight_bytes("bf16")
    int4 = spec.weight_bytes("int4")
    # int4 (roofline/formats.py): 4 bits + an fp16 scale per group of 128 = 4.125 bits for the layers'
    # matrices; like AWQ/GPTQ checkpoints it leaves the LM head in 16 bits (issue 10)
    linear = spec.num_hidden_layers * spec.linear_params_per_layer
    assert bf16 - int4 == pytest.approx(linear * (2 - (4 + 16 / 128) / 8))
    assert spec.kv_bytes_per_token("fp8") * 2 == spec.kv_bytes_per_token("bf16")
    # a decode step does not read an untied embedding table, but a tied one is the LM head
    assert spec.weight_bytes() - spec.decode_weight_bytes() == spec.embedding_params * 2
    tied = load_model("qwen2.5-1.5b")
    assert tied.decode_weight_bytes() == tied.weight_bytes()


@pytest.mark.parametrize(
    "key", ["Qwen/Qwen2.5-1.5B-Instruct", "qwen/qwen2.5-1.5b-instruct", "QWEN2.5-1.5B"]
)
def test_hf_repo_ids_and_case_resolve_to_the_catalog(key):
    assert resolve_model_config_path(key) == CATALOG_DIR / "qwen2.5-1.5b" / "config.json"


def test_a_config_path_and_a_folder_work(tmp_path):
    cfg = json.loads((CATALOG_DIR / "llama-3.2-1b" / "config.json").read_text())
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(folder)).param_count == load_model("llama-3.2-1b").param_count
    assert load_model(str(folder / "config.json")).param_count == 1_235_814_400


def test_unknown_model_suggests_near_names():
    with pytest.raises(RooflineError, match="did you mean.*qwen2.5-1.5b"):
        load_model("qwen2.5-1.5")


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"model_type": "llama", "hidden_size": 64', "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"model_type": "gpt2"}', "not supported"),
        ('{"model_type": "llama", "hidden_size": 64}', "lacks"),
        ('{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,'
         ' "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 10}', "multiple"),
        ('{"model_type": "llama", "hidden_size": -64, "intermediate_size": 128, "num_hidden_layers": 2,'
         ' "num_attention_heads": 4, "vocab_size": 10}', "hidden_size"),
        ('{"model_type": "llama", "hidden_size": "big", "intermediate_size": 128, "num_hidden_layers": 2,'
         ' "num_attention_heads": 4, "vocab_size": 10}', "hidden_size"),
    ],
)
def test_bad_configs_give_one_line_errors(tmp_path, text, match):
    path = tmp_path / "config.json"
    path.write_text(text)
    load_model.cache_clear()
    with pytest.raises(RooflineError, match=match) as err:
        load_model(str(path))
    assert "\n" not in str(err.value)


def test_missing_file_is_an_error():
    with pytest.raises(RooflineError, match="not found"):
        load_model("/nonexistent/config.json")


def test_spec_rejects_extra_fields():
    with pytest.raises(Exception):
        ModelSpec(name="x", model_type="llama", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=4, vocab_size=8,
                  tie_word_embeddings=False, qkv_bias=False, surprise=1)


def test_with_layers_recomputes_what_a_copy_would_keep():
    # a model_copy keeps the derived figures cached on the original (dense_layers, ...): the
    # layers probe's cut models are validated anew
    from roofline.model_spec import load_model

    spec = load_model("qwen2.5-1.5b")
    assert spec.dense_layers == 28  # cached now
    assert spec.model_copy(update={"num_hidden_layers": 4}).dense_layers == 28  # the trap
    cut = spec.with_layers(4)
    assert (cut.num_hidden_layers, cut.dense_layers, cut.hidden_size) == (4, 4, spec.hidden_size)
    moe = load_model("qwen3-30b-a3b").with_layers(3)
    assert moe.moe_layers == 3 and moe.dense_layers == 0
    windows = load_model("gemma-2-9b")
    assert windows.with_layers(5).layer_windows == tuple(windows.layer_windows[i % 2] for i in range(5))
