"""The decode attention's fill-and-drain time beyond its price (Calibration.attention_ramp_s,
attention_ramp_knee_s; roofline.probes.attention_ramp_terms): its recovery from a synthetic probe
file, the step model's formula (decode attention only, every attention layer), the refusal of a probe that
cannot fix it, and that the shipped H200 calibration holds what the shipped probes give."""

from __future__ import annotations

import json

import pytest

from roofline.calibration import load_calibration
from roofline.errors import RooflineError
from roofline.fitting import _probe_attention_s, _probe_models
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.probes import AttentionPoint, attention_ramp_terms
from roofline.step import StepModel, decode_work, prefill_work

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
M = "hardware_profiles/measurements"
PROBES = [f"{M}/h200-probe-attention{kind}.json" for kind in ("", "-groups", "-widths", "-batches", "-contexts")]
SHAPES = [(32, 8, 128), (32, 32, 64), (16, 2, 128), (64, 1, 64)]


def _plain(cal):
    return cal.model_copy(update={"attention_context_factors": None, "attention_ramp_s": 0.0,
                                  "attention_kernel_table": None})


def _probe_file(tmp_path, truth, card, fixed_s, batches=(1, 4, 16, 64, 256), contexts=(512, 2048, 8192),
                shapes=SHAPES, name="probe.json"):
    points = [AttentionPoint(f"g{q // k}-{d}", q, k, d, b, c, 0.0)
              for q, k, d in shapes for b in batches for c in contexts]
    seconds = fixed_s + _probe_attention_s(card, truth, _probe_models(card, points), points)
    rows = [{"shape": p.shape, "q_heads": p.q_heads, "kv_heads": p.kv_heads, "head_dim": p.head_dim,
             "batch": p.batch, "context_tokens": p.context_tokens, "op": "graph_attention", "s": float(s)}
            for p, s in zip(points, seconds)]
    path = tmp_path / name
    path.write_text(json.dumps({"probe": "attention", "points": rows}))
    return path


def test_a_known_ramp_is_recovered_from_a_probe_file(tmp_path):
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    truth = cal.model_copy(update={"attention_ramp_s": 8e-6, "attention_ramp_knee_s": 15e-6})
    path = _probe_file(tmp_path, truth, card, fixed_s=9e-6)
    terms = attention_ramp_terms([path], cal, card)  # started without a ramp
    assert terms["attention_ramp_s"] == pytest.approx(8e-6, rel=0.03)
    assert terms["attention_ramp_knee_s"] == pytest.approx(15e-6, rel=0.05)
    # a probe without one gives (nearly) none: the fixed time is not taken for a ramp
    flat = _probe_file(tmp_path, cal, card, fixed_s=9e-6, name="flat.json")
    assert attention_ramp_terms([flat], cal, card)["attention_ramp_s"] < 2e-7


def test_the_step_model_adds_the_ramp_to_the_decode_attention_only():
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    ramp, knee = 10e-6, 20e-6
    ramped = cal.model_copy(update={"attention_ramp_s": ramp, "attention_ramp_knee_s": knee})
    spec = load_model("qwen2.5-3b")
    plain, stepped = StepModel(spec, card, cal), StepModel(spec, card, ramped)
    for batch, context in ((1.0, 256.0), (16.0, 2048.0), (256.0, 8192.0)):
        work = decode_work(batch, batch * context)
        before = plain.pass_parts(work).attention_memory_s
        x = before / spec.num_hidden_layers  # the priced attention a layer (no prompt pairs in a decode step)
        added = stepped.pass_parts(work).attention_memory_s - before
        assert added == pytest.approx(spec.num_hidden_layers * ramp * x / (x + knee), rel=1e-9)
        assert 0.0 < added < spec.num_hidden_layers * ramp
    # a prefill has no decode attention: no ramp
    work = prefill_work(512.0, 512.0 * 513.0 / 2.0, 1.0)
    assert stepped.pass_parts(work).attention_memory_s == pytest.approx(plain.pass_parts(work).attention_memory_s)
    # MLA's absorbed decode (scores over the latent, softmax, probabilities x latent) gets it too, on
    # every layer, from its own priced attention
    mla = load_model("deepseek-v2-lite")
    work = decode_work(16.0, 16.0 * 2048.0)
    before = StepModel(mla, card, cal).pass_parts(work).attention_memory_s
    x = before / mla.num_hidden_layers
    assert StepModel(mla, card, ramped).pass_parts(work).attention_memory_s - before == pytest.approx(
        mla.num_hidden_layers * ramp * x / (x + knee), rel=1e-9)


def test_a_probe_too_small_to_fix_the_ramp_is_refused(tmp_path):
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    few = _probe_file(tmp_path, cal, card, 9e-6, batches=(1, 16), contexts=(512,), shapes=SHAPES[:2])
    with pytest.raises(RooflineError, match="8 sizes"):
        attention_ramp_terms([few], cal, card)


def test_the_shipped_calibration_holds_what_the_shipped_probes_give():
    """benchmarks/make_calibrations.py fits the ramp on the five attention probes in the rounds that
    hold the stream terms: read against the shipped terms (before the contexts windows, as the rounds
    read them), the probes give back the shipped ramp (within 1%, the rounds' settling), and its height
    is a few microseconds a layer, below the ~9 us the probes run beyond their price at their smallest
    shapes and above nothing: a physical range, not the fit's bounds."""
    shipped = load_calibration(SHIPPED)
    terms = attention_ramp_terms(PROBES, shipped.model_copy(update={"attention_context_factors": None}),
                                 load_card("h200"))
    assert terms["attention_ramp_s"] == pytest.approx(shipped.attention_ramp_s, rel=0.01)
    # the knee within 4%: the kernel table's rounds refit the lane term after the ramp is held (with
    # the table read from one batched matrix, the seventeenth session's, the knee read against the
    # final terms is 3% under the held one; the height within 1% still)
    assert terms["attention_ramp_knee_s"] == pytest.approx(shipped.attention_ramp_knee_s, rel=0.04)
    assert 2e-6 < shipped.attention_ramp_s < 20e-6 and 1e-6 < shipped.attention_ramp_knee_s < 200e-6
