"""Property-based hostile input (issue 15): whatever a parser or a command is given, it returns a
value or a one-line RooflineError / usage error, never a traceback, and refuses oversized work
before doing it. Timings are not asserted here (benchmarks/hostile_inputs.py measures them)."""

import json
import string

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import Duration, main, parse_batches, parse_ints
from roofline.calibration import calibration_from_dict
from roofline.errors import RooflineError
from roofline.hardware import card_from_dict
from roofline.measurements import read_measurements
from roofline.model_spec import ModelSpec

SETTINGS = settings(max_examples=int(__import__("os").environ.get("HOSTILE_EXAMPLES", 60)), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
junk = st.text(alphabet=string.printable + "µ\u202e\x00é中", max_size=40)
numberish = st.one_of(
    st.integers(-10**30, 10**30).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", "1e400", "-0", "0x10", "1_000", "١٢", "nan", "inf", "1..", "..4", "4-", "1-2-3"]), junk)


@SETTINGS
@given(st.lists(numberish, min_size=1, max_size=4).map(",".join))
def test_batch_lists(text):
    try:
        out = parse_batches(text)
    except RooflineError as exc:
        assert exc.field == "batches" and "\n" not in str(exc)
        return
    assert out == sorted(set(out)) and all(isinstance(b, int) and b >= 1 for b in out) and len(out) <= 2**17


@SETTINGS
@given(st.lists(numberish, min_size=1, max_size=4).map(",".join))
def test_int_lists(text):
    try:
        out = parse_ints(text, "prompt_tokens")
    except RooflineError as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(x, int) for x in out)


@SETTINGS
@given(st.one_of(numberish, st.tuples(numberish, st.sampled_from(["ms", "s", "us", "µs", "MS", " ms"])).map("".join)))
def test_durations(text):
    import click

    try:
        seconds = Duration(bare_max_s=1.0).convert(text, None, None)
    except click.BadParameter as exc:
        assert "\n" not in exc.format_message()
        return
    assert 0 < seconds < float("inf")


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True), junk),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(junk, children, max_size=4)),
    max_leaves=12)


def _mutations(base: dict):
    """base with one key dropped, set to junk, or one junk key added."""
    keys = sorted(base)
    return st.one_of(
        st.sampled_from(keys).map(lambda k: {kk: v for kk, v in base.items() if kk != k}),
        st.tuples(st.sampled_from(keys), json_values).map(lambda kv: {**base, kv[0]: kv[1]}),
        st.tuples(junk, json_values).map(lambda kv: {**base, kv[0]: kv[1]}),
        json_values,
    )


CARD = json.load(open("hardware_profiles/rtx3060.json"))
MODEL = json.load(open("roofline/catalog/qwen2.5-1.5b/config.json"))
CAL = json.load(open("hardware_profiles/calibrations/rtx3060-hf-eager.json"))


@SETTINGS
@given(_mutations(CARD))
def test_card_profiles(data):
    try:
        card_from_dict(data, "hostile.json")
    except RooflineError as exc:
        assert "\n" not in str(exc)


@SETTINGS
@given(_mutations(MODEL))
def test_model_configs(data):
    try:
        ModelSpec.from_config_dict(data, "hostile")
    except RooflineError as exc:
        assert "\n" not in str(exc)


@SETTINGS
@given(_mutations(CAL))
def test_calibrations(data):
    try:
        calibration_from_dict(data, "hostile.json")
    except RooflineError as exc:
        assert "\n" not in str(exc)


HEADER = "card,model,engine,kv_cache,prompt_tokens,gen_tokens,batch,ttft_s,tpot_s,peak_mem_gib"
ROW = "rtx3060,qwen2.5-1.5b,hf-eager,dynamic,128,128,1,0.044,0.02057,2.90"


@SETTINGS
@given(st.lists(st.one_of(st.just(ROW), junk, st.lists(numberish, min_size=10, max_size=10).map(",".join)),
                max_size=5),
       st.sampled_from([HEADER, HEADER.replace("batch", "bat"), "\ufeff" + HEADER, HEADER + ",batch", ""]))
def test_measurement_csvs(tmp_path_factory, rows, header):
    p = tmp_path_factory.mktemp("csv") / "m.csv"
    p.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    try:
        read_measurements(p)
    except RooflineError as exc:
        assert "\n" not in str(exc)


COMMANDS = {
    "predict": ["--card", "rtx3060", "--model", "qwen2.5-1.5b"],
    "bend": ["--card", "rtx3060", "--model", "qwen2.5-1.5b"],
    "choose": ["--card", "rtx3060", "--model", "qwen2.5-1.5b"],
}
OPTIONS = ["--prompt", "--gen", "--batches", "--tp", "--routing-skew", "--weight-dtype", "--kv-dtype", "--engine",
           "--kv-cache"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(COMMANDS)), st.lists(st.tuples(st.sampled_from(OPTIONS), numberish), max_size=3))
def test_commands_never_trace_back(command, extra):
    args = [command, *COMMANDS[command]]
    for flag, value in extra:
        if flag == "--batches" and command != "predict":
            continue
        args += [flag, value]
    r = CliRunner().invoke(main, args)
    if r.exit_code == 0:
        return
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args}: {r.exception!r}"
    last = r.output.strip().splitlines()[-1] if r.output.strip() else ""
    assert last.startswith("Error:"), (args, r.output)


@pytest.mark.parametrize("args", [
    ["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--batches", "1-10000000"],
    ["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--prompt", str(10**30)],
    ["choose", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--max-batch", str(10**9)],
    ["predict", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--tp", "100000"],
])
def test_oversized_work_is_refused_before_it_starts(args):
    r = CliRunner().invoke(main, args)
    assert r.exit_code != 0 and r.output.strip().splitlines()[-1].startswith("Error:")
