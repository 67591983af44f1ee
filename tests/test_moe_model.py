"""Mixture of experts in the step model and bend (issue 11): experts touched, the two bends, skew."""

import math

import numpy as np
import pytest

import roofline
from roofline.calibration import load_calibration
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.step import StepModel

GRAPH = "hardware_profiles/calibrations/h200-graph.json"


def _step(model, skew=0.0):
    return StepModel(load_model(model), load_card("h200"), load_calibration(GRAPH), routing_skew=skew)


def test_experts_touched_under_uniform_routing_by_hand():
    # qwen3-30b-a3b: 128 routed experts, top-8. One token touches 8; 16 tokens 128 (1 - (120/128)^16)
    m = _step("qwen3-30b-a3b")
    assert m.experts_touched(1.0) == pytest.approx(8.0)
    assert m.experts_touched(16.0) == pytest.approx(128 * (1 - (120 / 128) ** 16))  # 80.3
    assert m.experts_touched(4096.0) == pytest.approx(128.0)


def test_skewed_routing_touches_fewer_experts():
    uniform, skewed = _step("qwen3-30b-a3b"), _step("qwen3-30b-a3b", 1.2)
    tokens = np.array([4.0, 16.0, 64.0, 256.0])
    assert np.all(skewed.experts_touched(tokens) < uniform.experts_touched(tokens))
    assert skewed.experts_touched(1.0) == pytest.approx(8.0, rel=0.02)  # a token still picks k experts


def test_the_first_bend_is_where_90_percent_of_the_experts_are_touched():
    """(1 - k/E)^B <= 0.1: B >= ln 0.1 / ln(1 - k/E) -- 35.7 for 8 of 128, 8.004 for 2 of 8."""
    for model, k, e in (("qwen3-30b-a3b", 8, 128), ("mixtral-8x7b", 2, 8)):
        b = roofline.bend("h200", model, engine="graph", calibration=GRAPH)
        assert b.num_experts == e
        assert b.experts_saturated_batch == math.ceil(math.log(0.1) / math.log(1 - k / e))
        # the TPOT knee is looked for after the experts are all touched
        assert b.knee_batch is None or b.knee_batch >= b.experts_saturated_batch
        text = b.describe()
        assert "first bend" in text and f"90% of {e}" in text
    dense = roofline.bend("h200", "qwen2.5-7b", engine="graph", calibration=GRAPH)
    assert dense.experts_saturated_batch is None and "experts" not in dense.describe()


def test_moe_tpot_grows_with_the_experts_then_like_a_dense_model_of_all_of_them():
    p = roofline.predict("h200", "qwen3-30b-a3b", [1, 2, 4, 8, 16, 32, 64, 128, 256], engine="graph",
                         calibration=GRAPH)
    tpot = p.columns["tpot_s"]
    # a step at batch 8 reads ~6x the expert weights of batch 1 (8 -> 52 experts): TPOT rises well
    assert tpot[3] / tpot[0] > 1.3
    # from 64 to 128 nearly every expert is already touched: the step barely grows
    assert tpot[7] / tpot[6] < 1.2


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v2-lite"])
def test_routed_rows_gather_and_combine_cost_each_token_k_rows_of_hidden(model):
    # expert_row_traffic_coeff (the MoE probe): every token routed to k experts moves
    # coeff x hidden x act bytes per row in each MoE layer, at the calibrated bandwidth, in a
    # prefill and in a decode step alike; a dense model's pass does not change
    from roofline.step import decode_work, prefill_work

    card, base = load_card("h200"), load_calibration(GRAPH)
    off, on = base.model_copy(update={"expert_row_traffic_coeff": 0.0}), base.model_copy(update={"expert_row_traffic_coeff": 20.0})
    spec = load_model(model)
    per_token = (spec.moe_layers * spec.experts_per_token * spec.hidden_size * 2 * 20.0
                 / (base.bandwidth_efficiency * base.measured_bandwidth_bytes_per_s))
    for work, tokens in ((prefill_work(4096.0, 4096.0 * 4097 / 2, 1.0), 4096), (decode_work(64.0, 64.0 * 512), 64)):
        a = StepModel(spec, card, off).pass_parts(work).elementwise_s
        b = StepModel(spec, card, on).pass_parts(work).elementwise_s
        assert b - a == pytest.approx(tokens * per_token, rel=1e-9)
    dense = load_model("qwen2.5-7b")
    work = prefill_work(4096.0, 4096.0 * 4097 / 2, 1.0)
    assert StepModel(dense, card, on).pass_s(work) == StepModel(dense, card, off).pass_s(work)


def test_the_shipped_moe_terms_read_the_probes_expert_bandwidth():
    # h200-graph.json's MoE fit holds the probe's row cost and refits the rest on qwen3-30b-a3b's
    # decode: the grouped matmul then reads an expert byte ~1.2x as slowly as a dense one, as the
    # probe's grouped matmuls do at 256-1,024 tokens (2.9-3.0 TB/s of touched experts, against
    # 3.8 TB/s for dense weights: h200-probe-moe.json)
    cal = load_calibration(GRAPH)
    assert cal.expert_row_traffic_coeff == pytest.approx(22.1, rel=0.05)
    assert 1.1 < cal.expert_traffic_factor < 1.4
    # and gpt-oss's clamped activation joins the prefill's elementwise costs (the probe's act stage)
    # (and the grouped GEMM's tile rates: the same probe's matmuls; the grouped-mm probe's table; the index
    # probe's small-index kernels)
    assert cal.fit_report["extra"]["held"] == ["expert_gemm_table", "expert_large_tile_efficiency", "expert_prefill_flop_per_s",
                                               "expert_row_traffic_coeff", "expert_small_tile_efficiency",
                                               "index_kernel_table", "prefill_elementwise_bytes_per_element"]
    per = cal.prefill_elementwise_bytes_per_element
    assert 1.7 < per["clamped_intermediate"] / per["gated_intermediate"] < 2.2


def test_a_masked_prefill_prices_the_square_the_engine_computes():
    # masked_prefill_attention_flop_per_s: past its window a windowed layer's prompt attention is
    # the whole P x P square at the masked rate (in causal pairs of the model's width); within the
    # window, the causal pairs as before; with sinks every layer is masked, P x (P + 1) at the
    # padded width's rate
    from roofline.prefill import static_prefill_work
    from roofline.step import causal_pairs, head_dim_rate

    card, base = load_card("h200"), load_calibration(GRAPH)
    assert base.masked_prefill_attention_flop_per_s  # the shipped graph calibration carries the probe's rates
    for name, sinks in (("mistral-7b-v0.1", False), ("gpt-oss-20b", True)):
        spec = load_model(name)
        step = StepModel(spec, card, base)
        factor, has_sinks = step.masked_prefill
        computed = 72 if sinks else spec.head_dim
        causal = head_dim_rate(base.prefill_attention_flop_per_s, spec.head_dim)
        masked = head_dim_rate(base.masked_prefill_attention_flop_per_s, computed)
        assert has_sinks == sinks and factor == pytest.approx(computed / spec.head_dim * causal / masked)
        w = step.window
        for prompt in (w // 2, 2 * w):
            work = static_prefill_work(4.0, float(prompt), "last", w, step.masked_prefill)
            if sinks:
                assert work.prefill_pairs == pytest.approx(4 * prompt * (prompt + 1) * factor)
                assert work.prefill_window_pairs == work.prefill_pairs
            elif prompt > w:
                assert work.prefill_window_pairs == pytest.approx(4 * prompt * prompt * factor)
                assert work.prefill_pairs == pytest.approx(4 * causal_pairs(float(prompt)))
            else:
                assert work.prefill_window_pairs == pytest.approx(4 * causal_pairs(float(prompt), w))
    # a calibration without the rates, or a model without windows or sinks: priced as before
    assert StepModel(load_model("mistral-7b-v0.1"), card, base.model_copy(
        update={"masked_prefill_attention_flop_per_s": None})).masked_prefill is None
    assert StepModel(load_model("qwen2.5-7b"), card, base).masked_prefill is None


def test_the_grouped_gemm_rate_from_the_moe_probe_prices_a_prompts_routed_flops():
    # hardware_profiles/measurements/h200-probe-moe.json (device call 19): qwen3-30b-a3b's grouped expert
    # matmuls run at ~620-650 TFLOP/s from 16,384 tokens up, below the dense prefill matmuls' ~765
    from roofline.probes import moe_grouped_flop_per_s
    from roofline.step import prefill_work

    rate = moe_grouped_flop_per_s("hardware_profiles/measurements/h200-probe-moe.json", ["qwen3-30b-a3b"])
    assert rate == pytest.approx(6.35e14, rel=0.05)
    shipped = load_calibration(GRAPH)
    assert shipped.expert_prefill_flop_per_s == pytest.approx(rate, rel=1e-12)
    # (the rate prices the routed rows where the calibration has no tile rates; the shipped one's
    # large tiles run at about it: 649 TFLOP/s per tile FLOP, the same probe)
    assert shipped.expert_large_tile_efficiency * shipped.measured_peak_flop_per_s == pytest.approx(rate, rel=0.05)
    cal = shipped.model_copy(update={"expert_small_tile_efficiency": None, "expert_large_tile_efficiency": None,
                                     "expert_gemm_table": None})
    card, spec = load_card("h200"), load_model("qwen3-30b-a3b")
    dense_rate = cal.model_copy(update={"expert_prefill_flop_per_s": None})
    work = prefill_work(8192.0, 8192.0 * 8193 / 2, 1.0)
    slow, fast = (StepModel(spec, card, c).pass_parts(work).matmul_compute_s for c in (cal, dense_rate))
    routed = spec.moe_layers * spec.experts_per_token * 2.0 * spec.routed_expert_weight_params * 8192.0
    peak = StepModel(spec, card, cal).peak_flop_per_s * cal.prefill_compute_efficiency
    assert slow - fast == pytest.approx(routed / rate - routed / peak, rel=1e-9)
    # a dense model is untouched
    dense = load_model("qwen2.5-7b")
    assert (StepModel(dense, card, cal).pass_parts(work).matmul_compute_s
            == StepModel(dense, card, dense_rate).pass_parts(work).matmul_compute_s)


def test_mla_prompt_pairs_are_priced_decompressed():
    # an MLA prefill builds each head's keys and values from the latent: 4 x heads x (nope + rope)
    # FLOPs a pair (values padded to the keys' width), not the absorbed decode's 2 x heads x (2r + rope)
    spec = load_model("deepseek-v2-lite")
    (g,) = spec.attention_groups
    assert g.prefill_flop_per_pair == 4 * 16 * 192 and g.flop_per_pair == 2 * 16 * (512 + 64) + 2 * 16 * 512
    m = StepModel(spec, load_card("h200"), load_calibration(GRAPH))
    assert m.prefill_flop_per_pair == 27 * 4 * 16 * 192 and m.attention_flop_per_pair == 27 * g.flop_per_pair
    assert m.attention_flop((0.0, 0.0, 64.0, 100.0, 1.0, None, None)) == pytest.approx(100.0 * 27 * 4 * 16 * 192)
    gqa = load_model("qwen2.5-7b").attention_groups[0]
    assert gqa.prefill_flop_per_pair == 0  # GQA: the decode pair's FLOPs


# ---- the grouped GEMM's tiles (roofline.step.tile_rows_table; docs/method.md, "MoE decode by tiles") ----

def _tile_rows_by_brute_force(experts, top_k, tokens, probs):
    """Σ_i h·E[ceil(r_i / h)] summed over every r_i = 0..T with scipy's pmf (no window, no tails)."""
    from scipy.stats import binom

    h = 64 if tokens * top_k < 129 * experts else 128
    r = np.arange(tokens + 1)
    return h * sum(float(np.dot(binom.pmf(r, tokens, q), np.ceil(r / h))) for q in probs)


@pytest.mark.parametrize("experts, top_k, skew", [(8, 2, 0.0), (128, 8, 0.0), (32, 4, 0.0), (64, 6, 1.1)])
def test_tile_rows_equal_the_binomial_expectation_summed_by_brute_force(experts, top_k, skew):
    from roofline.step import routing_probabilities, tile_rows_table

    grid, values = tile_rows_table(experts, top_k, skew)
    probs = routing_probabilities(experts, top_k, skew)
    for tokens in (1, 3, 40, 257, 1000, 2064, 5000):
        j = int(np.searchsorted(grid, tokens))
        if grid[j] != tokens:
            continue  # not a grid point (the geometric part): interpolated, not exact
        assert values[j] == pytest.approx(_tile_rows_by_brute_force(experts, top_k, tokens, probs), rel=1e-9)
    # one token: k experts, one 64-row tile each
    assert values[1] == pytest.approx(64.0 * top_k, rel=1e-12)


def test_rows_of_an_expert_fill_whole_tiles():
    # mixtral-8x7b (2 of 8): 256 tokens send ~64 +- 7 rows to each expert; half of them spill into a
    # second 64-row tile, so the tiles hold ~1.5 x 8 x 64 rows, against the 512 rows routed. From 516
    # tokens (516 x 2 >= 129 x 8) the 128-row tiles: 1,024 tokens' 256 +- 12 rows an expert fill 2
    # or 3 of them
    m = _step("mixtral-8x7b")
    assert 1.4 * 512 < m.expert_tile_rows(256.0) < 1.6 * 512
    assert m.expert_tile_rows(515.0) < m.expert_tile_rows(516.0)  # the switch to the large tiles
    assert 2.0 * 8 * 128 < m.expert_tile_rows(1024.0) < 3.0 * 8 * 128
    # past the table's last point every token adds k rows
    assert m.expert_tile_rows(20000.0) - m.expert_tile_rows(10000.0) == pytest.approx(2 * 10000.0)


def test_tiled_experts_cost_the_larger_of_their_bytes_and_their_tiles_beside_the_dense_matmuls():
    from roofline.step import decode_work, pnorm

    # by tiles alone (the shipped calibration less its grouped-mm table: a card with tile rates and no
    # table; with the table the tiles price experts of 128 rows and more: tests/test_grouped_mm.py)
    cal = load_calibration(GRAPH).model_copy(update={"expert_gemm_table": None})
    assert cal.expert_small_tile_efficiency and cal.expert_large_tile_efficiency
    spec = load_model("mixtral-8x7b")
    m = StepModel(spec, load_card("h200"), cal)
    h, inter = spec.hidden_size, spec.moe_intermediate_size
    # 14,336 and 4,096 columns are whole tiles: a row of tiles is the expert's own FLOPs, every layer
    row_flop = spec.moe_layers * 2.0 * 3 * h * inter
    for batch in (1.0, 64.0, 384.0, 768.0):
        parts = m.pass_parts(decode_work(batch, batch * 1000.0))
        rate = (cal.expert_small_tile_efficiency if batch * 2 < 129 * 8 else cal.expert_large_tile_efficiency) \
            * m.peak_flop_per_s
        assert parts.expert_compute_s == pytest.approx(m.expert_tile_rows(batch) * row_flop / rate, rel=1e-12)
        assert parts.expert_memory_s == pytest.approx(
            spec.moe_layers * m.expert_bytes * m.experts_touched(batch) * cal.expert_traffic_factor
            / (cal.bandwidth_efficiency * m.bandwidth_bytes_per_s), rel=1e-12)
        p = cal.roofline_exponent
        want = pnorm(parts.overhead_s, pnorm(parts.matmul_memory_s, parts.matmul_compute_s, p)
                     + max(parts.expert_memory_s, parts.expert_compute_s)
                     + pnorm(parts.attention_memory_s, parts.attention_compute_s, p)
                     + parts.elementwise_s + parts.collectives_s, cal.overhead_exponent)
        assert m.pass_s(decode_work(batch, batch * 1000.0)) == pytest.approx(want, rel=1e-12)
    # one token: its two experts' bytes outweigh two 64-row tiles; 384 sequences (96 rows an expert,
    # two tiles each) are compute-bound
    one, many = m.pass_parts(decode_work(1.0, 1000.0)), m.pass_parts(decode_work(384.0, 384000.0))
    assert one.expert_memory_s > one.expert_compute_s and many.expert_compute_s > many.expert_memory_s


def test_a_calibration_has_both_tile_rates_or_neither():
    from roofline.calibration import Calibration

    cal = load_calibration(GRAPH).model_dump()
    with pytest.raises(ValueError, match="go together"):
        Calibration(**{**cal, "expert_large_tile_efficiency": None})
    without = Calibration(**{**cal, "expert_small_tile_efficiency": None, "expert_large_tile_efficiency": None})
    assert StepModel(load_model("mixtral-8x7b"), load_card("h200"), without).pass_parts(
        (64.0, 64000.0, 0.0, 0.0, 0.0, None, None)).expert_compute_s == 0.0  # the experts join the dense matmuls


def test_the_tile_fit_recovers_known_rates_from_a_synthetic_probe(tmp_path):
    # points priced by max(tile FLOPs / R, bytes / BW) + f at R = 300 / 600 TFLOP/s, BW 3 TB/s, f 25 us:
    # the fit returns those rates (as fractions of the peak it is given)
    import json

    from roofline.probes import moe_tile_efficiencies
    from roofline.step import tile_rows_table

    experts, k, hidden, inter = 128, 8, 2048, 768
    grid, rows = tile_rows_table(experts, k, 0.0)
    points = []
    for tokens in (1, 4, 16, 64, 256, 1024, 2048, 4096, 8192):
        small = tokens * k < 129 * experts
        tiles = float(np.interp(tokens, grid, rows))
        flop = tiles * 2.0 * 3 * hidden * inter
        touched = experts * (1 - (1 - k / experts) ** tokens)
        s = max(flop / ((300e12 if small else 600e12)), touched * 3 * hidden * inter * 2 / 3e12) + 25e-6
        for stage, share in (("gemm_gate_up", 0.6), ("gemm_down", 0.4)):
            points.append({"model": "m", "experts": experts, "top_k": k, "hidden": hidden, "moe_inter": inter,
                           "tokens": tokens, "rows": tokens * k, "stage": stage, "seconds": s * share,
                           "experts_touched": touched})
    probe = tmp_path / "moe.json"
    probe.write_text(json.dumps({"points": points}))
    small, large, report = moe_tile_efficiencies(probe, ["m"], 1e15)
    assert (small, large) == pytest.approx((0.3, 0.6), rel=1e-3)
    assert report["bandwidth_bytes_per_s"] == pytest.approx(3e12, rel=1e-3) and report["mape_fraction"] < 1e-4
