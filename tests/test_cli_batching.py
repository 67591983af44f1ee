"""`roofline waste`, `simulate` and `choose` as a user sees them: text, JSON, CSV, exit codes."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

import roofline
from cli import main

LESSON = ("--card", "rtx3060", "--model", "qwen2.5-1.5b")


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_waste_table_gives_the_lesson_figures():
    r = run("waste", "--mix", "8x32,8x256")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "--mix 8x32,8x256: 16 requests in 1 static batch of 16 (prompt 128)"
    assert lines[3].split() == ["tokens", "needed", "2,304"]
    assert lines[4].split()[-1] == "4,096"
    assert lines[6].split() == ["waste", "43.75%"]


def test_waste_json_self_check_question():
    r = run("waste", "--mix", "30x20,2x1000", "--batch", "32", "--format", "json")
    data = json.loads(r.output)
    assert (data["tokens_needed"], data["slots_used"], data["waste_fraction"]) == (2600, 32000, 0.91875)


def test_waste_with_card_reports_the_slowdown_in_every_format():
    j = json.loads(run("waste", "--mix", "8x32,8x256", *LESSON, "--format", "json").output)
    # lesson section 5: 7.0x measured; acceptance 5.5x-8.5x
    assert 5.5 <= j["short_request_slowdown"] <= 8.5 and j["return_policy"] == "whole-batch"
    assert j == json.loads(json.dumps(roofline.waste(mix="8x32,8x256", card="rtx3060", model="qwen2.5-1.5b")))
    rows = list(csv.DictReader(io.StringIO(run("waste", "--mix", "8x32,8x256", *LESSON, "--format", "csv").output)))
    assert [r["class"] for r in rows] == ["8x32", "8x256"]
    assert float(rows[0]["slowdown"]) == pytest.approx(j["short_request_slowdown"])
    assert float(rows[0]["e2e_in_batch_s"]) > float(rows[0]["e2e_alone_s"])
    table = run("waste", "--mix", "8x32,8x256", *LESSON, "--return-policy", "early-return").output
    assert "return policy early-return: the shortest requests are 1." in table
    # the old flag name still works
    assert run("waste", "--mix", "8x32,8x256", *LESSON, "--policy", "early-return").output == table


def test_waste_lengths_file(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps({"prompt_tokens": 128, "gen_tokens": g}) + "\n" for g in [32, 256] * 8))
    j = json.loads(run("waste", "--requests", str(f), "--format", "json").output)
    assert run("waste", "--lengths", str(f), "--format", "json").output == run("waste", "--requests", str(f), "--format", "json").output
    assert j["waste_fraction"] == 0.4375
    t = json.loads(run("waste", "--requests", str(f), *LESSON, "--format", "json").output)
    assert 0 < t["e2e_p50_s"] <= t["e2e_p90_s"] <= t["e2e_p99_s"]


def test_simulate_reports_both_policies():
    args = ("simulate", "--mix", "8x32,8x256", "--count", "400", *LESSON, "--batch", "16", "--arrival-rate", "6", "--seed", "3")
    r = run(*args, "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    for name in ("static", "continuous"):
        for key in ("throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s",
                    "mean_occupancy", "waste_fraction", "idle_slot_steps"):
            assert key in data[name]
    assert data["continuous"]["throughput_tok_s"] > data["static"]["throughput_tok_s"]
    assert run(*args, "--format", "json").output == r.output  # same seed, same answer
    assert run(*args[:-1], "4", "--format", "json").output != r.output
    rows = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv").output)))
    assert [x["server"] for x in rows] == ["static", "continuous"]
    assert float(rows[0]["waste_fraction"]) == pytest.approx(data["static"]["waste_fraction"])
    table = run(*args).output
    assert "throughput (tok/s)" in table and "mean slot occupancy" in table


def test_simulate_requests_file(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("prompt_tokens,gen_tokens,arrival_s\n" + "".join(f"{64 + i},{[8, 200][i % 2]},{i * 0.1}\n" for i in range(40)))
    data = json.loads(run("simulate", "--requests", str(f), *LESSON, "--batch", "8", "--format", "json").output)
    assert data["meta"]["arrivals"] == "from the file" and data["static"]["requests"] == 40
    assert data["continuous"]["idle_slot_steps"] <= data["static"]["idle_slot_steps"]


def test_choose_lesson():
    data = json.loads(run("choose", *LESSON, "--ttft-max", "0.5", "--format", "json").output)
    assert 24 <= data["batch"] <= 40 and data["binding"] == "ttft" and data["throughput_tok_s"] > 1000
    table = run("choose", *LESSON, "--ttft-max", "0.5").output
    assert f"batch {data['batch'] + 1} would break ttft" in table


@pytest.mark.parametrize("cmd", ["waste", "simulate", "choose"])
def test_help_has_one_example(cmd):
    out = run(cmd, "--help").output
    assert out.count("Example:") == 1 and f"roofline {cmd} " in out


def one_line_error(r, *needles):
    assert r.exit_code == 1, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert "Traceback" not in r.output
    for n in needles:
        assert n in r.output, r.output


@pytest.mark.parametrize("mix,needle", [("8x", "'8x'"), ("0x32", "count must be at least 1"), ("8x-5", "'8x-5'"), ("8xabc", "whole numbers")])
def test_bad_mix_exit_1(mix, needle):
    one_line_error(run("waste", "--mix", mix), needle)
    one_line_error(run("simulate", "--mix", mix, *LESSON, "--batch", "4"), needle)


@pytest.mark.parametrize(
    "name,text,needle",
    [
        ("neg.csv", "prompt_tokens,gen_tokens\n128,32\n128,-4\n", "line 3: gen_tokens must be at least 1, not -4"),
        ("word.csv", "prompt_tokens,gen_tokens\nlots,32\n", "line 2: prompt_tokens must be a whole number, not 'lots'"),
        ("col.csv", "prompt_tokens,arrival_s\n128,0\n", "line 2: missing gen_tokens"),
        ("empty.csv", "", "no requests (the file is empty)"),
        ("bad.jsonl", '{"prompt_tokens": 1, "gen_tokens": 2}\n{oops}\n', "line 2: not valid JSON"),
    ],
)
def test_bad_request_files_exit_1(tmp_path, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    one_line_error(run("waste", "--requests", str(f)), name, needle)
    one_line_error(run("simulate", "--requests", str(f), *LESSON, "--batch", "4"), name, needle)


def test_other_domain_errors_exit_1():
    one_line_error(run("waste", "--mix", "8x32", "--card", "rtx3060"), "both --card and --model")
    one_line_error(run("waste", "--mix", "8x32", "--batch", "0"), "--batch")
    one_line_error(run("waste"), "either a mix")
    one_line_error(run("simulate", *LESSON, "--batch", "4"), "--requests")
    one_line_error(run("simulate", "--mix", "8x32", *LESSON, "--batch", "4", "--arrival-rate", "-1"), "--arrival-rate")
    one_line_error(run("choose", *LESSON, "--ttft-max", "0.01"), "TTFT at batch 1 is already", "the limit of 0.01 s")
    one_line_error(run("waste", "--requests", "/nonexistent/r.csv"), "cannot read")
    one_line_error(run("simulate", "--mix", "8x32", *LESSON, "--batch", "4", "--arrival-rate", "1", "--seed", "-1"), "--seed")
    one_line_error(run("simulate", "--mix", "8x32", *LESSON, "--batch", "0"), "--batch")
