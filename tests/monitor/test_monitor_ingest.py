"""The ingest queue's writer (assay.monitor.ingest): a batch whose client gave up is still stored
and the writer goes on with the next ones."""

from __future__ import annotations

import asyncio
import sqlite3

from assay.formats.otlp import spans_of
from assay.monitor.decode import span_row
from assay.monitor.ingest import Ingest
from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.otlp import Recorder


def _rows(n: int) -> list[dict]:
    rec = Recorder()
    for _ in range(n):
        with rec.span("invoke_agent"):
            pass
    return [span_row(s) for s in spans_of(rec.request())]


def test_a_client_that_gives_up_does_not_stop_the_writer(tmp_path):
    st = Store(str(tmp_path / "m.db"))
    ingest = Ingest(SpanLog(st), quiet_period=60)
    ingest.start()
    lock = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")                 # the first batch waits in the writer

    async def give_up() -> None:
        waiting = asyncio.wrap_future(ingest.submit(_rows(2)))
        await asyncio.sleep(0.2)
        waiting.cancel()                            # as a request task cancelled when its client goes
        await asyncio.sleep(0)

    asyncio.run(give_up())
    lock.execute("ROLLBACK")
    lock.close()
    assert ingest.submit(_rows(3)).result(timeout=60) == 3
    ingest.close()
    assert SpanLog(st).status()["spans"] == 5
    st.close()
