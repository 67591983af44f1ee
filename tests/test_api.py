"""The Python API and the CLI give the same numbers (the CLI calls the API; this holds it)."""

import json

import pytest
from click.testing import CliRunner

import roofline
from cli import main

CARD_MODEL = ["--card", "h200", "--model", "qwen2.5-7b"]


def cli_json(*args):
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def plain(x):
    return json.loads(json.dumps(x, default=float))


def test_predict_agrees_whole():
    # roofline.predict returns exactly what the CLI prints: meta, rows and the bend
    api = roofline.predict("h200", "qwen2.5-7b", [1, 7, 300], prompt_tokens=512, gen_tokens=64, kv_dtype="fp8",
                           engine="graph")
    cli = cli_json("predict", *CARD_MODEL, "--batches", "1,7,300", "--prompt", "512", "--gen", "64",
                   "--kv-dtype", "fp8", "--engine", "graph")
    assert cli == plain(api.as_dict())
    assert set(cli) == {"meta", "rows", "bend"} and cli["bend"]["crossing_batch"] is not None


def test_a_scenario_object_gives_the_same_answers():
    sc = roofline.make_scenario(card="h200", model="qwen2.5-7b", prompt_tokens=512, gen_tokens=64, engine="graph")
    by_names = roofline.predict("h200", "qwen2.5-7b", [1, 9], prompt_tokens=512, gen_tokens=64, engine="graph")
    by_object = roofline.predict(scenario=sc, batches=[1, 9])
    assert plain(by_object.as_dict()) == plain(by_names.as_dict())
    assert roofline.bend(scenario=sc) == by_names.bend
    assert sc.replace(gen_tokens=65).gen_tokens == 65 and sc.gen_tokens == 64
    with pytest.raises(roofline.RooflineError, match="either scenario= or"):
        roofline.predict("h200", scenario=sc)


def test_fit_compare_and_calibrate_are_in_the_api(tmp_path):
    lesson = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
    cal = roofline.fit(lesson, card="rtx3060", output=tmp_path / "c.json")
    assert (tmp_path / "c.json").is_file() and cal.fitted_on == ["qwen2.5-1.5b"]
    cli = cli_json("fit", lesson, "--card", "rtx3060", "-o", str(tmp_path / "d.json"))
    assert cli["layer_overhead_s"] == pytest.approx(cal.layer_overhead_s, rel=1e-9)
    result = roofline.compare(lesson, calibration=tmp_path / "c.json")
    cli = cli_json("compare", lesson, "--calibration", str(tmp_path / "c.json"))
    assert cli == plain(result)
    assert result["tpot_mape_fraction"] < 0.06
    assert callable(roofline.calibrate)


def test_predict_rows_are_plain_records():
    rows = roofline.predict("rtx3060", "qwen2.5-1.5b", [1, 2]).rows()
    assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
    plain = (int, float, bool, str)
    for r in rows:
        assert all(type(v) in plain for k, v in r.items() if k not in ("expected_error", "extrapolation"))
        assert all(type(v) in plain for v in r["expected_error"].values())  # tpot/ttft/peak_mem fractions
        assert all(type(v) is str for v in r["extrapolation"])


def test_bend_agrees():
    assert cli_json("bend", *CARD_MODEL, "--engine", "graph") == roofline.bend("h200", "qwen2.5-7b", engine="graph").as_dict()


def test_choose_agrees():
    api = roofline.choose("h200", "qwen2.5-7b", ttft_max_s=1.0, tpot_max_s=0.02, engine="graph").as_dict()
    cli = cli_json("choose", *CARD_MODEL, "--ttft-max", "1.0", "--tpot-max", "0.02", "--engine", "graph")
    assert cli["batch"] == api["batch"]
    assert cli["throughput_tok_s"] == pytest.approx(api["throughput_tok_s"], rel=1e-12)


def test_simulate_agrees():
    api = roofline.simulate("rtx3060", "qwen2.5-1.5b", batch=8, mix="4x16,4x64", count=40, arrival_rate=3.0, seed=2)
    cli = cli_json("simulate", "--card", "rtx3060", "--model", "qwen2.5-1.5b", "--batch", "8", "--mix", "4x16,4x64",
                   "--count", "40", "--arrival-rate", "3", "--seed", "2")
    for server in ("static", "continuous"):
        assert cli[server] == plain(api[server])


def test_figure_holds_the_predictions():
    prediction = roofline.predict("rtx3060", "qwen2.5-1.5b", [1, 8, 64])
    fig = prediction.figure()
    ys = [list(t.y) for t in fig.data]
    assert [pytest.approx(v) for v in prediction.columns["throughput_tok_s"]] in ys


def test_every_api_function_survives_its_modules_being_imported():
    """No submodule of roofline shares a name with an API function (importing it would replace
    the function on the package: roofline.fit would become a module)."""
    import importlib
    import pkgutil

    import roofline as pkg

    names = {"predict", "bend", "choose", "waste", "simulate", "choose_server", "chart", "fit", "compare", "calibrate"}
    modules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    assert not names & modules
    for m in modules:
        importlib.import_module(f"roofline.{m}")
    assert all(callable(getattr(pkg, n)) for n in names)
