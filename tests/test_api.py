"""The Python API and the CLI give the same numbers (the CLI calls the API; this holds it)."""

import json

import pytest
from click.testing import CliRunner

import roofline
from cli import main

CARD_MODEL = ["--card", "h200", "--model", "qwen2.5-7b"]


def cli_json(*args):
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def plain(x):
    return json.loads(json.dumps(x, default=float))


def test_predict_rows_agree():
    api = roofline.predict("h200", "qwen2.5-7b", [1, 7, 300], 512, 64, kv_dtype="fp8", engine="graph")
    cli = cli_json("predict", *CARD_MODEL, "--batches", "1,7,300", "--prompt", "512", "--gen", "64",
                   "--kv-dtype", "fp8", "--engine", "graph")
    assert cli["rows"] == plain(api.rows())
    assert cli["meta"] == plain(api.meta())


def test_predict_rows_are_plain_records():
    rows = roofline.predict("rtx3060", "qwen2.5-1.5b", [1, 2]).rows()
    assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
    assert all(type(v) in (int, float, bool, str) for r in rows for v in r.values())


def test_bend_agrees():
    assert cli_json("bend", *CARD_MODEL, "--engine", "graph") == roofline.bend("h200", "qwen2.5-7b", engine="graph").as_dict()


def test_choose_agrees():
    api = roofline.choose("h200", "qwen2.5-7b", ttft_max_s=1.0, tpot_max_s=0.02, engine="graph").as_dict()
    cli = cli_json("choose", *CARD_MODEL, "--ttft-max", "1.0", "--tpot-max", "0.02", "--engine", "graph")
    assert cli["batch"] == api["batch"]
    assert cli["throughput_tok_s"] == pytest.approx(api["throughput_tok_s"], rel=1e-12)


def test_simulate_agrees():
    api = roofline.simulate("rtx3060", "qwen2.5-1.5b", 8, mix="4x16,4x64", count=40, arrival_rate=3.0, seed=2)
    cli = cli_json("simulate", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--batch", "8", "--mix", "4x16,4x64",
                   "--count", "40", "--arrival-rate", "3", "--seed", "2")
    for policy in ("static", "continuous"):
        assert cli[policy] == plain(api[policy])


def test_figure_holds_the_predictions():
    prediction = roofline.predict("rtx3060", "qwen2.5-1.5b", [1, 8, 64])
    fig = prediction.figure()
    ys = [list(t.y) for t in fig.data]
    assert [pytest.approx(v) for v in prediction.columns["throughput_tok_s"]] in ys
