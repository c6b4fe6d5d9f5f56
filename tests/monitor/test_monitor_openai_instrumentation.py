"""The real instrumentations around a real ``openai`` client, in an app process of their own, into
the receiver: the official ``opentelemetry-instrumentation-openai-v2`` (message content on the
span, and as a log record on the span sent to ``/v1/logs``) and OpenInference's
``openinference-instrumentation-openai``. The model server is the scripted loopback one; the
records read from the stored traces have the question, the answer, the model and the tokens, and
a sample is scored by a judge metric."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from assay.formats.genai_spans import trace_records
from assay.monitor.config import parse_config
from assay.monitor.scoring import OnlineScorer, trace_of
from assay.store import Store
from assay.store.monitor import MonitorLog
from assay.store.spans import SpanLog
from tests.helpers.fake_openai_server import FakeOpenAI, chat_json
from tests.helpers.monitor import ROOT, Served, env

for _m in ("opentelemetry.instrumentation.openai_v2", "openinference.instrumentation.openai"):
    if importlib.util.find_spec(_m) is None:
        pytest.skip(f"{_m} is not installed (the dev extra installs it)", allow_module_level=True)

ANSWER = "Your order left the Lyon warehouse this morning."


@pytest.fixture
def model():
    fake = FakeOpenAI().start()
    fake.default = {"json": chat_json(ANSWER, model="gpt-4o-mini-2024-07-18", usage=(31, 9))}
    yield fake
    fake.stop()


def _app(url: str, model_url: str, n: int, *extra: str) -> list[str]:
    got = subprocess.run([sys.executable, "-m", "tests.helpers.otel_app", url, str(n), "--openai", model_url, *extra],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    made = json.loads(got.stdout)
    assert made["acknowledged"] == n and len(made["trace_ids"]) == n
    return made["trace_ids"]


def _records(st: Store, trace_id: str) -> list:
    return trace_records(trace_of(trace_id, SpanLog(st).spans(trace_id)), "trace")


@pytest.mark.parametrize("extra", [("--instrumentation", "otel", "--content", "span_only"),
                                   ("--instrumentation", "otel", "--content", "event_only"),
                                   ("--instrumentation", "openinference")],
                         ids=["official-span", "official-event", "openinference"])
def test_instrumented_openai_app_is_received_read_and_scored(tmp_path, model, extra, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    st = Store(str(tmp_path / "m.db"))
    try:
        with Served(st) as rx:
            ids = _app(rx.url, model.base_url, 3, *extra)
        assert len(model.chat_requests) == 3
        for i, tid in enumerate(sorted(ids, key=lambda t: SpanLog(st).spans(t)[0]["start_ns"])):
            (rec,) = _records(st, tid)
            assert rec["query"] == f"Where is my order {i}?", rec
            assert rec["history"] == [{"role": "system", "content": "You answer questions about orders in one sentence."}]
            assert rec["response"] == ANSWER
            assert rec["extra"]["model"] == "gpt-4o-mini-2024-07-18"        # the model that answered
            assert rec["usage"]["input_tokens"] == 31 and rec["usage"]["output_tokens"] == 9
        judge = FakeOpenAI().start()
        judge.default = {"content": '{"score": 5, "reason": "answers the question"}'}
        try:
            cfg = parse_config(f'metrics:\n  coherence:\n    judge: "{judge.base_url}#fake-judge"\n    timeout: 5\n')
            got = OnlineScorer(st, cfg).run_pass(everything=True)["coherence"]
        finally:
            judge.stop()
        assert got["scored"] == 3 and got["errored"] == 0
        asked = json.dumps([r["body"] for r in judge.chat_requests])
        assert "Where is my order" in asked and ANSWER in asked          # the judge saw the real exchange
        assert {r["scores"][0]["coherence"]["score"] for r in MonitorLog(st).scores("coherence")} == {5}
    finally:
        st.close()
