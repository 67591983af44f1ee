"""Device call 102's streams and rates, picked before the call (the thirty-second session).

Each candidate stream (calibrate/serving_job.py's canned streams, seeds no run had) is simulated at
four rates with both term sets -- the shipped hardware_profiles/serving/h200-graph-loop.json and the
alternative with the prefill attention measured -- by ``roofline simulate --pass-cost serving-loop``
with the run's own knobs (the pool from memory unless --kv-capacity-tokens is given). The output is
committed as docs/data/h100-2026-12-06/call102/picks.txt; calibrate/runs/h200-call102.sh serves the
picked rates. Run from the repository root: ``.venv/bin/python calibrate/runs/pick_rates_call102.py``
(~30 s, writes request files into a temporary folder); ``--card h100-sxm`` simulates the same
streams on an H100 with the terms carried there (docs/data/h100-2026-12-06/call102/picks-h100-sxm.txt,
written before a call an H100 served).
"""
import csv
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.serving_job import stream_requests  # noqa: E402

ALT = "hardware_profiles/serving/alternatives/h200-graph-loop-measured-attention.json"
TMP = Path(tempfile.mkdtemp(prefix="pick102-"))
CHUNKED = ("--max-num-batched-tokens", "1024", "--schedule", "decode-first")
#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("q3", "qwen3-8b", 128, 1024, "short", 500, 771, (), [80, 110, 140, 170]),
    ("m7", "mistral-7b-v0.3", 96, 1024, "long-gen", 300, 772, (), [10, 16, 22, 30]),
    ("l1", "llama-3.2-1b", 128, 1280, "mixed", 500, 773, (), [60, 90, 120, 160]),
    ("q3c", "qwen2.5-3b", 64, 1792, "long-prompt", 300, 774, CHUNKED, [10, 20, 30, 40]),
    ("q7p", "qwen2.5-7b", 64, 1280, "mixed", 300, 775, ("--kv-capacity-tokens", "10000"), [15, 20, 25, 30]),
    ("l8f", "llama-3.1-8b", 128, 512, "fixed", 400, 776, (), [20, 30, 40, 50]),
    ("q14", "qwen2.5-14b", 64, 1792, "long-prompt", 200, 777, (), [6, 9, 12, 15]),
]


def session_refusal(card, model, slots, mml):
    """The serving job's refusal before loading (calibrate.serving_job.session_fit_refusal), with the
    card's memory for the free memory (a little more than the job sees): a line, or None."""
    from calibrate.configs import load_model_config
    from calibrate.serving_job import session_fit_refusal
    from roofline.hardware import load_card

    return session_fit_refusal(model, load_model_config(model), slots, mml, load_card(card).memory_bytes,
                               f"in {card}'s memory (the serving job refuses it before loading)")


def simulate(card, model, slots, mml, stream, rate, count, seed, extra, terms):
    path = TMP / f"{model}-{stream}-{rate}-{count}-{seed}.csv"
    if not path.exists():
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["prompt_tokens", "gen_tokens", "arrival_s"])
            for r in stream_requests(stream, count, rate, seed):
                w.writerow([r.prompt_tokens, r.gen_tokens, r.arrival_s])
    cmd = [str(Path(sys.executable).with_name("roofline")), "simulate", "--requests", str(path), "--card", card,
           "--model", model, "--engine", "graph", "--batch", str(slots), "--max-model-len", str(mml),
           "--pass-cost", "serving-loop", "--format", "json", *extra]
    if terms:
        cmd += ["--loop-terms", terms]
    if "--schedule" not in extra:
        cmd += ["--schedule", "prefill-first"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return out.stderr.strip()[:300]
    c = json.loads(out.stdout)["continuous"]
    return ("running %3d  TTFT p50 %6.1f ms p99 %7.1f ms  TPOT p50 %5.2f ms p99 %5.2f ms  %6.0f tok/s  "
            "preemptions %d  makespan %.1f s" % (
                c["max_running"], c["ttft_p50_s"] * 1e3, c["ttft_p99_s"] * 1e3, c["tpot_p50_s"] * 1e3,
                c["tpot_p99_s"] * 1e3, c["throughput_tok_s"], c["preemptions"], c["makespan_s"]))


def main(candidates=CANDIDATES):
    """Each candidate at each of its rates with both term sets, one line each (``--card CARD``: on
    that card, the terms carried there)."""
    card = sys.argv[sys.argv.index("--card") + 1] if "--card" in sys.argv else "h200"
    fitting = []
    for c in candidates:  # a session the card cannot hold gets its refusal, not a rate
        refusal = session_refusal(card, *c[1:4])
        if refusal:
            print(f"{c[0]:4s} {c[1]:16s} {c[2]:3d} slots x {c[3]:4d} {c[4]:11s} {refusal}", flush=True)
        else:
            fitting.append(c)
    jobs = [(c, r, t) for c in fitting for r in c[8] for t in (None, ALT)]
    with ThreadPoolExecutor(2) as ex:
        results = ex.map(lambda j: simulate(card, *j[0][1:5], j[1], *j[0][5:8], j[2]), jobs)
        for (c, rate, terms), line in zip(jobs, results):
            print(f"{c[0]:4s} {c[1]:16s} {c[2]:3d} slots x {c[3]:4d} {c[4]:11s} @ {rate:4} req/s "
                  f"{'alternative' if terms else 'shipped    '}  {line}", flush=True)


if __name__ == "__main__":
    main()
