"""The console examples in README.md and the tutorial are real: each `$ roofline ...` line is run
and its output must match the block exactly (blocks that elide lines with '...' are checked line
by line for the lines shown)."""

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "docs" / "tutorial-static-batching.md", ROOT / "docs" / "batching.md",
        ROOT / "docs" / "serving.md"]
SKIP = ("chart", "calibrate", "fit")  # write files or need a GPU: not replayed


def examples():
    for doc in DOCS:
        for block in re.findall(r"```console\n(.*?)```", doc.read_text(), flags=re.S):
            parts = re.split(r"^\$ (?:\.venv/bin/)?roofline (.*)$", block, flags=re.M)
            for args, out in zip(parts[1::2], parts[2::2]):
                argv = shlex.split(args)
                if argv[0] in SKIP:
                    continue
                yield pytest.param(argv, out.removeprefix("\n").rstrip("\n"), id=f"{doc.name}: {args[:60]}")


@pytest.mark.parametrize("argv, expected", list(examples()))
def test_console_example_matches(argv, expected):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    got = result.output.rstrip("\n")
    if "\n...\n" in f"\n{expected}\n":
        got_lines = got.splitlines()
        for line in expected.splitlines():
            if line != "...":
                assert line in got_lines, line
    else:
        assert got == expected


def test_there_are_examples():
    assert len(list(examples())) >= 8
