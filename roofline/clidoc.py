"""docs/cli.md, generated from the commands' own help so it cannot drift.

    .venv/bin/python -m roofline.clidoc > docs/cli.md

tests/test_clidoc.py fails when docs/cli.md differs from what this prints.
"""

from __future__ import annotations

import click

HEADER = """# Command reference

Generated from `roofline <command> --help` by `python -m roofline.clidoc > docs/cli.md`;
a test fails when this file is out of date. Exit codes: 0 success, 1 a domain or validation
error (one line on stderr), 2 a usage error.
"""


def render(group: click.Group) -> str:
    parts = [HEADER]
    settings = {"terminal_width": 100, "max_content_width": 100, "help_option_names": ["-h", "--help"]}
    ctx = click.Context(group, info_name="roofline", **settings)
    parts.append("## roofline\n\n```\n" + group.get_help(ctx).rstrip() + "\n```\n")
    for name in sorted(group.commands):
        cmd = group.commands[name]
        sub = click.Context(cmd, info_name=name, parent=ctx, **settings)
        parts.append(f"## roofline {name}\n\n```\n" + cmd.get_help(sub).rstrip() + "\n```\n")
    return "\n".join(parts)


def main() -> None:
    from cli import main as group

    print(render(group), end="")


if __name__ == "__main__":
    main()
