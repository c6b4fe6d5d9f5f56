"""Conversations given one turn a line (`conversation_id` and `turn` columns): grouped into
conversations by id, ordered by turn, each turn's history made of the turns before it, the last
turn known; bad indexes are one clear line naming the file, the line and the field; rows of a
conversation need not be contiguous, and a contiguous file is given out a conversation at a time."""

from __future__ import annotations

import json
import os

import pytest

from assay.errors import InputError
from assay.formats import open_dataset


def turn(cid, t, q=None, a=None, **kw):
    return {"conversation_id": cid, "turn": t, "query": q or f"{cid} asks {t}", "response": a or f"{cid} answers {t}",
            **kw}


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def transcript(rec):
    return [(m.role, m.content) for m in rec.history or ()]


def error(data, **kw):
    with pytest.raises(InputError) as ei:
        list(open_dataset(data, **kw))
    text = str(ei.value)
    assert "\n" not in text and "Traceback" not in text
    return ei.value


def test_rows_are_grouped_by_conversation_and_ordered_by_turn(tmp_path):
    rows = [turn("b", 1), turn("a", 2), turn("a", 0, history=[{"role": "system", "content": "Be brief."}]),
            turn("b", 0), {"query": "a flat row", "response": "as it is"}, turn("a", 1)]
    recs = list(open_dataset(jsonl(tmp_path / "t.jsonl", rows)))
    assert [(r.id, r.turn, r.turns) for r in recs] == [
        ("b#0", 0, 2), ("b#1", 1, 2), ("4", None, None), ("a#0", 0, 3), ("a#1", 1, 3), ("a#2", 2, 3)]
    a2 = recs[-1]
    assert transcript(a2) == [("system", "Be brief."), ("user", "a asks 0"), ("assistant", "a answers 0"),
                              ("user", "a asks 1"), ("assistant", "a answers 1")]
    assert (a2.query, a2.response) == ("a asks 2", "a answers 2")
    assert transcript(recs[0]) == [] and transcript(recs[1]) == [("user", "b asks 0"), ("assistant", "b answers 0")]


def test_a_turn_with_its_own_history_keeps_it_and_the_next_builds_on_it():
    own = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}]
    recs = list(open_dataset([turn("c", 0), turn("c", 1, history=own), turn("c", 2)]))
    assert transcript(recs[1]) == [("user", "earlier"), ("assistant", "reply")]
    assert transcript(recs[2]) == [*transcript(recs[1]), ("user", "c asks 1"), ("assistant", "c answers 1")]


def test_turns_numbered_from_one_are_read_from_zero():
    recs = list(open_dataset([turn("c", 2), turn("c", 1), turn("d", 1)]))
    assert [(r.id, r.turn, r.turns, r.query) for r in recs] == [
        ("c#0", 0, 2, "c asks 1"), ("c#1", 1, 2, "c asks 2"), ("d#0", 0, 1, "d asks 1")]


def test_ids_given_are_kept_and_the_goal_reaches_every_turn():
    recs = list(open_dataset([turn("c", 0, id="first", goal={"goal": "a refund", "done": "refunded"}),
                              turn("c", 1, id="second")]))
    assert [r.id for r in recs] == ["first", "second"]
    assert [r.extra["goal"] for r in recs] == [{"goal": "a refund", "done": "refunded"}] * 2


def test_a_missing_turn_is_one_line_naming_file_line_and_field(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("c", 1), turn("c", 3)])
    e = error(p)
    assert str(e) == (f"{p}, line 3, field 'turn': conversation 'c' has no turn 2 (its rows give turns 0, 1, 3; "
                      "the turns of a conversation are numbered from 0 without gaps)")


def test_a_duplicate_turn_is_one_line_naming_both_lines(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("d", 0), turn("c", 1), turn("c", 1, "again")])
    e = error(p)
    assert (e.source, e.line, e.field) == (str(p), 4, "turn")
    assert e.detail == "conversation 'c' gives turn 1 twice (line 3 and this one): each turn of a conversation is one row"


def test_a_conversation_that_lacks_its_first_turn_in_a_file_numbered_from_zero(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("d", 1), turn("d", 2)])
    assert "conversation 'd' has no turn 0 (its rows give turns 1, 2;" in str(error(p))


def test_a_negative_turn_and_a_turn_count_that_disagrees(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", -1), turn("c", 0)])
    assert error(p).detail == "conversation 'c': turn -1 is not a turn index (0, 1, 2, ...)"
    p = jsonl(tmp_path / "u.jsonl", [turn("c", 0, conversation_turns=3), turn("c", 1, conversation_turns=3)])
    e = error(p)
    assert (e.line, e.field) == (1, "conversation_turns")
    assert e.detail == "conversation 'c' says it has 3 turns, but 2 rows give its turns"


def test_skip_mode_lists_every_row_of_a_bad_conversation_and_keeps_the_others(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("ok", 0), turn("c", 2), turn("ok", 1), turn("c", 3)])
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.id for r in ds] == ["ok#0", "ok#1"]
    assert ds.rows_read == 5 and sorted(b.line for b in ds.bad_rows) == [1, 3, 5]
    why = [b for b in ds.bad_rows if b.field == "turn"]
    assert len(why) == 1 and why[0].line == 3 and "has no turn 1" in str(why[0])
    assert {str(b) for b in ds.bad_rows if b.field is None} == {
        f"{p}, line {n}: skipped with conversation 'c', whose turns are not usable (see line 3)" for n in (1, 5)}


def test_an_unreadable_turn_leaves_its_conversation_incomplete_not_silently_shorter(tmp_path):
    p = jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("c", 1, a=True), turn("c", 2)])  # a boolean answer
    ds = open_dataset(p, on_bad_row="skip")
    assert list(ds) == []
    assert [(b.line, b.field) for b in ds.bad_rows][:2] == [(2, "response"), (3, "turn")]
    assert "conversation 'c' has no turn 1" in str(ds.bad_rows[1]) and len(ds.bad_rows) == 3


def test_csv_columns_mapped_to_the_conversation_id_and_turn(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("session,idx,question,answer\ns1,2,q2,a2\ns1,1,q1,a1\n", encoding="utf-8")
    mapping = {"conversation_id": "session", "turn": "idx", "query": "question", "response": "answer"}
    recs = list(open_dataset(p, mapping=mapping))
    assert [(r.id, r.turn, r.turns, r.query) for r in recs] == [("s1#0", 0, 2, "q1"), ("s1#1", 1, 2, "q2")]
    assert transcript(recs[1]) == [("user", "q1"), ("assistant", "a1")]
    p.write_text("session,idx,question,answer\ns1,1,q1,a1\ns1,1,q2,a2\n", encoding="utf-8")
    e = error(p, mapping=mapping)
    assert (e.line, e.field) == (3, "idx")              # the user's column, not the canonical name


def test_a_json_array_keeps_its_line_numbers(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps([turn("c", 0), turn("c", 2)], indent=1), encoding="utf-8")
    e = error(p)
    assert e.line == p.read_text().splitlines().index(" {", 2) + 1 and "has no turn 1" in str(e)


def test_a_stream_is_grouped_from_its_spooled_copy():
    r, w = os.pipe()
    os.write(w, "".join(json.dumps(x) + "\n" for x in [turn("c", 1), turn("c", 0)]).encode())
    os.close(w)
    try:
        ds = open_dataset(f"/dev/fd/{r}", format="jsonl")
        assert [x.id for x in ds] == ["c#0", "c#1"]
        assert [x.id for x in ds] == ["c#0", "c#1"]      # read again from the copy
    finally:
        os.close(r)


def test_contiguous_conversations_are_given_out_one_at_a_time(tmp_path):
    rows = [turn(f"c{i}", t) for i in range(50) for t in range(3)]
    ds = open_dataset(jsonl(tmp_path / "t.jsonl", rows))
    it = iter(ds)
    for i in range(50):
        got = [next(it) for _ in range(3)]
        assert [g.id for g in got] == [f"c{i}#{t}" for t in range(3)]
        assert ds.rows_read == 3 * (i + 1)        # its last row just read: nothing held beyond it
    assert next(it, None) is None


def test_interleaved_conversations_come_out_as_each_ends(tmp_path):
    rows = [turn("a", 0), turn("b", 0), turn("a", 1), turn("c", 0), turn("b", 1), turn("c", 1)]
    ds = open_dataset(jsonl(tmp_path / "t.jsonl", rows))
    it = iter(ds)
    assert [next(it).id, next(it).id] == ["a#0", "a#1"] and ds.rows_read == 3
    assert [r.id for r in it] == ["b#0", "b#1", "c#0", "c#1"]


def test_the_pass_that_finds_where_conversations_end_is_made_once(tmp_path, monkeypatch):
    from assay.formats import dataset

    passes = []
    real = dataset.index_turns
    monkeypatch.setattr(dataset, "index_turns", lambda *a: passes.append(1) or real(*a))
    ds = open_dataset(jsonl(tmp_path / "t.jsonl", [turn("c", 0), turn("c", 1)]))
    assert list(ds) == list(ds) and len(passes) == 1
    flat = open_dataset(jsonl(tmp_path / "f.jsonl", [{"query": "q", "response": "r", "conversation_id": "c"}]))
    assert [r.turn for r in flat] == [None] and passes == [1]          # no turn column: no grouping, no pass


def test_whole_conversations_and_turn_rows_in_one_file(tmp_path):
    whole = {"conversation_id": "w", "messages": [{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "hello"}]}
    recs = list(open_dataset(jsonl(tmp_path / "t.jsonl", [whole, turn("t", 1), turn("t", 0)])))
    assert [(r.id, r.turn, r.turns) for r in recs] == [("w#0", 0, 1), ("t#0", 0, 2), ("t#1", 1, 2)]


def test_a_dataframe_of_turn_rows():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame([turn("c", 1), turn("c", 0), turn("d", 0)])
    recs = list(open_dataset(df))
    assert [(r.id, r.turn, r.turns) for r in recs] == [("c#0", 0, 2), ("c#1", 1, 2), ("d#0", 0, 1)]
    assert transcript(recs[1]) == [("user", "c asks 0"), ("assistant", "c answers 0")]


def test_a_conversation_split_across_two_files_of_a_folder_is_caught(tmp_path):
    jsonl(tmp_path / "a.jsonl", [turn("c", 0), turn("c", 1)])
    jsonl(tmp_path / "b.jsonl", [turn("c", 2)])
    e = error(tmp_path)
    assert (e.source, e.line) == (str(tmp_path / "b.jsonl"), 1) and "conversation 'c' has no turn 0" in e.detail


def test_a_conversation_reported_at_the_end_of_a_json_array_names_its_line(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps([turn("c", 0), turn("c", 1, a=True)], indent=1), encoding="utf-8")
    ds = open_dataset(p, on_bad_row="skip")
    assert list(ds) == []
    lines = p.read_text().splitlines()
    second = lines.index(" {", 2) + 1
    assert [(b.line, b.field) for b in ds.bad_rows] == [(second, "response"), (2, None)]
    assert ds.bad_rows[1].detail == "conversation 'c' has 2 rows, 1 of which could not be read: it is not judged without it"
