"""The scenario: everything an answer depends on besides the batch sizes, in one frozen object.

Built once from names (``make_scenario``, all arguments by keyword; validation in one place) and
passed by keyword from the CLI through the API to the model. ``scenario.step`` is the cost model
(roofline.step.StepModel) of its model on its card under its calibration.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from functools import cached_property

from roofline import validate
from roofline.calibration import Calibration, load_calibration, shipped_calibration
from roofline.errors import RooflineError, RooflineWarning
from roofline.formats import kv_format_names, weight_format_names
from roofline.hardware import CardProfile, load_card
from roofline.model_spec import ModelSpec, load_model
from roofline.prefill import LOGITS
from roofline.step import StepModel
from roofline.units import kv_dtype_name, weight_dtype_name

KV_CACHE_KINDS = ("dynamic", "static")
#: The weight formats (roofline/formats.py) and KV-cache formats a scenario accepts.
DTYPES = tuple(weight_format_names())
KV_DTYPES = tuple(kv_format_names())
#: The engine of a Scenario built without one (make_scenario picks the card's default instead:
#: roofline.engines.default_engine).
DEFAULT_ENGINE = "hf-eager"
#: Longest prompt or generation accepted (tokens): beyond any model's context and still exact.
MAX_TOKENS = 2**31
#: The most GPUs a model is split over.
MAX_TP = 64


@dataclass(frozen=True, eq=False)
class Scenario:
    """A model on a card under a calibration, with the request shape and storage formats."""

    card: CardProfile
    model: ModelSpec
    calibration: Calibration
    engine: str = DEFAULT_ENGINE
    prompt_tokens: int = 128
    gen_tokens: int = 128
    kv_cache: str = "dynamic"
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    logits: str = "last"
    tp: int = 1
    routing_skew: float = 0.0
    #: What the answer rests on that the user should know (roofline.scenario.scenario_warnings);
    #: each was also issued as a RooflineWarning.
    warnings: tuple = ()

    @cached_property
    def step(self) -> StepModel:
        """The pass cost model (roofline.step) of this model, card, calibration, dtypes and split."""
        return StepModel(self.model, self.card, self.calibration, weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype,
                         tp=self.tp, routing_skew=self.routing_skew)

    def replace(self, **changes) -> "Scenario":
        """A copy with some fields changed (validated as make_scenario validates them)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "warnings"}
        if "calibration" not in changes and self.is_transferred and {"card", "engine", "weight_dtype"} & set(changes):
            fields["calibration"] = "auto"  # transferred terms depend on the card, engine and weight format
        fields.update(changes)
        return make_scenario(**fields)

    @property
    def is_transferred(self) -> bool:
        """Whether the calibration was transferred from the engine profile (no calibration of this card)."""
        return bool((self.calibration.fit_report or {}).get("transferred"))

    def meta(self) -> dict:
        """What the answer was computed for (plain data, base units)."""
        from roofline.hardware import matmul_peak

        step, cal = self.step, self.calibration
        peak = matmul_peak(self.card, self.weight_dtype, cal.measured_peak_flop_per_s)
        return {
            "card": self.card.id,
            "engine": self.engine,
            "engine_profile": f"hardware_profiles/engines/{self.engine}.json",
            "model": self.model.name,
            "prompt_tokens": self.prompt_tokens,
            "gen_tokens": self.gen_tokens,
            "kv_cache": self.kv_cache,
            "logits": self.logits,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "calibration": cal.label,
            "calibration_source": cal.source,
            "bandwidth_bytes_per_s": step.bandwidth_bytes_per_s,
            "peak_flop_per_s": step.peak_flop_per_s,
            "matmul_peak_dtype": peak.dtype,
            "matmul_peak_note": peak.note,
            "balance_point_flop_per_byte": step.balance_point_flop_per_byte,
            "memory_bytes": self.card.memory_bytes,
            "tp": self.tp,
            "routing_skew": self.routing_skew,
            "warnings": list(self.warnings),
        }


def resolve_calibration(card: CardProfile, calibration, engine: str, weight_dtype: str = "bf16") -> Calibration:
    """``calibration``: a Calibration, a file path, ``"auto"`` or None (the pure roofline).

    ``"auto"``: the calibration shipped for this card and engine where there is one; else the
    engine profile's terms transferred to the card (roofline.engines.transferred_calibration:
    the engine's efficiencies times the card's ceilings, the weight format's and the card class's
    terms where the profile has them), whose source and expected error say so."""
    if calibration == "auto":
        shipped = shipped_calibration(card.id, engine)
        if shipped is not None:
            return shipped
        from roofline.engines import transferred_calibration

        return transferred_calibration(card, engine, weight_dtype)
    if calibration is None:
        return Calibration.uncalibrated(card.id)
    if isinstance(calibration, Calibration):
        return calibration
    return load_calibration(calibration)


def resolve_engine(card: CardProfile, engine: str | None, calibration=None) -> str:
    """The engine's canonical id (an unknown one is an error naming ``engine``); None: the engine of
    a given calibration, else the card's default (roofline.engines.default_engine)."""
    from roofline.engines import default_engine, engine_name

    if engine is not None:
        return engine_name(engine)
    if isinstance(calibration, Calibration) and not calibration.is_uncalibrated:
        return calibration.engine
    return default_engine(card)[0]


def make_scenario(
    *,
    card: str | CardProfile,
    model: str | ModelSpec,
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    calibration: Calibration | str | None = "auto",
    engine: str | None = None,
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    logits: str = "last",
    tp: int = 1,
    routing_skew: float = 0.0,
) -> Scenario:
    """Resolve names and validate: the one way a Scenario is made. ``engine`` None: the card's
    default engine (roofline.engines.default_engine)."""
    card_p = card if isinstance(card, CardProfile) else load_card(card)
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    weight_dtype = weight_dtype_name(weight_dtype, "weight_dtype")
    kv_dtype = kv_dtype_name(kv_dtype, "kv_dtype")
    if isinstance(calibration, str) and calibration != "auto":
        calibration = load_calibration(calibration)
    engine = resolve_engine(card_p, engine, calibration)
    cal = resolve_calibration(card_p, calibration, engine, weight_dtype)
    return _checked(Scenario(
        card=card_p,
        model=spec,
        calibration=cal,
        engine=engine,
        prompt_tokens=validate.whole(prompt_tokens, "prompt_tokens", maximum=MAX_TOKENS),
        gen_tokens=validate.whole(gen_tokens, "gen_tokens", maximum=MAX_TOKENS),
        kv_cache=validate.choice(kv_cache or cal.kv_cache, "kv_cache", KV_CACHE_KINDS),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        logits=validate.choice(logits, "logits", LOGITS),
        tp=validate.whole(tp, "tp", maximum=MAX_TP),
        routing_skew=validate.non_negative(routing_skew, "routing_skew", maximum=8.0),
    ))


def scenario_warnings(sc: Scenario) -> list[str]:
    """Mismatches that leave an answer computable but doubtful: a context past the model's
    trained positions; weights alone larger than the card's memory (every batch out of memory)."""
    notes = []
    context = sc.prompt_tokens + sc.gen_tokens
    limit = sc.model.max_position_embeddings
    if limit and context > limit:
        notes.append(f"prompt + gen = {context:,} tokens is past {sc.model.name}'s max_position_embeddings "
                     f"({limit:,}): the model was not built for that context")
    weights = sc.model.weight_bytes(sc.weight_dtype, "bf16") / sc.tp
    if weights > sc.card.memory_bytes:
        per = " per GPU" if sc.tp > 1 else ""
        notes.append(f"{sc.model.name}'s weights alone ({weights / 2**30:,.1f} GiB{per}) exceed {sc.card.id}'s memory "
                     f"({sc.card.memory_bytes / 2**30:,.1f} GiB): no batch fits; try --tp or a smaller weight format")
    return notes


def _checked(sc: Scenario) -> Scenario:
    """Refuse a calibration of another card (its ceilings and overheads are that card's); attach
    and issue the scenario's warnings."""
    cal = sc.calibration
    if not cal.is_uncalibrated and cal.card != sc.card.id:
        raise RooflineError(
            f"this calibration was fitted on {cal.card}, not {sc.card.id}: its ceilings and overheads are that card's; "
            f"give --card {cal.card}, a calibration of {sc.card.id}, or --no-calibration", "calibration")
    notes = scenario_warnings(sc)
    for note in notes:
        warnings.warn(RooflineWarning(note), stacklevel=3)
    return dataclasses.replace(sc, warnings=tuple(notes)) if notes else sc
