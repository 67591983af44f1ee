"""Hypothesis properties of the core model (STYLE.md, issue 2)."""

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline.calibration import Calibration
from roofline.api import predict
from roofline.decode import BLOCK_SCENARIOS, _mean_decode, decode_step, mean_decode
from roofline.hardware import card_from_dict, card_ids, load_card
from roofline.model_spec import catalog_names, load_model
from roofline.prediction import evaluate
from roofline.scenario import make_scenario

cards = st.sampled_from(card_ids())
models = st.sampled_from(catalog_names())
lengths = st.integers(1, 8192)
calibrations = st.sampled_from(["auto", None])


@given(cards, models, lengths, lengths, calibrations, st.sampled_from(["dynamic", "static"]))
@example("h200", "llama-3.2-1b", 1341, 1, "auto", "dynamic")  # the largest fall the scan found (below)
def test_tpot_never_falls_as_batch_grows(card, model, prompt, gen, cal, kv):
    p = predict(card, model, np.arange(1, 2049), prompt_tokens=prompt, gen_tokens=gen, calibration=cal, kv_cache=kv)
    tpot = p.columns["tpot_s"]
    falls = np.nonzero(np.diff(tpot) < -1e-15 * tpot[1:])[0]
    # except once, where a mixture of experts' grouped GEMM switches to its large tiles (batch x k
    # >= 129 x E: roofline.step.SMALL_TILE_ROWS_PER_EXPERT), which compute at a higher rate
    spec = load_model(model)
    switch = -(-129 * spec.num_experts // spec.experts_per_token) if spec.moe_layers else None
    others = [i for i in falls if i + 2 != switch]
    if others:
        # and where the decode attention's measured kernel table (Calibration.attention_kernel_table;
        # docs/method.md section 2.5) times more batched matrices faster than fewer at the same
        # length: the H200 probe's 64-wide x4 layer ran 20.62 us at 16 matrices and 18.96 us at 32 at
        # 1,280 positions (h200-probe-attention-table-call68.json). Bounded: a scan of the dense
        # catalog at gen 1 found at most 0.73% (llama-3.2-1b, prompt 1,338, batch 2 -> 3; 0.74% at 1,341;
        # benchmarks/tpot_falls_by_batch.py, docs/method.md section 2.5); and the
        # same scenario without the table never falls
        sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal, kv_cache=kv)
        assert sc.step._kernel_table is not None, (others, switch)
        assert np.all(-np.diff(tpot)[others] < 0.01 * tpot[1:][others]), others
        smooth = sc.calibration.model_copy(update={"attention_kernel_table": None})
        q = predict(card, model, np.arange(1, 2049), prompt_tokens=prompt, gen_tokens=gen, calibration=smooth,
                    kv_cache=kv).columns["tpot_s"]
        assert all(i + 2 == switch for i in np.nonzero(np.diff(q) < -1e-15 * q[1:])[0])
    # the prefill's too, while its passes stay on the small tiles (fewer than that many prompt tokens)
    ttft = p.columns["ttft_s"] if switch is None else p.columns["ttft_s"][: max(1, -(-switch // prompt) - 1)]
    assert np.all(np.diff(ttft) >= 0)
    assert np.all(np.diff(p.columns["peak_mem_bytes"]) > 0)


@given(cards, models, lengths, lengths, calibrations, st.integers(1, 4096))
def test_step_time_is_at_least_the_roofline(card, model, prompt, gen, cal, batch):
    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal)
    m = sc.step
    dec = mean_decode(m, np.array([batch]), prompt, gen, sc.kv_cache)
    floor = np.maximum(dec["bytes_counted"] / m.bandwidth_bytes_per_s,
                       (dec["linear_flop"] + dec["attention_flop"]) / m.peak_flop_per_s)
    assert dec["step_s"][0] >= floor[0] * (1 - 1e-12)


@given(cards, models, lengths, lengths)
def test_uncalibrated_is_two_pure_rooflines(card, model, prompt, gen):
    # uncalibrated: the matmuls and attention each on their own pure roofline, one after the other
    from roofline.step import decode_work

    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=None)
    m = sc.step
    batch = np.array([1.0, 64.0, 1024.0])
    ctx = prompt + gen
    work = decode_work(batch, batch * ctx, batch * min(ctx, m.window or ctx))
    dec = decode_step(m, batch, ctx)
    full = m.kv_bytes_per_token - m.kv_window_bytes_per_token
    kv_bytes = batch * (ctx + 1) * full + batch * (min(ctx, m.window or ctx) + 1) * m.kv_window_bytes_per_token
    roof = np.maximum(m.weight_bytes_read(work) / m.bandwidth_bytes_per_s, dec["linear_flop"] / m.peak_flop_per_s) \
        + np.maximum(kv_bytes / m.bandwidth_bytes_per_s, dec["attention_flop"] / m.peak_flop_per_s)
    assert dec["overhead_s"].max() == 0
    assert np.allclose(dec["step_s"], roof, rtol=1e-12)


@given(st.sampled_from(card_ids()), models, st.lists(st.integers(1, 5000), min_size=1, max_size=12))
def test_profile_in_gb_and_in_bytes_gives_identical_results(card_id, model, batches):
    card = load_card(card_id)
    data = json.loads(card.model_dump_json())
    in_bytes = dict(data)
    for key in ("memory", "datasheet_bandwidth", "datasheet_bf16_flops", "measured_bandwidth", "measured_bf16_flops"):
        fig = data.get(key)
        if fig:
            base = {"memory": card.memory.base}.get(key) or card_from_dict(data, "x").__getattribute__(key).base
            unit = {"memory": "bytes"}.get(key, "bytes/s" if "bandwidth" in key else "FLOP/s")
            in_bytes[key] = {**fig, "value": base, "unit": unit}
    other = card_from_dict(in_bytes, "bytes")
    a = predict(card, model, batches, calibration=None).columns
    b = predict(other, model, batches, calibration=None).columns
    for k in ("tpot_s", "ttft_s", "peak_mem_bytes", "intensity_flop_per_byte"):
        assert np.allclose(a[k], b[k], rtol=1e-12), k


@given(cards, models, st.lists(st.integers(1, 4096), min_size=1, max_size=20), lengths, lengths, calibrations)
def test_vectorised_equals_scalar_loop(card, model, batches, prompt, gen, cal):
    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal)
    vec = evaluate(sc, batches).columns
    for i, b in enumerate(batches):
        one = evaluate(sc, [b]).columns
        for k in ("tpot_s", "ttft_s", "peak_mem_bytes", "intensity_flop_per_byte", "bound"):
            if k == "bound":
                assert vec[k][i] == one[k][0]
            else:
                assert vec[k][i] == pytest.approx(one[k][0], rel=1e-12)



@given(cards, models, lengths, lengths, calibrations, st.integers(1, 3 * BLOCK_SCENARIOS))
# one row past whole blocks: a lone row's samples averaged alone differed in the last bit (a 1-row block)
@example("h200", "deepseek-v2-lite", 777, 300, "auto", BLOCK_SCENARIOS + 1)
@example("h200", "deepseek-v2-lite", 777, 300, None, 2 * BLOCK_SCENARIOS + 1)
def test_a_sweep_priced_in_blocks_is_the_sweep_priced_whole(card, model, prompt, gen, cal, size):
    """mean_decode prices more than BLOCK_SCENARIOS rows a block at a time: the same numbers, bit for bit,
    as pricing the whole row in one go (roofline.decode._mean_decode)."""
    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal)
    batches = np.arange(1, size + 1, dtype=float)
    blocked = mean_decode(sc.step, batches, prompt, gen, sc.kv_cache)
    full = np.full(size, 1.0)
    whole = _mean_decode(sc.step, batches, prompt * full, gen * full, sc.kv_cache)
    assert blocked.keys() == whole.keys()
    for k, v in whole.items():
        assert blocked[k].shape == (size,) and np.array_equal(blocked[k], v), k


def test_quantised_weights_and_kv_move_fewer_bytes():
    base = predict("h100-sxm", "llama-3.1-8b", [1, 256], calibration=None).columns
    w4 = predict("h100-sxm", "llama-3.1-8b", [1, 256], calibration=None, weight_dtype="int4").columns
    kv8 = predict("h100-sxm", "llama-3.1-8b", [1, 256], calibration=None, kv_dtype="fp8").columns
    assert w4["tpot_s"][0] < 0.4 * base["tpot_s"][0]  # batch 1 is weight-bound: ~1/4 of the linear bytes
    weights = base["bytes_per_step"][0] - (base["bytes_per_step"][1] - base["bytes_per_step"][0]) / 255
    assert kv8["bytes_per_step"][1] - weights == pytest.approx((base["bytes_per_step"][1] - weights) / 2)
    assert w4["intensity_flop_per_byte"][0] > 3 * base["intensity_flop_per_byte"][0]


def test_static_cache_reads_more_than_dynamic():
    dyn = predict("h200", "qwen2.5-7b", [64], prompt_tokens=128, gen_tokens=1024, calibration=None,
                  kv_cache="dynamic").columns
    sta = predict("h200", "qwen2.5-7b", [64], prompt_tokens=128, gen_tokens=1024, calibration=None,
                  kv_cache="static").columns
    assert sta["bytes_per_step"][0] > dyn["bytes_per_step"][0]
    assert sta["tpot_s"][0] > dyn["tpot_s"][0]


def test_calibration_terms_bounds_are_enforced():
    with pytest.raises(Exception):
        Calibration(card="x", engine="e", bandwidth_efficiency=1.5)


@given(cards, models, st.integers(1, 4096), st.integers(1, 4096), calibrations, st.integers(1, 2048))
@example("h200", "gpt-neox-20b", 1042, 48, "auto", 6)  # its last step leaves a window of cache lengths
@example("h200", "llama-2-70b", 2215, 2215, "auto", 340)  # over the old bound (0.1% + a sixteenth of a jump)
@example("h200", "qwen2.5-0.5b", 978, 2347, "auto", 2993)  # 2.09% off: benchmarks/tpot_blocks_error.py's worst
def test_sixteen_block_tpot_is_within_the_blocks_spread_of_the_step_by_step_mean(card, model, prompt, gen, cal, batch):
    # docs/method.md section 6: each of the 16 blocks is priced at a context inside it, so it is off
    # its own steps' mean by at most the price's spread over them; the TPOT by at most the blocks'
    # spreads summed over 16 (+0.1% for the blocks' fractional edges). Exact where the price is linear
    # in context; where it steps or bends within a block (the H200 graph calibration's priced
    # regimes of context) up to ~2% (benchmarks/tpot_blocks_error.py)
    from roofline.decode import block_spread

    sc = make_scenario(card=card, model=model, prompt_tokens=prompt, gen_tokens=gen, calibration=cal)
    steps = np.arange(1, max(gen - 1, 1) + 1)
    each = decode_step(sc.step, batch, prompt + steps)["step_s"]
    exact = each.mean()
    blocks = mean_decode(sc.step, np.array([batch]), prompt, gen, "dynamic")["step_s"][0]
    assert abs(blocks / exact - 1.0) <= 1e-3 + block_spread(each) / exact


def test_sixteen_blocks_are_exact_where_the_step_is_linear_in_context():
    # the uncalibrated roofline of a model without windows on a card where the decode is all memory:
    # the step is linear in the context read, so the blocks' mean is the steps' mean to rounding
    sc = make_scenario(card="h100-sxm", model="llama-3.1-8b", prompt_tokens=500, gen_tokens=3000, calibration=None)
    each = decode_step(sc.step, 8, 500 + np.arange(1, 3000))["step_s"]
    assert np.all(np.diff(np.diff(each)) < 1e-12 * each.mean())  # linear (convex kinks aside: none here)
    blocks = mean_decode(sc.step, np.array([8]), 500, 3000, "dynamic")["step_s"][0]
    assert blocks == pytest.approx(each.mean(), rel=1e-9)
