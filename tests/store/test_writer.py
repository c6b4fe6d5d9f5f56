"""The store writer behind the scoring (RowSink): scoring goes on while the writer is busy,
chunks waiting are written together and in order, and after a failed write nothing more is
written, so the store keeps a prefix of the run's rows."""

from __future__ import annotations

import threading

import pytest

from assay import results as R
from assay.metrics.base import Score


class SlowStore:
    def __init__(self, fail_on: int | None = None):
        self.gate = threading.Event()
        self.writes: list[list[int]] = []
        self.calls = 0
        self.fail_on = fail_on

    def write_rows(self, run_id, batch):
        self.calls += 1
        self.gate.wait(30)
        if self.calls == self.fail_on:
            raise RuntimeError("disk full")
        self.writes.append([r.idx for r in batch])


def add_chunk(sink: R.RowSink, lo: int, n: int = 5) -> None:
    for i in range(lo, lo + n):
        sink.add({"inputs.query": f"q{i}"}, {"m": {"m": Score(value=1.0)}}, idx=i)
    sink.commit()


def test_scoring_goes_on_while_the_writer_is_busy_and_waiting_chunks_are_written_together():
    st = SlowStore()
    sink = R.RowSink(None, [("m", ["m"])], store=st, run_id="r")
    sink.batch_rows = 1                         # every commit starts a write
    for k in range(R.WRITE_BEHIND):             # the writer is stuck on the first chunk ...
        add_chunk(sink, 5 * k)                  # ... and every commit returns all the same
    assert st.writes == []
    st.gate.set()
    sink.close()
    flat = [i for w in st.writes for i in w]
    assert flat == list(range(5 * R.WRITE_BEHIND))               # every row, once, in order
    assert st.writes[0] == [0, 1, 2, 3, 4] and len(st.writes) < R.WRITE_BEHIND   # the rest together


def test_after_a_failed_write_nothing_more_is_written():
    st = SlowStore(fail_on=1)
    sink = R.RowSink(None, [("m", ["m"])], store=st, run_id="r")
    sink.batch_rows = 1
    add_chunk(sink, 0)
    add_chunk(sink, 5)
    st.gate.set()
    with pytest.raises(RuntimeError, match="disk full"):
        for lo in range(10, 200, 5):            # the failure comes back at a later commit ...
            add_chunk(sink, lo)
        sink.close()                            # ... or at the end
    sink.close()
    assert st.writes == []                      # the chunks after the failed one were not written


def test_small_chunks_are_written_together_and_close_writes_the_rest():
    st = SlowStore()
    st.gate.set()
    sink = R.RowSink(None, [("m", ["m"])], store=st, run_id="r")
    sink.batch_rows, sink.batch_seconds = 12, 3600.0
    add_chunk(sink, 0)
    add_chunk(sink, 5)
    sink._wait()
    assert st.writes == []                      # 10 rows waiting: fewer than 12, no write yet
    add_chunk(sink, 10)                         # 15 rows: one write of all of them
    sink._wait()
    assert st.writes == [list(range(15))]
    add_chunk(sink, 15)
    sink.close()                                # the last rows are written at the end
    assert st.writes == [list(range(15)), list(range(15, 20))]


def test_rows_are_written_after_the_time_limit_even_when_few():
    st = SlowStore()
    st.gate.set()
    sink = R.RowSink(None, [("m", ["m"])], store=st, run_id="r")
    sink.batch_rows, sink.batch_seconds = 10**9, 0.0
    add_chunk(sink, 0)
    sink._wait()
    assert st.writes == [[0, 1, 2, 3, 4]]
    sink.close()
    assert st.writes == [[0, 1, 2, 3, 4]]


def test_the_default_batches_are_large_enough_to_matter():
    assert R.WRITE_ROWS >= 1_000 and 0 < R.WRITE_EVERY <= 5
