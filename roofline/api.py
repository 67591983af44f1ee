"""The Python API: everything the CLI does, which calls exactly these functions.

Scenario options (``**options`` below; all keyword, validated by roofline.scenario.make_scenario):

    prompt_tokens=128, gen_tokens=128   request shape
    calibration="auto"                  "auto" (shipped for card + engine, else the engine profile's
                                        terms transferred to the card), None (pure roofline),
                                        a file path or a Calibration
    engine=None                         the engine profile (roofline.engines); None: the card's
                                        default (roofline.engines.default_engine)
    kv_cache=None                       "dynamic" or "static" (default: the calibration's)
    weight_dtype="bf16", kv_dtype="bf16", logits="last"
    tp=1                                tensor parallelism: GPUs the model is split over (memory
                                        is then per GPU)
    routing_skew=0.0                    mixture of experts: 0 uniform routing, s > 0 popularity
                                        falling as 1/rank^s

``card`` and ``model`` are names (``"rtx3060"``, ``"qwen2.5-1.5b"``, an HF repo id of a catalog
model, a config.json or profile path) or loaded objects; ``scenario=`` passes a ready
roofline.scenario.Scenario instead of card, model and options.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from roofline import validate
from roofline.errors import RooflineError
from roofline.prediction import DEFAULT_BATCHES, Bend, Prediction, evaluate
from roofline.prediction import bend as _bend
from roofline.scenario import MAX_TP, Scenario, make_scenario


def _scenario(card, model, scenario: Scenario | None, options: dict) -> Scenario:
    if scenario is not None:
        if card is not None or model is not None or options:
            raise RooflineError("give either scenario= or card, model and options, not both")
        return scenario
    if card is None or model is None:
        raise RooflineError("give both a card and a model", "card" if card is None else "model")
    return make_scenario(card=card, model=model, **options)


def predict(card=None, model=None, batches=DEFAULT_BATCHES, *, scenario: Scenario | None = None, **options) -> Prediction:
    """Per-batch TTFT, TPOT, throughput, peak memory, the lesson's ceiling columns, and the bend
    (``.rows()``, ``.bend``, ``.as_dict()`` = what ``roofline predict --format json`` prints)."""
    return evaluate(_scenario(card, model, scenario, options), batches)


def bend(card=None, model=None, *, scenario: Scenario | None = None, **options) -> Bend:
    """Where decode stops being memory-bound: the analytic crossing and the TPOT knee."""
    return _bend(_scenario(card, model, scenario, options))


def choose(
    card=None,
    model=None,
    *,
    ttft_max_s: float | None = None,
    tpot_max_s: float | None = None,
    min_user_tok_s: float | None = None,
    max_batch: int = 4096,
    memory_headroom: float = 0.0,
    scenario: Scenario | None = None,
    **options,
):
    """The largest batch meeting every given limit and fitting in memory (less ``memory_headroom``,
    a fraction of the card's memory kept free), and which limit binds
    (a roofline.choice.Choice; ``.as_dict()`` for plain data). ``tp`` a list of degrees (e.g.
    ``[1, 2, 4, 8]``): the best batch at each, and the degree with the fewest GPU-seconds per
    token (a roofline.choice.TPChoice)."""
    from roofline.choice import choose_batch, choose_tp

    tp = options.get("tp")
    if isinstance(tp, (list, tuple)):
        if scenario is not None:
            raise RooflineError("give tp as a list without a scenario, or a scenario without a tp list", "tp")
        degrees = [validate.whole(t, "tp", maximum=MAX_TP) for t in tp]
        if not degrees or len(set(degrees)) != len(degrees):
            raise RooflineError("tp: give one or more distinct degrees, e.g. 1,2,4,8", "tp")
        scenarios = [_scenario(card, model, None, {**options, "tp": t}) for t in degrees]
        return choose_tp(scenarios, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch, memory_headroom)
    return choose_batch(_scenario(card, model, scenario, options), ttft_max_s, tpot_max_s, min_user_tok_s, max_batch,
                        memory_headroom)


def waste(
    mix: str | None = None,
    requests=None,
    *,
    batch: int | None = None,
    prompt_tokens: int = 128,
    card=None,
    model=None,
    return_policy: str = "whole-batch",
    scenario: Scenario | None = None,
    **options,
) -> dict:
    """Static batching's waste for a length mix (``"8x32,8x256"``) or a request file / Requests.

    Without a card and model: tokens needed, slots used and ``waste_fraction``. With them: for a
    mix, each class's end-to-end time in the batch and alone, and the slowdown
    (``short_request_slowdown`` for the shortest class); for requests, E2E p50/p90/p99.
    Definitions: roofline.batching.
    """
    from roofline import batching

    if (mix is None) == (requests is None):
        raise RooflineError("give either a mix (e.g. 8x32,8x256) or a request file, not both or neither", "mix")
    step = None
    if scenario is not None or card is not None or model is not None:
        step = _scenario(card, model, scenario, {"prompt_tokens": prompt_tokens, **options}).step
    elif options:
        raise RooflineError(f"{', '.join(options)} need a card and a model")
    if mix is not None:
        result = batching.mix_waste(mix, batch, prompt_tokens, step, return_policy)
    else:
        stream = requests if isinstance(requests, batching.Requests) else batching.read_requests(requests)
        result = batching.requests_waste(stream, batch, step, return_policy)
    if step is not None:
        result["card"], result["model"] = step.card.id, step.spec.name
    return result


def simulate(
    card=None,
    model=None,
    *,
    batch: int,
    requests=None,
    mix: str | None = None,
    count: int | None = None,
    prompt_tokens: int = 128,
    arrival_rate: float | None = None,
    seed: int = 0,
    return_policy: str = "whole-batch",
    keep_requests: bool = False,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    static: bool = True,
    scenario: Scenario | None = None,
    schedule: str = "decode-first",
    max_num_batched_tokens: int | None = None,
    max_model_len: int | None = None,
    kv_capacity_tokens: int | None = None,
    gpu_memory_utilization: float | None = 0.9,
    block_size: int = 16,
    engine_reserve_bytes: float | None = None,
    pass_cost: str = "fused",
    loop_terms=None,
    pass_time_scale: float = 1.0,
    pass_time_spread: float | None = None,
    decode_time_scales=None,
    **options,
) -> dict:
    """The same request stream served by static and by continuous batching with ``batch`` slots.

    ``requests``: a request file, or a roofline.batching.Requests; or ``mix`` (+ ``count``) with
    ``prompt_tokens``. ``arrival_rate`` (requests/s) replaces arrivals by seeded Poisson ones;
    without it and without arrival_s every request is queued at time 0. ``return_policy`` is the
    static server's: ``whole-batch`` (default, results return when the batch ends) or
    ``early-return``. The continuous server holds at most ``batch`` running sequences and a KV
    pool sized from the card's memory (``gpu_memory_utilization``, ``block_size``,
    ``engine_reserve_bytes``; or ``kv_capacity_tokens`` given; ``gpu_memory_utilization=None``
    without it: a pool that never binds), admits by free blocks and preempts by recompute;
    ``schedule`` ("decode-first" | "prefill-first"), ``max_num_batched_tokens`` (chunked prefill
    under decode-first), ``max_model_len``; ``pass_cost`` "fused" (one step-model pass per
    iteration) or "serving-loop" (the graph engine's server loop, with its measured
    ``loop_terms``); ``pass_time_scale`` multiplies every pass's GPU time (1.03: a GPU 3% slower
    than priced; near saturation a tail moves far more than that); ``pass_time_spread`` x (e.g.
    0.03) serves the stream twice more with the continuous server's GPU times x faster and x
    slower and adds ``pass_time_spread`` to its summary: the least and the most of each latency
    percentile, the throughput and the preemptions over the three (the continuous server's work
    triples). ``decode_time_scales`` ({bucket: factor}, serving-loop only) multiplies each decode
    bucket's GPU time besides: a run's device probe over the price (roofline.serving_replay's
    ``at_probed_speed``). Definitions: roofline.scheduler, roofline.kvpool, roofline.pass_costs.

    Returns ``static`` (unless ``static=False``) and ``continuous`` summaries (throughput_tok_s,
    ttft/tpot/e2e p50/p90/p99, mean_occupancy, waste_fraction, idle_slot_steps; continuous:
    kv_capacity_tokens, max_running, preemptions, rejected; with ``slo_ttft_s`` / ``slo_tpot_s``:
    slo_attainment, goodput_req_s, goodput_tok_s), ``classes`` (per generation length, when
    there are at most 8) and ``meta`` (with the continuous server's configuration under
    ``server``). ``keep_requests=True`` adds the per-request arrays under ``per_request``.
    """
    from roofline.scheduler import check_work
    from roofline.serving import RETURN_POLICIES, by_generation_length, serve_continuous, serve_static
    from roofline.servers import ServerOptions, build

    batch = validate.whole(batch, "batch")
    validate.choice(return_policy, "return_policy", RETURN_POLICIES)
    seed = validate.whole(seed, "seed", minimum=0)
    slo_ttft_s = validate.optional_positive(slo_ttft_s, "slo_ttft_s", "a positive number of seconds")
    slo_tpot_s = validate.optional_positive(slo_tpot_s, "slo_tpot_s", "a positive number of seconds")
    server_options = ServerOptions(schedule, max_num_batched_tokens, max_model_len, kv_capacity_tokens,
                                   gpu_memory_utilization, block_size, engine_reserve_bytes, pass_cost, loop_terms,
                                   pass_time_scale, decode_time_scales)
    spread_options = [] if pass_time_spread is None else _spread_options(server_options, pass_time_spread)
    stream = request_stream(requests, mix, count, prompt_tokens, arrival_rate, seed)
    check_work(stream.gen_tokens, batch, *(("count", "mix") if mix is not None else ("requests",)))
    sc = _scenario(card, model, scenario, options)
    step = sc.step
    server = build(step, server_options, batch, stream.prompt_tokens, stream.gen_tokens, sc.engine)
    args = (step, stream.prompt_tokens, stream.gen_tokens, stream.arrival_s, batch)
    served = {}
    if static:
        if server_options.pass_time_scale != 1.0:
            from roofline.pass_costs import ScaledPasses

            static_args = (ScaledPasses(step, server_options.pass_time_scale), *args[1:])
        else:
            static_args = args
        served["static"] = serve_static(*static_args, return_policy=return_policy)
    served["continuous"] = serve_continuous(
        *args, pool=server.pool, max_model_len=server.config.max_model_len,
        max_num_batched_tokens=server.config.max_num_batched_tokens, schedule=server.config.schedule, cost=server.cost)
    if served["continuous"].extra["rejected"] == len(stream):
        raise server.nothing_served(stream)
    out = {
        "meta": {
            "card": step.card.id,
            "model": step.spec.name,
            "source": stream.source,
            "requests": len(stream),
            "batch": batch,
            "static_return_policy": return_policy,
            "arrivals": "all at 0" if stream.arrival_s is None else (
                f"poisson {arrival_rate:g}/s seed {seed}" if arrival_rate is not None else "from the file"
            ),
            "calibration": step.calibration.label,
            "server": server.meta(server_options),
        },
        **{name: s.summary(slo_ttft_s, slo_tpot_s) for name, s in served.items()},
    }
    if spread_options:
        summaries = [out["continuous"]]
        for opts in spread_options:
            other = build(step, opts, batch, stream.prompt_tokens, stream.gen_tokens, sc.engine)
            summaries.append(serve_continuous(
                *args, pool=other.pool, max_model_len=other.config.max_model_len,
                max_num_batched_tokens=other.config.max_num_batched_tokens, schedule=other.config.schedule,
                cost=other.cost).summary(slo_ttft_s, slo_tpot_s))
        out["continuous"]["pass_time_spread"] = spread_summary(summaries, [o.pass_time_scale for o in spread_options])
    classes = by_generation_length(stream.gen_tokens, served)
    if classes is not None:
        out["classes"] = classes
    if keep_requests:
        out["per_request"] = {name: {"ttft_s": s.ttft_s, "tpot_s": s.tpot_s, "e2e_s": s.e2e_s}
                              for name, s in served.items()}
    return out


#: What simulate's ``pass_time_spread`` ranges over (the continuous server's summaries).
SPREAD_KEYS = ("throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
               "e2e_p50_s", "e2e_p99_s", "preemptions", "max_running")


def spread_summary(summaries: list, scales: list) -> dict:
    """[least, most] of each SPREAD_KEYS value over ``summaries`` (the nominal first: near saturation
    a tail need not move monotonically with the pass time), with the ``pass_time_scales`` tried."""
    out = {"pass_time_scales": scales}
    for key in SPREAD_KEYS:
        values = [d.get(key) for d in summaries if d.get(key) is not None]
        if values:
            out[key] = [min(values), max(values)]
    return out


def request_stream(requests=None, mix: str | None = None, count: int | None = None, prompt_tokens: int = 128,
                   arrival_rate: float | None = None, seed: int = 0):
    """A roofline.batching.Requests from a request file / Requests, or a mix (+ count), with
    seeded Poisson arrivals at ``arrival_rate`` when given. At most
    roofline.scheduler.MAX_REQUESTS requests."""
    from roofline import batching
    from roofline.scheduler import MAX_REQUESTS

    if (requests is None) == (mix is None):
        raise RooflineError("give either a request file or a mix (with a count), not both or neither", "requests")
    if count is not None and mix is None:
        raise RooflineError("goes with a mix (a request file has its own count)", "count")
    if mix is not None:
        if count is not None:
            count = validate.whole(count, "count", maximum=MAX_REQUESTS)
        once = sum(c for c, _ in batching.parse_mix(mix))
        if once > MAX_REQUESTS:  # refused before the requests are made
            raise RooflineError(f"{once:,} requests: at most {MAX_REQUESTS:,} in one simulation", "mix")
        stream = batching.requests_from_mix(mix, prompt_tokens, count)
    elif isinstance(requests, batching.Requests):
        stream = requests
    else:
        stream = batching.read_requests(requests)
    if len(stream) > MAX_REQUESTS:
        raise RooflineError(f"at most {MAX_REQUESTS:,} requests in one simulation, not {len(stream):,}", "requests")
    if arrival_rate is not None:
        stream = stream.with_poisson_arrivals(arrival_rate, seed)
    return stream


def _spread_options(server_options, pass_time_spread) -> list:
    """``server_options`` with every pass's GPU time (1 - x) and (1 + x) times theirs, x =
    ``pass_time_spread``; an error names the spread when the scale it makes is out of bounds."""
    x = validate.positive(pass_time_spread, "pass_time_spread", "a fraction of the GPU time, e.g. 0.03", maximum=0.5)
    scale = server_options.pass_time_scale
    try:
        return [replace(server_options, pass_time_scale=scale * f) for f in (1.0 - x, 1.0 + x)]
    except RooflineError as e:
        if e.field != "pass_time_scale":
            raise
        raise RooflineError(f"with a pass time scale of {scale:g} it makes {scale * (1 - x):g} .. {scale * (1 + x):g}: "
                            "the scale must stay within 0.1 .. 10", "pass_time_spread") from None


def choose_server(
    cards="rtx3060",
    model=None,
    *,
    batch=64,
    tp=1,
    requests=None,
    mix: str | None = None,
    count: int | None = None,
    prompt_tokens: int = 128,
    seed: int = 0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    slo_percentile: int = 99,
    rates=None,
    chart=None,
    schedule: str = "decode-first",
    max_num_batched_tokens: int | None = None,
    max_model_len: int | None = None,
    kv_capacity_tokens: int | None = None,
    gpu_memory_utilization: float | None = 0.9,
    block_size: int = 16,
    engine_reserve_bytes: float | None = None,
    pass_cost: str = "fused",
    loop_terms=None,
    pass_time_scale: float = 1.0,
    pass_time_spread: float | None = None,
    **options,
):
    """The highest Poisson arrival rate a continuous server sustains with the ``slo_percentile``
    of TTFT <= ``slo_ttft_s`` and of TPOT <= ``slo_tpot_s`` (roofline.server_choice), for a stream
    shape (``requests`` -- its arrivals are replaced -- or ``mix`` + ``count``, 1,000 by
    default). ``cards``, ``batch`` (the running-sequence limit) and ``tp`` may each be a list:
    every combination is swept and the best is the highest rate per GPU. ``rates``: sweep these
    instead of the automatic grid. The server options are simulate's. ``pass_time_spread`` x (e.g.
    0.03; not with ``rates``): also sweep the best candidate with every pass's GPU time (1 + x) and
    (1 - x) times what ``pass_time_scale`` makes it, and put its answer there in
    ``meta["pass_time_spread"]`` (how far a GPU a few percent off its price moves the answer; the
    sweep bisects to 1%, so a spread under ~2% reads mostly that step). ``chart``: also write the
    latency-vs-rate figure (self-contained HTML) there. Returns a
    roofline.server_choice.ServerChoice (``.as_dict()`` for plain data)."""
    from roofline.server_choice import Candidate, choose_server as _choose
    from roofline.servers import ServerOptions

    if mix is not None and count is None:
        count = 1000
    stream = request_stream(requests, mix, count, prompt_tokens, None, seed)
    seed = validate.whole(seed, "seed", minimum=0)
    slo_ttft_s = validate.optional_positive(slo_ttft_s, "slo_ttft_s", "a positive number of seconds")
    slo_tpot_s = validate.optional_positive(slo_tpot_s, "slo_tpot_s", "a positive number of seconds")
    server_options = ServerOptions(schedule, max_num_batched_tokens, max_model_len, kv_capacity_tokens,
                                   gpu_memory_utilization, block_size, engine_reserve_bytes, pass_cost, loop_terms,
                                   pass_time_scale)
    as_list = lambda v: list(v) if isinstance(v, (list, tuple)) else [v]  # noqa: E731
    card_list, batch_list, tp_list = as_list(cards), as_list(batch), as_list(tp)
    for name, values in (("cards", card_list), ("batch", batch_list), ("tp", tp_list)):
        if not values or len(set(map(str, values))) != len(values):
            raise RooflineError("give one or more distinct values", name)
    batch_list = [validate.whole(b, "batch") for b in batch_list]
    from roofline.scheduler import check_work

    check_work(stream.gen_tokens, min(batch_list), *(("count", "mix") if mix is not None else ("requests",)))
    tp_list = [validate.whole(t, "tp", maximum=MAX_TP) for t in tp_list]
    candidates = [Candidate(_scenario(c, model, None, {**options, "tp": t}), b)
                  for c in card_list for t in tp_list for b in batch_list]
    spread_options = None
    if pass_time_spread is not None:
        faster, slower = _spread_options(server_options, pass_time_spread)
        spread_options = [slower, faster]
    result = _choose(candidates, stream, server_options, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
                     slo_percentile=slo_percentile, seed=seed, rates=rates, spread_options=spread_options,
                     spread=None if pass_time_spread is None else float(pass_time_spread))
    if chart is not None:
        from roofline.serving_figures import write_server_chart

        result.meta["chart"] = write_server_chart(result, chart)
    return result


def chart(
    output,
    cards=("rtx3060",),
    models=("qwen2.5-1.5b",),
    *,
    measurements=(),
    mix: str = "8x32,8x256",
    batch: int = 16,
    count: int | None = None,
    ttft_max_s: float = 0.5,
    return_policy: str = "whole-batch",
    png_dir=None,
    **options,
) -> dict:
    """Write ``roofline chart``'s self-contained HTML page to ``output`` (what-if controls for every
    card and catalog model; the first of ``cards`` / ``models`` selected, the rest drawn for
    comparison). ``options``: the scenario options (``calibration`` applies to ``cards``). With
    ``png_dir``, also a PNG of each chart (needs a headless chromium). Returns {path, bytes,
    cards, models, selected, measured_points, pngs}. The page's data and formulas:
    roofline.chart_data."""
    from roofline.chart_page import export_pngs, write_chart

    written = write_chart(
        output, cards=cards, models=models, measurements=measurements, mix=mix, batch=batch, stream_count=count,
        ttft_max_s=ttft_max_s, return_policy=return_policy, **options,
    )
    data = written["data"]
    pngs = [str(p) for p in export_pngs(written["path"], png_dir)] if png_dir else []
    return {
        "path": written["path"],
        "bytes": written["bytes"],
        "cards": len(data["cards"]),
        "models": len(data["models"]),
        "selected": [data["initial"]["card"], data["initial"]["model"]],
        "measured_points": len(data["measurements"]),
        "pngs": pngs,
    }


# ---- measurements: fit, compare, calibrate ----------------------------------------------------
def read_measurement_files(paths, models=()) -> list:
    """Every row of the measurement CSVs, only the given models' if any are named."""
    from roofline.measurements import read_measurements

    if isinstance(paths, (str, Path)):
        paths = [paths]
    seen = {}
    for p in paths:  # the same file twice would count its rows twice
        key = Path(p).resolve()
        if key in seen:
            raise RooflineError(f"{p} is given twice (as {seen[key]})", "measurements")
        seen[key] = p
    rows = []
    for p in paths:
        rows.extend(read_measurements(p))
    if models:
        missing = sorted(set(models) - {r.model for r in rows})
        if missing:
            raise RooflineError(f"no measurements of {', '.join(missing)} in {', '.join(map(str, paths))}", "models")
        rows = [r for r in rows if r.model in models]
    return rows


def read_ceilings(path) -> tuple[float, float]:
    """(bandwidth bytes/s, peak FLOP/s) from a ceilings JSON written by `roofline calibrate`."""
    from roofline.atomic import read_json

    data = read_json(path, "ceilings")
    if not isinstance(data, dict):
        raise RooflineError(f"{path}: a ceilings file must hold a JSON object")
    bw = data.get("read_bandwidth_bytes_per_s") or data.get("bandwidth_bytes_per_s")
    fl = data.get("gemm_bf16_flop_per_s") or data.get("bf16_matmul_flop_per_s") or data.get("peak_flop_per_s")
    if not bw or not fl:
        raise RooflineError(f"{path}: needs read_bandwidth_bytes_per_s and gemm_bf16_flop_per_s")
    return float(bw), float(fl)


#: the most rounds of fitting the decode attention's stream terms on the probes against the other
#: terms, fitted on the steps (fit's ``attention_stream_probe``); the H200's settle in three or four
STREAM_TERM_ROUNDS = 6
#: the most rounds of reading the attention-table probe against the refitted terms (fit's
#: ``attention_table_probe``): the H200's settle within 0.5% in two with factors read from 30 us, in
#: five to seven from 10 us (the few matrices' points, priced 5-30 us, move the most with the terms)
KERNEL_TABLE_ROUNDS = 8


def fit(
    measurements,
    *,
    card,
    output=None,
    ceilings=None,
    label: str | None = None,
    models=(),
    tpot_statistic: str = "mean",
    attention_probe=None,
    collectives=None,
    base=None,
    layers_probe=None,
    prefill_attention_probe=None,
    moe_probe=None,
    masked_attention_probe=None,
    prefill_kernels_probe=None,
    layer_features_probe=None,
    attention_contexts_probe=None,
    sustained_matmul_probe=None,
    attention_stream_probe=None,
    softmax_probe=None,
    attention_table_probe=None,
    grouped_mm_probe=None,
    index_probe=None,
):
    """Fit a Calibration (overheads, efficiencies) to measurement CSVs (paths) taken on ``card``;
    write it to ``output`` when given. Returns the Calibration (its ``fit_report`` holds the
    in-sample, leave-one-model-out and leave-one-context-out errors).

    ``attention_probe``: a calibrate.probes attention file, fitted with the decode terms (it pins
    the attention kernel's costs across head shapes). ``layers_probe``: a calibrate.probes layers
    file (the engine's decode step of the fitted models cut to a few layer counts), fitted with
    the decode terms (it splits the fixed time into the step's own and each layer's).
    ``prefill_attention_probe``: a calibrate.probes prefill-attention file: the engine's prefill
    attention FLOP rate by head width, stored as measured (``prefill_attention_flop_per_s``). ``collectives``: a TP harness collectives
    file (the all-reduce's latency and bandwidth, stored as measured). ``base``: a calibration
    whose terms are kept and only the terms these measurements newly identify are fitted (the
    MoE terms on MoE runs, say); its ``fitted_on`` is carried over. ``moe_probe``: a calibrate.probes
    MoE file, with ``base`` and MoE runs: the routed rows' gather and combine cost
    (``expert_row_traffic_coeff``) measured on the fitted MoE models' own shapes, held while the
    other MoE terms are fitted, and the rate a prefill's grouped expert matmuls run at
    (``expert_prefill_flop_per_s``, the same shapes, 16,384 tokens and more), and the grouped
    matmuls' rates per FLOP of the tiles they compute on the small- and large-tile paths
    (``expert_small_tile_efficiency``, ``expert_large_tile_efficiency``: roofline.probes.moe_tile_efficiencies,
    the same shapes, every token count); and, where the base prices the prefill's elementwise kernels by
    kind, gpt-oss's clamped activation (its act stage's extra cost per element over silu's).
    ``grouped_mm_probe``: calibrate.probes grouped-mm files (pooled), with ``base`` and MoE runs: the
    experts' grouped matmul alone at generic shapes (``expert_gemm_table``, roofline.grouped_mm), held;
    the routed experts are priced from it, so ``expert_traffic_factor`` is not fitted. ``index_probe``:
    calibrate.probes index files (pooled), with ``base`` and MoE runs: PyTorch's index_select and index_add_
    alone (``index_kernel_table``, roofline.index_kernels), held; a pass of at most 16 routed rows pays its
    small-index kernels' time over the large-index ones'. ``masked_attention_probe``: a calibrate.probes masked-attention file:
    the engine's masked prefill path's FLOP rate by head width, stored as measured
    (``masked_prefill_attention_flop_per_s``): windowed layers past their window, and sinks layers,
    are priced as the square it computes. ``prefill_kernels_probe``: a calibrate.probes prefill-kernels
    file: what each kind of element a prefill layer's non-matmul kernels touch costs, stored as
    measured, as bytes at the bandwidth ceiling (``prefill_elementwise_bytes_per_element``: the
    probe's seconds x ``ceilings``' bandwidth, else the card's); the fitted elementwise coefficient on hidden +
    intermediate (``prefill_activation_traffic_coeff``) is then held at 0. ``layer_features_probe``:
    calibrate.probes layer-features files (one or several, pooled): the fixed time a decode step
    spends per layer on a feature's own kernels (q/k norms, MLA's decode, shared experts, gpt-oss's
    MoE layer), net of what the fitted terms (or the base's) price the variants' shapes at
    (``layer_feature_overhead_s``, roofline.probes.layer_feature_seconds). ``attention_contexts_probe``:
    calibrate.probes attention-contexts files: the windows of cache lengths where the engine's decode
    attention runs a slower kernel, against the fitted terms' (or the base's) price
    (``attention_context_factors``, roofline.probes.attention_context_factors). ``sustained_matmul_probe``:
    calibrate.probes sustained-matmul files: the card's matmul rate against time under load, stored as
    measured (``matmul_load_curve``, roofline.probes.sustained_matmul_curve) before the prefill terms are
    fitted; a prefill's matmuls at the fitted efficiency then run at its average over the pass.
    ``attention_stream_probe``: calibrate.probes attention files (any of the five attention probes,
    pooled): the decode attention's cost per KV byte and per score element (``kv_traffic_factor``,
    ``attention_score_bytes``) and the score's factors by the softmax kernel a row's length runs
    (``attention_score_row_factors``) fitted on their large shapes (roofline.probes.attention_stream_terms)
    and held, as costs per byte, while the other terms are fitted (``fixed_per_bandwidth`` of
    roofline.fitting.fit_calibration), and the attention's fill-and-drain time beyond that price
    (``attention_ramp_s``, ``attention_ramp_knee_s``) fitted on all their points
    (roofline.probes.attention_ramp_terms) and held in seconds; they are read against the fitted terms, so the fit runs until
    they settle (within 0.2%, at most STREAM_TERM_ROUNDS rounds) and cross-validates once, at the end.
    ``softmax_probe``: calibrate.probes attention files that time the softmax alone (the attention and
    attention-widths probes): the softmax's warp kernel's time per position of a row at few rows
    (``attention_softmax_warp_s_per_token``, from ``attention_softmax_warp_after_tokens`` positions on:
    roofline.probes.softmax_warp_floor), stored as measured
    before the decode terms are fitted. ``attention_table_probe``: calibrate.probes attention-table files:
    the decode attention's measured time over its price by head shape, batched matrices and cache length
    (``attention_kernel_table``, roofline.probes.attention_kernel_table), read against the fitted terms
    (the windows included), held while the decode terms are fitted again, read again until its factors
    settle (within 0.5%, at most KERNEL_TABLE_ROUNDS rounds)."""
    from roofline.calibration import save_calibration
    from roofline.fitting import fit_calibration
    from roofline.hardware import CardProfile, load_card

    card_p = card if isinstance(card, CardProfile) else load_card(card)
    paths = [measurements] if isinstance(measurements, (str, Path)) else list(measurements)
    rows = read_measurement_files(paths, models)
    bw, fl = read_ceilings(ceilings) if ceilings else (None, None)
    source = "fitted by `roofline fit` to " + ", ".join(Path(p).name for p in paths)
    if label:
        source = f"{label} ({source})"
    probe = ()
    if attention_probe is not None:
        from roofline.probes import attention_points

        # one file, or several (the attention probe's and the attention-groups probe's)
        probe = [p for f in _paths(attention_probe) for p in attention_points(f)]
    cuts = ()
    if layers_probe is not None:
        from roofline.probes import layers_points

        cuts = layers_points(layers_probe)
    fixed = {}
    if prefill_attention_probe is not None:
        from roofline.probes import prefill_attention_rates

        fixed["prefill_attention_flop_per_s"] = prefill_attention_rates(prefill_attention_probe)
    if masked_attention_probe is not None:
        from roofline.probes import masked_attention_rates

        fixed["masked_prefill_attention_flop_per_s"] = masked_attention_rates(masked_attention_probe)
    if _paths(prefill_kernels_probe):  # one file or several (the CLI's repeated option; empty: none)
        from roofline.probes import prefill_elementwise_costs

        ceiling = bw or card_p.bandwidth_bytes_per_s  # the probe's seconds, as bytes at the ceiling
        fixed["prefill_elementwise_bytes_per_element"] = {
            k: v * ceiling for k, v in prefill_elementwise_costs(_paths(prefill_kernels_probe)).items()}
        fixed["prefill_activation_traffic_coeff"] = 0.0
    if _paths(softmax_probe):
        from roofline.probes import softmax_warp_floor

        slope, after = softmax_warp_floor(_paths(softmax_probe))
        fixed["attention_softmax_warp_s_per_token"] = slope
        fixed["attention_softmax_warp_after_tokens"] = after
    if _paths(sustained_matmul_probe):
        from roofline.probes import sustained_matmul_curve

        fixed["matmul_load_curve"] = sustained_matmul_curve(_paths(sustained_matmul_probe))
    link = None
    if collectives is not None:
        from roofline.atomic import read_json
        from roofline.collectives import link_terms

        link = {**link_terms(collectives), "world": read_json(Path(collectives), "collectives")["world"]}
    if _paths(grouped_mm_probe) and base is None:
        raise RooflineError("a grouped-mm probe is read with a base calibration (--base) and MoE runs",
                            "grouped_mm_probe")
    if _paths(index_probe) and base is None:
        raise RooflineError("an index probe is read with a base calibration (--base) and MoE runs", "index_probe")
    if moe_probe is not None and base is None:
        raise RooflineError("a MoE probe is read with a base calibration (--base): it sets a term of the MoE fit",
                            "moe_probe")
    if base is not None:
        from roofline.calibration import Calibration, load_calibration
        from roofline.fitting import fit_extra_terms

        base_cal = base if isinstance(base, Calibration) else load_calibration(base)
        held = None
        if moe_probe is not None:
            from roofline.probes import moe_grouped_flop_per_s, moe_tile_efficiencies

            fitted = sorted({r.model for r in rows})
            small, large, _ = moe_tile_efficiencies(
                moe_probe, fitted, float(base_cal.measured_peak_flop_per_s or card_p.peak_flop_per_s))
            held = {"expert_row_traffic_coeff": moe_row_traffic_coeff(base_cal, card_p, moe_probe, fitted),
                    "expert_prefill_flop_per_s": moe_grouped_flop_per_s(moe_probe, fitted),
                    "expert_small_tile_efficiency": small, "expert_large_tile_efficiency": large}
            if base_cal.prefill_elementwise_bytes_per_element:
                # the prefill's elementwise costs gain gpt-oss's clamped activation: silu's (the
                # prefill-kernels probe's gated intermediate) plus what the MoE probe's act stage adds
                from roofline.probes import clamped_activation_extra_s_per_element

                per = dict(base_cal.prefill_elementwise_bytes_per_element)
                ceiling = base_cal.measured_bandwidth_bytes_per_s or card_p.bandwidth_bytes_per_s
                per["clamped_intermediate"] = per.get("gated_intermediate", 0.0) + \
                    clamped_activation_extra_s_per_element(moe_probe) * ceiling
                held["prefill_elementwise_bytes_per_element"] = per
        if _paths(grouped_mm_probe):
            from roofline.grouped_mm import read_grouped_mm

            held = {**(held or {}), "expert_gemm_table": read_grouped_mm(_paths(grouped_mm_probe))}
        if _paths(index_probe):
            from roofline.index_kernels import read_index_probe

            held = {**(held or {}), "index_kernel_table": read_index_probe(_paths(index_probe))}
        # with a base: priced by it, set before the MoE fit
        priced = _priced_probe_tables(layer_features_probe, attention_contexts_probe, base_cal, card_p)
        if priced:
            held = {**(held or {}), **priced}
        cal = fit_extra_terms(base_cal, rows, card_p, source=source, fixed=held)
    else:
        def dense_fit(held: dict, per_bandwidth: dict | None = None, cross_validate: bool = True):
            return fit_calibration(
                rows, card_p, source=source, measured_bandwidth_bytes_per_s=bw, measured_peak_flop_per_s=fl,
                tpot_statistic=tpot_statistic, attention_probe=probe, collectives=link, layers_probe=cuts,
                fixed=held or None, cross_validate=cross_validate, fixed_per_bandwidth=per_bandwidth,
            )

        stream_paths = _paths(attention_stream_probe)
        if stream_paths:
            from roofline.probes import attention_ramp_terms, attention_stream_terms

            # the probes measure a cost in seconds per byte (per unit of bandwidth efficiency, held so
            # whatever efficiency the steps fit), read against the other terms (the lane costs), which
            # move a little when it is held: the rounds run until the probes, read against the fitted
            # terms, give back what is held (within 0.2%)
            cal, tied = dense_fit(fixed, cross_validate=False), {}
            for _ in range(STREAM_TERM_ROUNDS):
                terms = attention_stream_terms(stream_paths, cal, card_p)
                # the attention's fill and drain beyond its price, read with those costs (seconds: held as
                # measured); the probes' largest points, where it has saturated, fix the costs above
                ramp = attention_ramp_terms(stream_paths, cal.model_copy(update=terms), card_p)
                settled_ramp = all(abs(getattr(cal, k) / v - 1.0) < 0.002 if v else getattr(cal, k) == v
                                   for k, v in ramp.items())
                per_bw = {k: terms.pop(k) / cal.bandwidth_efficiency
                          for k in ("kv_traffic_factor", "attention_score_bytes")}
                # the rows' score factors (ratios of the score's costs by kernel): held as measured
                steps = terms.get("attention_score_row_factors") or []
                held_steps = fixed.get("attention_score_row_factors") or []
                settled = (bool(tied) and settled_ramp and all(abs(v / tied[k] - 1.0) < 0.002 for k, v in per_bw.items())
                           and [a for a, _ in steps] == [a for a, _ in held_steps]
                           and all(abs(f / g - 1.0) < 0.002 for (_, f), (_, g) in zip(steps, held_steps)))
                fixed, tied = {**fixed, **terms, **ramp}, per_bw
                if settled:
                    break
                cal = dense_fit(fixed, tied, cross_validate=False)
            cal = dense_fit(fixed, tied)
        else:
            cal = dense_fit(fixed)
        # against the fitted terms' price; the models fitted on have none of the features and no
        # fitted context falls in a window, so the fit does not depend on them
        priced = _priced_probe_tables(layer_features_probe, attention_contexts_probe, cal, card_p)
        if priced:
            report = {**cal.fit_report, "fixed": {**cal.fit_report.get("fixed", {}), **priced}}
            cal = cal.model_copy(update={**priced, "fit_report": report})
        table_paths = _paths(attention_table_probe)
        if table_paths:
            from roofline.probes import attention_kernel_table

            # read against the fitted terms and windows, then held while the steps are fitted again (the
            # fitted models' own shapes are in it); read again until it gives back what is held
            held_table, change = None, None
            for _ in range(KERNEL_TABLE_ROUNDS):
                table = attention_kernel_table(table_paths, cal, card_p)
                if held_table is not None:
                    change = max(abs(x / y - 1.0) for a, b in zip(table, held_table)
                                 for ra, rb in zip(a["factors"], b["factors"]) for x, y in zip(ra, rb))
                    if change < 0.005:
                        break
                held_table = table
                held = {**fixed, **priced, "attention_kernel_table": table}
                cal = dense_fit(held, tied) if stream_paths else dense_fit(held)
                priced = _priced_probe_tables(layer_features_probe, attention_contexts_probe, cal, card_p)
                cal = cal.model_copy(update=priced)
            report = {**cal.fit_report, "attention_kernel_table": {
                "files": [Path(f).name for f in table_paths], "entries": len(held_table),
                "largest_change_last_round": change}}
            cal = cal.model_copy(update={"attention_kernel_table": held_table, "fit_report": report})
    if output is not None:
        save_calibration(cal, output)
    return cal


def _priced_probe_tables(layer_features_probe, attention_contexts_probe, cal, card) -> dict:
    """The calibration fields of the probes read against ``cal``'s price: the layer features' own
    time (``layer_feature_overhead_s``) and the slower-kernel windows (``attention_context_factors``)."""
    from roofline.probes import attention_context_factors, layer_feature_seconds

    out = {}
    if _paths(layer_features_probe):
        out["layer_feature_overhead_s"] = layer_feature_seconds(_paths(layer_features_probe), cal, card)
    if _paths(attention_contexts_probe):
        out["attention_context_factors"] = attention_context_factors(_paths(attention_contexts_probe), cal, card)
    return out


def _paths(files) -> list:
    """A probe option's files: None -> [], one path -> [it], several -> them (the CLI's repeated option)."""
    if files is None:
        return []
    return [files] if isinstance(files, (str, Path)) else list(files)


def moe_row_traffic_coeff(cal, card, moe_probe, models) -> float:
    """``expert_row_traffic_coeff`` from a MoE probe's gather and combine timings of ``models``:
    seconds per element x the calibration's bandwidth (efficiency x ceiling) / act bytes."""
    from roofline.probes import moe_row_seconds_per_element
    from roofline.units import dtype_bytes

    bandwidth = cal.bandwidth_efficiency * float(cal.measured_bandwidth_bytes_per_s or card.bandwidth_bytes_per_s)
    return moe_row_seconds_per_element(moe_probe, models) * bandwidth / dtype_bytes("bf16")


def compare(
    measurements,
    *,
    calibration=None,
    card=None,
    engine: str | None = None,
    tpot_statistic: str | None = None,
    min_batch: int = 1,
    models=(),
) -> dict:
    """Predicted vs measured, row by row, with the MAPE (as fractions) of TPOT, TTFT and peak
    memory, per model and overall. ``calibration``: a path or a Calibration, or None: what
    ``predict`` uses for the card and engine (the calibration shipped for them, else the engine
    profile's terms transferred to the card: the held-out check of a card nothing was fitted on);
    ``card`` and ``engine``: default the calibration's, else the measurements' own. A calibration
    measured on another card than ``card`` is refused: its ceilings are that card's."""
    from roofline.calibration import Calibration, load_calibration
    from roofline.fitting import compare as _compare
    from roofline.hardware import CardProfile, load_card
    from roofline.scenario import resolve_calibration, resolve_engine

    rows = read_measurement_files(measurements, models)
    min_batch = validate.whole(min_batch, "min_batch")
    if calibration is None:
        card_p = card if isinstance(card, CardProfile) else load_card(card or _only(rows, "card", "--card"))
        engine = resolve_engine(card_p, engine or _only(rows, "engine", "--engine"))
        cal = resolve_calibration(card_p, "auto", engine)
        return _compare(cal, rows, card_p, tpot_statistic, min_batch)
    cal = calibration if isinstance(calibration, Calibration) else load_calibration(calibration)
    card_p = card if isinstance(card, CardProfile) else load_card(card or cal.card)
    if card_p.id != cal.card:
        raise RooflineError(f"the calibration was measured on {cal.card}, not {card_p.id}: its ceilings are that "
                            f"card's; leave out --calibration to compare with what `roofline predict --card "
                            f"{card_p.id}` uses", "calibration")
    return _compare(cal, rows, card_p, tpot_statistic, min_batch)


def _only(rows, field: str, option: str) -> str:
    """The one value of ``field`` the measured rows share (which card, which engine), else an
    error asking for ``option``."""
    values = sorted({getattr(r, field) for r in rows if r.ok})
    if len(values) != 1:
        raise RooflineError(f"the measurements are of {len(values)} {field}s ({', '.join(values) or 'none'}): "
                            f"give {option}", field)
    return values[0]


def calibrate(
    *,
    card: str,
    models,
    out_dir,
    engine: str = "hf-eager",
    batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    prompt_tokens=128,
    gen_tokens=128,
    device: str = "cuda",
    resume: bool = False,
    fit: bool = True,
    cudnn_attention: bool = True,
    budget_s: float | None = None,
    ttft_max_tokens: int | None = None,
    warmup_prefill_max_tokens: int | None = None,
    max_seconds_per_point: float | None = None,
    tp: int = 1,
) -> dict:
    """Measure real decode on this machine (needs torch; a CUDA GPU, or ``device="cpu"``) over
    ``models`` x prompts x ``batches`` (each prompt climbing in batch until memory runs out) and,
    unless ``fit=False``, fit a calibration to it. ``prompt_tokens``: one length or several;
    ``gen_tokens``: one, or one per prompt. ``budget_s`` stops cleanly before a point that would
    start later (``resume`` continues). ``tp`` > 1 splits the model over that many GPUs (graph
    engine, one process per GPU). Returns {measurements_path, calibration_path, calibration}: the
    latter two None without a fit."""
    try:
        from calibrate.runner import disable_cudnn_attention, run_calibration
    except ImportError as exc:
        raise RooflineError(
            f"calibration needs torch and transformers ({exc.name} is missing): pip install 'roofline[calibrate]'"
        ) from None
    tp = validate.whole(tp, "tp", maximum=64)
    # everything a sweep needs is checked before the first measurement, not after it
    from roofline.hardware import load_card
    from roofline.model_spec import load_model

    for m in models:
        load_model(m)
    card_arg = card
    try:  # a card profile given as a file (this CPU's, written by an earlier run): its id names rows and files
        card = load_card(card_arg).id
    except RooflineError:
        if fit and not str(device).startswith("cpu"):
            raise  # the fit prices the runs with the card's profile
    if not cudnn_attention:
        disable_cudnn_attention()
    out_dir = Path(out_dir)
    prompts = [prompt_tokens] if isinstance(prompt_tokens, int) else list(prompt_tokens)
    if tp > 1:
        if engine != "graph":
            raise RooflineError("tensor parallelism is measured with the graph engine", "engine")
        from calibrate.tp_job import run_tp_calibration

        gens = {gen_tokens} if isinstance(gen_tokens, int) else set(gen_tokens)
        if len(gens) != 1:
            raise RooflineError("one generation length for every prompt with tp > 1", "gen_tokens")
        csv_path = run_tp_calibration(card, list(models), prompts, gens.pop(), list(batches), tp, out_dir,
                                      device=device, budget_s=budget_s, resume=resume)
    else:
        limits = {k: v for k, v in (("ttft_max_tokens", ttft_max_tokens),
                                    ("warmup_prefill_max_tokens", warmup_prefill_max_tokens),
                                    ("max_seconds_per_point", max_seconds_per_point)) if v is not None}
        csv_path = run_calibration(card, list(models), engine, list(batches), prompts if len(prompts) > 1 else prompts[0],
                                   gen_tokens, out_dir, device=device, resume=resume, budget_s=budget_s, **limits)
    out = {"measurements_path": csv_path, "calibration_path": None, "calibration": None, "card_path": None}
    if not fit:
        return out
    from roofline.calibration import save_calibration
    from roofline.fitting import fit_calibration
    from roofline.hardware import load_card

    ceilings = out_dir / f"ceilings-{card}.json"
    bw, fl = read_ceilings(ceilings) if ceilings.is_file() else (None, None)
    card_p, out["card_path"] = None, None
    if str(device).startswith("cpu"):
        try:
            card_p = load_card(card_arg)
        except RooflineError:  # this machine's CPU, not a catalog card: its profile from its ceilings
            from roofline.local_card import write_cpu_card

            if not ceilings.is_file():
                raise RooflineError(f"{card} is not a known card and {ceilings} is missing: run without --resume "
                                    "so the ceilings are measured, or give a card profile", "card") from None
            out["card_path"] = write_cpu_card(card, ceilings, out_dir / f"card-{card}.json")
            card_p = load_card(str(out["card_path"]))
    fixed = None
    if str(device).startswith("cpu") and ceilings.is_file():
        from roofline.local_card import linear_probe_terms

        # the decode matmuls measured at the models' shapes (the ceilings' probe) are held, and the KV
        # read once a step: what grows with the batch beyond them is fitted as attention (docs/cpu.md)
        fixed = linear_probe_terms(ceilings) or None
        if fixed:
            fixed["kv_traffic_factor"] = 1.0
    cal = fit_calibration(read_measurement_files([csv_path]), card_p or load_card(card_arg),
                          source=f"`roofline calibrate` run in {out_dir}",
                          measured_bandwidth_bytes_per_s=bw, measured_peak_flop_per_s=fl, fixed=fixed)
    out["calibration_path"] = save_calibration(cal, out_dir / f"{card}-{engine}.json")
    out["calibration"] = cal
    return out


def serve(
    *,
    card: str,
    model: str,
    requests,
    out_dir,
    device: str = "cuda",
    arrival_rate: float | None = None,
    seed: int = 0,
    budget_s: float | None = None,
    **engine_options,
) -> dict:
    """Replay a request file through the graph engine's continuous-batching server loop on this
    machine's GPU (calibrate.serving_loop) and record every request's TTFT, TPOT and E2E.
    ``engine_options``: max_num_seqs, max_model_len, block_size, kv_capacity_tokens,
    gpu_memory_utilization, max_num_batched_tokens, policy, prefill_graphs (None: CUDA graphs
    for whole-prompt prefills where the GPU and torch's varlen attention allow; False: eager).
    Returns {run_path, summary (the run's measured summary), device_probe (its decode steps'
    median device time per bucket before and after its clock: {"before": {...}, "after": {...}})}."""
    try:
        from calibrate.serving_job import run_serving
    except ImportError as exc:
        raise RooflineError(f"serving runs need torch ({exc.name} is missing): pip install 'roofline[calibrate]'") from None
    from roofline.atomic import read_json

    path = run_serving(card, model, requests, Path(out_dir), device=device, arrival_rate=arrival_rate, seed=seed,
                       deadline_s=budget_s, **{k: v for k, v in engine_options.items() if v is not None})
    run = read_json(Path(path), "serving run")
    config = run.get("config", {})
    return {"run_path": path, "summary": run.get("summary", {}),
            "device_probe": {"before": (config.get("device_probe") or {}).get("decode_device_s", {}),
                             "after": (config.get("device_probe_after") or {}).get("decode_device_s", {})}}
