"""Device call 119's streams and rates for an H100, picked before the call (the thirty-fifth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped after the elementwise launches were priced apart: three models no serving run
had, seeds 821-823 -- gemma-2-9b (16 query heads of 256 over 8 K/V heads, 42 layers, a 256,000-row
LM head; the loop runs it as its dense decoder of those widths, its window of 4,096 wider than the
slots), gpt-neox-20b (a plain GELU MLP, 44 layers, 64 full heads of 96: 1.1 MB of KV a token, so
16 slots) and mistral-7b-v0.1 -- each at four rates with both term sets. Output:
docs/data/h100-2026-12-06/call119/picks-CARD.txt, committed before the call;
calibrate/runs/h200-call119.sh serves the rates named in picks.txt when lent an H100 (on an H200 it
runs calibrate/runs/h200-call117.sh's H200 part instead). Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call119.py [--card h100-sxm]`` (~1 min).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("g9m", "gemma-2-9b", 32, 1280, "mixed", 250, 821, (), [8, 12, 16, 20]),
    ("n20m", "gpt-neox-20b", 16, 1280, "mixed", 150, 822, (), [2, 3, 4, 5]),
    ("m1s", "mistral-7b-v0.1", 64, 1024, "short", 400, 823, (), [30, 45, 60, 75]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
