"""The decode attention's cost per KV byte and per score element, fitted on the attention probes'
large shapes (roofline.probes.attention_stream_terms): recovery of known terms from synthetic
probe files, refusal of files that cannot split the two, the fit option, and that the shipped
H200 calibration holds what the shipped probes give."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import main
from roofline.calibration import load_calibration
from roofline.errors import RooflineError
from roofline.fitting import _probe_attention_s, _probe_models
from roofline.hardware import load_card
from roofline.probes import AttentionPoint, attention_stream_terms

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
M = "hardware_profiles/measurements"
PROBES = [f"{M}/h200-probe-attention{kind}.json" for kind in ("", "-groups", "-widths", "-batches", "-contexts")]

# (query heads, KV heads, head width): one to 64 query heads a KV head, heads of 64 and 128, as the
# groups probe measures them
SHAPES = [(16, 16, 128), (16, 8, 128), (32, 2, 128), (32, 1, 128), (24, 24, 64), (24, 3, 64), (64, 1, 64)]


def _probe_file(tmp_path, cal, card, kv, score, fixed_s, shapes=SHAPES, batches=(16, 64, 256),
                contexts=(512, 2048, 8192), name="probe.json"):
    """An attention probe file whose times are ``cal``'s price with the given KV factor and score
    bytes, plus a fixed time (the launch); small batches and contexts are included (and doubled,
    so a fit that read them would miss) to show the reader leaves them out."""
    truth = cal.model_copy(update={"kv_traffic_factor": kv, "attention_score_bytes": score})
    points = [AttentionPoint(f"g{q // k}-{d}", q, k, d, b, c, 0.0)
              for q, k, d in shapes for b in batches for c in contexts]
    seconds = fixed_s + _probe_attention_s(card, truth, _probe_models(card, points), points)
    rows = [{"shape": p.shape, "q_heads": p.q_heads, "kv_heads": p.kv_heads, "head_dim": p.head_dim,
             "batch": p.batch, "context_tokens": p.context_tokens, "op": "graph_attention",
             "s": float(s) * (1.0 if p.batch >= 64 and p.context_tokens >= 1024 else 2.0)}
            for p, s in zip(points, seconds)]
    path = tmp_path / name
    path.write_text(json.dumps({"probe": "attention", "points": rows}))
    return path


def test_known_terms_are_recovered_from_a_probe_file(tmp_path):
    card = load_card("h200")
    cal = load_calibration(SHIPPED).model_copy(update={"attention_kernel_table": None}).model_copy(update={"attention_context_factors": None})
    path = _probe_file(tmp_path, cal, card, kv=0.85, score=30.0, fixed_s=4e-6)
    # started elsewhere: the calibration's own terms are only the fit's start
    start = cal.model_copy(update={"kv_traffic_factor": 1.2, "attention_score_bytes": 5.0})
    terms = attention_stream_terms([path], start, card)
    assert terms["kv_traffic_factor"] == pytest.approx(0.85, rel=0.02)
    assert terms["attention_score_bytes"] == pytest.approx(30.0, rel=0.03)


def test_a_probe_that_cannot_split_the_kv_from_the_scores_is_refused(tmp_path):
    card = load_card("h200")
    cal = load_calibration(SHIPPED).model_copy(update={"attention_kernel_table": None})
    # one ratio of query heads to KV heads: KV bytes and score elements move in fixed proportion
    one_ratio = _probe_file(tmp_path, cal, card, 0.9, 25.0, 4e-6, shapes=[(32, 8, 128), (16, 4, 128)])
    with pytest.raises(RooflineError, match="two ratios"):
        attention_stream_terms([one_ratio], cal, card)
    # only small shapes: nothing of 64+ sequences over 1,024+ positions
    small = _probe_file(tmp_path, cal, card, 0.9, 25.0, 4e-6, batches=(1, 16), contexts=(512,), name="small.json")
    with pytest.raises(RooflineError, match="0 points"):
        attention_stream_terms([small], cal, card)


def test_the_fit_option_refuses_a_bad_probe_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"probe": "attention", "points": [{"op": "graph_attention", "s": 1e-5}]}))
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(main, ["fit", f"{M}/h200-graph.csv", "--card", "h200", "--model", "qwen2.5-1.5b",
                                  "--attention-stream-probe", str(bad), "-o", str(out)])
    assert r.exit_code == 1
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    assert "lacks shape" in r.output
    assert not out.exists()


def test_the_shipped_calibration_holds_what_the_shipped_probes_give():
    """benchmarks/make_calibrations.py fits the H200 graph calibration with the five attention probes
    held: read against the shipped terms, the probes give back the shipped KV factor, score bytes and
    row factors (the fit's last round; within 1%, the rounds' settling). The rounds read the probes
    against the dense fit, before the attention-contexts windows are read from the contexts probe:
    so does this."""
    cal = load_calibration(SHIPPED).model_copy(update={"attention_kernel_table": None}).model_copy(update={"attention_context_factors": None})
    terms = attention_stream_terms(PROBES, cal, load_card("h200"))
    assert terms["kv_traffic_factor"] == pytest.approx(cal.kv_traffic_factor, rel=0.01)
    assert terms["attention_score_bytes"] == pytest.approx(cal.attention_score_bytes, rel=0.01)
    assert [a for a, _ in terms["attention_score_row_factors"]] == [a for a, _ in cal.attention_score_row_factors]
    for (_, f), (_, g) in zip(terms["attention_score_row_factors"], cal.attention_score_row_factors):
        assert f == pytest.approx(g, rel=0.01)
    # the softmax's register kernel dearer than the warp's, the shared-memory one cheaper than either
    (_, register), (_, shared) = cal.attention_score_row_factors
    assert register > 1.1 and shared < register * 0.8
    # the KV is read a little under once (the engine's cache rounding and the bandwidth efficiency
    # fitted on whole steps) and a score element costs tens of bytes (written and re-read in fp32
    # by the matmul-softmax-matmul path): physical ranges, not the fit's bounds
    assert 0.7 < cal.kv_traffic_factor < 1.1 and 8.0 < cal.attention_score_bytes < 60.0


def test_the_rows_score_factors_are_recovered_and_priced(tmp_path):
    """Scores of rows past 2,048 and 9,216 positions (the softmax's register and shared-memory kernels)
    at their factors: the probe fit recovers them beside the two costs, and the step model prices a
    decode step's scores by the regime its cache length is in."""
    from roofline.model_spec import load_model
    from roofline.probes import SOFTMAX_ROW_REGIMES
    from roofline.step import StepModel, decode_work

    card = load_card("h200")
    cal = load_calibration(SHIPPED).model_copy(update={"attention_kernel_table": None}).model_copy(update={"attention_context_factors": None,
                                                       "attention_score_row_factors": None,
                                                       "attention_ramp_s": 0.0})  # the scores' price alone
    truth = cal.model_copy(update={"attention_score_row_factors": [(2048.0, 1.5), (9216.0, 0.6)]})
    assert SOFTMAX_ROW_REGIMES == (2048, 9216)
    path = _probe_file(tmp_path, truth, card, kv=0.9, score=20.0, fixed_s=4e-6,
                       contexts=(1024, 1536, 2048, 4096, 8192, 16384, 32768))
    terms = attention_stream_terms([path], cal, card)
    (a1, f1), (a2, f2) = terms["attention_score_row_factors"]
    assert (a1, a2) == (2048.0, 9216.0)
    assert f1 == pytest.approx(1.5, rel=0.03) and f2 == pytest.approx(0.6, rel=0.03)
    assert terms["attention_score_bytes"] == pytest.approx(20.0, rel=0.03)
    # without points past 9,216 positions only the first regime's factor is fitted
    short = _probe_file(tmp_path, truth, card, 0.9, 20.0, 4e-6, contexts=(1024, 2048, 4096, 8192), name="short.json")
    assert [a for a, _ in attention_stream_terms([short], cal, card)["attention_score_row_factors"]] == [2048.0]

    spec = load_model("qwen2.5-3b")  # 16 query heads on 2: the scores weigh
    plain, stepped = StepModel(spec, card, cal), StepModel(spec, card, truth)

    def score_change(context):  # the attention's change over the plain model's score traffic
        work = decode_work(64.0, 64.0 * context)
        score_s = 64.0 * context * spec.num_hidden_layers * spec.num_attention_heads * cal.attention_score_bytes / (
            cal.bandwidth_efficiency * plain.bandwidth_bytes_per_s)
        return (stepped.pass_parts(work).attention_memory_s - plain.pass_parts(work).attention_memory_s) / score_s

    assert score_change(2048) == pytest.approx(0.0, abs=1e-9)
    assert score_change(2056) == pytest.approx(0.5, rel=0.01)
    assert score_change(9216) == pytest.approx(0.5, rel=0.01)
    assert score_change(9224) == pytest.approx(-0.4, rel=0.01)
    assert score_change(16416) == pytest.approx(-0.4, rel=0.01)
