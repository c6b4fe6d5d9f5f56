"""``gemini:MODEL`` against a loopback server speaking ``generateContent``: the request as documented,
log-probabilities read as the judges read OpenAI's, streamed answers, 429 ``RESOURCE_EXHAUSTED`` and
503 overloaded through the limiter, broken answers, the constrained next-token distribution, and
the shipped calibration rows scored as the OpenAI-compatible backend scores them."""

from __future__ import annotations

import math

import pytest

from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, ModelCallError, RetryPolicy, read_distribution, resolve
from assay.models.gemini import GeminiModel
from tests.helpers.provider_servers import (
    REPORT_KEYS,
    ProviderServer,
    calibration_judge,
    calibration_report,
    chunked,
    gemini_events,
    gemini_response,
    google_error,
    openai_reference,
)

# judge check on groundedness: its 120 calibration cases + 60 for the 30 context-words pairs
CALLS = 180

KEY = "AIza-test-SECRET"
MSGS = [{"role": "system", "content": "You grade answers."}, {"role": "user", "content": "Is 2+2=4? JSON."},
        {"role": "assistant", "content": "{"}, {"role": "user", "content": "Go on."}]


@pytest.fixture
def server():
    s = ProviderServer("gemini").start()
    yield s
    s.stop()


@pytest.fixture
def env(server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    return server


def model(server, **kw):
    return GeminiModel("gemini-2.5-flash", api_key=KEY, base_url=server.url, **kw)


async def test_the_request_and_answer_are_generate_content(server):
    lp = [("{\"", -0.01, {"{\"": -0.01, "{": -4.6}), ("4", -0.2, {"4": -0.2, "5": -1.7, "3": -3.0})]
    server.push({"json": gemini_response('{"score": 4}', logprobs=lp, usage=(42, 6))})
    m = model(server)
    g = await m.generate(MSGS, max_tokens=30, response_format={"type": "json_object"}, logprobs=True, top_logprobs=3)
    req = server.calls[0]
    assert req["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert req["headers"]["x-goog-api-key"] == KEY and "key=" not in req["path"]
    assert req["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "Is 2+2=4? JSON."}]},
                     {"role": "model", "parts": [{"text": "{"}]},
                     {"role": "user", "parts": [{"text": "Go on."}]}],
        "systemInstruction": {"parts": [{"text": "You grade answers."}]},
        "generationConfig": {"temperature": 0.0, "maxOutputTokens": 30, "responseMimeType": "application/json",
                             "responseLogprobs": True, "logprobs": 3}}
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.finish_reason) == ('{"score": 4}', 42, 6, "stop")
    assert g.logprobs == {"{\"": -0.01, "{": -4.6}
    assert g.token_logprobs[1] == ("4", {"4": -0.2, "5": -1.7, "3": -3.0})
    assert m.logprobs_supported is True and KEY not in repr(m)
    await m.aclose()


async def test_a_model_without_logprobs_is_asked_again_without_them_once(server):
    server.push({"status": 400, "json": google_error(400, "INVALID_ARGUMENT", "Logprobs is not supported for the current model.")})
    m = model(server)
    g = await m.generate(MSGS, logprobs=True)
    assert g.text and g.logprobs is None and m.logprobs_supported is False
    assert "responseLogprobs" in server.calls[0]["body"]["generationConfig"]
    assert "responseLogprobs" not in server.calls[1]["body"]["generationConfig"]
    await m.generate(MSGS, logprobs=True)
    assert len(server.calls) == 3 and "responseLogprobs" not in server.calls[2]["body"]["generationConfig"]
    await m.aclose()


async def test_a_streamed_answer_is_read_from_the_sse_chunks(server):
    server.judge(lambda text: "streamed verdict: yes")
    m = model(server, stream=True)
    g = await m.generate(MSGS)
    assert server.calls[0]["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.finish_reason) == \
        ("streamed verdict: yes", 100, 10, "stop")
    server.push({"wire": chunked(200, {"Content-Type": "text/event-stream"}, gemini_events("yes", cut=True))})
    with pytest.raises(ModelCallError, match="cut short") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_response" and ei.value.retryable
    server.push({"wire": chunked(200, {"Content-Type": "text/event-stream"}, [b"data: {\"candidates\": [\r\n\r\n"])})
    with pytest.raises(ModelCallError, match="not JSON"):
        await m.generate(MSGS)
    await m.aclose()


async def test_429_retry_delay_and_503_overloaded_reach_the_limiter(server):
    server.push({"status": 429, "json": google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", "0.2s")},
                {"status": 503, "json": google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")})
    lm = LimitedModel(model(server), Limiter(4, retry=RetryPolicy(base_delay=0.01, max_delay=0.05), max_attempts=4))
    g = await lm.generate(MSGS)
    assert g.text
    first, second, _ = server.calls
    assert second["t"] - first["t"] >= 0.18                          # RetryInfo.retryDelay honoured
    st = lm.limiter.stats
    assert (st.rate_limited, st.retries, st.succeeded) == (2, 2, 1)
    await lm.aclose()


async def test_broken_and_blocked_answers_are_one_line_errors(server):
    m = model(server)
    server.push({"raw": b"<html>gateway</html>"})
    with pytest.raises(ModelCallError, match="not a JSON object") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_response"
    server.push({"json": {"promptFeedback": {"blockReason": "SAFETY"}}})
    with pytest.raises(ModelCallError, match=r"blocked \(SAFETY\)") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_request"
    server.push({"status": 403, "json": google_error(403, "PERMISSION_DENIED", f"API key {KEY} not valid")})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "auth" and KEY not in str(ei.value)
    await m.aclose()


async def test_the_distribution_is_one_constrained_token_with_its_logprobs(server):
    lp = [("4", math.log(0.6), {"4": math.log(0.6), "5": math.log(0.3), "3": math.log(0.05), " 4": math.log(0.01)})]
    server.push({"json": gemini_response("4", logprobs=lp, usage=(50, 1))})
    m = model(server)
    d = await m.distribution(MSGS, ["1", "2", "3", "4", "5"], assistant_prefix='{"score": ')
    cfg = server.calls[0]["body"]["generationConfig"]
    assert cfg["responseMimeType"] == "text/x.enum" and cfg["responseSchema"]["enum"] == ["1", "2", "3", "4", "5"]
    assert cfg["maxOutputTokens"] == 1 and cfg["logprobs"] == 20
    probs, mass = read_distribution(d)
    assert mass == pytest.approx(0.96) and probs["4"] == pytest.approx(0.61 / 0.96) and probs["1"] == 0.0
    server.push({"status": 400, "json": google_error(400, "INVALID_ARGUMENT", "responseSchema enum not supported")})
    with pytest.raises(ModelCallError, match="gemini:gemini-2.5-flash cannot give next-token distributions"):
        await m.distribution(MSGS, ["1", "2"])
    assert m.gives_distributions is False
    await m.aclose()


def test_spec_key_and_price(env, monkeypatch):
    lm = resolve("gemini:gemini-2.5-flash", cache=None)
    assert lm.name == "gemini:gemini-2.5-flash" and lm.model.price == (0.3, 2.5)
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(AssayError, match="GEMINI_API_KEY is not set"):
        resolve("gemini:gemini-2.5-flash", cache=None)


async def test_the_calibration_rows_score_as_through_the_openai_compatible_backend(env, fake):
    ref = await openai_reference(fake)
    env.judge(calibration_judge)
    got = await calibration_report("gemini:gemini-2.5-flash")
    assert {k: got[k] for k in REPORT_KEYS} == {k: ref[k] for k in REPORT_KEYS}
    assert got["errors"] == 0 and got["auc"]["auc"] == 1.0 and len(env.calls) == CALLS
    assert got["usage"]["cost_usd"] == pytest.approx(CALLS * (100 * 0.3 + 10 * 2.5) / 1e6)
