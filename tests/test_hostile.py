"""Hostile and absurd input (issue 15): one-line errors naming the flag, never a traceback;
mismatches named; work bounded before it starts."""

import warnings

import pytest
from click.testing import CliRunner

import roofline
from cli import main
from roofline.errors import RooflineError, RooflineWarning

GRAPH = "hardware_profiles/calibrations/h200-graph.json"


def run(*args):
    return CliRunner().invoke(main, list(args))


def one_line_error(r, *needles):
    assert r.exit_code != 0
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)  # no traceback
    msg = r.output.strip().splitlines()[-1]
    assert msg.startswith("Error:"), r.output
    for n in needles:
        assert n in msg, msg
    return msg


@pytest.fixture
def binary(tmp_path):
    p = tmp_path / "blob.json"
    p.write_bytes(bytes(range(256)) * 4)
    return str(p)


@pytest.mark.parametrize("flag", ["--card", "--model", "--calibration"])
def test_a_binary_file_given_as_a_json_input(binary, flag):
    args = {"--card": "rtx3060", "--model": "qwen2.5-1.5b"}
    args[flag] = binary
    r = run("predict", *[x for kv in args.items() for x in kv])
    one_line_error(r, "not a UTF-8 text file")


@pytest.mark.parametrize("flag", ["--card", "--model"])
def test_a_name_too_long_for_the_file_system(flag):
    args = {"--card": "rtx3060", "--model": "qwen2.5-1.5b", flag: "x" * 5000}
    msg = one_line_error(run("predict", *[x for kv in args.items() for x in kv]))
    assert len(msg) < 400  # the name is cut in the message


def test_a_calibration_of_another_card_is_refused():
    msg = one_line_error(run("predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--calibration", GRAPH),
                         "--calibration", "fitted on h200, not rtx3060")
    with pytest.raises(RooflineError, match="fitted on h200, not rtx3060"):
        roofline.predict("rtx3060", "qwen2.5-1.5b", [1], calibration=GRAPH)
    assert "--card h200" in msg


def test_past_the_models_context_and_bigger_than_the_card_warn_in_the_api_and_the_cli():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = roofline.predict("rtx3060", "qwen2.5-1.5b", [1], prompt_tokens=40_000)
    texts = [str(w.message) for w in caught if issubclass(w.category, RooflineWarning)]
    assert any("past qwen2.5-1.5b's max_position_embeddings (32,768)" in t for t in texts)
    assert p.meta()["warnings"] == texts[:1]
    r = run("waste", "--mix", "8x32", "--card", "rtx3060", "--model", "qwen2.5-72b")
    assert r.exit_code == 0
    assert "warning: qwen2.5-72b's weights alone" in r.stderr and "exceed rtx3060's memory" in r.stderr


def test_the_same_measurement_file_twice_is_refused():
    f = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
    one_line_error(run("fit", f, f, "--card", "rtx3060", "-o", "/dev/null"), "given twice")


def test_a_csv_with_a_byte_order_mark_reads(tmp_path):
    src = open("hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv", encoding="utf-8").read()
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeff".encode("utf-8") + src.encode("utf-8"))
    r = run("compare", str(p), "--calibration", "hardware_profiles/calibrations/rtx3060-hf-eager.json")
    assert r.exit_code == 0, r.output


def test_measurements_of_another_card_are_refused_by_compare():
    one_line_error(run("compare", "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv", "--calibration", GRAPH),
                   "taken on rtx3060, not h200")


@pytest.mark.parametrize("value,ok", [("50ms", 0.05), ("0.05s", 0.05), ("0.05", 0.05), ("50000us", 0.05),
                                      ("50", None), ("abc", None), ("-1ms", None), ("0", None), ("nan", None)])
def test_tpot_limits_take_their_unit(value, ok):
    r = run("choose", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--tpot-max", value, "--format", "json")
    if ok is None:
        msg = one_line_error(r, "--tpot-max")
        if value == "50":
            assert "write 50ms" in msg
    else:
        assert r.exit_code == 0, r.output
        import json

        assert json.loads(r.stdout)["limits"]["tpot_max_s"] == pytest.approx(ok)


def test_choose_keeps_the_memory_headroom_asked_for():
    full = roofline.choose("rtx3060", "qwen2.5-1.5b").as_dict()
    kept = roofline.choose("rtx3060", "qwen2.5-1.5b", memory_headroom=0.2).as_dict()
    memory = full["meta"]["memory_bytes"]
    assert full["binding"] == kept["binding"] == "memory"
    assert kept["peak_mem_bytes"] <= 0.8 * memory < kept["next"]["peak_mem_bytes"]
    assert kept["batch"] < full["batch"]
    one_line_error(run("choose", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--memory-headroom", "0.95"),
                   "--memory-headroom")


def test_calibrate_rejects_an_unknown_card_or_model_before_measuring(tmp_path):
    one_line_error(run("calibrate", "--card", "nope", "--model", "qwen2.5-0.5b", "--out", str(tmp_path)), "unknown card")
    one_line_error(run("calibrate", "--card", "h200", "--model", "nope", "--out", str(tmp_path)), "unknown model")
    assert not any(tmp_path.iterdir())  # nothing was measured or written


def test_a_gzip_compressed_json_reads_as_the_plain_one_and_a_damaged_or_oversized_one_is_one_line(tmp_path,
                                                                                                  monkeypatch):
    """The large measurement probes are stored gzip-compressed (``x.json.gz``; roofline.atomic.read_json
    reads ``x.json`` from it where the plain file is absent)."""
    import gzip
    import json

    from roofline import atomic
    from roofline.atomic import read_json

    data = {"probe": "attention-table", "points": [{"seconds": 1.5e-5, "matrices": 8}] * 50}
    (tmp_path / "p.json.gz").write_bytes(gzip.compress(json.dumps(data).encode(), mtime=0))
    assert read_json(tmp_path / "p.json") == data  # the fallback to p.json.gz
    assert read_json(tmp_path / "p.json.gz") == data
    (tmp_path / "p.json").write_text(json.dumps({"plain": True}))
    assert read_json(tmp_path / "p.json") == {"plain": True}  # a plain file, where present, wins
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(b'{"a": 1}')[:-6])  # truncated
    with pytest.raises(RooflineError, match="damaged gzip"):
        read_json(tmp_path / "bad.json.gz", "probe")
    (tmp_path / "notgz.json.gz").write_bytes(b'{"a": 1}')
    with pytest.raises(RooflineError, match="cannot read probe"):
        read_json(tmp_path / "notgz.json.gz", "probe")
    monkeypatch.setattr(atomic, "MAX_JSON_BYTES", 1000)  # a small file that inflates past the cap
    (tmp_path / "bomb.json.gz").write_bytes(gzip.compress(b"[" + b"0," * 5000 + b"0]"))
    assert (tmp_path / "bomb.json.gz").stat().st_size < 1000
    with pytest.raises(RooflineError, match="larger than any profile"):
        read_json(tmp_path / "bomb.json.gz")


def test_the_shipped_compressed_probes_read():
    from roofline.atomic import read_json

    table = read_json("hardware_profiles/measurements/h200-probe-attention-table-call68.json", "probe")
    assert table["probe"] == "attention-table" and len(table["points"]) > 1000
