"""Device call 115's streams and rates, picked before the call (the thirty-fourth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped (the K/V repeats priced apart; the H100's matmul table re-timed): four models no
serving run had, seeds 801-804 -- falcon-7b (multi-query: 71 query heads of 64 over one K/V head,
so the loop repeats K and V 71 times), olmo-2-7b (full multi-head with q/k norms), internlm2.5-7b
(grouped queries, 32 over 8) and gpt-j-6b (full multi-head, 16 heads of 256) -- each at four rates
with both term sets. The loop runs each as its decoder of their widths (calibrate/serving_loop.py
``_forward``), which the price counts the same way. Output: docs/data/h100-2026-12-06/call115/
picks-CARD.txt, committed before the call; calibrate/runs/h200-call115.sh serves the rates named in
picks.txt. Run from the repository root: ``.venv/bin/python calibrate/runs/pick_rates_call115.py
[--card h100-sxm]`` (~30 s).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("f7m", "falcon-7b", 64, 1280, "mixed", 300, 801, (), [15, 25, 35, 45]),
    ("o7s", "olmo-2-7b", 64, 1024, "short", 400, 802, (), [30, 50, 70, 90]),
    ("i7p", "internlm2.5-7b", 64, 1792, "long-prompt", 200, 803, (), [10, 15, 20, 25]),
    ("j6m", "gpt-j-6b", 32, 1280, "mixed", 250, 804, (), [8, 12, 16, 20]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
