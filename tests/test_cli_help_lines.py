"""Each command's line in its group's ``--help`` is a whole sentence: the first paragraph of
the command's docstring, one line in the source (Rich keeps a docstring's own line breaks in the
command list, so at 80 columns a wrapped summary was shown broken mid-sentence: issue 28, item 4),
ending as a sentence ends and shown in full."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from assay.cli.main import COMMANDS, GROUPS, load_command


def listed(group: list[str]) -> dict[str, str]:
    """The commands a group's --help lists, with their help text joined across lines."""
    res = subprocess.run([sys.executable, "-m", "assay.cli", *group, "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "400", "TERM": "dumb", "NO_COLOR": "1"}, timeout=120)
    assert res.returncode == 0, res.stderr
    rows: dict[str, str] = {}
    current = None
    for line in res.stdout.splitlines():
        m = re.match(r"^│ (\S+)\s{2,}(.*?)\s*│$", line)
        if m:
            current = m.group(1)
            rows[current] = m.group(2)
            continue
        m = re.match(r"^│\s{2,}(.*?)\s*│$", line)
        if m and current is not None and m.group(1):
            rows[current] += " " + m.group(1)
        elif not line.startswith("│"):
            current = None
    return rows


def summary(help_text: str) -> str:
    return " ".join(help_text.strip().split("\n\n")[0].split())


@pytest.mark.parametrize("group", [[]] + [[g] for g in sorted(GROUPS)])
def test_each_listed_help_line_is_the_whole_first_paragraph(group: list[str]) -> None:
    shown = listed(group)
    if group:
        commands = load_command(group[0]).commands
    else:
        commands = {name: load_command(name) for name, _, _ in COMMANDS}
    assert commands
    for name, command in commands.items():
        if command.hidden or name not in shown:
            continue
        first = (command.short_help or command.help or "").strip().split("\n\n")[0]
        assert "\n" not in first.strip(), f"{' '.join(group)} {name}: the summary spans lines: {first!r}"
        want = summary(first)
        assert want.endswith((".", ")")), f"{' '.join(group)} {name}: the summary does not end a sentence: {want!r}"
        assert shown[name] == want, f"{' '.join(group)} {name}: shown {shown[name]!r}, wanted {want!r}"
