"""Whether a slower benchmark is the code or the machine: an earlier commit and this checkout timed
back to back on the same machine, each running its own benchmark code.

    .venv/bin/python benchmarks/speed_across_commits.py REV [REV ...]

For each REV, a git worktree of it in a temporary folder; then, alternating REV and this checkout
twice, each one's ``bench_predict.sweep_s()`` (every batch 1..4096 x the v0.1 catalog, 5 timings)
and ``bench_simulate.time_case`` on issue 3's case (100,000 requests, 8 slots, all at t=0, 3
timings), each in its own process with its own tree first on sys.path. Prints the medians. A REV
whose benchmarks lack either function is reported as such. Output of the forty-first session:
docs/data/cpu/speed-across-commits.txt (docs/serving.md, "Speed").
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import statistics, sys
root = sys.argv[1]
sys.path.insert(0, root); sys.path.insert(0, root + "/benchmarks")
import roofline
assert roofline.__file__.startswith(root), roofline.__file__
import bench_predict, bench_simulate
sweep, _ = bench_predict.sweep_s()
sim, _ = bench_simulate.time_case(100_000, 8, None, {}, 3)
print(statistics.median(sweep), statistics.median(sim))
"""


def timings(tree: Path) -> tuple[float, float] | str:
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree)], capture_output=True, text=True, cwd=tree)
    if out.returncode:
        return (out.stderr.strip().splitlines() or ["failed"])[-1][:200]
    sweep, sim = out.stdout.split()
    return float(sweep), float(sim)


def main() -> int:
    revs = sys.argv[1:]
    if not revs:
        print("usage: speed_across_commits.py REV [REV ...]", file=sys.stderr)
        return 2
    for rev in revs:
        with tempfile.TemporaryDirectory(prefix="speed-") as tmp:
            tree = Path(tmp) / "tree"
            made = subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), rev], cwd=ROOT,
                                  capture_output=True, text=True)
            if made.returncode:
                print(f"{rev}: {made.stderr.strip()[:200]}")
                continue
            try:
                got: dict[str, list] = {rev: [], "HEAD": []}
                for _ in range(2):
                    for name, where in ((rev, tree), ("HEAD", ROOT)):
                        got[name].append(timings(where))
                for name, runs in got.items():
                    bad = [r for r in runs if isinstance(r, str)]
                    if bad:
                        print(f"{name:10s} {bad[0]}")
                        continue
                    print(f"{name:10s} v0.1 sweep {', '.join(f'{r[0]:.3f}' for r in runs)} s (median of 5 each); "
                          f"simulate 100,000 x 8 slots {', '.join(f'{r[1]:.2f}' for r in runs)} s (median of 3 each)")
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
