"""GPU profiles: datasheet and measured ceilings, each figure with its unit and source.

Profiles live as JSON files in ``hardware_profiles/`` (one per card). A figure is written in
the unit its source uses ("GB/s", "TFLOP/s", "GiB", ...) and converted to base units here, once.
"""

from __future__ import annotations

import difflib
from functools import cached_property, lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from roofline.errors import RooflineError
from roofline.units import UNIT_SCALE, to_base


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
        """The value in base units (bytes, bytes/s or FLOP/s)."""
        return to_base(self.value, self.unit)


class CardProfile(BaseModel):
    """A GPU: memory, and the bandwidth and bf16 ceilings from datasheet and measurement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    aliases: list[str] = []
    vendor: str | None = None
    memory: Figure
    datasheet_bandwidth: Figure
    datasheet_bf16_flops: Figure
    measured_bandwidth: Figure | None = None
    measured_bf16_flops: Figure | None = None
    other_measurements: list[Figure] = []
    note: str | None = None

    @cached_property
    def memory_bytes(self) -> float:
        return self.memory.base

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
    def ceiling_source(self) -> str:
        bw = "measured" if self.measured_bandwidth else "datasheet"
        fl = "measured" if self.measured_bf16_flops else "datasheet"
        return bw if bw == fl else f"bandwidth {bw}, compute {fl}"

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


@lru_cache(maxsize=64)
def load_card(name_or_path: str) -> CardProfile:
    """A card by id or alias (case-insensitive), or a path to a profile JSON file."""
    key = name_or_path.strip()
    path = Path(key).expanduser()
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise RooflineError(f"card profile {key} not found")
        return card_from_dict(_read_json(path), str(path))
    cards = _all_profiles()
    lowered = key.lower()
    for card in cards.values():
        if lowered == card.id or lowered in (a.lower() for a in card.aliases):
            return card
    names = list(cards) + [a for c in cards.values() for a in c.aliases]
    near = difflib.get_close_matches(lowered, names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(sorted(cards))}"
    raise RooflineError(f"unknown card {key!r}{hint}")
