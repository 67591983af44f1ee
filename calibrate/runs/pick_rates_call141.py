"""Device call 141's streams and rates, picked before the call (the forty-first session).

Six request files shaped as a user would write them (calibrate/runs/make_call141_streams.py:
heavy-tailed chat and code-completion lengths, clustered gamma arrivals, a load step), each served
with the settings a new user gets -- ``max_model_len`` the longest request rounded up to 256 (the
serving job's default_max_model_len, 4,096 rows here), the KV pool from 90% of the GPU's memory --
and the slots and policy named below. Each candidate is simulated at four rates with the shipped
terms and the alternative (calibrate/runs/pick_rates_call102.py's ``ALT``) by ``roofline simulate
--pass-cost serving-loop`` on the file itself. Output: docs/data/cpu/call141-picks/picks-CARD.txt;
the rates chosen from it go into make_call141_streams.PICKS and docs/data/cpu/call141-picks/picks.txt,
committed before the call; calibrate/runs/h200-call141.sh serves them. Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call141.py [--card h100-sxm]``.
"""
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.make_call141_streams import CALL141, rate_label, stream, write_stream  # noqa: E402
from calibrate.runs.pick_rates_call102 import ALT, session_refusal  # noqa: E402

TMP = Path(tempfile.mkdtemp(prefix="pick141-"))
CHUNKED = ("--max-num-batched-tokens", "2048", "--schedule", "decode-first")
#: name, model, slots, stream stem, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("q7c", "qwen2.5-7b", 64, "chat-s881", (), [10, 15, 20, 25]),
    ("l8k", "llama-3.1-8b", 64, "code-s882", CHUNKED, [4, 6, 8, 10]),
    ("m7g", "mistral-7b-v0.3", 64, "gamma-s883", (), [8, 12, 16, 20]),
    ("q14s", "qwen2.5-14b", 64, "step-s884", (), [4, 6, 8, 10]),
    ("l3c", "llama-3.2-3b", 128, "chat-s885", (), [20, 30, 40, 50]),
    ("q32c", "qwen2.5-32b", 32, "chat-s886", (), [2, 3, 4, 5]),
]


def request_file(stem: str, rate: float, table=CALL141, make=stream) -> tuple[Path, int]:
    """The stream at ``rate`` in the temporary folder, and its default max_model_len (``table``'s
    stream ``stem``, drawn by ``make``)."""
    shape, count, seed = next((s, n, d) for st, s, n, d in table if st == stem)
    prompts, gens, arrivals = make(shape, count, seed)
    path = TMP / f"{stem}-r{rate_label(rate)}.csv"
    write_stream(path, prompts, gens, arrivals, rate)
    most = int(max(prompts + gens - 1))
    return path, -(-most // 256) * 256


def simulate(card, model, slots, stem, extra, rate, terms, table=CALL141, make=stream):
    path, mml = request_file(stem, rate, table, make)
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
    return ("mml %4d running %3d  TTFT p50 %7.1f ms p99 %7.1f ms  TPOT p50 %5.2f ms p99 %5.2f ms  %6.0f tok/s  "
            "preemptions %d  makespan %.1f s" % (
                mml, c["max_running"], c["ttft_p50_s"] * 1e3, c["ttft_p99_s"] * 1e3, c["tpot_p50_s"] * 1e3,
                c["tpot_p99_s"] * 1e3, c["throughput_tok_s"], c["preemptions"], c["makespan_s"]))


def main(candidates=CANDIDATES, table=CALL141, make=stream) -> None:
    """Simulate each of ``candidates`` that the card holds at its rates (``table``'s streams, drawn
    by ``make``), with the shipped terms and the alternative, and print a line each."""
    card = sys.argv[sys.argv.index("--card") + 1] if "--card" in sys.argv else "h200"
    fitting = []
    for c in candidates:
        mml = request_file(c[3], 1.0, table, make)[1]
        refusal = session_refusal(card, c[1], c[2], mml)
        if refusal:
            print(f"{c[0]:4s} {c[1]:16s} {c[2]:3d} slots x {mml:4d} {c[3]:10s} {refusal}", flush=True)
        else:
            fitting.append(c)
    jobs = [(c, r, t) for c in fitting for r in c[5] for t in (None, ALT)]
    with ThreadPoolExecutor(2) as ex:
        results = ex.map(lambda j: simulate(card, j[0][1], j[0][2], j[0][3], j[0][4], j[1], j[2], table, make), jobs)
        for (c, rate, terms), line in zip(jobs, results):
            print(f"{c[0]:4s} {c[1]:16s} {c[2]:3d} slots {c[3]:10s} @ {rate:4} req/s "
                  f"{'alternative' if terms else 'shipped    '}  {line}", flush=True)


if __name__ == "__main__":
    main()
