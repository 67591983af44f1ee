"""Engine profiles: what a decode engine adds to a card, kept apart from the card (issue 10).

A profile (``hardware_profiles/engines/<id>.json``) says how the engine decodes (its KV cache
kind, how it prefills) and holds *facts* read from its code -- how many times its attention reads
an MLA latent, what attention sinks cost it, its prefill chunk -- that a calibration of that
engine carries without fitting them. Each fact names its source.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.errors import RooflineError


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    source: str = Field(min_length=1)


class EngineProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    kind: str = Field(description="harness (measured by roofline calibrate) or serving (an engine people deploy)")
    kv_cache: str
    description: str = ""
    facts: dict[str, Fact] = {}

    def calibration_facts(self) -> dict:
        """The facts as Calibration fields (integers where the field is one)."""
        out = {}
        for key, fact in self.facts.items():
            out[key] = int(fact.value) if key == "prefill_chunk_tokens" else fact.value
        return out


def engines_dir() -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "engines"


@lru_cache(maxsize=None)
def engine_ids() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in engines_dir().glob("*.json")))


@lru_cache(maxsize=None)
def load_engine(engine: str) -> EngineProfile:
    """The profile of ``engine`` (an id of hardware_profiles/engines/); an unknown id is an error."""
    from roofline.atomic import read_json

    path = engines_dir() / f"{engine}.json"
    if not path.is_file():
        raise RooflineError(f"unknown engine {engine!r}; known: {', '.join(engine_ids())}", "engine")
    try:
        return EngineProfile(**read_json(path, "engine profile"))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RooflineError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
