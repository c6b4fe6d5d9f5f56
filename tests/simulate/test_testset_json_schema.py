"""The test-set generator asks the endpoint for JSON that fits each prompt's schema
(``response_format`` ``json_schema``), so that a server with constrained decoding (llama.cpp,
OpenAI's structured outputs) returns the object the strict reader expects."""

from __future__ import annotations

import json

import pytest

from assay.simulate.testset import generate_testset, prompts
from assay.simulate.testset.prompts import (
    CLOSED_BOOK_SCHEMA,
    GROUNDED_SCHEMA,
    ITEM_SCHEMA,
    UNANSWERABLE_SCHEMA,
    parse_answer,
)
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.testset_brain import EXAMPLE_DOCS, Brain


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def test_every_generator_call_sends_the_json_schema_of_its_answer(server):
    res = generate_testset(EXAMPLE_DOCS, n=4, model=f"{server.base_url}#fake-judge", embedder="words",
                           mix="single_hop=0.5,multi_hop=0.25,unanswerable=0.25", concurrency=2)
    assert len(res.rows) == 4
    seen = {}
    for req in server.chat_requests:
        rf = req["body"].get("response_format")
        assert rf and rf["type"] == "json_schema", req["body"]["messages"][-1]["content"][:60]
        schema = rf["json_schema"]["schema"]
        seen[tuple(sorted(schema["properties"]))] = schema
    assert set(seen) == {tuple(sorted(s)) for s in (ITEM_SCHEMA, UNANSWERABLE_SCHEMA, GROUNDED_SCHEMA,
                                                      CLOSED_BOOK_SCHEMA)}
    item = seen[tuple(sorted(ITEM_SCHEMA))]
    assert item["required"] == list(ITEM_SCHEMA) and item["additionalProperties"] is False
    assert item["properties"]["facts"] == {"type": "array", "items": {"type": "string"}}
    assert seen[tuple(sorted(GROUNDED_SCHEMA))]["properties"]["answerable"] == {"type": "boolean"}


def test_the_schema_admits_what_the_reader_accepts():
    rf = prompts.response_format(ITEM_SCHEMA, "item")
    assert rf["json_schema"]["name"] == "item" and rf["json_schema"]["strict"] is True
    ok = {"question": "When?", "answer": "At six.", "facts": ["It opens at six."]}
    assert parse_answer(json.dumps(ok), ITEM_SCHEMA) == ok
    assert set(rf["json_schema"]["schema"]["properties"]) == set(ok)
