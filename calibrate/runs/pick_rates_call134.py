"""Device call 134's streams and rates, picked before the call (the thirty-sixth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped: three models no serving run had, seeds 831-833 -- gemma-3-4b (8 query heads of
256 over 4 K/V heads, q/k norms, a gated GELU MLP, 34 layers, a 262,208-row LM head) and
gemma-3-12b (16 over 8, 48 layers), both with their 1,024-token sliding window at least the slot
(the loop serves them only so: the window then drops nothing, and the streams are the ones whose
requests fit 1,024 tokens), and qwen2.5-32b (64 layers, 40 query heads over 8) -- each at four
rates with both term sets. Output: docs/data/h100-2026-12-06/call134/picks-CARD.txt, committed
before the call; calibrate/runs/h200-call134.sh serves the rates named in picks.txt when lent an
H100 (on an H200 it serves call 118's H200 streams instead). Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call134.py [--card h100-sxm]`` (~1 min).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("g4s", "gemma-3-4b", 128, 512, "short", 500, 831, (), [80, 120, 160, 200]),
    ("g12l", "gemma-3-12b", 64, 1024, "long-gen", 300, 832, (), [6, 9, 12, 15]),
    ("q32m", "qwen2.5-32b", 16, 1280, "mixed", 150, 833, (), [1.5, 2, 2.5, 3]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
