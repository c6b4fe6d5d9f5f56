"""Every page that starts llama.cpp's server starts it the same way, and with the flags the
tests start it with (issue 28, item 4: the pages disagreed on the server's flags)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def server_commands() -> dict[str, list[str]]:
    """Each docs page's ``python -m llama_cpp.server`` command, its continuation lines joined."""
    found: dict[str, list[str]] = {}
    for page in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]):
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")
        for line in text.splitlines():
            if re.search(r"-m llama_cpp\.server --", line):
                words = shlex.split(line.split("-m llama_cpp.server", 1)[1].rstrip("& "))
                found[f"{page.relative_to(ROOT)}: {line.strip()[:60]}"] = words
    return found


def flags(words: list[str]) -> dict[str, str]:
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--") and w != "--model"}


def test_the_pages_start_the_server_with_the_same_flags() -> None:
    found = server_commands()
    assert len(found) >= 3, found      # quality, bench and judges show one each
    seen = {where: flags(words) for where, words in found.items()}
    first = next(iter(seen.values()))
    for where, f in seen.items():
        assert f == first, f"{where}: {f} differs from {first}"


def test_the_pages_flags_are_the_ones_the_tests_use() -> None:
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    for where, words in server_commands().items():
        for flag, value in flags(words).items():
            if flag in ("--model_alias", "--port"):
                continue
            assert f'"{flag}"' in conftest, f"{where}: the tests never start the server with {flag}"
            if value in ("True", "False", "gemma", "127.0.0.1", "2048"):
                assert re.search(rf'"{flag}",\s*"{value}"', conftest), f"{where}: {flag} {value} is not what the tests use"
