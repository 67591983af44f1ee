"""Every batch's TTFT, TPOT, throughput and peak memory for a scenario, and where decode bends.

The three lesson columns (intensity, compute and bandwidth ceiling fractions) follow the lesson's
first-order counts: FLOPs of the weight matmuls (``2P`` per token) over bytes of weights plus the
KV cache read at the mean context. Attention FLOPs and the engine's extra KV traffic enter the step
time, not those columns. (Not named predict.py: a submodule would shadow the function
``roofline.predict``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from roofline import validate
from roofline.decode import mean_decode, mean_tpot_s
from roofline.memory import peak_memory
from roofline.prefill import prefill
from roofline.scenario import Scenario
from roofline.step import BOUNDS
from roofline.units import GiB

#: The lesson's sweep (section 2): powers of two from 1 to 128.
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
#: The most batch sizes one prediction evaluates (a sweep 1..131072 is 1 MB of floats per column).
MAX_BATCHES = 2**17
#: The largest batch size accepted.
MAX_BATCH = 2**24
ROW_KEYS = (
    "batch",
    "ttft_s",
    "tpot_s",
    "per_user_tok_s",
    "throughput_tok_s",
    "peak_mem_gib",
    "intensity_flop_per_byte",
    "compute_ceiling_fraction",
    "bandwidth_ceiling_fraction",
    "bound",
)
#: Per-row keys beyond the columns: the expected error (nested) and the extrapolation reasons.
CONFIDENCE_KEYS = ("expected_error", "extrapolation")
#: The flat forms of the expected error (CSV).
FLAT_ERROR_KEYS = ("expected_tpot_error_fraction", "expected_ttft_error_fraction", "expected_peak_mem_error_fraction")


def _plain(value):
    """A float, or None for a missing (NaN or None) error."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


#: A doubling of the batch that costs more than sqrt(2) in TPOT (log-log slope 0.5) has left
#: the flat region: throughput then grows by less than 41% per doubling.
KNEE_ELASTICITY = 0.5
#: bend() looks for the TPOT knee on 1..4096 and on geomspace(4096, BEND_MAX_BATCH, 512), rounded.
BEND_MAX_BATCH = 65536


@dataclass(frozen=True)
class Bend:
    crossing_batch: int | None
    knee_batch: int | None
    balance_point_flop_per_byte: float
    intensity_limit_flop_per_byte: float
    region_low_batch: int | None
    region_high_batch: int | None
    #: Mixture of experts: the batch from which a step touches 90% of the routed experts (the first
    #: bend: until then weight traffic grows with the batch); None for a dense model.
    experts_saturated_batch: int | None = None
    num_experts: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def describe(self) -> str:
        moe = ""
        if self.num_experts:
            moe = (f"mixture of experts: weight traffic grows with the batch until the step touches every expert "
                   f"(90% of {self.num_experts} from batch {self.experts_saturated_batch}), the first bend; "
                   if self.experts_saturated_batch is not None else
                   f"mixture of experts: a step touches fewer than 90% of the {self.num_experts} experts below "
                   f"batch {BEND_MAX_BATCH}; ")
        if self.crossing_batch is None and self.knee_batch is None:
            return moe + (
                f"decode never bends: intensity tops out at {self.intensity_limit_flop_per_byte:.1f} FLOP/byte, "
                f"under the balance point {self.balance_point_flop_per_byte:.1f}"
            )
        parts = [moe + "then like a dense model of all the experts:"] if moe else []
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
        text = "; ".join(parts) + region
        return text.replace(":; ", ": ")


@dataclass(frozen=True, eq=False)
class Prediction:
    """Columns of arrays (one entry per batch) and the scenario they were computed for; ``bend``
    is worked out on first use (a sweep of many predictions need not pay for it)."""

    scenario: Scenario
    columns: dict = field(repr=False)

    @cached_property
    def bend(self) -> Bend:
        return bend(self.scenario)

    @cached_property
    def confidence(self) -> dict:
        """How far to trust each row (roofline.confidence): ``errors`` = the expected relative error
        of TPOT and TTFT (arrays, one per batch), of peak memory, and its ``basis`` in words;
        ``extrapolation`` = per batch, the reasons the question leaves what the calibration saw."""
        from roofline.confidence import expected_errors, extrapolation, overhead_share

        sc, b, cols = self.scenario, self.columns["batch"], self.columns
        shares = overhead_share(cols["step_overhead_s"], cols["tpot_s"])
        return {"errors": expected_errors(sc.calibration, sc, b, shares),
                "extrapolation": extrapolation(sc.calibration, sc, b, shares)}

    def _confidence_value(self, key: str, i: int):
        errors = self.confidence["errors"]
        if key == "extrapolation":
            return list(self.confidence["extrapolation"][i])
        if key == "expected_error":
            return {f"{k}_fraction": _plain(errors[f"{k}_fraction"] if k == "peak_mem" else errors[f"{k}_fraction"][i])
                    for k in ("tpot", "ttft", "peak_mem")}
        name = key[len("expected_"):-len("_error_fraction")]
        return _plain(errors[f"{name}_fraction"] if name == "peak_mem" else errors[f"{name}_fraction"][i])

    def rows(self, keys=None) -> list[dict]:
        """One dict per batch: every column, the expected error and the extrapolation reasons (or
        ``keys`` only; the flat ``expected_{tpot,ttft,peak_mem}_error_fraction`` are keys too)."""
        keys = keys or [*self.columns, *CONFIDENCE_KEYS]
        n = len(self.columns["batch"])
        out = []
        for i in range(n):
            row = {}
            for k in keys:
                if k in self.columns:
                    v = self.columns[k][i]
                    row[k] = v.item() if hasattr(v, "item") else v
                else:
                    row[k] = self._confidence_value(k, i)
            out.append(row)
        return out

    def meta(self) -> dict:
        return {**self.scenario.meta(), "expected_error_basis": self.confidence["errors"]["basis"]}

    def as_dict(self) -> dict:
        """What `roofline predict --format json` prints: meta, rows (each with its ``expected_error``
        and ``extrapolation``) and the bend."""
        return {"meta": self.meta(), "rows": self.rows(), "bend": self.bend.as_dict()}

    def figure(self, show_bend: bool = True):
        """A plotly Figure of throughput and TPOT against batch (log2 axis), the bend marked (Jupyter)."""
        from roofline.figures import prediction_figure

        return prediction_figure(self, show_bend)


def evaluate(scenario: Scenario, batches) -> Prediction:
    """The per-batch table for a scenario (vectorised over ``batches``)."""
    b = validate.batches(batches, maximum=MAX_BATCH)
    if b.size > MAX_BATCHES:
        from roofline.errors import RooflineError

        raise RooflineError(f"at most {MAX_BATCHES:,} batch sizes at once, not {b.size:,}", "batches")
    bf = b.astype(float)
    m = scenario.step
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
        "per_user_tok_s": 1.0 / tpot,
        "throughput_tok_s": bf / tpot,
        "peak_mem_gib": mem["peak_bytes"] / GiB,
        "intensity_flop_per_byte": dec["linear_flop"] / dec["bytes_counted"],
        "compute_ceiling_fraction": dec["linear_flop"] / tpot / m.peak_flop_per_s,
        "bandwidth_ceiling_fraction": dec["bytes_counted"] / tpot / m.bandwidth_bytes_per_s,
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


def _pow2_bracket(lo_value: float, hi_value: float) -> tuple[int, int]:
    lo = 2 ** max(0, math.ceil(math.log2(lo_value)) - 1)
    hi = 2 ** math.ceil(math.log2(hi_value))
    return lo, max(hi, lo * 2)


def bend_grid() -> np.ndarray:
    """The batches bend() evaluates TPOT at: every batch 1..4096, then 512 log-spaced up to BEND_MAX_BATCH."""
    return np.unique(np.concatenate([np.arange(1, 4097), np.geomspace(4096, BEND_MAX_BATCH, 512).round()]))


def bend(scenario: Scenario) -> Bend:
    """The analytic crossing and the predicted TPOT knee."""
    m = scenario.step
    spec = scenario.model
    balance = m.balance_point_flop_per_byte
    dec1 = mean_decode(m, np.array([1.0]), scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache)
    weights1 = m.weight_read_bytes
    if spec.moe_layers:  # a one-sequence step reads only the experts it touches
        weights1 -= spec.moe_layers * m.expert_bytes * (spec.num_experts - float(m.experts_touched(1.0)))
    kv_per_request = float(dec1["bytes_counted"][0]) - weights1
    flop_per_request = spec.linear_flop_per_token
    limit = flop_per_request / kv_per_request if kv_per_request > 0 else math.inf
    crossing = saturated = None
    grid = bend_grid()
    if spec.moe_layers:
        # the weights a step reads grow with the experts its tokens touch: solve on the grid
        touched = m.experts_touched(grid.astype(float))
        weights = m.weight_read_bytes - spec.moe_layers * m.expert_bytes * (spec.num_experts - touched)
        hit = np.nonzero(grid * flop_per_request >= balance * (weights + grid * kv_per_request))[0]
        crossing = int(grid[hit[0]]) if hit.size else None
        full = np.nonzero(touched >= 0.9 * spec.num_experts)[0]
        saturated = int(grid[full[0]]) if full.size else None
    elif flop_per_request > balance * kv_per_request:
        exact = balance * m.weight_read_bytes / (flop_per_request - balance * kv_per_request)
        crossing = max(1, math.ceil(exact - 1e-9))
    tpot = mean_tpot_s(m, grid, scenario.prompt_tokens, scenario.gen_tokens, scenario.kv_cache)
    # slope of ln TPOT against ln batch over a doubling: compare each batch with its double
    doubled = np.interp(np.log(grid * 2), np.log(grid), np.log(tpot), right=np.nan)
    slope = (doubled - np.log(tpot)) / np.log(2.0)
    # a mixture of experts' TPOT climbs steeply while each doubling touches more experts (the
    # first bend, reported apart): its knee is looked for once the experts are all touched
    hits = np.nonzero((slope >= KNEE_ELASTICITY) & (grid >= (saturated or 1)))[0]
    knee = int(grid[hits[0]] * 2 ** 0.5) if hits.size else None
    region = (None, None)
    found = [x for x in (crossing, knee) if x is not None]
    if found:
        region = _pow2_bracket(min(found), max(found))
    return Bend(crossing, knee, balance, limit, *region, saturated, int(spec.num_experts) if spec.moe_layers else 0)
