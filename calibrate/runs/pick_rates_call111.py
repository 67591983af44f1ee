"""Device call 111's streams and rates, picked before the call (the thirty-fourth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped after the K/V repeats' fixed time was priced apart (prefill_kv_repeat_s_per_layer,
calls 109-110): seeds no run had (791-796), four full multi-head models whose price that change
moved (phi-3-mini-4k, llama-2-7b, llama-2-13b, pythia-6.9b) and two grouped-query controls whose
price it left alone (mistral-7b-v0.3, qwen2.5-3b), each at four rates with both term sets. The
output is committed as docs/data/h100-2026-12-06/call111/picks-CARD.txt before the call;
calibrate/runs/h200-call111.sh serves the rates picked in picks.txt. Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call111.py [--card h100-sxm]`` (~60 s).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("p3m", "phi-3-mini-4k", 64, 1536, "mixed", 400, 791, (), [20, 30, 40, 50]),
    ("l2s", "llama-2-7b", 128, 1024, "short", 500, 792, (), [60, 90, 120, 150]),
    ("l13m", "llama-2-13b", 32, 1280, "mixed", 200, 793, (), [6, 9, 12, 15]),
    ("px", "pythia-6.9b", 32, 1792, "long-prompt", 200, 794, (), [10, 14, 18, 24]),
    ("m7s", "mistral-7b-v0.3", 128, 1024, "short", 500, 795, (), [60, 90, 120, 150]),
    ("q3p", "qwen2.5-3b", 64, 1792, "long-prompt", 300, 796, (), [30, 40, 50, 60]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
