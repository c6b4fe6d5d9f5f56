"""A perf run on one time axis (``--out``: ``timeline.svg``): each request's TTFT (or E2E when not
streamed) at its send time, with the server's scraped counters (``--server-metrics``: requests
running and queued, KV-cache use) in panels beneath, sharing the run's seconds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import escape

from assay.ui.bench_charts import PALETTE, nice_ticks, svg_text
from assay.ui.charts import GRID, MUTED, number, svg_root

PANELS = (("latency", "ms"), ("running", "requests"), ("queued", "requests"), ("kv_cache_usage", "share"))


def _series(summary: Mapping[str, Any], requests: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    starts = {i: (p.get("window_s") or [0.0])[0] for i, p in enumerate(summary.get("points") or [])}
    lat = []
    for r in requests:
        v = r.get("ttft") if r.get("ttft") is not None else r.get("e2e")
        if v is not None and r.get("status") == "ok" and r.get("point") in starts:
            lat.append((starts[r["point"]] + float(r.get("sent") or 0.0), float(v) * 1e3))
    out = {"latency": sorted(lat)}
    for s in (summary.get("telemetry") or {}).get("samples") or []:
        for k in ("running", "queued", "kv_cache_usage"):
            if isinstance(s.get(k), (int, float)):
                out.setdefault(k, []).append((float(s["t"]), float(s[k])))
    return {k: v for k, v in out.items() if v}


def timeline(summary: Mapping[str, Any], requests: Sequence[Mapping[str, Any]], *, width: int = 720,
             panel: int = 110) -> str | None:
    """The SVG, or None when the run has nothing to draw on a time axis."""
    series = _series(summary, requests)
    if "latency" not in series:
        return None
    names = [(k, u) for k, u in PANELS if k in series]
    t_hi = max(t for pts in series.values() for t, _ in pts) or 1.0
    pad_l, pad_r, gap = 56, 12, 26
    height = len(names) * (panel + gap) + 30
    body: list[str] = []

    def x(t: float) -> float:
        return pad_l + (width - pad_l - pad_r) * t / t_hi

    for n, (key, unit) in enumerate(names):
        top = 20 + n * (panel + gap)
        pts = series[key]
        y_hi = max(v for _, v in pts) * 1.1 or 1.0

        def y(v: float, top: float = top, y_hi: float = y_hi) -> float:
            return top + panel * (1 - v / y_hi)

        label = "TTFT per request" if key == "latency" else key.replace("_", " ")
        body.append(svg_text(pad_l, top - 6, f"{label} ({unit})", size=11))
        for t in nice_ticks(0, y_hi, 3):
            body.append(f'<line x1="{pad_l}" y1="{y(t):.1f}" x2="{width - pad_r}" y2="{y(t):.1f}" stroke="{GRID}"/>')
            body.append(svg_text(pad_l - 6, y(t) + 3, number(t), anchor="end"))
        color = PALETTE[n % len(PALETTE)]
        if key == "latency":
            body += [f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="1.8" fill="{color}"><title>{escape(number(v))} ms at '
                     f'{escape(number(t))} s</title></circle>' for t, v in pts]
        else:
            line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
            body.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    bottom = 20 + len(names) * (panel + gap) - gap
    for t in nice_ticks(0, t_hi, 6):
        body.append(f'<line x1="{x(t):.1f}" y1="{bottom}" x2="{x(t):.1f}" y2="{bottom + 4}" stroke="{MUTED}"/>')
        body.append(svg_text(x(t), bottom + 15, number(t), anchor="middle"))
    body.append(svg_text(pad_l + (width - pad_l) / 2, height - 2, "seconds into the run", anchor="middle"))
    return str(svg_root(width, height, body, "latency and server counters over the run"))


__all__ = ["timeline"]
