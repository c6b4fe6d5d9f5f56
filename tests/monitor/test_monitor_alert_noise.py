"""``no-regression`` over a day of windows of an unchanged app: no alert on noise, and still an
alert on a real drop. Each window holds a few scored traces (a 25% sample of a small app), the
rule is decided window after window as ``assay monitor check`` decides it (benchmarks/
bench_monitor_alerts.py measures the same over simulated days)."""

from __future__ import annotations

import random

from assay.monitor.alerts import AlertChecker
from assay.monitor.config import parse_config
from tests.helpers.monitor import record_window

W = 15 * 60          # 15m windows: 96 a day
T0 = 1_700_006_400   # a day boundary (s)




def _unchanged(rng: random.Random) -> list[float]:
    """One window of the unchanged app: 8 to 20 traces, two tool calls each failing at 5%."""
    return [float((rng.random() < 0.05) + (rng.random() < 0.05)) for _ in range(rng.randint(8, 20))]


CONFIG = "metrics:\n  tool_errors:\n    window: 15m\n    min_traces: 5\n    alerts: [no-regression]\n"


def test_no_regression_stays_quiet_over_a_day_of_an_unchanged_app(log):
    rng = random.Random(2)
    for k in range(96):
        record_window(log, T0 + k * W, _unchanged(rng), f"w{k}")
    r = AlertChecker(log.store, parse_config(CONFIG)).check(T0 * 10**9, now_ns=(T0 + 96 * W) * 10**9)
    assert len(r["metrics"]["tool_errors"]["windows"]) == 96
    assert [(e["state"], e["window_start_ns"], e["figure"], e["ci_low"]) for e in r["events"]] == []
    assert log.alerts() == []


def test_no_regression_still_fires_on_the_window_of_a_real_drop(log):
    rng = random.Random(3)
    for k in range(8):
        record_window(log, T0 + k * W, _unchanged(rng), f"w{k}")
    bad = [float((rng.random() < 0.5) + (rng.random() < 0.5)) for _ in range(12)]    # tool calls fail at 50%
    record_window(log, T0 + 8 * W, bad, "bad")
    r = AlertChecker(log.store, parse_config(CONFIG)).check(T0 * 10**9, now_ns=(T0 + 9 * W) * 10**9)
    assert [(e["state"], e["window_start_ns"]) for e in r["events"]] == [("firing", (T0 + 8 * W) * 10**9)]
