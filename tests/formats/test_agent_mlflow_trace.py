"""MLflow ResponsesAgent traces: root span inputs ``{"request": {"input": [...]}}``, outputs
``{"output": [...]}``, ``info.request_preview``, TOOL spans with status ERROR."""

import json
from pathlib import Path

from assay.formats import open_dataset, trace_to_record

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
TRACES = AGENTS / "mlflow_responses_agent_traces.jsonl"


def test_issue_14_item_2_query_is_the_users_text_not_a_json_dump():
    weather, _ = open_dataset(TRACES)
    assert weather.query == "What will the high be in Lisbon tomorrow, 2026-03-03, in Kelvin?"
    assert [(m.role, m.content) for m in weather.history] == [("system", "You are Skyline, a weather assistant.")]
    assert weather.response == "The high in Lisbon tomorrow is 16\u00b0C, about 289 K."
    assert weather.id == "tr-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def test_output_items_give_calls_with_results_and_the_error_of_the_failed_tool_span():
    weather, _ = open_dataset(TRACES)
    assert weather.tool_calls == [
        {"type": "tool_call", "tool_call_id": "call_t1", "name": "get_forecast",
         "arguments": {"city": "Lisbon", "date": "2026-03-03"}, "result": {"high_c": 16, "rain_probability": 0.7}},
        {"type": "tool_call", "tool_call_id": "call_t2", "name": "convert_temperature",
         "arguments": {"value": 16, "to": "K"}, "result": "Error: unit 'K' is not supported",
         "error": "ValueError: unit 'K' is not supported"}]
    assert [m.role for m in weather.steps] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert (weather.usage.input_tokens, weather.usage.output_tokens, weather.usage.latency_ms) == (310, 40, 3120)


def test_request_preview_is_the_query_when_the_root_span_has_no_inputs():
    _, cancel = open_dataset(TRACES)
    assert cancel.query == "Cancel my booking PRT-204, please."
    assert cancel.tool_calls == [{"type": "tool_call", "tool_call_id": "call_c1", "name": "cancel_booking",
                                  "arguments": {"booking_id": "PRT-204"}, "result": "cancellation failed",
                                  "error": "BookingLocked: booking PRT-204 is locked by another session"}]


def test_tool_spans_alone_carry_the_error_and_exception_event():
    trace = json.loads(TRACES.read_text().splitlines()[0])
    root = trace["data"]["spans"][0]
    del root["attributes"]["mlflow.spanOutputs"]  # no output items: the calls come from the TOOL spans
    tool = trace["data"]["spans"][3]
    tool["status"] = {"code": "STATUS_CODE_ERROR", "message": ""}  # no status message: the exception event's
    r = trace_to_record(trace)
    assert r.tool_calls == [
        {"type": "tool_call", "name": "get_forecast", "arguments": {"city": "Lisbon", "date": "2026-03-03"},
         "result": {"high_c": 16, "rain_probability": 0.7}},
        {"type": "tool_call", "name": "convert_temperature", "arguments": {"value": 16, "to": "K"},
         "error": "ValueError: unit 'K' is not supported"}]
    assert r.response is None


def test_v2_tool_span_status_code_error():
    trace = {"info": {"request_id": "tr-v2", "status": "ERROR"}, "data": {"spans": [
        {"name": "agent", "context": {"span_id": "a", "trace_id": "t"}, "parent_id": None, "start_time": 1,
         "end_time": 9, "status_code": "OK", "status_message": "", "events": [],
         "attributes": {"mlflow.spanType": '"AGENT"', "mlflow.spanInputs": '{"question": "Refund NW-1?"}'}},
        {"name": "start_refund", "context": {"span_id": "b", "trace_id": "t"}, "parent_id": "a", "start_time": 2,
         "end_time": 3, "status_code": "ERROR", "status_message": "refund window closed", "events": [],
         "attributes": {"mlflow.spanType": '"TOOL"', "mlflow.spanInputs": '{"order_number": "NW-1"}'}}]}}
    r = trace_to_record(trace)
    assert r.query == "Refund NW-1?"
    assert r.tool_calls == [{"type": "tool_call", "name": "start_refund", "arguments": {"order_number": "NW-1"},
                             "error": "refund window closed"}]


def test_trace_column_of_a_databricks_row_fills_steps():
    trace = json.loads(TRACES.read_text().splitlines()[0])
    (r,) = open_dataset([{"request": "What will the high be in Lisbon tomorrow?", "trace": trace,
                          "expected_response": "About 289 K."}])
    assert r.query == "What will the high be in Lisbon tomorrow?" and r.ground_truth == "About 289 K."
    assert [c["name"] for c in r.tool_calls] == ["get_forecast", "convert_temperature"]
    assert r.tool_calls[1]["error"] == "ValueError: unit 'K' is not supported"
    assert len(r.steps) == 5 and r.response == "The high in Lisbon tomorrow is 16\u00b0C, about 289 K."
