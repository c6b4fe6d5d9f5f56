"""The run keeps the heap it started with out of the collector's scans, and gives it back after."""

from __future__ import annotations

import gc

import pytest

from assay.engine import run as engine_run
from assay.engine.evaluate import evaluate
from assay.engine.run import freeze_heap
from assay.metrics.base import REGISTRY, metric

SEEN: list[int] = []


@pytest.fixture
def freeze_probe():
    SEEN.clear()

    @metric("freeze_probe_t", threshold=0.5)
    def probe(response: str) -> float:
        SEEN.append(gc.get_freeze_count())
        return 1.0

    yield "freeze_probe_t"
    REGISTRY.pop("freeze_probe_t", None)


def test_the_heap_is_frozen_while_rows_are_scored_and_unfrozen_after(freeze_probe):
    assert gc.get_freeze_count() == 0
    rows = [{"response": f"r{i}"} for i in range(20)]
    res = evaluate(rows, metrics=[freeze_probe], workers=1, store="off")
    assert len(SEEN) == 20 and min(SEEN) > 1000       # scored with the old heap frozen
    assert gc.get_freeze_count() == 0                  # and given back afterwards
    assert res.metrics[f"{freeze_probe}"]["evaluated"] == 20


def test_a_process_that_froze_objects_itself_keeps_them_frozen(freeze_probe):
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        assert freeze_heap() is False and gc.get_freeze_count() == before
        evaluate([{"response": "x"}], metrics=[freeze_probe], workers=1, store="off")
        assert gc.get_freeze_count() > before // 2      # not unfrozen by the run (some frozen objects died)
    finally:
        gc.unfreeze()


def test_a_run_that_stops_on_an_error_unfreezes_too(freeze_probe, monkeypatch):
    class Stop(Exception):
        pass

    def progress(n: int) -> None:
        raise Stop()     # stops the run after its first chunk

    # small chunks, so that the first one ends after a few rows: the probe's gc.get_freeze_count()
    # walks every frozen object, which in a test process that has loaded models takes a good part of a second
    monkeypatch.setattr(engine_run, "CHUNK", 32)
    with pytest.raises(Stop):
        evaluate([{"response": f"r{i}"} for i in range(40)], metrics=[freeze_probe], workers=1, store="off",
                 progress=progress)
    assert SEEN and min(SEEN) > 1000
    assert gc.get_freeze_count() == 0


@pytest.fixture
def threshold_probe():
    @metric("gc_threshold_probe_t", threshold=0.5)
    def probe(response: str) -> float:
        return float(gc.get_threshold()[0])     # the young generation's threshold where the row is scored

    yield "gc_threshold_probe_t"
    REGISTRY.pop("gc_threshold_probe_t", None)


@pytest.mark.parametrize("workers", [1, 2])
def test_young_collections_are_rarer_while_rows_are_scored_and_restored_after(threshold_probe, workers):
    from assay.engine.run import GC_YOUNG

    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])
    try:
        res = evaluate([{"response": f"r{i}"} for i in range(30)], metrics=[threshold_probe], workers=workers,
                       store="off")
        assert [r[f"outputs.{threshold_probe}.{threshold_probe}"] for r in res.rows] == [float(GC_YOUNG)] * 30
        assert gc.get_threshold() == (700, *before[1:])      # given back after the run
    finally:
        gc.set_threshold(*before)
