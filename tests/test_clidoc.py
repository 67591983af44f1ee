from pathlib import Path

from cli import main
from roofline.clidoc import render

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_cli_reference_is_up_to_date():
    # regenerate with: .venv/bin/python -m roofline.clidoc > docs/cli.md
    assert DOC.read_text() == render(main)


def test_reference_names_every_command():
    text = render(main)
    for name in main.commands:
        assert f"## roofline {name}\n" in text
