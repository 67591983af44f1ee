"""predict(): every batch's TTFT, TPOT, throughput and peak memory; bend(): where decode bends.

The three "estimated" columns follow the lesson's first-order counts: FLOPs of the weight
matmuls (``2P`` per token) over bytes of weights plus the KV cache read at the mean context.
Attention FLOPs and the engine's extra KV traffic enter the step time, not those columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofline.calibration import Calibration, shipped_calibration
from roofline.decode import BOUNDS, StepModel, mean_decode
from roofline.errors import RooflineError
from roofline.hardware import CardProfile, load_card
from roofline.memory import peak_memory
from roofline.model_spec import ModelSpec, load_model
from roofline.prefill import prefill
from roofline.units import GiB

#: The lesson's sweep (section 2): powers of two from 1 to 128.
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
ROW_KEYS = (
    "batch",
    "ttft_s",
    "tpot_s",
    "per_request_tok_s",
    "throughput_tok_s",
    "peak_mem_gib",
    "intensity_flop_per_byte",
    "compute_ceiling_pct",
    "bandwidth_ceiling_pct",
    "bound",
)
#: A doubling of the batch that costs more than sqrt(2) in TPOT (log-log slope 0.5) has left
#: the flat region: throughput then grows by less than 41% per doubling.
KNEE_ELASTICITY = 0.5


@dataclass(frozen=True)
class Scenario:
    """Everything a prediction depends on besides the batch sizes."""

    model: StepModel
    prompt_tokens: int
    gen_tokens: int
    kv_cache: str = "dynamic"
    logits: str = "last"

    @property
    def spec(self) -> ModelSpec:
        return self.model.spec

    @property
    def card(self) -> CardProfile:
        return self.model.card

    @property
    def calibration(self) -> Calibration:
        return self.model.calibration


def positive_int(value, what: str) -> int:
    """``value`` as an int of at least 1 (ints, whole floats and digit strings accepted)."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise RooflineError(f"{what} must be a whole number, not {value!r}") from None
    if isinstance(value, bool) or not as_float.is_integer():
        raise RooflineError(f"{what} must be a whole number, not {value!r}")
    if as_float < 1:
        raise RooflineError(f"{what} must be at least 1, not {int(as_float)}")
    return int(as_float)


def check_batches(batches) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(batches))
    if arr.size == 0:
        raise RooflineError("give at least one batch size")
    if not np.issubdtype(arr.dtype, np.number) or np.any(arr != np.floor(arr)):
        raise RooflineError("batch sizes must be whole numbers")
    if np.any(arr <= 0):
        raise RooflineError(f"batch sizes must be at least 1, not {int(arr.min())}")
    return arr.astype(np.int64)


def make_scenario(
    card: str | CardProfile,
    model: str | ModelSpec,
    prompt_tokens: int = 128,
    gen_tokens: int = 128,
    calibration: Calibration | str | None = "auto",
    engine: str = "hf-eager",
    kv_cache: str | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    logits: str = "last",
) -> Scenario:
    """Resolve names into a Scenario. ``calibration``: a Calibration, a file path, ``"auto"``
    (the shipped one for card + engine, else the pure roofline) or None (the pure roofline)."""
    from roofline.calibration import load_calibration

    card_p = card if isinstance(card, CardProfile) else load_card(card)
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    if calibration == "auto":
        cal = shipped_calibration(card_p.id, engine) or Calibration.uncalibrated(card_p.id)
    elif calibration is None:
        cal = Calibration.uncalibrated(card_p.id)
    elif isinstance(calibration, Calibration):
        cal = calibration
    else:
        cal = load_calibration(calibration)
    policy = kv_cache or cal.kv_cache
    if policy not in ("dynamic", "static"):
        raise RooflineError(f"kv cache policy must be 'dynamic' or 'static', not {policy!r}")
    if logits not in ("last", "all"):
        raise RooflineError(f"logits must be 'last' or 'all', not {logits!r}")
    step = StepModel(spec, card_p, cal, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    return Scenario(
        model=step,
        prompt_tokens=positive_int(prompt_tokens, "prompt length"),
        gen_tokens=positive_int(gen_tokens, "generation length"),
        kv_cache=policy,
        logits=logits,
    )


@dataclass(frozen=True)
class Prediction:
    """Columns of arrays (one entry per batch) plus what they were computed for."""

    scenario: Scenario
    columns: dict = field(repr=False)

    def rows(self, keys=None) -> list[dict]:
        keys = keys or list(self.columns)
        n = len(self.columns["batch"])
        out = []
        for i in range(n):
            row = {}
            for k in keys:
                v = self.columns[k][i]
                row[k] = v.item() if hasattr(v, "item") else v
            out.append(row)
        return out

    def figure(self, show_bend: bool = True):
        """A plotly Figure of throughput and TPOT against batch (log2 axis), the bend marked (Jupyter)."""
        from roofline.figures import prediction_figure

        return prediction_figure(self, show_bend)

    def meta(self) -> dict:
        sc = self.scenario
        cal = sc.calibration
        return {
            "card": sc.card.id,
            "model": sc.spec.name,
            "prompt_tokens": sc.prompt_tokens,
            "gen_tokens": sc.gen_tokens,
            "kv_cache": sc.kv_cache,
            "logits": sc.logits,
            "weight_dtype": sc.model.weight_dtype,
            "kv_dtype": sc.model.kv_dtype,
            "calibration": None if cal.is_uncalibrated else f"{cal.card}/{cal.engine}",
            "calibration_source": cal.source,
            "bandwidth_bytes_per_s": sc.model.bandwidth_bytes_per_s,
            "peak_flop_per_s": sc.model.peak_flop_per_s,
            "balance_point_flop_per_byte": sc.model.balance_point_flop_per_byte,
            "memory_bytes": sc.card.memory_bytes,
        }


def evaluate(scenario: Scenario, batches) -> Prediction:
    """The per-batch table for a scenario (vectorised over ``batches``)."""
    b = check_batches(batches)
    bf = b.astype(float)
    m = scenario.model
    dec = mean_decode(m, bf, scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache)
    pre = prefill(m, bf, scenario.prompt_tokens, scenario.logits)
    mem = peak_memory(m, bf, scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache, scenario.logits)
    tpot = dec["step_s"]
    ttft = pre["ttft_s"]
    steps = max(scenario.gen_tokens - 1, 0)
    cols = {
        "batch": b,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "per_request_tok_s": 1.0 / tpot,
        "throughput_tok_s": bf / tpot,
        "peak_mem_gib": mem["peak_bytes"] / GiB,
        "intensity_flop_per_byte": dec["linear_flop"] / dec["bytes_counted"],
        "compute_ceiling_pct": 100.0 * dec["linear_flop"] / tpot / m.peak_flop_per_s,
        "bandwidth_ceiling_pct": 100.0 * dec["bytes_counted"] / tpot / m.bandwidth_bytes_per_s,
        "bound": BOUNDS[dec["bound_index"]],
        "e2e_s": ttft + steps * tpot,
        "ttft_bound": BOUNDS[pre["bound_index"]],
        "peak_mem_bytes": mem["peak_bytes"],
        "fits_in_memory": mem["peak_bytes"] <= scenario.card.memory_bytes,
        "weights_bytes": mem["weights_bytes"],
        "kv_cache_bytes": mem["kv_bytes"],
        "activations_bytes": mem["activations_bytes"],
        "logits_bytes": mem["logits_bytes"],
        "workspace_bytes": mem["workspace_bytes"],
        "bytes_per_step": dec["bytes_counted"],
        "flop_per_step": dec["linear_flop"] + dec["attention_flop"],
        "step_overhead_s": dec["overhead_s"],
        "step_memory_s": dec["memory_s"],
        "step_compute_s": dec["compute_s"],
    }
    return Prediction(scenario, cols)


def predict(card, model, batches=DEFAULT_BATCHES, prompt_tokens=128, gen_tokens=128, **kwargs) -> Prediction:
    """Predict every batch in ``batches`` for ``model`` on ``card`` (names or objects)."""
    return evaluate(make_scenario(card, model, prompt_tokens, gen_tokens, **kwargs), batches)


@dataclass(frozen=True)
class Bend:
    crossing_batch: int | None
    knee_batch: int | None
    balance_point_flop_per_byte: float
    intensity_limit_flop_per_byte: float
    region_low_batch: int | None
    region_high_batch: int | None

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def describe(self) -> str:
        if self.crossing_batch is None and self.knee_batch is None:
            return (
                f"decode never bends: intensity tops out at {self.intensity_limit_flop_per_byte:.1f} FLOP/byte, "
                f"under the balance point {self.balance_point_flop_per_byte:.1f}"
            )
        parts = []
        if self.crossing_batch is not None:
            parts.append(
                f"intensity reaches the balance point ({self.balance_point_flop_per_byte:.1f} FLOP/byte) "
                f"at batch {self.crossing_batch}"
            )
        if self.knee_batch is not None:
            parts.append(f"TPOT knee (a doubling costs over 41% more TPOT) at batch {self.knee_batch}")
        else:
            parts.append("no TPOT knee below batch 65536")
        region = ""
        if self.region_low_batch is not None:
            region = f"; bends between batch {self.region_low_batch} and {self.region_high_batch}"
        return "; ".join(parts) + region


def _pow2_bracket(lo_value: float, hi_value: float) -> tuple[int, int]:
    lo = 2 ** max(0, math.ceil(math.log2(lo_value)) - 1)
    hi = 2 ** math.ceil(math.log2(hi_value))
    return lo, max(hi, lo * 2)


def bend(scenario: Scenario, max_batch: int = 65536) -> Bend:
    """The analytic crossing and the predicted TPOT knee."""
    m = scenario.model
    spec = scenario.spec
    balance = m.balance_point_flop_per_byte
    dec1 = mean_decode(m, np.array([1.0]), scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache)
    kv_per_request = float(dec1["bytes_counted"][0]) - m.weight_read_bytes
    flop_per_request = spec.linear_flop_per_token
    limit = flop_per_request / kv_per_request if kv_per_request > 0 else math.inf
    crossing = None
    if flop_per_request > balance * kv_per_request:
        exact = balance * m.weight_read_bytes / (flop_per_request - balance * kv_per_request)
        crossing = max(1, math.ceil(exact - 1e-9))
    grid = np.unique(np.concatenate([np.arange(1, 4097), np.geomspace(4096, max_batch, 512).round()]))
    tpot = mean_decode(m, grid, scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache)["step_s"]
    # slope of ln TPOT against ln batch over a doubling: compare each batch with its double
    doubled = np.interp(np.log(grid * 2), np.log(grid), np.log(tpot), right=np.nan)
    slope = (doubled - np.log(tpot)) / np.log(2.0)
    hits = np.nonzero(slope >= KNEE_ELASTICITY)[0]
    knee = int(grid[hits[0]] * 2 ** 0.5) if hits.size else None
    region = (None, None)
    found = [x for x in (crossing, knee) if x is not None]
    if found:
        region = _pow2_bracket(min(found), max(found))
    return Bend(crossing, knee, balance, limit, *region)
