"""Count the parameters of every model in roofline/catalog with transformers.

Each catalog ``config.json`` is built into its Hugging Face model class on
PyTorch's meta device (shapes only, no weights, no download), and the
parameters are summed. ``model.parameters()`` yields a tied tensor once, so a
model with ``tie_word_embeddings`` counts its embedding matrix a single time,
as the published figures do; buffers (DeepSeek-V3's e_score_correction_bias)
are not parameters and are not counted.

Two families are not built as they stand:

* Gemma 3 (multimodal ``gemma3`` configs): the text model is counted, i.e.
  ``Gemma3ForCausalLM(config.text_config)``; the vision tower and projector are
  reported apart (``vision`` column) and are not in ``params``.
* InternLM2 (``internlm2``): remote code, not in transformers. Its count is
  derived by hand from the tensors modeling_internlm2.py creates (see
  ``internlm2_params``), an independent formula from roofline's.

This is the script behind the ``params`` figures in roofline/catalog/catalog.json.

Usage (needs torch and transformers, which the roofline core never imports):

    python benchmarks/count_catalog_params.py            # table
    python benchmarks/count_catalog_params.py --check    # also compare with catalog.json, exit 1 on a mismatch
    python benchmarks/count_catalog_params.py --write    # write the counts into catalog.json's "params"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CATALOG_DIR = Path(__file__).resolve().parent.parent / "roofline" / "catalog"

# Published totals, to check against (not assumed): the Hugging Face safetensors
# metadata ("safetensors.total") of each repo, as quoted in public code, or the
# model card where it gives the exact figure. Qwen's cards round (e.g. "32.5B"
# for 32,763,876,352), so the exact totals are the safetensors/GGUF counts.
# Where a published total counts something transformers does not hold as a
# parameter, PUBLISHED_EXTRA says what and how much.
PUBLISHED_PARAMS = {
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-1.5b": 1_543_714_304,
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-14b": 14_770_033_664,
    "qwen2.5-32b": 32_763_876_352,
    "qwen2.5-72b": 72_706_203_648,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "mistral-7b-v0.3": 7_248_023_552,
    # exact totals as published (HF safetensors, model cards, papers), recalled rather than
    # fetched here: a check on the configs, which were written independently of them
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "mistral-7b-v0.1": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen3-8b": 8_190_735_360,
    "qwen3-32b": 32_762_123_264,
    "qwen3-30b-a3b": 30_532_122_624,
    "qwen3-235b-a22b": 235_093_634_560,
    "gpt-oss-20b": 20_914_757_184,
    "gpt-oss-120b": 116_829_156_672,
    "deepseek-v2-lite": 15_706_484_224,
    "falcon-7b": 6_921_720_704,
    "pythia-6.9b": 6_857_302_016,
    "gemma-2-9b": 9_241_705_984,
    "phi-3-mini-4k": 3_821_079_552,
    "internlm2.5-7b": 7_737_708_544,
}
# (DeepSeek-V3 has no exact published count of its own: its "671B main model" is transformers'
# 671,026,404,352 plus the 58 x 256 e_score_correction_bias values transformers holds as buffers;
# the FP8 checkpoint's safetensors total adds weight scales and the 14B MTP module.)
PUBLISHED_EXTRA: dict[str, int] = {}


def internlm2_params(cfg: dict) -> int:
    """InternLM2ForCausalLM by hand, from modeling_internlm2.py (internlm/internlm2_5-7b-chat):
    tok_embeddings (V x h); per layer attention.wqkv (h -> (heads + 2 kv_heads) x head_dim, bias
    if config.bias), attention.wo (heads x head_dim -> h, bias if config.bias),
    feed_forward.w1/w3 (h -> I) and w2 (I -> h) without bias, attention_norm and ffn_norm (h);
    norm (h); output (h -> V, untied, no bias)."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    d = h // heads
    bias = cfg.get("bias", True)
    qkv = h * (heads + 2 * kv) * d + ((heads + 2 * kv) * d if bias else 0)
    wo = heads * d * h + (h if bias else 0)
    layer = qkv + wo + 3 * h * inter + 2 * h
    head = 0 if cfg.get("tie_word_embeddings", False) else cfg["vocab_size"] * h
    return cfg["vocab_size"] * h + layers * layer + h + head


def count_params(config_path: Path) -> tuple[int, int | None]:
    """(parameters of the text model, parameters left out: a vision tower) for a config.json."""
    import torch
    import transformers

    raw = json.loads(config_path.read_text())
    if raw.get("model_type") == "internlm2":
        return internlm2_params(raw), None
    config = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        if raw.get("model_type") == "gemma3":
            text = transformers.Gemma3ForCausalLM(config.text_config)
            full = transformers.Gemma3ForConditionalGeneration(config)
            n_text = sum(t.numel() for t in text.parameters())
            return n_text, sum(t.numel() for t in full.parameters()) - n_text
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(tensor.numel() for tensor in model.parameters()), None


def _fmt(count: int | None) -> str:
    return "" if count is None else f"{count:,}"


def catalog_names() -> list[str]:
    return sorted(p.parent.name for p in CATALOG_DIR.glob("*/config.json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the params in catalog.json")
    parser.add_argument("--write", action="store_true", help="write the counts into catalog.json")
    parser.add_argument("names", nargs="*", help="catalog models (default: all)")
    args = parser.parse_args(argv)

    import transformers

    index_path = CATALOG_DIR / "catalog.json"
    index = json.loads(index_path.read_text())
    recorded = index["models"]
    print(f"transformers {transformers.__version__}, meta device")
    print(f"{'model':<18} {'params':>17} {'published':>17}  {'catalog.json':>17}  {'vision':>13}")
    mismatches = 0
    for name in args.names or catalog_names():
        n, vision = count_params(CATALOG_DIR / name / "config.json")
        published = PUBLISHED_PARAMS.get(name)
        in_catalog = recorded.get(name, {}).get("params")
        flags = []
        if published is not None and published != n + PUBLISHED_EXTRA.get(name, 0):
            flags.append("differs from published")
        if args.check and in_catalog != n:
            flags.append("differs from catalog.json")
        mismatches += bool(flags)
        if args.write and name in recorded:
            recorded[name]["params"] = n
        print(f"{name:<18} {n:>17,} {_fmt(published):>17}  {_fmt(in_catalog):>17}  {_fmt(vision):>13}  "
              f"{'; '.join(flags)}".rstrip())
    if args.write:
        index_path.write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
