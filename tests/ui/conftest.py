"""A store with two runs over the same rows, full of script-injection payloads, for the
dashboard and report tests. Built once per session through ``assay.evaluate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

import assay
from assay.store import Store
from assay.store import schema as S
from tests.helpers.uihelpers import XSS_SCRIPT, make_rows


@pytest.fixture(scope="session")
def ui_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("ui-store")
    path = str(d / "store.db")
    st = Store(path)
    base = assay.evaluate(make_rows("v1"), metrics=["f1_score", "ui_judge"], name="baseline <b>", store=st, workers=1)
    cand = assay.evaluate(make_rows("v2"), metrics=["f1_score", "ui_judge"], name="candidate", store=st, workers=1)
    # The dashboard shows the judge and its note: give the baseline a judge with an untrusted note.
    a = base.run["run_id"]
    summary = dict(st.get_run(a)["summary"])
    summary.update(judge="http://127.0.0.1:9/v1#tiny-judge", judge_source="given",
                   judge_note=f"smoke-test judge {XSS_SCRIPT}")
    with st.engine.begin() as conn:
        conn.execute(update(S.runs).where(S.runs.c.id == a).values(summary=json.dumps(summary),
                                                                   judge="http://127.0.0.1:9/v1#tiny-judge"))
    info = {"path": path, "store": st, "base": a, "cand": cand.run["run_id"], "base_result": base,
            "cand_result": cand}
    yield info
    st.close()


@pytest.fixture
def artifacts() -> Path:
    p = Path(__file__).parent / "artifacts"
    p.mkdir(exist_ok=True)
    return p
