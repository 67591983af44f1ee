"""The CLI as a user sees it: exact text where it matters, exit codes, one-line errors."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

from cli import main, parse_batches
from roofline.errors import RooflineError


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_predict_table_shows_the_lesson_columns_and_ends_with_the_bend():
    r = run("predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b")
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    header = next(line for line in lines if line.startswith("batch"))
    for col in ("TTFT (s)", "TPOT (ms)", "throughput (tok/s)", "peak mem (GiB)", "intensity (FLOP/byte)", "bound"):
        assert col in header
    assert lines[-2].startswith("bend: intensity reaches the balance point (86.8 FLOP/byte) at batch 103")
    assert lines[-1].startswith("bound: what a step's time is mostly spent on")  # the legend
    assert "between batch 64 and 128" in lines[-2]
    batches = [int(line.split()[0]) for line in lines if line[:5].strip().isdigit()]
    assert batches == [1, 2, 4, 8, 16, 32, 64, 128]


def test_predict_json_and_csv_carry_base_units():
    j = json.loads(run("predict", "--card", "h200", "--model", "qwen2.5-7b", "--batches", "1,8", "--format", "json").output)
    row = j["rows"][1]
    for key in ("batch", "ttft_s", "tpot_s", "per_user_tok_s", "throughput_tok_s", "peak_mem_gib",
                "intensity_flop_per_byte", "compute_ceiling_fraction", "bandwidth_ceiling_fraction", "bound"):
        assert key in row
    assert row["batch"] == 8 and 0 < row["tpot_s"] < 1
    c = run("predict", "--card", "h200", "--model", "qwen2.5-7b", "--batches", "1,8", "--format", "csv").output
    rows = list(csv.DictReader(io.StringIO(c)))
    assert [int(r["batch"]) for r in rows] == [1, 8]
    assert float(rows[1]["tpot_s"]) == pytest.approx(row["tpot_s"], rel=1e-9)


def test_uncalibrated_card_says_so():
    r = run("predict", "--card", "l4", "--model", "llama-3.2-1b", "--batches", "1", "--no-calibration")
    assert r.exit_code == 0
    assert "calibration: none -- predicting from the ceilings alone" in r.output


def test_a_card_without_calibration_says_which_engine_profile_it_transfers():
    # issue 10: no silent pure roofline; an L4 (a datacenter GPU) defaults to vLLM's profile
    r = run("predict", "--card", "l4", "--model", "llama-3.2-1b", "--batches", "1")
    assert r.exit_code == 0
    assert "calibration: l4/vllm -- transferred from the vllm engine profile" in r.output


def test_models_json_has_params_and_kv_keys():
    data = json.loads(run("models", "--format", "json").output)
    qwen = next(m for m in data if m["model"] == "qwen2.5-1.5b")
    assert qwen["params"] == 1_543_714_304
    assert qwen["kv_bytes_per_token"] == 28672


def test_cards_lists_the_rtx3060_balance_point():
    out = run("cards").output
    line = next(line for line in out.splitlines() if line.startswith("rtx3060"))
    assert "86.8" in line


@pytest.mark.parametrize(
    "args, message",
    [
        (["predict", "--card", "rtx306", "--model", "qwen2.5-1.5b"], "unknown card 'rtx306'; did you mean rtx3060"),
        (["predict", "--card", "rtx3060", "--model", "qwen-1.5b"], "unknown model 'qwen-1.5b'"),
        (["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--batches", "0,4"], "batch sizes must be at least 1"),
        (["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--batches", "4,x"], "bad batch list item 'x'"),
        (["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--prompt", "0"], "--prompt: must be at least 1"),
        (["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--gen", "-3"], "--gen: must be at least 1"),
        (["predict", "--card", "rtx3060", "--model", "/no/such/config.json"], "not found"),
        (["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--calibration", "/no/cal.json"], "cannot read calibration"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args, message):
    r = run(*args)
    assert r.exit_code == 1, r.output
    assert message in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output


def test_truncated_config_is_one_line(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "qwen2", "hidden_size": 15')
    r = run("predict", "--card", "rtx3060", "--model", str(cfg))
    assert r.exit_code == 1 and "not valid JSON" in r.output and len(r.output.strip().splitlines()) == 1


def test_usage_errors_exit_2():
    assert run("predict", "--card", "rtx3060").exit_code == 2
    assert run("predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--format", "xml").exit_code == 2
    assert run("predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--kv-dtype", "fp7").exit_code == 2


def test_every_command_help_has_an_example():
    for name, cmd in main.commands.items():
        r = run(name, "--help")
        assert r.exit_code == 0
        assert "Example: roofline " + name in r.output, name


def test_parse_batches_forms():
    assert parse_batches("1..16") == [1, 2, 4, 8, 16]
    assert parse_batches("3-5,1") == [1, 3, 4, 5]
    with pytest.raises(RooflineError):
        parse_batches("8..2")
