"""The largest static batch that meets latency limits (the lesson's section 6).

Every integer batch 1..max_batch is evaluated in one vectorised call (roofline.prediction.evaluate).
A batch is *feasible* when its TTFT <= ``ttft_max_s``, its TPOT <= ``tpot_max_s``, its per-user
speed 1/TPOT >= ``min_user_tok_s`` (each only when given) and its peak memory fits in the card.
The answer is the largest feasible batch; ``binding`` names what stops the next batch
(``ttft``, ``tpot``, ``min_user_tok_s``, ``memory``; ``max_batch`` when the search ran out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline import validate
from roofline.errors import RooflineError
from roofline.prediction import Prediction, evaluate
from roofline.scenario import Scenario
from roofline.units import GiB

LIMITS = ("ttft", "tpot", "min_user_tok_s", "memory")
#: The largest batch choose searches up to (every batch 1..this is evaluated).
MAX_CHOOSE_BATCH = 65536


@dataclass(frozen=True)
class Choice:
    batch: int
    binding: str
    binding_all: tuple
    limits: dict
    row: dict
    next_row: dict | None
    meta: dict

    @property
    def tp(self) -> int:
        return int(self.meta.get("tp", 1))

    @property
    def gpu_s_per_token(self) -> float:
        """GPU-seconds per generated token at the chosen batch: GPUs / throughput (the cost per
        token per GPU: multiply by a GPU-second's price)."""
        return self.tp / self.row["throughput_tok_s"]

    def as_dict(self) -> dict:
        return {
            "batch": self.batch,
            "tp": self.tp,
            "gpu_s_per_token": self.gpu_s_per_token,
            "throughput_tok_s": self.row["throughput_tok_s"],
            "throughput_tok_s_per_gpu": self.row["throughput_tok_s"] / self.tp,
            "ttft_s": self.row["ttft_s"],
            "tpot_s": self.row["tpot_s"],
            "per_user_tok_s": self.row["per_user_tok_s"],
            "peak_mem_bytes": self.row["peak_mem_bytes"],
            "binding": self.binding,
            "binding_all": list(self.binding_all),
            "limits": self.limits,
            "next": self.next_row,
            "meta": self.meta,
        }


def _failures(cols: dict, limits: dict, memory_bytes: float) -> dict[str, np.ndarray]:
    """Per limit, a boolean array: True where that limit is broken."""
    fail = {}
    if limits["ttft_max_s"] is not None:
        fail["ttft"] = cols["ttft_s"] > limits["ttft_max_s"]
    if limits["tpot_max_s"] is not None:
        fail["tpot"] = cols["tpot_s"] > limits["tpot_max_s"]
    if limits["min_user_tok_s"] is not None:
        fail["min_user_tok_s"] = cols["per_user_tok_s"] < limits["min_user_tok_s"]
    fail["memory"] = cols["peak_mem_bytes"] > memory_bytes
    return fail


def _why_not(name: str, row: dict, limits: dict, memory_bytes: float) -> str:
    b = row["batch"]
    if name == "ttft":
        return f"TTFT at batch {b} is already {row['ttft_s']:.3g} s, above the limit of {limits['ttft_max_s']:g} s"
    if name == "tpot":
        return (f"TPOT at batch {b} is already {row['tpot_s'] * 1e3:.3g} ms, "
                f"above the limit of {limits['tpot_max_s'] * 1e3:g} ms")
    if name == "min_user_tok_s":
        return (
            f"per-user speed at batch {b} is only {row['per_user_tok_s']:.3g} tok/s, "
            f"below the limit of {limits['min_user_tok_s']:g} tok/s"
        )
    headroom = limits.get("memory_headroom") or 0.0
    allowed = (f"the card's {memory_bytes / GiB:.2f} GiB" if not headroom else
               f"the {memory_bytes / GiB:.2f} GiB allowed (the card's memory less {100 * headroom:g}% headroom)")
    return f"batch {b} already needs {row['peak_mem_bytes'] / GiB:.2f} GiB, more than {allowed}"


def choose_batch(
    scenario: Scenario,
    ttft_max_s: float | None = None,
    tpot_max_s: float | None = None,
    min_user_tok_s: float | None = None,
    max_batch: int = 4096,
    memory_headroom: float = 0.0,
) -> Choice:
    """The largest batch 1..max_batch meeting every given limit and fitting in the card's memory
    less ``memory_headroom`` (a fraction kept free)."""
    limits = {
        "ttft_max_s": validate.optional_positive(ttft_max_s, "ttft_max_s", "a positive number of seconds"),
        "tpot_max_s": validate.optional_positive(tpot_max_s, "tpot_max_s", "a positive number of seconds"),
        "min_user_tok_s": validate.optional_positive(min_user_tok_s, "min_user_tok_s", "a positive number of tok/s"),
        "max_batch": validate.whole(max_batch, "max_batch", maximum=MAX_CHOOSE_BATCH),
        "memory_headroom": validate.non_negative(memory_headroom, "memory_headroom", maximum=0.9),
    }
    max_batch = limits["max_batch"]
    # one past the end: what binds
    pred: Prediction = evaluate(scenario, np.arange(1, max_batch + 2))
    cols = pred.columns
    memory = scenario.card.memory_bytes * (1.0 - limits["memory_headroom"])
    fail = _failures(cols, limits, memory)
    broken = np.zeros(len(cols["batch"]), dtype=bool)
    for f in fail.values():
        broken |= f
    ok = ~broken[:max_batch]
    keys = ("batch", "ttft_s", "tpot_s", "per_user_tok_s", "throughput_tok_s", "peak_mem_bytes")

    def row(i: int) -> dict:
        return {k: cols[k][i].item() for k in keys}

    if not ok.any():
        reasons = [_why_not(name, row(0), limits, memory) for name in LIMITS if name in fail and fail[name][0]]
        raise RooflineError("no batch meets the limits: " + "; ".join(reasons))
    best = int(np.nonzero(ok)[0][-1])
    nxt = best + 1
    if nxt >= max_batch:
        binding_all = ("max_batch",)
        next_row = None
    else:
        binding_all = tuple(name for name in LIMITS if name in fail and fail[name][nxt])
        next_row = row(nxt)
    return Choice(
        batch=best + 1,
        binding=binding_all[0],
        binding_all=binding_all,
        limits=limits,
        row=row(best),
        next_row=next_row,
        meta=pred.meta(),
    )


@dataclass(frozen=True)
class TPChoice:
    """``choose`` over tensor-parallel degrees: the Choice at each degree that has one, and the
    best -- the fewest GPU-seconds per token (the most throughput per GPU), ties to fewer GPUs."""

    best: Choice
    options: tuple  # Choice per degree, in the order given
    infeasible: dict  # degree -> why no batch meets the limits there

    def as_dict(self) -> dict:
        return {**self.best.as_dict(), "tp_options": [c.as_dict() for c in self.options],
                "tp_infeasible": {str(k): v for k, v in self.infeasible.items()}}


def choose_tp(scenarios, ttft_max_s=None, tpot_max_s=None, min_user_tok_s=None, max_batch: int = 4096,
              memory_headroom: float = 0.0) -> TPChoice:
    """choose_batch at each scenario (one per TP degree); the best by GPU-seconds per token."""
    options, infeasible = [], {}
    for sc in scenarios:
        try:
            options.append(choose_batch(sc, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch, memory_headroom))
        except RooflineError as exc:
            if "no batch meets the limits" not in str(exc):
                raise
            infeasible[sc.tp] = str(exc)
    if not options:
        raise RooflineError("no tensor-parallel degree meets the limits: " +
                            "; ".join(f"tp {k}: {v}" for k, v in infeasible.items()))
    best = min(options, key=lambda c: (c.gpu_s_per_token, c.tp))
    return TPChoice(best, tuple(options), infeasible)
