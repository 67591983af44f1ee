"""Units: defined once, converted at the edges.

Inside the core every quantity is in base units (bytes, FLOP, seconds, bytes/s, FLOP/s).
These constants are the only place human units (GB, GiB, TFLOP/s, ms) are defined.
GB is decimal (1e9 bytes, how vendors state bandwidth); GiB is binary (2**30 bytes, how
PyTorch's ``max_memory_allocated`` and nvidia-smi's MiB add up).
"""

from __future__ import annotations

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

#: Bytes per element of each storage dtype the model understands.
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
    """The canonical name of a storage dtype (``bfloat16`` -> ``bf16``); an unknown one is an error."""
    key = _DTYPE_ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in DTYPE_BYTES:
        from roofline.errors import RooflineError

        raise RooflineError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPE_BYTES)}", field)
    return key


def dtype_bytes(name: str) -> float:
    """Bytes per element of ``name`` (bf16, fp16, fp32, fp8, int8, int4 or a torch-style alias)."""
    return DTYPE_BYTES[dtype_name(name)]


def to_base(value: float, unit: str) -> float:
    """Convert ``value`` given in ``unit`` (a key of UNIT_SCALE) to base units."""
    try:
        return float(value) * UNIT_SCALE[unit]
    except KeyError:
        from roofline.errors import RooflineError

        raise RooflineError(
            f"unknown unit {unit!r}; allowed: {', '.join(UNIT_SCALE)}"
        ) from None
