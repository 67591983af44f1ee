"""Device call 118's streams and rates, picked before the call (the thirty-fifth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped after the elementwise launches were priced apart (``prefill_launch_s``: 2.15 us then,
2.13 since call 120 counted the q/k norms' copies, for each of the 18-23 kernels a layer the loop's
code launches): the layouts whose price that
moved, seeds 811-814 -- qwen3-32b (q/k norms, 64 layers: four launches a layer more than the fit
runs, no serving run had it), gpt-neox-20b (a plain GELU MLP: one launch fewer, 44 layers, 96-wide
heads, no serving run had it), olmo-2-7b (q/k norms with full attention) on long prompts and
qwen3-8b short requests on 64 slots -- each at four rates with both term sets. Output:
docs/data/h100-2026-12-06/call118/picks-CARD.txt, committed before the call;
calibrate/runs/h200-call118.sh serves the rates named in picks.txt. Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call118.py [--card h100-sxm]`` (~1 min).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("q32m", "qwen3-32b", 16, 1280, "mixed", 150, 811, (), [2, 3, 4, 6]),
    ("n20m", "gpt-neox-20b", 32, 1280, "mixed", 250, 812, (), [5, 8, 11, 14]),
    ("o7p", "olmo-2-7b", 32, 1792, "long-prompt", 200, 813, (), [6, 10, 14, 18]),
    ("q8s", "qwen3-8b", 64, 1024, "short", 400, 814, (), [40, 60, 80, 100]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
