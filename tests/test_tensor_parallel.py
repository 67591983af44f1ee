"""Tensor parallelism in the step model (issue 12): per-GPU memory, speed-up, the all-reduces by hand."""

import pytest

import roofline
from roofline.calibration import load_calibration
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.step import StepModel, decode_work

GRAPH = "hardware_profiles/calibrations/h200-graph.json"


def _rows(tp, batches=(1,)):
    return roofline.predict("h200", "llama-3.1-70b", list(batches), engine="graph", calibration=GRAPH, tp=tp).rows()


def test_tp2_halves_the_70b_per_gpu_memory_and_speeds_up_batch_1_by_less_than_2():
    (one,), (two,) = _rows(1), _rows(2)
    # weights and KV heads (8 of them) split in two; the workspace is per GPU, not split
    assert 0.48 < two["peak_mem_bytes"] / one["peak_mem_bytes"] < 0.52
    speedup = one["tpot_s"] / two["tpot_s"]
    assert 1.0 < speedup < 2.0  # the all-reduces and the per-layer launches are not split


def test_the_all_reduces_of_a_step_derived_by_hand():
    """llama-3.1-70b, TP2, a decode step of 32 sequences: 2 all-reduces a layer plus the
    embedding's (2 x 80 + 1 = 161) of 32 x hidden 8192 bf16 values, each ring all-reduce moving
    2 (n-1)/n of its bytes over the link; the 32 logit rows (vocab 128256, bf16) all-gathered, moving
    (n-1)/n of them. Latency and bandwidth: the calibration's (measured on the H200 pair)."""
    cal = load_calibration(GRAPH)
    m = StepModel(load_model("llama-3.1-70b"), load_card("h200"), cal, tp=2)
    batch = 32.0
    reduce_bytes = 161 * batch * 8192 * 2 * (2 * (2 - 1) / 2)
    gather_bytes = batch * 128256 * 2 * ((2 - 1) / 2)
    by_hand = (161 * cal.allreduce_latency_s + cal.allgather_latency_s
               + (reduce_bytes + gather_bytes) / cal.allreduce_bandwidth_bytes_per_s)
    got = m.pass_parts(decode_work(batch, batch * 256.0)).collectives_s
    assert got == pytest.approx(by_hand, rel=1e-12)
    # the measured link: ~15 us a call, ~229 GB/s (hardware_profiles/measurements/h200-collectives-tp2.json)
    assert 10e-6 < cal.allreduce_latency_s < 25e-6 and 150e9 < cal.allreduce_bandwidth_bytes_per_s < 400e9
    assert StepModel(load_model("llama-3.1-70b"), load_card("h200"), cal).pass_parts(
        decode_work(batch, batch * 256.0)).collectives_s == 0.0


def test_without_a_calibrated_link_the_card_profile_prices_it():
    """The pure roofline on the H200: the card's measured all-reduce latency and NVLink bandwidth."""
    card = load_card("h200")
    m = StepModel(load_model("llama-3.1-70b"), card, roofline.calibration.Calibration.uncalibrated("h200"), tp=2)
    assert m.link_latency_s == pytest.approx(card.interconnect.allreduce_latency_s)
    assert m.link_bytes_per_s == pytest.approx(card.tp_link_bytes_per_s(2))


def test_more_gpus_than_kv_heads_replicate_the_kv():
    # llama-3.1-70b has 8 KV heads: at TP 16 each GPU still holds one whole head
    spec = load_model("llama-3.1-70b")
    cal = load_calibration(GRAPH)
    kv8 = StepModel(spec, load_card("h200"), cal, tp=8).kv_bytes_per_token
    kv16 = StepModel(spec, load_card("h200"), cal, tp=16).kv_bytes_per_token
    assert kv16 == pytest.approx(kv8) == pytest.approx(spec.kv_bytes_per_token("bf16") / 8)


def test_choose_picks_the_degree_with_the_fewest_gpu_seconds_per_token():
    result = roofline.choose("h200", "llama-3.1-70b", tpot_max_s=0.03, engine="graph", calibration=GRAPH,
                             tp=[1, 2, 4, 8])
    data = result.as_dict()
    per_token = {o["tp"]: o["gpu_s_per_token"] for o in data["tp_options"]}
    assert data["tp"] == min(per_token, key=per_token.get)
    for o in data["tp_options"]:
        assert o["gpu_s_per_token"] == pytest.approx(o["tp"] / o["throughput_tok_s"])
    assert "1" in data["tp_infeasible"]  # on one H200 a 70B step already takes ~41 ms at batch 1
