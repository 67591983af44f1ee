"""Request files for device call 144's held-out serving check (the forty-seventh session): two
shapes no earlier run served, and a small model on many slots.

    .venv/bin/python calibrate/runs/make_call144_streams.py

writes into calibrate/runs/streams/ each stream of CALL144 at each of its rates in PICKS, as
``STEM-rRATE.csv``. The shapes (lengths lognormal, clipped; arrivals Poisson, drawn at 1 request/s
and divided by the rate, as calibrate/runs/make_call141_streams.py draws them):

- ``reason-sNNN`` -- short prompts and long answers, as a reasoning model's: prompts median 200
  tokens (sigma 0.8, 8-2,000), generations median 900 (sigma 0.6, 64-3,000). Decode steps at
  contexts of thousands of tokens for most of the run, the pool's blocks held for seconds.
- ``rag-sNNN`` -- retrieval-augmented prompts, long and alike, with chat-length answers: prompts
  median 2,400 (sigma 0.25, 600-3,500), generations median 180 (sigma 0.7, 8-800).
- ``chat-sNNN`` -- call 141's chat shape (prompts median 350, generations median 140).

Lengths and arrivals come from numpy default_rng([seed, k]) with k 1 (prompts), 2 (generations),
3 (arrivals): a file regenerates byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from calibrate.runs import make_call141_streams as base  # noqa: E402

#: shape -> (prompt median, sigma, lo, hi), (generation median, sigma, lo, hi), arrival kind
SHAPES = {
    "reason": ((200, 0.8, 8, 2000), (900, 0.6, 64, 3000), "poisson"),
    "rag": ((2400, 0.25, 600, 3500), (180, 0.7, 8, 800), "poisson"),
    "chat": base.SHAPES["chat"],
}


def stream(shape: str, count: int, seed: int):
    """(prompt_tokens, gen_tokens, arrival_s at rate 1) arrays of one stream (make_call141_streams.stream)."""
    return base.stream(shape, count, seed, SHAPES)


#: the streams call 144 serves: file stem, shape, count, seed
CALL144 = [
    ("reason-s891", "reason", 200, 891),
    ("rag-s892", "rag", 400, 892),
    ("chat-s893", "chat", 800, 893),
]
#: the rates (requests/s) each stream is served at, picked before the call
#: (docs/data/cpu/call144-picks/picks.txt; calibrate/runs/pick_rates_call144.py [--card h100-sxm])
PICKS: dict[str, tuple[float, ...]] = {
    # qwen2.5-7b on 64 slots: H200 3 (47 running) and 6 (past capacity at the stream's end),
    # H100 3 (63 running: near capacity; 2 would outlast a job's 130 s) and 5 (past capacity)
    "reason-s891": (3, 6, 5),
    "rag-s892": (6,),  # llama-3.1-8b on 64 slots, chunked prefill (2,048 tokens a step): either card
    "chat-s893": (40, 60),  # qwen2.5-1.5b on 256 slots: either card (H200 80 and 241 running, H100 118 and 256)
}


def main() -> None:
    base.write_streams(CALL144, PICKS, SHAPES)


if __name__ == "__main__":
    main()
