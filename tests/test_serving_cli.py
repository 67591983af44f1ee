"""`roofline simulate`'s continuous server and `roofline choose-server` as a user sees them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import roofline
from roofline.hardware import profiles_dir
from cli import main
from roofline.serving_replay import shipped_folder

LESSON = ("--card", "rtx3060", "--model", "qwen2.5-1.5b")
RUN = "qwen2.5-1.5b-mixed-r80-n400-s1"
REPLAY = ("simulate", "--requests", str(shipped_folder() / f"stream-{RUN}.csv"), "--card", "h200", "--model",
          "qwen2.5-1.5b", "--engine", "graph", "--batch", "64", "--schedule", "prefill-first", "--max-model-len", "1280",
          "--kv-capacity-tokens", "12000", "--pass-cost", "serving-loop")


def run(*args):
    return CliRunner().invoke(main, list(args))


def one_line_error(r, *needles):
    assert r.exit_code in (1, 2), r.output  # 2: a usage error (a value click's type refused)
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert "Traceback" not in r.output
    for n in needles:
        assert n in r.output, r.output


def test_simulate_json_carries_the_servers_fields():
    r = run("simulate", "--mix", "16x64,16x512", "--count", "200", "--prompt", "512", *LESSON, "--batch", "64",
            "--kv-capacity-tokens", "8000", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    co = data["continuous"]
    assert co["kv_capacity_tokens"] == 8000 and co["preemptions"] > 0 and 0 < co["max_running"] <= 15
    assert co["tpot_p50_s"] <= co["tpot_p90_s"] <= co["tpot_p99_s"]
    assert data["static"]["tpot_p50_s"] > 0  # the static server's TPOT too
    server = data["meta"]["server"]
    assert server == {**server, "schedule": "decode-first", "kv_capacity_tokens": 8000, "num_blocks": 500,
                      "kv_pool_source": "kv_capacity_tokens", "pass_cost": "fused", "max_num_seqs": 64}
    # the table says the same
    table = run("simulate", "--mix", "16x64,16x512", "--count", "200", "--prompt", "512", *LESSON, "--batch", "64",
                "--kv-capacity-tokens", "8000").output
    assert "continuous server: decode-first, KV pool 8,000 tokens" in table
    row = next(line for line in table.splitlines() if line.startswith("max running / preemptions"))
    assert row.split()[-3:] == [str(co["max_running"]), "/", f"{co['preemptions']:,}"]
    rows = list(csv.DictReader(io.StringIO(run("simulate", "--mix", "16x64,16x512", "--count", "200", "--prompt", "512",
                                               *LESSON, "--batch", "64", "--kv-capacity-tokens", "8000",
                                               "--format", "csv").output)))
    assert int(rows[1]["preemptions"]) == co["preemptions"] and rows[0]["preemptions"] == ""


def test_simulate_memory_pool_and_slo():
    data = json.loads(run("simulate", "--mix", "8x32,8x256", "--count", "400", *LESSON, "--batch", "16",
                          "--arrival-rate", "3", "--slo-ttft", "0.1", "--slo-tpot", "0.025", "--format", "json").output)
    co, server = data["continuous"], data["meta"]["server"]
    assert server["kv_pool_source"] == "gpu_memory_utilization"
    pool = server["kv_pool_bytes"]
    assert pool["memory_bytes"] == 12 * 2**30 and pool["gpu_memory_utilization"] == 0.9
    assert co["kv_capacity_tokens"] == server["kv_capacity_tokens"] > 200_000
    assert 0 < co["slo_attainment"] <= 1 and co["goodput_req_s"] <= 400 / co["makespan_s"]
    assert co["slo_ttft_s"] == 0.1 and co["slo_tpot_s"] == 0.025
    # static batching makes newcomers wait for a batch: far fewer requests meet a 0.1 s TTFT
    assert data["static"]["slo_attainment"] < co["slo_attainment"]
    table = run("simulate", "--mix", "8x32,8x256", "--count", "400", *LESSON, "--batch", "16", "--arrival-rate", "3",
                "--slo-ttft", "0.1", "--slo-tpot", "0.025").output
    assert "SLO: TTFT <= 0.1 s and TPOT <= 25 ms per request" in table and "goodput (req/s)" in table


def test_replaying_a_real_run_from_the_command_line():
    data = json.loads(run(*REPLAY, "--format", "json").output)
    co = data["continuous"]
    measured = json.loads((shipped_folder() / f"run-{RUN}.json").read_text())["summary"]
    # held out (docs/serving.md): within issue 14's bounds
    assert co["throughput_tok_s"] == pytest.approx(measured["throughput_tok_s"], rel=0.05)
    assert co["tpot_p50_s"] == pytest.approx(measured["tpot_p50_s"], rel=0.10)
    assert co["ttft_p99_s"] == pytest.approx(measured["ttft_p99_s"], rel=0.20)
    assert co["preemptions"] > 0 and co["max_running"] == measured["max_running"] == 38
    assert data["meta"]["server"]["loop_terms"]["fitted_on"] == ["qwen2.5-1.5b-mixed-r40-n400-s1",
                                                                 "qwen2.5-7b-mixed-r25-n300-s1"]
    assert data["meta"]["server"]["max_num_batched_tokens"] == 2048  # vLLM V0's default, max(1280, 2048)


@pytest.mark.parametrize("args,needles", [
    (("--batch", "16", "--max-num-batched-tokens", "8"), ("--max-num-batched-tokens", "at least the running-sequence")),
    (("--batch", "16", "--gpu-memory-utilization", "1.5"), ("--gpu-memory-utilization", "at most 1")),
    (("--batch", "16", "--pass-cost", "serving-loop"), ("--loop-terms", "no serving-loop terms for rtx3060")),
    (("--batch", "16", "--loop-terms", "x.json"), ("--loop-terms", "goes with pass_cost serving-loop")),
    (("--batch", "16", "--block-size", "0"), ("--block-size", "at least 1")),
    (("--batch", "16", "--slo-ttft", "-1"), ("--slo-ttft",)),
])
def test_simulate_server_errors_are_one_line(args, needles):
    one_line_error(run("simulate", "--mix", "8x32", *LESSON, *args), *needles)


def test_absurd_counts_name_the_flag_and_the_limit(tmp_path):
    one_line_error(run("simulate", "--mix", "8x32", "--count", "20000000", *LESSON, "--batch", "4"),
                   "--count: must be at most 10,000,000")
    one_line_error(run("simulate", "--mix", "1x20000000", *LESSON, "--batch", "4"),
                   "--mix: item 1 '1x20000000': at most 10,000,000 generated tokens a request")
    # 200,000 x 2,000 tokens / 4 running = 100 million decode steps
    one_line_error(run("simulate", "--mix", "1x2000", "--count", "200000", *LESSON, "--batch", "4"),
                   "--count: about 100,000,000 decode steps", "at most 50,000,000")
    big = tmp_path / "big.csv"
    big.write_text("prompt_tokens,gen_tokens\n" + "1,1\n" * 10_000_002)
    one_line_error(run("simulate", "--requests", str(big), *LESSON, "--batch", "4"), "--requests", "more than 10,000,000")


def test_a_stream_nothing_of_which_can_be_served_says_why():
    one_line_error(run("simulate", "--mix", "8x32", "--prompt", "3000", *LESSON, "--batch", "4", "--max-model-len", "1000"),
                   "--max-model-len: every request is rejected: the shortest needs 3,031 tokens")
    one_line_error(run("simulate", "--mix", "8x32", "--prompt", "3000", *LESSON, "--batch", "4",
                       "--kv-capacity-tokens", "2000"), "--kv-capacity-tokens", "the pool holds 2,000")


def test_a_model_too_big_for_the_card_says_so():
    one_line_error(run("simulate", "--mix", "8x32", "--card", "rtx3060", "--model", "qwen2.5-14b", "--batch", "4"),
                   "--gpu-memory-utilization", "no room for a KV cache")


# ---- choose-server ---------------------------------------------------------------------------
CHOOSE = ("choose-server", "--card", "h200", "--model", "qwen2.5-1.5b", "--engine", "graph", "--mix", "4x64,1x512",
          "--count", "400")


def test_choose_server_table_json_and_chart(tmp_path):
    chart = tmp_path / "rates.html"
    r = run(*CHOOSE, "--slo-ttft", "0.2", "--slo-tpot", "0.02", "--batch", "32,128", "--chart", str(chart))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].endswith("the highest arrival rate with TTFT p99 <= 0.2 s and TPOT p99 <= 20 ms")
    assert any(line.startswith("best: h200 tp 1 max_num_seqs ") for line in lines)
    data = json.loads(run(*CHOOSE, "--slo-ttft", "0.2", "--slo-tpot", "0.02", "--batch", "32,128",
                          "--format", "json").output)
    best = data["best"]
    assert best["at_best"]["ttft_p99_s"] <= 0.2 and best["at_best"]["tpot_p99_s"] <= 0.02
    assert best["best_rate_req_s"] <= best["capacity_req_s"]
    # the next rate swept breaks what binding names
    above = [p for p in best["points"] if p["rate_req_s"] > best["best_rate_req_s"]]
    assert above and not above[0]["meets"] and best["binding"] == ",".join(above[0]["broken"])
    # more running sequences serve more (the pool is far from binding on the H200)
    by_batch = {c["max_num_seqs"]: c for c in data["candidates"]}
    assert by_batch[128]["capacity_req_s"] > by_batch[32]["capacity_req_s"]
    html = chart.read_text()
    # opens offline: every script inline (plotly.js's only URL, a topojson default for maps, is never fetched)
    assert "Plotly.newPlot" in html and "<script src" not in html and 'src="http' not in html
    assert len(html) > 1_000_000  # plotly.js itself is in the page


def test_choose_server_tighter_slo_lower_rate():
    # an SLO of 1 s binds nothing (the best rate is the capacity's); one below the TTFT p99 the
    # capacity-bound rate reaches binds, and lowers the rate; one looser than it does not
    loose = json.loads(run(*CHOOSE, "--slo-ttft", "1.0", "--format", "json").output)["best"]
    at_capacity = loose["at_best"]["ttft_p99_s"]
    rates = {}
    for ttft in (1.0, 2.0 * at_capacity, 0.8 * at_capacity):
        data = json.loads(run(*CHOOSE, "--slo-ttft", str(ttft), "--format", "json").output)
        rates[ttft] = data["best"]["best_rate_req_s"] if data["best"] else 0.0
    assert rates[1.0] == rates[2.0 * at_capacity] > rates[0.8 * at_capacity]


def test_choose_server_given_rates():
    data = json.loads(run(*CHOOSE, "--slo-tpot", "1s", "--rates", "1,2,4", "--format", "json").output)
    best = data["best"]
    assert [p["rate_req_s"] for p in best["points"]] == [1.0, 2.0, 4.0]
    assert best["best_rate_req_s"] == 4.0 and best["binding"] == "rates"


def test_choose_server_matches_the_api():
    data = json.loads(run(*CHOOSE, "--slo-ttft", "0.2", "--tp", "1,2", "--format", "json").output)
    api = roofline.api.choose_server("h200", "qwen2.5-1.5b", engine="graph", mix="4x64,1x512", count=400, slo_ttft_s=0.2,
                                     tp=[1, 2]).as_dict()
    assert json.loads(json.dumps(api)) == data
    # a 1.5B model gains nothing from a second GPU (56 all-reduces a step): the best is tp 1, per GPU
    tps = {c["tp"]: c for c in data["candidates"]}
    assert tps[2]["best_rate_req_s_per_gpu"] == pytest.approx(tps[2]["best_rate_req_s"] / 2)
    assert tps[2]["best_rate_req_s_per_gpu"] < tps[1]["best_rate_req_s_per_gpu"] and data["best"]["tp"] == 1


def test_choose_server_pass_time_spread():
    # a slower GPU sustains less, a faster one more; the answer as priced is unchanged by asking
    plain = json.loads(run(*CHOOSE, "--slo-ttft", "0.2", "--format", "json").output)
    data = json.loads(run(*CHOOSE, "--slo-ttft", "0.2", "--pass-time-spread", "0.05", "--format", "json").output)
    assert data["best"] == plain["best"]
    spread = data["meta"]["pass_time_spread"]
    assert spread["fraction"] == 0.05 and spread["candidate"] == "h200 tp 1 max_num_seqs 64"
    r = data["best"]["best_rate_req_s"]
    assert spread["best_rate_req_s_slower"] < r < spread["best_rate_req_s_faster"]
    # it is the answer of a choice priced that much slower (--pass-time-scale)
    slower = json.loads(run(*CHOOSE, "--slo-ttft", "0.2", "--pass-time-scale", "1.05", "--format", "json").output)
    assert spread["best_rate_req_s_slower"] == pytest.approx(slower["best"]["best_rate_req_s"])
    table = run(*CHOOSE, "--slo-ttft", "0.2", "--pass-time-spread", "0.05").output
    assert f"every pass's GPU time 5% slower: {spread['best_rate_req_s_slower']:.3g} req/s (" in table
    one_line_error(run(*CHOOSE, "--slo-ttft", "0.2", "--pass-time-spread", "0.9"), "--pass-time-spread")
    # the spread sweeps the automatic grid: not with given rates
    one_line_error(run(*CHOOSE, "--slo-ttft", "0.2", "--rates", "1,2", "--pass-time-spread", "0.05"),
                   "--pass-time-spread", "not with given rates")
    # a scale the spread pushes out of bounds names the spread, before any sweep
    one_line_error(run(*CHOOSE, "--slo-ttft", "0.2", "--pass-time-scale", "10", "--pass-time-spread", "0.05"),
                   "--pass-time-spread", "10.5")
    # the spread's two sweeps count against the work bound: 3 x 80,000 requests is over 200,000
    one_line_error(run(*CHOOSE[:-2], "--count", "80000", "--slo-ttft", "0.2", "--pass-time-spread", "0.05"),
                   "--count", "240,000")


def test_choose_server_pass_time_spread_where_ttft_binds():
    # benchmarks/choose_server_check.py's ttft case on the H100 (docs/data/cpu/call137-picks/picks-ttft-h100-sxm.txt:
    # 28.61 req/s, 96% of capacity, TTFT binding; 27.79 and 29.49 with every pass 3% slower and faster)
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    data = run("choose-server", "--card", "h100-sxm", "--model", "llama-3.1-8b", "--engine", "graph", "--batch", "64",
               "--requests", str(check.LENGTHS), "--seed", "851", "--slo-ttft", "200ms", "--slo-tpot", "40ms",
               "--schedule", "prefill-first", "--max-model-len", "1280", "--pass-cost", "serving-loop",
               "--pass-time-spread", "0.03", "--format", "json")
    assert data.exit_code == 0, data.output
    data = json.loads(data.output)
    assert data["best"]["binding"] == "ttft" and data["best"]["best_rate_req_s"] == pytest.approx(28.61, abs=0.05)
    spread = data["meta"]["pass_time_spread"]
    assert spread["best_rate_req_s_slower"] == pytest.approx(27.79, abs=0.05)
    assert spread["best_rate_req_s_faster"] == pytest.approx(29.49, abs=0.05)
    assert spread["binding_slower"] == spread["binding_faster"] == "ttft"
    # where the real loop crossed the SLO (device call 137: 28.39 req/s) lies inside the band
    assert spread["best_rate_req_s_slower"] < 28.39 < spread["best_rate_req_s_faster"]


def test_choose_server_view_when_a_spread_sweep_meets_nothing():
    from roofline.batching_views import choose_server_view

    choice = roofline.api.choose_server("h200", "qwen2.5-1.5b", engine="graph", mix="4x64,1x512", count=400,
                                        slo_ttft_s=0.2)
    r = choice.best.best_rate_req_s
    # as if the slower sweep met no rate and the faster one 10% more
    choice.meta["pass_time_spread"] = {"fraction": 0.005, "best_rate_req_s_slower": None,
                                       "best_rate_req_s_faster": 1.1 * r}
    out = choose_server_view(choice, "table").splitlines()[-1]
    assert out.startswith(f"every pass's GPU time 0.5% slower: none meets the SLOs; 0.5% faster: {1.1 * r:.3g} "
                          "req/s (+10.0%)")


def test_choose_server_errors():
    one_line_error(run(*CHOOSE), "--slo-ttft", "give at least one SLO")
    one_line_error(run(*CHOOSE, "--slo-ttft", "0.2", "--count", "300000"), "--count", "at most 200,000")
    one_line_error(run(*CHOOSE, "--slo-ttft", "0.2", "--rates", "a,b"), "--rates")


@pytest.mark.parametrize("cmd", ["simulate", "choose-server"])
def test_help_has_one_example(cmd):
    out = run(cmd, "--help").output
    assert out.count("Example:") == 1 and f"roofline {cmd} " in out


def test_serve_on_the_cpu_records_which_prefill_ran(tmp_path, monkeypatch):
    """`roofline serve` end to end on the CPU with a tiny model: the run's files, its config saying
    the prefill ran eagerly (no CUDA graphs on a CPU), and --eager-prefill reaching the executor."""
    from calibrate import serving_loop

    asked = []
    init = serving_loop.ModelExecutor.__init__

    def spy(self, *a, **kw):
        asked.append(kw.get("prefill_graphs"))
        init(self, *a, **kw)

    monkeypatch.setattr(serving_loop.ModelExecutor, "__init__", spy)
    stream = tmp_path / "s.csv"
    stream.write_text("prompt_tokens,gen_tokens,arrival_s\n12,4,0\n7,3,0.001\n20,2,0.002\n", encoding="utf-8")
    for flag in ([], ["--eager-prefill"]):
        out = tmp_path / ("eager" if flag else "auto")
        res = run("serve", "--card", "cpu", "--model", "tiny-qwen2", "--requests", str(stream), "--device", "cpu",
                  "--max-num-seqs", "2", "--out", str(out), *flag)
        assert res.exit_code == 0, res.output
        (run_json,) = out.glob("run-*.json")
        data = json.loads(run_json.read_text())
        assert data["config"]["prefill_graphs"] is False and data["config"]["prefill_token_buckets"] == []
        assert data["summary"]["finished"] == 3
        # the run's device probe and the command that compares it, as the JSON has them
        probe = data["config"]["device_probe"]["decode_device_s"]
        assert f"1: {probe['1'] * 1e3:.3g} / " in res.output and f"2: {probe['2'] * 1e3:.3g} / " in res.output
        assert res.output.rstrip().endswith(f"next: roofline compare-serving {out}")
    assert asked == [None, False]  # auto (graphs where CUDA and varlen allow), then eager as asked


def test_calibrate_serving_with_a_config_path_writes_flat_files_that_replay_without_the_path(tmp_path):
    """`roofline calibrate --serving` (issue 14's spelling) is `roofline serve`. A model given as a
    config.json path names the run after its folder -- no folders made of the path's parts --
    and the run records the config, so compare-serving replays it after the file is gone."""
    import shutil

    folder = tmp_path / "my model"
    folder.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "tiny_configs" / "tiny-qwen3" / "config.json", folder / "config.json")
    stream = tmp_path / "s.csv"
    stream.write_text("prompt_tokens,gen_tokens,arrival_s\n12,4,0\n7,3,0.001\n", encoding="utf-8")
    out = tmp_path / "out"
    res = run("calibrate", "--serving", "--card", "h200", "--model", str(folder / "config.json"), "--requests",
              str(stream), "--device", "cpu", "--max-num-seqs", "2", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["iterations-my-model-s.csv", "requests-my-model-s.csv",
                                                     "run-my-model-s.json", "stream-my-model-s.csv"]
    shutil.rmtree(folder)
    res = run("compare-serving", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.output)["runs"]
    assert row["run"] == "my-model-s" and row["ttft_p50_s"]["simulated"] > 0
    res = run("calibrate", "--card", "h200", "--model", "tiny-qwen2", "--out", str(out), "--requests", "x.csv")
    assert res.exit_code == 2 and "No such option '--requests'" in res.output  # without --serving: calibrate's
    import cli  # the command called without the group (no reroute) says what to run, measures nothing

    res = CliRunner().invoke(cli.calibrate, ["--card", "h200", "--model", "tiny-qwen2", "--out", str(tmp_path / "c"),
                                             "--device", "cpu", "--serving"])
    assert res.exit_code == 1 and "roofline serve" in res.output and not (tmp_path / "c").exists()


@pytest.mark.parametrize("args, needles", [
    (["--max-num-seqs", "0"], ["max_num_seqs must be a whole number of at least 1, not 0"]),
    (["--block-size", "0"], ["block_size must be a whole number of at least 1"]),
    (["--max-num-batched-tokens", "0"], ["max_num_batched_tokens must be"]),
    (["--gpu-memory-utilization", "2"], ["gpu_memory_utilization must be a fraction in (0, 1], not 2.0"]),
    (["--arrival-rate", "-1"], ["arrival_rate must be a positive number"]),
    (["--arrival-rate", "nan"], ["arrival_rate must be a positive number, not nan"]),
    (["--budget-s", "-5"], ["budget_s must be a positive number"]),
    (["--model", "tiny-mixtral"], ["serving loop runs dense decoders only", "mixture of experts"]),
    (["--max-model-len", "100000000"], ["does not fit", "--max-model-len"]),
])
def test_serve_refuses_bad_options_in_one_line_before_building_anything(args, needles, tmp_path):
    """Each was a traceback (IndexError, ZeroDivisionError, numpy's ValueError) or, for the
    memory share and the budget, accepted."""
    stream = tmp_path / "s.csv"
    stream.write_text("prompt_tokens,gen_tokens,arrival_s\n30,5,0\n", encoding="utf-8")
    base = ["serve", "--card", "h200", "--model", "tiny-qwen2", "--requests", str(stream), "--device", "cpu",
            "--out", str(tmp_path / "out")]
    one_line_error(run(*base, *args), *needles)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_run_file_names_take_a_label_not_a_path():
    from roofline.atomic import model_file_label, safe_name

    assert model_file_label("qwen2.5-1.5b") == "qwen2.5-1.5b"  # a dot inside a name is no suffix
    assert model_file_label("Qwen/Qwen2.5-1.5B") == "Qwen2.5-1.5B"
    assert model_file_label("/models/Llama 3/config.json") == "Llama-3"
    assert model_file_label("configs/mine.JSON") == "mine"
    assert model_file_label("/models/qwen2.5-7b-variant") == "qwen2.5-7b-variant"
    assert model_file_label("C:\\models\\m1\\config.json") == "m1"
    assert safe_name("a/b c\nd") == "a-b-c-d" and safe_name("../") == "run"


def test_compare_serving_sets_the_simulator_beside_each_run():
    """roofline compare-serving on two committed runs: the same figures as the replay the docs'
    table is written from (compare_rows), in a table, JSON and CSV; the bounds' tally."""
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import compare_rows

    names = ["qwen2.5-3b-mixed-r30-n300-s17", "qwen2.5-7b-mixed-r25-n300-s1"]
    earlier = shipped_folder().parent / "h200-graph"  # calls 5-7: before the loop measured its host
    args = ["compare-serving", str(earlier), "--run", names[0], "--run", names[1]]
    res = run(*args, "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    want = compare_rows(earlier, load_loop_terms(card="h200", engine="graph"), names=names, fitted=())
    assert [r["run"] for r in data["runs"]] == names
    for got, ref in zip(data["runs"], want):
        assert got["ttft_p50_s"]["simulated"] == pytest.approx(ref["ttft_p50_s"]["simulated"], rel=1e-12)
        assert got["fitted"] is False  # the fit's run of that stream is the shipped folder's, not this one
    # the 7B mixed@25 run of call 5: TTFT p99 32% fast, outside the 20% bound (docs/serving.md)
    assert data["runs"][1]["ttft_p99_s"]["within"] is False
    assert "TTFT p99 (20%): 1 of 2 runs within" in "\n".join(data["summary"])
    assert any("no host probe" in n and names[1] in n for n in data["notes"])
    table = run(*args)
    miss = f"({100 * data['runs'][1]['ttft_p99_s']['error']:+.1f}%) x"  # the JSON's miss, as the table writes it
    assert -0.5 < data["runs"][1]["ttft_p99_s"]["error"] < -0.2  # the tail this earlier run is known for (-42%)
    assert table.exit_code == 0 and miss in table.output and "preemption behaviour" in table.output
    csv_out = run(*args, "--format", "csv")
    assert csv_out.exit_code == 0
    assert list(csv.DictReader(io.StringIO(csv_out.output)))[0]["run"] == names[0]


def test_compare_serving_says_which_loop_a_run_was(tmp_path):
    # an eager-prefill run against the graph loop's terms carries a note; bad input is one line
    res = run("compare-serving", str(shipped_folder().parent / "h200-graph-eager-call4"), "--run",
              "qwen2.5-7b-mixed-r15-n200-s9")
    assert res.exit_code == 0, res.output
    assert "note: qwen2.5-7b-mixed-r15-n200-s9: its prefill ran eagerly" in res.output
    chunked = run("compare-serving", str(shipped_folder().parent / "h200-graph-call11"), "--run",
                  "qwen2.5-1.5b-mixed-r30-n300-s59")
    assert chunked.exit_code == 0, chunked.output
    assert "note: qwen2.5-1.5b-mixed-r30-n300-s59: policy chunked on a loop without chunk graphs: it ran chunks eagerly" \
        in chunked.output
    for args, needle in ((["compare-serving", str(tmp_path)], "no complete serving run"),
                         (["compare-serving", str(tmp_path / "nope")], "not a folder of serving runs"),
                         (["compare-serving", str(shipped_folder()), "--run", "x"], "--run:")):
        bad = run(*args)
        assert bad.exit_code != 0 and needle in bad.output and "Traceback" not in bad.output
        assert len(bad.output.strip().splitlines()) == 1


def test_compare_serving_reports_how_fast_the_gpu_ran_each_runs_passes():
    """The GPU / price column: each run's median decode device time over its price, read off its
    iteration log (roofline.serving_replay.pass_ratios). Golden values from the committed call-17
    runs (benchmarks/serving_tail_sensitivity.py prints them): llama-3.2-3b's decode at 1.016x its
    price, qwen2.5-0.5b's at 0.982x; a chunked run has no prefill-only figure."""
    folder = shipped_folder().parent / "h200-graph-call17"
    names = ["llama-3.2-3b-mixed-r32-n300-s92", "qwen2.5-0.5b-mixed-r55-n400-s93", "qwen2.5-3b-mixed-r30-n300-s95"]
    args = ["compare-serving", str(folder), *(x for n in names for x in ("--run", n))]
    res = run(*args, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = {r["run"]: r for r in json.loads(res.output)["runs"]}
    assert rows[names[0]]["decode_device_ratio"] == pytest.approx(1.016, abs=0.003)
    assert rows[names[1]]["decode_device_ratio"] == pytest.approx(0.982, abs=0.003)
    assert 0.95 < rows[names[0]]["prefill_device_ratio"] < 1.0  # llama-3.2-3b's prefill graphs priced ~2% slow
    assert rows[names[2]]["prefill_device_ratio"] is None  # chunked
    table = run(*args)
    assert table.exit_code == 0 and "GPU / price" in table.output
    assert f"{rows[names[0]]['decode_device_ratio']:.3f} / {rows[names[0]]['prefill_device_ratio']:.3f}" in table.output
    assert f"{rows[names[2]]['decode_device_ratio']:.3f} / -" in table.output
    flat = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv").output)))
    assert float(flat[1]["decode_device_ratio"]) == pytest.approx(rows[names[1]]["decode_device_ratio"])


def test_pass_time_scale_slows_both_servers_by_exactly_that_factor():
    """--pass-time-scale multiplies every pass's GPU time: with every request queued at t=0 and fused
    passes (no host time) the static and the continuous makespans grow by exactly the factor, and the
    server line says so."""
    base = ("simulate", *LESSON, "--mix", "4x64,1x512", "--count", "120", "--batch", "16", "--format", "json")
    plain = json.loads(run(*base).output)
    slower = json.loads(run(*base, "--pass-time-scale", "1.1").output)
    for server in ("static", "continuous"):
        assert slower[server]["makespan_s"] == pytest.approx(1.1 * plain[server]["makespan_s"], rel=1e-9)
    assert slower["meta"]["server"]["pass_time_scale"] == 1.1 and "pass_time_scale" not in plain["meta"]["server"]
    assert "fused passes at 1.1x their GPU time" in run(*base[:-2], "--pass-time-scale", "1.1").output


def test_pass_time_scale_on_the_serving_loop_leaves_the_host_alone():
    """On the serving loop the factor scales the passes' device time, not the host's: a decode step at
    bucket 16 costs 1.05 x its device price + the same host time."""
    from roofline.pass_costs import LoopCost, load_loop_terms
    from roofline.scenario import make_scenario

    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    terms = load_loop_terms(card="h200", engine="graph")
    plain = LoopCost(step, terms, 1280, 64, 2048)
    slow = LoopCost(step, terms, 1280, 64, 2048, decode_scale=1.05, prefill_scale=1.05)
    assert slow.decode_device_s[16] == pytest.approx(1.05 * plain.decode_device_s[16], rel=1e-12)
    host = plain.decode_s(16, 16, 0.0) - plain.decode_device_s[16]
    assert host > 0 and slow.decode_s(16, 16, 0.0) - slow.decode_device_s[16] == pytest.approx(host, rel=1e-12)
    assert slow.prefill_device_s(300.0, 300.0 * 301 / 2, 1.0) == pytest.approx(
        1.05 * plain.prefill_device_s(300.0, 300.0 * 301 / 2, 1.0), rel=1e-12)
    pf = plain.pass_s(16, 16, 0.0, 300.0, 300.0 * 301 / 2, 1.0)
    sl = slow.pass_s(16, 16, 0.0, 300.0, 300.0 * 301 / 2, 1.0)
    device = plain.prefill_device_s(300.0, 300.0 * 301 / 2, 1.0) + plain.decode_device_s[16]
    assert sl - pf == pytest.approx(0.05 * device, rel=1e-9)


@pytest.mark.parametrize("value, needle", [("0", "factor"), ("nan", "factor"), ("11", "at most 10"),
                                           ("0.05", "at least 0.1")])
def test_pass_time_scale_errors_are_one_line(value, needle):
    one_line_error(run("simulate", *LESSON, "--mix", "4x64", "--batch", "4", "--pass-time-scale", value),
                   "--pass-time-scale", needle)
    one_line_error(run("choose-server", *LESSON, "--mix", "4x64", "--count", "50", "--slo-ttft", "1",
                       "--pass-time-scale", value), "--pass-time-scale", needle)


def test_pass_time_spread_reports_the_continuous_servers_range():
    """--pass-time-spread 0.03 serves the stream twice more with the GPU times 3% faster and slower:
    with every request at t=0 and fused passes the throughput's range is exactly nominal / 1.03 ..
    nominal / 0.97; every range holds the nominal value; the table says it in one line."""
    base = ("simulate", *LESSON, "--mix", "4x64,1x512", "--count", "120", "--batch", "16")
    plain = json.loads(run(*base, "--format", "json").output)["continuous"]
    res = run(*base, "--pass-time-spread", "0.03", "--format", "json")
    assert res.exit_code == 0, res.output
    spread = json.loads(res.output)["continuous"]["pass_time_spread"]
    assert spread["pass_time_scales"] == pytest.approx([0.97, 1.03])
    assert spread["throughput_tok_s"] == pytest.approx([plain["throughput_tok_s"] / 1.03,
                                                        plain["throughput_tok_s"] / 0.97], rel=1e-9)
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s", "preemptions"):
        assert spread[key][0] <= plain[key] <= spread[key][1], key
    assert spread["ttft_p99_s"][0] < spread["ttft_p99_s"][1]
    table = run(*base, "--pass-time-spread", "0.03")
    assert table.exit_code == 0 and "every pass's GPU time -3% .. +3%: TTFT p99" in table.output
    assert "pass_time_spread" not in plain


@pytest.mark.parametrize("value, needle", [("0", "fraction"), ("0.6", "at most 0.5"), ("nan", "fraction")])
def test_pass_time_spread_errors_are_one_line(value, needle):
    one_line_error(run("simulate", *LESSON, "--mix", "4x64", "--batch", "4", "--pass-time-spread", value),
                   "--pass-time-spread", needle)


def test_compare_serving_pass_time_spread_sets_each_runs_range_beside_it():
    """compare-serving --pass-time-spread 0.03: each run replayed 3% faster and slower too; its
    TTFT p99 range holds the nominal replay, 'inside' says whether the measurement lies in it. Call
    85's llama-3.2-1b stream (docs/serving.md): measured 78.8 ms, simulated 55.2 ms, its range
    ending near 70 ms -- outside by ~12%, beyond any small change to the prices."""
    folder = shipped_folder().parent / "h200-graph-call85"
    names = ["llama-3.2-1b-mixed-r65-n400-s302", "qwen2.5-3b-mixed-r36-n300-s303"]
    args = ["compare-serving", str(folder), *(x for n in names for x in ("--run", n)), "--pass-time-spread", "0.03"]
    res = run(*args, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = {r["run"]: r for r in json.loads(res.output)["runs"]}
    for r in rows.values():
        lo, hi = r["pass_time_spread"]["ttft_p99_s"]
        assert lo <= r["ttft_p99_s"]["simulated"] <= hi and lo < hi
        assert r["pass_time_spread"]["ttft_p99_s_measured_inside"] == (lo <= r["ttft_p99_s"]["measured"] <= hi)
        assert r["pass_time_spread"]["pass_time_scales"] == pytest.approx([0.97, 1.03])
    one = rows[names[0]]
    assert one["pass_time_spread"]["ttft_p99_s_measured_inside"] is False
    assert one["ttft_p99_s"]["measured"] > 1.05 * one["pass_time_spread"]["ttft_p99_s"][1]
    table = run(*args)
    assert table.exit_code == 0
    assert "TTFT p99 simulated with every pass's GPU time -3% .. +3%:" in table.output
    assert f"{names[0]}: " in table.output and "(outside)" in table.output
    flat = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv").output)))
    assert float(flat[0]["ttft_p99_s_spread_high"]) == pytest.approx(one["pass_time_spread"]["ttft_p99_s"][1])
    plain = json.loads(run("compare-serving", str(folder), "--run", names[0], "--format", "json").output)
    assert "pass_time_spread" not in plain["runs"][0]
    one_line_error(run("compare-serving", str(folder), "--run", names[0], "--pass-time-spread", "0"),
                   "--pass-time-spread")


def _with_device_probe(tmp_path, folder, name, before: float, after: float | None):
    """A copy of committed run ``name`` in ``tmp_path``, its config given a device probe at
    ``before`` (and ``after``) x the price of every decode bucket, as calibrate/serving_loop.py's
    device_probe writes one. Returns its folder."""
    import shutil

    from roofline.pass_costs import LoopCost, load_loop_terms
    from roofline.serving_replay import _step
    from roofline.serving_runs import read_run, run_paths

    for path in folder.glob(f"*{name}*"):
        shutil.copy(path, tmp_path / path.name)
    run_json = run_paths(tmp_path, name)["run"]
    data = json.loads(run_json.read_text())
    c = data["config"]
    cost = LoopCost(_step(read_run(folder, name), "h200", "graph"), load_loop_terms(card="h200", engine="graph"),
                    c["max_model_len"], c["max_num_seqs"], c["max_num_batched_tokens"])
    for key, factor in (("device_probe", before), ("device_probe_after", after)):
        if factor is not None:
            c[key] = {"decode_device_s": {str(b): factor * p for b, p in cost.decode_price_s.items()},
                      "repeats": 24, "positions": "slot i of a bucket of b at (i + 1) x max_model_len // (b + 1)"}
    run_json.write_text(json.dumps(data))
    return tmp_path


def test_compare_serving_at_probed_speed_replays_each_run_at_its_device_probe(tmp_path):
    """A run carrying a device probe (taken before and after its clock; their geometric mean per
    bucket, roofline.pass_costs.run_device_probe): the (probe) ratio is the probe over the price,
    and --at-probed-speed replays the run with its decode steps at that speed -- exactly the replay
    with every decode step's device time x that factor (LoopCost's decode_scale), the host and the
    prefills as priced. Call 85's llama-3.2-1b stream ran its decode at 1.046x price
    (docs/serving.md); the probe here says 1.046 (1.046 x 1.01 before, 1.046 / 1.01 after)."""
    from roofline import api
    from roofline.pass_costs import LoopCost, load_loop_terms, run_host_probe, scaled_for_host
    from roofline.serving import serve_continuous
    from roofline.servers import ServerOptions, build
    from roofline.serving_runs import read_run, run_paths

    name = "llama-3.2-1b-mixed-r65-n400-s302"
    folder = _with_device_probe(tmp_path, shipped_folder().parent / "h200-graph-call85", name, 1.046 * 1.01,
                                1.046 / 1.01)
    base = ["compare-serving", str(folder)]
    plain = json.loads(run(*base, "--format", "json").output)["runs"][0]
    probed = json.loads(run(*base, "--at-probed-speed", "--format", "json").output)
    row = probed["runs"][0]
    assert plain["decode_probe_ratio"] == pytest.approx(1.046, rel=1e-9) and plain["at_probed_speed"] is False
    assert row["at_probed_speed"] is True and probed["at_probed_speed"] is True

    # the same replay by hand: every decode bucket's device time x 1.046
    r = read_run(folder, name)
    c = r.config
    terms = scaled_for_host(load_loop_terms(card="h200", engine="graph"), run_host_probe(c))
    stream = api.request_stream(run_paths(folder, name)["stream"])
    sc = api._scenario("h200", c["model"], None, {"engine": "graph", "calibration": "auto"})
    options = ServerOptions("prefill-first", c["max_num_batched_tokens"], c["max_model_len"],
                            c["num_blocks"] * c["block_size"], block_size=c["block_size"], pass_cost="serving-loop",
                            loop_terms=terms)
    server = build(sc.step, options, c["max_num_seqs"], stream.prompt_tokens, stream.gen_tokens, sc.engine)
    cost = LoopCost(sc.step, terms, c["max_model_len"], c["max_num_seqs"], c["max_num_batched_tokens"],
                    decode_scale=1.046)
    served = serve_continuous(sc.step, stream.prompt_tokens, stream.gen_tokens, stream.arrival_s, c["max_num_seqs"],
                              pool=server.pool, max_model_len=c["max_model_len"],
                              max_num_batched_tokens=c["max_num_batched_tokens"], schedule=server.config.schedule,
                              cost=cost).summary()
    for key in ("ttft_p50_s", "ttft_p99_s", "throughput_tok_s", "tpot_p99_s"):
        assert row[key]["simulated"] == pytest.approx(served[key], rel=1e-9), key
    assert row["ttft_p99_s"]["simulated"] > plain["ttft_p99_s"]["simulated"]  # slower decode, longer tail
    table = run(*base, "--at-probed-speed")
    assert table.exit_code == 0
    assert "GPU / price: decode (probe) / prefill" in table.output and "(1.046)" in table.output
    assert "simulated at each run's probed decode speed (1 of 1 carry a device probe)" in table.output
    flat = list(csv.DictReader(io.StringIO(run(*base, "--at-probed-speed", "--format", "csv").output)))
    assert float(flat[0]["decode_probe_ratio"]) == pytest.approx(1.046) and flat[0]["at_probed_speed"] == "True"


def test_at_probed_speed_on_runs_without_a_probe_replays_them_as_priced():
    # every committed run predates the probe: each one replays as without the flag, with a note
    folder = shipped_folder().parent / "h200-graph-call17"
    name = "qwen2.5-0.5b-mixed-r55-n400-s93"
    plain = json.loads(run("compare-serving", str(folder), "--run", name, "--format", "json").output)
    res = json.loads(run("compare-serving", str(folder), "--run", name, "--at-probed-speed", "--format",
                         "json").output)
    assert res["runs"][0]["ttft_p99_s"]["simulated"] == plain["runs"][0]["ttft_p99_s"]["simulated"]
    assert res["runs"][0]["at_probed_speed"] is False and res["runs"][0]["decode_probe_ratio"] is None
    assert any(name in n and "no device probe" in n for n in res["notes"])
    assert "(probe)" not in run("compare-serving", str(folder), "--run", name).output


def test_a_device_probe_far_from_the_price_is_not_replayed_at(tmp_path):
    # a probe 5x the price (a run on another GPU recorded under the H200's name): the column shows
    # it, the replay stays at the price, a note says why -- no error for the folder
    name = "llama-3.2-1b-mixed-r65-n400-s302"
    folder = _with_device_probe(tmp_path, shipped_folder().parent / "h200-graph-call85", name, 5.0, None)
    plain = json.loads(run("compare-serving", str(folder), "--format", "json").output)["runs"][0]
    res = run("compare-serving", str(folder), "--at-probed-speed", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["runs"][0]["decode_probe_ratio"] == pytest.approx(5.0) and data["runs"][0]["at_probed_speed"] is False
    assert data["runs"][0]["ttft_p99_s"]["simulated"] == plain["ttft_p99_s"]["simulated"]
    assert any("beyond 0.5-2x their price (bucket 1 at 5.00x" in n and "replayed at the priced speed" in n
               for n in data["notes"])


def test_only_the_buckets_a_run_used_decide_whether_its_probe_is_replayed_at(tmp_path):
    # call 85's llama-3.2-1b run used buckets up to 32 (at most 30 running) -- never 64: a probe that
    # reads 5x the price at bucket 64 alone does not stop the replay at the probed speed; at bucket
    # 16, which the run used, it does, and the note names the bucket
    from roofline.serving_replay import probed_speed

    name = "llama-3.2-1b-mixed-r65-n400-s302"
    folder = _with_device_probe(tmp_path, shipped_folder().parent / "h200-graph-call85", name, 1.03, None)
    run_json = folder / f"run-{name}.json"
    data = json.loads(run_json.read_text())
    times = data["config"]["device_probe"]["decode_device_s"]
    times["64"] *= 5.0
    run_json.write_text(json.dumps(data))
    row = json.loads(run("compare-serving", str(folder), "--at-probed-speed", "--format", "json").output)["runs"][0]
    assert row["at_probed_speed"] is True and row["decode_probe_ratio"] == pytest.approx(1.03)
    times["64"] /= 5.0
    times["16"] *= 5.0
    run_json.write_text(json.dumps(data))
    res = json.loads(run("compare-serving", str(folder), "--at-probed-speed", "--format", "json").output)
    assert res["runs"][0]["at_probed_speed"] is False
    assert any("bucket 16 at 5.15x" in n and "replayed at the priced speed" in n for n in res["notes"])
    assert probed_speed({"probe_by_bucket": {16: 1.0}, "decode_steps_by_bucket": {}})[1].startswith("no decode step")


def test_decode_time_scales_take_the_nearest_buckets_factor():
    """LoopCost's decode_bucket_scales: a bucket named takes its factor, another the nearest named
    bucket's in ratio (a tie: the smaller one); the prefill and the host are untouched."""
    from roofline.pass_costs import LoopCost, bucket_factor, load_loop_terms
    from roofline.scenario import make_scenario

    step = make_scenario(card="h200", model="qwen2.5-1.5b", engine="graph").step
    terms = load_loop_terms(card="h200", engine="graph")
    plain = LoopCost(step, terms, 1280, 64, 2048)
    scaled = LoopCost(step, terms, 1280, 64, 2048, decode_bucket_scales={8: 1.0, 32: 1.2})
    want = {1: 1.0, 4: 1.0, 8: 1.0, 16: 1.0, 24: 1.2, 32: 1.2, 64: 1.2}  # 16: 8 and 32 both 2x away -> 8
    for n, f in want.items():
        assert bucket_factor({8: 1.0, 32: 1.2}, n) == f
        assert scaled.decode_device_s[n] == pytest.approx(f * plain.decode_device_s[n], rel=1e-12), n
    assert scaled.decode_price_s == plain.decode_price_s
    assert scaled.prefill_device_s(300.0, 300.0 * 301 / 2, 1.0) == plain.prefill_device_s(300.0, 300.0 * 301 / 2, 1.0)


@pytest.mark.parametrize("scales, needle", [({16: 3.0}, "at most 2"), ({16: 0.2}, "outside 0.5-2"),
                                            ({1.5: 1.0}, "whole number"), ({}, "at least one"),
                                            ({16: float("nan")}, "factor"), ({16: 1.1, "16": 1.2}, "given twice"),
                                            ({0: 1.0}, "at least 1")])
def test_decode_time_scales_errors_name_the_field(scales, needle):
    from roofline.errors import RooflineError
    from roofline.servers import ServerOptions

    with pytest.raises(RooflineError, match=needle) as err:
        ServerOptions(pass_cost="serving-loop", decode_time_scales=scales)
    assert "decode_time_scales" in str(err.value)
    with pytest.raises(RooflineError, match="goes with pass_cost serving-loop"):
        ServerOptions(decode_time_scales={16: 1.0})


def test_compare_serving_pass_time_spread_tells_which_misses_a_few_percent_explains():
    """Every bounded figure gets its range and 'measured_inside'; the table tallies the bounds missed
    at the price and which of them lie inside the range. Call 92's qwen2.5-1.5b stream at 90 req/s
    (an H200 at its saturation; docs/serving.md, "Why the remaining tails miss"): TTFT p99 measured
    22.9 ms, simulated 61.2 (+167%); its range is ~33-86 ms at +-3% (the measurement outside) and
    reaches ~21 ms at +-5%."""
    folder = shipped_folder().parent / "h200-graph-call92"
    name = "qwen2.5-1.5b-mixed-r90-n400-s701"
    for spread, inside in (("0.03", False), ("0.05", True)):
        args = ["compare-serving", str(folder), "--run", name, "--pass-time-spread", spread]
        r = json.loads(run(*args, "--format", "json").output)["runs"][0]
        lo, hi = r["pass_time_spread"]["ttft_p99_s"]
        assert lo < r["ttft_p99_s"]["simulated"] <= hi and hi / lo > 2  # a few percent of GPU time: twice the tail
        assert r["ttft_p99_s"]["within"] is False
        assert r["pass_time_spread"]["measured_inside"]["ttft_p99_s"] is inside
        assert set(r["pass_time_spread"]["measured_inside"]) >= {"throughput_tok_s", "ttft_p50_s", "tpot_p99_s"}
        table = run(*args).output
        # its TTFT p50 misses too (+10.8%): inside the range at +-3%, outside at +-5% (a replay at
        # saturation is no monotone function of the pass times: each spread ends elsewhere)
        assert "bounds missed at the price: 2, of which 1 with the measured value inside" in table
        tally = table.split("bounds missed at the price")[1].splitlines()[0]
        assert tally.endswith(f"; {name} ttft_p99" if inside else f"; {name} ttft_p50")
    flat = list(csv.DictReader(io.StringIO(run(*args, "--format", "csv").output)))
    assert float(flat[0]["ttft_p99_s_spread_low"]) == pytest.approx(lo)
