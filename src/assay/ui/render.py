"""The Jinja2 environment shared by the dashboard and the report, and its helpers.

Autoescaping is on for every template: whatever a row holds (responses, contexts, inputs,
reasons, run names) is escaped where it is shown. Only two kinds of value are inserted
unescaped, both built by assay itself: the SVG of :mod:`assay.ui.charts` (which escapes the
text it draws) and the stylesheet.
"""

from __future__ import annotations

import datetime as dt
import math
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from assay.bench.perf_compare import point_label
from assay.results import input_field

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Fields of a row shown as text blocks, in this order; the rest are shown as JSON.
TEXT_FIELDS = ("query", "response", "ground_truth")
RESULT_CLASS = {"pass": "pass", "fail": "fail", "unknown": "unknown", "not_applicable": "na"}


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def pct(v: Any) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def signed(v: Any, digits: int = 3) -> str:
    return "—" if v is None else f"{v:+.{digits}f}"


def when(ts: Any) -> str:
    if not ts:
        return "—"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def duration(s: Any) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def trunc(v: Any, n: int = 120) -> str:
    if v is None:
        return ""
    s = v if isinstance(v, str) else as_json(v, indent=False)
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def as_json(v: Any, indent: bool = True) -> str:
    opt = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(v, option=opt | orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:
        return str(v)


def safe_href(uri: Any) -> str | None:
    """A document URI as a link target only when it is http(s); anything else (``javascript:``,
    ``data:``, relative paths) is shown as text, never linked."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urlsplit(uri.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return uri.strip()
    return None


def result_class(score: dict[str, Any] | None) -> str:
    if not score:
        return "na"
    if score.get("status") == "error":
        return "error"
    if score.get("status") == "skipped":
        return "skipped"
    return RESULT_CLASS.get(score.get("result") or "", "unknown")


def result_label(score: dict[str, Any] | None) -> str:
    if not score:
        return "—"
    if score.get("status") in ("error", "skipped"):
        return score["status"]
    return {"not_applicable": "n/a"}.get(score.get("result") or "", score.get("result") or "—")


def field(inputs: dict[str, Any], name: str) -> Any:
    return input_field(inputs, name)


def other_inputs(inputs: dict[str, Any]) -> list[tuple[str, Any]]:
    shown = {"inputs." + f for f in (*TEXT_FIELDS, "history", "contexts", "context", "id")}
    return [(k[len("inputs."):] if k.startswith("inputs.") else k, v) for k, v in inputs.items() if k not in shown]


def rate_line(agg: dict[str, Any] | None) -> tuple[str, str] | None:
    """The rate a metric card leads with: the defect rate for harms, else the pass rate."""
    if not agg:
        return None
    if agg.get("defect_rate") is not None:
        return "defect rate", pct(agg["defect_rate"])
    if agg.get("pass_rate") is not None:
        return "pass rate", pct(agg["pass_rate"])
    return None


# Benchmark values: latencies are kept in seconds and shown in ms; token rates as they are.
TOKEN_RATES = ("gtps", "ttps")


def perf(v: Any, metric: str = "ttft") -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "—"
    v = float(v) * (1 if metric in TOKEN_RATES else 1000)
    return f"{v:,.1f}" if abs(v) < 10_000 else f"{v:,.0f}"


def perf_signed(v: Any, metric: str = "ttft") -> str:
    if not isinstance(v, (int, float)):
        return "—"
    return ("+" if v >= 0 else "−") + perf(abs(v), metric)


def perf_unit(metric: str) -> str:
    return "tok/s" if metric in TOKEN_RATES else "ms"


def rate(v: Any) -> str:
    """A throughput: requests or tokens per second."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "—"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


@lru_cache(maxsize=1)
def stylesheet() -> str:
    return (STATIC / "app.css").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=fmt, pct=pct, signed=signed, when=when, trunc=trunc, as_json=as_json,
                       duration=duration, result_class=result_class, result_label=result_label,
                       perf=perf, perf_signed=perf_signed, perf_unit=perf_unit, rate=rate, point_label=point_label)
    env.globals.update(safe_href=safe_href, field=field, other_inputs=other_inputs, rate_line=rate_line,
                       TEXT_FIELDS=TEXT_FIELDS)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def inline_stylesheet() -> Markup:
    """The stylesheet for a ``<style>`` element: assay's own file, never user text."""
    css = stylesheet()
    assert "</" not in css
    return Markup(css)
