"""The measurement CSV: round trip, free column order, and errors that name the file and line."""

from __future__ import annotations

import os

import pytest

from roofline.errors import RooflineError
from roofline.measurements import (
    REQUIRED_COLUMNS,
    MeasurementRow,
    format_measurements,
    read_measurements,
    rows_to_dicts,
    write_measurements,
)

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD = "h200,qwen2.5-1.5b,hf-eager,dynamic,128,128,8,0.133,0.01807,2.98"


def _row(**kw) -> MeasurementRow:
    base = dict(card="h200", model="qwen2.5-1.5b", engine="graph", kv_cache="static",
                prompt_tokens=128, gen_tokens=128, batch=1, ttft_s=0.044, tpot_s=0.02057,
                peak_mem_gib=2.9)
    base.update(kw)
    return MeasurementRow(**base)


def _write(tmp_path, text: str, name: str = "m.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_round_trip_keeps_every_value_and_extra_columns(tmp_path):
    rows = [
        _row(batch=1, tpot_median_s=0.1 + 0.2, tpot_p10_s=1e-5, tpot_p90_s=0.03, tpot_std_s=0.0,
             n_decode_steps=127, e2e_s=2.65, gpu="NVIDIA H200", driver="580.159.04",
             torch="2.11.0+cu130", transformers="5.17.0", timestamp="2026-11-30T00:00:00+00:00",
             extra={"note": "a, quoted \"cell\""}),
        _row(batch=2, ttft_s=None, peak_mem_gib=None, extra={"other": "7"}),
        _row(batch=4, status="oom", ttft_s=None, tpot_s=None, peak_mem_gib=None),
    ]
    path = write_measurements(tmp_path / "sub" / "m.csv", rows)
    back = read_measurements(path)
    assert back == rows
    assert back[0].tpot_median_s == 0.1 + 0.2  # floats survive exactly (repr, not rounding)
    assert back[0].extra == {"note": 'a, quoted "cell"', "other": ""}
    assert back[1].extra == {"note": "", "other": "7"}
    assert [r.ok for r in back] == [True, True, False]


def test_columns_in_any_order_with_extra_columns(tmp_path):
    cols = list(reversed(REQUIRED_COLUMNS)) + ["my_col"]
    values = dict(zip(REQUIRED_COLUMNS, GOOD.split(",")))
    values["my_col"] = "x"
    text = ",".join(cols) + "\n" + ",".join(values[c] for c in cols) + "\n"
    (row,) = read_measurements(_write(tmp_path, text))
    assert (row.batch, row.tpot_s, row.ttft_s, row.kv_cache) == (8, 0.01807, 0.133, "dynamic")
    assert row.status == "ok"  # absent status column means ok
    assert row.extra == {"my_col": "x"}


def test_peak_mem_bytes_uses_gib(tmp_path):
    (row,) = read_measurements(_write(tmp_path, f"{HEADER}\n{GOOD}\n"))
    assert row.peak_mem_bytes == pytest.approx(2.98 * 2**30)
    assert _row(peak_mem_gib=None).peak_mem_bytes is None


def test_blank_ttft_and_peak_are_allowed(tmp_path):
    text = f"{HEADER}\nh200,m,graph,static,128,128,1,,0.005,\n"
    (row,) = read_measurements(_write(tmp_path, text))
    assert row.ttft_s is None and row.peak_mem_gib is None and row.tpot_s == 0.005


def test_oom_row_may_have_blank_timings(tmp_path):
    text = f"{HEADER},status\nh200,m,graph,static,128,128,512,,,,oom\n"
    (row,) = read_measurements(_write(tmp_path, text))
    assert not row.ok and row.tpot_s is None and row.batch == 512


def test_blank_lines_are_skipped_and_line_numbers_still_count_them(tmp_path):
    text = f"{HEADER}\n{GOOD}\n\n{GOOD.replace(',8,', ',0,')}\n"
    with pytest.raises(RooflineError, match=r"m\.csv:4: batch"):
        read_measurements(_write(tmp_path, text))


@pytest.mark.parametrize(
    "text, where, what",
    [
        ("", "m.csv", "empty file"),
        ("   \n\n", "m.csv", "empty file"),
        (f"{HEADER}\n", "m.csv", "no data rows"),
        (HEADER.replace(",tpot_s", "") + "\n" + GOOD + "\n", "m.csv:1", "missing column.*tpot_s"),
        (f"{HEADER},batch\n{GOOD},8\n", "m.csv:1", "duplicate column.*batch"),
        (f"{HEADER}\n{GOOD}\n{GOOD.replace(',8,', ',eight,')}\n", "m.csv:3", "batch: 'eight' is not a number"),
        (f"{HEADER}\n{GOOD.replace(',8,', ',2.5,')}\n", "m.csv:2", "batch: '2.5' is not a whole number"),
        (f"{HEADER}\n{GOOD.replace(',8,', ',0,')}\n", "m.csv:2", "batch: must be > 0"),
        (f"{HEADER}\n{GOOD.replace(',8,', ',-4,')}\n", "m.csv:2", "batch: must be > 0"),
        (f"{HEADER}\n{GOOD.replace('dynamic', 'paged')}\n", "m.csv:2", "kv_cache: 'paged' is not one of"),
        (f"{HEADER}\n{GOOD.replace('0.01807', 'fast')}\n", "m.csv:2", "tpot_s: 'fast' is not a number"),
        (f"{HEADER}\n{GOOD.replace('0.01807', '')}\n", "m.csv:2", "tpot_s: must not be blank"),
        (f"{HEADER}\n{GOOD.replace('0.01807', '0')}\n", "m.csv:2", "tpot_s: must be > 0"),
        (f"{HEADER}\n{GOOD.replace('0.133', '-0.1')}\n", "m.csv:2", "ttft_s: must be >= 0"),
        (f"{HEADER}\n{GOOD.replace('0.133', 'nan')}\n", "m.csv:2", "ttft_s: must be a finite number"),
        (f"{HEADER}\n{GOOD.replace('h200,', ',', 1)}\n", "m.csv:2", "card: must not be blank"),
        (f"{HEADER}\n{GOOD}\n{GOOD},extra\n", "m.csv:3", "11 cells but the header has 10 columns"),
        (f"{HEADER}\n{GOOD.rsplit(',', 1)[0]}\n", "m.csv:2", "9 cells but the header has 10"),
        (f"{HEADER},status\n{GOOD},crashed\n", "m.csv:2", "status: 'crashed' is not one of"),
    ],
)
def test_malformed_csv_names_file_line_and_problem(tmp_path, text, where, what):
    path = _write(tmp_path, text)
    with pytest.raises(RooflineError, match=what) as info:
        read_measurements(path)
    message = str(info.value)
    assert message.startswith(str(tmp_path / where)), message
    assert "\n" not in message


def test_missing_file_is_a_roofline_error(tmp_path):
    with pytest.raises(RooflineError, match="no such file"):
        read_measurements(tmp_path / "absent.csv")


def test_row_validation_in_code_too():
    with pytest.raises(ValueError, match="batch: must be > 0"):
        _row(batch=0)
    with pytest.raises(ValueError, match="kv_cache"):
        _row(kv_cache="paged")


def test_write_replaces_atomically_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements(path, [_row(batch=1)])
    write_measurements(path, [_row(batch=1), _row(batch=2)])
    assert [r.batch for r in read_measurements(path)] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "m.csv"
    write_measurements(path, [_row(batch=1)])
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_measurements(path, [_row(batch=1), _row(batch=2)])
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]


def test_rows_to_dicts_and_text_format():
    rows = [_row(batch=4, ttft_s=None, extra={"note": "n"})]
    (d,) = rows_to_dicts(rows)
    assert d["batch"] == 4 and d["ttft_s"] is None and d["note"] == "n" and d["status"] == "ok"
    lines = format_measurements(rows).splitlines()
    assert lines[0].split(",")[: len(REQUIRED_COLUMNS)] == list(REQUIRED_COLUMNS)
    assert lines[0].endswith(",note")
    assert lines[1].startswith("h200,qwen2.5-1.5b,graph,static,128,128,4,,0.02057,2.9,ok,")
