"""A bursty request stream for device call 85's held-out serving check: arrivals in bursts, not
Poisson at a steady rate (the serving runs before it were all Poisson or all at t = 0).

    python3 calibrate/runs/make_bursty_stream.py > calibrate/runs/streams/bursty-mixed-s300.csv

Every PERIOD_S a burst of BURST requests arrives, Poisson at BURST_RATE within it; lengths as the
serving job's ``mixed`` stream (calibrate.serving_job.STREAMS: prompt 64-1,024, generation 16-256
tokens, log-uniform integers, its _log_uniform), from numpy default_rng(SEED), drawn after the
arrivals. Mean rate BURST / PERIOD_S.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from calibrate.serving_job import STREAMS, _log_uniform  # noqa: E402

SEED, COUNT, PERIOD_S, BURST, BURST_RATE = 300, 300, 1.5, 45, 200.0


def main() -> None:
    rng = np.random.default_rng(SEED)
    arrivals = []
    t0 = 0.0
    while len(arrivals) < COUNT:
        gaps = rng.exponential(1.0 / BURST_RATE, BURST)
        arrivals += list(t0 + np.cumsum(gaps))
        t0 += PERIOD_S
    arrivals = np.array(arrivals[:COUNT])
    (plo, phi), (glo, ghi) = STREAMS["mixed"]
    prompt = _log_uniform(rng, plo, phi, COUNT)
    gen = _log_uniform(rng, glo, ghi, COUNT)
    print("prompt_tokens,gen_tokens,arrival_s")
    for p, g, a in zip(prompt, gen, arrivals):
        print(f"{p},{g},{a:.6f}")


if __name__ == "__main__":
    main()
