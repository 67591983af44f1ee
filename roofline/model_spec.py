"""Model shapes read from a Hugging Face ``config.json``, and the counts that follow from them.

Dense decoder-only transformers (Llama 3.x, Qwen2/Qwen2.5, Mistral): embeddings, GQA attention
with optional qkv bias, a SwiGLU MLP, RMSNorm, tied or untied LM head. Field names are Hugging
Face's, so any local ``config.json`` of these families is valid input.
"""

from __future__ import annotations

import difflib
import json
from functools import cached_property, lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from roofline.errors import RooflineError
from roofline.units import dtype_bytes

CATALOG_DIR = Path(__file__).parent / "catalog"

#: model_type -> (qkv bias by default, o_proj bias follows attention_bias, tie by default)
_FAMILIES = {
    "llama": {"qkv_bias": False, "tie": False},
    "mistral": {"qkv_bias": False, "tie": False},
    "qwen2": {"qkv_bias": True, "tie": False},
}


class ModelSpec(BaseModel):
    """The shape of a dense decoder-only model, in Hugging Face config.json names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="catalog name or where the config came from")
    model_type: str
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool
    qkv_bias: bool = Field(description="q, k and v projections carry a bias (Qwen2)")
    o_bias: bool = Field(default=False, description="the output projection carries a bias")
    mlp_bias: bool = False
    max_position_embeddings: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check_heads(self) -> "ModelSpec":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        return self

    # ---- parameter counts (exact, as transformers builds the model) ----
    @cached_property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @cached_property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @cached_property
    def linear_params_per_layer(self) -> int:
        """Weights of the matmuls of one layer: q, k, v, o and the three MLP projections."""
        h = self.hidden_size
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h + 3 * h * self.intermediate_size

    @cached_property
    def bias_params_per_layer(self) -> int:
        n = 0
        if self.qkv_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            n += self.hidden_size
        if self.mlp_bias:
            n += 2 * self.intermediate_size + self.hidden_size
        return n

    @cached_property
    def norm_params(self) -> int:
        """RMSNorm weights: two per layer and the final norm."""
        return (2 * self.num_hidden_layers + 1) * self.hidden_size

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @cached_property
    def lm_head_params(self) -> int:
        """Weights of the LM-head matmul (shared with the embedding when tied)."""
        return self.vocab_size * self.hidden_size

    @cached_property
    def param_count(self) -> int:
        """Parameters as transformers counts them (a tied embedding counted once)."""
        layers = self.num_hidden_layers * (self.linear_params_per_layer + self.bias_params_per_layer)
        head = 0 if self.tie_word_embeddings else self.lm_head_params
        return layers + self.norm_params + self.embedding_params + head

    # ---- bytes ----
    def weight_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Resident weight bytes. Linear layers and the LM head are stored in ``weight_dtype``;
        norms, biases and an untied embedding table in ``other_dtype``."""
        wb, ob = dtype_bytes(weight_dtype), dtype_bytes(other_dtype)
        linear = self.num_hidden_layers * self.linear_params_per_layer + self.lm_head_params
        other = self.num_hidden_layers * self.bias_params_per_layer + self.norm_params
        if not self.tie_word_embeddings:
            other += self.embedding_params
        return linear * wb + other * ob

    def decode_weight_bytes(self, weight_dtype: str = "bf16", other_dtype: str = "bf16") -> float:
        """Weight bytes one decode step reads: everything but an untied embedding table
        (of which a step reads only the batch's rows)."""
        total = self.weight_bytes(weight_dtype, other_dtype)
        if not self.tie_word_embeddings:
            total -= self.embedding_params * dtype_bytes(other_dtype)
        return total

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> float:
        """KV-cache bytes one token adds: keys and values, every layer."""
        return 2 * self.num_hidden_layers * self.kv_dim * dtype_bytes(kv_dtype)

    def logits_bytes_per_position(self, logits_dtype: str = "bf16") -> float:
        return self.vocab_size * dtype_bytes(logits_dtype)

    # ---- FLOPs ----
    @cached_property
    def linear_flop_per_token(self) -> float:
        """FLOPs of every weight matmul for one token, LM head included (2 per weight),
        plus one add per bias. The lesson's ``2P``."""
        layers = self.num_hidden_layers * (2 * self.linear_params_per_layer + self.bias_params_per_layer)
        return float(layers + 2 * self.lm_head_params)

    @cached_property
    def body_linear_flop_per_token(self) -> float:
        """As ``linear_flop_per_token`` without the LM head (prefill computes it only where logits are kept)."""
        return self.linear_flop_per_token - 2.0 * self.lm_head_params

    @cached_property
    def attention_flop_per_context_token(self) -> float:
        """FLOPs of QK^T and AV for one query token against one cached token, all layers."""
        return 4.0 * self.num_hidden_layers * self.q_dim

    def summary(self, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> dict:
        return {
            "model": self.name,
            "model_type": self.model_type,
            "params": self.param_count,
            "weight_bytes": self.weight_bytes(weight_dtype),
            "kv_bytes_per_token": self.kv_bytes_per_token(kv_dtype),
            "logits_bytes_per_position": self.logits_bytes_per_position(),
            "num_hidden_layers": self.num_hidden_layers,
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "tie_word_embeddings": self.tie_word_embeddings,
        }

    # ---- construction ----
    @classmethod
    def from_config_dict(cls, config: dict, name: str) -> "ModelSpec":
        """Build from the dict of a Hugging Face config.json; errors name the field."""
        if not isinstance(config, dict):
            raise RooflineError(f"{name}: config.json must hold a JSON object")
        model_type = config.get("model_type")
        if model_type not in _FAMILIES:
            raise RooflineError(
                f"{name}: model_type {model_type!r} is not supported "
                f"(supported: {', '.join(sorted(_FAMILIES))})"
            )
        fam = _FAMILIES[model_type]
        missing = [
            k
            for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
            if k not in config
        ]
        if missing:
            raise RooflineError(f"{name}: config.json lacks {', '.join(missing)}")
        fields = {
            "name": name,
            "model_type": model_type,
            "hidden_size": config["hidden_size"],
            "intermediate_size": config["intermediate_size"],
            "num_hidden_layers": config["num_hidden_layers"],
            "num_attention_heads": config["num_attention_heads"],
            "num_key_value_heads": config.get("num_key_value_heads") or config["num_attention_heads"],
            "vocab_size": config["vocab_size"],
            "tie_word_embeddings": config.get("tie_word_embeddings", fam["tie"]),
            "max_position_embeddings": config.get("max_position_embeddings"),
        }
        head_dim = config.get("head_dim")
        if head_dim is None:
            heads = config["num_attention_heads"]
            if not isinstance(heads, int) or heads <= 0 or not isinstance(config["hidden_size"], int):
                head_dim = 0  # let validation report the bad field
            else:
                head_dim = config["hidden_size"] // heads
        fields["head_dim"] = head_dim
        attention_bias = config.get("attention_bias")
        if model_type == "qwen2":
            fields["qkv_bias"], fields["o_bias"] = True, False
        else:
            fields["qkv_bias"] = bool(attention_bias) if attention_bias is not None else fam["qkv_bias"]
            fields["o_bias"] = bool(attention_bias)
        fields["mlp_bias"] = bool(config.get("mlp_bias", False))
        try:
            return cls(**fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "config"
            raise RooflineError(f"{name}: {loc}: {err['msg']}") from None


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
    if path.is_dir():
        cfg = path / "config.json"
        if not cfg.is_file():
            raise RooflineError(f"model folder {key} holds no config.json")
        return cfg
    if path.is_file():
        return path
    if path.suffix == ".json" or "/" in key and not _looks_like_repo(key, index):
        raise RooflineError(f"model file {key} not found")
    candidates = list(index) + [r for e in index.values() for r in e.get("hf_repos", [])]
    near = difflib.get_close_matches(lowered, [c.lower() for c in candidates], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(sorted(index))}"
    raise RooflineError(f"unknown model {key!r}{hint}")


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
