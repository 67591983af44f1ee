"""Device call 70's grouped matmuls at widths around gpt-oss's 2,880 (calibrate/runs/grouped_mm_widths.py):
whether a K or N that is not a multiple of the small-tile path's 128 runs slower than its neighbours
that are (docs/method.md, section 13). Not used by the model.

    .venv/bin/python benchmarks/grouped_mm_widths.py [PROBE_JSON]

Per token count it prints the seconds per touched weight byte of each width, over the mean of the two
multiples of 128 either side of 2,880 (2,816 and 2,944): a K or N of 2,880 that cost only its padding
to 2,944 would read (2,944 / 2,880) x (its neighbours' rate at 2,944) / (their mean), about 1.01.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "hardware_profiles/measurements/h200-probe-grouped-mm-widths-call70.json"
    points = json.loads(path.read_text())["points"]
    rate = {(p["n"], p["k"], p["tokens"]): p["seconds"] / p["weight_bytes_touched"] for p in points}
    tokens = sorted({p["tokens"] for p in points})
    # (title, the shape at a width): K stepped at N 5,760, N stepped at K 2,816 and 2,880
    sweeps = (("K at N 5,760", lambda w: (5760, w), sorted({p["k"] for p in points if p["n"] == 5760})),
              ("N at K 2,816", lambda w: (w, 2816), (2816, 2880, 2944)),
              ("N at K 2,880", lambda w: (w, 2880), (2816, 2880, 2944)))
    for title, shape, widths in sweeps:
        print(f"{title}: seconds per touched byte over the mean of the 2,816 and 2,944 widths'")
        print("  width " + " ".join(f"{'T ' + str(t):>7s}" for t in tokens))
        for width in widths:
            cells = []
            for t in tokens:
                here, lo, hi = (rate.get((*shape(w), t)) for w in (width, 2816, 2944))
                cells.append(f"{here / (0.5 * (lo + hi)):7.3f}" if here and lo and hi else f"{'-':>7s}")
            print(f"  {width:5d} " + " ".join(cells))
    by_t = {t: [rate[(5760, k, t)] for k in (2816, 2880, 2944) if (5760, k, t) in rate] for t in tokens}
    print("gpt-oss's gate_up width (N 5,760, K 2,880) in TB/s of touched weights: "
          + "  ".join(f"T {t}: {1e-12 / rate[(5760, 2880, t)]:.2f}" for t in tokens if (5760, 2880, t) in rate)
          + "  (its neighbours 2,816 / 2,944: "
          + "  ".join(f"T {t}: {1e-12 / v[0]:.2f} / {1e-12 / v[2]:.2f}" for t, v in by_t.items() if len(v) == 3) + ")")


if __name__ == "__main__":
    main()
