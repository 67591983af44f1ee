"""Every command gives v0.1's numbers for v0.1's inputs, to 1e-9 relative (issue 8's acceptance).

The outputs were captured from v0.1's code by tests/regress_v01.py before the step model was
refactored; the scenarios run with copies of v0.1's card profiles and calibrations. Keys that were
renamed since are mapped (RENAMED); keys added since are ignored (the comparison walks v0.1's keys).
Deliberate changes of value are listed in CHANGED with the reason.
"""

from __future__ import annotations

import json
import math

import pytest

import regress_v01 as reg

EXPECTED = json.loads(reg.OUTPUTS.read_text(encoding="utf-8"))
#: v0.1 key -> (key now, factor applied to v0.1's value)
RENAMED: dict[str, tuple[str, float]] = {
    # issue 8: one name for one thing, and fractions (not percentages) in JSON
    "per_request_tok_s": ("per_user_tok_s", 1.0),
    "compute_ceiling_pct": ("compute_ceiling_fraction", 0.01),
    "bandwidth_ceiling_pct": ("bandwidth_ceiling_fraction", 0.01),
    "tpot_mape_pct": ("tpot_mape_fraction", 0.01),
    "ttft_mape_pct": ("ttft_mape_fraction", 0.01),
    "ttft_mape_pct_batch_64_up": ("ttft_mape_fraction_batch_64_up", 0.01),
    "peak_mem_mape_pct": ("peak_mem_mape_fraction", 0.01),
    "policy": ("return_policy", 1.0),
    "static_policy": ("static_return_policy", 1.0),
}
#: (scenario, key path) -> why v0.1's value was wrong and is not compared
CHANGED: dict[tuple[str, str], str] = {}
#: scenarios whose outputs changed on purpose after issue 8's refactor, and why
CHANGED_SCENARIOS: dict[str, str] = {
    "fit-lesson": "issue 9: the fit frees terms v0.1 did not have where the data identify them "
                  "(a batched step's per-layer extra, identified by batch 1 vs 2)",
    "fit-graph-2": "issue 9: as fit-lesson (its held-out qwen2.5-7b error falls from 41% to 5%)",
    # issue 10: weight formats at their true bits (roofline/formats.py) and the matmul peak picked by format
    "predict-l4-int4": "issue 10: int4 weights carry an fp16 scale per group of 128 (4.125 bits) and, as W4A16 "
                       "checkpoints do, leave the LM head in 16 bits",
    "simulate-file-rate": "issue 10: int4 as in predict-l4-int4 (llama-3.2-3b's tied LM head stays 16-bit: 40% more "
                          "weight bytes), which the queue amplifies",
    "predict-3060-3b-int8": "issue 10: int8 (W8A8) matmuls run at the card's int8 tensor peak; the LM head stays 16-bit",
    "choose-memory": "issue 10: int8 leaves the LM head in 16 bits: more weight bytes, a smaller largest batch",
    "predict-mi300x-70b-fp8": "issue 10: fp8 matmuls run at the card's fp8 tensor peak; the LM head stays 16-bit",
    "predict-a100-32b-graphcal": "issue 15: a calibration fitted on another card (here the H200's on an A100) is "
                                 "refused with a one-line error instead of silently bringing that card's ceilings",
}
IGNORED_KEYS = {"calibration_path"}  # a temporary file's name
REL = 1e-9
#: `fit` scenarios: least squares amplifies last-bit differences (the pass formula's products are
#: now associated differently) along its flat directions, so a fitted term may move by up to 0.2%
#: (roofline_exponent at p ~ 53, where the p-norm hardly changes) while every error it reports
#: stays within 1e-5 relative. Every forward output (predict, bend, choose, waste, simulate,
#: compare) is held to REL.
FIT_TERM_REL = 5e-3
FIT_REPORT_REL = 1e-5


def _tolerance(name: str, path: str) -> float:
    if not name.startswith("fit-"):
        return REL
    return FIT_REPORT_REL if ".fit_report." in path else FIT_TERM_REL


def _compare(name: str, path: str, old, new, problems: list[str]) -> None:
    if (name, path) in CHANGED:
        return
    if isinstance(old, dict):
        if not isinstance(new, dict):
            problems.append(f"{path}: was an object, now {type(new).__name__}")
            return
        for key, value in old.items():
            if key in IGNORED_KEYS:
                continue
            now_key, factor = RENAMED.get(key, (key, 1.0))
            if now_key not in new:
                problems.append(f"{path}.{key}: missing")
                continue
            if factor != 1.0 and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = value * factor
            _compare(name, f"{path}.{now_key}", value, new[now_key], problems)
        return
    if isinstance(old, list):
        if not isinstance(new, list) or len(old) != len(new):
            problems.append(f"{path}: list of {len(old)} became {new if not isinstance(new, list) else len(new)}")
            return
        for i, (a, b) in enumerate(zip(old, new)):
            _compare(name, f"{path}[{i}]", a, b, problems)
        return
    if isinstance(old, float) or isinstance(new, float):
        if isinstance(old, bool) or isinstance(new, bool) or old is None or new is None:
            if old != new:
                problems.append(f"{path}: {old!r} -> {new!r}")
            return
        if not math.isclose(float(old), float(new), rel_tol=_tolerance(name, path), abs_tol=1e-15):
            problems.append(f"{path}: {old!r} -> {new!r} (rel {abs(new / old - 1) if old else new:.3g})")
        return
    if old != new:
        problems.append(f"{path}: {old!r} -> {new!r}")


@pytest.mark.parametrize("name", sorted(reg.SCENARIOS))
def test_output_unchanged_since_v01(name, tmp_path, monkeypatch):
    if name in CHANGED_SCENARIOS:
        pytest.skip(CHANGED_SCENARIOS[name])
    monkeypatch.chdir(reg.ROOT)
    new = reg.run(name, reg.SCENARIOS[name], tmp_path)
    problems: list[str] = []
    _compare(name, name, EXPECTED[name], new, problems)
    assert not problems, "\n".join(problems[:20])


def test_every_scenario_was_captured():
    assert set(EXPECTED) == set(reg.SCENARIOS)


def test_the_comparison_can_fail():
    problems: list[str] = []
    _compare("x", "x", {"a": 1.0, "b": [1, 2]}, {"a": 1.0 + 1e-8, "b": [1, 3]}, problems)
    assert len(problems) == 2
