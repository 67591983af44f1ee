"""Count the parameters of every model in roofline/catalog with transformers.

Each catalog ``config.json`` is built into its Hugging Face model class on
PyTorch's meta device (shapes only, no weights, no download), and the
parameters are summed. ``model.parameters()`` yields a tied tensor once, so a
model with ``tie_word_embeddings`` counts its embedding matrix a single time,
as the published figures do.

This is the script behind the ``params`` figures in roofline/catalog/catalog.json.

Usage (needs torch and transformers, which the roofline core never imports):

    python benchmarks/count_catalog_params.py            # table
    python benchmarks/count_catalog_params.py --check    # also compare with catalog.json, exit 1 on a mismatch
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
}


def count_params(config_path: Path) -> int:
    """Parameters of the model a config.json describes, tied tensors counted once."""
    import torch
    import transformers

    config = transformers.AutoConfig.for_model(**json.loads(config_path.read_text()))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(tensor.numel() for tensor in model.parameters())


def _fmt(count: int | None) -> str:
    return "" if count is None else f"{count:,}"


def catalog_names() -> list[str]:
    return sorted(p.parent.name for p in CATALOG_DIR.glob("*/config.json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the params in catalog.json")
    args = parser.parse_args(argv)

    import transformers

    recorded = json.loads((CATALOG_DIR / "catalog.json").read_text())["models"] if args.check else {}
    print(f"transformers {transformers.__version__}, meta device")
    print(f"{'model':<18} {'params':>16} {'published':>16}  {'catalog.json':>16}")
    mismatches = 0
    for name in catalog_names():
        n = count_params(CATALOG_DIR / name / "config.json")
        published = PUBLISHED_PARAMS.get(name)
        in_catalog = recorded.get(name, {}).get("params") if args.check else None
        flags = []
        if published is not None and published != n:
            flags.append("differs from published")
        if args.check and in_catalog != n:
            flags.append("differs from catalog.json")
        mismatches += bool(flags)
        print(f"{name:<18} {n:>16,} {_fmt(published):>16}  {_fmt(in_catalog):>16}  {'; '.join(flags)}".rstrip())
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
