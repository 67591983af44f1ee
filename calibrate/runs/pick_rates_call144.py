"""Device call 144's streams and rates, picked before the call (the forty-seventh session).

Three request files (calibrate/runs/make_call144_streams.py: a reasoning shape of long answers, a
retrieval shape of long alike prompts, chat on a small model's many slots), each served
with the settings a new user gets -- ``max_model_len`` the longest request rounded up to 256 (the
serving job's default_max_model_len: 3,840-4,096 rows here), the KV pool from 90% of the GPU's memory --
and the slots and policy named below. Each candidate is simulated at four or five rates with the shipped
terms and the alternative (calibrate/runs/pick_rates_call102.py's ``ALT``) by ``roofline simulate
--pass-cost serving-loop`` on the file itself. Output: docs/data/cpu/call144-picks/picks-CARD.txt;
the rates chosen from it go into make_call144_streams.PICKS and docs/data/cpu/call144-picks/picks.txt,
committed before the call; calibrate/runs/h200-call144.sh serves them. Run from the repository root:
``.venv/bin/python calibrate/runs/pick_rates_call144.py [--card h100-sxm]`` (the search itself is
pick_rates_call141.main).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs.make_call144_streams import CALL144, stream  # noqa: E402
from calibrate.runs.pick_rates_call141 import CHUNKED, main as pick  # noqa: E402

#: name, model, slots, stream stem, simulate's extra knobs, rates scanned
CANDIDATES = [
    ("q7r", "qwen2.5-7b", 64, "reason-s891", (), [2, 3, 4, 5, 6]),
    ("l8r", "llama-3.1-8b", 64, "rag-s892", (), [6, 9, 12, 15]),
    ("l8rc", "llama-3.1-8b", 64, "rag-s892", CHUNKED, [6, 9, 12, 15]),
    ("q15c", "qwen2.5-1.5b", 256, "chat-s893", (), [40, 60, 80, 100]),
]


if __name__ == "__main__":
    pick(CANDIDATES, CALL144, stream)
