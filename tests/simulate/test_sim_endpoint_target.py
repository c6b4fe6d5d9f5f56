"""An OpenAI-compatible endpoint as the target (``http://HOST:PORT/v1#MODEL``), against the
scripted fake endpoint of tests/models: for the simulators and for `assay eval --target`."""

import json

import pytest

import assay
from assay.engine.target import EndpointApp, Target
from assay.errors import AssayError
from assay.records import Record
from assay.simulate import simulate_adversarial, simulate_jailbreak
from tests.helpers.cli import run_assay
from tests.helpers.fake_openai_server import chat_json


def _answer(req):
    msgs = req["body"]["messages"]
    body = chat_json(f"answer #{len(msgs)}", usage=(40, 7))
    body["choices"][0]["message"]["context"] = {"citations": [{"content": "cited text", "title": "Doc A",
                                                               "url": "https://example.test/a"}]}
    return {"json": body}


async def test_the_endpoint_gets_the_conversation_and_its_documents(fake):
    fake.default = _answer
    tgt = Target(f"{fake.base_url}#fake-judge")
    assert tgt.name == f"{fake.base_url}#fake-judge" and tgt.is_async
    rec = Record(query="and now?", history=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                 contexts=[{"content": "the manual", "title": "Manual"}])
    out = await tgt.call(rec)
    await tgt.fn.aclose()
    body = fake.chat_requests[-1]["body"]
    assert body["model"] == "fake-judge"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert "[1] Manual\nthe manual" in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "and now?"}
    assert out.response == "answer #4"
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.total_tokens) == (40, 7, 47)
    assert out.contexts[0].content == "cited text" and out.contexts[0].doc_uri == "https://example.test/a"


def test_a_spec_that_is_not_an_endpoint_is_refused():
    with pytest.raises(AssayError, match="unknown target|endpoint"):
        Target("ftp://nowhere")
    with pytest.raises(AssayError, match="endpoint target must look like"):
        EndpointApp("openai:gpt-4o-mini")


def test_evaluate_with_an_endpoint_target(fake):
    fake.default = _answer
    res = assay.evaluate([{"query": "q1"}, {"query": "q2"}], target=f"{fake.base_url}#fake-judge",
                         metrics="token_count")
    assert res.run["target"] == f"{fake.base_url}#fake-judge"
    assert [r["inputs.response"] for r in res.rows] == ["answer #1", "answer #1"]
    assert res.rows[0]["inputs.context"][0]["content"] == "cited text"


def test_retries_on_5xx_and_a_hard_failure_is_recorded(fake):
    fake.default = _answer
    fake.push({"status": 500, "json": {"error": {"message": "overloaded"}}})
    res = simulate_adversarial(f"{fake.base_url}#fake-judge", scenario="adv_qa", max_conversations=1)
    assert res.target_errors == 0 and res.rows[0]["conversation"]["messages"][1]["content"] == "answer #1"
    fake.push({"status": 401, "json": {"error": {"message": "bad key"}}})
    res = simulate_adversarial(f"{fake.base_url}#fake-judge", scenario="adv_qa", max_conversations=1)
    assert res.target_errors == 1 and "authentication failed" in res.rows[0]["simulation_error"]


def test_simulators_against_the_endpoint(fake, tmp_path):
    fake.default = _answer
    res = simulate_jailbreak(f"{fake.base_url}#fake-judge", kind="xpia", max_conversations=2,
                             out=tmp_path / "jb")
    assert res.conversations == 4 and len(fake.chat_requests) == 4
    # the document reached the endpoint as a system message
    systems = [r["body"]["messages"][0]["content"] for r in fake.chat_requests]
    assert all(s.startswith("Documents:") for s in systems)
    assert any(res.rows[2]["params"]["attack"] in s for s in systems)
    cites = res.rows[0]["conversation"]["messages"][1]["context"]["citations"]
    assert cites[0]["url"] == "https://example.test/a"


def test_cli_eval_and_simulate_with_an_endpoint_target(fake, tmp_path):
    fake.default = _answer
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"query": "hello"}) + "\n")
    p = run_assay(["eval", str(data), "--target", f"{fake.base_url}#fake-judge", "--metrics", "token_count", "--quiet"],
                  cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 read, 1 evaluated" in p.stdout
    p = run_assay(["simulate", "adversarial", "--target", f"{fake.base_url}#fake-judge", "--max", "2",
                   "--out", "a.jsonl", "-q"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 2
