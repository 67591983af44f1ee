"""Units: defined once, converted at the edges.

Inside the core every quantity is in base units (bytes, FLOP, seconds, bytes/s, FLOP/s).
These constants are the only place human units (GB, GiB, TFLOP/s, ms) are defined.
GB is decimal (1e9 bytes, how vendors state bandwidth); GiB is binary (2**30 bytes, how
PyTorch's ``max_memory_allocated`` and nvidia-smi's MiB add up).
"""

from __future__ import annotations

from typing import NamedTuple

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TFLOP = 1e12
GFLOP = 1e9
MS = 1e-3

#: Bytes per element of the plain storage dtypes (activations, logits, a KV cache element). Weight
#: formats with per-group scales (int4 with its fp16 group scale, q4_k_m, awq, nvfp4, ...) are
#: roofline/formats.py's: ``weight_dtype_name`` / ``weight_storage_bytes`` read them from there.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

_DTYPE_ALIASES = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
}

#: Multipliers from the unit strings allowed in data files to base units.
UNIT_SCALE: dict[str, float] = {
    "bytes": 1.0,
    "KB": KB,
    "MB": MB,
    "GB": GB,
    "TB": TB,
    "KiB": KiB,
    "MiB": MiB,
    "GiB": GiB,
    "bytes/s": 1.0,
    "GB/s": GB,
    "TB/s": TB,
    "GiB/s": GiB,
    "FLOP/s": 1.0,
    "GFLOP/s": GFLOP,
    "TFLOP/s": TFLOP,
    "s": 1.0,
    "ms": MS,
}


def dtype_name(name: str, field: str | None = None) -> str:
    """The canonical name of a storage dtype: an element format (``bfloat16`` -> ``bf16``, a KV
    format of roofline/formats.py such as ``q8_0``) or else a weight format (``Q4_K_M`` ->
    ``q4_k_m``); an unknown one is an error naming ``field``."""
    key = _DTYPE_ALIASES.get(name, name) if isinstance(name, str) else name
    if key in DTYPE_BYTES:
        return key
    from roofline import formats
    from roofline.errors import RooflineError

    if not isinstance(name, str):
        raise RooflineError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPE_BYTES)}", field)
    try:
        return formats.kv_format(name).name
    except RooflineError:
        pass
    try:
        return formats.weight_format(name).name
    except RooflineError:
        raise RooflineError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPE_BYTES)} or a weight format "
                            f"({', '.join(formats.weight_format_names())})", field) from None


def dtype_bytes(name: str) -> float:
    """Bytes per element of ``name``: a plain dtype (bf16, fp16, fp32, fp8, int8, int4 = 4 bits),
    a KV-cache format of roofline/formats.py (q8_0: 34 bytes per 32), or else a weight format's
    headline bytes per weight (scales included: int4 weights are 4.125 bits there, see
    ``weight_storage_bytes``)."""
    key = dtype_name(name)
    if key in DTYPE_BYTES:
        return DTYPE_BYTES[key]
    from roofline import formats
    from roofline.errors import RooflineError

    try:
        return formats.bytes_per_kv_element(key)
    except RooflineError:
        return formats.bytes_per_weight(key)


def weight_dtype_name(name: str, field: str | None = "weight_dtype") -> str:
    """The canonical name of a weight format (roofline/formats.py: bf16, fp8, int4, q4_k_m, awq,
    nvfp4, ... or an alias such as ``Q4_K_M`` or ``bfloat16``); an unknown one names ``field``."""
    from roofline import formats
    from roofline.errors import RooflineError

    try:
        return formats.weight_format(_DTYPE_ALIASES.get(name, name)).name
    except RooflineError as exc:
        raise RooflineError(str(exc), field) from None


def kv_dtype_name(name: str, field: str | None = "kv_dtype") -> str:
    """The canonical name of a KV-cache element format (roofline/formats.py: bf16, fp16, fp32, fp8,
    int8, int4, q8_0, q4_0, ...); an unknown one names ``field``."""
    from roofline import formats
    from roofline.errors import RooflineError

    try:
        return formats.kv_format(_DTYPE_ALIASES.get(name, name)).name
    except RooflineError:
        raise RooflineError(f"unknown dtype {name!r} for the KV cache; choose one of "
                            f"{', '.join(formats.kv_format_names())}", field) from None


class WeightStorage(NamedTuple):
    """Bytes per weight of a weight format, by tensor category (roofline/formats.py)."""

    linear: float  # the transformer-block matrices (attention, MLP, experts)
    lm_head: float  # the output projection (a tied embedding included)
    embedding: float | None  # an untied token-embedding table; None: left in the model's other dtype


def weight_storage_bytes(name: str) -> WeightStorage:
    """Bytes per weight of the block matrices, the LM head and an untied embedding table in
    weight format ``name``: the format's true bits (scales and zeros included) per category.
    Formats that leave the embedding and LM head unquantised (fp8, int8, int4, awq, gptq, nvfp4)
    store them at 16 bits; llama.cpp's store output.weight as q6_k (q8_0 for Q8_0 files)."""
    from roofline import formats

    fmt = formats.weight_format(_DTYPE_ALIASES.get(name, name))
    embedding = fmt.embedding_bits / 8 if fmt.stores_embedding else None
    return WeightStorage(fmt.linear_bits_per_weight / 8, fmt.lm_head_bits / 8, embedding)


def to_base(value: float, unit: str) -> float:
    """Convert ``value`` given in ``unit`` (a key of UNIT_SCALE) to base units."""
    try:
        return float(value) * UNIT_SCALE[unit]
    except KeyError:
        from roofline.errors import RooflineError

        raise RooflineError(
            f"unknown unit {unit!r}; allowed: {', '.join(UNIT_SCALE)}"
        ) from None
