"""The runnable example of docs/monitor.md (examples/monitor/app.py and monitor.yaml), run as the
docs run it but against the scripted loopback model server (answering after 4 s, so the
example's latency rule fires: the rule fires only when the mean's t interval over the 3 traces lies
wholly above 2 s, and at 2.05 s one call slowed by a loaded machine widened it across the bound): the app file's spans reach the receiver, both metrics of the
example's config score every trace, and its alert rule fires."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest

from assay.monitor.alerts import AlertChecker
from assay.monitor.config import load_config
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from tests.helpers.fake_openai_server import FakeOpenAI, chat_json
from tests.helpers.monitor import ROOT, Served, env

EXAMPLE = ROOT / "examples" / "monitor"

if importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None:
    pytest.skip("opentelemetry-instrumentation-openai-v2 is not installed (the dev extra installs it)",
                allow_module_level=True)


def test_the_docs_example_app_is_received_scored_and_alerts(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    model = FakeOpenAI().start()
    model.default = {"delay": 4.0, "json": chat_json("It ships tomorrow.", model="gemma-3-270m", usage=(20, 5))}
    st = Store(str(tmp_path / "m.db"))
    try:
        with Served(st) as rx:
            run = subprocess.run([sys.executable, str(EXAMPLE / "app.py"), "3"], cwd=ROOT, timeout=120,
                                 capture_output=True, text=True,
                                 env={**env(), "OTEL_EXPORTER_OTLP_ENDPOINT": rx.url.removesuffix("/v1/traces"),
                                      "MODEL_URL": model.base_url})
        assert run.returncode == 0, run.stderr
        assert run.stdout.count("-> 'It ships tomorrow.'") == 3
        cfg = load_config(str(EXAMPLE / "monitor.yaml"))
        got = OnlineScorer(st, cfg).run_pass(everything=True)
        assert {m: c["scored"] for m, c in got.items()} == {"latency": 3, "token_count": 3}
        (row,) = MonitorLog(st).scores("token_count")[:1]
        assert row["scores"][0]["total_output_token_count"]["value"] == 5       # the app's reported usage
        cfg.metrics["latency"].min_traces = 1      # the 3 traces may straddle a minute: decide every window
        said: list[str] = []
        report = AlertChecker(st, cfg, say=said.append).check(time.time_ns() - 600 * 10**9,
                                                             now_ns=time.time_ns() + 120 * 10**9)
        assert [f["rule"] for f in report["firing"]] == ["latency_seconds.mean<=2"]
        assert any("ALERT firing: latency" in line for line in said)
    finally:
        st.close()
        model.stop()
