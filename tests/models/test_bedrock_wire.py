"""``bedrock:MODEL_ID``: the SigV4 signer against AWS's published examples, the Converse request as
documented and signed (the loopback server re-signs what it received), throttling through the
limiter, broken answers, and the shipped calibration rows scored as through the OpenAI-compatible
backend."""

from __future__ import annotations

import orjson
import pytest

from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, ModelCallError, RetryPolicy, resolve
from assay.models.bedrock import BedrockModel
from assay.models.sigv4 import Credentials, canonical_request, sign, signing_key
from tests.helpers.provider_servers import (
    REPORT_KEYS,
    ProviderServer,
    calibration_judge,
    calibration_report,
    converse_response,
    openai_reference,
)

# judge check on groundedness: its 120 calibration cases + 60 for the 30 context-words pairs
CALLS = 180

EXAMPLE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
STAMP = "20150830T123600Z"
SECRET = "bedrock-test-SECRET-key"
MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
MSGS = [{"role": "system", "content": "You grade answers."}, {"role": "user", "content": "Is 2+2=4?"}]


@pytest.mark.parametrize("method,url,signature", [
    # the SigV4 test suite: get-vanilla, post-vanilla, get-vanilla-query-order-key-case
    ("GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
])
def test_the_signer_reproduces_the_published_test_suite(method, url, signature):
    h = sign(method, url, {"host": "example.amazonaws.com"}, b"", EXAMPLE, region="us-east-1", service="service",
             now=STAMP)
    assert h == {"x-amz-date": STAMP, "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"
                 f"service/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}"}


def test_the_signer_reproduces_the_iam_example_step_by_step():
    import hashlib

    headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8", "host": "iam.amazonaws.com",
               "x-amz-date": STAMP}
    creq, names = canonical_request("GET", "/", "Action=ListUsers&Version=2010-05-08", headers,
                                    hashlib.sha256(b"").hexdigest())
    assert names == "content-type;host;x-amz-date"
    assert hashlib.sha256(creq.encode()).hexdigest() == "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
    assert signing_key(EXAMPLE.secret_key, "20150830", "us-east-1", "iam").hex() == \
        "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
    h = sign("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
             {k: v for k, v in headers.items() if k != "x-amz-date"}, b"", EXAMPLE, region="us-east-1",
             service="iam", now=STAMP)
    assert h["Authorization"].endswith("Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")
    # temporary credentials add and sign the session token
    t = sign("GET", "https://iam.amazonaws.com/", {"host": "iam.amazonaws.com"}, b"",
             Credentials("AKIDEXAMPLE", EXAMPLE.secret_key, "TOKEN"), region="us-east-1", service="iam", now=STAMP)
    assert t["x-amz-security-token"] == "TOKEN" and "SignedHeaders=host;x-amz-date;x-amz-security-token" in t["Authorization"]


@pytest.fixture
def server():
    s = ProviderServer("bedrock").start()
    yield s
    s.stop()


@pytest.fixture
def env(server, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
    return server


def resigned(req) -> str:
    """The Authorization the request as received signs to (what Bedrock checks)."""
    h = req["headers"]
    url = f"http://{h['host']}{req['path']}"
    again = sign("POST", url, {"host": h["host"], "content-type": h["content-type"]}, orjson.dumps(req["body"]),
                 Credentials("AKIDTEST", SECRET), region="us-west-2", service="bedrock", now=h["x-amz-date"])
    return again["Authorization"]


async def test_the_converse_request_is_documented_and_signed(env):
    env.push({"json": converse_response('{"score": 5}', usage=(20, 4), stop="max_tokens")})
    m = BedrockModel(MODEL_ID)
    g = await m.generate(MSGS, max_tokens=16, logprobs=True)
    req = env.calls[0]
    assert req["path"] == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert req["body"] == {"messages": [{"role": "user", "content": [{"text": "Is 2+2=4?"}]}],
                           "system": [{"text": "You grade answers."}],
                           "inferenceConfig": {"maxTokens": 16, "temperature": 0.0}}
    auth = req["headers"]["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/") and "/us-west-2/bedrock/aws4_request" in auth
    assert "SignedHeaders=content-type;host;x-amz-date," in auth and auth == resigned(req)
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.finish_reason) == ('{"score": 5}', 20, 4, "length")
    assert g.logprobs is None and SECRET not in repr(m) and SECRET not in repr(m.creds)
    with pytest.raises(ModelCallError, match=r"bedrock:.* \(Bedrock Converse API\) gives no next-token"):
        await m.distribution(MSGS, ["yes", "no"])
    await m.aclose()


async def test_throttling_reaches_the_limiter_and_unavailable_is_retried(env):
    env.push({"status": 429, "headers": {"x-amzn-ErrorType": "ThrottlingException", "retry-after": "0.2"},
              "json": {"message": "Too many requests, please wait before trying again."}},
             {"status": 503, "headers": {"x-amzn-ErrorType": "ServiceUnavailableException"},
              "json": {"message": "Bedrock is unable to process your request."}})
    lm = LimitedModel(BedrockModel(MODEL_ID), Limiter(4, retry=RetryPolicy(base_delay=0.01, max_delay=0.05),
                                                      max_attempts=4))
    assert (await lm.generate(MSGS)).text
    first, second, third = env.calls
    assert second["t"] - first["t"] >= 0.18
    assert all(r["headers"]["authorization"] == resigned(r) for r in env.calls)   # each try signed afresh
    st = lm.limiter.stats
    assert (st.rate_limited, st.retries, st.succeeded) == (1, 2, 1)
    await lm.aclose()


async def test_broken_answers_and_bad_credentials_are_one_line_errors(env):
    m = BedrockModel(MODEL_ID)
    env.push({"json": {"stopReason": "end_turn"}})
    with pytest.raises(ModelCallError, match="no output message") as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "bad_response" and ei.value.retryable
    env.push({"status": 403, "json": {"message": f"The request signature we calculated does not match {SECRET}"}})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSGS)
    assert ei.value.kind == "auth" and SECRET not in str(ei.value)
    await m.aclose()


def test_spec_region_credentials_and_price(env, monkeypatch):
    lm = resolve(f"bedrock:{MODEL_ID}", cache=None)
    assert lm.name == f"bedrock:{MODEL_ID}" and lm.model.price == (0.8, 4.0)
    assert BedrockModel("us.anthropic.claude-sonnet-4-5-20250929-v1:0").price == (3.0, 15.0)
    assert BedrockModel("amazon.nova-micro-v1:0").price == (0.035, 0.14)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(AssayError, match="AWS_SECRET_ACCESS_KEY not set"):
        resolve(f"bedrock:{MODEL_ID}", cache=None)
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(AssayError, match="no region"):
        BedrockModel(MODEL_ID)


async def test_the_calibration_rows_score_as_through_the_openai_compatible_backend(env, fake):
    ref = await openai_reference(fake)
    env.judge(calibration_judge)
    got = await calibration_report(f"bedrock:{MODEL_ID}")
    assert {k: got[k] for k in REPORT_KEYS} == {k: ref[k] for k in REPORT_KEYS}
    assert got["errors"] == 0 and len(env.calls) == CALLS
    assert got["usage"]["cost_usd"] == pytest.approx(CALLS * (100 * 0.8 + 10 * 4.0) / 1e6)
