"""What the chart page computes from: every scalar its script's formulas need, exported in one place.

``page_data()`` is the only bridge between the Python model and the page's JavaScript port of
it (roofline/chart_assets/model.js and serving.js). The port evaluates the same formulas as
roofline.step (``StepModel``: its coefficient tuple, ``pass_s``, ``experts_touched`` with the
skewed-routing table, the collectives of tensor parallelism), roofline.decode (``mean_decode``
with the same 16-block context average and the windows), roofline.prefill (chunked),
roofline.memory (per GPU), roofline.prediction (every column and ``bend``),
roofline.confidence (expected error and extrapolation), roofline.batching and roofline.serving
(the continuous server: roofline.scheduler's decode-first schedule with the KV pool of
roofline.kvpool sized from the card's memory, priced by roofline.pass_costs.FusedCost),
on exactly these numbers, so every what-if control (card, model, dtypes, prompt, gen, cache,
calibration, tensor-parallel degree, routing skew) redraws in the page without a round trip;
tests/test_model_js.py checks the port against the package under node,
tests/test_chart_browser.py the page in a browser.

Per card: memory, the ceilings, the interconnect tensor parallelism would use (per TP degree
the page offers) and the fitted calibration (the shipped one for card + engine, or
``--calibration FILE`` for the chosen cards) with every term of roofline.calibration.Calibration
and the parts of its fit report roofline.confidence reads. The pure roofline's terms once
(``pure``), and the pure roofline's measured record (``floor``). Per model: the shape numbers
StepModel derives its coefficients from (bytes per weight dtype, attention groups, FLOPs per
token, experts, the longest sequence it takes), in base units (bytes, FLOP, seconds, bytes/s,
FLOP/s). The continuous server's fixed knobs once (``server``: block size, the profiling
prefill's tokens, the engine's reserve, the most running sequences), the memory fraction the
engine may use as an initial setting (``gpu_memory_utilization``). What the page derives
itself it derives with StepModel's formulas and order of operations (1e-9 agreement).
"""

from __future__ import annotations

from roofline import validate
from roofline.calibration import MAX_EXPONENT, Calibration, load_calibration
from roofline.errors import RooflineError
from roofline.hardware import CardProfile, all_cards, load_card
from roofline.kvpool import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_PROFILE_TOKENS
from roofline.model_spec import ModelSpec, catalog_names, load_model
from roofline.prediction import BEND_MAX_BATCH, KNEE_ELASTICITY, bend_grid
from roofline.scenario import MAX_TP, make_scenario
from roofline.step import PLAIN_MLP_ACTIVATION_WEIGHT, activation_width_bytes, plain_intermediate_bytes
from roofline.units import DTYPE_BYTES, GiB

#: Storage dtypes the page offers for weights and the KV cache (the CLI's choices).
WHAT_IF_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
#: Tensor-parallel degrees the page offers (the initial one is added when it is another).
TP_CHOICES = (1, 2, 4, 8)
#: Activations and logits are bf16, as StepModel's default act_dtype.
ACT_DTYPE = "bf16"
#: Provenance fields of a Calibration; every other field is a term the page's formulas may read.
CALIBRATION_PROVENANCE = ("card", "engine", "source", "fitted_on", "fit_report")
#: The calibration terms the page exports: every field of the pydantic model but its provenance,
#: so a term added to roofline.calibration reaches the page (with its default where a shipped
#: file predates it) without a list to keep in step.
CALIBRATION_TERMS = tuple(k for k in Calibration.model_fields if k not in CALIBRATION_PROVENANCE)
#: The parts of a fit report roofline.confidence reads (the rest stays out of the page).
REPORT_ERROR_GROUPS = ("leave_one_model_out", "leave_one_context_out", "validation")
DEFAULT_MIX = "8x32,8x256"
DEFAULT_MIX_BATCH = 16
DEFAULT_TTFT_MAX_S = 0.5


def _error_keys() -> tuple[str, ...]:
    from roofline.confidence import _KEYS

    return tuple(dict.fromkeys(_KEYS.values()))


def compact_fit_report(report: dict | None) -> dict:
    """The fit report as roofline.confidence reads it: the coverage, the held-out errors (only
    the mean errors it picks from, and a validation's ``what`` and ``models``) and the in-sample
    error. ``expected_errors`` and ``extrapolation`` give the same answers from it as from the
    whole report (tests/test_chart.py checks it on the shipped calibrations)."""
    report = report or {}
    keys = _error_keys()

    def errors(entry: dict, extra=()) -> dict:
        return {k: entry[k] for k in (*extra, *keys) if k in entry}

    out = {}
    if "coverage" in report:
        out["coverage"] = report["coverage"]
    for group in REPORT_ERROR_GROUPS:
        if group in report:
            extra = ("what", "models", "tpot_mape_by_overhead_share") if group == "validation" else ()
            out[group] = {name: errors(e or {}, extra) for name, e in report[group].items()}
    if "in_sample" in report:
        out["in_sample"] = errors(report["in_sample"] or {})
    if "transferred" in report:  # roofline.confidence._transferred_errors and extrapolation read these
        t = report["transferred"]
        out["transferred"] = {"engine": t["engine"], "variant": t["variant"],
                              "measured_on_this_card": t.get("measured_on_this_card", False),
                              "error": {k: t.get("error", {}).get(k) for k in
                                        ("tpot_mape_fraction", "ttft_mape_fraction", "basis", "points")
                                        if k in t.get("error", {})}}
    return out


def calibration_terms(cal: Calibration) -> dict:
    terms = {k: getattr(cal, k) for k in CALIBRATION_TERMS}
    terms["card"] = cal.card
    terms["engine"] = cal.engine
    terms["label"] = "pure roofline (ceilings alone)" if cal.is_uncalibrated else f"{cal.card}/{cal.engine}"
    terms["source"] = cal.source
    terms["is_uncalibrated"] = cal.is_uncalibrated
    terms["fit_report"] = compact_fit_report(cal.fit_report)
    return terms


def card_entry(card: CardProfile, fitted, tp_choices=TP_CHOICES) -> dict:
    """One card: memory, ceilings, the link per TP degree (hardware.CardProfile.tp_link_bytes_per_s;
    None where the card has no interconnect on record) and its calibration, if any. ``fitted``: a
    Calibration (or None), or {weight dtype: Calibration} where the calibration depends on the weight
    format (an engine profile's terms transferred: roofline.engines.transferred_calibration):
    ``fitted`` is then the bf16 one and ``fitted_formats`` the dtypes whose terms differ from it."""
    link = card.interconnect
    by_dtype = fitted if isinstance(fitted, dict) else {}
    fitted = by_dtype.get("bf16") if by_dtype else fitted
    base = None if fitted is None or fitted.is_uncalibrated else calibration_terms(fitted)
    formats = {}
    for d, cal in by_dtype.items():
        terms = None if cal is None or cal.is_uncalibrated else calibration_terms(cal)
        if d != "bf16" and _differs(terms, base):
            formats[d] = terms
    return {
        "id": card.id,
        "name": card.name,
        "memory_bytes": card.memory_bytes,
        "bandwidth_bytes_per_s": card.bandwidth_bytes_per_s,
        "peak_flop_per_s": card.peak_flop_per_s,
        # roofline.hardware.matmul_peak: the weight format picks the tensor path (fp8 on Hopper ...)
        "matmul_peak_flop_per_s": {d: card.peak_for_format(d).flop_per_s for d in WHAT_IF_DTYPES},
        "ceiling_source": card.ceiling_source,
        "tp_link_bytes_per_s": {str(t): card.tp_link_bytes_per_s(t) for t in tp_choices if t > 1},
        "allreduce_latency_s": link.allreduce_latency_s if link else None,
        "fitted": base,
        "fitted_formats": formats,
    }


def _differs(a: dict | None, b: dict | None) -> bool:
    """Whether two exported calibrations differ in anything the page computes with (the source
    text names the weight format, so it is left out)."""
    if a is None or b is None:
        return a is not b
    return any(a[k] != b[k] for k in a if k != "source")


def model_entry(spec: ModelSpec) -> dict:
    """One model: what StepModel, memory, bend and confidence read of its ModelSpec."""
    ad = ACT_DTYPE
    moe = spec.moe_layers > 0
    entry = {
        "name": spec.name,
        "params": spec.param_count,
        # roofline.confidence.extrapolation's words for the size, as Python formats it (.2g)
        "params_label": f"{spec.param_count / 1e9:.2g}",
        "attention_label": spec.attention_label,
        "windowed": bool(any(spec.windows) and spec.layer_windows is not None),
        "sinks": spec.attention_sinks,
        "num_hidden_layers": spec.num_hidden_layers,
        "hidden_size": spec.hidden_size,
        "head_dim": spec.head_dim,  # roofline.step.head_dim_rate: the prefill attention's measured rate
        # query heads a KV head (StepModel._context_windows: the windows' probed groups)
        "heads_per_kv_head": spec.num_attention_heads / spec.num_key_value_heads,
        # KV heads (StepModel._kernel_table: a step's batched matrices are its sequences x one GPU's KV heads)
        "num_key_value_heads": spec.num_key_value_heads,
        # query heads (roofline.memory.decode_score_bytes: one layer's decode scores, split over the GPUs)
        "num_attention_heads": spec.num_attention_heads,
        "vocab_size": spec.vocab_size,
        "widest_intermediate": spec.widest_intermediate,
        "prefill_transient_width": spec.prefill_transient_width,
        "linear_flop_per_token": spec.linear_flop_per_token,
        "body_linear_flop_per_token": spec.body_linear_flop_per_token,
        "lm_head_flop_per_position": spec.lm_head_flop_per_position,
        "logits_bytes_per_position": spec.logits_bytes_per_position(ad),
        # StepModel's elementwise traffic per token, all layers, per unit of activation_traffic_coeff
        "act_width_bytes_per_token": activation_width_bytes(spec, ad),
        # of which a plain MLP's intermediate (0 for a gated one): weighted by the calibration's
        # plain_mlp_activation_weight
        "plain_intermediate_bytes_per_token": plain_intermediate_bytes(spec, ad),
        # the prefill's elementwise elements per token by kind (the calibration's seconds per element)
        "prefill_elementwise_elements": spec.prefill_elementwise_elements,
        # the layers with each decode-layer feature (the calibration's fixed seconds per such layer)
        "decode_layer_features": spec.decode_layer_features,
        "weight_bytes": {d: spec.weight_bytes(d, ad) for d in WHAT_IF_DTYPES},
        "decode_weight_bytes": {d: spec.decode_weight_bytes(d, ad) for d in WHAT_IF_DTYPES},
        "attention_groups": [
            {"layers": g.layers, "kind": g.kind, "window": g.window, "q_heads": g.q_heads, "kv_heads": g.kv_heads,
             "kv_elements_per_token": g.kv_elements_per_token, "flop_per_pair": g.flop_per_pair, "sinks": g.sinks,
             "prefill_flop_per_pair": g.prefill_flop_per_pair}
            for g in spec.attention_groups
        ],
        # roofline.servers.build: the continuous server's max_model_len (None: no limit)
        "max_position_embeddings": spec.max_position_embeddings,
        "moe_layers": spec.moe_layers,
        "num_experts": spec.num_experts,
        "experts_per_token": spec.experts_per_token,
    }
    if moe:
        entry["routed_expert_bytes"] = {d: spec.routed_expert_bytes(d, ad) for d in WHAT_IF_DTYPES}
        entry["all_routed_expert_bytes"] = {d: spec.all_routed_expert_bytes(d, ad) for d in WHAT_IF_DTYPES}
        # StepModel's expert_row_flop before the split over GPUs
        entry["expert_row_flop"] = spec.moe_layers * (2.0 * spec.routed_expert_weight_params
                                                      + spec.routed_expert_bias_params)
        # StepModel's routed-expert FLOPs of a prompt token (priced at the grouped GEMMs' rate)
        entry["routed_flop_per_token"] = spec.routed_expert_flop_per_token
        # StepModel's tile rows: the grouped GEMM's columns (gate-up over hidden, down over intermediate)
        entry["moe_intermediate_size"] = spec.moe_intermediate_size
        # roofline.index_kernels.moe_index_ops: gpt-oss's bias rows are gathered too
        entry["expert_bias"] = bool(spec.expert_bias)
    return entry


def bend_grid_tail() -> list[int]:
    """The knee grid of roofline.prediction.bend beyond 1..4096 (the page builds 1..4096 itself)."""
    grid = bend_grid()
    return [int(x) for x in grid[grid > 4096]]


def server_entry(engine: str) -> dict:
    """The continuous server's knobs the page does not offer, at roofline.api.simulate's defaults
    (roofline.servers.build): blocks of ``block_size`` tokens; the pool sized after one profiling
    prefill of ``profile_tokens`` tokens (no max_num_batched_tokens: DEFAULT_PROFILE_TOKENS) and
    the engine's reserve (its profile's kv_pool_reserve_bytes, else 0); at most ``max_num_seqs``
    running sequences (the slots)."""
    from roofline.kvpool import _engine_reserve_bytes  # the one reading of the engine's fact
    from roofline.servers import MAX_NUM_SEQS

    return {"block_size": DEFAULT_BLOCK_SIZE, "profile_tokens": DEFAULT_PROFILE_TOKENS,
            "engine_reserve_bytes": _engine_reserve_bytes(engine), "max_num_seqs": MAX_NUM_SEQS}


def floor_entry() -> dict:
    """The pure roofline's expected errors and their basis (roofline.confidence.expected_errors
    for an uncalibrated card; the same for every question)."""
    from roofline.confidence import expected_errors

    errors = expected_errors(Calibration.uncalibrated("any"), None, [1])
    return {"tpot_fraction": float(errors["tpot_fraction"][0]), "ttft_fraction": float(errors["ttft_fraction"][0]),
            "peak_mem_fraction": errors["peak_mem_fraction"], "basis": errors["basis"]}


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
                "tp": row.tp_degree,
                "weight_dtype": row.weight_dtype,
                "kv_dtype": row.kv_dtype,
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


def _fitted_for(card: CardProfile, chosen: set[str], calibration, engine: str | None):
    """The calibration the page uses on ``card``: what ``roofline predict --card CARD`` answers with
    (issue 10). For the chosen cards, the one given (None: the pure roofline); else, per weight
    dtype, the shipped calibration of ``engine`` (the engine the user named; None: the card's default
    engine) or that engine's profile transferred to the card (roofline.scenario.resolve_calibration)."""
    if card.id in chosen and calibration is None:
        return None
    if card.id in chosen and isinstance(calibration, Calibration):
        return calibration
    if card.id in chosen and calibration != "auto":
        return load_calibration(calibration)
    from roofline.scenario import resolve_calibration, resolve_engine

    eng = resolve_engine(card, engine)
    out = {}
    for d in WHAT_IF_DTYPES:
        try:
            out[d] = resolve_calibration(card, "auto", eng, d)
        except RooflineError:  # no terms to transfer to this card: the page shows its ceilings alone
            out[d] = None
    return out


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
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    **options,
) -> dict:
    """Everything the page needs, as plain JSON-able data.

    ``cards`` and ``models``: names (or profile / config.json paths); the first of each is selected
    when the page opens, the others are drawn as comparison lines in the throughput chart. The
    page offers every catalog model and every card profile besides. ``options``: the scenario
    options of roofline.api (``calibration`` applies to ``cards``: "auto" the shipped one for
    ``engine``, None the pure roofline, or a Calibration or file; other cards use their shipped
    calibration, if any; ``tp`` and ``routing_skew`` are the page's initial settings).
    ``stream_count``: requests in the static-vs-continuous stream (default: the mix four times
    over); ``return_policy``: when the static server returns results; ``gpu_memory_utilization``:
    the fraction of the card's memory the continuous server's engine may use (its KV pool is the
    rest after weights, workspace and activations; roofline.kvpool).
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
    # validate the initial scenarios the same way predict does (and cost them: a card without a
    # link on record fails here for tp > 1)
    scenarios = [make_scenario(card=c, model=m, calibration=calibration, **options)
                 for c in chosen_cards for m in chosen_models]
    for sc in scenarios:
        sc.step  # noqa: B018 - builds the cost model, raising what it raises
    first = scenarios[0]
    for d, what in ((first.weight_dtype, "weight_dtype"), (first.kv_dtype, "kv_dtype")):
        validate.choice(d, what, WHAT_IF_DTYPES)
    batch = validate.whole(batch, "batch")
    classes = parse_mix(mix)
    validate.choice(return_policy, "return_policy", RETURN_POLICIES)
    ttft_max_s = validate.positive(ttft_max_s, "ttft_max_s", "a positive number of seconds")
    gpu_memory_utilization = validate.positive(gpu_memory_utilization, "gpu_memory_utilization",
                                               "a fraction of the card's memory in (0, 1]", maximum=1.0)
    count = sum(c for c, _ in classes)
    stream_count = validate.whole(stream_count, "stream_count") if stream_count is not None else 4 * count
    engine = first.engine
    tp_choices = tuple(sorted(set(TP_CHOICES) | {first.tp}))

    card_objs = {c.id: c for c in all_cards()}
    card_objs.update({c.id: c for c in chosen_cards})
    chosen_ids = {c.id for c in chosen_cards}
    model_objs = {name: load_model(name) for name in catalog_names()}
    model_objs.update({m.name: m for m in chosen_models})
    pure = calibration_terms(Calibration.uncalibrated("any"))
    pure["card"] = None  # the selected card's
    return {
        "format": 2,
        "dtypes": list(WHAT_IF_DTYPES),
        "dtype_bytes": {d: DTYPE_BYTES[d] for d in (*WHAT_IF_DTYPES, ACT_DTYPE)},
        "act_dtype": ACT_DTYPE,
        "tp_choices": list(tp_choices),
        "max_tp": MAX_TP,
        "cards": [card_entry(c, _fitted_for(c, chosen_ids, calibration, options.get("engine")), tp_choices)
                  for c in card_objs.values()],
        "pure": pure,
        "floor": floor_entry(),
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
            "tp": first.tp,
            "routing_skew": first.routing_skew,
            "ttft_max_s": ttft_max_s,
            "mix": mix,
            "batch": batch,
            "stream_count": stream_count,
            "return_policy": return_policy,
            "gpu_memory_utilization": gpu_memory_utilization,
        },
        "compare": [[c.id, m.name] for c in chosen_cards for m in chosen_models][1:],
        "engine": engine,
        "server": server_entry(engine),
        "measurements": measurement_points(measurements),
        "bend_grid_tail": bend_grid_tail(),
        "bend_max_batch": BEND_MAX_BATCH,
        "knee_elasticity": KNEE_ELASTICITY,
        "max_exponent": MAX_EXPONENT,
        "plain_mlp_activation_weight": PLAIN_MLP_ACTIVATION_WEIGHT,
        "gib": GiB,
    }


def settings_calibration(data: dict, settings: dict) -> Calibration | None:
    """The Calibration the page uses for ``settings`` (for checking the page against Python):
    rebuilt from the exported terms, its fit report the compact one the page reads."""
    card = next(c for c in data["cards"] if c["id"] == settings["card"])
    fitted = card["fitted_formats"].get(settings.get("weight_dtype", "bf16"), card["fitted"])
    terms = fitted if settings.get("calibrated", True) and fitted else None
    if terms is None:
        return None
    return Calibration(card=terms["card"], engine=terms["engine"], source=terms["source"],
                       fit_report=terms["fit_report"], **{k: terms[k] for k in CALIBRATION_TERMS})
