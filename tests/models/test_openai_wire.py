"""The OpenAI wire format (:mod:`assay.models.openai_wire`) without a server: exact bodies out of
the request builders, exact values out of the answer readers, and the errors malformed answers
and error bodies give."""

from __future__ import annotations

import base64
import email.utils

import numpy as np
import pytest

from assay.models.base import NO_LOGLIKS, ModelCallError
from assay.models.openai_wire import (
    REASONING_MIN_COMPLETION_TOKENS,
    NoPromptLogprobs,
    chat_body,
    completions_body,
    decode_base64,
    drop_rejected,
    echo_body,
    embeddings_body,
    error_code,
    error_message,
    first_choice,
    http_error,
    mentions_json,
    not_json_error,
    parse_retry_after,
    read_completion,
    read_echo,
    read_embedding_batch,
    read_embeddings,
    read_generation,
    read_logprobs,
)

MSG = [{"role": "user", "content": "Answer in JSON."}]
PLAIN = [{"role": "user", "content": "Rate it."}]


# -- request bodies -------------------------------------------------------------------------------
def test_a_chat_body():
    assert chat_body("m", MSG, max_tokens=50, temperature=0.0, response_format={"type": "json_object"},
                     logprobs=True, top_logprobs=3, seed=7) == {
        "model": "m", "messages": MSG, "seed": 7, "max_tokens": 50, "temperature": 0.0,
        "logprobs": True, "top_logprobs": 3, "response_format": {"type": "json_object"}}
    assert chat_body(None, PLAIN) == {"model": "", "messages": PLAIN, "temperature": 0.0}
    assert chat_body("m", PLAIN, temperature=None, logprobs=True) == {
        "model": "m", "messages": PLAIN, "logprobs": True, "top_logprobs": 5}


def test_a_reasoning_body_has_max_completion_tokens_and_no_temperature_or_logprobs():
    assert chat_body("o3", PLAIN, max_tokens=10, temperature=0.5, logprobs=True, reasoning=True) == {
        "model": "o3", "messages": PLAIN, "max_completion_tokens": REASONING_MIN_COMPLETION_TOKENS}
    assert chat_body("o3", PLAIN, max_tokens=9000, reasoning=True)["max_completion_tokens"] == 9000
    assert chat_body("o3", PLAIN, reasoning=True) == {"model": "o3", "messages": PLAIN}


def test_json_mode_is_sent_only_where_a_message_says_json_and_the_server_takes_it():
    fmt = {"type": "json_object"}
    assert "response_format" not in chat_body("m", PLAIN, response_format=fmt)
    assert "response_format" in chat_body("m", [{"role": "user", "content": [{"type": "text", "text": "JSON"}]}],
                                          response_format=fmt)
    schema = {"type": "json_schema", "json_schema": {"name": "s"}}
    assert chat_body("m", PLAIN, response_format=schema)["response_format"] == schema
    assert "response_format" not in chat_body("m", MSG, response_format=fmt, send_json_mode=False)
    assert "logprobs" not in chat_body("m", MSG, logprobs=True, send_logprobs=False)
    assert (mentions_json(MSG), mentions_json(PLAIN), mentions_json([{"role": "user"}])) == (True, False, False)


def test_extra_body_fields_are_merged_last():
    assert chat_body("m", PLAIN, extra_body={"temperature": 1.0, "top_k": 3}) == {
        "model": "m", "messages": PLAIN, "temperature": 1.0, "top_k": 3}


def test_completion_and_echo_bodies():
    assert completions_body("m", "Once", max_tokens=8, temperature=None, stop=["\n", ""], seed=3,
                            extra_body={"top_k": 1}) == {
        "top_k": 1, "model": "m", "prompt": "Once", "max_tokens": 8, "temperature": 0.0, "stop": ["\n"], "seed": 3}
    assert completions_body(None, "x", max_tokens=1) == {"model": "", "prompt": "x", "max_tokens": 1,
                                                        "temperature": 0.0}
    assert echo_body("m", "The cat sat", {"top_k": 1}) == {
        "top_k": 1, "model": "m", "prompt": "The cat sat", "max_tokens": 1, "temperature": 0.0, "echo": True,
        "logprobs": 1}


def test_an_embeddings_body():
    assert embeddings_body("e", ("a", "b")) == {"model": "e", "input": ["a", "b"]}
    assert embeddings_body("e", ["a"], base64_vectors=True, input_type_field="input_type", input_type="query",
                           extra_body={"dimensions": 256}) == {
        "dimensions": 256, "model": "e", "input": ["a"], "encoding_format": "base64", "input_type": "query"}
    assert embeddings_body("e", ["a"], input_type_field="input_type") == {"model": "e", "input": ["a"]}
    assert embeddings_body("e", ["a"], input_type="query") == {"model": "e", "input": ["a"]}


def test_a_refused_feature_is_dropped_from_the_body():
    body = chat_body("m", MSG, logprobs=True, response_format={"type": "json_object"})
    exc = ModelCallError("HTTP 400", status=400, body='{"error": "logprobs are not supported"}')
    assert drop_rejected(body, exc, logprobs_supported=None, json_mode_supported=None) == ["logprobs"]
    assert "logprobs" not in body and "top_logprobs" not in body and "response_format" in body
    other = ModelCallError("HTTP 400: bad format", status=400)
    assert drop_rejected(body, other, logprobs_supported=None, json_mode_supported=None) == ["json_mode"]
    assert "response_format" not in body
    assert drop_rejected(body, other, logprobs_supported=None, json_mode_supported=None) == []
    kept = chat_body("m", MSG, response_format={"type": "json_object"})
    assert drop_rejected(kept, other, logprobs_supported=None, json_mode_supported=True) == []   # it took it before
    assert "response_format" in kept


# -- answers --------------------------------------------------------------------------------------
def test_a_chat_answer():
    data = {"model": "served", "choices": [{"message": {"content": "4"}, "finish_reason": "stop",
                                            "logprobs": {"content": [
                                                {"token": "4", "logprob": -0.1,
                                                 "top_logprobs": [{"token": "4", "logprob": -0.1},
                                                                  {"token": "5", "logprob": -2.5}]},
                                                {"token": ".", "logprob": -0.01}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 2}}
    g = read_generation("judge", data, 0.25, "asked")
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.latency_s, g.model, g.finish_reason) == \
        ("4", 12, 2, 0.25, "served", "stop")
    assert g.logprobs == {"4": -0.1, "5": -2.5}
    assert g.token_logprobs == [("4", {"4": -0.1, "5": -2.5}), (".", {".": -0.01})]
    assert g.raw is data


def test_content_parts_refusals_and_other_usage_names():
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, "x", {"text": "b"}]}}]}
    assert read_generation("j", parts, 0.0).text == "ab"
    refusal = {"choices": [{"message": {"content": None, "refusal": "no"}}], "usage": {"input_tokens": 3,
                                                                                     "output_tokens": 1}}
    g = read_generation("j", refusal, 0.0, "asked")
    assert (g.text, g.usage.input_tokens, g.usage.output_tokens, g.model, g.logprobs) == ("no", 3, 1, "asked", None)
    assert read_generation("j", {"choices": [{"text": "raw"}]}, 0.0).text == "raw"


@pytest.mark.parametrize("data", [{}, {"choices": []}, None, [], {"choices": None}])
def test_an_answer_without_choices_is_a_retryable_bad_response(data):
    with pytest.raises(ModelCallError) as ei:
        read_generation("judge", data, 0.0)
    assert ei.value.kind == "bad_response" and ei.value.retryable
    assert str(ei.value) == f"judge: response has no choices: {str(data)[:200]}"
    with pytest.raises(ModelCallError, match="judge: response has no choices") as ei:
        first_choice("judge", data)
    assert ei.value.kind == "bad_response" and ei.value.retryable


def test_logprobs_that_are_not_there_or_malformed_read_as_none():
    assert read_logprobs(None) == (None, None)
    assert read_logprobs({"content": []}) == (None, None)
    assert read_logprobs({"content": "x"}) == (None, None)
    assert read_logprobs({"content": ["junk", {"token": None, "logprob": None}]}) == ({}, [("", {})])


def test_a_completion_answer_is_cut_at_its_stop_string():
    data = {"choices": [{"text": "Paris.\nQ: next", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6}}
    g = read_completion("m", data, 0.5, ["\n"], "asked")
    assert (g.text, g.finish_reason, g.usage.input_tokens, g.usage.output_tokens, g.model) == \
        ("Paris.", "stop", 5, 6, "asked")
    assert read_completion("m", data, 0.5).text == "Paris.\nQ: next"
    with pytest.raises(ModelCallError, match="m: response has no choices"):
        read_completion("m", {"choices": ["x"]}, 0.0)


ECHO = {"choices": [{"text": "The cat sat.", "logprobs": {
    "text_offset": [0, 3, 7, 11], "token_logprobs": [None, -1.0, -0.5, -3.0],
    "top_logprobs": [None, {" cat": -1.0}, {" sat": -0.2, " ran": -0.5}, {".": -0.1}]}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def test_an_echoed_answer_scores_the_continuation():
    # "The cat" + " sat": the tokens ending past character 7 are " sat" (the generated "." is dropped)
    assert read_echo("m", ECHO, "The cat sat", 7) == (-0.5, False, 3)
    assert read_echo("m", ECHO, "The cat sat", 3) == (-1.5, False, 3)
    greedy = {**ECHO, "choices": [{**ECHO["choices"][0], "logprobs": {
        **ECHO["choices"][0]["logprobs"], "top_logprobs": [None, {" cat": -1.0}, {" sat": -0.5}, {}]}}]}
    assert read_echo("m", greedy, "The cat sat", 3) == (-1.5, True, 3)


def test_an_echo_without_prompt_logprobs_or_a_boundary_is_an_error():
    bare = {"choices": [{"text": "x", "logprobs": None}], "usage": {"completion_tokens": 1}}
    with pytest.raises(NoPromptLogprobs) as ei:
        read_echo("m", bare, "x", 0)
    assert isinstance(ei.value, ModelCallError) and ei.value.kind == "bad_request"
    assert str(ei.value).startswith(f"m {NO_LOGLIKS} (the /completions answer has no log-probabilities")
    with pytest.raises(ModelCallError, match="cannot find where the continuation starts") as ei:
        read_echo("m", ECHO, "The cat sat", 50)
    assert ei.value.kind == "bad_response"
    with pytest.raises(ModelCallError, match="no log-probability for the first token") as ei:
        read_echo("m", ECHO, "The cat sat", 0)
    assert ei.value.kind == "bad_request"


def test_embeddings_are_put_back_in_input_order():
    data = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}],
            "model": "served", "usage": {"prompt_tokens": 4, "total_tokens": 4}}
    assert read_embeddings("e", data, 2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    batch = read_embedding_batch("e", data, 2, 0.1, "asked")
    assert (batch.usage.input_tokens, batch.latency_s, batch.model) == (4, 0.1, "served")
    assert read_embedding_batch("e", {"data": [{"embedding": [1.0]}]}, 1, 0.0, "asked").model == "asked"
    assert read_embedding_batch("e", {"data": [{"embedding": [1.0]}], "usage": {"total_tokens": 2}},
                                1, 0.0).usage.input_tokens == 2


def test_base64_embeddings_are_decoded():
    rows = [np.array([1.0, 2.0], dtype="<f4"), np.array([3.0, 4.0], dtype="<f4")]   # padded: one by one
    encoded = [base64.b64encode(r.tobytes()).decode() for r in rows]
    data = {"data": [{"index": i, "embedding": e} for i, e in enumerate(encoded)]}
    assert read_embeddings("e", data, 2).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    three = base64.b64encode(np.array([1.0, 2.0, 3.0], dtype="<f4").tobytes()).decode()   # 16 chars: joined
    assert decode_base64("e", [three, three]).tolist() == [[1.0, 2.0, 3.0]] * 2


@pytest.mark.parametrize("data,message", [
    ({"data": [{"embedding": [1.0]}]}, "e: asked for 2 embeddings, got 1 embeddings"),
    ({"nothing": True}, "e: asked for 2 embeddings, got no data list: {'nothing': True}"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
     "e: embeddings answer item 1 has a missing or repeated index or no embedding"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [1.0]}]},
     "e: embeddings answer item 1 has a missing or repeated index or no embedding"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1}]},
     "e: embeddings answer item 1 has a missing or repeated index or no embedding"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
     "e: the embeddings are not equal-length lists of numbers"),
    ({"data": [{"index": 0, "embedding": "!!!!"}, {"index": 1, "embedding": "!!!!"}]},
     "e: the embeddings are not base64 float32 vectors of one length"),
])
def test_malformed_embeddings_are_retryable_bad_responses(data, message):
    with pytest.raises(ModelCallError) as ei:
        read_embeddings("e", data, 2)
    assert str(ei.value) == message and ei.value.kind == "bad_response" and ei.value.retryable


# -- errors ---------------------------------------------------------------------------------------
def test_error_bodies_are_read():
    assert error_message({"error": {"message": "too long"}}, "fb") == "too long"
    assert error_message({"error": {"msg": "short"}}, "fb") == "short"
    assert error_message({"error": "plain"}, "fb") == "plain"
    assert error_message({"detail": "Not Found"}, "fb") == "Not Found"
    assert error_message(None, "fb") == error_message({"error": {}}, "fb") == "fb"
    assert error_code({"error": {"code": "insufficient_quota"}}) == "insufficient_quota"
    assert error_code({"error": {"type": "rate_limit"}}) == "rate_limit"
    assert error_code({"error": "x"}) == error_code(None) == ""


def test_retry_after_in_milliseconds_seconds_or_a_date():
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "soon", "retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000.0) == 30.0
    assert parse_retry_after({"retry-after": "never"}) is None
    assert parse_retry_after(None) is None and parse_retry_after({}) is None


@pytest.mark.parametrize("status,payload,kind,retryable,words", [
    (429, {"error": {"message": "slow down"}}, "rate_limit", True, "m: HTTP 429 (rate limited): slow down"),
    (429, {"error": {"code": "insufficient_quota", "message": "pay"}}, "quota", False,
     "m: HTTP 429 (quota exhausted; check the account's plan and billing): pay"),
    (503, None, "server", True, "m: HTTP 503: oops"),
    (408, None, "server", True, "m: HTTP 408: oops"),
    (401, {"error": {"message": "bad key"}}, "auth", False,
     "m: HTTP 401 (authentication failed; check the API key): bad key"),
    (404, {"detail": "no model"}, "not_found", False,
     "m: HTTP 404 (no such model or endpoint; check the model/deployment name and base URL): no model"),
    (400, {"error": {"message": "context too long"}}, "bad_request", False, "m: HTTP 400: context too long"),
])
def test_an_error_status_becomes_the_error_the_limiter_acts_on(status, payload, kind, retryable, words):
    err = http_error("m", status, payload, "oops", {"retry-after": "3"})
    assert (str(err), err.kind, err.status, err.retryable, err.body) == (words, kind, status, retryable, "oops")
    assert err.retry_after == (3.0 if retryable else None)


def test_an_error_quotes_no_secret():
    err = http_error("m", 401, {"error": {"message": "key sk-SECRET is invalid"}}, "body sk-SECRET",
                     None, scrub=lambda t: t.replace("sk-SECRET", "***"))
    assert "sk-SECRET" not in str(err) and err.body == "body ***"
    assert str(http_error("m", 500, None, "", None)) == "m: HTTP 500: HTTP 500"


def test_a_body_that_is_not_json():
    err = not_json_error("m", b"<html>")
    assert str(err) == "m: the response is not JSON: b'<html>'" and err.kind == "bad_response" and err.retryable
