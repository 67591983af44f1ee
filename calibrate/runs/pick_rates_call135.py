"""Device call 135's streams and rates, picked before the call (the thirty-sixth session).

Like calibrate/runs/pick_rates_call102.py (whose ``main`` it runs on these candidates), with the
terms as shipped: call 134's three new models (gemma-3-4b, gemma-3-12b, qwen2.5-32b) under the
server's other regimes, seeds 841-843 -- gemma-3-4b long generations on a 20,000-token pool that
preempts, qwen2.5-32b long prompts chunked at 1,024 tokens decode-first, gemma-3-12b's fixed 256 +
128 chunked at 512 -- each at four rates with both term sets. Output:
docs/data/h100-2026-12-06/call135/picks-CARD.txt, committed before the call;
calibrate/runs/h200-call135.sh serves the rates named in picks.txt when lent an H100. Run from the
repository root: ``.venv/bin/python calibrate/runs/pick_rates_call135.py [--card h100-sxm]`` (~1 min).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.pick_rates_call102 import main as pick  # noqa: E402

CHUNKED_1024 = ("--max-num-batched-tokens", "1024", "--schedule", "decode-first")
CHUNKED_512 = ("--max-num-batched-tokens", "512", "--schedule", "decode-first")
#: name, model, slots, max_model_len, stream, count, seed, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("g4p", "gemma-3-4b", 96, 1024, "long-gen", 300, 841, ("--kv-capacity-tokens", "20000"), [15, 20, 30, 40]),
    ("q32c", "qwen2.5-32b", 16, 1792, "long-prompt", 150, 842, CHUNKED_1024, [2, 3, 4, 5]),
    ("g12c", "gemma-3-12b", 64, 1024, "fixed", 300, 843, CHUNKED_512, [8, 12, 16, 20]),
]


if __name__ == "__main__":
    pick(CANDIDATES)
