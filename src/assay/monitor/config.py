"""``monitor.yaml``: what ``assay monitor`` scores online, how often, and when it alerts.

Read strictly (:func:`load_config`): an unknown key, a missing one or a bad value is one
:class:`~assay.errors.AssayError` line naming the file, the line and the field
(``monitor.yaml:7: metrics.groundedness.sample: must be a share from 0 to 1, got 2``). The format
is documented in docs/monitor.md. :func:`sampled` is the sampling decision: the first 8 bytes of
``sha256(trace_id + metric)`` read as a fraction of 2^64, below the rate, so a rerun, a restart or
another process picks the same traces.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.engine.gates import Gate, parse_gate
from assay.errors import AssayError

WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_WINDOW = "5m"


def duration(text: Any) -> float:
    """``"5m"`` / ``"1h"`` / ``"1d"`` / ``"30s"`` in seconds (above 0); ValueError otherwise."""
    m = WINDOW.match(str(text))
    if not m or isinstance(text, bool) or float(m[1]) <= 0:
        raise ValueError(f"a duration such as 30s, 5m, 1h or 1d, got {text!r}")
    return float(m[1]) * UNITS[m[2]]


def sampled(trace_id: str, metric: str, rate: float) -> bool:
    """Whether ``metric`` scores the trace: a hash of the trace id and the metric, not chance."""
    if rate >= 1:
        return True
    h = hashlib.sha256(f"{trace_id}{metric}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64 < rate


@dataclass
class Filters:
    """Which traces a metric looks at: the root span's service, a span with this name, a span
    with these attributes (all equal; the same span as the name when both are given)."""

    service: str | None = None
    span_name: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def on_spans(self) -> bool:
        return bool(self.span_name or self.attributes)


@dataclass
class MetricConfig:
    name: str
    sample: float = 1.0
    window: str = DEFAULT_WINDOW
    window_s: float = 300.0
    per: str = "trace"
    judge: str | None = None
    max_cost_per_hour: float | None = None
    timeout: float | None = None
    max_attempts: int | None = None
    max_consecutive_failures: int | None = None
    filters: Filters = field(default_factory=Filters)
    alerts: list[Gate] = field(default_factory=list)
    baseline: str | None = None
    min_traces: int = 5
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Webhook:
    url: str
    timeout: float = 5.0


@dataclass
class Export:
    """Where the scores go as OpenTelemetry ``gen_ai.evaluation.result`` events (OTLP/HTTP logs):
    ``endpoint`` is the full ``/v1/logs`` URL."""

    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    service_name: str = "assay-monitor"


@dataclass
class MonitorConfig:
    path: str | None = None
    metrics: dict[str, MetricConfig] = field(default_factory=dict)
    interval: float = 5.0
    lookback: float = 3600.0
    retry_after: float = 30.0
    batch: int = 200
    lease: float = 60.0           # seconds a lease on a trace lasts unless renewed (renewed while it is scored)
    log: bool = True
    webhook: Webhook | None = None
    export: Export | None = None


class _Bad(Exception):
    def __init__(self, node: Any, where: str, message: str):
        super().__init__(message)
        self.line = node.start_mark.line + 1 if node is not None else None
        self.where, self.message = where, message


def _mapping(node: Any, where: str, known: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise _Bad(node, where, "must be a mapping of keys to values")
    out: dict[str, tuple[Any, Any]] = {}
    for k, v in node.value:
        key = str(k.value)
        at = f"{where}.{key}" if where else key
        if known and key not in known:
            raise _Bad(k, at, f"unknown key {key!r}; the keys here are {', '.join(known)}")
        if key in out:
            raise _Bad(k, at, "given twice")
        out[key] = (k, v)
    return out


def _scalar(node: Any, where: str) -> Any:
    import yaml

    if not isinstance(node, yaml.ScalarNode):
        raise _Bad(node, where, "must be a single value")
    return yaml.safe_load(yaml.serialize(node))


def _number(node: Any, where: str, low: float, high: float = math.inf, what: str = "a number") -> float:
    v = _scalar(node, where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (low <= v <= high) or not math.isfinite(v):
        raise _Bad(node, where, f"must be {what}, got {v!r}")
    return float(v)


def _text(node: Any, where: str) -> str:
    v = _scalar(node, where)
    if v is None or isinstance(v, (dict, list)) or str(v).strip() == "":
        raise _Bad(node, where, f"must be text, got {v!r}")
    return str(v)


def _duration(node: Any, where: str) -> tuple[str, float]:
    v = _scalar(node, where)
    try:
        return str(v).strip(), duration(v)
    except ValueError as e:
        raise _Bad(node, where, f"must be {e}") from None


METRIC_KEYS = ("sample", "window", "per", "judge", "max_cost_per_hour", "timeout", "max_attempts",
               "max_consecutive_failures", "filters", "alerts", "baseline", "min_traces", "options")


def _metric(name: str, node: Any, where: str) -> MetricConfig:  # noqa: C901 - one branch per key
    import yaml

    from assay.metrics.base import REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    m = REGISTRY.get(name)
    mc = MetricConfig(name=name)
    if m is None:
        raise _Bad(node, where, f"unknown metric {name!r}; see `assay metrics`")
    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return mc
    for key, (_, v) in _mapping(node, where, METRIC_KEYS).items():
        at = f"{where}.{key}"
        if key == "sample":
            mc.sample = _number(v, at, 0, 1, "a share from 0 to 1")
        elif key == "window":
            mc.window, mc.window_s = _duration(v, at)
        elif key == "per":
            mc.per = _text(v, at)
            if mc.per not in ("trace", "call"):
                raise _Bad(v, at, f"must be 'trace' or 'call', got {mc.per!r}")
        elif key == "judge":
            mc.judge = _text(v, at)
        elif key == "max_cost_per_hour":
            mc.max_cost_per_hour = _number(v, at, 0, what="a cost in USD, 0 or more")
        elif key == "timeout":
            mc.timeout = _number(v, at, 1e-3, what="seconds above 0")
        elif key in ("max_attempts", "max_consecutive_failures", "min_traces"):
            n = _number(v, at, 0 if key == "max_consecutive_failures" else 1, what="a whole number")
            if n != int(n):
                raise _Bad(v, at, f"must be a whole number, got {n!r}")
            setattr(mc, key, int(n))
        elif key == "filters":
            mc.filters = _filters(v, at)
        elif key == "alerts":
            mc.alerts = _alerts(v, at, m)
        elif key == "baseline":
            mc.baseline = _text(v, at)
        else:
            mc.options = {str(k): x for k, x in (yaml.safe_load(yaml.serialize(v)) or {}).items()} \
                if isinstance(v, yaml.MappingNode) else _raise(v, at, "must be a mapping of run options")
    return mc


def _raise(node: Any, where: str, message: str) -> Any:
    raise _Bad(node, where, message)


def _filters(node: Any, where: str) -> Filters:
    import yaml

    f = Filters()
    for key, (_, v) in _mapping(node, where, ("service", "span_name", "attributes")).items():
        at = f"{where}.{key}"
        if key == "attributes":
            attrs = _mapping(v, at, ())
            f.attributes = {k: _scalar(n, f"{at}.{k}") for k, (_, n) in attrs.items()}
            if not isinstance(v, yaml.MappingNode) or not f.attributes:
                raise _Bad(v, at, "must map attribute names to values")
        else:
            setattr(f, key, _text(v, at))
    return f


def _alerts(node: Any, where: str, metric: Any) -> list[Gate]:
    import yaml

    if not isinstance(node, yaml.SequenceNode):
        raise _Bad(node, where, "must be a list of rules, e.g. ['groundedness.mean>=4', 'no-regression']")
    out = []
    names = {metric.name, *metric.outputs}
    for i, item in enumerate(node.value):
        at = f"{where}[{i}]"
        text = _text(item, at)
        try:
            g = parse_gate(text)
        except AssayError as e:
            raise _Bad(item, at, str(e).replace("--gate ", "rule ")) from None
        if g.name is not None and g.name not in names:
            raise _Bad(item, at, f"rule {text!r} names {g.name!r}, not this metric or one of its outputs "
                                 f"({', '.join(sorted(names))})")
        if g.stat == "defect_rate" and metric.defect_threshold is None:
            raise _Bad(item, at, f"rule {text!r}: {metric.name} has no defect rate; use mean or pass_rate")
        out.append(g)
    return out


TOP_KEYS = ("metrics", "interval", "lookback", "retry_after", "batch", "lease", "sinks", "export")
LOGS_PATH = "/v1/logs"


def logs_url(base: str) -> str:
    """The OTLP/HTTP logs URL of an endpoint: ``/v1/logs`` appended unless it ends so already."""
    base = base.rstrip("/")
    return base if base.endswith(LOGS_PATH) else base + LOGS_PATH


def _export(node: Any) -> Export:
    keys = _mapping(node, "export", ("otlp_endpoint", "headers", "timeout", "service_name"))
    if "otlp_endpoint" not in keys:
        raise _Bad(node, "export", "needs an otlp_endpoint (e.g. http://127.0.0.1:4318)")
    n = keys["otlp_endpoint"][1]
    url = _text(n, "export.otlp_endpoint")
    if not re.match(r"^https?://[^/\s]+", url):
        raise _Bad(n, "export.otlp_endpoint", f"must be an http:// or https:// URL, got {url!r}")
    ex = Export(logs_url(url))
    if "headers" in keys:
        hn = keys["headers"][1]
        ex.headers = {k: _text(v, f"export.headers.{k}") for k, (_, v) in _mapping(hn, "export.headers", ()).items()}
    if "timeout" in keys:
        ex.timeout = _number(keys["timeout"][1], "export.timeout", 0.01, 60, "seconds from 0.01 to 60")
    if "service_name" in keys:
        ex.service_name = _text(keys["service_name"][1], "export.service_name")
    return ex


def _top(cfg: MonitorConfig, key: str, v: Any) -> None:
    if key == "metrics":
        for name, (k, mnode) in _mapping(v, "metrics", ()).items():
            try:
                cfg.metrics[name] = _metric(name, mnode, f"metrics.{name}")
            except _Bad as e:
                if e.line is None or e.message.startswith("unknown metric"):
                    e.line = k.start_mark.line + 1
                raise
        if not cfg.metrics:
            raise _Bad(v, "metrics", "names no metric")
    elif key in ("interval", "retry_after"):
        setattr(cfg, key, _number(v, key, 0.01, what="seconds above 0"))
    elif key in ("lookback", "lease"):
        setattr(cfg, key, _duration(v, key)[1])
    elif key == "batch":
        cfg.batch = int(_number(v, key, 1, what="a whole number of traces, at least 1"))
    elif key == "export":
        cfg.export = _export(v)
    else:
        _sinks(cfg, v)


def _sinks(cfg: MonitorConfig, node: Any) -> None:
    for key, (_, v) in _mapping(node, "sinks", ("log", "webhook")).items():
        if key == "log":
            val = _scalar(v, "sinks.log")
            if not isinstance(val, bool):
                raise _Bad(v, "sinks.log", f"must be true or false, got {val!r}")
            cfg.log = val
            continue
        hook = _mapping(v, "sinks.webhook", ("url", "timeout"))
        if "url" not in hook:
            raise _Bad(v, "sinks.webhook", "needs a url")
        url = _text(hook["url"][1], "sinks.webhook.url")
        if not re.match(r"^https?://", url):
            raise _Bad(hook["url"][1], "sinks.webhook.url", f"must be an http:// or https:// URL, got {url!r}")
        timeout = _number(hook["timeout"][1], "sinks.webhook.timeout", 0.01, 60, "seconds from 0.01 to 60") \
            if "timeout" in hook else 5.0
        cfg.webhook = Webhook(url, timeout)


def parse_config(text: str, path: str = "monitor.yaml") -> MonitorConfig:
    """``text`` (the YAML of ``monitor.yaml``) as a :class:`MonitorConfig`."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise AssayError(f"{path}{line}: not YAML: {getattr(e, 'problem', None) or e}") from None
    cfg = MonitorConfig(path=path)
    try:
        if root is None:
            raise _Bad(None, "metrics", "the file is empty; it needs 'metrics:'")
        top = _mapping(root, "", TOP_KEYS)
        if "metrics" not in top:
            raise _Bad(root, "metrics", "missing: name the metrics to score")
        for key, (_, v) in top.items():
            _top(cfg, key, v)
    except _Bad as e:
        line = f":{e.line}" if e.line else ""
        raise AssayError(f"{path}{line}: {e.where}: {e.message}") from None
    return cfg


def load_config(path: str | Path) -> MonitorConfig:
    """Read and check ``monitor.yaml`` at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise AssayError(f"{p}: cannot read the monitor config: {e.strerror or e}") from None
    return parse_config(text, str(p))


def adhoc(metrics: list[str], *, judge: str | None = None, window: str = DEFAULT_WINDOW) -> MonitorConfig:
    """A config of ``metrics`` named on the command line (``backfill --metrics``), every trace sampled."""
    text = "metrics:\n" + "".join(f"  {m}: {{}}\n" for m in metrics)
    cfg = parse_config(text, "--metrics")
    for mc in cfg.metrics.values():
        mc.judge = judge
        mc.window, mc.window_s = window, duration(window)
    return cfg
