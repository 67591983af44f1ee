"""A bursty request stream for device call 85's held-out serving check: arrivals in bursts, not
Poisson at a steady rate (the serving runs before it were all Poisson or all at t = 0).

    python3 calibrate/runs/make_bursty_stream.py > calibrate/runs/streams/bursty-mixed-s300.csv

Every PERIOD_S a burst of BURST requests arrives, Poisson at BURST_RATE within it; lengths as the
serving job's ``mixed`` stream (prompt 64-1,024, generation 16-256 tokens, log-uniform integers),
from numpy default_rng(SEED). Mean rate BURST / PERIOD_S.
"""

import numpy as np

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
    prompt = np.floor(np.exp(rng.uniform(np.log(64), np.log(1024 + 1), COUNT))).astype(int)
    gen = np.floor(np.exp(rng.uniform(np.log(16), np.log(256 + 1), COUNT))).astype(int)
    print("prompt_tokens,gen_tokens,arrival_s")
    for p, g, a in zip(prompt, gen, arrivals):
        print(f"{p},{g},{a:.6f}")


if __name__ == "__main__":
    main()
