"""v0.1's outputs, captured before the step-model refactor (issue 8), for every command.

Each scenario is a CLI command line (JSON output). The card profiles and calibrations it uses are
copies of v0.1's files in tests/data/v01/, so later changes to the shipped data do not move these
numbers; catalog models are referred to by name (their config.json files do not change).

    python tests/regress_v01.py            # rewrite tests/data/v01/outputs.json (only ever from v0.1 code)

tests/test_regress_v01.py replays every scenario and compares with these outputs to 1e-9.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = "tests/data/v01"
OUTPUTS = ROOT / DATA / "outputs.json"

C3060 = ["--card", f"{DATA}/card-rtx3060.json"]
CH200 = ["--card", f"{DATA}/card-h200.json"]
CMI = ["--card", f"{DATA}/card-mi300x.json"]
CL4 = ["--card", f"{DATA}/card-l4.json"]
CA100 = ["--card", f"{DATA}/card-a100-80gb.json"]
CAL3060 = ["--calibration", f"{DATA}/rtx3060-hf-eager.json"]
CALG = ["--calibration", f"{DATA}/h200-graph.json"]
CALE = ["--calibration", f"{DATA}/h200-hf-eager.json"]
NOCAL = ["--no-calibration"]
REQ = f"{DATA}/requests.csv"
LESSON_CSV = "hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv"
GRAPH_CSV = "hardware_profiles/measurements/h200-graph.csv"

#: name -> command line (without --format json). Flags renamed since v0.1 are written with their new
#: names (--requests for waste's --lengths, --return-policy for --policy); simulate's static return
#: policy, v0.1's default early-return, is given explicitly.
SCENARIOS: dict[str, list[str]] = {
    # predict: the lesson, calibrated and pure, dtypes, caches, logits, long prompts, big models
    "predict-lesson": ["predict", *C3060, "--model", "qwen2.5-1.5b", *CAL3060],
    "predict-lesson-pure": ["predict", *C3060, "--model", "qwen2.5-1.5b", *NOCAL, "--batches", "1-40"],
    "predict-h200-graph-7b": ["predict", *CH200, "--model", "qwen2.5-7b", *CALG, "--batches", "1..1024,3,300",
                              "--prompt", "512", "--gen", "64", "--kv-dtype", "fp8"],
    "predict-h200-eager-static-all": ["predict", *CH200, "--model", "llama-3.1-8b", *CALE, "--kv-cache", "static",
                                      "--logits", "all", "--prompt", "300", "--gen", "2"],
    "predict-h200-graph-dynamic-gen1": ["predict", *CH200, "--model", "qwen2.5-0.5b", *CALG, "--kv-cache", "dynamic",
                                        "--gen", "1", "--batches", "1,5,77"],
    "predict-mi300x-70b-fp8": ["predict", *CMI, "--model", "llama-3.1-70b", *NOCAL, "--weight-dtype", "fp8",
                               "--prompt", "2048", "--gen", "512", "--batches", "1..256"],
    "predict-l4-int4": ["predict", *CL4, "--model", "mistral-7b-v0.3", *NOCAL, "--weight-dtype", "int4",
                        "--kv-dtype", "int8", "--prompt", "4000", "--gen", "1000"],
    "predict-a100-32b-graphcal": ["predict", *CA100, "--model", "qwen2.5-32b", *CALG, "--batches", "1..64"],
    "predict-3060-3b-int8": ["predict", *C3060, "--model", "qwen2.5-3b", *CAL3060, "--weight-dtype", "int8",
                             "--kv-dtype", "int4", "--kv-cache", "static", "--prompt", "1000", "--gen", "300"],
    # bend
    "bend-lesson": ["bend", *C3060, "--model", "qwen2.5-1.5b", *CAL3060],
    "bend-h200-graph-8b": ["bend", *CH200, "--model", "llama-3.1-8b", *CALG, "--prompt", "2048", "--gen", "64"],
    "bend-pure-never": ["bend", *CH200, "--model", "qwen2.5-3b", *NOCAL, "--prompt", "30000", "--gen", "100"],
    "bend-mi300x": ["bend", *CMI, "--model", "llama-3.2-1b", *NOCAL, "--weight-dtype", "fp16"],
    # choose
    "choose-lesson-ttft": ["choose", *C3060, "--model", "qwen2.5-1.5b", *CAL3060, "--ttft-max", "0.5"],
    "choose-h200-tpot": ["choose", *CH200, "--model", "qwen2.5-7b", *CALG, "--tpot-max", "0.02",
                         "--min-user-tok-s", "40", "--prompt", "1024", "--gen", "256"],
    "choose-memory": ["choose", *C3060, "--model", "llama-3.1-8b", *NOCAL, "--weight-dtype", "int8", "--max-batch", "500"],
    "choose-max-batch": ["choose", *CH200, "--model", "qwen2.5-0.5b", *CALG, "--max-batch", "64"],
    # waste
    "waste-tokens": ["waste", "--mix", "8x32,8x256"],
    "waste-lesson": ["waste", "--mix", "8x32,8x256", *C3060, "--model", "qwen2.5-1.5b", *CAL3060],
    "waste-early": ["waste", "--mix", "30x20,2x1000", "--batch", "32", *C3060, "--model", "qwen2.5-1.5b", *CAL3060,
                    "--return-policy", "early-return"],
    "waste-batches": ["waste", "--mix", "4x10,3x50,1x400", "--batch", "3", "--prompt", "512", *CH200, "--model",
                      "qwen2.5-7b", *CALG, "--kv-dtype", "fp8"],
    "waste-file": ["waste", "--requests", REQ, "--batch", "3", *CH200, "--model", "llama-3.1-8b", *CALE],
    "waste-file-tokens": ["waste", "--requests", REQ],
    # simulate
    "simulate-lesson": ["simulate", "--mix", "8x32,8x256", "--count", "300", *C3060, "--model", "qwen2.5-1.5b",
                        *CAL3060, "--batch", "16", "--arrival-rate", "6", "--seed", "1", "--return-policy", "early-return"],
    "simulate-all-at-0": ["simulate", "--mix", "30x20,2x1000", "--count", "200", *CH200, "--model", "qwen2.5-7b",
                          *CALG, "--batch", "8", "--return-policy", "whole-batch"],
    "simulate-file": ["simulate", "--requests", REQ, *CH200, "--model", "qwen2.5-0.5b", *CALE, "--batch", "3",
                      "--return-policy", "early-return"],
    "simulate-file-rate": ["simulate", "--requests", REQ, *CL4, "--model", "llama-3.2-3b", *NOCAL, "--batch", "4",
                           "--arrival-rate", "2", "--seed", "7", "--weight-dtype", "int4", "--return-policy", "early-return"],
    # fit and compare (fit writes its calibration to --output: the scenario runner gives it a temp file)
    "fit-lesson": ["fit", LESSON_CSV, *C3060, "-o", "{tmp}/fit-lesson.json"],
    "fit-graph-2": ["fit", GRAPH_CSV, *CH200, "--model", "qwen2.5-1.5b", "--model", "qwen2.5-7b", "-o",
                    "{tmp}/fit-graph.json"],
    "compare-graph": ["compare", GRAPH_CSV, *CALG, *CH200],
    "compare-lesson-min-batch": ["compare", LESSON_CSV, *CAL3060, *C3060, "--min-batch", "4"],
    "compare-graph-median": ["compare", GRAPH_CSV, *CALG, *CH200, "--tpot-statistic", "median", "--model",
                             "llama-3.1-8b"],
}


def run(name: str, args: list[str], tmp: Path) -> dict | list:
    from click.testing import CliRunner

    from cli import main

    argv = [a.replace("{tmp}", str(tmp)) for a in args] + ["--format", "json"]
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"{name}: exit {result.exit_code}: {result.output}")
    return json.loads(result.output)


def capture() -> dict:
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in SCENARIOS.items():
            out[name] = run(name, args, Path(tmp))
    return out


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    data = capture()
    OUTPUTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUTS} ({len(data)} scenarios)")
