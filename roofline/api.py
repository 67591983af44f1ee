"""The Python API: the same answers as the CLI, which calls exactly these functions."""

from __future__ import annotations

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
