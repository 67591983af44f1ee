"""Request files for device call 141's held-out serving check: streams shaped as a user would write
them, not as the serving job's canned streams are (every earlier run but call 85's bursty one drew
log-uniform lengths from calibrate.serving_job.STREAMS with steady Poisson arrivals).

    .venv/bin/python calibrate/runs/make_call141_streams.py

writes into calibrate/runs/streams/ each stream of CALL141 at each of its rates in PICKS, as
``STEM-rRATE.csv`` (the request files the device scripts serve). The shapes:

- ``chat-sNNN`` -- heavy-tailed lengths like a chat trace: prompts lognormal (median 350 tokens,
  sigma 1.0, clipped to 8-3,000), generations lognormal (median 140, sigma 0.8, clipped to
  4-1,000); Poisson arrivals.
- ``code-sNNN`` -- long prompts and short answers, as code completion or retrieval: prompts
  lognormal (median 1,400, sigma 0.5, clipped to 200-3,500), generations lognormal (median 40,
  sigma 0.7, clipped to 2-300); Poisson arrivals.
- ``gamma-sNNN`` -- the chat lengths with gamma-distributed gaps of coefficient of variation 2
  (shape 0.25: clustered arrivals).
- ``step-sNNN`` -- the chat lengths with Poisson arrivals whose rate doubles halfway through the
  requests (a load step: the rate named, then twice it).

Arrivals are drawn at 1 request/s and divided by the rate (calibrate/runs/pick_rates_call141.py
writes the same files into a temporary folder for every rate it scans). Lengths and arrivals come
from numpy default_rng([seed, k]) with k 1 (prompts), 2 (generations), 3 (arrivals): a file
regenerates byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STREAMS_DIR = Path(__file__).resolve().parent / "streams"

#: shape -> (prompt median, sigma, lo, hi), (generation median, sigma, lo, hi), arrival kind
SHAPES = {
    "chat": ((350, 1.0, 8, 3000), (140, 0.8, 4, 1000), "poisson"),
    "code": ((1400, 0.5, 200, 3500), (40, 0.7, 2, 300), "poisson"),
    "gamma": ((350, 1.0, 8, 3000), (140, 0.8, 4, 1000), "gamma"),
    "step": ((350, 1.0, 8, 3000), (140, 0.8, 4, 1000), "step"),
}


def _lognormal(rng, median: float, sigma: float, lo: int, hi: int, count: int) -> np.ndarray:
    x = np.exp(np.log(median) + sigma * rng.standard_normal(count))
    return np.clip(np.rint(x), lo, hi).astype(np.int64)


def arrivals_at_rate_one(kind: str, count: int, rng) -> np.ndarray:
    """Arrival times (s) of ``count`` requests at a mean rate of 1 request/s (the step: 1, then 2)."""
    if kind == "poisson":
        gaps = rng.exponential(1.0, count)
    elif kind == "gamma":  # coefficient of variation 1 / sqrt(shape) = 2, mean shape * scale = 1
        gaps = rng.gamma(0.25, 4.0, count)
    elif kind == "step":
        gaps = rng.exponential(1.0, count)
        gaps[count // 2:] /= 2.0
    else:
        raise ValueError(f"unknown arrival kind {kind!r}")
    return np.cumsum(gaps)


def stream(shape: str, count: int, seed: int, shapes: dict | None = None):
    """(prompt_tokens, gen_tokens, arrival_s at rate 1) arrays of one stream (its shape from
    ``shapes``, SHAPES unless given)."""
    (pm, ps, plo, phi), (gm, gs, glo, ghi), kind = (shapes or SHAPES)[shape]
    prompts = _lognormal(np.random.default_rng([seed, 1]), pm, ps, plo, phi, count)
    gens = _lognormal(np.random.default_rng([seed, 2]), gm, gs, glo, ghi, count)
    arrivals = arrivals_at_rate_one(kind, count, np.random.default_rng([seed, 3]))
    return prompts, gens, arrivals


def write_stream(path: Path, prompts, gens, arrivals, rate: float = 1.0) -> None:
    """The request file the serving job and `roofline simulate --requests` read, arrivals / rate."""
    lines = ["prompt_tokens,gen_tokens,arrival_s"]
    lines += [f"{p},{g},{a / rate:.6f}" for p, g, a in zip(prompts, gens, arrivals)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


#: the streams call 141 serves: file stem, shape, count, seed
CALL141 = [
    ("chat-s881", "chat", 400, 881),
    ("code-s882", "code", 300, 882),
    ("gamma-s883", "gamma", 400, 883),
    ("step-s884", "step", 400, 884),
    ("chat-s885", "chat", 500, 885),
    ("chat-s886", "chat", 150, 886),
]
#: the rate (requests/s) each stream is served at on an H200, picked before the call
#: (docs/data/cpu/call141-picks/picks.txt; calibrate/runs/pick_rates_call141.py)
PICKS: dict[str, tuple[float, ...]] = {
    "chat-s881": (15, 25, 10, 20),  # H200 15 and 25, H100 10 and 20
    "code-s882": (8, 6),  # H200 8, H100 6
    "gamma-s883": (12, 20, 8, 16),  # H200 12 and 20, H100 8 and 16
    "step-s884": (6,),  # H200 only (an H100 cannot hold 64 slots of 4,096 rows of qwen2.5-14b)
    "chat-s885": (20, 30),  # either card
    "chat-s886": (3,),  # H200 only (qwen2.5-32b's 32 slots of 3,584 rows need 96.5 GB)
}


def rate_label(rate: float) -> str:
    return f"{rate:g}".replace(".", "p")


def write_streams(table, picks, shapes: dict | None = None) -> None:
    """Each stream of ``table`` (stem, shape, count, seed) at each of its rates in ``picks`` into
    STREAMS_DIR, and a line about it."""
    STREAMS_DIR.mkdir(exist_ok=True)
    for stem, shape, count, seed in table:
        p, g, a = stream(shape, count, seed, shapes)
        for rate in picks.get(stem, ()):
            write_stream(STREAMS_DIR / f"{stem}-r{rate_label(rate)}.csv", p, g, a, rate)
        print(f"{stem}: {count} requests, prompts median {int(np.median(p))} max {p.max()}, "
              f"generations median {int(np.median(g))} max {g.max()}, rates {picks.get(stem, ())}")


def main() -> None:
    write_streams(CALL141, PICKS)


if __name__ == "__main__":
    main()
