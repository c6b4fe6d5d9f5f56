"""Threshold rules on small windows: a window of a handful of scored traces of an unchanged app
never fires (its interval must be right at small n: the percentile bootstrap of 6 values is too
narrow), and a real drop still fires in its window. The rule is decided window after window as
``assay monitor check`` decides it (benchmarks/bench_monitor_alerts.py measures the same)."""

from __future__ import annotations

import random

from assay.monitor.alerts import AlertChecker
from assay.monitor.config import parse_config
from tests.helpers.monitor import record_window

W = 5 * 60           # 5m windows: 288 a day
T0 = 1_700_006_400   # a day boundary (s)
CONFIG = "metrics:\n  tool_errors:\n    window: 5m\n    min_traces: 5\n    alerts: ['tool_errors.mean<=0.3']\n"




def _unchanged(rng: random.Random) -> list[float]:
    """One small window of the unchanged app: 5 to 8 traces, two tool calls each failing at 5%."""
    return [float((rng.random() < 0.05) + (rng.random() < 0.05)) for _ in range(rng.randint(5, 8))]


def test_small_windows_of_an_unchanged_app_never_fire(log):
    rng = random.Random(7)
    for k in range(288):
        record_window(log, T0 + k * W, _unchanged(rng), f"w{k}")
    # the benchmark's false alert: 4 of 6 traces with a failed tool call (true mean 0.1)
    record_window(log, T0 + 288 * W, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0], "unlucky")
    r = AlertChecker(log.store, parse_config(CONFIG)).check(T0 * 10**9, now_ns=(T0 + 289 * W) * 10**9)
    assert len(r["metrics"]["tool_errors"]["windows"]) == 289
    assert [(e["state"], e["window_start_ns"], e["n"], e["figure"], e["ci_low"]) for e in r["events"]] == []
    assert log.alerts() == []


def test_a_real_drop_still_fires_in_its_window(log):
    rng = random.Random(3)
    for k in range(8):
        record_window(log, T0 + k * W, _unchanged(rng), f"w{k}")
    bad = [float((rng.random() < 0.5) + (rng.random() < 0.5)) for _ in range(12)]    # tool calls fail at 50%
    record_window(log, T0 + 8 * W, bad, "bad")
    r = AlertChecker(log.store, parse_config(CONFIG)).check(T0 * 10**9, now_ns=(T0 + 9 * W) * 10**9)
    assert [(e["state"], e["window_start_ns"]) for e in r["events"]] == [("firing", (T0 + 8 * W) * 10**9)]
