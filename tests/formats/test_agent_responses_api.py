"""OpenAI Responses API rows: a ``request`` column ``{"input": [...], "tools": [...]}`` and a
``response`` column ``{"output": [...]}`` or a list of output items."""

import hashlib
import json
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.formats import open_dataset

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def rows():
    return list(open_dataset(AGENTS / "responses_api.jsonl"))


def test_issue_14_item_2_responses_request_column_is_read_not_rejected():
    # before: "field 'request': expected text, ... got an object with keys input, tools"
    room = rows()[0]
    assert room.query == "Find me a room in Porto for 2 nights from 2026-05-01."  # input_text parts
    assert [(m.role, m.content) for m in room.history] == [
        ("developer", "You book hotel rooms. Confirm the price before booking.")]
    assert room.response == ("Room PRT-118 is free for 2 nights from 2026-05-01 at 180 EUR in total. "
                             "Shall I book it?")
    assert room.ground_truth == "PRT-118 is available for 180 EUR; ask before booking."
    # the id of a Databricks request without request_id: the sha256 of the request's sorted-key JSON
    first = json.loads((AGENTS / "responses_api.jsonl").read_text().splitlines()[0])
    raw = json.dumps(first["request"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert room.id == hashlib.sha256(raw.encode()).hexdigest()


def test_function_call_items_tools_and_reasoning_skipped():
    room = rows()[0]
    assert room.tool_calls == [{"type": "tool_call", "tool_call_id": "call_r1", "name": "search_rooms",
                                "arguments": {"city": "Porto", "check_in": "2026-05-01", "nights": 2},
                                "result": [{"room_id": "PRT-118", "price_eur": 180}]}]
    assert [m.role for m in room.steps] == ["assistant", "tool", "assistant"]  # the reasoning item is no step
    assert room.steps[1].model_dump(exclude_none=True) == {
        "role": "tool", "tool_call_id": "call_r1", "content": '[{"room_id": "PRT-118", "price_eur": 180}]'}
    assert [d["name"] for d in room.tool_definitions] == ["search_rooms", "book_room"]
    assert "type" not in room.tool_definitions[0]
    assert room.tool_definitions[0]["description"] == "Free hotel rooms in a city for a date range."


def test_output_item_list_with_a_failed_call_then_a_retry():
    sky = rows()[1]
    assert sky.query == "What's the weather in Reykjavik?" and sky.history is None  # input as a string
    assert sky.response == "Sleet in Reykjavik, with a high of 2\u00b0C."
    assert sky.tool_calls == [
        {"type": "tool_call", "tool_call_id": "call_r2", "name": "get_forecast", "arguments": {"city": "Reykjavik"},
         "result": {"error": "upstream timeout"}, "error": "upstream timeout"},
        {"type": "tool_call", "tool_call_id": "call_r3", "name": "get_forecast", "arguments": {"city": "Reykjavik"},
         "result": {"summary": "sleet", "high_c": 2}}]


def test_calls_already_in_the_request_input_are_steps_and_request_id_is_the_id():
    order = rows()[2]
    assert order.id == "lookup-3" and order.query == "Where is order NW-77310?"
    assert order.tool_calls == [{"type": "tool_call", "tool_call_id": "call_r4", "name": "lookup_order",
                                 "arguments": {"order_number": "NW-77310"}, "result": {"status": "processing"}}]
    assert [m.role for m in order.steps] == ["assistant", "tool", "assistant"]
    assert order.response == "Order NW-77310 is still being processed."


def test_plain_text_request_with_responses_output():
    (r,) = open_dataset([{"request": "hello", "response": {"output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi there"}]}]}}])
    assert (r.query, r.response) == ("hello", "hi there")
    assert r.id == hashlib.sha256(b"hello").hexdigest()


@pytest.mark.parametrize("row,field,msg", [
    ({"request": {"input": [{"role": "user", "content": "q"},
                            {"type": "function_call", "call_id": "c", "arguments": "{}"}]}},
     "request.input[1]", "the tool call has no 'name'"),
    ({"request": {"input": [{"role": "user", "content": "q"},
                            {"type": "function_call_output", "output": "x"}]}},
     "request.input[1]", "the function_call_output has no 'call_id'"),
    ({"request": {"input": [{"type": "something_else"}]}}, "request.input[0]", "the chat message has no 'role'"),
    ({"request": "q", "response": {"output": [{"type": "message", "role": "assistant",
                                               "content": [{"type": "output_text", "text": ["x"]}]}]}},
     "response.output[0].content[0].text", "expected text, got a list"),
])
def test_bad_responses_items(row, field, msg):
    with pytest.raises(InputError) as ei:
        list(open_dataset([row]))
    assert str(ei.value) == f"<list>, line 1, field {field!r}: {msg}"


def test_mlflow3_inputs_and_outputs_columns_of_a_responses_agent():
    (r,) = open_dataset([{
        "inputs": {"request": {"input": [{"role": "user", "content": "Is PRT-118 free on 2026-05-01?"}]}},
        "outputs": {"output": [
            {"type": "function_call", "call_id": "c9", "name": "search_rooms", "arguments": '{"city": "Porto"}'},
            {"type": "function_call_output", "call_id": "c9", "output": '[{"room_id": "PRT-118"}]'},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Yes, it is."}]}]},
        "expectations": {"expected_response": "Yes."}}])
    assert (r.query, r.response, r.ground_truth) == ("Is PRT-118 free on 2026-05-01?", "Yes, it is.", "Yes.")
    assert r.tool_calls == [{"type": "tool_call", "tool_call_id": "c9", "name": "search_rooms",
                             "arguments": {"city": "Porto"}, "result": [{"room_id": "PRT-118"}]}]
