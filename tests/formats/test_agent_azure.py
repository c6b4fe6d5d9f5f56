"""Azure AI Evaluation agent rows: ``query`` / ``response`` as message lists with content parts."""

from pathlib import Path

import pytest

from assay.errors import InputError
from assay.formats import open_dataset

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
FORECAST = {"name": "get_forecast", "description": "Forecast for a city on a date.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                            "date": {"type": "string", "description": "YYYY-MM-DD"}},
                           "required": ["city"]}}


def rows():
    return list(open_dataset(AGENTS / "azure_agent.jsonl"))


def test_issue_14_item_1_azure_agent_row_is_read_not_rejected():
    # before: "line 1, field 'query': expected text, got a list"
    weather = rows()[0]
    assert weather.query == "Will it rain in Lisbon tomorrow, 2026-03-03? Give me the high in Fahrenheit."
    assert [(m.role, m.content) for m in weather.history] == [
        ("system", "You are Skyline, a weather assistant. Answer in the user's units and keep it short.")]
    assert weather.response == "Likely yes: a 70% chance of rain in Lisbon tomorrow, with a high near 61\u00b0F."
    assert weather.ground_truth == "Rain is likely (70%); the high is about 61\u00b0F."


def test_tool_calls_with_results_attached_by_id_and_a_non_text_result_kept_as_object():
    weather = rows()[0]
    assert weather.tool_calls == [
        {"type": "tool_call", "tool_call_id": "call_wx1", "name": "get_forecast",
         "arguments": {"city": "Lisbon", "date": "2026-03-03"},
         "result": {"city": "Lisbon", "rain_probability": 0.7, "high_c": 16}},
        {"type": "tool_call", "tool_call_id": "call_wx2", "name": "convert_temperature",
         "arguments": {"value": 16, "to": "F"}, "result": 60.8}]
    steps = [m.model_dump(exclude_none=True) for m in weather.steps]
    assert [m["role"] for m in steps] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert steps[0]["tool_calls"] == [{"type": "tool_call", "tool_call_id": "call_wx1", "name": "get_forecast",
                                       "arguments": {"city": "Lisbon", "date": "2026-03-03"}}]
    assert "content" not in steps[0]  # a message that only calls a tool has no text
    # a non-text result is the tool message's content as JSON text; the source's other keys are kept
    assert steps[1] == {"role": "tool", "tool_call_id": "call_wx1",
                        "content": '{"city":"Lisbon","rain_probability":0.7,"high_c":16}',
                        "createdAt": "2026-03-02T09:14:08Z", "run_id": "run_W1"}
    assert steps[3]["content"] == "60.8"
    assert steps[4]["content"] == weather.response


def test_tool_definitions_as_azure_writes_them():
    weather = rows()[0]
    assert [d["name"] for d in weather.tool_definitions] == ["get_forecast", "convert_temperature"]
    assert weather.tool_definitions[0] == FORECAST


def test_failing_tool_gives_error_and_json_text_arguments_are_parsed():
    booking = rows()[1]
    assert booking.query == "Book me one night at a hotel in Porto from 2026-04-10, under the name Ana Ribeiro."
    assert booking.history is None
    search, book = booking.tool_calls
    assert search["result"] == [{"room_id": "PRT-204", "price_eur": 92}, {"room_id": "PRT-311", "price_eur": 118}]
    assert "error" not in search
    assert book == {"type": "tool_call", "tool_call_id": "call_bk2", "name": "book_room",
                    "arguments": {"room_id": "PRT-204", "guest": "Ana Ribeiro"},
                    "result": {"error": "payment service unavailable", "code": 503},
                    "error": "payment service unavailable"}
    # a text part next to a tool_call part: one assistant message with both
    assert booking.steps[0].content == "Let me look for free rooms."
    assert booking.steps[0].tool_calls[0]["name"] == "search_rooms"
    assert booking.response.startswith("I found room PRT-204 for 92 EUR, but the booking failed")
    assert booking.expected_tool_calls == [{"name": "search_rooms", "arguments": {"city": "Porto"}},
                                           {"name": "book_room",
                                            "arguments": {"room_id": "PRT-204", "guest": "Ana Ribeiro"}}]


def test_multi_turn_query_list_standalone_tool_calls_column_and_openai_wrapped_definitions():
    order = rows()[2]
    assert order.query == "It's NW-55821. Where is it, and can I return the socks in it?"
    assert [(m.role, m.content) for m in order.history] == [
        ("system", "You are the order desk of Northwind Outfitters. Never promise a refund before checking the order."),
        ("user", "Hi, I ordered boots last week."),
        ("assistant", "Happy to help. What is the order number?")]
    # the tool_calls column wins; the response's tool result is attached to it by id
    assert order.tool_calls == [{"type": "tool_call", "tool_call_id": "call_ord1", "name": "lookup_order",
                                 "arguments": {"order_number": "NW-55821"},
                                 "result": {"status": "in transit", "eta": "2026-03-05",
                                            "items": [{"sku": "BOOT-9", "qty": 1}, {"sku": "SOCK-3", "qty": 2}]}}]
    assert [d["name"] for d in order.tool_definitions] == ["lookup_order", "start_refund"]
    assert "function" not in order.tool_definitions[0] and "type" not in order.tool_definitions[0]
    assert order.extra == {"channel": "chat-widget"}


def test_older_nested_tool_call_part_and_a_single_tool_definition_object():
    oslo = rows()[3]
    assert oslo.tool_calls == [{"type": "tool_call", "tool_call_id": "call_osl", "name": "get_forecast",
                                "arguments": {"city": "Oslo"}, "result": "Snow showers, -3\u00b0C"}]
    assert oslo.tool_definitions == [FORECAST]
    assert oslo.response == "Snow showers in Oslo, around -3\u00b0C."


def test_agent_row_in_a_csv_with_json_cells(tmp_path):
    import csv
    import json
    src = [json.loads(line) for line in (AGENTS / "azure_agent.jsonl").read_text().splitlines()][:2]
    p = tmp_path / "agent.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query", "response", "tool_definitions"])
        for r in src:
            q = r["query"] if isinstance(r["query"], str) else json.dumps(r["query"])
            w.writerow([q, json.dumps(r["response"]), json.dumps(r["tool_definitions"])])
    a, b = open_dataset(p)
    assert a.query == rows()[0].query and a.tool_calls == rows()[0].tool_calls
    assert b.tool_calls[1]["error"] == "payment service unavailable"
    assert [d["name"] for d in b.tool_definitions] == ["search_rooms", "book_room"]


@pytest.mark.parametrize("row,field,msg", [
    ({"query": "q", "response": [{"role": "assistant", "content": [
        {"type": "tool_call", "tool_call_id": "c1", "arguments": {}}]}]},
     "response[0].content[0]", "the tool call has no 'name'"),
    ({"query": "q", "response": [{"role": "assistant", "content": [
        {"type": "tool_call", "tool_call_id": "c1", "name": "f", "arguments": [1, 2]}]}]},
     "response[0].content[0].arguments", "expected an object of arguments or its JSON text, got a list"),
    ({"query": [{"role": "user", "content": [{"type": "text", "text": 5}]}], "response": "r"},
     "query[0].content[0].text", "expected text, got a number"),
    ({"query": [{"content": "no role"}], "response": "r"}, "query[0]", "the chat message has no 'role'"),
    ({"query": "q", "response": [{"role": "assistant", "content": "a"}, 7]},
     "response[1]", "expected a chat message (an object with 'role' and 'content'), got a number"),
    ({"query": "q", "tool_definitions": [{"description": "no name"}]},
     "tool_definitions[0]", "the tool definition has no 'name'"),
    ({"query": "q", "tool_calls": [{"type": "tool_call", "arguments": {}}]},
     "tool_calls[0]", "the tool call has no 'name'"),
    ({"query": "q", "expected_tool_calls": [{"arguments": {"city": "Oslo"}}]},
     "expected_tool_calls[0]", "the tool call has no 'name'"),
])
def test_bad_agent_rows_one_line_naming_line_and_field(row, field, msg):
    with pytest.raises(InputError) as ei:
        list(open_dataset([{"query": "fine"}, row]))
    e = ei.value
    assert (e.line, e.field) == (2, field), str(e)
    assert str(e) == f"<list>, line 2, field {field!r}: {msg}"


def test_bad_agent_row_in_a_file_names_the_file_and_line_and_skip_keeps_the_others(tmp_path):
    good = (AGENTS / "azure_agent.jsonl").read_text().splitlines()
    bad = '{"query": "q", "response": [{"role": "assistant", "content": [{"type": "tool_call", "arguments": {}}]}]}'
    p = tmp_path / "agents.jsonl"
    p.write_text("\n".join([good[0], bad, good[1]]) + "\n")
    with pytest.raises(InputError) as ei:
        list(open_dataset(p))
    assert str(ei.value) == f"{p}, line 2, field 'response[0].content[0]': the tool call has no 'name'"
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.tool_calls[0]["name"] for r in ds] == ["get_forecast", "search_rooms"]
    assert [b.line for b in ds.bad_rows] == [2]


def test_a_json_file_holding_one_agent_row_is_a_row_not_a_table_of_columns(tmp_path):
    import json
    src = json.loads((AGENTS / "azure_agent.jsonl").read_text().splitlines()[0])
    # every value a list of two: before, read as two rows of columns ("field 'query': expected text")
    row = {"query": src["query"], "response": src["response"][:2], "tool_definitions": src["tool_definitions"]}
    p = tmp_path / "one_agent_row.json"
    p.write_text(json.dumps(row))
    (r,) = open_dataset(p)
    assert r.query == "Will it rain in Lisbon tomorrow, 2026-03-03? Give me the high in Fahrenheit."
    assert [m.role for m in r.steps] == ["assistant", "tool"] and r.response is None  # no answer yet
    assert r.tool_calls[0]["result"] == {"city": "Lisbon", "rain_probability": 0.7, "high_c": 16}
