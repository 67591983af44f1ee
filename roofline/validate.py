"""Validation of the library's arguments, in one place. Errors name the API argument
(``RooflineError.field``); the CLI swaps in its flag. Nothing here knows about flags."""

from __future__ import annotations

import math

import numpy as np

from roofline.errors import RooflineError

#: Largest whole number accepted for a count or length (keeps every count exact in a float).
MAX_WHOLE = 2**53


def whole(value, field: str, minimum: int = 1, maximum: int = MAX_WHOLE) -> int:
    """``value`` as an int in [minimum, maximum]: ints, whole floats and digit strings."""
    if isinstance(value, bool):
        raise RooflineError(f"must be a whole number, not {value!r}", field)
    if isinstance(value, (int, np.integer)):
        number = int(value)
    else:
        try:
            as_float = float(value)
        except (TypeError, ValueError, OverflowError):
            raise RooflineError(f"must be a whole number, not {value!r}", field) from None
        if not math.isfinite(as_float) or not as_float.is_integer():
            raise RooflineError(f"must be a whole number, not {value!r}", field)
        number = int(as_float)
    if number < minimum:
        raise RooflineError(f"must be at least {minimum}, not {number}", field)
    if number > maximum:
        raise RooflineError(f"must be at most {maximum:,}, not {number:,}", field)
    return number


def positive(value, field: str, what: str = "a positive number", maximum: float = math.inf) -> float:
    """A finite number > 0 (and <= maximum)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RooflineError(f"must be {what}, not {value!r}", field)
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise RooflineError(f"must be {what}, not {value!r}", field)
    if number > maximum:
        raise RooflineError(f"must be at most {maximum:g}, not {number:g}", field)
    return number


def non_negative(value, field: str, maximum: float = math.inf) -> float:
    """A finite number >= 0 (and <= maximum)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RooflineError(f"must be a number >= 0, not {value!r}", field)
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise RooflineError(f"must be a number >= 0, not {value!r}", field)
    if number > maximum:
        raise RooflineError(f"must be at most {maximum:g}, not {number:g}", field)
    return number


def optional_positive(value, field: str, what: str = "a positive number") -> float | None:
    return None if value is None else positive(value, field, what)


def choice(value, field: str, allowed) -> str:
    if value not in allowed:
        raise RooflineError(f"must be one of {', '.join(allowed)}, not {value!r}", field)
    return value


def batches(values, field: str = "batches", maximum: int = MAX_WHOLE) -> np.ndarray:
    """A non-empty array of whole batch sizes >= 1."""
    arr = np.atleast_1d(np.asarray(values))
    if arr.size == 0:
        raise RooflineError("give at least one batch size", field)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)) \
            or np.any(arr != np.floor(arr)):
        raise RooflineError("batch sizes must be whole numbers", field)
    if np.any(arr <= 0):
        raise RooflineError(f"batch sizes must be at least 1, not {int(arr.min())}", field)
    if np.any(arr > maximum):
        raise RooflineError(f"batch sizes must be at most {maximum:,}, not {int(arr.max()):,}", field)
    return arr.astype(np.int64)
