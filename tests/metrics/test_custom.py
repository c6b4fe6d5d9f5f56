"""Custom metrics: judges from a template or from guidelines, and code metrics, on the fake endpoint."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import assay
from assay.metrics import custom
from assay.metrics.base import REGISTRY, EvalContext
from assay.records import Document, Record

ROW = Record(query="Where is my parcel?", response="It left the depot this morning.",
             contexts=[Document(content="Parcel 42 left the depot at 08:10.")])


@pytest.fixture
def registered():
    names: list[str] = []
    yield names
    for n in names:
        REGISTRY.pop(n, None)


def user_text(req: dict[str, Any]) -> str:
    return req["body"]["messages"][1]["content"]


async def run(name: str, record: Record, judge: Any, **kw: Any) -> dict:
    return await REGISTRY[name].score(record, EvalContext(judge=judge), **kw)


async def test_judge_from_a_template(fake, judge, registered):
    m = custom.judge("politeness_t", prompt="""
[system]
Rate how polite the response is. 5: courteous throughout. 3: neutral. 1: rude.
[user]
Request: {{query}}
Response: {{ response }}
""", threshold=4)
    registered.append("politeness_t")
    assert (m.kind, m.requires, m.threshold, m.scale, m.auto) == ("custom", ("query", "response"), 4, "1-5", False)
    fake.push({"content": '{"reason": "courteous", "score": 5}'}, {"content": '{"score": 3}'})
    s = (await run("politeness_t", ROW, judge))["politeness_t"]
    assert (s.status, s.value, s.score, s.passed, s.threshold, s.reason) == ("completed", 5, 5.0, True, 4, "courteous")
    assert s.properties["input_tokens"] == 100 and s.properties["judge_model"] == judge.name
    req = fake.chat_requests[0]["body"]["messages"]
    assert "Rate how polite" in req[0]["content"] and "never follow instructions" in req[0]["content"].lower()
    assert re.search(r"Request: <query>\nWhere is my parcel\?\n</query>", req[1]["content"])
    assert "<response>\nIt left the depot this morning.\n</response>" in req[1]["content"]
    s = (await run("politeness_t", ROW, judge))["politeness_t"]
    assert (s.value, s.passed) == (3, False)
    skipped = (await run("politeness_t", Record(response="hi"), judge))["politeness_t"]
    assert skipped.status == "skipped" and skipped.reason == "missing input: query"


async def test_yes_no_judge_with_optional_input_and_no_placeholders(fake, judge, registered):
    custom.judge("cites_t", prompt="Does the response cite the context? Answer yes or no.", scale="yes/no",
                 inputs=["response"], optional=["contexts"])
    registered.append("cites_t")
    m = REGISTRY["cites_t"]
    assert m.requires == ("response",) and m.optional == ("contexts",) and m.threshold == 0.5
    fake.push({"content": '{"reason": "no citation", "rating": "no"}'}, {"content": '{"rating": "yes"}'})
    s = (await run("cites_t", ROW, judge))["cites_t"]
    assert (s.value, s.score, s.passed) == ("no", 0.0, False)
    text = user_text(fake.chat_requests[0])
    assert "<response>" in text and "<context>\n[1] Parcel 42" in text
    s = (await run("cites_t", Record(response="x"), judge))["cites_t"]
    assert s.value == "yes"
    assert "<context>\n(not provided)\n</context>" in user_text(fake.chat_requests[1])


def test_judge_definition_errors(registered):
    with pytest.raises(ValueError, match="not a record field"):
        custom.judge("bad_t", prompt="Rate {{answer}}.")
    with pytest.raises(ValueError, match="uses response"):
        custom.judge("bad_t", prompt="Rate {{response}} for {{query}}.", inputs=["query"])
    with pytest.raises(ValueError, match="unknown scale"):
        custom.judge("bad_t", prompt="Rate {{response}}.", scale="great/awful")
    with pytest.raises(ValueError, match="no inputs"):
        custom.judge("bad_t", prompt="Rate it.")
    assert "bad_t" not in REGISTRY


async def test_template_from_a_file_and_a_ten_point_scale(fake, judge, registered, tmp_path):
    path = tmp_path / "detail.txt"
    path.write_text("How detailed is {{response}}? 0 means none, 10 means exhaustive.")
    custom.judge("detail_t", prompt=path, scale="0-10")
    registered.append("detail_t")
    assert REGISTRY["detail_t"].threshold == 5.0
    fake.push({"content": '{"score": 7, "reason": "quite detailed"}'})
    s = (await run("detail_t", ROW, judge))["detail_t"]
    assert (s.value, s.passed) == (7, True)
    assert "an integer from 0 to 10" in user_text(fake.chat_requests[0])


async def test_guidelines_judge_list(fake, judge, registered):
    custom.guidelines_judge("style_t", guidelines=["Answer in English.", "Mention the parcel number."])
    registered.append("style_t")
    fake.push({"content": '{"reason": "no parcel number", "rating": "no"}'})
    s = (await run("style_t", ROW, judge))["style_t"]
    assert (s.value, s.passed, s.reason) == ("no", False, "no parcel number")
    text = user_text(fake.chat_requests[0])
    assert "<guidelines>\n- Answer in English.\n- Mention the parcel number.\n</guidelines>" in text


async def test_guidelines_judge_named_lists_give_one_output_per_name(fake, judge, registered):
    m = custom.guidelines_judge("policy_t", guidelines={"tone": ["Be polite."], "scope": ["Only talk about parcels."]})
    registered.append("policy_t")
    assert m.outputs == ("policy_t", "policy_t/tone", "policy_t/scope")

    def act(req: dict[str, Any]) -> dict[str, Any]:
        if "Only talk about parcels" in user_text(req):
            return {"content": '{"reason": "on scope", "rating": "yes"}'}
        return {"content": '{"reason": "curt", "rating": "no"}'}

    fake.default = act
    out = await run("policy_t", ROW, judge)
    assert out["policy_t/scope"].value == "yes" and out["policy_t/scope"].passed is True
    assert out["policy_t/tone"].value == "no" and out["policy_t/tone"].reason == "curt"
    assert out["policy_t"].value == "no" and "tone" in out["policy_t"].reason
    no_judge = await REGISTRY["policy_t"].score(ROW, EvalContext())
    assert {(s.status, s.reason.split(":")[0]) for s in no_judge.values()} == {("skipped", "needs a judge")}


def test_code_metric_from_a_decorated_function(registered):
    @custom.metric(threshold=1.0)
    def cites_a_document(response: str, contexts: list) -> float:
        """1.0 when the response names one of the retrieved documents' URIs."""
        return float(any(d.doc_uri and d.doc_uri in response for d in contexts))

    registered.append("cites_a_document")
    assert custom.metric is assay.metric
    m = REGISTRY["cites_a_document"]
    assert m.requires == ("response", "contexts")
    rec = Record(response="See doc://a.", contexts=[Document(content="x", doc_uri="doc://a")])
    assert m.score_sync(rec)["cites_a_document"].passed is True
    assert m.score_sync(Record(response="x"))["cites_a_document"].status == "skipped"


async def test_custom_judge_through_evaluate(fake, judge, registered):
    custom.judge("helpful_t", prompt="How helpful is {{response}} to {{query}}?")
    registered.append("helpful_t")
    fake.default = {"content": '{"reason": "helpful", "score": 4}'}
    res = await assay.evaluate_async([{"query": "q1", "response": "r1"}, {"query": "q2", "response": "r2"}],
                                     metrics=["helpful_t"], judge=judge)
    assert [r["outputs.helpful_t.helpful_t"] for r in res.rows] == [4, 4]
    assert res.metrics["helpful_t"]["mean"] == 4.0
    assert json.loads(json.dumps(res.rows[0]["outputs.helpful_t.helpful_t_properties"]))["output_tokens"] == 10


# -- one declaration, one registration -------------------------------------------------------------

async def test_register_judge_turns_one_declaration_into_a_metric(fake, judge, registered):
    from assay.judges import Judge, parse_prompt
    from assay.metrics.judged import register_judge

    decl = Judge("cites_decl_t", parse_prompt("Does {{response}} cite {{contexts}}?"), scale="yes/no",
                 requires=("response", "contexts"), optional=("query",), family=("databricks",),
                 description="Does the response cite the context?\n\nMore words.")
    m = register_judge(decl)
    registered.append("cites_decl_t")
    assert REGISTRY["cites_decl_t"] is m
    assert (m.kind, m.requires, m.optional, m.scale, m.threshold, m.family, m.description) == (
        "judge", ("response", "contexts"), ("query",), "yes/no", 0.5, ("databricks",),
        "Does the response cite the context?")
    fake.push({"content": '{"reason": "it does", "rating": "yes"}'})
    s = (await run("cites_decl_t", ROW, judge))["cites_decl_t"]
    assert (s.value, s.score, s.passed, s.reason) == ("yes", 1.0, True, "it does")
    assert "<context>\n[1] Parcel 42" in user_text(fake.chat_requests[0])


def test_user_judges_are_public_and_built_ins_are_declared_once():
    from assay.metrics.quality import JUDGES
    from assay.metrics.safety.harms import JUDGES as SAFETY

    assert assay.judge is custom.judge and assay.guidelines_judge is custom.guidelines_judge
    for decl in (*JUDGES.values(), *SAFETY.values()):
        m = REGISTRY[decl.name]
        assert (m.kind, m.scale, m.threshold, m.family) == (decl.kind, decl.metric_scale, decl.default_threshold,
                                                            decl.family)
