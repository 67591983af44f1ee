"""The loop-attention probe (``python3 -m calibrate.probes --what loop-attention``: one layer's
prefill-graph attention exactly as the serving loop calls it, at 1, 64 and 256 slots) against what
the alternative terms price it at (docs/serving.md, "The prefill graphs' attention"): the chunk
probe's line (``ChunkTable.prefill_attention_s``, fitted on one or two sequences, buckets up to
1,024) for the attention, and the empty tiles (``empty_attention_tiles`` x the terms'
``prefill_empty_tile_s``, fitted on whole graphs) for the max_num_seqs + 1 sequences. No GPU:

    .venv/bin/python benchmarks/loop_attention_check.py [PROBE_JSON]

(default: the H100's, hardware_profiles/measurements/h100-sxm-probe-loop-attention-call103.json, device
call 103; the H200's, calibrate/runs/h200-call101.sh's, run in the fortieth session:
docs/data/h200-2026-12-06/call101/probe-loop-attention.json).
Prints, per slot count and prompt layout, measured / the line, measured / (line + tiles), and the
time per empty tile measured at the attention itself: the probe's time at 64 and 256 slots less
its time at 1 slot, over the empty tiles' difference (least squares through the origin, per head
shape and over all).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.chunk_table import load_chunk_table  # noqa: E402
from roofline.pass_costs import empty_attention_tiles  # noqa: E402

PROFILES = ROOT / "hardware_profiles"
DEFAULT = PROFILES / "measurements" / "h100-sxm-probe-loop-attention-call103.json"
ALTERNATIVE = PROFILES / "serving" / "alternatives" / "h200-graph-loop-measured-attention.json"
CHUNK = {"h200": "h200-probe-chunk.json", "h100-sxm": "h100-sxm-probe-chunk.json"}


def empty_tiles_per_head(bucket: int, slots: int, seqs: int) -> float:
    """roofline.pass_costs.empty_attention_tiles for one layer and one head."""
    return empty_attention_tiles(SimpleNamespace(num_hidden_layers=1, num_attention_heads=1), bucket, slots, seqs)


def line_s(table, p: dict) -> float:
    lens = p["lens"]
    pairs = sum(n * (n + 1) // 2 for n in lens)
    return table.prefill_attention_s(p["q_heads"], p["kv_heads"], p["head_dim"], p["bucket"], sum(lens), pairs,
                                     max(lens))


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    probe = json.loads(path.read_text(encoding="utf-8"))
    card = "h200" if "H200" in str(probe.get("gpu", "")) else "h100-sxm"
    table = load_chunk_table(PROFILES / "measurements" / CHUNK[card])
    tile_s = json.loads(ALTERNATIVE.read_text(encoding="utf-8"))["prefill_empty_tile_s"]["value"]
    points = probe["points"]
    print(f"{path.name}: {len(points)} points, {len(probe.get('errors', []))} errors, {probe.get('gpu')}, "
          f"kernel {probe.get('kernel')}; chunk table {CHUNK[card]}; empty tile {tile_s * 1e9:.2f} ns "
          f"({ALTERNATIVE.name})")
    base = {(p["model"], p["bucket"], p["layout"]): p["seconds"] for p in points if p["slots"] == 1}
    groups: dict[tuple, list] = defaultdict(list)
    tile_x: dict[str, list] = defaultdict(list)
    tile_y: dict[str, list] = defaultdict(list)
    print(f"\n{'model':16s} {'slots':>5s} {'bucket':>6s} {'layout':8s} {'measured us':>11s} {'line us':>8s} "
          f"{'tiles us':>8s} {'m/line':>7s} {'m/(l+t)':>7s}")
    for p in sorted(points, key=lambda p: (p["model"], p["slots"], p["bucket"], p["layout"])):
        line = line_s(table, p)
        tiles = tile_s * p["q_heads"] * empty_tiles_per_head(p["bucket"], p["slots"], len(p["lens"]))
        groups[(p["slots"], p["layout"])].append((p["seconds"] / line, p["seconds"] / (line + tiles)))
        print(f"{p['model']:16s} {p['slots']:5d} {p['bucket']:6d} {p['layout']:8s} {p['seconds'] * 1e6:11.1f} "
              f"{line * 1e6:8.1f} {tiles * 1e6:8.1f} {p['seconds'] / line:7.3f} {p['seconds'] / (line + tiles):7.3f}")
        one = base.get((p["model"], p["bucket"], p["layout"]))
        if p["slots"] > 1 and one is not None:
            extra = p["q_heads"] * (empty_tiles_per_head(p["bucket"], p["slots"], len(p["lens"]))
                                    - empty_tiles_per_head(p["bucket"], 1, len(p["lens"])))
            if extra > 0:
                for key in (p["model"], "all"):
                    tile_x[key].append(extra)
                    tile_y[key].append(p["seconds"] - one)
    print(f"\n{'slots':>5s} {'layout':8s} {'n':>3s} {'m/line median':>13s} {'(min-max)':>13s} {'m/(l+t) median':>14s} "
          f"{'(min-max)':>13s}")
    for (slots, layout), rs in sorted(groups.items()):
        a = np.array(rs)
        print(f"{slots:5d} {layout:8s} {len(rs):3d} {np.median(a[:, 0]):13.3f} {a[:, 0].min():6.3f}-{a[:, 0].max():6.3f} "
              f"{np.median(a[:, 1]):14.3f} {a[:, 1].min():6.3f}-{a[:, 1].max():6.3f}")
    print("\ntime per empty tile at the attention itself (probe at 64/256 slots less at 1 slot, same bucket and "
          "layout; least squares through the origin):")
    for key in sorted(tile_x, key=lambda k: (k == "all", k)):
        x, y = np.array(tile_x[key], float), np.array(tile_y[key], float)
        slope = float(x @ y / (x @ x))
        rms = float(np.sqrt(np.mean((y - slope * x) ** 2)))
        print(f"  {key:16s} {slope * 1e9:6.2f} ns a tile ({len(x)} points, rms {rms * 1e6:.1f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
