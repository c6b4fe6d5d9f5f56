"""``assay judge probe``: each capability reported correctly against loopback endpoints that have it
and endpoints that lack it (OpenAI-compatible, Anthropic, Gemini, Bedrock), the price and latency,
the command's table and JSON, and the judge's configuration recorded with a run."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from assay.models import resolve
from assay.models.probe import probe
from tests.helpers.fake_openai_server import chat_json
from tests.helpers.provider_servers import ProviderServer, anthropic_message, converse_response, gemini_response


def found(rep) -> dict[str, bool | None]:
    return {f.name: f.supported for f in rep.findings}


def bad(message: str) -> dict:
    return {"status": 400, "json": {"error": {"message": message, "type": "invalid_request_error"}}}


# -- OpenAI-compatible ------------------------------------------------------------------------------------
def openai_capable(req):
    body = req["body"]
    if "tools" in body:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "record_score", "arguments": '{"score": 1}'}}]}
        return {"json": {"choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
                         "usage": {"prompt_tokens": 40, "completion_tokens": 8}}}
    lp = None
    if body.get("logprobs"):
        alts = [{"token": t, "logprob": v} for t, v in (("{", -0.01), ("```", -5.0), ("Yes", -6.0))][:body["top_logprobs"]]
        lp = [{"token": "{", "logprob": -0.01, "top_logprobs": alts}]
    return {"json": chat_json('{"score": 1}', logprobs=lp, usage=(40, 6))}


def openai_lacking(req):
    body = req["body"]
    if "response_format" in body:
        return bad("response_format is not supported by this model")
    if "tools" in body:
        return bad("tools are not supported")
    if "max_tokens" in body:
        return bad("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
    if "reasoning_effort" in body:
        return bad("Unrecognized request argument supplied: reasoning_effort")
    return {"json": chat_json("Yes, score 1.", usage=(40, 6))}    # logprobs asked: accepted, none returned


async def test_an_openai_compatible_endpoint_that_has_every_capability(fake):
    fake.default = openai_capable
    rep = await probe(resolve(f"{fake.base_url}#judge-m", cache=None))
    assert rep.error is None
    assert found(rep) == {"json_mode": True, "logprobs": True, "tools": True, "max_tokens_param": True, "reasoning": True}
    by = {f.name: f for f in rep.findings}
    assert by["logprobs"].detail == "top-3 alternatives per token"        # the top-k the server really gave
    assert by["max_tokens_param"].uses == "max_tokens" and by["json_mode"].uses == "JSON mode for every judgment"
    sent = [r["body"] for r in fake.chat_requests]   # the length field first, then the plain call, then one each
    assert sent[0]["max_tokens"] == 16 and sent[1] == {k: v for k, v in sent[0].items()}
    assert sent[2]["response_format"] == {"type": "json_object"} and sent[3]["top_logprobs"] == 5
    assert sent[4]["tool_choice"] == {"type": "function", "function": {"name": "record_score"}}
    assert sent[5]["reasoning_effort"] == "low" and "temperature" not in sent[5]
    assert rep.calls == len(fake.chat_requests) == 6 and rep.latency_s > 0
    assert rep.price_per_1m is None and rep.cost_per_call_usd is None       # a self-hosted server


async def test_an_openai_compatible_endpoint_that_lacks_them(fake):
    fake.default = openai_lacking
    rep = await probe(resolve(f"{fake.base_url}#judge-m", cache=None))
    assert found(rep) == {"json_mode": False, "logprobs": False, "tools": False, "max_tokens_param": True,
                          "reasoning": False}
    by = {f.name: f for f in rep.findings}
    assert by["json_mode"].uses.startswith("JSON asked in the prompt") and "refused" in by["json_mode"].detail
    assert by["logprobs"].detail == "accepted, none returned" and by["logprobs"].uses == "the parsed score alone"
    assert by["max_tokens_param"].detail == "max_tokens refused; max_completion_tokens accepted"
    assert "reasoning=True" in by["max_tokens_param"].uses          # what assay would send is refused: said so
    # every later call used the field the server takes, so each capability was judged on its own
    assert all("max_tokens" not in r["body"] for r in fake.chat_requests[2:]) and rep.calls == 7


async def test_the_price_comes_from_the_table(fake, monkeypatch):
    fake.default = openai_capable
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    rep = await probe(resolve("openai:gpt-4o-mini", cache=None), capabilities=("json_mode",))
    assert rep.price_per_1m == {"input": 0.15, "output": 0.6} and rep.price_source.startswith("price table")
    assert rep.cost_per_call_usd == pytest.approx((40 * 0.15 + 6 * 0.6) / 1e6) and rep.calls == 2


# -- the native providers ---------------------------------------------------------------------------------
@pytest.fixture
def provider(request, monkeypatch):
    kind = request.param
    s = ProviderServer(kind).start()
    env = {"anthropic": {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": s.url},
           "gemini": {"GEMINI_API_KEY": "k", "GEMINI_BASE_URL": s.url},
           "bedrock": {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": s.url}}[kind]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield s
    s.stop()


def anthropic_answer(capable):
    def answer(req):
        body = req["body"]
        if ("tools" in body or "thinking" in body) and not capable:
            return bad(f"{'tools' if 'tools' in body else 'thinking'}: Extra inputs are not permitted")
        msg = anthropic_message('{"score": 1}')
        if "tools" in body:
            msg["content"] = [{"type": "tool_use", "id": "toolu_1", "name": "record_score", "input": {"score": 1}}]
        if "thinking" in body:
            msg["content"].insert(0, {"type": "thinking", "thinking": "Paris is.", "signature": "sig"})
        return {"json": msg}
    return answer


@pytest.mark.parametrize("provider", ["anthropic"], indirect=True)
@pytest.mark.parametrize("capable", [True, False])
async def test_anthropic(provider, capable):
    provider.default = anthropic_answer(capable)
    rep = await probe(resolve("anthropic:claude-haiku-4-5", cache=None))
    assert found(rep) == {"json_mode": False, "logprobs": False, "tools": capable, "max_tokens_param": True,
                          "reasoning": capable}
    by = {f.name: f for f in rep.findings}
    assert by["json_mode"].latency_s is None and by["max_tokens_param"].uses == "max_tokens"   # no call needed
    assert rep.calls == 3 == len(provider.calls)
    thinking = [c["body"] for c in provider.calls if "thinking" in c["body"]][0]
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 1024} and thinking["max_tokens"] > 1024
    assert rep.price_per_1m == {"input": 1.0, "output": 5.0}


def gemini_answer(capable):
    def answer(req):
        body, cfg = req["body"], req["body"].get("generationConfig", {})
        if not capable and ("tools" in body or cfg.get("responseLogprobs") or "thinkingConfig" in cfg
                            or "responseMimeType" in cfg):
            return {"status": 400, "json": {"error": {"code": 400, "message": "Invalid JSON payload: unknown field",
                                                      "status": "INVALID_ARGUMENT"}}}
        if "tools" in body:
            r = gemini_response("")
            r["candidates"][0]["content"]["parts"] = [{"functionCall": {"name": "record_score", "args": {"score": 1}}}]
            return {"json": r}
        lp = [("{", -0.01, {"{": -0.01, "Yes": -5.0})] if cfg.get("responseLogprobs") else None
        return {"json": gemini_response('{"score": 1}', logprobs=lp)}
    return answer


@pytest.mark.parametrize("provider", ["gemini"], indirect=True)
@pytest.mark.parametrize("capable", [True, False])
async def test_gemini(provider, capable):
    provider.default = gemini_answer(capable)
    rep = await probe(resolve("gemini:gemini-2.5-flash", cache=None))
    assert found(rep) == {"json_mode": capable, "logprobs": capable, "tools": capable, "max_tokens_param": True,
                          "reasoning": capable}
    assert rep.calls == 5 and rep.config["distributions"] is True


@pytest.mark.parametrize("provider", ["bedrock"], indirect=True)
async def test_bedrock_tools(provider):
    def answer(req):
        if "toolConfig" in req["body"]:
            r = converse_response("")
            r["output"]["message"]["content"] = [{"toolUse": {"toolUseId": "t1", "name": "record_score",
                                                              "input": {"score": 1}}}]
            return {"json": r}
        if "additionalModelRequestFields" in req["body"]:
            return {"status": 400, "json": {"message": "The model returned the following errors: thinking: "
                                                       "Extra inputs are not permitted"}}
        return {"json": converse_response('{"score": 1}')}

    provider.default = answer
    rep = await probe(resolve("bedrock:amazon.nova-micro-v1:0", cache=None))
    assert found(rep) == {"json_mode": False, "logprobs": False, "tools": True, "max_tokens_param": True,
                          "reasoning": False}
    assert {f.name: f.uses for f in rep.findings}["max_tokens_param"] == "inferenceConfig.maxTokens"


# -- the command, and the configuration kept with a run ----------------------------------------------------
def test_the_command_prints_the_table_and_json(fake, monkeypatch):
    from assay.cli.judge import app

    fake.default = openai_lacking
    runner = CliRunner()
    res = runner.invoke(app, ["probe", "--judge", f"{fake.base_url}#judge-m"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "json_mode" in res.output and "max_completion_tokens accepted" in res.output
    assert "JSON asked in the prompt" in res.output and "7 calls" in res.output
    res = runner.invoke(app, ["probe", "--judge", f"{fake.base_url}#judge-m", "--json"])
    rep = json.loads(res.output)
    assert {f["name"]: f["supported"] for f in rep["findings"]}["tools"] is False
    assert rep["config"]["base_url"] == fake.base_url and rep["config"]["backend"] == "OpenAICompat"
    fake.default = bad("no such model")
    res = runner.invoke(app, ["probe", "--judge", f"{fake.base_url}#judge-m"])
    assert res.exit_code == 3 and "the plain call failed" in res.output


def test_a_run_records_the_judge_configuration(fake, monkeypatch):
    from assay import evaluate

    monkeypatch.setenv("ASSAY_STORE", "off")
    fake.default = {"content": '{"score": 5, "reason": "supported"}'}
    judge = resolve(f"{fake.base_url}#judge-m", cache=None, concurrency=3)
    rows = [{"query": "Who?", "response": "Ada.", "context": "Ada wrote it."}]
    r = evaluate(rows, metrics="groundedness", judge=judge)
    cfg = r.run["judge_usage"]["judge"]
    assert cfg["name"] == f"{fake.base_url}#judge-m" and cfg["backend"] == "OpenAICompat"
    assert cfg["base_url"] == fake.base_url and cfg["concurrency"] == 3 and cfg["json_mode_supported"] is True
    assert cfg["distributions"] is False

