"""A calibration: the terms that turn a pure roofline into a card + engine's measured times.

The pure roofline says a decode step takes max(bytes / bandwidth, FLOPs / peak). Real engines
add a fixed cost per step (kernel launches, Python), reach only a fraction of each ceiling, move
more KV bytes than the cache holds (a dynamic cache that grows by concatenation copies it), and
overlap memory and compute imperfectly. Each of those is one named, bounded term here; ``fit.py``
fits them to measurements. ``Calibration.uncalibrated()`` is the pure roofline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.errors import RooflineError

#: The exponent at and above which the p-norm combination is taken as exactly max(a, b)
#: (at p = 400 the p-norm is within 0.2% of the max anyway).
MAX_EXPONENT = 400.0


class Calibration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    card: str = Field(description="card id the terms were fitted on")
    engine: str = Field(description="decode engine, e.g. hf-eager or graph")
    kv_cache: Literal["dynamic", "static"] = "dynamic"
    # decode step
    step_overhead_s: float = Field(0.0, ge=0, description="fixed cost of one decode step, s")
    layer_overhead_s: float = Field(0.0, ge=0, description="cost per layer per decode step, s")
    bandwidth_efficiency: float = Field(1.0, gt=0, le=1, description="fraction of the bandwidth ceiling reached")
    compute_efficiency: float = Field(1.0, gt=0, le=1, description="fraction of the compute ceiling the weight matmuls reach")
    attention_efficiency: float = Field(
        1.0, gt=0, le=1, description="fraction of the compute ceiling decode attention (QK^T, AV) reaches"
    )
    kv_traffic_factor: float = Field(1.0, ge=0.5, le=16, description="KV bytes moved per KV byte held, per step")
    activation_traffic_coeff: float = Field(
        0.0,
        ge=0,
        le=64,
        description="elementwise-kernel bytes per token per layer, in units of (hidden + intermediate) x act bytes",
    )
    roofline_exponent: float = Field(
        MAX_EXPONENT, ge=1, le=MAX_EXPONENT, description="p of (mem^p + compute^p)^(1/p); 1 adds, large takes max"
    )
    overhead_exponent: float = Field(
        1.0, ge=1, le=MAX_EXPONENT, description="q combining overhead with the roofline; 1 adds, large overlaps"
    )
    # prefill
    prefill_overhead_s: float = Field(0.0, ge=0, description="fixed cost of a prefill, s")
    prefill_compute_efficiency: float = Field(1.0, gt=0, le=1, description="fraction of peak reached by prefill")
    prefill_activation_traffic_coeff: float = Field(
        0.0, ge=0, le=64, description="as activation_traffic_coeff, for the prefill's large-M elementwise kernels"
    )
    # memory
    activation_coeff: float = Field(
        3.0, ge=0, le=64, description="prefill transient activations, in units of tokens x intermediate_size x act bytes"
    )
    workspace_bytes: float = Field(0.0, ge=0, description="fixed allocator/library workspace, bytes")
    # optional ceilings measured alongside the calibration (replace the profile's)
    measured_bandwidth_bytes_per_s: float | None = Field(None, gt=0)
    measured_peak_flop_per_s: float | None = Field(None, gt=0)
    # provenance
    tpot_statistic: Literal["mean", "median", "p10"] = Field(
        "mean", description="which statistic of the measured decode steps the TPOT terms were fitted to"
    )
    source: str = ""
    fitted_on: list[str] = []
    fit_report: dict = {}

    @classmethod
    def uncalibrated(cls, card: str, kv_cache: str = "dynamic") -> "Calibration":
        """The pure roofline: no overhead, full ceilings, max(memory, compute)."""
        return cls(card=card, engine="roofline", kv_cache=kv_cache, source="pure roofline: ceilings alone")

    @property
    def is_uncalibrated(self) -> bool:
        return self.engine == "roofline"


def calibrations_dir() -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "calibrations"


def load_calibration(path: str | Path) -> Calibration:
    from roofline.atomic import read_json

    path = Path(path)
    data = read_json(path, "calibration")
    try:
        return Calibration(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "calibration"
        raise RooflineError(f"{path}: {loc}: {err['msg']}") from None
    except TypeError:
        raise RooflineError(f"{path}: a calibration must be a JSON object") from None


def shipped_calibration(card: str, engine: str) -> Calibration | None:
    """The calibration shipped in hardware_profiles/calibrations/<card>-<engine>.json, if any."""
    path = calibrations_dir() / f"{card}-{engine}.json"
    return load_calibration(path) if path.is_file() else None


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Write atomically: a temporary file in the same folder, then rename."""
    return write_text_atomic(path, calibration.model_dump_json(indent=2) + "\n")


def write_text_atomic(path: str | Path, text: str) -> Path:
    from roofline.atomic import write_text_atomic as _write

    try:
        return _write(path, text)
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None
