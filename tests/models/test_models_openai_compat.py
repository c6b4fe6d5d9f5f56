"""The OpenAI-compatible backend against the scripted fake endpoint, and judge specs."""

from __future__ import annotations

import pickle

import pytest

from assay.errors import AssayError
from assay.judges import ask_score
from assay.models import (
    ACCEPTED_FORMS,
    LimitedModel,
    Limiter,
    ModelCallError,
    OpenAICompat,
    RetryPolicy,
    build_judge,
    parse_judge_spec,
)
from assay.models.openai_wire import is_reasoning_model, parse_retry_after

MSG = [{"role": "system", "content": "You are a judge. Answer in JSON."},
       {"role": "user", "content": "Rate: the sky is blue."}]
KEY = "sk-test-SECRET-0123456789abcdef"

TRANSPORTS = ["lean", "sdk"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_generate_reads_text_usage_and_sends_params(fake, transport):
    m = OpenAICompat.endpoint(fake.base_url, "judge-7b", api_key=KEY, transport=transport)
    g = await m.generate(MSG, max_tokens=50, temperature=0.0, response_format={"type": "json_object"})
    assert g.text == '{"score": 4, "reason": "fine"}'
    assert (g.usage.input_tokens, g.usage.output_tokens) == (100, 10)
    assert g.model == "fake-judge" and g.cached is False and g.latency_s > 0
    assert g.raw["choices"][0]["message"]["content"] == g.text
    (req,) = fake.chat_requests
    body = req["body"]
    assert body["model"] == "judge-7b" and body["messages"] == MSG
    assert body["max_tokens"] == 50 and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_object"}
    assert "max_completion_tokens" not in body
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    await m.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_reasoning_models_get_max_completion_tokens_and_no_temperature(fake, transport):
    m = OpenAICompat.endpoint(fake.base_url, "o3-mini", transport=transport)
    assert m.reasoning
    await m.generate(MSG, max_tokens=50, temperature=0.0, logprobs=True)
    body = fake.chat_requests[0]["body"]
    assert "max_tokens" not in body and "temperature" not in body and "logprobs" not in body
    assert body["max_completion_tokens"] >= 50
    flagged = OpenAICompat.endpoint(fake.base_url, "my-deployment", reasoning=True, transport=transport)
    await flagged.generate(MSG, max_tokens=20)
    assert "max_tokens" not in fake.chat_requests[1]["body"]
    await m.aclose(), await flagged.aclose()


@pytest.mark.parametrize("name,expected", [
    ("o1", True), ("o1-mini", True), ("o3-mini", True), ("o4-mini", True), ("gpt-5", True),
    ("gpt-5-mini", True), ("openai/o3", True), ("gpt-4o", False), ("gpt-4o-mini", False),
    ("qwen2.5-7b", False), ("gpt-4.1", False), ("llama3-o1x", False), (None, False),
])
def test_reasoning_detection(name, expected):
    assert is_reasoning_model(name) is expected


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_json_mode_rejected_falls_back_once_and_is_remembered(fake, transport):
    m = OpenAICompat.endpoint(fake.base_url, "m", transport=transport)
    fake.push({"status": 400, "json": {"error": {"message": "response_format json_object is not supported"}}})
    g = await m.generate(MSG, response_format={"type": "json_object"})
    assert g.text.startswith("{")
    first, second = fake.chat_requests
    assert "response_format" in first["body"] and "response_format" not in second["body"]
    assert m.json_mode_supported is False
    await m.generate(MSG, response_format={"type": "json_object"})
    assert "response_format" not in fake.chat_requests[2]["body"] and len(fake.chat_requests) == 3
    await m.aclose()


async def test_a_400_that_is_not_about_json_mode_is_raised(fake):
    m = OpenAICompat.endpoint(fake.base_url, "m")
    fake.push({"status": 400, "json": {"error": {"message": "context too long"}}},
              {"status": 400, "json": {"error": {"message": "context too long"}}})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSG, response_format={"type": "json_object"})
    assert ei.value.status == 400 and not ei.value.retryable and "context too long" in str(ei.value)
    assert m.json_mode_supported is None  # not blamed on json mode
    await m.aclose()


async def test_json_mode_only_sent_when_a_message_mentions_json(fake):
    m = OpenAICompat.endpoint(fake.base_url, "m")
    await m.generate([{"role": "user", "content": "Rate 1-5."}], response_format={"type": "json_object"})
    assert "response_format" not in fake.chat_requests[0]["body"]
    await m.aclose()


async def test_logprobs_are_read(fake):
    lp = [{"token": " 4", "logprob": -0.2, "top_logprobs": [
        {"token": " 4", "logprob": -0.2}, {"token": "5", "logprob": -2.0}, {"token": " 3", "logprob": -3.0}]},
        {"token": ".", "logprob": -0.01, "top_logprobs": [{"token": ".", "logprob": -0.01}]}]
    fake.push({"content": "4.", "logprobs": lp})
    m = OpenAICompat.endpoint(fake.base_url, "m")
    g = await m.generate(MSG, logprobs=True, top_logprobs=3)
    body = fake.chat_requests[0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert g.logprobs == {" 4": -0.2, "5": -2.0, " 3": -3.0}
    assert [t for t, _ in g.token_logprobs] == [" 4", "."]
    await m.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_azure_deployment_url_key_header_and_api_version(fake, monkeypatch, transport):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", f"http://127.0.0.1:{fake.port}")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    m = parse_judge_spec("azure:my-deployment").build(transport=transport)
    assert m.name == "azure:my-deployment"
    await m.generate(MSG, max_tokens=5)
    (req,) = fake.chat_requests
    assert req["path"].startswith("/openai/deployments/my-deployment/chat/completions")
    assert "api-version=2024-10-21" in req["path"]
    assert req["headers"]["api-key"] == KEY
    await m.aclose()


def test_azure_missing_env_is_a_clear_error():
    with pytest.raises(AssayError, match="AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY"):
        parse_judge_spec("azure:dep").build()


def test_openai_needs_a_key_and_reads_it_from_env(monkeypatch):
    with pytest.raises(AssayError, match="OPENAI_API_KEY"):
        parse_judge_spec("openai:gpt-4o-mini").build()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    m = parse_judge_spec("openai:gpt-4o-mini").build()
    assert m.name == "openai:gpt-4o-mini" and m.base_url == "https://api.openai.com/v1"
    assert m.default_concurrency == 32


async def test_key_never_in_repr_raw_errors_or_pickle(fake):
    m = OpenAICompat.endpoint(fake.base_url, "m", api_key=KEY)
    assert KEY not in repr(m) and KEY not in repr(vars(m)) and KEY not in m.cache_identity
    lm = LimitedModel(m, Limiter(2, max_attempts=1))
    assert KEY not in repr(lm)
    g = await m.generate(MSG)
    assert KEY not in str(g.raw) and KEY not in repr(g)
    fake.push({"status": 401, "json": {"error": {"message": f"Incorrect API key provided: {KEY}"}}})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSG)
    assert ei.value.kind == "auth" and KEY not in str(ei.value) and KEY not in (ei.value.body or "")
    await m.aclose()
    assert pickle.loads(pickle.dumps(m)).name == m.name


async def test_other_endpoints_never_get_the_openai_key(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    m = parse_judge_spec(f"{fake.base_url}#m").build()
    await m.generate(MSG)
    assert "authorization" not in fake.chat_requests[0]["headers"]
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "local-key")
    m2 = parse_judge_spec(f"{fake.base_url}#m").build()
    await m2.generate(MSG)
    assert fake.chat_requests[1]["headers"]["authorization"] == "Bearer local-key"
    await m.aclose(), await m2.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_model_named_uses_the_first_listed(fake, transport):
    m = parse_judge_spec(fake.base_url).build(transport=transport)
    await m.generate(MSG)
    assert fake.chat_requests[0]["body"]["model"] == "fake-judge"
    await m.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_status_codes_map_to_retry_decisions(fake, transport):
    m = OpenAICompat.endpoint(fake.base_url, "m", transport=transport)
    cases = [
        ({"status": 429, "headers": {"Retry-After": "7"}, "json": {"error": {"message": "slow down"}}},
         "rate_limit", True, 7.0),
        ({"status": 429, "json": {"error": {"message": "You exceeded your current quota",
                                            "type": "insufficient_quota", "code": "insufficient_quota"}}},
         "quota", False, None),
        ({"status": 503, "json": {"error": {"message": "overloaded"}}}, "server", True, None),
        ({"status": 404, "json": {"error": {"message": "no such model"}}}, "not_found", False, None),
        ({"status": 422, "raw": "unprocessable"}, "bad_request", False, None),
        ({"raw": "<html>not json</html>"}, "bad_response", True, None),
    ]
    for action, kind, retryable, retry_after in cases:
        fake.push(action)
        with pytest.raises(ModelCallError) as ei:
            await m.generate(MSG)
        e = ei.value
        assert (e.kind, e.retryable, e.retry_after) == (kind, retryable, retry_after), action
    await m.aclose()


@pytest.mark.parametrize("headers,expected", [
    ({"retry-after": "2"}, 2.0), ({"retry-after": "0.5"}, 0.5), ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25), ({}, None), ({"retry-after": "soon"}, None),
])
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date():
    import email.utils
    import time
    v = parse_retry_after({"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)})
    assert 25 <= v <= 31


# -- judge specs --------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,kind,model,base_url,path", [
    ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None, None),
    ("OpenAI: gpt-4o ", "openai", "gpt-4o", None, None),
    ("azure:my-deployment", "azure", "my-deployment", None, None),
    ("http://127.0.0.1:8000/v1#qwen2.5-7b", "http", "qwen2.5-7b", "http://127.0.0.1:8000/v1", None),
    ("https://host.example/v1/#org/model:tag", "http", "org/model:tag", "https://host.example/v1", None),
    ("http://localhost:11434/v1", "http", None, "http://localhost:11434/v1", None),
    ("local:/models/any.gguf", "local", None, None, "/models/any.gguf"),
])
def test_parse_judge_spec(spec, kind, model, base_url, path):
    js = parse_judge_spec(spec)
    assert (js.kind, js.model, js.base_url, js.path) == (kind, model, base_url, path)


@pytest.mark.parametrize("spec", ["gpt-4o", "cohere:command", "openai:", "azure:", "local:", "",
                                  "ftp://x/v1#m", "http://#m"])
def test_unknown_specs_list_the_accepted_forms(spec):
    with pytest.raises(AssayError) as ei:
        parse_judge_spec(spec)
    msg = str(ei.value)
    assert any(f.split(" ")[0] in msg for f in ACCEPTED_FORMS)


def test_local_spec_with_a_missing_file_is_a_clear_error():
    with pytest.raises(AssayError, match="does not exist"):
        parse_judge_spec("local:/models/judge.gguf").build()


async def test_build_judge_wraps_backend_in_limiter_and_default_cache(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "c.sqlite"))
    judge = build_judge(f"{fake.base_url}#m", concurrency=3, max_attempts=2)
    assert isinstance(judge, LimitedModel) and judge.limiter.concurrency == 3
    assert judge.cache is not None and judge.cache.path == tmp_path / "c.sqlite"
    assert judge.name == f"{fake.base_url}#m"
    monkeypatch.setenv("ASSAY_CACHE", "off")
    assert build_judge(f"{fake.base_url}#m").cache is None
    assert build_judge(f"{fake.base_url}#m").limiter.concurrency == 8  # per-backend default
    await judge.aclose()


# -- garbage judge text: parse fallbacks and one re-ask ----------------------------------------------
async def test_garbage_text_then_readable_answer_after_one_reask(fake):
    fake.push({"content": "I cannot decide, it depends."}, {"content": "```json\n{\"score\": 2}\n```"})
    judge = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"), Limiter(4, max_attempts=1))
    ans = await ask_score(judge, MSG, "1-5")
    assert ans.ok and ans.value == 2 and ans.method == "json"
    assert ans.texts == ["I cannot decide, it depends.", "```json\n{\"score\": 2}\n```"]
    assert len(fake.chat_requests) == 2
    assert fake.chat_requests[1]["body"]["messages"][-2]["content"] == "I cannot decide, it depends."
    await judge.aclose()


async def test_garbage_twice_is_not_ok_and_keeps_the_raw_text(fake):
    fake.push({"content": "\x00\x01 blah {not json"}, {"content": "Rating: excellent!!"})
    judge = OpenAICompat.endpoint(fake.base_url, "m")
    ans = await ask_score(judge, MSG, "1-5")
    assert not ans.ok and ans.value is None
    assert ans.texts == ["\x00\x01 blah {not json", "Rating: excellent!!"]
    assert ans.usage.input_tokens == 200
    await judge.aclose()


async def test_prose_wrapped_tags_and_logprob_score_through_the_endpoint(fake):
    lp = [{"token": "Yes", "logprob": -0.1, "top_logprobs": [
        {"token": "Yes", "logprob": -0.1}, {"token": " no", "logprob": -2.5}]}]
    fake.push({"content": "Yes <answer>yes</answer>", "logprobs": lp})
    judge = OpenAICompat.endpoint(fake.base_url, "m")
    ans = await ask_score(judge, MSG, "yes/no", logprobs=True, top_logprobs=2)
    assert ans.ok and ans.value == "yes" and ans.method == "tag"
    assert ans.logprob is not None and 0.9 < ans.logprob.value < 0.95
    await judge.aclose()


def test_sessions_survive_a_new_event_loop(fake):
    import asyncio
    import warnings
    m = OpenAICompat.endpoint(fake.base_url, "m")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        for _ in range(2):  # evaluate() runs each run in its own loop
            assert asyncio.run(m.generate(MSG)).text
    assert len(fake.chat_requests) == 2


def test_retry_policy_delays_are_bounded():
    p = RetryPolicy(base_delay=0.5, max_delay=4)
    for n in range(8):
        d = p.delay(n, None)
        cap = min(4, 0.5 * 2 ** n)
        assert cap / 2 <= d <= cap
    assert 3.0 <= p.delay(0, 3.0) <= 3.0 * 1.1 + 0.05


async def test_json_mode_off_never_sends_response_format_and_keys_the_cache_apart(fake):
    m = OpenAICompat.endpoint(fake.base_url, "judge-7b", json_mode=False)
    await m.generate(MSG, response_format={"type": "json_object"})
    assert "response_format" not in fake.chat_requests[-1]["body"]
    assert m.cache_identity != OpenAICompat.endpoint(fake.base_url, "judge-7b").cache_identity
    await m.aclose()
