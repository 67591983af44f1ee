"""roofline.gemm: the card's measured matmul table, looked up by shape."""

from __future__ import annotations

import json
import math

import pytest

from roofline.errors import RooflineError
from roofline.gemm import GemmTable, load_gemm_table


def _table(times):
    return GemmTable([{"m": m, "n": n, "k": k, "seconds": s} for (m, n, k), s in times.items()], "test")


# a 2 x 2 x 2 grid: M 16 / 64, N 128 / 512, K 256 / 1024, time = 1e-6 x M^0.5 x N x K / 32768
GRID = {(m, n, k): 1e-6 * math.sqrt(m) * n * k / 32768 for m in (16, 64) for n in (128, 512) for k in (256, 1024)}


def test_grid_points_are_read_exactly():
    t = _table(GRID)
    for (m, n, k), s in GRID.items():
        assert t.seconds(m, n, k) == pytest.approx(s, rel=1e-12)


def test_between_points_log_time_is_linear_in_log_shape():
    # a power law in each of M, N, K is reproduced exactly between the grid's points
    t = _table(GRID)
    for m, n, k in ((32, 256, 512), (20, 200, 300), (50, 500, 1000)):
        assert t.seconds(m, n, k) == pytest.approx(1e-6 * math.sqrt(m) * n * k / 32768, rel=1e-9)


def test_outside_the_grid():
    t = _table(GRID)
    top = t.seconds(64, 512, 1024)
    # beyond the largest M measured for an (N, K): in proportion to M (the rate has flattened)
    assert t.seconds(640, 512, 1024) == pytest.approx(10 * top, rel=1e-12)
    # beyond the largest N or K: in proportion (more tiles, or a longer reduction)
    assert t.seconds(64, 5120, 1024) == pytest.approx(10 * top, rel=1e-12)
    assert t.seconds(64, 512, 4096) == pytest.approx(4 * top, rel=1e-12)
    # below the smallest: the smallest's time (all fixed cost)
    assert t.seconds(1, 16, 8) == pytest.approx(GRID[(16, 128, 256)], rel=1e-12)


def test_the_largest_m_is_per_n_k():
    # the probe stops climbing M at a FLOP limit, so big (N, K) have fewer M: each extends its own
    times = dict(GRID)
    del times[(64, 512, 1024)]
    t = _table(times)
    assert t.seconds(64, 512, 1024) == pytest.approx(4 * GRID[(16, 512, 1024)], rel=1e-12)


def test_bad_tables_are_one_line_errors(tmp_path):
    with pytest.raises(RooflineError, match="no points"):
        GemmTable([], "x")
    with pytest.raises(RooflineError, match="not a full N x K grid"):
        _table({k: v for k, v in GRID.items() if k[1:] != (512, 1024)})
    with pytest.raises(RooflineError, match="seconds > 0"):
        _table({**GRID, (16, 128, 256): 0.0})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(RooflineError, match="not valid JSON"):
        load_gemm_table(bad)
    bad.write_text(json.dumps({"points": [{"m": 1}]}))
    with pytest.raises(RooflineError, match="every point needs numbers"):
        load_gemm_table(bad)
    with pytest.raises(RooflineError, match="cannot read"):
        load_gemm_table(tmp_path / "missing.json")


def test_the_shipped_h200_table():
    # hardware_profiles/measurements/h200-probe-gemm.json (device call 8): a 1,024-token prefill's
    # linears run well below the rate of a large one, and more so for narrow shapes
    t = load_gemm_table("measurements/h200-probe-gemm.json")

    def tflops(m, n, k):
        return 2 * m * n * k / t.seconds(m, n, k) / 1e12

    assert 400 < tflops(1024, 1536, 1536) < 650  # measured 525
    assert tflops(1024, 1536, 1536) < tflops(4096, 1536, 1536)
    assert tflops(64, 1536, 1536) < 0.2 * tflops(4096, 1536, 1536)
    # a small-M matmul reads its weights at a rate below the card's 4.8 TB/s
    w = 8192 * 8192 * 2
    assert 2e12 < w / t.seconds(1, 8192, 8192) < 4.8e12


def test_a_tables_rechecks_correct_the_points_they_re_timed(tmp_path):
    """A re-timing beside a table (calibrate/runs/gemm_recheck.py) sets each re-timed point to the
    table's larger-M time x the re-timed ratio of the two: (16, 64, 64) read 30 in the table, 10 at
    M 32; re-timed 9.5 and 9.0 (medians; another machine, a little faster), it becomes 10 x 9.5 / 9.0."""
    points = [{"m": m, "n": n, "k": 64, "seconds": s} for n in (64, 128)
              for m, s in ((16, 30e-6 if n == 64 else 12e-6), (32, 10e-6 if n == 64 else 13e-6))]
    recheck = {"points": [{"m": 16, "n": 64, "k": 64, "seconds": 30e-6, "m_after": 32, "seconds_after": 10e-6,
                           "again_s": [9.4e-6, 9.5e-6, 9.9e-6], "after_again_s": [9.0e-6, 8.0e-6, 9.1e-6]}]}
    plain, rechecked = tmp_path / "a", tmp_path / "b"
    for folder in (plain, rechecked):
        folder.mkdir()
        (folder / "x-probe-gemm.json").write_text(json.dumps({"points": points}))
    (rechecked / "x-probe-gemm-recheck-call1.json").write_text(json.dumps(recheck))
    assert load_gemm_table(plain / "x-probe-gemm.json").seconds(16, 64, 64) == pytest.approx(30e-6)
    t = load_gemm_table(rechecked / "x-probe-gemm.json")
    assert t.seconds(16, 64, 64) == pytest.approx(10e-6 * 9.5 / 9.0)
    assert t.seconds(16, 128, 64) == pytest.approx(12e-6)  # not re-timed: as measured
    assert "1 points re-timed by x-probe-gemm-recheck-call1.json" in t.source


def test_the_h100_tables_slow_points_were_the_measurements():
    """Device call 114 re-timed the H100 table's 151 points slower than a larger M: its (64, 16384,
    4096) read 103 us, re-timed 49.1 beside 53.2 at M 192 (55.6 in the table): now ~51 us."""
    from roofline.gemm import load_gemm_table

    t = load_gemm_table("measurements/h100-sxm-probe-gemm.json")
    assert "151 points re-timed" in t.source
    assert t.seconds(64, 16384, 4096) == pytest.approx(55.6e-6 * 49.1 / 53.2, rel=0.02)
