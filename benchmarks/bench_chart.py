"""Size and speed of the `roofline chart` page, measured in a headless chromium.

Targets (issue 5): the default page under 10 MB; a redraw (a control changed -> the page's
formulas rerun and all six plots redrawn) under 200 ms. The page times itself with
performance.now() in its self-test, switching every card and then every model through the
controls; the self-test is run on several fresh page loads. Writes its section of
docs/benchmarks.md.

    .venv/bin/python benchmarks/bench_chart.py [--loads 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_predict import write_section  # noqa: E402


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=3, help="fresh page loads, each running the self-test")
    args = ap.parse_args()

    from roofline.browser import Browser, find_chromium

    chromium = find_chromium()
    if not chromium:
        sys.exit("no chromium: apt-get install chromium (or set ROOFLINE_CHROMIUM)")
    version = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "roofline.html"
        exe = Path(sys.executable).parent / "roofline"
        t = time.perf_counter()
        subprocess.run([str(exe), "chart", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "-o", str(page)], check=True,
                       capture_output=True)
        write_s = time.perf_counter() - t
        size_mb = page.stat().st_size / 1e6
        redraws, first_draw, load_s, counts = [], [], [], None
        for _ in range(args.loads):
            with Browser() as b:
                t = time.perf_counter()
                b.open(page.resolve().as_uri())
                b.wait_for("window.rooflineReady === true", timeout_s=120)
                load_s.append(time.perf_counter() - t)
                first_draw.append(b.evaluate("window.rooflineFirstDraw.total_ms"))
                r = b.evaluate("window.rooflineSelfTest()")
                assert r["card_switch"]["changed"], "the card control did not change the data"
                redraws.extend(r["redraw_ms"]["all"])
                counts = (len(r["plots"]), r["redraw_ms"]["count"])

    med = statistics.median(redraws)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {version}"
    body = f"""Command: `.venv/bin/python benchmarks/bench_chart.py` ({time.strftime('%Y-%m-%d')}, {machine})

Page: `roofline chart --card rtx3060 --model qwen2.5-1.5b -o roofline.html` (every card and catalog model
offered, plotly.js embedded). Redraw: one control changed -> the page's JavaScript formulas rerun and all
{counts[0]} plots redrawn, timed by the page with performance.now() (headless chromium, software rendering,
--disable-gpu), {counts[1]} switches (every card, then every model) on each of {args.loads} fresh loads.

| what | target | measured |
|---|---|---|
| page size | < 10 MB | {size_mb:.2f} MB |
| writing the page (`roofline chart`, process start to exit) | - | {write_s:.2f} s |
| redraw after a control change, median of {len(redraws)} | < 200 ms | {med:.0f} ms |
| redraw, 90th percentile / max | - | {pct(redraws, 90):.0f} ms / {max(redraws):.0f} ms |
| first draw of all plots after load (median of {args.loads}) | - | {statistics.median(first_draw):.0f} ms |
| open from file:// to drawn, incl. parsing 4.8 MB of plotly.js (median) | - | {statistics.median(load_s):.2f} s |
"""
    write_section("chart", body)
    print(body)


if __name__ == "__main__":
    main()
