"""Engine profiles: what a decode engine adds to a card, kept apart from the card (issue 10).

A card profile (roofline.hardware) sets the ceilings: bandwidth, matmul peaks per dtype, memory.
An engine profile (``hardware_profiles/engines/<id>.json``) says what the engine adds on top:

* **terms** -- the calibration terms of roofline.calibration (fixed and per-layer overheads per
  step, the fraction of the card's datasheet bandwidth and matmul peaks its kernels reach, its
  attention's KV traffic, its prefill's overhead and efficiency, ...), per **variant** (the backend
  the engine runs on: llama.cpp's CUDA and Metal kernels are different programs), with values for
  particular **weight formats** (a dequantising kernel reaches less of the card than an f16 one)
  and factors for **card classes** where the data say so (``card_classes``: HBM cards, GeForce
  cards);
* **facts** read from its code (prefill chunk, MLA passes, sink bytes), each with its source;
* how it keeps its **KV cache**, and the **memory** it reserves;
* what each variant was **fitted on** (cards, models, formats, sources) and its **error**: the
  leave-one-card-out error of its predictions (benchmarks/fit_engine_profiles.py).

A card without a calibration of its own for an engine gets the engine's terms *transferred*
(``transferred_calibration``): the variant's efficiencies times the card's datasheet ceilings,
with the leave-one-card-out error as the answer's expected error (roofline.confidence).

``default_engine(card)`` is the engine a command uses when none is named.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.errors import RooflineError

#: Backends a variant may be named for.
BACKENDS = ("cuda", "metal", "rocm", "vulkan", "cpu")
#: Card classes a variant may give factors for (see card_classes).
CARD_CLASSES = ("hbm", "geforce")


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    source: str = Field(min_length=1)


class MemoryReserve(BaseModel):
    """How much of the card's memory the engine takes for itself (or leaves unused) by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    usable_fraction: float | None = Field(None, gt=0, le=1, description="share of the card's memory the engine "
                                          "allots to weights, KV cache and activations (vLLM gpu_memory_utilization)")
    kv_fraction_of_free: float | None = Field(None, gt=0, le=1, description="share of the memory left after the "
                                              "weights that the KV cache takes (TensorRT-LLM, LMDeploy)")
    source: str = Field(min_length=1)
    note: str | None = None


class Variant(BaseModel):
    """The terms of an engine on one backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    applies_to: str = Field(min_length=1, description="which cards: the backend and the vendors it runs on")
    terms: dict[str, Fact] = {}
    formats: dict[str, dict[str, Fact]] = Field(
        default={}, description="weight format -> terms that replace the shared ones for that format")
    classes: dict[str, dict[str, Fact]] = Field(
        default={}, description="card class -> factors on terms for the cards of that class (a key 'term/16-bit' "
        "applies to that kind of weight format only: 16-bit, gguf, 8-bit, 4-bit weight-only, fp4)")
    fitted_on: dict = Field(default={}, description="cards, models, formats, points and sources of the fit")
    error: dict = Field(default={}, description="leave-one-card-out errors (and the tables they come from)")
    coverage: dict = Field(default={}, description="what the fitted measurements spanned (roofline.confidence)")
    note: str | None = None

    def format_for(self, weight_format: str) -> tuple[str | None, str | None]:
        """The format whose terms a case in ``weight_format`` takes: its own, else the nearest one
        fitted (same family -- llama.cpp's legacy blocks, its k-quants, 4-bit weight-only, 8-bit --
        then nearest in bits per weight), else None (the shared terms: 16-bit kernels). The second
        value says why, where a substitute was taken."""
        from roofline.formats import weight_format as lookup

        if weight_format in self.formats:
            return weight_format, None
        fmt = lookup(weight_format)
        fam = _family(fmt.name)
        same = [f for f in self.formats if _family(f)[0] == fam[0]]
        if not same or fam[0] == "16-bit":
            if fam[0] != "16-bit" and self.formats:
                return None, f"no fit of {fmt.name} or its kind: the 16-bit terms"
            return None, None
        best = sorted(same, key=lambda f: (_family(f) != fam, abs(lookup(f).bits_per_weight - fmt.bits_per_weight)))[0]
        return best, f"no fit of {fmt.name}: the terms fitted for {best}"

    def terms_for(self, weight_format: str, classes=()) -> tuple[dict[str, float], list[str]]:
        """The calibration terms for a case: shared, replaced by the format's, times the classes'
        factors (clipped to the term's bounds); and the notes on any substitution."""
        from roofline.calibration import TERMS

        out = {k: f.value for k, f in self.terms.items()}
        notes = []
        fmt, why = self.format_for(weight_format)
        if fmt is not None:
            out.update({k: f.value for k, f in self.formats[fmt].items()})
        if why:
            notes.append(why)
        kind = _family(weight_format)[0]
        for cls in classes:
            for key, f in self.classes.get(cls, {}).items():
                k, _, only = key.partition("/")  # "term/16-bit": a factor on that kind of format only
                if only and only != kind:
                    continue
                t = TERMS[k]
                value = out.get(k, t.default) * f.value
                hi = t.upper if t.upper < float("inf") else value
                out[k] = min(max(value, t.fit_bounds[0]), hi)
        return out, notes


class EngineProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    kind: str = Field(description="harness (measured by roofline calibrate) or serving (an engine people deploy)")
    kv_cache: str = Field(description="how a decode step reads the cache, in the step model's terms: dynamic (the "
                          "tokens so far) or static (the whole preallocated cache)")
    kv_cache_kind: str = Field("", description="the engine's KV cache layout in its own words (paged blocks, ...)")
    description: str = ""
    sources: list[str] = []
    facts: dict[str, Fact] = {}
    memory: MemoryReserve | None = None
    variants: dict[str, Variant] = {}
    fallback_variant: str | None = Field(None, description="the variant used on a backend without its own")
    default_for: str = Field("", description="the cards this engine is the default for (default_engine)")

    def calibration_facts(self) -> dict:
        """The facts as Calibration fields (integers where the field is one)."""
        out = {}
        for key, fact in self.facts.items():
            out[key] = int(fact.value) if key == "prefill_chunk_tokens" else fact.value
        return out

    def variant_for(self, card) -> tuple[str, Variant, str | None]:
        """(name, variant, note) for ``card``: the variant of its backend, else the fallback with a
        note; an engine with no variant for the card and no fallback is an error."""
        backend = backend_for(card)
        if backend in self.variants:
            return backend, self.variants[backend], None
        if self.fallback_variant and self.fallback_variant in self.variants:
            name = self.fallback_variant
            return name, self.variants[name], (f"no {self.id} {backend} profile: the {name} variant's terms "
                                               f"(an extrapolation to {card.id})")
        raise RooflineError(f"the {self.id} profile has no terms for {backend} ({card.id}); it has "
                            f"{', '.join(self.variants) or 'none'}", "engine")


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

    key = (engine or "").strip().lower()
    key = _ALIASES.get(key, key)
    path = engines_dir() / f"{key}.json"
    if not key or not path.is_file():
        raise RooflineError(f"unknown engine {engine!r}; choose one of {', '.join(engine_ids())}", "engine")
    try:
        return EngineProfile(**read_json(path, "engine profile"))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RooflineError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


#: Names people give the engines.
_ALIASES = {"trt-llm": "tensorrt-llm", "trtllm": "tensorrt-llm", "tensorrt_llm": "tensorrt-llm",
            "llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "llama_cpp": "llama.cpp", "ollama": "llama.cpp",
            "turbomind": "lmdeploy", "hf": "hf-eager", "transformers": "hf-eager"}


def engine_name(engine: str) -> str:
    """The canonical id of ``engine`` (an alias such as ``trt-llm`` or ``ollama`` resolved)."""
    return load_engine(engine).id


# ---- cards: backend, classes, the default engine ----
def backend_for(card) -> str:
    """The backend an engine runs on this card: metal on Apple silicon, rocm on AMD GPUs, cpu on
    CPUs, cuda on NVIDIA GPUs (and anything else)."""
    if card.device_kind == "cpu":
        return "cpu"
    vendor = (card.vendor or "").lower()
    if vendor == "apple":
        return "metal"
    if vendor == "amd":
        return "rocm"
    return "cuda"


def card_classes(card) -> tuple[str, ...]:
    """The classes of a card an engine profile may give factors of their own (where the data say so):

    * ``hbm`` -- HBM memory (``memory_type``): an engine's batch-1 kernels, sized for a few
      hundred GB/s, keep too few bytes in flight to reach an HBM card's share of its bandwidth;
    * ``geforce`` -- GeForce cards (the name): their FP16 tensor rate with FP16 accumulation is
      twice the FP32-accumulate figure the card profile lists (NVIDIA Ampere/Ada/Blackwell
      whitepapers, Appendix A), and llama.cpp's cuBLAS F16 matmuls accumulate in FP16."""
    out = []
    if (card.memory_type or "").upper().startswith("HBM"):
        out.append("hbm")
    if "GEFORCE" in card.name.upper():
        out.append("geforce")
    return tuple(out)


#: The engine each kind of card is predicted with when none is named (after its shipped calibrations).
DEFAULT_BY_SEGMENT = {
    "apple": ("llama.cpp", "Apple silicon runs local models through llama.cpp (and Ollama/LM Studio, built on "
                           "it) on Metal"),
    "cpu": ("llama.cpp", "a CPU runs local models through llama.cpp"),
    "embedded": ("llama.cpp", "a Jetson runs local models through llama.cpp"),
    "geforce": ("llama.cpp", "a GeForce card is a desktop card: one user, local models, llama.cpp"),
    "datacenter": ("vllm", "a datacenter or workstation GPU serves many users, most often with vLLM"),
}
#: Harness engines whose shipped calibration of a card, where one exists, is that card's default
#: (most measured first).
HARNESS_PREFERENCE = ("graph", "hf-eager")


def segment(card) -> str:
    """apple, cpu, embedded (Jetson), geforce, or datacenter (datacenter and workstation GPUs)."""
    if card.device_kind == "cpu":
        return "cpu"
    if (card.vendor or "").lower() == "apple":
        return "apple"
    if "JETSON" in card.name.upper():
        return "embedded"
    if "geforce" in card_classes(card):
        return "geforce"
    return "datacenter"


def default_engine(card) -> tuple[str, str]:
    """(engine, why) for ``card`` when no engine is named: the engine of a calibration measured on
    this very card where one is shipped (the graph engine before hf-eager: CUDA-graph decode is
    what serving engines do), else the engine people use on that kind of card (DEFAULT_BY_SEGMENT)."""
    from roofline.calibration import shipped_calibration

    for engine in HARNESS_PREFERENCE:
        if shipped_calibration(card.id, engine) is not None:
            return engine, f"the calibration measured on this {card.id} ({engine})"
    engine, why = DEFAULT_BY_SEGMENT[segment(card)]
    return engine, why


#: Which ceilings an engine profile's efficiencies multiply: "datasheet" -- the datasheet's, the one
#: figure every card profile has; "card" -- the card profile's (measured where a measurement is
#: published). The datasheet transfers better: llama.cpp's leave-one-card-out TPOT error is 7.1% on
#: datasheet ceilings, 7.9% on the card profiles' (benchmarks/fit_engine_profiles.py, both tried).
PROFILE_CEILINGS = "datasheet"


def profile_ceilings(card) -> dict:
    """The ceilings an engine profile's efficiencies multiply, as a calibration's ``measured_*``
    fields (PROFILE_CEILINGS): the same in the fit (roofline.published_fit) and in a transfer."""
    if PROFILE_CEILINGS == "datasheet":
        return {"measured_bandwidth_bytes_per_s": card.datasheet_bandwidth.base,
                "measured_peak_flop_per_s": card.datasheet_bf16_flops.base}
    return {"measured_bandwidth_bytes_per_s": card.bandwidth_bytes_per_s, "measured_peak_flop_per_s": card.peak_flop_per_s}


def grouped_terms(terms: dict) -> dict:
    """Terms with the entries of a by-kind table ("prefill_elementwise_bytes_per_element.hidden":
    one scalar a kind, as an engine profile stores them) gathered into that field's dict."""
    out: dict = {}
    for k, v in terms.items():
        field, dot, kind = k.partition(".")
        if dot:
            out.setdefault(field, {})[kind] = v
        else:
            out[k] = v
    return out


def transferred_calibration(card, engine: str, weight_dtype: str = "bf16"):
    """A Calibration of ``engine`` on ``card`` built from the engine profile: the variant of the
    card's backend, the weight format's terms, the card classes' factors, on the card's datasheet
    ceilings; ``fit_report["transferred"]`` holds the profile's leave-one-card-out error and why
    the terms were transferred (roofline.confidence reads it)."""
    from roofline.calibration import Calibration
    from roofline.units import weight_dtype_name

    profile = load_engine(engine)
    name, variant, note = profile.variant_for(card)
    weight = weight_dtype_name(weight_dtype)
    classes = tuple(c for c in card_classes(card) if c in variant.classes)
    terms, notes = variant.terms_for(weight, classes)
    terms = grouped_terms(terms)
    extra = {k: terms.pop(k) for k in list(terms) if k not in Calibration.model_fields}
    if note:
        notes.insert(0, note)
    cards = variant.fitted_on.get("cards", [])
    measured_here = card.id in cards
    source = (f"transferred from the {profile.id} engine profile ({name} variant"
              + (f", {', '.join(classes)} card" if classes else "")
              + f"; fitted on {len(cards)} card(s){', this one among them' if measured_here else ', not this one'})")
    if notes:
        source += "; " + "; ".join(notes)
    report = {"transferred": {"engine": profile.id, "variant": name, "classes": list(classes),
                              "weight_format": weight, "measured_on_this_card": measured_here, "notes": notes,
                              "terms_not_in_the_step_model": extra,
                              "error": variant.error.get("pooled", {})}}
    if variant.coverage:
        report["coverage"] = variant.coverage
    return Calibration(
        card=card.id, engine=profile.id, kv_cache=profile.kv_cache if profile.kv_cache in ("dynamic", "static")
        else "dynamic",
        **profile_ceilings(card),
        **profile.calibration_facts(), **terms,
        source=source, fitted_on=list(variant.fitted_on.get("models", [])), fit_report=report)


def _family(name: str) -> tuple[str, str]:
    """A weight format's kernel family and kind (which fitted format stands in for an unfitted one:
    one of the same family, the same kind first)."""
    if name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        return "gguf", "legacy"
    if name.startswith("q") and "_k" in name:
        return "gguf", "k-quant"
    if name in ("int4", "awq", "gptq", "nf4", "nf4_dq"):
        return "4-bit weight-only", name
    if name in ("fp8", "int8", "int8_wo", "mxfp8"):
        return "8-bit", name
    if name in ("mxfp4", "nvfp4"):
        return "fp4", name
    return "16-bit", name
