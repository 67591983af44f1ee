"""What the chart page computes from: every scalar its script's formulas need, exported in one place.

``page_data()`` is the only bridge between the Python model and the page's JavaScript port of
it (roofline/chart_assets/model.js). The port evaluates the same formulas as roofline.decode
(``StepModel.pass_s``, ``mean_decode`` with the same 16-block context average),
roofline.prefill, roofline.memory, roofline.prediction.bend, roofline.batching and
roofline.serving on exactly these numbers, so every what-if control redraws in the page
without a round trip; tests/test_model_js.py checks the port against the package under node,
tests/test_chart_browser.py the page in a browser.

Per card: memory, the ceilings the model uses, and two sets of calibration terms: the fitted
one (the shipped calibration for card + engine, or ``--calibration FILE`` for the chosen
cards) and the pure roofline, each with every term of roofline.calibration.Calibration (a
shipped file that predates a term gets the model's default). Per model: weight bytes per weight
dtype, KV bytes per token per KV dtype, FLOPs per token and per context token, LM-head
parameters, layers, hidden and intermediate size, the elementwise kernels' activation bytes per
token, and logits bytes. All in base units (bytes, FLOP, seconds, bytes/s, FLOP/s).
"""

from __future__ import annotations


from roofline.calibration import MAX_EXPONENT, Calibration, load_calibration, shipped_calibration
from roofline.errors import RooflineError
from roofline.hardware import CardProfile, all_cards, load_card
from roofline.model_spec import ModelSpec, catalog_names, load_model
from roofline import validate
from roofline.prediction import BEND_MAX_BATCH, bend_grid
from roofline.scenario import make_scenario
from roofline.step import activation_width_bytes
from roofline.units import GiB, dtype_bytes

#: Storage dtypes the page offers for weights and the KV cache (the CLI's choices).
WHAT_IF_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
#: Activations and logits are bf16, as StepModel's default act_dtype.
ACT_DTYPE = "bf16"
#: Provenance fields of a Calibration; every other field is a term the page's formulas may read.
CALIBRATION_PROVENANCE = ("card", "engine", "source", "fitted_on", "fit_report")
#: The calibration terms the page exports: every field of the pydantic model but its provenance,
#: so a term added to roofline.calibration reaches the page (with its default where a shipped
#: file predates it) without a list to keep in step.
CALIBRATION_TERMS = tuple(k for k in Calibration.model_fields if k not in CALIBRATION_PROVENANCE)
DEFAULT_MIX = "8x32,8x256"
DEFAULT_MIX_BATCH = 16
DEFAULT_TTFT_MAX_S = 0.5


def calibration_terms(cal: Calibration) -> dict:
    terms = {k: getattr(cal, k) for k in CALIBRATION_TERMS}
    terms["label"] = "pure roofline (ceilings alone)" if cal.is_uncalibrated else f"{cal.card}/{cal.engine}"
    terms["source"] = cal.source
    terms["is_uncalibrated"] = cal.is_uncalibrated
    return terms


def card_entry(card: CardProfile, fitted: Calibration | None) -> dict:
    return {
        "id": card.id,
        "name": card.name,
        "memory_bytes": card.memory_bytes,
        "bandwidth_bytes_per_s": card.bandwidth_bytes_per_s,
        "peak_flop_per_s": card.peak_flop_per_s,
        "ceiling_source": card.ceiling_source,
        "fitted": None if fitted is None or fitted.is_uncalibrated else calibration_terms(fitted),
        "pure": calibration_terms(Calibration.uncalibrated(card.id)),
    }


def model_entry(spec: ModelSpec) -> dict:
    return {
        "name": spec.name,
        "params": spec.param_count,
        "num_hidden_layers": spec.num_hidden_layers,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "linear_flop_per_token": spec.linear_flop_per_token,
        "body_linear_flop_per_token": spec.body_linear_flop_per_token,
        "lm_head_params": spec.lm_head_params,
        "attention_flop_per_context_token": spec.attention_flop_per_context_token,
        "logits_bytes_per_position": spec.logits_bytes_per_position(ACT_DTYPE),
        "act_dtype_bytes": dtype_bytes(ACT_DTYPE),
        # StepModel's elementwise traffic per token, all layers, per unit of activation_traffic_coeff
        "act_width_bytes_per_token": activation_width_bytes(spec, ACT_DTYPE),
        "weight_bytes": {d: spec.weight_bytes(d, ACT_DTYPE) for d in WHAT_IF_DTYPES},
        "decode_weight_bytes": {d: spec.decode_weight_bytes(d, ACT_DTYPE) for d in WHAT_IF_DTYPES},
        "kv_bytes_per_token": {d: spec.kv_bytes_per_token(d) for d in WHAT_IF_DTYPES},
    }


def bend_grid_tail() -> list[int]:
    """The knee grid of roofline.prediction.bend beyond 1..4096 (the page builds 1..4096 itself)."""
    grid = bend_grid()
    return [int(x) for x in grid[grid > 4096]]


def measurement_points(paths) -> list[dict]:
    """Measured rows (status ok) with card and model resolved to the page's ids where possible."""
    from roofline.measurements import read_measurements

    points = []
    for path in paths:
        for row in read_measurements(path):
            if not row.ok:
                continue
            points.append({
                "card": _resolve(load_card, row.card, "id"),
                "model": _resolve(load_model, row.model, "name"),
                "engine": row.engine,
                "kv_cache": row.kv_cache,
                "prompt_tokens": row.prompt_tokens,
                "gen_tokens": row.gen_tokens,
                "batch": row.batch,
                "ttft_s": row.ttft_s,
                "tpot_s": row.tpot_s,
                "peak_mem_bytes": row.peak_mem_bytes,
            })
    return points


def _resolve(loader, name: str, attr: str) -> str:
    try:
        return getattr(loader(name), attr)
    except RooflineError:
        return name


def _fitted_for(card: CardProfile, chosen: set[str], calibration, engine: str) -> Calibration | None:
    if card.id in chosen and calibration is None:
        return None
    if card.id in chosen and isinstance(calibration, Calibration):
        return calibration
    if card.id in chosen and calibration != "auto":
        return load_calibration(calibration)
    # issue 10: a card without a calibration for this engine shows the one shipped for its default engine
    from roofline.engines import default_engine

    return shipped_calibration(card.id, engine) or shipped_calibration(card.id, default_engine(card)[0])


def page_data(
    cards=("rtx3060",),
    models=("qwen2.5-1.5b",),
    *,
    measurements=(),
    mix: str = DEFAULT_MIX,
    batch: int = DEFAULT_MIX_BATCH,
    stream_count: int | None = None,
    ttft_max_s: float = DEFAULT_TTFT_MAX_S,
    return_policy: str = "whole-batch",
    **options,
) -> dict:
    """Everything the page needs, as plain JSON-able data.

    ``cards`` and ``models``: names (or profile / config.json paths); the first of each is selected
    when the page opens, the others are drawn as comparison lines in the throughput chart. The
    page offers every catalog model and every card profile besides. ``options``: the scenario
    options of roofline.api (``calibration`` applies to ``cards``: "auto" the shipped one for
    ``engine``, None the pure roofline, or a Calibration or file; other cards use their shipped
    calibration, if any). ``stream_count``: requests in the static-vs-continuous stream (default:
    the mix four times over); ``return_policy``: when the static server returns results.
    """
    from roofline.batching import parse_mix
    from roofline.serving import RETURN_POLICIES

    cards, models = list(cards) or ["rtx3060"], list(models) or ["qwen2.5-1.5b"]
    chosen_cards = [load_card(c) for c in cards]
    chosen_models = [load_model(m) for m in models]
    # resolve the chosen calibration once, so a bad file fails here with its own message
    calibration = options.pop("calibration", "auto")
    if isinstance(calibration, str) and calibration != "auto":
        calibration = load_calibration(calibration)
    # validate the initial scenarios the same way predict does
    scenarios = [make_scenario(card=c, model=m, calibration=calibration, **options)
                 for c in chosen_cards for m in chosen_models]
    first = scenarios[0]
    for d, what in ((first.weight_dtype, "weight_dtype"), (first.kv_dtype, "kv_dtype")):
        validate.choice(d, what, WHAT_IF_DTYPES)
    batch = validate.whole(batch, "batch")
    classes = parse_mix(mix)
    validate.choice(return_policy, "return_policy", RETURN_POLICIES)
    ttft_max_s = validate.positive(ttft_max_s, "ttft_max_s", "a positive number of seconds")
    count = sum(c for c, _ in classes)
    stream_count = validate.whole(stream_count, "stream_count") if stream_count is not None else 4 * count
    engine = first.engine

    card_objs = {c.id: c for c in all_cards()}
    card_objs.update({c.id: c for c in chosen_cards})
    chosen_ids = {c.id for c in chosen_cards}
    model_objs = {name: load_model(name) for name in catalog_names()}
    model_objs.update({m.name: m for m in chosen_models})
    return {
        "format": 1,
        "dtypes": list(WHAT_IF_DTYPES),
        "cards": [card_entry(c, _fitted_for(c, chosen_ids, calibration, engine)) for c in card_objs.values()],
        "models": [model_entry(m) for m in model_objs.values()],
        "initial": {
            "card": chosen_cards[0].id,
            "model": chosen_models[0].name,
            "prompt_tokens": first.prompt_tokens,
            "gen_tokens": first.gen_tokens,
            "weight_dtype": first.weight_dtype,
            "kv_dtype": first.kv_dtype,
            "kv_cache": options.get("kv_cache") or "auto",
            "calibrated": calibration is not None,
            "logits": "last",
            "ttft_max_s": ttft_max_s,
            "mix": mix,
            "batch": batch,
            "stream_count": stream_count,
            "return_policy": return_policy,
        },
        "compare": [[c.id, m.name] for c in chosen_cards for m in chosen_models][1:],
        "engine": engine,
        "measurements": measurement_points(measurements),
        "bend_grid_tail": bend_grid_tail(),
        "bend_max_batch": BEND_MAX_BATCH,
        "max_exponent": MAX_EXPONENT,
        "gib": GiB,
    }


def settings_calibration(data: dict, settings: dict) -> Calibration | None:
    """The Calibration the page uses for ``settings`` (for checking the page against Python)."""
    card = next(c for c in data["cards"] if c["id"] == settings["card"])
    terms = card["fitted"] if settings.get("calibrated", True) and card["fitted"] else card["pure"]
    if terms["is_uncalibrated"]:
        return None
    return Calibration(card=settings["card"], engine="page", **{k: terms[k] for k in CALIBRATION_TERMS})
