"""``anthropic:MODEL`` against a loopback server speaking the Messages API: the request as documented,
plain and streamed answers, 429 / 529 through the limiter, broken answers, and the shipped
calibration rows scored as the OpenAI-compatible backend scores them."""

from __future__ import annotations

import pytest

from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, ModelCallError, RetryPolicy, gives_distributions, resolve
from assay.models.anthropic import AnthropicModel
from tests.helpers.provider_servers import (
    REPORT_KEYS,
    ProviderServer,
    anthropic_events,
    anthropic_message,
    calibration_judge,
    calibration_report,
    chunked,
    openai_reference,
)

# judge check on groundedness: its 120 calibration cases + 60 for the 30 context-words pairs
CALLS = 180

KEY = "sk-ant-test-SECRET"
MSGS = [{"role": "system", "content": "You grade answers."}, {"role": "system", "content": "Reply in JSON."},
        {"role": "user", "content": "Is 2+2=4?"}, {"role": "user", "content": "Answer yes or no."}]


@pytest.fixture
def server():
    s = ProviderServer("anthropic").start()
    yield s
    s.stop()


@pytest.fixture
def env(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    return server


def model(server, **kw):
    return AnthropicModel("claude-test", api_key=KEY, base_url=server.url, **kw)


async def test_the_request_and_answer_are_the_messages_api(server):
    server.push({"json": anthropic_message('{"rating": "yes"}', usage=(31, 7)),
                 "headers": {"request-id": "req_1"}})
    m = model(server)
    g = await m.generate(MSGS, max_tokens=50, logprobs=True, response_format={"type": "json_object"})
    req = server.calls[0]
    assert req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == KEY and req["headers"]["anthropic-version"] == "2023-06-01"
    assert req["body"] == {"model": "claude-test", "max_tokens": 50, "temperature": 0.0,
                           "system": "You grade answers.\n\nReply in JSON.",
                           "messages": [{"role": "user", "content": "Is 2+2=4?\n\nAnswer yes or no."}]}
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.finish_reason) == ('{"rating": "yes"}', 31, 7, "stop")
    assert g.logprobs is None and g.token_logprobs is None          # the API gives none
    await m.generate([{"role": "user", "content": "hi"}])
    assert server.calls[1]["body"]["max_tokens"] == 1024 and "system" not in server.calls[1]["body"]
    assert KEY not in repr(m)
    await m.aclose()


async def test_a_streamed_answer_is_read_from_the_documented_events(server):
    server.judge(lambda text: "streamed verdict: yes")
    m = model(server, stream=True)
    g = await m.generate(MSGS, max_tokens=20)
    assert server.calls[0]["body"]["stream"] is True
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.finish_reason) == \
        ("streamed verdict: yes", 100, 10, "stop")
    # cut short before message_stop: a retryable bad answer, never half a verdict
    server.push({"wire": chunked(200, {"Content-Type": "text/event-stream"}, anthropic_events("yes", cut=True))})
    with pytest.raises(ModelCallError, match="cut short") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_response" and ei.value.retryable
    # an error event after the stream began (overloaded): a rate limit for the limiter
    err = anthropic_events("yes")[:1] + [b'event: error\ndata: {"type": "error", "error": '
                                          b'{"type": "overloaded_error", "message": "Overloaded"}}\n\n']
    server.push({"wire": chunked(200, {"Content-Type": "text/event-stream"}, err)})
    with pytest.raises(ModelCallError, match="overloaded_error") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "rate_limit"
    await m.aclose()


async def test_429_and_529_reach_the_limiter_and_are_retried(server):
    server.push({"status": 429, "headers": {"retry-after": "0.2"},
                 "json": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}},
                {"status": 529, "json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}})
    lm = LimitedModel(model(server), Limiter(4, retry=RetryPolicy(base_delay=0.01, max_delay=0.05), max_attempts=4))
    g = await lm.generate(MSGS)
    assert g.text
    first, second, third = server.calls
    assert second["t"] - first["t"] >= 0.18                        # retry-after honoured
    st = lm.limiter.stats
    assert (st.rate_limited, st.retries, st.succeeded) == (2, 2, 1)  # both slowed the run down
    await lm.aclose()


async def test_ratelimit_reset_headers_give_the_wait_when_retry_after_is_missing(server):
    from datetime import datetime, timedelta, timezone

    at = (datetime.now(timezone.utc) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    server.push({"status": 429, "headers": {"anthropic-ratelimit-tokens-reset": at},
                 "json": {"type": "error", "error": {"type": "rate_limit_error", "message": "tokens"}}})
    with pytest.raises(ModelCallError) as ei:
        await model(server).generate(MSGS)
    assert ei.value.kind == "rate_limit" and 25 <= ei.value.retry_after <= 31


async def test_broken_answers_and_bad_keys_are_one_line_errors(server):
    m = model(server)
    server.push({"raw": b'{"id": "msg_1", "content": '})
    with pytest.raises(ModelCallError, match="not a JSON object") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_response" and ei.value.retryable
    server.push({"status": 401, "json": {"type": "error", "error": {"type": "authentication_error",
                                                                    "message": f"invalid x-api-key {KEY}"}}})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "auth" and KEY not in str(ei.value) and KEY not in (ei.value.body or "")
    with pytest.raises(ModelCallError, match=r"anthropic:claude-test \(Anthropic Messages API\) gives no next-token"):
        await m.distribution(MSGS, ["yes", "no"])
    assert not gives_distributions(m)
    await m.aclose()


def test_spec_key_and_base_url(env, monkeypatch):
    lm = resolve("anthropic:claude-sonnet-4-5", cache=None)
    assert lm.name == "anthropic:claude-sonnet-4-5" and lm.model.base_url == env.url
    assert lm.model.price == (3.0, 15.0)
    assert AnthropicModel("claude-sonnet-4-5-20250929", api_key="k").price == (3.0, 15.0)   # dated snapshot
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(AssayError, match="ANTHROPIC_API_KEY is not set"):
        resolve("anthropic:claude-sonnet-4-5", cache=None)


async def test_the_calibration_rows_score_as_through_the_openai_compatible_backend(env, fake):
    ref = await openai_reference(fake)
    env.judge(calibration_judge)
    got = await calibration_report("anthropic:claude-test")
    assert {k: got[k] for k in REPORT_KEYS} == {k: ref[k] for k in REPORT_KEYS}
    assert got["errors"] == 0 and got["auc"]["auc"] == 1.0 and got["cases"] == 120 and len(env.calls) == CALLS
    assert got["usage"]["calls"] == CALLS and got["usage"]["cost_usd"] is None      # claude-test is not in the table
