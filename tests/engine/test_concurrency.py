"""One concurrency limit on judge calls in flight, set by ``concurrency`` or the backend's default."""

from __future__ import annotations

import assay
from tests.helpers.fake_openai_server import FakeOpenAI  # tests/models, on the path from tests/conftest.py


def test_concurrency_sets_the_judge_limit(tmp_path, monkeypatch):
    """--concurrency is the one limit on judge calls in flight; without it, the backend's default."""
    monkeypatch.setenv("ASSAY_CACHE", "off")
    server = FakeOpenAI().start()
    server.default = {"content": '{"score": 4, "reason": "ok"}', "delay": 0.1}
    rows = [{"query": f"q{i}", "response": f"r{i}"} for i in range(96)]
    try:
        judge = f"{server.base_url}#fake-judge"
        assay.evaluate(rows, metrics="coherence", judge=judge, store=False)
        assert server.peak_in_flight == 8            # an OpenAI-compatible server's default
        server.peak_in_flight = 0
        res = assay.evaluate(rows, metrics="coherence", judge=judge, store=False, concurrency=32)
        assert 16 < server.peak_in_flight <= 32
        assert res.metrics["coherence"]["evaluated"] == 96
    finally:
        server.stop()
