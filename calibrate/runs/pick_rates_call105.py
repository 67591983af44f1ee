"""Device call 105's streams and rates, picked before the call (the thirty-third session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates): each stream --
seeds no run had, and three models no serving run had (llama-2-7b and llama-2-13b, full multi-head
attention with 32 and 40 K/V heads; phi-3-mini-4k, 96-wide heads) -- is simulated at four rates with
both term sets by ``roofline simulate --pass-cost serving-loop`` with the run's own knobs. The output
is committed as docs/data/h100-2026-12-06/call105/picks-CARD.txt before the call;
calibrate/runs/h200-call105.sh serves the picked rates. Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call105.py [--card h100-sxm]`` (~60 s).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

CHUNK512 = ("--max-num-batched-tokens", "512", "--schedule", "decode-first")
CHUNK2048 = ("--max-num-batched-tokens", "2048", "--schedule", "decode-first")
#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("l2", "llama-2-7b", 64, 1280, "mixed", 400, 781, (), [15, 25, 35, 45]),
    ("p3", "phi-3-mini-4k", 128, 1024, "short", 500, 782, (), [60, 100, 140, 180]),
    ("l3p", "llama-3.2-3b", 96, 1024, "long-gen", 300, 783, ("--kv-capacity-tokens", "20000"), [15, 20, 30, 40]),
    ("q15c", "qwen2.5-1.5b", 128, 1792, "long-prompt", 400, 784, CHUNK512, [30, 50, 70, 90]),
    ("q7c", "qwen2.5-7b", 64, 1536, "mixed", 300, 785, CHUNK2048, [15, 25, 35, 45]),
    ("q8g", "qwen3-8b", 96, 1024, "long-gen", 300, 786, (), [10, 15, 20, 25]),
    ("l13", "llama-2-13b", 32, 1792, "long-prompt", 150, 787, (), [3, 5, 7, 9]),
    ("l8m", "llama-3.1-8b", 128, 1280, "mixed", 400, 788, (), [20, 30, 40, 60]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
