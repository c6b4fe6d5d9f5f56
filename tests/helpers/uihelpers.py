"""Payloads, the test metric, the rows and the escaping check shared by the dashboard tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from assay.metrics.base import Score, metric

# Payloads that would run script (or set window.__xss) if anything reached the page unescaped.
XSS_SCRIPT = "<script>window.__xss=1;alert('xss')</script>"
XSS_IMG = "<img src=x onerror=\"window.__xss=2;alert(2)\">"
XSS_SVG = "<svg onload=\"window.__xss=3\"></svg>"
XSS_ATTR = "\" onmouseover=\"window.__xss=4\" x=\""
XSS_JS_URI = "javascript:window.__xss=5;alert(5)"
PAYLOADS = (XSS_SCRIPT, XSS_IMG, XSS_SVG, XSS_ATTR)
RAW_MARKERS = ("<script>window.__xss", "<img src=x onerror", "<svg onload", "onmouseover=\"window")

N = 40


@metric("ui_judge", threshold=3, scale="1-5")
def ui_judge(query: str, response: str) -> Score:
    """A judge stand-in: a score from the row number, a reason carrying payloads; errors on row 13."""
    i = int(query.split("#")[1].split(" ")[0])
    if i == 13:
        raise RuntimeError(f"judge broke {XSS_SCRIPT}")
    bump = 1 if "v2" in response and i % 4 == 0 else 0
    s = 1 + (i + bump) % 5
    return Score(value=s, reason=f"row {i} reason {XSS_IMG} {XSS_SCRIPT} {XSS_ATTR}")


def make_rows(version: str) -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        row = {
            "id": f"row-{i:03d}",
            "query": f"question #{i} {XSS_SVG}",
            "response": f"{version} answer {i} {XSS_SCRIPT} {XSS_IMG}" + (" zebra_%word" if i == 7 else ""),
            "contexts": [{"content": f"context {XSS_IMG}", "doc_uri": XSS_JS_URI, "title": XSS_ATTR},
                         {"content": "plain context", "doc_uri": f"https://docs.example.com/{i}"}],
        }
        if i % 10 != 9:            # rows 9, 19, 29, 39 have no ground truth: f1_score is skipped there
            row["ground_truth"] = (f"unrelated words {i}" if i % 6 == 0
                                   else f"{version if i % 2 else 'v1'} answer {i}")
        rows.append(row)
    return rows


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of the page with its attributes, as a browser's parser reads them."""
    p = _Tags()
    p.feed(html)
    return p.tags


def assert_escaped(html: str) -> None:
    """No payload reaches the page as markup: no script element, no event-handler attribute,
    no javascript: URL in any attribute, whatever the evaluated text held."""
    for raw in RAW_MARKERS:
        assert raw not in html, raw
    for tag, attrs in tags(html):
        assert tag not in ("script", "iframe", "object", "embed", "img"), tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            assert "javascript:" not in (value or "").replace(" ", "").lower() or name in ("title", "value"), \
                (tag, name, value) and "href='javascript:" not in html


def serve_ui(store_path: str, log: Path | None = None) -> Iterator[str]:
    """``assay ui`` on a free loopback port over ``store_path``, through the CLI; yields its base
    URL once ``/healthz`` answers, and stops it after (use with ``yield from`` in a fixture).
    ``log``: a file for what the server prints (else a pipe)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = open(log, "w") if log is not None else subprocess.PIPE
    proc = subprocess.Popen([sys.executable, "-m", "assay.cli", "ui", "--host", "127.0.0.1", "--port", str(port),
                             "--store", store_path], stdout=sink, stderr=subprocess.STDOUT, text=True)
    if log is not None:
        sink.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            said = proc.stdout.read() if proc.stdout else log.read_text() if log else ""
            pytest.fail(f"assay ui did not start: {said}")
        time.sleep(0.1)
    yield base
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
