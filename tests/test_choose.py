"""The largest batch under latency limits (roofline.choice, the lesson's section 6)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import RooflineError
from roofline.api import predict
from roofline.scenario import make_scenario

CARD, MODEL = "rtx3060", "qwen2.5-1.5b"


def test_lesson_ttft_limit_allows_about_32():
    # lesson section 6: "If the requirement is TTFT under 0.5 seconds, this table allows a batch
    # of about 32"; acceptance: 24-40
    c = roofline.choose(CARD, MODEL, ttft_max_s=0.5)
    assert 24 <= c.batch <= 40
    assert c.binding == "ttft"
    assert c.row["ttft_s"] <= 0.5 < c.next_row["ttft_s"]
    assert c.next_row["batch"] == c.batch + 1
    assert c.as_dict()["throughput_tok_s"] == pytest.approx(c.batch / c.row["tpot_s"])


def test_answer_agrees_with_predict_row():
    c = roofline.choose(CARD, MODEL, ttft_max_s=0.5)
    row = predict(CARD, MODEL, [c.batch]).rows()[0]
    assert c.row["ttft_s"] == pytest.approx(row["ttft_s"]) and c.row["throughput_tok_s"] == pytest.approx(row["throughput_tok_s"])


def test_no_limits_stop_at_memory_or_max_batch():
    c = roofline.choose(CARD, MODEL)
    assert c.binding == "memory" and 1 < c.batch < 4096
    nxt = predict(CARD, MODEL, [c.batch, c.batch + 1]).rows(["fits_in_memory"])
    assert [r["fits_in_memory"] for r in nxt] == [True, False]
    small = roofline.choose(CARD, MODEL, max_batch=64)
    assert (small.batch, small.binding, small.next_row) == (64, "max_batch", None)


def test_tpot_and_user_speed_limits_bind():
    c = roofline.choose(CARD, MODEL, tpot_max_s=0.025)
    assert c.binding == "tpot" and c.row["tpot_s"] <= 0.025 < c.next_row["tpot_s"]
    u = roofline.choose(CARD, MODEL, min_user_tok_s=40.0)
    assert u.binding == "min_user_tok_s" and u.row["per_user_tok_s"] >= 40.0 > u.next_row["per_user_tok_s"]
    # 1/TPOT >= 40 tok/s is the same limit as TPOT <= 25 ms
    assert u.batch == c.batch


def test_impossible_limit_says_why():
    with pytest.raises(RooflineError) as exc:
        roofline.choose(CARD, MODEL, ttft_max_s=0.01)
    msg = str(exc.value)
    ttft_1 = roofline.predict(CARD, MODEL, [1]).rows()[0]["ttft_s"]
    assert ttft_1 > 0.01
    assert "\n" not in msg and f"TTFT at batch 1 is already {ttft_1:.4f} s, above the limit of 0.01 s" in msg


def test_model_too_big_for_the_card_says_memory():
    with pytest.raises(RooflineError, match=r"batch 1 already needs \d+\.\d+ GiB, more than the card's 12\.00 GiB"):
        roofline.choose(CARD, "qwen2.5-14b")


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_bad_limits_are_rejected(bad):
    with pytest.raises(RooflineError, match="ttft_max_s: must be a positive number") as exc:
        roofline.choose(CARD, MODEL, ttft_max_s=bad)
    assert exc.value.for_flag("--ttft-max").startswith("--ttft-max: must be a positive number")


@settings(max_examples=25)
@given(
    ttft=st.one_of(st.none(), st.floats(0.03, 5.0)),
    tpot=st.one_of(st.none(), st.floats(0.015, 0.2)),
    user=st.one_of(st.none(), st.floats(1.0, 60.0)),
    max_batch=st.integers(1, 600),
)
def test_choice_is_the_largest_feasible_batch_by_brute_force(ttft, tpot, user, max_batch):
    scenario = make_scenario(card=CARD, model=MODEL)
    rows = predict(CARD, MODEL, list(range(1, max_batch + 1))).rows()
    feasible = [
        r["batch"] for r in rows
        if (ttft is None or r["ttft_s"] <= ttft) and (tpot is None or r["tpot_s"] <= tpot)
        and (user is None or r["per_user_tok_s"] >= user) and r["fits_in_memory"]
    ]
    from roofline.choice import choose_batch

    if not feasible:
        with pytest.raises(RooflineError, match="no batch meets the limits"):
            choose_batch(scenario, ttft, tpot, user, max_batch)
        return
    c = choose_batch(scenario, ttft, tpot, user, max_batch)
    assert c.batch == max(feasible)
    assert (c.binding == "max_batch") == (c.batch == max_batch)
    assert np.isfinite(c.row["throughput_tok_s"])
