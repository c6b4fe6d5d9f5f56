"""OpenAI chat tool use: ``tool_calls`` on assistant messages and ``role: "tool"`` results, in a
``messages`` conversation (one record per answered turn) and as a ``response`` list."""

from pathlib import Path

import pytest

from assay.errors import InputError
from assay.formats import open_dataset

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def test_conversation_turns_get_steps_and_calls_with_results():
    t0, t1, flat = open_dataset(AGENTS / "openai_chat_tools.jsonl")
    assert (t0.id, t0.query, t0.response) == ("support-1#0", "Where is order NW-40017?",
                                              "Order NW-40017 was delivered on 2026-02-27.")
    assert [m.role for m in t0.history] == ["system"]
    assert t0.tool_calls == [{"type": "tool_call", "tool_call_id": "call_a1", "name": "lookup_order",
                              "arguments": {"order_number": "NW-40017"},
                              "result": {"status": "delivered", "delivered_on": "2026-02-27"}}]
    assert [m.role for m in t0.steps] == ["assistant", "tool", "assistant"]
    assert t0.steps[1].content == '{"status": "delivered", "delivered_on": "2026-02-27"}'  # text kept as written


def test_message_with_text_and_calls_is_a_step_not_the_answer_and_error_object_gives_error():
    _, t1, _ = open_dataset(AGENTS / "openai_chat_tools.jsonl")
    assert t1.turn == 1 and t1.query == "Then refund the gloves in it, please."
    assert t1.response == "Sorry, the refund window for NW-40017 has closed, so I could not refund the gloves."
    assert [(m.role, m.content) for m in t1.steps][:1] == [("assistant", "I'll start that refund.")]
    assert [m.role for m in t1.steps] == ["assistant", "tool", "tool", "assistant"]
    assert [m.role for m in t1.history] == ["system", "user", "assistant", "tool", "assistant"]
    lookup, refund = t1.tool_calls
    assert lookup["result"] == {"status": "delivered", "items": [{"sku": "GLOVE-2"}]} and "error" not in lookup
    assert refund == {"type": "tool_call", "tool_call_id": "call_a3", "name": "start_refund",
                      "arguments": {"order_number": "NW-40017", "sku": "GLOVE-2"},
                      "result": {"error": {"message": "refund window closed", "code": "WINDOW_CLOSED"}},
                      "error": "refund window closed"}
    assert t1.extra == {"tools": "kept as is"}


def test_response_list_with_openai_tool_calls_and_wrapped_definitions():
    *_, flat = open_dataset(AGENTS / "openai_chat_tools.jsonl")
    assert flat.query == "Is it windy in Wellington right now?" and flat.history is None
    assert flat.response == "Yes, it's windy in Wellington: gusts of about 65 km/h."
    assert flat.tool_calls == [{"type": "tool_call", "tool_call_id": "call_w9", "name": "get_forecast",
                                "arguments": {"city": "Wellington"}, "result": "gusts of 65 km/h"}]
    assert flat.tool_definitions[0]["name"] == "get_forecast"
    assert "function" not in flat.tool_definitions[0]


def test_arguments_that_are_not_json_are_kept_as_text():
    (r,) = open_dataset([{"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "city=Oslo"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Oslo"},
        {"role": "assistant", "content": "Oslo."}]}])
    assert r.tool_calls == [{"type": "tool_call", "tool_call_id": "c1", "name": "echo", "arguments": "city=Oslo",
                             "result": "Oslo"}]


def test_one_message_response_list_is_still_its_text():
    (r,) = open_dataset([{"request": "q", "response": [{"role": "assistant", "content": "the answer"}]}])
    assert r.response == "the answer" and r.steps is None


@pytest.mark.parametrize("row,field,msg", [
    ({"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                         "function": {"arguments": "{}"}}]},
                   {"role": "assistant", "content": "a"}]},
     "messages[1].tool_calls[0].function", "the tool call has no 'name'"),
    ({"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "a", "tool_calls": {"id": "c"}}]},
     "messages[1].tool_calls", "expected a list of tool calls, got an object"),
    ({"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                         "function": {"name": 3}}]}]},
     "messages[1].tool_calls[0].function.name", "expected text, got a number"),
])
def test_bad_openai_tool_calls(row, field, msg):
    with pytest.raises(InputError) as ei:
        list(open_dataset([row]))
    assert str(ei.value) == f"<list>, line 1, field {field!r}: {msg}"
