"""A server that refuses ``response_format`` with a 422 or 500 naming it (llama-cpp-python's
server answers a ``json_schema`` response format with 500 "Input should be 'text' or
'json_object'") gets the request again without it, once, as a 400 would."""

from __future__ import annotations

import pytest

from assay.models import ModelCallError, OpenAICompat

MSG = [{"role": "user", "content": "Reply in JSON."}]
SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
LLAMA_CPP_PYTHON_500 = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                                             "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                                             "'json_object'\", 'input': 'json_schema'}",
                                  "type": "internal_server_error"}}


@pytest.mark.parametrize("status", [422, 500])
async def test_response_format_refused_with_422_or_500_is_dropped_and_remembered(fake, status):
    m = OpenAICompat.endpoint(fake.base_url, "m")
    fake.push({"status": status, "json": LLAMA_CPP_PYTHON_500})
    g = await m.generate(MSG, response_format=SCHEMA)
    assert g.text.startswith("{")
    first, second = fake.chat_requests
    assert first["body"]["response_format"] == SCHEMA and "response_format" not in second["body"]
    assert m.json_mode_supported is False
    await m.aclose()


async def test_a_500_that_does_not_name_response_format_is_not_blamed_on_it(fake):
    m = OpenAICompat.endpoint(fake.base_url, "m")
    fake.push({"status": 500, "json": {"error": {"message": "out of memory"}}})
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSG, response_format=SCHEMA)
    assert ei.value.status == 500 and len(fake.chat_requests) == 1
    assert m.json_mode_supported is None
    await m.aclose()
