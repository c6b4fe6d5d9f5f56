"""The OpenAI-compatible HTTP path against a real server: llama.cpp's (``llama_cpp.server``),
serving the embedded Gemma 3 270M GGUF on loopback, judged through ``build_judge("http://...#model")``.

The model is tiny and a base model, so what these tests check is the path, not the grades: every
judge metric family completes with a score in its range and a reason, the server's token usage
reaches the result, and where the server returns log-probabilities the logprob-weighted score is
recorded beside the parsed one.

Two settings keep the run short on a small CPU: ``judge_max_tokens`` bounds the answers, and
log-probabilities are asked for in one test only (llama-cpp-python's server sorts the whole
262k-token vocabulary in Python for every generated token when asked for them).
"""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from assay.judges import prob_from_generation
from assay.judges.parse import Scale
from assay.models import Generation, LimitedModel, build_judge

ALIAS = "gemma-3-270m"
MAX_TOKENS = 64
ROW = {"query": "What is the capital of France?",
       "response": "The capital of France is Paris.",
       "contexts": [{"content": "Paris is the capital and largest city of France.", "doc_uri": "doc://paris"},
                    {"content": "Bananas are yellow when ripe.", "doc_uri": "doc://bananas"}]}


@pytest.fixture
def no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_STORE", "off")


def _run(base: str, metric: str, **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from assay import evaluate

    res = evaluate([ROW], metrics=metric, judge=f"{base}#{ALIAS}",
                   options={"judge_logprobs": False, "judge_max_tokens": MAX_TOKENS, **options})
    rows = res.rows
    assert len(rows) == 1
    return rows[0], res.run


def _out(row: dict[str, Any], metric: str, output: str) -> dict[str, Any]:
    """One output's columns (``outputs.<metric>.<output>[_score|_reason|...]``) as a dict."""
    base = f"outputs.{metric}.{output}"
    return {(k[len(base) + 1:] or "value"): v for k, v in row.items() if k == base or k.startswith(base + "_")}


def test_the_server_lists_the_model(llama_server: str) -> None:
    import json

    with urllib.request.urlopen(f"{llama_server}/models", timeout=10) as r:
        ids = [m["id"] for m in json.load(r)["data"]]
    assert ALIAS in ids


@pytest.mark.parametrize("metric,output,kind", [
    ("groundedness", "groundedness", "1-5"),                   # an Azure-style 1-5 judge
    ("relevance_to_query", "relevance_to_query", "yes/no"),    # a Databricks yes/no judge
])
def test_single_judgment_families(llama_server: str, no_store: None, metric: str, output: str, kind: str) -> None:
    row, run = _run(llama_server, metric)
    o = _out(row, metric, output)
    assert o["status"] == "completed", o
    assert isinstance(o["reason"], str) and o["reason"].strip()
    if kind == "1-5":
        assert o["value"] in (1, 2, 3, 4, 5) and o["score"] == float(o["value"])
    else:
        assert o["value"] in ("yes", "no") and o["score"] == (1.0 if o["value"] == "yes" else 0.0)
    p = o["properties"]
    assert p["judge_model"] == f"{llama_server}#{ALIAS}" and p["scoring"] == "parsed"
    assert p["input_tokens"] > 50 and 0 < p["output_tokens"] <= MAX_TOKENS * p["judge_calls"]
    assert p["raw_output"]
    # the server's token counts reach the run's judge usage; a self-hosted server has no known price
    u = run["judge_usage"]
    assert u["calls"] == p["judge_calls"] and u["errors"] == 0 and u["cache_hits"] == 0
    assert (u["prompt_tokens"], u["completion_tokens"]) == (p["input_tokens"], p["output_tokens"])
    assert u["cost_usd"] is None


def test_chunk_relevance_judges_each_chunk(llama_server: str, no_store: None) -> None:
    row, run = _run(llama_server, "chunk_relevance")
    o = _out(row, "chunk_relevance", "chunk_relevance_precision")
    assert o["status"] == "completed", o
    chunks = o["properties"]["chunks"]
    assert len(chunks) == 2 and o["properties"]["judge_calls"] >= 2
    judged = [c for c in chunks if c.get("rating") in ("yes", "no")]
    assert judged and o["value"] == pytest.approx(sum(c["rating"] == "yes" for c in judged) / len(judged))
    assert o["reason"] and run["judge_usage"]["calls"] == o["properties"]["judge_calls"]


def test_retrieval_splits_intents_and_judges_them(llama_server: str, no_store: None) -> None:
    row, _ = _run(llama_server, "retrieval")
    o = _out(row, "retrieval", "retrieval")
    assert o["status"] == "completed", o
    assert 1.0 <= o["value"] <= 5.0 and o["reason"]
    p = o["properties"]
    assert p["intents"] and all(i["rating"] in ("yes", "no", None) for i in p["intents"])
    answered = [i for i in p["intents"] if i["rating"] is not None]
    f = sum(i["rating"] == "yes" for i in answered) / len(answered)
    assert o["value"] == pytest.approx(1 + 4 * f * f)


class Recording(LimitedModel):
    """Keeps every Generation the judge got, to compare the recorded score with the server's logprobs."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.seen: list[Generation] = []

    async def generate(self, messages: Any, **kw: Any) -> Generation:
        gen = await super().generate(messages, **kw)
        self.seen.append(gen)
        return gen


async def test_logprob_weighted_score_is_recorded_where_the_server_gives_logprobs(llama_server: str) -> None:
    from assay.metrics.base import REGISTRY, EvalContext, load_builtin_metrics
    from assay.records import Record

    load_builtin_metrics()
    base = build_judge(f"{llama_server}#{ALIAS}", cache=None)
    judge = Recording(base.model, base.limiter, None)
    ctx = EvalContext(judge=judge, options={"judge_logprobs": True, "judge_max_tokens": 40})
    s = (await REGISTRY["relevance_to_query"].score(Record(**ROW), ctx, None))["relevance_to_query"]
    first = judge.seen[0]
    # the server gave log-probabilities for every generated token, with alternatives
    assert first.token_logprobs and len(first.token_logprobs) == first.usage.output_tokens
    assert all(isinstance(alts, dict) and alts for _, alts in first.token_logprobs)
    assert judge.model.logprobs_supported is True
    expected = prob_from_generation(first, Scale.of("yes/no"))
    if '"rating"' in first.text:      # the answer has the rating key: its value's position was scored
        assert expected is not None
    if expected is None:
        assert "prob_score" not in s.properties
    else:
        assert s.properties["prob_score"] == pytest.approx(expected.value)
        assert 0.0 <= s.properties["prob_score"] <= 1.0
        assert set(s.properties["prob_dist"]) == {"yes", "no"}
        # parsed scoring stays the primary score; the probability is recorded beside it
        assert s.properties["scoring"] == "parsed"
    await judge.aclose()
