"""The serving loop's terms, fitted on two committed H200 runs, and every run replayed beside them.

Fits roofline.pass_costs.LoopTerms on the FIT runs of hardware_profiles/measurements/serving/
h200-graph-probe/ (device call 10: runs that carry the loop's host probe;
roofline.serving_replay.fit_loop_terms), writes them to hardware_profiles/serving/h200-graph-loop.json,
replays EVERY committed run with them (roofline.serving_replay.compare_rows: `roofline simulate
--pass-cost serving-loop` on the run's own stream and configuration, the host terms scaled by the
run's host probe where it has one) and writes the tables between the replay markers of
docs/serving.md: the probe folder's held-out runs, then the earlier graph-prefill runs (calls 5-7
and 9), which carry no host probe and are replayed with the fit machine's host terms.

    .venv/bin/python benchmarks/fit_serving_loop.py            # fit, write the terms and the tables
    .venv/bin/python benchmarks/fit_serving_loop.py --check    # replay with the shipped terms only
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The runs the terms are fitted on: one run under load per model. Every other run is held out.
FIT = ["qwen2.5-1.5b-mixed-r40-n400-s1", "qwen2.5-7b-mixed-r25-n300-s1"]
#: The other folders of graph-prefill runs, all held out: the later ones with the host probe, the
#: earlier ones without (replayed with the fit machine's host terms). Runs there named like the FIT
#: runs are other measurements of the same streams, not fitted on.
OTHERS = (
    ("h200-graph-call141", "**Held out: request files shaped as a user would write them, on an H200** "
     "(`measurements/serving/h200-graph-call141/`, `calibrate/runs/h200-call141.sh` and `h200-call142.sh` run in "
     "the forty-sixth session on an H200: heavy-tailed chat lengths on qwen2.5-7b, llama-3.2-3b (128 slots) and "
     "qwen2.5-32b (32 slots), code-completion lengths on llama-3.1-8b chunked at 2,048 tokens, gamma arrivals of "
     "CV 2 on mistral-7b-v0.3, a load-step stream on qwen2.5-14b (64 slots of 4,096 rows); a new user's settings, "
     "seeds 881-886, the H200 rates picked before the forty-first session's call "
     "(calibrate/runs/pick_rates_call141.py); `docs/data/h200-2026-12-07/call141/`, `call142/`)"),
    ("h200-graph-call137", "**Held out: choose-server's rate, served on an H200** (`measurements/serving/"
     "h200-graph-call137/`, device call 137's script run in the fortieth session on an H200: llama-3.1-8b, the "
     "mixed stream, seed 851, 64 slots of 1,280 rows, prefill-first, at the H200's choose-server rates picked "
     "before any ran -- case ttft R* x 0.85-1.15 and case tpot 12.4-23.1 req/s (benchmarks/choose_server_check.py); "
     "`docs/data/h200-2026-12-06/call137/`)"),
    ("h200-graph-call138", "**Held out: choose-server's rate for a chunked server, served on an H200** "
     "(`measurements/serving/h200-graph-call138/`, device call 138's script run in the fortieth session on an "
     "H200: qwen2.5-7b, the long-prompt stream, seed 861, 32 slots of 1,792 rows, prompts chunked at 512 tokens, "
     "at the H200's choose-server rate R* x 0.7-1.3 picked before the call; `docs/data/h200-2026-12-06/call138/`)"),
    ("h200-graph-call133", "**Held out, five models no H200 serving run had** (`measurements/serving/"
     "h200-graph-call133/`, `calibrate/runs/h200-call133.sh` run in the fortieth session on an H200: call 118's "
     "olmo-2-7b long prompts, qwen3-8b short and qwen3-32b mixed, and call 134's gemma-3-4b short on 128 slots, "
     "gemma-3-12b long-gen and qwen2.5-32b mixed, at the H200 rates picked before calls 118 and 134; "
     "`docs/data/h200-2026-12-06/call133/`)"),
    ("h200-graph-call132", "**Held out, the stream no H100 could hold** (`measurements/serving/h200-graph-call132/`, "
     "`calibrate/runs/h200-call132.sh` run in the fortieth session on an H200: gpt-neox-20b mixed on 32 slots of "
     "1,280 rows, 86.8 GB of weights and cache, at the H200 rate picked before call 118; "
     "`docs/data/h200-2026-12-06/call132/`)"),
    ("h200-graph-call131", "**Held out, three models no H200 serving run had** (`measurements/serving/"
     "h200-graph-call131/`, `calibrate/runs/h200-call131.sh` run in the fortieth session on an H200: call 119's "
     "gemma-2-9b mixed on 32 slots, gpt-neox-20b mixed on 16, mistral-7b-v0.1 short on 64, seeds 821-823, at the "
     "H200 rates picked before call 119; `docs/data/h200-2026-12-06/call131/`)"),
    ("h200-graph-call117", "**Held out, the stream call 111's H100 could not hold** (`measurements/serving/"
     "h200-graph-call117/`, `calibrate/runs/h200-call117.sh` run in the fortieth session on an H200: llama-2-7b "
     "short at 120 req/s, 128 slots of 1,024 rows, the rate picked before call 111; "
     "`docs/data/h200-2026-12-06/call117/`)"),
    ("h200-graph-call106", "**Held out, three models no serving run had, on an H200** (`measurements/serving/"
     "h200-graph-call106/`, device call 106, the thirty-third session: `calibrate/runs/h200-call105.sh` on an "
     "H200 with the H200's rates picked before call 105 (calibrate/runs/pick_rates_call105.py), cut at 240 s by "
     "the device time left, so six of its eight streams -- llama-2-7b (full multi-head attention) mixed on 64 "
     "slots, llama-2-13b long prompts on 32, phi-3-mini-4k (96-wide heads) short on 128 slots full, llama-3.2-3b "
     "long-gen on a 20,000-token pool that preempts, qwen2.5-1.5b long prompts chunked at 512 tokens, qwen2.5-7b "
     "mixed chunked at 2,048; `docs/data/h200-2026-12-06/call106/`)"),
    ("h200-graph-call100", "**Held out, the power sampled every 5 ms on an H200** (`measurements/serving/"
     "h200-graph-call100/`, device call 100, the thirtieth session: `calibrate/runs/h200-call95.sh` on an H200 -- "
     "call 91's two llama-3.1-8b streams (256 slots), call 88's llama-3.1-8b stream (64 slots) and qwen2.5-14b "
     "with 128 slots at 120 req/s, overloaded, new on this card; `docs/data/h200-2026-12-05/call100/`)"),
    ("h200-graph-call99", "**Held out, slot counts no run had** (`measurements/serving/h200-graph-call99/`, device "
     "call 99, the thirtieth session: `calibrate/runs/h200-call97.sh` on an H200 -- qwen2.5-7b with 192 slots of "
     "1,024 rows at 120 and 150 req/s, llama-3.2-3b with 256 slots of 512 rows at 250 and 400 req/s, short "
     "requests, the pool from memory, rates picked before call 97)"),
    ("h200-graph-call98", "**Held out, call 99's llama-3.2-3b stream at 250 req/s, served first** "
     "(`measurements/serving/h200-graph-call98/`, device call 98, the thirtieth session, on the H200 that calls "
     "99 and 100 then ran on)"),
    ("h200-graph-call92", "**Held out, call 91's five streams again on the same machine** (`measurements/serving/"
     "h200-graph-call92/`, device call 92, the twenty-ninth session: `calibrate/runs/h200-call91.sh` run a second "
     "time right after call 91, how far one stream's measurement and its replay move between two runs)"),
    ("h200-graph-call91", "**Held out, the settings a new user reaches first** (`measurements/serving/"
     "h200-graph-call91/`, device call 91, the twenty-ninth session: the KV pool sized from the GPU's memory and "
     "64-256 slots, decode buckets 96-256 no earlier run had: qwen2.5-1.5b with the defaults at 90 req/s and "
     "with 128 slots at 120, llama-3.1-8b with 256 slots of 512 rows at 150 and 250, qwen2.5-7b long prompts "
     "chunked at a 1,024-token budget, 128 slots of 1,792 rows)"),
    ("h200-graph-call90", "**Held out, layouts and a cache length no run had** (`measurements/serving/"
     "h200-graph-call90/`, device call 90, the twenty-sixth session: qwen3-8b (its q/k norms) prefill-first and "
     "chunked, pythia-6.9b (a GELU MLP, attention biases, 32 K/V heads) chunked and overloaded, and qwen2.5-7b "
     "chunked with a 4,096-row cache; the chunk graph's copy a row priced from the chunk probe at 4,096 rows, "
     "measured in the same call before the runs)"),
    ("h200-graph-call89", "**Held out after the fact, with the device probe** (`measurements/serving/"
     "h200-graph-call89/`, device call 89, the twenty-sixth session: five streams that missed their TTFT p99 on "
     "earlier machines (calls 11, 12, 17, 85) served again, and two new ones (mistral-7b-v0.3, qwen2.5-3b); each "
     "run times its decode graphs in its own process before and after its clock, the probe "
     "`compare-serving --at-probed-speed` replays at)"),
    ("h200-graph-call88", "**Held out after the fact, a second machine** (`measurements/serving/h200-graph-call88/`, "
     "device call 88, the twenty-third session: seven runs -- two models the loop never served (llama-3.1-8b, "
     "prefill-first and chunked; qwen2.5-14b, 48 layers), a tight pool (qwen2.5-1.5b, 32 slots, 8,000 tokens), "
     "short requests at 130 req/s, the bursty stream on qwen2.5-7b, and call 85's missed llama-3.2-1b stream "
     "again -- on a machine whose host probe read 2.2-4.9x the fit runs')"),
    ("h200-graph-call85", "**Held out after the fact** (`measurements/serving/h200-graph-call85/`, device call 85, the "
     "twenty-third session: nine runs on streams, seeds, rates and settings no earlier run had -- a bursty stream, "
     "runs near the preemption onset on five models, a 2,048-token slot, long generations all at once -- and call "
     "14's qwen2.5-0.5b chunked stream again; replayed with the terms and calibration as they were before it ran)"),
    ("h200-graph-call14", "**Policy chunked with chunk graphs** (`measurements/serving/h200-graph-call14/`, device "
     "call 14: nine chunked runs on six models at token budgets 256-1,024, and the qwen2.5-1.5b fit stream under "
     "prefill-first as the machine's control; a chunk after cached tokens priced from the chunk table, measured "
     "after these runs, by call 15's probe)"),
    ("h200-graph-call15", "**Policy chunked, measured before its price was settled** (`measurements/serving/"
     "h200-graph-call15/`, device call 15: six chunked runs on six models, other budgets and rates, not looked at "
     "until the chunk table's price was written)"),
    ("h200-graph-call26", "**A slot length off the alignment** (`measurements/serving/h200-graph-call26/`, device "
     "call 26: one chunked run at `max_model_len` 601 after the loop's cache rows were rounded up to a multiple of "
     "8 (608 a slot, the rest masked), a new stream: short prompts at 60 req/s, a 256-token budget)"),
    ("h200-graph-call17", "**The host probed before and after each run** (`measurements/serving/h200-graph-call17/`, "
     "device call 17: five prefill-first and two chunked runs on new seeds, after the calibration's refit with the "
     "layers probe; replayed with the geometric mean of the two probes)"),
    ("h200-graph-call11", "**Later runs with the host probe** (`measurements/serving/h200-graph-call11/`, device call "
     "11: the probe measured once; two runs of policy `chunked` from before the loop had chunk graphs: its chunks "
     "after cached tokens ran eagerly, host-bound, not modelled)"),
    ("h200-graph-call12", "**Later runs with the host probe** (`measurements/serving/h200-graph-call12/`, device call "
     "12: the probe's median of three; some streams of calls 10 and 11 again)"),
    ("h200-graph-call13-sync", "**Later runs with the host probe** (`measurements/serving/h200-graph-call13-sync/`, "
     "device call 13: three streams of call 12 again, the token sync blocking as in every other run)"),
    ("h200-graph-call13-spin", "**Later runs with the host probe** (`measurements/serving/h200-graph-call13-spin/`, "
     "device call 13: the same three streams with the host polling each pass's end, `--spin-wait`)"),
    ("h200-graph-call9", "**Earlier runs without a host probe** (`measurements/serving/h200-graph-call9/`, device "
     "call 9, one machine; replayed with the fit machine's host terms)"),
    ("h200-graph", "**Earlier runs without a host probe** (`measurements/serving/h200-graph/`, device calls 5-7; "
     "replayed with the fit machine's host terms)"),
)
#: The folders whose runs carry the host probe (besides the fit folder), and those whose loop had chunk graphs.
PROBED = ("h200-graph-call11", "h200-graph-call12", "h200-graph-call13-sync", "h200-graph-call13-spin",
          "h200-graph-call14", "h200-graph-call15", "h200-graph-call17", "h200-graph-call26", "h200-graph-call85",
          "h200-graph-call88", "h200-graph-call89", "h200-graph-call90", "h200-graph-call91", "h200-graph-call92",
          "h200-graph-call98", "h200-graph-call99", "h200-graph-call100", "h200-graph-call106",
          "h200-graph-call117", "h200-graph-call131", "h200-graph-call132", "h200-graph-call133",
          "h200-graph-call137", "h200-graph-call138", "h200-graph-call141")
CHUNK_GRAPHS = ("h200-graph-call14", "h200-graph-call15", "h200-graph-call17", "h200-graph-call26", "h200-graph-call85",
                "h200-graph-call88", "h200-graph-call89", "h200-graph-call90", "h200-graph-call91", "h200-graph-call92",
                "h200-graph-call106", "h200-graph-call138", "h200-graph-call141")
#: Folders of runs on other cards, replayed with the terms transferred to the card
#: (roofline.pass_costs.transferred_loop_terms: the fitted terms, the card's own probe tables) on
#: the card's transferred step model: leave-one-card-out, nothing fitted on that card.
OTHER_CARDS = (
    ("h100-sxm", "h100-sxm-graph-call1", "**Leave one card out: an H100** (`measurements/serving/h100-sxm-graph-call1/`, "
     "H100 device call 1, the twenty-ninth session: call 91's settings with rates picked for the H100 and a "
     "40,000-token pool that preempts, on an NVIDIA H100 80GB HBM3; the step model the graph profile's terms "
     "transferred to the card, the loop's terms the H200's with the H100's own matmul and chunk tables, measured by "
     "H100 calls 1-2 and not fitted on any run)"),
    ("h100-sxm", "h100-sxm-graph-call3", "**Leave one card out: an H100, another machine** (`measurements/serving/"
     "h100-sxm-graph-call3/`, H100 device call 3, the twenty-ninth session: two of call 1's streams again -- the "
     "same stream, the same settings -- and two new ones with the pool from memory, qwen2.5-7b prefill-first and "
     "llama-3.1-8b chunked at a 512-token budget; rates picked on the transferred terms before the call)"),
    ("h100-sxm", "h100-sxm-graph-call93", "**Leave one card out: an H100, the clock sampled** (`measurements/serving/"
     "h100-sxm-graph-call93/`, device call 93, the twenty-ninth session, lent an H100: call 91's two llama-3.1-8b "
     "streams again with nvidia-smi sampling the SM clock and power every 100 ms, "
     "`docs/data/h100-2026-12-05/call93/clocks-*.csv`)"),
    ("h100-sxm", "h100-sxm-graph-call94", "**Leave one card out: an H100, the clock sampled again** (`measurements/"
     "serving/h100-sxm-graph-call94/`, device call 94: call 93's script on another H100 machine, "
     "`docs/data/h100-2026-12-05/call94/clocks-*.csv`)"),
    ("h100-sxm", "h100-sxm-graph-call95", "**Leave one card out: an H100, the power sampled every 5 ms** (`measurements/"
     "serving/h100-sxm-graph-call95/`, device call 95, the thirtieth session, lent an H100: call 91's two "
     "llama-3.1-8b streams again, call 88's llama-3.1-8b stream (64 slots), and a new one, qwen2.5-14b with 128 "
     "slots at 120 req/s (overloaded), with calibrate/runs/power_sampler.py reading NVML's instantaneous power and "
     "the SM clock every 5 ms, `docs/data/h100-2026-12-05/call95/power-*.csv.gz`)"),
    ("h100-sxm", "h100-sxm-graph-call97", "**Leave one card out: an H100, slot counts no run had** (`measurements/"
     "serving/h100-sxm-graph-call97/`, device call 97, the thirtieth session, lent an H100 again: qwen2.5-7b with "
     "192 slots of 1,024 rows at 120 and 150 req/s, llama-3.2-3b with 256 slots of 512 rows at 250 and 400 req/s, "
     "short requests, the pool from memory, rates picked beforehand)"),
    ("h100-sxm", "h100-sxm-graph-call102", "**Leave one card out: an H100, streams no run had** (`measurements/"
     "serving/h100-sxm-graph-call102/`, device call 102, the thirty-second session, asked for an H200 and lent an "
     "H100: eight streams, seeds and settings no run had -- qwen3-8b short at 80 and 140 req/s on 128 slots, "
     "mistral-7b-v0.3 long-gen on 96, llama-3.2-1b mixed on 128, qwen2.5-3b long prompts chunked at 1,024 tokens, "
     "qwen2.5-7b on a 10,000-token pool that preempts, llama-3.1-8b's fixed 256 + 128 on 128 slots, qwen2.5-14b "
     "long prompts -- rates picked before the call, calibrate/runs/pick_rates_call102.py, "
     "`docs/data/h100-2026-12-06/call102/`)"),
    ("h100-sxm", "h100-sxm-graph-call105", "**Leave one card out: an H100, three models no serving run had** (`measurements/"
     "serving/h100-sxm-graph-call105/`, device call 105, the thirty-third session, asked for an H200 and lent an "
     "H100: llama-2-7b (full multi-head attention) mixed on 64 slots, phi-3-mini-4k (96-wide heads) short on 128, "
     "llama-2-13b long prompts on 32, llama-3.2-3b long-gen on a 20,000-token pool that preempts, qwen2.5-1.5b "
     "long prompts chunked at 512 tokens, qwen2.5-7b mixed chunked at 2,048, qwen3-8b long-gen on 96 slots, "
     "llama-3.1-8b mixed overloaded -- seeds no run had, rates picked before the call, "
     "calibrate/runs/pick_rates_call105.py, `docs/data/h100-2026-12-06/call105/`)"),
    ("h100-sxm", "h100-sxm-graph-call107", "**Leave one card out: call 105's last two streams again, another H100** "
     "(`measurements/serving/h100-sxm-graph-call107/`, device call 107, the thirty-fourth session, asked for an H200 "
     "and lent an H100: qwen3-8b long-gen on 96 slots at 15 req/s and llama-3.1-8b mixed on 128 slots at 60, "
     "overloaded -- the streams and rates call 105 served on another H100 machine, "
     "`docs/data/h100-2026-12-06/call107/`)"),
    ("h100-sxm", "h100-sxm-graph-call111", "**Leave one card out: held-out streams after the K/V repeats were priced "
     "apart** (`measurements/serving/h100-sxm-graph-call111/`, device call 111, the thirty-fourth session, asked for "
     "an H200 and lent an H100: phi-3-mini-4k mixed on 64 slots, llama-2-13b mixed on 32, pythia-6.9b long prompts "
     "on 32 -- full multi-head models whose price the change moved -- and the grouped-query controls mistral-7b-v0.3 "
     "short on 128 and qwen2.5-3b long prompts on 64; seeds 791-796 no run had, rates picked before the call with "
     "the terms as now shipped, calibrate/runs/pick_rates_call111.py; llama-2-7b's 128 slots of 1,024 rows did not "
     "fit the H100; `docs/data/h100-2026-12-06/call111/`)"),
    ("h100-sxm", "h100-sxm-graph-call115", "**Leave one card out: four models no serving run had** (`measurements/"
     "serving/h100-sxm-graph-call115/`, device call 115, the thirty-fourth session, asked for an H200 and lent an "
     "H100: falcon-7b (multi-query: 71 query heads over one K/V head) mixed on 64 slots, olmo-2-7b (full attention, "
     "q/k norms) short on 64, internlm2.5-7b long prompts on 64, gpt-j-6b (full attention, 256-wide heads) mixed "
     "on 32; seeds 801-804, rates picked before the call, calibrate/runs/pick_rates_call115.py, "
     "`docs/data/h100-2026-12-06/call115/`)"),
    ("h100-sxm", "h100-sxm-graph-call118", "**Leave one card out: the layouts the launches' price moved** "
     "(`measurements/serving/h100-sxm-graph-call118/`, device call 118, the thirty-fifth session, asked for an H200 "
     "and lent an H100: qwen3-32b (q/k norms, 64 layers; no serving run had it) mixed on 16 slots, olmo-2-7b long "
     "prompts on 32, qwen3-8b short on 64; seeds 811-814, rates picked before the call with the launches priced "
     "apart, calibrate/runs/pick_rates_call118.py; gpt-neox-20b's 32 slots of 1,280 rows did not fit the H100; "
     "`docs/data/h100-2026-12-06/call118/`)"),
    ("h100-sxm", "h100-sxm-graph-call119", "**Leave one card out: three models no serving run had** "
     "(`measurements/serving/h100-sxm-graph-call119/`, device call 119, the thirty-fifth session, asked for an H200 "
     "and lent an H100: gemma-2-9b (16 query heads of 256 over 8 K/V heads, 42 layers, a 256,000-row LM head) mixed "
     "on 32 slots, gpt-neox-20b (a plain GELU MLP, 44 layers, 64 full heads of 96) mixed on 16, mistral-7b-v0.1 short "
     "on 64; seeds 821-823, rates picked before the call, calibrate/runs/pick_rates_call119.py, "
     "`docs/data/h100-2026-12-06/call119/`)"),
    ("h100-sxm", "h100-sxm-graph-call134", "**Leave one card out: gemma-3 and qwen2.5-32b** "
     "(`measurements/serving/h100-sxm-graph-call134/`, device call 134, the thirty-sixth session, asked for an H100 "
     "or an H200 and lent an H100: gemma-3-4b (8 query heads of 256 over 4 K/V heads, q/k norms, a gated GELU MLP, "
     "a 262,208-row LM head) short on 128 slots of 512 rows, gemma-3-12b long generations on 64 slots of 1,024 (its "
     "1,024-token window the slot's width), qwen2.5-32b (64 layers) mixed on 16; three models no serving run had, "
     "seeds 831-833, rates picked before the call, calibrate/runs/pick_rates_call134.py, "
     "`docs/data/h100-2026-12-06/call134/`)"),
    ("h100-sxm", "h100-sxm-graph-call135", "**Leave one card out: call 134's new models under the server's other "
     "regimes** (`measurements/serving/h100-sxm-graph-call135/`, device call 135, the thirty-sixth session, lent an "
     "H100: gemma-3-4b long generations on 96 slots and a 20,000-token pool that preempts, qwen2.5-32b long prompts "
     "chunked at 1,024 tokens on 16 slots, gemma-3-12b's fixed 256 + 128 chunked at 512 on 64; seeds 841-843, rates "
     "picked before the call, calibrate/runs/pick_rates_call135.py, `docs/data/h100-2026-12-06/call135/`)"),
    ("h100-sxm", "h100-sxm-graph-call136", "**Leave one card out: choose-server's rate, served** "
     "(`measurements/serving/h100-sxm-graph-call136/`, device call 136, the thirty-seventh session, asked for an H100 "
     "or an H200 and lent an H100: llama-3.1-8b mixed x 400, seed 851, 64 slots of 1,280 rows, at 0.7-1.3x the rate "
     "choose-server named for TTFT p99 <= 500 ms and TPOT p99 <= 16 ms, picked before the call, "
     "benchmarks/choose_server_check.py, `docs/data/h100-2026-12-06/call136/`)"),
    ("h100-sxm", "h100-sxm-graph-call137", "**Leave one card out: choose-server's rate where TTFT binds, served** "
     "(`measurements/serving/h100-sxm-graph-call137/`, device call 137, the thirty-eighth session, asked for an H100 "
     "or an H200 and lent an H100: the same stream and server as call 136, at 0.85-1.15x the rate choose-server named "
     "for TTFT p99 <= 200 ms and TPOT p99 <= 40 ms, 96% of its capacity, picked before the call, "
     "benchmarks/choose_server_check.py --case ttft, `docs/data/h100-2026-12-06/call137/`)"),
    ("h100-sxm", "h100-sxm-graph-call138", "**Leave one card out: choose-server's rate for a chunked server, served** "
     "(`measurements/serving/h100-sxm-graph-call138/`, device call 138, the thirty-eighth session, asked for an H100 "
     "or an H200 and lent an H100: qwen2.5-7b's long prompts chunked at 512 tokens beside the decodes on 32 slots of "
     "1,792 rows, 400 requests, seed 861, at 0.7-1.3x the rate choose-server named for TTFT p99 <= 500 ms and TPOT p99 "
     "<= 30 ms, picked before the call, benchmarks/choose_server_check.py --case chunked, "
     "`docs/data/h100-2026-12-06/call138/`)"),
    ("h100-sxm", "h100-sxm-graph-call139", "**Leave one card out: call 137 again, on another H100** "
     "(`measurements/serving/h100-sxm-graph-call139/`, device call 139, the thirty-eighth session, asked for an H100 "
     "or an H200 and lent an H100: `calibrate/runs/h200-call137.sh` again, the same stream at the same rates, on a "
     "machine whose decode graphs ran 0.963x their price, `docs/data/h100-2026-12-06/call139/`)"),
    ("h100-sxm", "h100-sxm-graph-call140", "**Leave one card out: six streams picked after the fortieth session's H200 "
     "runs** (`measurements/serving/h100-sxm-graph-call140/`, device call 140, the fortieth session, asked for an H200 "
     "and lent an H100: falcon-7b short on 96 slots, internlm2.5-7b mixed, llama-3.2-3b mixed on a 12,000-token pool "
     "that preempts, qwen2.5-14b long prompts chunked at 1,024 tokens, gpt-j-6b long-gen overloaded, qwen3-8b fixed; "
     "seeds 871-876, rates picked before the call, calibrate/runs/pick_rates_call140.py, "
     "`docs/data/h100-2026-12-06/call140/`)"),
    ("h100-sxm", "h100-sxm-graph-call141", "**Leave one card out: request files shaped as a user would write them** "
     "(`measurements/serving/h100-sxm-graph-call141/`, device calls 141 and 142, the forty-first session, asked for "
     "an H200, lent an H100 after none came: heavy-tailed chat lengths (prompts 8-3,000 tokens, generations "
     "4-1,000) on qwen2.5-7b and llama-3.2-3b (128 slots), code-completion lengths (prompts 200-3,500) on "
     "llama-3.1-8b chunked at 2,048 tokens, gamma arrivals of CV 2 on mistral-7b-v0.3; a new user's settings: "
     "the slots as long as the longest request (3,328-3,840 rows), the pool from memory; seeds 881-885, rates "
     "picked before the call, calibrate/runs/make_call141_streams.py and pick_rates_call141.py, "
     "`docs/data/h100-2026-12-06/call141/`, `call142/`)"),
    ("h100-sxm", "h100-sxm-graph-call144", "**Leave one card out: shapes no earlier run served** "
     "(`measurements/serving/h100-sxm-graph-call144/`, device call 144, the forty-seventh session, asked for an "
     "H100 after four asks for an H200 came to nothing: reasoning-shaped answers (prompts median 222 tokens, "
     "generations median 876, up to 3,000) on qwen2.5-7b at 3 and 5 req/s, retrieval-shaped prompts (median "
     "2,367, up to 3,500) on llama-3.1-8b chunked at 2,048 tokens, chat on 256 slots of qwen2.5-1.5b at 40 and "
     "60 req/s; seeds 891-893, rates and predictions committed before the call, "
     "calibrate/runs/make_call144_streams.py and pick_rates_call144.py, `docs/data/h100-2026-12-07/call144/`)"),
    ("h100-sxm", "h100-sxm-graph-call145", "**Leave one card out: call 144's qwen2.5 streams again, another H100** "
     "(`measurements/serving/h100-sxm-graph-call145/`, device call 145, the forty-ninth session: the same four "
     "streams and settings as call 144 -- chat on 256 slots of qwen2.5-1.5b at 40 and 60 req/s, reasoning-shaped "
     "answers on qwen2.5-7b at 3 and 5 req/s -- on another lease, its predictions committed before the call, "
     "`docs/data/cpu/call145-predictions.txt`, `docs/data/h100-2026-12-07/call145/`)"),
) + tuple(
    ("h100-sxm", f"h100-sxm-graph-call146-rep{i}", f"**Leave one card out: one machine, the same streams again, "
     f"repeat {i} of {n}** (`measurements/serving/h100-sxm-graph-call146-rep{i}/`, device call 146, the forty-ninth "
     "session, `calibrate/runs/call146.sh`: qwen2.5-1.5b's mixed stream of H100 calls 1 and 3 (seed 702, 128 slots, a "
     "60,000-token pool, 110 req/s) served four times and call 144's 256-slot chat stream at 60 req/s three times, back "
     "to back on one H100, each in its own process; `docs/data/h100-2026-12-07/call146/`)")
    for i, n in ((1, 4), (2, 4), (3, 4), (4, 4))) + tuple(
    ("h100-sxm", f"h100-sxm-graph-call147-rep{i}{pin}", "**Leave one card out: one machine, the same stream six "
     f"times, repeat {i} of 6{', pinned to a core' if pin else ''}** "
     f"(`measurements/serving/h100-sxm-graph-call147-rep{i}{pin}/`, device call 147, the fiftieth session, "
     "`calibrate/runs/call147.sh`: call 146's qwen2.5-1.5b mixed stream (seed 702, 128 slots, a 60,000-token pool, "
     "110 req/s) six times back to back on another H100, each in its own process, the even repeats pinned to one "
     "CPU core by `taskset -c 3`; `docs/data/h100-2026-12-08/call147/`)")
    for i, pin in ((1, ""), (2, "-pinned"), (3, ""), (4, "-pinned"), (5, ""), (6, "-pinned")))
BEGIN, END = "<!-- replay:begin -->", "<!-- replay:end -->"


def _pct(err) -> str:
    return "-" if err is None else f"{100 * err:+.1f}%"


def _cell(entry, scale: float, digits: int, bound=True) -> str:
    mark = "" if entry["within"] in (None, True) or not bound else " **x**"
    return (f"{entry['measured'] * scale:,.{digits}f} / {entry['simulated'] * scale:,.{digits}f} "
            f"({_pct(entry['error'])}){mark}")


def table(rows) -> str:
    head = ("| run | set terms? | throughput tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms "
            "| E2E p50 s | preemptions | max running |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in sorted(rows, key=lambda r: (not r["fitted"], r["run"])):
        lines.append(
            f"| {r['run']} | {'fit' if r['fitted'] else 'held out'} | {_cell(r['throughput_tok_s'], 1, 0)} "
            f"| {_cell(r['ttft_p50_s'], 1e3, 1)} | {_cell(r['ttft_p99_s'], 1e3, 1)} | {_cell(r['tpot_p50_s'], 1e3, 2)} "
            f"| {_cell(r['tpot_p99_s'], 1e3, 2)} | {_cell(r['e2e_p50_s'], 1, 3)} "
            f"| {r['preemptions']['measured']} / {r['preemptions']['simulated']} "
            f"| {r['max_running']['measured']} / {r['max_running']['simulated']} |")
    return "\n".join(lines)


def summary(rows) -> str:
    from roofline.serving_replay import summary_lines

    held = [r for r in rows if not r["fitted"]]
    return "\n".join(f"- {x.replace(' runs within', ' held-out runs within').replace(' runs the same', ' held-out runs the same')}"
                     for x in summary_lines(held))


def write_docs(body: str, path: Path = ROOT / "docs" / "serving.md") -> None:
    from roofline.atomic import write_text_atomic

    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    write_text_atomic(path, text[:start] + "\n" + body.rstrip() + "\n" + text[end:])


def main() -> None:
    from roofline.pass_costs import load_loop_terms, loop_terms_path
    from roofline.serving_replay import KV_REPEAT_PROBES, LAUNCH_WALKS, compare_rows, fit_loop_terms, shipped_folder
    from roofline.serving_runs import read_run, run_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="replay with the shipped terms; write nothing")
    args = parser.parse_args()
    folder = shipped_folder()
    names = run_names(folder)
    path = loop_terms_path("h200", "graph")
    if args.check:
        terms = load_loop_terms(path)
    else:
        terms = fit_loop_terms([read_run(folder, n) for n in FIT], held_out=[n for n in names if n not in FIT],
                               kv_repeat_probes=KV_REPEAT_PROBES, launch_walks=LAUNCH_WALKS)
        from roofline.atomic import write_text_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(terms.model_dump(), indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    rows = compare_rows(folder, terms)
    parts = [
        "Written by `.venv/bin/python benchmarks/fit_serving_loop.py` (measured / simulated (error); **x**: outside "
        "the acceptance bound).",
        "",
        f"**Runs with the host probe** (`measurements/serving/{folder.name}/`, device call 10; the terms' fit runs "
        "and held-out runs):",
        "",
        table(rows),
        "",
        "Held-out runs only:",
        "",
        summary(rows),
    ]
    probed = [r for r in rows if not r["fitted"]]
    chunked = []
    for sub, what in OTHERS:
        more = compare_rows(folder.parent / sub, terms, fitted=())
        parts += ["", f"{what}, all held out:", "", table(more), "", summary(more)]
        if sub in PROBED:
            probed += [r for r in more if r["policy"] == "prefill-first"]
            chunked += [r for r in more if r["policy"] == "chunked" and sub in CHUNK_GRAPHS]
    parts += ["", f"**Every held-out prefill-first run with the host probe** (calls 10-141, {len(probed)} runs):",
              "", summary(probed),
              "", f"**Every held-out run of policy chunked with chunk graphs** (calls 14-141, "
              f"{len(chunked)} runs):",
              "", summary(chunked)]
    for card, sub, what in OTHER_CARDS:
        more = compare_rows(folder.parent / sub, load_loop_terms(card=card, engine="graph"), fitted=())
        parts += ["", f"{what}:", "", table(more), "", summary(more)]
    body = "\n".join(parts)
    print(body)
    if not args.check:
        write_docs(body)


if __name__ == "__main__":
    main()
