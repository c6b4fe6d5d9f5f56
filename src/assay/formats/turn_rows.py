"""Conversations given one turn a line: rows with a conversation id and a turn index, grouped
into conversations as if each had been given whole.

A flat row with a ``conversation_id`` and a ``turn`` (the canonical names; any other column is
mapped to them: ``--map conversation_id=session_id --map turn=turn_index``) is one turn of a
conversation, the user's ``query`` and the app's ``response``. :class:`TurnRows` puts each
conversation's rows back together, so its records are those a whole conversation gives
(Azure's ``{"conversation": {"messages": [...]}}``, :mod:`.azure`):

* the turns are ordered by their index; a conversation's indexes run from 0 (or from 1, when no
  row of the file has a turn 0) with no gap and no repeat, else the conversation is a bad input
  with one line naming the file, the line and the ``turn`` field (with ``on_bad_row="skip"``
  every row of it is listed as skipped, the first with the reason; nothing is dropped unsaid);
* ``turn`` is renumbered from 0 and ``turns`` set to the conversation's number of rows, so the
  last turn is known (``turns`` or a ``conversation_turns`` column given on a row must agree);
* a turn's ``history`` is what came before it: its own ``history`` column when it has one (a
  system message on the first turn, say), else the previous turn's history, its ``query`` (a
  user message) and its ``steps`` or, without steps, its ``response`` (an assistant message);
  the last turn's record then holds the whole transcript, and the conversation-level judges
  (:mod:`assay.metrics.conversation`) score it once there, the per-turn metrics every turn;
* a row without an ``id`` gets ``"<conversation_id>#<turn>"`` (as a whole conversation's turns do);
  a ``goal`` column given on some rows of a conversation is the conversation's, given to every
  turn that has none (``goal_met`` and the dashboard read it on the last turn).

**Reading, and memory.** Where a conversation ends is known only when the file has been seen,
so the first turn row makes the reader go once through the source on its own (the rows parsed,
only ids and indexes kept: :class:`TurnIndex` holds the position of each conversation's last row
and its number of rows, a few dozen bytes per conversation) before it goes on. A conversation is
then given out as soon as its last row is read (one with a row that could not be read is
reported, never judged shorter); only the records of conversations begun and not yet ended are
held. Rows of one conversation need not be next to each other: a file whose conversations are
contiguous holds one conversation at a time, a file whose conversations are interleaved (turns in
time order across many sessions) holds the turns of every conversation still open. Records come
out in the order their conversations end; each source (each file of a folder) is grouped on its
own. The index is kept with the :class:`~assay.formats.dataset.Dataset`, so reading the data
again (a run reads it twice) does not make the extra pass again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.formats.fields import FieldError
from assay.formats.normalize import ColumnMapping
from assay.formats.readers import Source
from assay.records import Message, Record

__all__ = ["TurnIndex", "TurnRows", "index_turns", "is_turn_row"]

TURNS_COLUMN = "conversation_turns"   # the column a row may give its conversation's number of turns in
GOAL_COLUMN = "goal"                  # the conversation-level column carried to every turn

#: report of a bad conversation: (position of the row, field, message)
Bad = Callable[[int, "str | None", str], None]


def is_turn_row(record: Record) -> bool:
    """Whether ``record`` (read from one flat row) is one turn of a conversation given a turn a line."""
    return record.conversation_id is not None and record.turn is not None


@dataclass
class TurnIndex:
    """What the pass over the whole source found: per conversation the position of its last row
    and its number of rows (``last``), and whether the file numbers its turns from 0 or from 1
    (``base``)."""

    last: dict[str, tuple[int, int]] = field(default_factory=dict)
    base: int = 0


def _id_and_turn(row: Mapping[str, Any], table: Mapping[str, tuple[Any, ...]]) -> tuple[Any, Any]:
    """The conversation id and the turn the normaliser reads from ``row`` (None for either when no
    column gives it or its value cannot be read: the reading proper reports that)."""
    got: dict[str, tuple[int, Any]] = {}
    for key, value in row.items():
        h = table.get(key)
        if h is None or value is None or (h[0] != "conversation_id" and h[0] != "turn"):
            continue
        if h[0] in got and got[h[0]][0] >= h[1]:
            continue
        try:
            got[h[0]] = (h[1], h[2](value, key))
        except FieldError:
            got[h[0]] = (h[1], None)
    return got.get("conversation_id", (0, None))[1], got.get("turn", (0, None))[1]


def index_turns(src: Source, mapping: ColumnMapping | None, table: Mapping[str, tuple[Any, ...]]) -> TurnIndex:
    """Go once through ``src`` (a copy of it, so a reading in progress is left as it is) and note
    where each conversation given a turn a line ends.

    A whole-row shape (an Azure conversation with a ``turn`` column, say) is not told apart here:
    its position, noted for nothing, costs nothing, and were it noted as a conversation's last
    row, that conversation would be given out at the end of the source instead."""
    index = TurnIndex()
    zero = one = False
    for pos, row in copy.copy(src).rows():
        if row.__class__ is not dict:
            continue
        if mapping is not None:
            row = mapping.apply(row)
        cid, turn = _id_and_turn(row, table)
        if cid is None or turn is None:
            continue
        index.last[cid] = (pos, index.last.get(cid, (0, 0))[1] + 1)
        zero, one = zero or turn == 0, one or turn == 1
    index.base = 1 if one and not zero else 0
    return index


def _declared_turns(record: Record) -> int | None:
    if record.turns is not None:
        return record.turns
    n = record.extra.get(TURNS_COLUMN)
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    if isinstance(n, str) and n.strip().isdigit():
        return int(n)
    return None


def _what_came_before_next(record: Record) -> list[Message]:
    """The history of the turn after ``record``: its history, its query, its answer (or steps)."""
    msgs = list(record.history or ())
    if record.query is not None:
        msgs.append(Message(role="user", content=record.query))
    if record.steps:
        msgs.extend(record.steps)
    elif record.response is not None:
        msgs.append(Message(role="assistant", content=record.response))
    return msgs


def _numbers(turns: list[int]) -> str:
    return ", ".join(str(t) for t in turns)


class TurnRows:
    """Groups the turn rows of one source into conversations (the module's docstring says how).

    ``take`` each turn record as it is read, with its row's position; it gives back the records
    of the conversations that the row ends. ``finish`` at the end of the source gives back (or
    reports) the conversations whose last row never came (it could not be read)."""

    def __init__(self, src: Source, bad: Bad, index: Callable[[], TurnIndex]):
        self.src, self.bad = src, bad
        self._index_of = index
        self._index: TurnIndex | None = None
        self.open: dict[str, list[tuple[int, Record]]] = {}

    @property
    def index(self) -> TurnIndex:
        if self._index is None:
            self._index = self._index_of()
        return self._index

    def take(self, pos: int, record: Record) -> Iterator[Record]:
        cid = record.conversation_id
        assert cid is not None
        rows = self.open.setdefault(cid, [])
        rows.append((pos, record))
        if self.index.last.get(cid, (None,))[0] == pos:
            del self.open[cid]
            yield from self._conversation(cid, rows)

    def finish(self) -> Iterator[Record]:
        for cid in list(self.open):
            yield from self._conversation(cid, self.open.pop(cid))

    # ------------------------------------------------------------------ one conversation

    def _conversation(self, cid: str, rows: list[tuple[int, Record]]) -> Iterator[Record]:
        rows.sort(key=lambda pr: (pr[1].turn, pr[0]))
        problem = self._problem(cid, rows)
        if problem is not None:
            at, fld, message = problem
            self.bad(at, fld, message)   # raises unless bad rows are skipped
            for pos, _ in rows:
                if pos != at:
                    self.bad(pos, None, f"skipped with conversation {cid!r}, whose turns are not usable "
                                        f"(see line {self.src.line(at) or at})")
            return
        yield from self._records(cid, [r for _, r in rows])

    def _problem(self, cid: str, rows: list[tuple[int, Record]]) -> tuple[int, str | None, str] | None:
        """``(position, field, message)`` of what makes the conversation unusable, else None."""
        base = self.index.base
        expected = base
        for i, (pos, rec) in enumerate(rows):
            t = rec.turn
            assert t is not None
            if t < 0:
                return pos, "turn", f"conversation {cid!r}: turn {t} is not a turn index (0, 1, 2, ...)"
            if i and t == rows[i - 1][1].turn:
                first = self.src.line(rows[i - 1][0]) or rows[i - 1][0]
                return pos, "turn", (f"conversation {cid!r} gives turn {t} twice (line {first} and this one): "
                                     "each turn of a conversation is one row")
            if t != expected:
                given = _numbers([r.turn for _, r in rows if r.turn is not None])
                return pos, "turn", (f"conversation {cid!r} has no turn {expected} (its rows give turns {given}; "
                                     f"the turns of a conversation are numbered from {base} without gaps)")
            expected += 1
        given = self.index.last.get(cid, (0, 0))[1]
        if given > len(rows):
            lost = given - len(rows)
            return rows[0][0], None, (f"conversation {cid!r} has {given} rows, {lost} of which could not be read: "
                                      "it is not judged without "
                                      f"{'it' if lost == 1 else 'them'}")
        for pos, rec in rows:
            n = _declared_turns(rec)
            if n is not None and n != len(rows):
                fld = "turns" if rec.turns is not None else TURNS_COLUMN
                return pos, fld, (f"conversation {cid!r} says it has {n} turns, but {len(rows)} "
                                  f"row{'' if len(rows) == 1 else 's'} give its turns")
        return None

    def _records(self, cid: str, records: list[Record]) -> Iterator[Record]:
        base, n = self.index.base, len(records)
        goal = next((r.extra[GOAL_COLUMN] for r in records if r.extra.get(GOAL_COLUMN) is not None), None)
        before: list[Message] = []
        for rec in records:
            assert rec.turn is not None
            rec.turn, rec.turns = rec.turn - base, n
            if rec.id is None:
                rec.id = f"{cid}#{rec.turn}"
            if not rec.history and before:
                rec.history = before
            if goal is not None and rec.extra.get(GOAL_COLUMN) is None:
                rec.extra = {**rec.extra, GOAL_COLUMN: goal}
            before = _what_came_before_next(rec)
            yield rec
