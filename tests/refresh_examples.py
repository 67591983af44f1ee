"""Rewrite the console examples of the docs with what the commands print now.

    .venv/bin/python tests/refresh_examples.py

Each ```console block's `$ roofline ...` lines are rerun and their output replaced; a block that
elides lines with '...' keeps its shown lines only where they are still printed (it is reported
for a manual look otherwise). tests/test_docs_examples.py checks the result.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_docs_examples import DOCS, SKIP  # noqa: E402


def run(argv: list[str]) -> str:
    from click.testing import CliRunner

    from cli import main

    result = CliRunner().invoke(main, argv)
    if result.exit_code != 0:
        raise SystemExit(f"roofline {' '.join(argv)}: exit {result.exit_code}: {result.output}")
    return result.output.rstrip("\n")


def refresh_block(block: str, where: str) -> str:
    parts = re.split(r"^(\$ (?:\.venv/bin/)?roofline .*)$", block, flags=re.M)
    out = [parts[0]]
    for cmd, text in zip(parts[1::2], parts[2::2]):
        argv = shlex.split(cmd.split("roofline ", 1)[1])
        out.append(cmd)
        if argv[0] in SKIP:
            out.append(text)
            continue
        got = run(argv)
        old = text.removeprefix("\n").rstrip("\n")
        if "\n...\n" in f"\n{old}\n":
            lines = got.splitlines()
            missing = [ln for ln in old.splitlines() if ln != "..." and ln not in lines]
            if missing:
                print(f"{where}: `{cmd}` elides lines; now missing: {missing[:3]} (edit by hand)")
            out.append(text)
            continue
        out.append("\n" + got + "\n")
    return "".join(out)


def main() -> None:
    for doc in DOCS:
        text = doc.read_text()
        new = re.sub(r"(```console\n)(.*?)(```)", lambda m: m.group(1) + refresh_block(m.group(2), doc.name) + m.group(3),
                     text, flags=re.S)
        if new != text:
            doc.write_text(new)
            print(f"rewrote {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
