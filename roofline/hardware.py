"""Card profiles: datasheet and measured ceilings, each figure with its unit and source.

Profiles live as JSON files in ``hardware_profiles/`` (one per card, CPU or system-on-chip). A
figure is written in the unit its source uses ("GB/s", "TFLOP/s", "GiB", ...) and converted to
base units here, once.

Besides memory, bandwidth and the bf16 ceiling the model has always used, a profile may carry:

* ``kind`` (gpu | cpu | soc), ``architecture``, ``memory_type``;
* ``tensor_peaks``: the dense matrix-multiply peak per operand dtype (fp32, bf16, fp16, fp8,
  int8, fp4), absent where the hardware has no such path; :meth:`CardProfile.peak_for` picks the
  ceiling for a compute dtype or a weight format (``roofline/formats.py``);
* ``usable_memory_fraction``: the share of ``memory`` a GPU may use where it shares memory with
  an operating system (Apple unified memory);
* ``interconnect``: the links tensor parallelism would use (NVLink, Infinity Fabric, PCIe),
  bandwidth per direction, and a small-message all-reduce latency where one was published.
"""

from __future__ import annotations

import difflib
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from roofline.atomic import probe_path, short
from roofline.errors import RooflineError
from roofline.units import UNIT_SCALE, to_base

#: Operand dtypes a ``tensor_peaks`` entry may name (dense matrix-multiply peaks).
TENSOR_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "fp4")

#: Names people give a compute dtype, mapped to a ``tensor_peaks`` key.
_COMPUTE_ALIASES = {
    "float32": "fp32", "f32": "fp32", "tf32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "float8": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8", "fp8_e4m3": "fp8", "e5m2": "fp8",
    "i8": "int8",
    "float4": "fp4", "e2m1": "fp4", "nvfp4": "fp4", "mxfp4": "fp4",
}

#: The physical dimension of each unit in UNIT_SCALE: what a field may be given in.
_DIMENSION = {
    "bytes": "bytes", "KB": "bytes", "MB": "bytes", "GB": "bytes", "TB": "bytes",
    "KiB": "bytes", "MiB": "bytes", "GiB": "bytes",
    "bytes/s": "bytes/s", "GB/s": "bytes/s", "TB/s": "bytes/s", "GiB/s": "bytes/s",
    "FLOP/s": "FLOP/s", "GFLOP/s": "FLOP/s", "TFLOP/s": "FLOP/s",
    "s": "s", "ms": "s",
}


def profiles_dir() -> Path:
    import hardware_profiles

    return Path(hardware_profiles.__file__).parent


class Figure(BaseModel):
    """One published or measured number, in the unit its source states."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(gt=0)
    unit: str
    source: str = Field(min_length=1)
    kind: str | None = None
    note: str | None = None

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, unit: str) -> str:
        if unit not in UNIT_SCALE:
            raise ValueError(f"unknown unit {unit!r}; allowed: {', '.join(UNIT_SCALE)}")
        return unit

    @property
    def base(self) -> float:
        """The value in base units (bytes, bytes/s, FLOP/s or seconds)."""
        return to_base(self.value, self.unit)

    @property
    def dimension(self) -> str:
        return _DIMENSION.get(self.unit, self.unit)


def _check_dimension(fig: Figure | None, dimension: str, field: str) -> None:
    if fig is not None and fig.dimension != dimension:
        raise ValueError(f"{field}: unit {fig.unit!r} is not a {dimension} unit")


class UsableFraction(BaseModel):
    """The share of ``memory`` a GPU may allocate where it shares memory with an operating system.

    ``value`` is the default (e.g. macOS's GPU wired-memory limit); ``raised_to`` is what a user
    can raise it to and ``raise_how`` how, where a source says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(gt=0, le=1)
    source: str = Field(min_length=1)
    note: str | None = None
    raised_to: float | None = Field(default=None, gt=0, le=1)
    raise_how: str | None = None
    raised_source: str | None = None

    @model_validator(mode="after")
    def _raised_is_higher(self) -> UsableFraction:
        if self.raised_to is not None and self.raised_to < self.value:
            raise ValueError(f"raised_to {self.raised_to} is below the default {self.value}")
        return self


class Link(BaseModel):
    """One way the card reaches its peers (or the host), with its bandwidth per direction.

    ``topology`` says who gets that bandwidth: ``switch`` (NVSwitch: any peer gets all of it),
    ``mesh`` (direct links to each peer: a pair gets one link, ``bandwidth_per_direction`` /
    ``links`` each), ``bridge`` (a bridge between a pair of cards), ``host`` (PCIe to the host;
    GPU-to-GPU traffic crosses it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["nvlink", "infinity-fabric", "pcie", "nvlink-c2c"]
    topology: Literal["switch", "mesh", "bridge", "host"]
    generation: str | None = None
    links: int | None = Field(default=None, gt=0, description="NVLink links, fabric links or PCIe lanes")
    bandwidth_per_direction: Figure
    note: str | None = None

    @model_validator(mode="after")
    def _units(self) -> Link:
        _check_dimension(self.bandwidth_per_direction, "bytes/s", "bandwidth_per_direction")
        if self.topology == "mesh" and not self.links:
            raise ValueError("a mesh link needs 'links' (how many peers it reaches directly)")
        return self

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_per_direction.base


class Interconnect(BaseModel):
    """The links tensor parallelism would use, for one card (per GPU, per direction)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_to_gpu: Link | None = None
    host: Link | None = None
    allreduce_latency: Figure | None = None
    measured: list[Figure] = []
    note: str | None = None

    @model_validator(mode="after")
    def _units(self) -> Interconnect:
        _check_dimension(self.allreduce_latency, "s", "allreduce_latency")
        if self.host is not None and self.host.topology != "host":
            raise ValueError("host: topology must be 'host'")
        if self.gpu_to_gpu is not None and self.gpu_to_gpu.topology == "host":
            raise ValueError("gpu_to_gpu: a 'host' link belongs under 'host'")
        return self

    def tp_bytes_per_s(self, tp: int) -> float | None:
        """Bandwidth per direction each GPU can send to its peers in a ``tp``-way group, or None.

        NVSwitch: the whole link. A full mesh: one link per peer (tp - 1 links, capped at the
        number the card has). A bridge: the bridge for a pair, the host link beyond (a ring of
        more than two bridged cards crosses PCIe). Otherwise the host link."""
        if tp < 2:
            return None
        link = self.gpu_to_gpu
        host = self.host.bytes_per_s if self.host else None
        if link is None:
            return host
        if link.topology == "switch":
            return link.bytes_per_s
        if link.topology == "mesh":
            per_link = link.bytes_per_s / link.links
            return per_link * min(tp - 1, link.links)
        if tp == 2:  # bridge
            return link.bytes_per_s
        return host

    @property
    def allreduce_latency_s(self) -> float | None:
        """The card's own small-message all-reduce latency where one is on record; for cards that
        reach their peers only through PCIe (no NVLink, no fabric), the PCIe figure
        (PCIE_ALLREDUCE_LATENCY: measured over 8 GPUs, so it overstates a 2-GPU group's)."""
        if self.allreduce_latency:
            return self.allreduce_latency.base
        if self.gpu_to_gpu is None and self.host is not None and self.host.kind == "pcie":
            return PCIE_ALLREDUCE_LATENCY.base
        return None


#: The fixed time of one small all-reduce between GPUs that talk over PCIe only (issue 10).
PCIE_ALLREDUCE_LATENCY = Figure(
    value=0.0411, unit="ms", kind="allreduce_latency",
    source="NVIDIA/nccl issue #1530: nccl-tests all_reduce_perf -g 8, 8 x GeForce RTX 4090 on PCIe Gen4 (no NVLink), "
           "8-byte all-reduce 42.14 us out of place, 40.06 us in place (their mean)",
    note="8 GPUs in a ring; fewer GPUs take fewer ring steps, so this overstates tp 2 and 4")


class Peak(NamedTuple):
    """The matmul ceiling chosen for a compute dtype, and why."""

    flop_per_s: float
    dtype: str
    fallback: bool
    note: str


class CardProfile(BaseModel):
    """A GPU, CPU or system-on-chip: memory, and the bandwidth and matmul ceilings from datasheet
    and measurement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    aliases: list[str] = []
    vendor: str | None = None
    kind: Literal["gpu", "cpu", "soc"] | None = None
    architecture: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]*$")
    memory_type: str | None = None
    memory: Figure
    usable_memory_fraction: UsableFraction | None = None
    datasheet_bandwidth: Figure
    datasheet_bf16_flops: Figure
    tensor_peaks: dict[str, Figure] = {}
    measured_bandwidth: Figure | None = None
    measured_bf16_flops: Figure | None = None
    other_measurements: list[Figure] = []
    interconnect: Interconnect | None = None
    note: str | None = None

    @field_validator("tensor_peaks")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, Figure]) -> dict[str, Figure]:
        for dtype, fig in peaks.items():
            if dtype not in TENSOR_DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(TENSOR_DTYPES)}")
            _check_dimension(fig, "FLOP/s", f"tensor_peaks.{dtype}")
        return peaks

    @model_validator(mode="after")
    def _consistent(self) -> CardProfile:
        _check_dimension(self.memory, "bytes", "memory")
        for name in ("datasheet_bandwidth", "measured_bandwidth"):
            _check_dimension(getattr(self, name), "bytes/s", name)
        for name in ("datasheet_bf16_flops", "measured_bf16_flops"):
            _check_dimension(getattr(self, name), "FLOP/s", name)
        bf16 = self.tensor_peaks.get("bf16")
        if bf16 is not None and abs(bf16.base / self.datasheet_bf16_flops.base - 1) > 0.01:
            raise ValueError(
                f"tensor_peaks.bf16 ({bf16.value:g} {bf16.unit}) differs from datasheet_bf16_flops "
                f"({self.datasheet_bf16_flops.value:g} {self.datasheet_bf16_flops.unit})"
            )
        return self

    @cached_property
    def memory_bytes(self) -> float:
        return self.memory.base

    @cached_property
    def usable_memory_bytes(self) -> float:
        """What the accelerator may allocate by default: ``memory`` x ``usable_memory_fraction``."""
        fraction = self.usable_memory_fraction.value if self.usable_memory_fraction else 1.0
        return self.memory_bytes * fraction

    @cached_property
    def bandwidth_bytes_per_s(self) -> float:
        """The bandwidth ceiling the model uses: measured where published, else the datasheet's."""
        return (self.measured_bandwidth or self.datasheet_bandwidth).base

    @cached_property
    def peak_flop_per_s(self) -> float:
        """The bf16 dense ceiling the model uses: measured where published, else the datasheet's."""
        return (self.measured_bf16_flops or self.datasheet_bf16_flops).base

    @cached_property
    def balance_point_flop_per_byte(self) -> float:
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s

    @property
    def device_kind(self) -> str:
        return self.kind or "gpu"

    @property
    def ceiling_source(self) -> str:
        bw = "measured" if self.measured_bandwidth else "datasheet"
        fl = "measured" if self.measured_bf16_flops else "datasheet"
        return bw if bw == fl else f"bandwidth {bw}, compute {fl}"

    @property
    def compute_dtypes(self) -> list[str]:
        """The dtypes with their own matmul peak on this card (bf16 always, via the datasheet)."""
        return sorted(set(self.tensor_peaks) | {"bf16"}, key=TENSOR_DTYPES.index)

    def peak_for(self, compute_dtype: str) -> Peak:
        """The dense matmul ceiling for operands of ``compute_dtype`` (bf16, fp16, fp8, int8, fp4,
        fp32 or a torch-style alias).

        bf16 is :attr:`peak_flop_per_s` (measured where published). Another dtype with a
        ``tensor_peaks`` entry gets that datasheet peak scaled by the same measured/datasheet
        ratio as bf16 (a card that reaches 80% of its bf16 peak is taken to reach 80% of its fp8
        peak). A dtype the card has no path for falls back to the bf16 ceiling, and says so."""
        key = _COMPUTE_ALIASES.get(compute_dtype.strip().lower(), compute_dtype.strip().lower())
        if key not in TENSOR_DTYPES:
            raise RooflineError(f"unknown compute dtype {compute_dtype!r}; choose one of {', '.join(TENSOR_DTYPES)}")
        if key == "bf16":
            which = "measured" if self.measured_bf16_flops else "datasheet"
            return Peak(self.peak_flop_per_s, "bf16", False, f"bf16 ceiling ({which})")
        fig = self.tensor_peaks.get(key)
        if fig is None:
            return Peak(self.peak_flop_per_s, "bf16", True,
                        f"{self.id} has no {key} matmul peak on record; using the bf16 ceiling")
        efficiency = self.peak_flop_per_s / self.datasheet_bf16_flops.base
        note = f"{key} datasheet peak"
        if self.measured_bf16_flops is not None:
            note += f" x {efficiency:.3f} (measured/datasheet bf16)"
        return Peak(fig.base * efficiency, key, False, note)

    def peak_flop_per_s_for(self, compute_dtype: str) -> float:
        """FLOP/s of :meth:`peak_for` (the bf16 ceiling where the card has no such path)."""
        return self.peak_for(compute_dtype).flop_per_s

    def peak_for_format(self, weight_format: str) -> Peak:
        """The matmul ceiling a weight format runs at on this card (``roofline/formats.py``):
        its own compute path where the card has it (fp8 W8A8 on Hopper, fp4 on Blackwell,
        int8 W8A8), else the weight-only path (dequantised to the activation dtype)."""
        from roofline.formats import weight_format as lookup

        fmt = lookup(weight_format)
        dtype = fmt.compute_dtype(self.compute_dtypes)
        peak = self.peak_for(dtype)
        if dtype != fmt.compute:
            note = f"{fmt.name}: no {fmt.compute} path on {self.id}, runs weight-only at {dtype}; {peak.note}"
            return peak._replace(fallback=True, note=note)
        return peak._replace(note=f"{fmt.name}: {peak.note}")

    def tp_link_bytes_per_s(self, tp: int) -> float | None:
        """Bandwidth per direction per GPU for a ``tp``-way group, or None where not on record."""
        return self.interconnect.tp_bytes_per_s(tp) if self.interconnect else None

    def summary(self) -> dict:
        return {
            "card": self.id,
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "peak_flop_per_s": self.peak_flop_per_s,
            "balance_point_flop_per_byte": self.balance_point_flop_per_byte,
            "ceiling_source": self.ceiling_source,
            "datasheet_bandwidth_bytes_per_s": self.datasheet_bandwidth.base,
            "datasheet_peak_flop_per_s": self.datasheet_bf16_flops.base,
            "kind": self.device_kind,
            "architecture": self.architecture,
            "usable_memory_bytes": self.usable_memory_bytes,
        }


def card_from_dict(data: dict, origin: str) -> CardProfile:
    try:
        return CardProfile(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "profile"
        raise RooflineError(f"{origin}: {loc}: {err['msg']}") from None
    except TypeError:
        raise RooflineError(f"{origin}: a card profile must be a JSON object") from None


def _read_json(path: Path) -> dict:
    from roofline.atomic import read_json

    return read_json(path, "card profile")


@lru_cache(maxsize=1)
def _all_profiles() -> dict[str, CardProfile]:
    cards = {}
    for path in sorted(profiles_dir().glob("*.json")):
        card = card_from_dict(_read_json(path), str(path))
        cards[card.id] = card
    return cards


def card_ids() -> list[str]:
    return sorted(_all_profiles())


def all_cards() -> list[CardProfile]:
    return [_all_profiles()[k] for k in card_ids()]


@lru_cache(maxsize=256)
def load_card(name_or_path: str) -> CardProfile:
    """A card by id or alias (case-insensitive; spaces, dashes and underscores alike), or a path
    to a profile JSON file."""
    key = name_or_path.strip()
    path = Path(key).expanduser()
    _, is_file = probe_path(key)
    if path.suffix == ".json" or is_file:
        if not is_file:
            raise RooflineError(f"card profile {short(key)} not found")
        return card_from_dict(_read_json(path), str(path))
    cards = _all_profiles()
    wanted = _fold(key)
    for card in cards.values():
        if wanted == _fold(card.id) or wanted in (_fold(a) for a in card.aliases):
            return card
    names = list(cards) + [a for c in cards.values() for a in c.aliases]
    near = difflib.get_close_matches(key.lower(), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else "; `roofline cards` lists them"
    raise RooflineError(f"unknown card {short(key)!r}{hint}")


def _fold(name: str) -> str:
    """How names are compared: case-insensitive, with spaces, '-' and '_' all alike."""
    return "-".join(name.lower().replace("_", " ").replace("-", " ").split())


def matmul_peak(card: CardProfile, weight_dtype: str, measured_bf16_flop_per_s: float | None = None) -> Peak:
    """The matmul ceiling a pass runs at on ``card`` with weights in ``weight_dtype`` (a weight
    format of roofline/formats.py): ``CardProfile.peak_for_format`` -- the format's own tensor-core
    path where the card has one (fp8 on Ada/Hopper/Blackwell, int8 for W8A8 and llama.cpp's MMQ
    kernels, fp4 on Blackwell), else the bf16/fp16 ceiling with ``fallback`` set and a note.
    ``measured_bf16_flop_per_s`` (a calibration's measured bf16 ceiling) replaces the card's bf16
    ceiling and scales the other dtypes' peaks alike. Called once, by roofline.step.StepModel."""
    peak = card.peak_for_format(weight_dtype)
    if measured_bf16_flop_per_s:
        peak = peak._replace(flop_per_s=peak.flop_per_s * measured_bf16_flop_per_s / card.peak_flop_per_s,
                             note=peak.note + " (scaled to the calibration's measured bf16 ceiling)")
    return peak
