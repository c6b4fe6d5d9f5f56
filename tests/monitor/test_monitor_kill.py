"""``kill -9`` of ``assay monitor serve`` in mid-stream loses no acknowledged span: batches are
sent one after another, the server is killed after some are acknowledged, restarted on the same
store, and the unacknowledged batches sent again, as an exporter retries them."""

from __future__ import annotations

import threading

import pytest

from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.monitor import Receiver, post
from tests.helpers.otlp import Recorder

BATCHES, KILL_AFTER = 40, 12


def _batches() -> list[tuple[bytes, set[tuple[str, str]]]]:
    out = []
    for _ in range(BATCHES):
        rec = Recorder()
        for _ in range(2):
            with rec.span("invoke_agent"):
                with rec.span("chat m"):
                    pass
        req = rec.request()
        ids = {(s.trace_id.hex(), s.span_id.hex()) for rs in req.resource_spans for ss in rs.scope_spans
               for s in ss.spans}
        out.append((req.SerializeToString(), ids))
    return out


def _stored(store: str) -> set[tuple[str, str]]:
    st = Store(store)
    try:
        with st.engine.connect() as conn:
            return {tuple(r) for r in conn.exec_driver_sql("SELECT trace_id, span_id FROM spans")}
    finally:
        st.close()


@pytest.mark.serial
def test_kill_9_loses_no_acknowledged_span(tmp_path):
    store = str(tmp_path / "m.db")
    batches = _batches()
    acked: list[int] = []
    lock = threading.Lock()

    def send(rx: Receiver, mine: range) -> None:
        # two senders, so a batch is in flight when the server is killed, right at the
        # KILL_AFTER-th acknowledgement
        for i in mine:
            try:
                code = post(rx.url, batches[i][0], timeout=30)[0]
            except OSError:           # the server is gone
                return
            if code != 200:
                return
            with lock:
                acked.append(i)
                if len(acked) == KILL_AFTER:
                    rx.proc.kill()

    with Receiver(store) as rx:
        senders = [threading.Thread(target=send, args=(rx, range(k, BATCHES, 2))) for k in (0, 1)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(60)
        rx.kill()
    assert KILL_AFTER <= len(acked) < BATCHES, "the kill did not come in mid-stream"
    acknowledged = set().union(*(batches[i][1] for i in acked))
    stored = _stored(store)
    assert acknowledged <= stored                       # every acknowledged span survived the kill

    with Receiver(store) as rx:                         # restarted: the rest sent again, as an exporter retries
        for i, (body, _) in enumerate(batches):
            if i not in acked:
                assert post(rx.url, body)[0] == 200
        assert rx.stop() == 143
    everything = set().union(*(ids for _, ids in batches))
    assert _stored(store) == everything
    st = Store(store)
    s = SpanLog(st).status()
    st.close()
    assert (s["spans"], s["traces"], s["complete_traces"]) == (len(everything), BATCHES * 2, BATCHES * 2)
