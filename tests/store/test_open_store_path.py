"""A pathlib.Path given as the store is the SQLite file it names, whatever ``$ASSAY_STORE`` says
(before: a Path was taken for "no store given", so with ``$ASSAY_STORE=off`` nothing was saved,
and otherwise the run went to the default store)."""

from __future__ import annotations

import assay
from assay.store import Store, open_store


def test_a_path_is_the_store_it_names(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_STORE", "off")
    st = open_store(tmp_path / "a.db")
    assert isinstance(st, Store) and (tmp_path / "a.db").exists()
    st.close()
    res = assay.evaluate([{"id": "1", "response": "Paris", "ground_truth": "Paris"}], metrics=["f1_score"],
                         store=tmp_path / "b.db", workers=1)
    saved = Store(str(tmp_path / "b.db"))
    try:
        assert saved.get_run(res.run["run_id"])["status"] == "completed"
    finally:
        saved.close()
