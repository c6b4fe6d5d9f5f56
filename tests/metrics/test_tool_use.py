"""The tool-use code metrics on hand-computed cases: precision, recall and exact match against
``expected_tool_calls``, the number of agent steps and the number of failed tool calls."""

from __future__ import annotations

from typing import Any

import pytest

from assay.metrics.base import REGISTRY, load_builtin_metrics, plan_auto
from assay.metrics.tool_use import match_calls, meets
from assay.records import Message, Record

load_builtin_metrics()


def call(name: str, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "arguments": {} if arguments is None else arguments, **extra}


def row(calls: list[dict[str, Any]] | None, expected: list[dict[str, Any]], **kw: Any) -> Record:
    return Record(query="Weather in Oslo and Bergen tomorrow?", response="Oslo 3 °C, Bergen 6 °C.",
                  tool_calls=calls, expected_tool_calls=expected, **kw)


def run(name: str, record: Record) -> Any:
    m = REGISTRY[name]
    return m.score_sync(record)[m.outputs[0]]


OSLO = call("forecast", {"city": "Oslo", "days": 1}, tool_call_id="c1")
BERGEN = call("forecast", {"city": "Bergen", "days": 1}, tool_call_id="c2")
EXP_OSLO = {"name": "forecast", "arguments": {"city": "Oslo"}}
EXP_BERGEN = {"name": "forecast", "arguments": {"city": "Bergen"}}


def test_all_expected_calls_in_order():
    r = row([OSLO, BERGEN], [EXP_OSLO, EXP_BERGEN])
    p, rc, em = run("tool_call_precision", r), run("tool_call_recall", r), run("tool_call_exact_match", r)
    assert (p.value, rc.value, em.value, em.result) == (1.0, 1.0, 1, "pass")
    assert p.reason == "2 of 2 expected call(s) made; 2 call(s) in all"


def test_an_extra_call_lowers_precision_and_is_named():
    extra = call("geocode", {"place": "Oslo"})
    r = row([extra, OSLO, BERGEN], [EXP_OSLO, EXP_BERGEN])
    p = run("tool_call_precision", r)
    assert p.value == pytest.approx(2 / 3) and run("tool_call_recall", r).value == 1.0
    assert p.reason.endswith('not expected: geocode({"place":"Oslo"})')
    assert p.properties["extra_calls"] == ['geocode({"place":"Oslo"})'] and p.properties["missing_calls"] == []
    assert run("tool_call_exact_match", r).value == 0


def test_argument_mismatch_is_a_miss_and_an_extra():
    wrong = call("forecast", {"city": "Bergen", "days": 2})
    r = row([OSLO, wrong], [EXP_OSLO, {"name": "forecast", "arguments": {"city": "Bergen", "days": 1}}])
    p, rc = run("tool_call_precision", r), run("tool_call_recall", r)
    assert (p.value, rc.value) == (0.5, 0.5)
    assert 'missing: forecast({"city":"Bergen","days":1})' in rc.reason
    assert 'not expected: forecast({"city":"Bergen","days":2})' in rc.reason


def test_unnamed_arguments_are_free_and_numbers_compare_as_json():
    assert meets(call("forecast", {"city": "Oslo", "days": 1}), {"name": "forecast"})
    assert meets(call("forecast", {"city": "Oslo", "days": 1.0}), {"name": "forecast", "arguments": {"days": 1}})
    assert not meets(call("forecast", {"city": "Oslo", "days": "1"}), {"name": "forecast", "arguments": {"days": 1}})
    assert not meets(call("forecast", {"flag": 1}), {"name": "forecast", "arguments": {"flag": True}})
    assert not meets(call("forecast", {"city": "Oslo"}), {"name": "forecast", "arguments": {"days": 1}})
    assert not meets(call("forcast", {"city": "Oslo"}), {"name": "forecast"})


def test_openai_shaped_calls_with_json_text_arguments_are_read():
    oa = {"id": "c9", "type": "function", "function": {"name": "forecast", "arguments": '{"city": "Oslo", "days": 1}'}}
    assert meets(oa, EXP_OSLO)


def test_non_json_arguments_meet_only_an_expectation_without_arguments():
    raw = call("forecast", "city=Oslo")
    assert meets(raw, {"name": "forecast"}) and not meets(raw, EXP_OSLO)
    r = row([raw], [EXP_OSLO])
    rc = run("tool_call_recall", r)
    assert rc.value == 0.0 and rc.reason.endswith("not expected: forecast(city=Oslo)")


def test_duplicate_calls_count_once_each():
    r = row([OSLO, OSLO, BERGEN], [EXP_OSLO, EXP_BERGEN])
    p, rc = run("tool_call_precision", r), run("tool_call_recall", r)
    assert p.value == pytest.approx(2 / 3) and rc.value == 1.0
    assert p.properties["extra_calls"] == ['forecast({"city":"Oslo","days":1})']
    # an expectation listed twice needs two calls
    r2 = row([OSLO], [EXP_OSLO, EXP_OSLO])
    assert (run("tool_call_precision", r2).value, run("tool_call_recall", r2).value) == (1.0, 0.5)


def test_a_vague_expectation_does_not_take_the_call_a_precise_one_needs():
    # greedy in order would pair {"name": forecast} with the Oslo call and leave the Oslo expectation unmet
    pairs = match_calls([OSLO, call("news")], [{"name": "forecast"}, EXP_OSLO])
    assert pairs == {0: 0}
    pairs = match_calls([OSLO, BERGEN], [{"name": "forecast"}, EXP_OSLO])
    assert sorted(pairs.items()) == [(0, 1), (1, 0)]
    r = row([OSLO, BERGEN], [{"name": "forecast"}, EXP_OSLO])
    assert run("tool_call_recall", r).value == 1.0


def test_exact_match_needs_the_expected_order():
    r = row([BERGEN, OSLO], [EXP_OSLO, EXP_BERGEN])
    assert (run("tool_call_precision", r).value, run("tool_call_recall", r).value) == (1.0, 1.0)
    em = run("tool_call_exact_match", r)
    assert (em.value, em.result) == (0, "fail")
    assert em.reason == ('the expected calls were made but not in the expected order: call 1 is '
                         'forecast({"city":"Bergen","days":1}), expected forecast({"city":"Oslo"})')


def test_no_call_made_while_calls_were_expected():
    r = row(None, [EXP_OSLO])
    p, rc, em = run("tool_call_precision", r), run("tool_call_recall", r), run("tool_call_exact_match", r)
    assert (p.status, p.value, rc.value, em.value) == ("completed", 0.0, 0.0, 0)
    assert rc.reason == '0 of 1 expected call(s) made; 0 call(s) in all; missing: forecast({"city":"Oslo"})'


def test_calls_are_taken_from_the_steps_when_the_row_has_no_tool_calls():
    steps = [Message(role="assistant", tool_calls=[{"id": "c1", "type": "function", "function": {
                 "name": "forecast", "arguments": '{"city": "Oslo", "days": 1}'}}]),
             Message(role="tool", tool_call_id="c1", content='{"temp": 3}'),
             Message(role="assistant", content="Oslo 3 °C.")]
    r = row(None, [EXP_OSLO, EXP_BERGEN], steps=steps)
    assert (run("tool_call_precision", r).value, run("tool_call_recall", r).value) == (1.0, 0.5)


def test_without_expected_calls_they_are_skipped():
    s = run("tool_call_recall", row([OSLO], []))
    assert (s.status, s.reason) == ("skipped", "missing input: expected_tool_calls")


STEPS = [Message(role="system", content="Be brief."),
         Message(role="assistant", content="Let me look.", tool_calls=[call("forecast", {"city": "Oslo"})]),
         Message(role="tool", tool_call_id="c1", content="3 °C"),
         Message(role="assistant", tool_calls=[call("forecast", {"city": "Bergen"}), call("news")]),
         Message(role="tool", tool_call_id="c2", content="6 °C"),
         Message(role="tool", tool_call_id="c3", content="none"),
         Message(role="assistant", content="Oslo 3 °C, Bergen 6 °C.")]


def test_agent_steps_counts_assistant_messages_lower_is_better():
    s = run("agent_steps", Record(steps=STEPS))
    assert (s.value, s.threshold, s.result) == (3, None, "not_applicable")
    assert s.properties == {"n_tool_calls": 3, "n_tool_results": 3}
    assert REGISTRY["agent_steps"].higher_is_better is False
    assert run("agent_steps", Record(steps=[Message(role="assistant", content="Hi.")])).value == 1


def test_tool_errors_fail_the_row_and_name_the_calls():
    calls = [call("forecast", {"city": "Oslo"}, result="3 °C"),
             call("forecast", {"city": "Brgen"}, error="unknown city 'Brgen'")]
    s = run("tool_errors", Record(tool_calls=calls))
    assert (s.value, s.threshold, s.passed, s.result) == (1, 0, False, "fail")
    assert s.reason == '1 of 2 call(s) failed — forecast({"city":"Brgen"}): unknown city \'Brgen\''
    ok = run("tool_errors", Record(tool_calls=calls[:1]))
    assert (ok.value, ok.result) == (0, "pass")
    none = run("tool_errors", Record(steps=[Message(role="assistant", content="No tools needed.")]))
    assert (none.value, none.result) == (0, "pass")


def test_auto_plans_the_code_metrics_when_their_fields_are_present():
    agent = {m.name for m in plan_auto({"query", "response", "steps", "tool_calls", "expected_tool_calls"})}
    assert {"tool_call_precision", "tool_call_recall", "tool_call_exact_match", "agent_steps",
            "tool_errors"} <= agent
    no_expect = {m.name for m in plan_auto({"query", "response", "steps", "tool_calls"})}
    assert "agent_steps" in no_expect and "tool_call_recall" not in no_expect
    plain = {m.name for m in plan_auto({"query", "response", "ground_truth"})}
    assert not plain & {"tool_call_precision", "tool_call_recall", "tool_call_exact_match", "agent_steps",
                        "tool_errors"}


def test_an_azure_tool_call_part_is_read_like_its_inner_call():
    part = {"type": "tool_call", "tool_call": {"id": "c4", "type": "function",
                                               "function": {"name": "forecast", "arguments": {"city": "Oslo"}}}}
    assert meets(part, EXP_OSLO) and not meets(part, EXP_BERGEN)
    steps = [Message(role="assistant", tool_calls=[part]), Message(role="assistant", content="Oslo 3 °C.")]
    r = row(None, [EXP_OSLO], steps=steps)
    assert run("tool_call_exact_match", r).value == 1
    missed = run("tool_call_recall", row(None, [EXP_BERGEN], steps=steps))
    assert missed.properties["extra_calls"] == ['forecast({"city":"Oslo"})']
