"""roofline.chunk_table: the serving loop's chunk-graph attention, looked up from the chunk probe."""

from __future__ import annotations

import json

import pytest

from roofline.chunk_table import ChunkTable, load_chunk_table
from roofline.errors import RooflineError


def _points():
    """Two head shapes; buckets 64 and 256, chunk shares 1/4 and 1; cached 0, 100, 200.
    extra = chunk_s - prefill_s = 1 us + 0.01 us x c (x 2 at bucket 256, x 3 at share 1)."""
    pts = []
    for shape, scale in (((12, 2, 128), 1.0), ((32, 8, 64), 10.0)):
        for bucket, bscale in ((64, 1.0), (256, 2.0)):
            for share, fscale in ((0.25, 1.0), (1.0, 3.0)):
                for c in (0, 100, 200):
                    extra = scale * bscale * fscale * (1e-6 + 1e-8 * c)
                    pts.append({"q_heads": shape[0], "kv_heads": shape[1], "head_dim": shape[2], "bucket": bucket,
                                "chunk_tokens": int(bucket * share), "cached": c, "chunk_s": 5e-6 + extra,
                                "prefill_s": 5e-6})
    return pts


def test_grid_points_interpolation_and_extension():
    t = ChunkTable(_points(), "test")
    assert t.extra_s(12, 2, 128, 64, 16, 100) == pytest.approx(2e-6)  # a grid point
    assert t.extra_s(12, 2, 128, 64, 16, 150) == pytest.approx(2.5e-6)  # linear in c
    assert t.extra_s(12, 2, 128, 64, 16, 400) == pytest.approx(5e-6)  # beyond: the last slope goes on
    assert t.extra_s(12, 2, 128, 128, 32, 0) == pytest.approx(1.5e-6)  # halfway in log bucket: 1 and 2 us
    assert t.extra_s(12, 2, 128, 64, 40, 0) == pytest.approx(2e-6)  # share 0.625: halfway between 1 and 3 us
    assert t.extra_s(12, 2, 128, 16, 2, 0) == pytest.approx(1e-6)  # below the grid: clamped
    assert t.extra_s(12, 2, 128, 1024, 1024, 0) == pytest.approx(6e-6)  # above: clamped (bucket 256, share 1)


def test_the_nearest_shape_stands_for_an_unmeasured_one():
    t = ChunkTable(_points(), "test")
    assert t.nearest_shape(40, 8, 128) == (12, 2, 128)  # the same head width first
    assert t.nearest_shape(24, 8, 64) == (32, 8, 64)
    assert t.extra_s(24, 8, 64, 64, 16, 100) == pytest.approx(2e-5)


def test_a_negative_difference_is_no_extra_time():
    pts = [dict(p, chunk_s=p["prefill_s"] - 1e-6) for p in _points()]
    assert ChunkTable(pts, "test").extra_s(12, 2, 128, 64, 16, 100) == 0.0


def test_bad_tables_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.json"
    for text, needle in (("[]", "a 'points' list"), ('{"points": []}', "has no points"),
                         ('{"points": [{"q_heads": 1}]}', "every point needs numbers"),
                         ("{", "not valid JSON")):
        bad.write_text(text)
        with pytest.raises(RooflineError) as err:
            load_chunk_table(bad)
        assert needle in str(err.value) and "\n" not in str(err.value)
    one = [p for p in _points() if p["cached"] == 0]
    with pytest.raises(RooflineError, match="two cached sizes"):
        ChunkTable(one, "test")


def test_the_shipped_h200_table_is_the_probes_difference():
    # hardware_profiles/measurements/h200-probe-chunk.json (device call 15): qwen2.5-1.5b's shape,
    # a 512-token pass whose first 256 tokens continue after 512 cached ones: 57.6 - 25.6 us a layer
    t = load_chunk_table("measurements/h200-probe-chunk.json")
    with open(t.source, encoding="utf-8") as f:
        data = json.load(f)
    point = next(p for p in data["points"] if (p["q_heads"], p["kv_heads"], p["head_dim"], p["bucket"],
                                                p["chunk_tokens"], p["cached"]) == (12, 2, 128, 512, 256, 512))
    assert t.extra_s(12, 2, 128, 512, 256, 512) == pytest.approx(point["chunk_s"] - point["prefill_s"], rel=1e-12)
    assert t.extra_s(12, 2, 128, 512, 256, 512) == pytest.approx(32e-6, rel=0.05)
    # it grows with the cached tokens: ~0.046 us a cached token a layer at this bucket
    slope = (t.extra_s(12, 2, 128, 512, 256, 1024) - t.extra_s(12, 2, 128, 512, 256, 256)) / 768
    assert slope == pytest.approx(0.046e-6, rel=0.1)


def test_copy_a_row_is_the_median_difference_over_the_rows():
    """copy_s_per_row: the same probe at 1,000 and 3,000 rows, every point 2 us slower at 3,000 but
    one 40 us slower (an outlier the median ignores): 1 ns a row at that shape; tables at the same
    rows, without rows, or without the shape are refused in one line."""
    from roofline.chunk_table import copy_s_per_row

    low = ChunkTable(_points(), "low", rows=1000)
    high_pts = [dict(p, chunk_s=p["chunk_s"] + 2e-6) for p in _points()]
    high_pts[0]["chunk_s"] += 38e-6
    high = ChunkTable(high_pts, "high", rows=3000)
    assert copy_s_per_row(low, high, (12, 2, 128)) == pytest.approx(1e-9, rel=1e-9)
    assert copy_s_per_row(low, high, (32, 8, 64)) == pytest.approx(1e-9, rel=1e-9)
    for other, says in ((ChunkTable(_points(), "same", rows=1000), "different"),
                        (ChunkTable(_points(), "none"), "grid rows")):
        with pytest.raises(RooflineError, match=says):
            copy_s_per_row(low, other, (12, 2, 128))
    # a shape the other table lacks: the nearest shape both measured, scaled by the K/V widths'
    # ratio (8 x 64 over 2 x 128: twice the bytes a row, so twice the time)
    one_shape = ChunkTable([p for p in high_pts if p["kv_heads"] == 2], "one", rows=3000)
    assert copy_s_per_row(low, one_shape, (32, 8, 64)) == pytest.approx(2e-9, rel=1e-9)
    # no shape in common, or a pair whose copy is not slower at more rows (swapped labels): refused
    elsewhere = ChunkTable([dict(p, q_heads=40, kv_heads=40) for p in high_pts], "elsewhere", rows=3000)
    faster = ChunkTable([dict(p, chunk_s=p["chunk_s"] - 2e-6) for p in _points()], "faster", rows=3000)
    for other, says in ((elsewhere, "no point in common"), (faster, "not slower")):
        with pytest.raises(RooflineError, match=says) as err:
            copy_s_per_row(low, other, (12, 2, 128))
        assert "\n" not in str(err.value)


def test_the_grid_rows_are_read_and_checked(tmp_path):
    """load_chunk_table reads the probe's grid rows; a rows that is not a positive whole number is a
    one-line error."""
    path = tmp_path / "probe-chunk.json"
    path.write_text(json.dumps({"grid": {"rows": 2048}, "points": _points()}))
    assert load_chunk_table(path).rows == 2048
    for i, (grid, says) in enumerate((({"rows": 0}, "grid rows"), ([2048], "grid must be an object"),
                                       ("rows", "grid must be an object"))):
        bad = tmp_path / f"bad{i}.json"
        bad.write_text(json.dumps({"grid": grid, "points": _points()}))
        with pytest.raises(RooflineError, match=says):
            load_chunk_table(bad)
