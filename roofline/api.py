"""The Python API: the same answers as the CLI, which calls exactly these functions."""

from __future__ import annotations

import numpy as np

from roofline.errors import RooflineError
from roofline.predict import DEFAULT_BATCHES, Bend, Prediction, evaluate, make_scenario
from roofline.predict import bend as _bend


def predict(
    card,
    model,
    batches=DEFAULT_BATCHES,
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    calibration="auto",
    engine: str = "hf-eager",
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    logits: str = "last",
) -> Prediction:
    """Per-batch TTFT, TPOT, throughput, peak memory and the lesson's ceiling columns.

    ``card`` and ``model`` are names (``"rtx3060"``, ``"qwen2.5-1.5b"``, an HF repo id of a
    catalog model, a config.json path) or loaded objects. ``calibration="auto"`` uses the one
    shipped for card + engine, ``None`` the pure roofline, or a path to a fitted calibration.
    """
    scenario = make_scenario(
        card, model, prompt_tokens, gen_tokens, calibration, engine, kv_cache, weight_dtype, kv_dtype, logits
    )
    return evaluate(scenario, batches)


def bend(
    card,
    model,
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    calibration="auto",
    engine: str = "hf-eager",
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> Bend:
    """Where decode stops being memory-bound: the analytic crossing and the TPOT knee."""
    scenario = make_scenario(
        card, model, prompt_tokens, gen_tokens, calibration, engine, kv_cache, weight_dtype, kv_dtype
    )
    return _bend(scenario)


def waste(
    mix: str | None = None,
    lengths=None,
    batch: int | None = None,
    prompt_tokens: int = 128,
    card=None,
    model=None,
    policy: str = "whole-batch",
    calibration="auto",
    engine: str = "hf-eager",
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> dict:
    """Static batching's waste for a length mix (``"8x32,8x256"``) or a request file (``lengths``).

    Without ``card`` and ``model``: tokens needed, slots used and ``waste_fraction``. With them:
    for a mix, each class's end-to-end time in the batch and alone, and the slowdown
    (``short_request_slowdown`` for the shortest class); for a file, E2E p50/p90/p99.
    Definitions: roofline.batching.
    """
    from roofline import batching

    if (mix is None) == (lengths is None):
        raise RooflineError("give either a mix (--mix 8x32,8x256) or a request file (--lengths FILE), not both or neither")
    if (card is None) != (model is None):
        raise RooflineError("give both --card and --model for timings, or neither for the token accounting alone")
    step = None
    if card is not None:
        step = make_scenario(card, model, prompt_tokens, 1, calibration, engine, None, weight_dtype, kv_dtype).model
    if mix is not None:
        result = batching.mix_waste(mix, batch, prompt_tokens, step, policy)
    else:
        result = batching.lengths_waste(batching.read_requests(lengths), batch, step, policy)
    if step is not None:
        result["card"], result["model"] = step.card.id, step.spec.name
    return result


def simulate(
    card,
    model,
    batch: int,
    requests=None,
    mix: str | None = None,
    count: int | None = None,
    prompt_tokens: int = 128,
    arrival_rate: float | None = None,
    seed: int = 0,
    policy: str = "early-return",
    calibration="auto",
    engine: str = "hf-eager",
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    keep_requests: bool = False,
) -> dict:
    """The same request stream served by static and by continuous batching with ``batch`` slots.

    ``requests``: a request file, or a roofline.batching.Requests; or ``mix`` (+ ``count``) with
    ``prompt_tokens``. ``arrival_rate`` (requests/s) replaces arrivals by seeded Poisson ones;
    without it and without arrival_s every request is queued at time 0. ``policy`` is the static
    server's: ``early-return`` (default) or ``whole-batch``. Returns ``static`` and ``continuous``
    summaries (throughput_tok_s, ttft/e2e p50/p90/p99, mean_occupancy, waste_fraction,
    idle_slot_steps), ``classes`` (per generation length, when there are at most 8) and ``meta``.
    ``keep_requests=True`` adds the per-request arrays under ``per_request``. Definitions:
    roofline.serving.
    """
    from roofline import batching
    from roofline.serving import POLICIES, by_generation_length, serve_continuous, serve_static

    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise RooflineError(f"--batch must be a whole number of at least 1, not {batch!r}")
    if policy not in POLICIES:
        raise RooflineError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    if (requests is None) == (mix is None):
        raise RooflineError("give either a request file (--requests FILE) or --mix (with --count), not both or neither")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise RooflineError(f"--seed must be a whole number >= 0, not {seed!r}")
    if count is not None and mix is None:
        raise RooflineError("--count goes with --mix (a request file has its own count)")
    if mix is not None:
        stream = batching.requests_from_mix(mix, prompt_tokens, count)
    elif isinstance(requests, batching.Requests):
        stream = requests
    else:
        stream = batching.read_requests(requests)
    if arrival_rate is not None:
        stream = stream.with_poisson_arrivals(arrival_rate, seed)
    step = make_scenario(card, model, 1, 1, calibration, engine, None, weight_dtype, kv_dtype).model
    args = (step, stream.prompt_tokens, stream.gen_tokens, stream.arrival_s, int(batch))
    served = {"static": serve_static(*args, policy=policy), "continuous": serve_continuous(*args)}
    out = {
        "meta": {
            "card": step.card.id,
            "model": step.spec.name,
            "source": stream.source,
            "requests": len(stream),
            "batch": int(batch),
            "static_policy": policy,
            "arrivals": "all at 0" if stream.arrival_s is None else (
                f"poisson {arrival_rate:g}/s seed {seed}" if arrival_rate is not None else "from the file"
            ),
            "calibration": None if step.calibration.is_uncalibrated else f"{step.calibration.card}/{step.calibration.engine}",
        },
        **{name: s.summary() for name, s in served.items()},
    }
    classes = by_generation_length(stream.gen_tokens, served)
    if classes is not None:
        out["classes"] = classes
    if keep_requests:
        out["per_request"] = {name: {"ttft_s": s.ttft_s, "e2e_s": s.e2e_s} for name, s in served.items()}
    return out


def choose(
    card,
    model,
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    ttft_max_s: float | None = None,
    tpot_max_s: float | None = None,
    min_user_tok_s: float | None = None,
    max_batch: int = 4096,
    calibration="auto",
    engine: str = "hf-eager",
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
):
    """The largest batch meeting every given limit and fitting in memory, and which limit binds
    (a roofline.choice.Choice; ``.as_dict()`` for plain data)."""
    from roofline.choice import choose_batch

    scenario = make_scenario(card, model, prompt_tokens, gen_tokens, calibration, engine, kv_cache, weight_dtype, kv_dtype)
    return choose_batch(scenario, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch)


def chart(
    output,
    cards=("rtx3060",),
    models=("qwen2.5-1.5b",),
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    calibration="auto",
    engine: str = "hf-eager",
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    measurements=(),
    mix: str = "8x32,8x256",
    batch: int = 16,
    count: int | None = None,
    ttft_max_s: float = 0.5,
    policy: str = "whole-batch",
    png_dir=None,
) -> dict:
    """Write ``roofline chart``'s self-contained HTML page to ``output`` (what-if controls for every
    card and catalog model; the first of ``cards`` / ``models`` selected, the rest drawn for
    comparison). With ``png_dir``, also a PNG of each chart (needs a headless chromium).
    Returns {path, bytes, cards, models, pngs}. The page's data and formulas: roofline.chart_data."""
    from roofline.chart_page import export_pngs, write_chart

    written = write_chart(
        output, cards=cards, models=models, prompt_tokens=prompt_tokens, gen_tokens=gen_tokens,
        calibration=calibration, engine=engine, kv_cache=kv_cache, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
        measurements=measurements, mix=mix, batch=batch, stream_count=count, ttft_max_s=ttft_max_s, policy=policy,
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
