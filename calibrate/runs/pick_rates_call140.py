"""Device call 140's streams and rates, picked before the call (the fortieth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped and the alternative: six streams on seeds no run had, picked after the fortieth
session's 26 H200 runs were replayed and before any of these ran -- falcon-7b (one K/V head),
gpt-j-6b (256-wide heads) and internlm2.5-7b, never served on an H200; llama-3.2-3b
on a 12,000-token pool that preempts; qwen2.5-14b's long prompts chunked at 1,024 tokens; qwen3-8b's
fixed stream under load. Output: docs/data/cpu/call140-picks/picks-CARD.txt, then picks.txt (the
rates chosen), committed before the call; calibrate/runs/h200-call140.sh serves them. Run from the
repository root: ``.venv/bin/python calibrate/runs/pick_rates_call140.py [--card h100-sxm]``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import CHUNKED  # noqa: E402  (chunks of 1,024 tokens, decode-first)
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402
#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("f7s", "falcon-7b", 96, 512, "short", 500, 871, (), [60, 90, 120, 150]),
    ("i7m", "internlm2.5-7b", 64, 1280, "mixed", 300, 872, (), [15, 20, 25, 30]),
    ("l3t", "llama-3.2-3b", 64, 1280, "mixed", 400, 873, ("--kv-capacity-tokens", "12000"), [30, 40, 50, 60]),
    ("q14c", "qwen2.5-14b", 32, 1792, "long-prompt", 200, 874, CHUNKED, [6, 9, 12, 15]),
    ("gjl", "gpt-j-6b", 64, 1024, "long-gen", 250, 875, (), [8, 12, 16, 20]),
    ("q8f", "qwen3-8b", 128, 512, "fixed", 400, 876, (), [20, 30, 40, 50]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
