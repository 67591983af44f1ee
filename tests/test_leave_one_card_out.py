"""Leave one card out: the graph engine and its serving loop on an H100, a card nothing was fitted on
(H100 device calls 1-3, the twenty-ninth session; docs/serving.md and docs/calibration-runs.md).
The step model is the graph profile's terms transferred to the card (roofline.engines), the loop's
terms the H200's with the H100's own probe tables (roofline.pass_costs.transferred_loop_terms)."""

from __future__ import annotations

import csv

import pytest
from click.testing import CliRunner

from cli import main
from roofline import api
from roofline.errors import RooflineError
from roofline.hardware import profiles_dir
from roofline.pass_costs import load_loop_terms
from roofline.serving_replay import COMPARED, compare_rows
from roofline.serving_runs import read_run

M = profiles_dir() / "measurements"
SERVING = M / "serving"


def test_the_loop_terms_carry_over_to_another_hopper_card_with_its_own_tables():
    h200 = load_loop_terms(card="h200", engine="graph")
    h100 = load_loop_terms(card="h100-sxm", engine="graph")
    assert h200.transferred_from is None and h100.transferred_from == "h200" and h100.card == "h100-sxm"
    # the fitted terms unchanged; the tables the H100's probes (H100 calls 1-2), not the H200's
    assert h100.decode_extra_s_per_layer == h200.decode_extra_s_per_layer
    assert h100.host_probe == h200.host_probe
    assert h100.prefill_gemm_table == "measurements/h100-sxm-probe-gemm.json"
    assert h100.chunk_attention_table == "measurements/h100-sxm-probe-chunk.json"
    assert h100.chunk_rows_table == "measurements/h100-sxm-probe-chunk-rows4096.json"
    assert "transferred to h100-sxm from h200" in h100.note
    # a Hopper card with no probe committed: no table of another card's
    pcie = load_loop_terms(card="h100-pcie", engine="graph")
    assert (pcie.prefill_gemm_table, pcie.chunk_attention_table, pcie.chunk_rows_table) == (None, None, None)


def test_a_terms_file_used_on_another_card_takes_that_cards_tables():
    # a file fitted on the H200 replaying an H100 run: the H100's matmul and chunk tables, as the shipped
    # terms get (before the thirty-second session the file's H200 tables priced the H100's prefills:
    # compare-serving --loop-terms read call 102's prefill graphs 1.03-1.16x their price, not 1.00-1.05)
    path = profiles_dir() / "serving" / "h200-graph-loop.json"
    own = load_loop_terms(path, card="h200")
    assert own.transferred_from is None and own.prefill_gemm_table == "measurements/h200-probe-gemm.json"
    moved = load_loop_terms(path, card="h100-sxm")
    assert moved.card == "h100-sxm" and moved.transferred_from == "h200"
    assert moved.prefill_gemm_table == "measurements/h100-sxm-probe-gemm.json"
    assert moved.prefill_floor_s_per_layer == own.prefill_floor_s_per_layer
    assert load_loop_terms(path) == own  # no card: the file as it is
    with pytest.raises(RooflineError, match="do not carry over to rtx3060"):
        load_loop_terms(path, card="rtx3060")


def test_the_loop_terms_do_not_carry_over_to_another_architecture():
    with pytest.raises(RooflineError, match="carry over to the other Hopper cards"):
        load_loop_terms(card="rtx3060", engine="graph")


def test_a_hopper_card_without_tables_is_simulated_by_the_step_models_prefill():
    # h100-pcie: the transferred terms without a matmul table price prefills by the step model
    out = api.simulate("h100-pcie", "qwen2.5-1.5b", engine="graph", batch=16, mix="8x32,8x128", count=200,
                       prompt_tokens=256, arrival_rate=20.0, seed=1, static=False, pass_cost="serving-loop")
    c = out["continuous"]
    assert c["requests"] == 200 and 0 < c["ttft_p50_s"] < 0.1 and 0 < c["tpot_p50_s"] < 0.05


#: The H100 runs' misses (measured / simulated, compare-serving): tails near saturation, the same
#: story as the H200's (docs/serving.md, "Why the remaining tails miss"): the same stream served
#: twice (calls 1 and 3) measured TTFT p50 58.8 and 64.8 ms, p99 228 and 238 ms, its replays moved
#: with each run's host probe (read 2.1x and 3.4x the fit runs')
H100_MISSES = {
    ("h100-sxm-graph-call1", "llama-3.1-8b-short-r150-n600-s703", "ttft_p99_s"): 0.29,  # -27.1%
    ("h100-sxm-graph-call1", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.28,  # -26.3%
    ("h100-sxm-graph-call1", "qwen2.5-1.5b-mixed-r120-n500-s705", "ttft_p50_s"): 0.26,  # -24.8%
    ("h100-sxm-graph-call1", "qwen2.5-1.5b-mixed-r80-n400-s701", "ttft_p99_s"): 0.82,  # +79.7%
    ("h100-sxm-graph-call3", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p99_s"): 0.23,  # +21.7%
    # call 95: call 88's 64-slot llama-3.1-8b stream at the preemption onset (28 preemptions measured,
    # 33 simulated) on a machine whose decode ran 0.958x its price; call 97: llama-3.2-3b overloaded
    ("h100-sxm-graph-call95", "llama-3.1-8b-mixed-r24-n250-s401", "ttft_p50_s"): 0.65,  # +62.1%
    ("h100-sxm-graph-call95", "llama-3.1-8b-mixed-r24-n250-s401", "ttft_p99_s"): 0.45,  # +42.4%
    ("h100-sxm-graph-call97", "llama-3.2-3b-short-r400-n600-s762", "ttft_p50_s"): 0.13,  # +11.2%
    # call 102 (the thirty-second session; streams, seeds and rates picked before the call with the
    # H200's terms, calibrate/runs/pick_rates_call102.py; asked for an H200, lent an H100): one of 48
    # figures out, qwen2.5-14b's long prompts, its prefill graphs 1.051x their price
    ("h100-sxm-graph-call102", "qwen2.5-14b-long-prompt-r9-n200-s777", "ttft_p50_s"): 0.12,  # -10.5%
    # call 105 (the thirty-third session; rates picked before the call, pick_rates_call105.py; lent an
    # H100 again): phi-3-mini-4k's short requests with 89 of 128 slots running missed TPOT p50 (+18.3%)
    # until the K/V repeats' fixed time left full-attention models' prefill price (calls 109-110): +9.3%
    # call 115 (the thirty-fourth session; four models no serving run had, rates picked before the call,
    # pick_rates_call115.py): one of 24 out, gpt-j-6b (full attention, 256-wide heads) at 28 of 32 slots,
    # its prefill graphs 0.936x their price (+7.0% at the probed speed)
    ("h100-sxm-graph-call115", "gpt-j-6b-mixed-r16-n250-s804", "ttft_p50_s"): 0.13,  # +11.6% (+11.3% with the launches priced)
    # olmo-2-7b's short requests: its q/k norms' four launches a layer priced (the thirty-fifth session,
    # prefill_launch_s) put its prefill graphs at 1.005x their price (were 1.047x) and its TPOT p50 from +7.6% to +15.0%:
    # that run's host probe (3.96x the fit runs') scales the prefill host line to 600 us + 79 us a prompt
    # where the run measured a median 395 us, an overshoot the cheaper prefill had hidden
    ("h100-sxm-graph-call115", "olmo-2-7b-short-r50-n400-s802", "tpot_p50_s"): 0.17,  # +15.0%
    # call 119 (the thirty-fifth session; three models no serving run had, rates picked before the call,
    # pick_rates_call119.py): one of 18 out, mistral-7b-v0.1's short requests at 54 of 64 slots, on a machine
    # whose decode graphs ran 0.965x their price (its device probe foretold 0.955x; +5.8% at the probed speed)
    ("h100-sxm-graph-call119", "mistral-7b-v0.1-short-r60-n400-s823", "ttft_p99_s"): 0.21,  # +20.1%
    # call 138 (the thirty-eighth session; choose-server's chunked case, rates picked before the call):
    # two of 30 out, the highest rate, 99% of the capacity, on a machine whose host probe read 1.5-4.7x
    # the fit runs' from run to run (the run's own median decode host time 0.13-0.26 ms): scaled by its
    # probe (2.6x, 3.2x) the replay's host lines overshoot; as fitted, +7.2% and +5.0%
    ("h100-sxm-graph-call138", "qwen2.5-7b-long-prompt-r20p4-n400-s861", "ttft_p50_s"): 0.33,  # +31.7%
    ("h100-sxm-graph-call138", "qwen2.5-7b-long-prompt-r20p4-n400-s861", "ttft_p99_s"): 0.29,  # +27.2%
    # call 139 (the same session): call 137's script again, another H100 lease, whose decode graphs ran
    # 0.963x their price (call 137's 0.988-0.996x): the same stream's TTFT p99 measured 26-34% lower at
    # 28.6-32.9 req/s (96-110% of the capacity) than on call 137's machine; replayed at its device
    # probe's speed (compare-serving --at-probed-speed) all 30 figures are within
    ("h100-sxm-graph-call139", "llama-3.1-8b-mixed-r28p6-n400-s851", "ttft_p99_s"): 0.23,  # +21.2%
    ("h100-sxm-graph-call139", "llama-3.1-8b-mixed-r30p6-n400-s851", "ttft_p99_s"): 0.50,  # +47.8%
    ("h100-sxm-graph-call139", "llama-3.1-8b-mixed-r32p9-n400-s851", "ttft_p99_s"): 0.25,  # +22.6%
    ("h100-sxm-graph-call139", "llama-3.1-8b-mixed-r32p9-n400-s851", "ttft_p50_s"): 0.14,  # +12.8%
    # call 140 (the fortieth session; six streams picked before the call, pick_rates_call140.py, asked
    # for an H200 and lent an H100): two of 36 out, the two overloaded queues' TTFT p50 on a machine
    # whose decode graphs ran 0.961x and 0.978x their price; at the device probe's speed both within
    # (-7.5%, +4.5%), while falcon-7b's TTFT p99 goes from +4.4% to +43.0% there
    ("h100-sxm-graph-call140", "gpt-j-6b-long-gen-r16-n250-s875", "ttft_p50_s"): 0.13,  # +11.8%
    ("h100-sxm-graph-call140", "llama-3.2-3b-mixed-r40-n400-s873", "ttft_p50_s"): 0.15,  # +13.9%
    # calls 141-142 (the forty-first session; request files shaped as a user would write them --
    # heavy-tailed chat and code lengths, gamma arrivals, rates picked before the call,
    # pick_rates_call141.py -- with a new user's settings; asked for an H100 after the H200s did not
    # come): one of 42 out, llama-3.2-3b's chat stream at 30 req/s on 128 slots, past the capacity
    # (its throughput +1.6%: an overloaded queue's TTFT p50 moves several times the service rate's error)
    ("h100-sxm-graph-call141", "llama-3.2-3b-chat-s885-r30", "ttft_p50_s"): 0.17,  # -15.9%
    # call 144 (the forty-seventh session; shapes no run had, rates and predictions committed before the
    # call, pick_rates_call144.py): two of 30 out, both TTFT p50s at or past the capacity, on a machine
    # whose decode graphs ran 0.952-0.963x their price -- qwen2.5-1.5b's 256 slots full at 60 req/s, and
    # qwen2.5-7b's reasoning stream past its capacity at 5 req/s (+43.7%; -19.9% at its device probe's speed)
    ("h100-sxm-graph-call144", "qwen2.5-1.5b-chat-s893-r60", "ttft_p50_s"): 0.14,  # -11.5%
    ("h100-sxm-graph-call144", "qwen2.5-7b-reason-s891-r5", "ttft_p50_s"): 0.46,  # +43.7%
    # call 145 (the forty-ninth session; call 144's four qwen2.5 streams again on another lease, predictions
    # committed before the call): two of 24 out, the 256 full slots at 60 req/s, which took 1.4% more busy
    # time on this machine than on call 144's (its TTFT p50 24.5 ms here, 21.5 ms there)
    ("h100-sxm-graph-call145", "qwen2.5-1.5b-chat-s893-r60", "ttft_p50_s"): 0.21,  # -18.8%
    ("h100-sxm-graph-call145", "qwen2.5-1.5b-chat-s893-r60", "ttft_p99_s"): 0.31,  # -28.8%
    # call 146 (the forty-ninth session; calibrate/runs/call146.sh): the same streams served again and again on
    # one machine, each in its own process. qwen2.5-1.5b's mixed stream (seed 702) at 110 req/s measured TTFT p50
    # 74.0, 29.5, 67.8 and 45.8 ms in four back-to-back repeats; the replays, each with its run's probes, 38-50 ms
    ("h100-sxm-graph-call146-rep1", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.50,  # -48.3%
    ("h100-sxm-graph-call146-rep2", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.37,  # +35.3%
    ("h100-sxm-graph-call146-rep2", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p99_s"): 0.24,  # +22.2%
    ("h100-sxm-graph-call146-rep3", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.28,  # -26.2%
    # call 147 (the fiftieth session; calibrate/runs/call147.sh): the same mixed stream six times on another
    # H100, the even repeats pinned to one core: TTFT p50 99.1, 58.5, 88.6, 96.3, 61.3, 74.5 ms (pinned or not
    # alike), in the order of each run's host time between passes (0.34-0.50 s), which its probes did not read
    ("h100-sxm-graph-call147-rep1", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.17,  # -16.3%
    ("h100-sxm-graph-call147-rep2-pinned", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.63,  # +62.3%
    ("h100-sxm-graph-call147-rep2-pinned", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p99_s"): 0.47,  # +46.8%
    ("h100-sxm-graph-call147-rep3", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.22,  # -21.0%
    ("h100-sxm-graph-call147-rep4-pinned", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.29,  # -28.2%
    ("h100-sxm-graph-call147-rep4-pinned", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p99_s"): 0.24,  # -23.4%
    ("h100-sxm-graph-call147-rep6-pinned", "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s"): 0.29,  # -27.9%
}


@pytest.mark.parametrize("sub,count", [("h100-sxm-graph-call1", 6), ("h100-sxm-graph-call3", 4),
                                       ("h100-sxm-graph-call93", 2), ("h100-sxm-graph-call94", 2),
                                       ("h100-sxm-graph-call95", 4), ("h100-sxm-graph-call97", 4),
                                       ("h100-sxm-graph-call102", 8), ("h100-sxm-graph-call105", 8),
                                       ("h100-sxm-graph-call107", 2), ("h100-sxm-graph-call111", 5),
                                       ("h100-sxm-graph-call115", 4), ("h100-sxm-graph-call118", 3),
                                       ("h100-sxm-graph-call119", 3), ("h100-sxm-graph-call134", 3),
                                       ("h100-sxm-graph-call135", 3), ("h100-sxm-graph-call136", 5),
                                       ("h100-sxm-graph-call137", 5), ("h100-sxm-graph-call138", 5),
                                       ("h100-sxm-graph-call139", 5), ("h100-sxm-graph-call140", 6),
                                       ("h100-sxm-graph-call141", 7), ("h100-sxm-graph-call144", 5),
                                       ("h100-sxm-graph-call145", 4), ("h100-sxm-graph-call146-rep1", 2),
                                       ("h100-sxm-graph-call146-rep2", 2), ("h100-sxm-graph-call146-rep3", 2),
                                       ("h100-sxm-graph-call146-rep4", 1), ("h100-sxm-graph-call147-rep1", 1),
                                       ("h100-sxm-graph-call147-rep2-pinned", 1), ("h100-sxm-graph-call147-rep3", 1),
                                       ("h100-sxm-graph-call147-rep4-pinned", 1), ("h100-sxm-graph-call147-rep5", 1),
                                       ("h100-sxm-graph-call147-rep6-pinned", 1)])
def test_the_h100_runs_within_the_bounds_but_the_documented_misses(sub, count):
    rows = compare_rows(SERVING / sub, load_loop_terms(card="h100-sxm", engine="graph"), fitted=())
    assert len(rows) == count
    for r in rows:
        for key, bound in COMPARED.items():
            if bound is not None:
                assert abs(r[key]["error"]) <= H100_MISSES.get((sub, r["run"], key), bound), (r["run"], key, r[key])
        assert r["same_preemption_behaviour"], r["run"]
    if sub == "h100-sxm-graph-call102":  # the 10,000-token pool preempted (52 measured), as simulated (48)
        assert {r["run"]: r["preemptions"]["measured"] > 0 for r in rows}["qwen2.5-7b-mixed-r25-n300-s775"]
        assert sum(r["policy"] == "chunked" for r in rows) == 1
    if sub == "h100-sxm-graph-call105":  # the 20,000-token pool preempted (369 measured), as simulated (361)
        assert {r["run"]: r["preemptions"]["measured"] > 0 for r in rows}["llama-3.2-3b-long-gen-r30-n300-s783"]
        assert sum(r["policy"] == "chunked" for r in rows) == 2
        assert {r["run"].split("-long")[0].split("-mixed")[0].split("-short")[0] for r in rows} >= {
            "llama-2-7b", "llama-2-13b", "phi-3-mini-4k"}
    if sub == "h100-sxm-graph-call111":  # three full multi-head models, rates picked with the terms as shipped
        assert {r["run"].split("-long")[0].split("-mixed")[0] for r in rows} >= {
            "phi-3-mini-4k", "llama-2-13b", "pythia-6.9b"}
    if sub == "h100-sxm-graph-call115":  # four layouts no run had: multi-query, q/k norms, 256-wide heads
        assert {r["run"].split("-mixed")[0].split("-short")[0].split("-long")[0] for r in rows} == {
            "falcon-7b", "olmo-2-7b", "internlm2.5-7b", "gpt-j-6b"}
    if sub == "h100-sxm-graph-call118":  # q/k norms on three models, rates picked with the launches priced
        assert {r["run"].split("-mixed")[0].split("-short")[0].split("-long")[0] for r in rows} == {
            "qwen3-32b", "olmo-2-7b", "qwen3-8b"}
    if sub == "h100-sxm-graph-call119":  # three models no serving run had
        assert {r["run"].split("-mixed")[0].split("-short")[0] for r in rows} == {
            "gemma-2-9b", "gpt-neox-20b", "mistral-7b-v0.1"}
    if sub == "h100-sxm-graph-call134":  # gemma-3 (q/k norms, gated GELU, 256-wide heads) and qwen2.5-32b: all 18 within
        assert {r["run"].split("-short")[0].split("-long")[0].split("-mixed")[0] for r in rows} == {
            "gemma-3-4b", "gemma-3-12b", "qwen2.5-32b"}
    if sub == "h100-sxm-graph-call135":  # the same three models preempting and chunked: 339 preemptions measured, 340 simulated
        by_run = {r["run"]: r for r in rows}
        assert by_run["gemma-3-4b-long-gen-r30-n300-s841"]["preemptions"]["measured"] > 0
        assert sum(r["policy"] == "chunked" for r in rows) == 2
    if sub == "h100-sxm-graph-call136":  # one stream at five rates around choose-server's (benchmarks/choose_server_check.py)
        assert sorted(float(r["run"].split("-r")[1].split("-n")[0].replace("p", ".")) for r in rows) == [
            7.9, 9.6, 11.2, 12.9, 14.6]
    if sub == "h100-sxm-graph-call137":  # the same stream near its capacity: no preemption (64 x 1,280 rows hold every sequence)
        assert sorted(float(r["run"].split("-r")[1].split("-n")[0].replace("p", ".")) for r in rows) == [
            24.3, 26.6, 28.6, 30.6, 32.9]
        assert not any(r["preemptions"]["measured"] for r in rows)
    if sub == "h100-sxm-graph-call138":  # choose-server's chunked case: long prompts chunked at 512 beside the decodes
        assert all(r["policy"] == "chunked" for r in rows)
    if sub == "h100-sxm-graph-call140":  # the 12,000-token pool preempted (68 measured, 71 simulated); one stream chunked
        assert {r["run"]: r["preemptions"]["measured"] for r in rows}["llama-3.2-3b-mixed-r40-n400-s873"] == 68
        assert sum(r["policy"] == "chunked" for r in rows) == 1
    if sub == "h100-sxm-graph-call141":  # request files, not canned streams: the slots as long as the longest request
        runs = [read_run(SERVING / sub, r["run"]) for r in rows]
        assert {r.config["max_model_len"] for r in runs} == {3584, 3840, 3328}
        assert sum(r["policy"] == "chunked" for r in rows) == 1
    if sub == "h100-sxm-graph-call144":  # long answers (up to 3,000 tokens) and long prompts (up to 3,500), 256 slots filled
        runs = {r["run"]: read_run(SERVING / sub, r["run"]) for r in rows}
        assert max(int(rq["gen_tokens"]) for rq in runs["qwen2.5-7b-reason-s891-r3"].requests) >= 2500
        assert {r["run"]: r["max_running"]["measured"] for r in rows}["qwen2.5-1.5b-chat-s893-r60"] == 256
        assert sum(r["policy"] == "chunked" for r in rows) == 1
    if sub == "h100-sxm-graph-call1":  # the 40,000-token pool preempted, as simulated
        assert {r["run"]: r["preemptions"]["measured"] > 0 for r in rows}["qwen2.5-1.5b-mixed-r120-n500-s705"]


def test_an_h100_run_is_replayed_on_its_own_cards_step_model():
    # compare_rows without a card: each run's own (the H200's step model would price the H100's
    # decode ~10-25% fast: the first replay of these runs made that mistake)
    folder = SERVING / "h100-sxm-graph-call3"
    terms = load_loop_terms(card="h100-sxm", engine="graph")
    name = "qwen2.5-7b-mixed-r25-n300-s711"
    own = compare_rows(folder, terms, names=[name], fitted=())[0]
    h200 = compare_rows(folder, terms, names=[name], fitted=(), card="h200")[0]
    assert abs(own["tpot_p50_s"]["error"]) < 0.03  # measured -0.4%
    assert h200["tpot_p50_s"]["error"] < -0.05


def test_compare_without_a_calibration_is_what_predict_uses():
    # the graph profile's terms transferred to the H100 (nothing fitted on it): TPOT MAPE 1.9% on
    # H100 call 1's 19 points (qwen2.5-1.5b, llama-3.1-8b at 128 and 2,048 + 16, batches 1-256)
    r = api.compare([M / "h100-sxm-graph-check-call1.csv"])
    assert r["calibration"] == "h100-sxm/graph" and r["points"] == 19
    assert r["tpot_mape_fraction"] < 0.03
    # call 3: a dense model holds (qwen2.5-7b 1.2%); MoE and latent attention priced slow (11-16%)
    r3 = api.compare([M / "h100-sxm-graph-check-call3.csv"])
    assert r3["per_model"]["qwen2.5-7b"]["tpot_mape_fraction"] < 0.03
    assert r3["tpot_mape_fraction"] < 0.10


def test_compare_refuses_another_cards_calibration_and_asks_which_card():
    r = CliRunner().invoke(main, ["compare", str(M / "h100-sxm-graph-check-call1.csv"), "--calibration",
                                  "hardware_profiles/calibrations/h200-graph.json", "--card", "h100-sxm"])
    assert r.exit_code != 0
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)  # no traceback
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("Error:") and "measured on h200, not h100-sxm" in last
    r = CliRunner().invoke(main, ["compare", str(M / "h100-sxm-graph-check-call1.csv"),
                                  str(M / "h200-graph-check-call81.csv")])
    assert r.exit_code != 0
    assert "give --card" in r.output.strip().splitlines()[-1]


def test_the_overloaded_loop_ran_at_the_power_cap_with_a_lower_clock():
    # device calls 93 and 94, two H100 machines (benchmarks/serving_clock_under_load.py): nvidia-smi
    # every 100 ms through the runs; mean SM clock over the 1,980 MHz boost 0.959 and 0.967 at 250
    # req/s, 0.983 and 0.984 at 150 req/s, most samples power-capped (the prefill graphs' 1.04-1.055x
    # their price there is the 256 slots' empty attention tiles, not the clock: device calls 95-96)
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    from serving_clock_under_load import BOOST_MHZ, CALLS, POWER_CAP_BIT, RUNS, run_window

    means = {}
    for call, clocks, folder in CALLS:
        for label, name in RUNS:
            inside = run_window(clocks, folder, label, name)
            assert len(inside) > 30  # ~10 samples a second over a 4-5 s run
            means[call, label] = sum(s[1] for s in inside) / len(inside) / BOOST_MHZ
            assert sum(1 for s in inside if s[3] & POWER_CAP_BIT) > len(inside) / 2
    expected = {("call93", "l8b"): 0.959, ("call93", "l8a"): 0.983, ("call94", "l8b"): 0.967, ("call94", "l8a"): 0.984}
    for key, value in expected.items():
        assert means[key] == pytest.approx(value, abs=0.005), key


def test_a_transferred_loop_says_so_in_simulate_and_compare_serving():
    from roofline.serving_replay import compare_folder

    args = ["simulate", "--model", "qwen2.5-1.5b", "--engine", "graph", "--batch", "16", "--mix", "8x32,8x128",
            "--count", "100", "--arrival-rate", "20", "--pass-cost", "serving-loop"]
    moved = CliRunner().invoke(main, args + ["--card", "h100-sxm"])
    own = CliRunner().invoke(main, args + ["--card", "h200"])
    assert moved.exit_code == 0 and own.exit_code == 0, moved.output + own.output
    assert "fitted on h200, carried over" in moved.output and "carried over" not in own.output
    notes = compare_folder(SERVING / "h100-sxm-graph-call93")["notes"]
    assert any("leave-one-card-out replay" in n for n in notes)
    assert not any("leave-one-card-out" in n for n in compare_folder(SERVING / "h200-graph-call91")["notes"])


def test_the_rate_picker_says_which_sessions_the_card_cannot_hold():
    # calibrate/runs/pick_rates_call102.py's session_refusal, the serving job's memory rule on the card:
    # gpt-neox-20b on 32 slots of 1,280 rows needs 86.8 GB (call 118: the H100 job refused it before
    # loading; the picker had named a rate); qwen3-32b on 16 of 1,280 and qwen2.5-32b on 16 of 1,792
    # ran on H100s (calls 118 and 135)
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "calibrate" / "runs" / "pick_rates_call102.py"
    spec = importlib.util.spec_from_file_location("runs_pick_rates_call102", path)
    picker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(picker)
    refusal = picker.session_refusal("h100-sxm", "gpt-neox-20b", 32, 1280)
    assert refusal and "86.8 GB" in refusal
    assert picker.session_refusal("h200", "gpt-neox-20b", 32, 1280) is None
    assert picker.session_refusal("h100-sxm", "qwen3-32b", 16, 1280) is None
    assert picker.session_refusal("h100-sxm", "qwen2.5-32b", 16, 1792) is None


def test_choose_servers_rate_is_where_the_real_loop_crossed_the_slo():
    # device call 136 (benchmarks/choose_server_check.py): choose-server named 11.24 req/s for
    # llama-3.1-8b's mixed stream on an H100 (TPOT p99 <= 16 ms binding); the real loop served the
    # same stream (its lengths, and at each rate the same arrivals) at 0.7-1.3x that: measured TPOT
    # p99 13.02, 14.09, 15.65, 17.35, 18.19 ms, crossing 16 ms at 11.54 req/s (choose-server -2.6%)
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    runs = check.measured(SERVING / "h100-sxm-graph-call136")
    assert [x["rate"] for x in runs] == [7.9, 9.6, 11.2, 12.9, 14.6]
    with check.LENGTHS.open() as fh:  # the stream choose-server was asked about is the one served
        lengths = [(int(r["prompt_tokens"]), int(r["gen_tokens"])) for r in csv.DictReader(fh)]
    with (SERVING / "h100-sxm-graph-call136" / "stream-llama-3.1-8b-mixed-r11p2-n400-s851.csv").open() as fh:
        assert [(int(r["prompt_tokens"]), int(r["gen_tokens"])) for r in csv.DictReader(fh)] == lengths
    r_star = check.choose("h100-sxm", kv_capacity_tokens=runs[0]["pool"])["best_rate_req_s"]
    assert r_star == pytest.approx(11.24, abs=0.05)  # the rate picked before the call (docs/data/h100-2026-12-06/call136)
    slo = check.CASES["tpot"]
    crossed, where = check.crossing([x["rate"] for x in runs], [x["tpot_p99_s"] for x in runs], slo.slo_tpot_s)
    assert where == "between" and crossed == pytest.approx(11.54, abs=0.02)
    assert abs(r_star / crossed - 1) < 0.05
    assert [check.meets(x, "tpot") for x in runs] == [True, True, True, False, False]
    # TTFT p99 stays far under its 500 ms: the sustained rate is TPOT's crossing
    assert check.sustained(runs, "tpot")[0] == pytest.approx(crossed)
    # the ttft case's SLOs (200 ms, 40 ms) hold at every one of these rates: no bracket
    assert check.sustained(runs, "ttft")[0] is None


def test_choose_servers_rate_where_ttft_binds_is_where_the_real_loop_crossed_it():
    # device call 137 (benchmarks/choose_server_check.py --case ttft): choose-server named 28.61
    # req/s, 96% of its capacity, for TTFT p99 <= 200 ms and TPOT p99 <= 40 ms on an H100; the real
    # loop's TTFT p99 was 78.0, 89.7, 219.0, 397.3, 858.0 ms at 24.3-32.9 req/s, crossing 200 ms at
    # 28.39 req/s (choose-server +0.8%); at R* itself the run just missed (219 ms), the simulation just
    # met (190 ms): R* sits on the edge, as it should
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    runs = check.measured(SERVING / "h100-sxm-graph-call137")
    assert [x["rate"] for x in runs] == [24.3, 26.6, 28.6, 30.6, 32.9]
    assert not any(x["unserved"] for x in runs)
    r_star = check.choose("h100-sxm", kv_capacity_tokens=runs[0]["pool"], case="ttft")["best_rate_req_s"]
    assert r_star == pytest.approx(28.61, abs=0.05)  # picked before the call (docs/data/cpu/call137-picks)
    sustained, lines = check.sustained(runs, "ttft")
    assert sustained == pytest.approx(28.39, abs=0.03)
    assert lines[1] == "measured TPOT p99 crosses its SLO above the highest rate served"  # TTFT binds
    assert abs(r_star / sustained - 1) < 0.03
    assert [check.meets(x, "ttft") for x in runs] == [True, True, False, False, False]
    # the runs are the case's stream on the case's server: the chunked case's are not among them
    assert check.measured(SERVING / "h100-sxm-graph-call137", "chunked") == []
    # with call 136's five slower rates (TTFT p99 47-51 ms) the crossing is the same
    both = sorted(runs + check.measured(SERVING / "h100-sxm-graph-call136"), key=lambda x: x["rate"])
    assert check.sustained(both, "ttft")[0] == pytest.approx(sustained)
    # call 139: the same script on another H100 lease, whose decode ran 0.963x its price (call 137's
    # 0.99x): TTFT p99 82.0, 84.7, 145.6, 293.9, 595.7 ms, crossing at 29.49 req/s (choose-server -3.0%);
    # both machines' crossings lie inside choose-server's +-3% band (27.79-29.49, --pass-time-spread 0.03)
    other = check.measured(SERVING / "h100-sxm-graph-call139", "ttft")
    assert [x["rate"] for x in other] == [x["rate"] for x in runs]
    crossed = check.sustained(other, "ttft")[0]
    assert crossed == pytest.approx(29.49, abs=0.03) and abs(r_star / crossed - 1) < 0.035
    assert [check.meets(x, "ttft") for x in other] == [True, True, True, False, False]
    assert 27.79 - 0.01 <= sustained < crossed <= 29.49 + 0.01


def test_choose_servers_rate_for_a_chunked_server_is_where_the_real_loop_crossed_it():
    # device call 138 (benchmarks/choose_server_check.py --case chunked): qwen2.5-7b's long prompts
    # chunked at 512 tokens on 32 slots; choose-server named 15.72 req/s (76% of its capacity) for
    # TTFT p99 <= 500 ms, TPOT p99 <= 30 ms on an H100; the real loop's TTFT p99 was 255.7, 365.5,
    # 504.8, 624.5, 1,185.7 ms at 11-20.4 req/s, crossing 500 ms at 15.63 req/s (choose-server +0.6%)
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    runs = check.measured(SERVING / "h100-sxm-graph-call138", "chunked")
    assert [x["rate"] for x in runs] == [11.0, 13.4, 15.7, 18.1, 20.4]
    assert not any(x["unserved"] for x in runs)
    with (check.DATA / check.CASES["chunked"].lengths_file).open() as fh:  # the stream choose-server was asked about
        lengths = [(int(r["prompt_tokens"]), int(r["gen_tokens"])) for r in csv.DictReader(fh)]
    with (SERVING / "h100-sxm-graph-call138" / "stream-qwen2.5-7b-long-prompt-r15p7-n400-s861.csv").open() as fh:
        assert [(int(r["prompt_tokens"]), int(r["gen_tokens"])) for r in csv.DictReader(fh)] == lengths
    r_star = check.choose("h100-sxm", kv_capacity_tokens=runs[0]["pool"], case="chunked")["best_rate_req_s"]
    assert r_star == pytest.approx(15.72, abs=0.05)  # picked before the call (docs/data/cpu/call138-picks)
    sustained, lines = check.sustained(runs, "chunked")
    assert sustained == pytest.approx(15.63, abs=0.03)
    assert abs(r_star / sustained - 1) < 0.03
    assert [check.meets(x, "chunked") for x in runs] == [True, True, False, False, False]
    assert check.measured(SERVING / "h100-sxm-graph-call137", "chunked") == []


def test_the_sustained_rate_is_the_lower_crossing_and_zero_when_every_rate_misses():
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    def run(rate, ttft, tpot):
        return {"rate": rate, "ttft_p99_s": ttft, "tpot_p99_s": tpot}

    # ttft case: TTFT p99 crosses 200 ms between 30 and 33 req/s, TPOT p99 (<= 40 ms) never
    runs = [run(30.0, 0.100, 0.030), run(33.0, 0.400, 0.031)]
    r, lines = check.sustained(runs, "ttft")
    assert 30.0 < r < 33.0 and r == pytest.approx(check.crossing([30.0, 33.0], [0.1, 0.4], 0.2)[0])
    assert lines[1] == "measured TPOT p99 crosses its SLO above the highest rate served"
    # both cross: the lower crossing is the sustained rate
    runs = [run(30.0, 0.100, 0.030), run(33.0, 0.400, 0.050)]
    assert check.sustained(runs, "ttft")[0] == pytest.approx(
        min(check.crossing([30.0, 33.0], [0.1, 0.4], 0.2)[0], check.crossing([30.0, 33.0], [0.03, 0.05], 0.04)[0]))
    # every rate already over an SLO: zero
    assert check.sustained([run(30.0, 0.300, 0.030), run(33.0, 0.400, 0.031)], "ttft")[0] == 0.0
    # the lowest rate over, a later one under: still zero, not a later crossing
    assert check.sustained([run(30.0, 0.300, 0.030), run(31.0, 0.100, 0.030), run(33.0, 0.400, 0.031)],
                           "ttft")[0] == 0.0


def test_the_slo_crossing_is_interpolated_in_log_rate_and_log_p99():
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    from choose_server_check import crossing

    # p99 proportional to the rate: 10 ms at 10 req/s, 20 at 20: 14 ms at 14 req/s
    assert crossing([10.0, 20.0], [0.010, 0.020], 0.014)[0] == pytest.approx(14.0)
    assert crossing([10.0, 20.0], [0.015, 0.020], 0.014) == (None, "below the lowest rate served")
    assert crossing([10.0, 20.0], [0.010, 0.012], 0.014) == (None, "above the highest rate served")
    # the first run over the SLO decides: a lowest rate already over it is below, even if a later
    # (noisier) run dips under and a third crosses again
    assert crossing([10.0, 12.0, 14.0], [0.3, 0.1, 0.4], 0.2) == (None, "below the lowest rate served")
    # under, over, under again: the crossing is the first, between 10 and 12
    r, where = crossing([10.0, 12.0, 14.0], [0.1, 0.4, 0.15], 0.2)
    assert where == "between" and 10.0 < r < 12.0


@pytest.mark.parametrize("case,sub,rates,r_star,crossed,meets", [
    # the same stream and server at both cases' H200 rates (calibrate/runs/h200-call137.sh on an H200)
    ("ttft", "h200-graph-call137", [12.4, 15.1, 17.8, 20.4, 23.1, 28.5, 31.2, 33.6, 35.9, 38.6], 33.55, 33.63,
     [True] * 8 + [False] * 2),
    ("tpot", "h200-graph-call137", [12.4, 15.1, 17.8, 20.4, 23.1, 28.5, 31.2, 33.6, 35.9, 38.6], 17.77, 17.95,
     [True] * 3 + [False] * 7),
    ("chunked", "h200-graph-call138", [13.0, 15.8, 18.6, 21.4, 24.1], 18.57, 18.86, [True] * 3 + [False] * 2),
])
def test_choose_servers_rates_on_the_h200_are_where_the_real_loop_crossed(case, sub, rates, r_star, crossed, meets):
    # the fortieth session, one lent H200 (the card the loop's terms were fitted on), rates picked
    # before any ran (docs/data/cpu/call137-picks/picks-*-h200.txt, call138-picks/): the real loop
    # crossed its SLO at 33.63 (ttft), 17.95 (tpot) and 18.86 req/s (chunked), choose-server named
    # 33.55, 17.77 and 18.57 (-0.2%, -1.0%, -1.5%; docs/data/h200-2026-12-06/call137/, call138/)
    import sys

    sys.path.insert(0, str(profiles_dir().parent / "benchmarks"))
    import choose_server_check as check

    runs = check.measured(SERVING / sub, case)
    assert [x["rate"] for x in runs] == rates
    assert not any(x["unserved"] for x in runs)
    named = check.choose("h200", kv_capacity_tokens=runs[0]["pool"], case=case)["best_rate_req_s"]
    assert named == pytest.approx(r_star, abs=0.05)
    sustained = check.sustained(runs, case)[0]
    assert sustained == pytest.approx(crossed, abs=0.03)
    assert -0.03 < named / sustained - 1 < 0.0  # on the safe side, within 3%
    assert [check.meets(x, case) for x in runs] == meets


def test_call144s_ttft_miss_at_256_full_slots_is_the_h100s_prefill_speed():
    """Call 144's qwen2.5-1.5b chat stream at 60 req/s with all 256 slots full (docs/serving.md, "What
    the forty-seventh session's device call said"; benchmarks/serving_own_speed.py): its TTFT p50 is
    -10.3% at the device probe's decode speed, out of the 10% bound; its prefill passes ran 1.061x their
    price on that machine (the transferred price; no probe reads the prefill), and replayed at that
    speed too the TTFT p50 is -6.8%, within."""
    import importlib.util
    from pathlib import Path

    from roofline.serving_replay import pass_ratios, probed_speed, replay

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "serving_tail_sensitivity.py"
    spec = importlib.util.spec_from_file_location("serving_tail_sensitivity_for_test", path)
    sensitivity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sensitivity)
    folder = SERVING / "h100-sxm-graph-call144"
    run = read_run(folder, "qwen2.5-1.5b-chat-s893-r60")
    terms = load_loop_terms(card="h100-sxm", engine="graph")
    ratios = pass_ratios(run, terms)
    assert 1.04 < ratios["prefill"] < 1.08  # 1.061
    scales, _ = probed_speed(ratios)
    measured = run.summary["ttft_p50_s"]
    probed = replay(run, folder, terms, decode_time_scales=scales)["ttft_p50_s"]
    both = sensitivity.simulate(run, folder, terms, prefill_scale=ratios["prefill"], card="h100-sxm",
                                decode_bucket_scales=scales)["ttft_p50_s"]
    assert probed / measured - 1.0 < -0.10  # -10.3%
    assert abs(both / measured - 1.0) < 0.09  # -6.8%
    assert both > probed * 1.03  # the prefill's 6% moves the median wait by 4%


def test_the_same_stream_on_two_h100s_moved_its_ttft_p50_past_the_bound():
    """Call 145 served call 144's four qwen2.5 streams again on another H100 lease, the same settings
    (docs/serving.md, "What the forty-ninth session's device call said"): benchmarks/serving_repeatability.py
    pairs them by stream and settings, and the reasoning stream past its capacity took 2.1% more busy time
    on the second machine and a TTFT p50 72% longer (721 -> 1,243 ms), while its throughput moved 2.6%."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "serving_repeatability.py"
    spec = importlib.util.spec_from_file_location("serving_repeatability_for_test", path)
    repeat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(repeat)
    pairs = {(name, f0, f1): (s0, s1) for card, name, f0, f1, s0, s1 in repeat.same_settings_pairs()}
    ours = {name: v for (name, f0, f1), v in pairs.items()
            if (f0, f1) == ("h100-sxm-graph-call144", "h100-sxm-graph-call145")}
    assert sorted(ours) == ["qwen2.5-1.5b-chat-s893-r40", "qwen2.5-1.5b-chat-s893-r60",
                            "qwen2.5-7b-reason-s891-r3", "qwen2.5-7b-reason-s891-r5"]
    assert not any("eager" in f0 or "eager" in f1 for _, f0, f1 in pairs)  # another loop, not paired
    s0, s1 = ours["qwen2.5-7b-reason-s891-r5"]
    assert 1.0 < s1["busy_s"] / s0["busy_s"] < 1.03  # +2.1%
    assert abs(s1["throughput_tok_s"] / s0["throughput_tok_s"] - 1.0) < 0.05  # -2.6%, within throughput's bound
    assert s1["ttft_p50_s"] / s0["ttft_p50_s"] > 1.5  # +72.4%
    for name in ("qwen2.5-1.5b-chat-s893-r40", "qwen2.5-7b-reason-s891-r3"):  # under load: within the bound
        s0, s1 = ours[name]
        assert abs(s1["ttft_p50_s"] / s0["ttft_p50_s"] - 1.0) < 0.10


def test_one_machine_served_the_same_stream_with_a_median_ttft_from_30_to_74_ms():
    """Call 146 served qwen2.5-1.5b's mixed stream (seed 702, 128 slots, 110 req/s) four times back to back on
    one H100, each in its own process (docs/serving.md, "What call 146 said"): the throughput within 2.3% and
    the TPOT p50 within 4.5% of each other, the TTFT p50 from 29.5 to 74.0 ms. A second measurement on the same
    machine is no nearer the first than issue 14's TTFT p50 bound asks a replay to be."""
    runs = [read_run(SERVING / f"h100-sxm-graph-call146-rep{i}", "qwen2.5-1.5b-mixed-r110-n500-s702").summary
            for i in (1, 2, 3, 4)]
    throughput = [r["throughput_tok_s"] for r in runs]
    tpot = [r["tpot_p50_s"] for r in runs]
    ttft = [r["ttft_p50_s"] for r in runs]
    assert max(throughput) / min(throughput) < 1.03  # 8,420-8,613 tok/s
    assert max(tpot) / min(tpot) < 1.05  # 12.06-12.60 ms
    assert max(ttft) / min(ttft) > 2.0  # 29.5-74.0 ms
    assert 0.025 < min(ttft) and max(ttft) < 0.080


def test_the_pass_time_band_holds_call_146s_repeats_but_one():
    """`compare-serving --pass-time-spread 0.03` on call 146's seven runs (docs/serving.md, "What call 146
    said"): 13 of the 14 measured TTFT p50s and p99s lie inside their run's band -- rep 1's mixed-stream
    median (74.0 ms) just above its 60.3 -- and the mixed stream's band is wide (its TTFT p50 from about 17 to
    60-82 ms), the chat stream's narrow (about 17-24 ms)."""
    terms = load_loop_terms(card="h100-sxm", engine="graph")
    inside, widths = [], {}
    for i in (1, 2, 3, 4):
        for r in compare_rows(SERVING / f"h100-sxm-graph-call146-rep{i}", terms, fitted=(), pass_time_spread=0.03):
            band = r["pass_time_spread"]
            for key in ("ttft_p50_s", "ttft_p99_s"):
                inside.append((i, r["run"], key, band["measured_inside"][key]))
            widths.setdefault(r["run"].split("-n")[0], []).append(band["ttft_p50_s"][1] / band["ttft_p50_s"][0])
    assert len(inside) == 14
    assert [(i, run, key) for i, run, key, ok in inside if not ok] == [
        (1, "qwen2.5-1.5b-mixed-r110-n500-s702", "ttft_p50_s")]
    assert min(widths["qwen2.5-1.5b-mixed-r110"]) > 2.5  # 3.3-4.8x
    assert max(widths["qwen2.5-1.5b-chat-s893-r60"]) < 1.5  # 1.19-1.22x


def _host_between_passes_s(run) -> float:
    """A served run's host time around its passes: the next iteration's start - this one's start - its
    device time, summed (the gaps docs/serving.md calls the host's)."""
    its = run.iterations
    return sum(b["t_start_s"] - a["t_start_s"] - a["device_s"] for a, b in zip(its, its[1:]))


CALL_147 = ("h100-sxm-graph-call147-rep1", "h100-sxm-graph-call147-rep2-pinned", "h100-sxm-graph-call147-rep3",
            "h100-sxm-graph-call147-rep4-pinned", "h100-sxm-graph-call147-rep5", "h100-sxm-graph-call147-rep6-pinned")


def test_pinning_the_serving_loop_to_a_core_did_not_steady_call_147s_median_ttft():
    """Call 147 served call 146's mixed stream six times on another H100, the even repeats pinned to one core
    by `taskset -c 3` (docs/serving.md, "What call 147 said"): TTFT p50 99.1, 88.6, 61.3 ms free and 58.5,
    96.3, 74.5 ms pinned -- the same spread either way, the throughput within 3.6% over all six."""
    runs = {sub: read_run(SERVING / sub, "qwen2.5-1.5b-mixed-r110-n500-s702") for sub in CALL_147}
    ttft = {sub: r.summary["ttft_p50_s"] for sub, r in runs.items()}
    free = [v for sub, v in ttft.items() if not sub.endswith("-pinned")]
    pinned = [v for sub, v in ttft.items() if sub.endswith("-pinned")]
    assert len(free) == len(pinned) == 3
    assert max(free) / min(free) > 1.4 and max(pinned) / min(pinned) > 1.4  # 1.62x and 1.65x
    throughput = [r.summary["throughput_tok_s"] for r in runs.values()]
    assert max(throughput) / min(throughput) < 1.04  # 8,196-8,485 tok/s


def test_call_147s_median_ttft_follows_its_host_time_which_its_probes_did_not_read():
    """Over call 147's six repeats the TTFT p50 ranks as the host time between passes does (0.34-0.50 s of
    about 5.3 s; Spearman 0.83), while the host probe, run in the same process before and after each clock,
    read the slowest host for the run whose host was fastest (rep 2: probe 3.23x the fit runs', the replay
    +62%); benchmarks/serving_host_probe_width.py, docs/data/cpu/serving-host-probe-width.txt."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "serving_host_probe_width.py"
    spec = importlib.util.spec_from_file_location("serving_host_probe_width_for_test", path)
    width = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(width)
    table = width.rows(list(CALL_147))
    assert [r["folder"] for r in table] == list(CALL_147)
    host = [r["host_s"] for r in table]
    assert host == [pytest.approx(_host_between_passes_s(read_run(SERVING / sub, r["run"]))) for sub, r in
                    zip(CALL_147, table)]
    assert 0.30 < min(host) and max(host) < 0.52
    assert width.spearman([r["ttft_p50_s"] for r in table], host) == pytest.approx(29 / 35)  # sum d^2 = 6
    probe = [r["probe_s"] for r in table]
    assert abs(width.spearman(probe, host)) < 0.3  # -0.09
    assert probe.index(max(probe)) == host.index(min(host)) == 1  # rep 2, pinned
    assert all(r["wide_probe_s"] is None for r in table)  # call 147 ran before serving_job took a wide probe
    assert width.spearman([1.0, 2.0], [2.0, 1.0]) is None and width.spearman([1, 2, 3], [3, 2, 1]) == -1.0
