"""How a quality run is kept as an evaluation run (issue 28 item 4): the model under test is the
run's subject, never its judge, so neither `assay runs` nor the dashboard calls it a judge or
advises `assay judge check` on it; a real judge (`--judge`) is recorded as the judge."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.store import Store

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"
ANSWER = "def answer(prompt):\n    return 'Paris' if 'France' in prompt else '#### 7'\n"
TASK = ("from assay.bench.quality.tasks import task\n"
        "@task(name='capitals', output_type='generate_until', doc_to_text=lambda d: f\"Capital of {d['c']}?\",\n"
        "      doc_to_target=lambda d: d['a'], generation_kwargs={'until': ['\\n'], 'max_gen_toks': 8},\n"
        "      metric_list=[{'metric': 'exact_match'}, {'metric': 'similarity'}])\n"
        "def capitals():\n"
        "    return [{'c': 'France', 'a': 'Paris'}, {'c': 'Peru', 'a': 'Lima'}]\n")


@pytest.fixture
def mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"qsub_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(ANSWER)
    (tmp_path / f"{name}_task.py").write_text(TASK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _page(db: str, run_id: str) -> str:
    from fastapi.testclient import TestClient

    from assay.ui.server import create_app

    st = Store(db)
    try:
        client = TestClient(create_app(st), base_url="http://127.0.0.1")
        return client.get(f"/runs/{run_id}").text + client.get("/runs").text
    finally:
        st.close()


def test_the_model_under_test_is_the_subject_not_the_judge(mod: str, tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    model = f"python:{mod}:answer"
    r = asyncio.run(run_quality(QualityConfig(model=model, tasks=str(TASKS / "arithmetic.yaml"), limit=3), store=db))
    st = Store(db)
    run = st.get_run(r.run_id)
    st.close()
    assert run["judge"] is None
    assert {s["kind"] for s in run["summary"]["scorers"].values()} == {"formula"}
    assert run["config"]["model"] == model and model in run["source"]
    page = _page(db, r.run_id)
    assert "judge check --judge" not in page and 'id="no-check"' not in page


def test_a_real_judge_is_recorded_as_the_judge(mod: str, tmp_path: Path) -> None:
    from assay.models.embedded import embedded_available

    if not embedded_available():
        pytest.skip("the embedded model is not installed")
    db = str(tmp_path / "s.db")
    model = f"python:{mod}:answer"
    r = asyncio.run(run_quality(QualityConfig(model=model, tasks=f"python:{mod}_task:capitals", judge="embedded"),
                                store=db))
    st = Store(db)
    run = st.get_run(r.run_id)
    st.close()
    assert run["judge"] == r.summary["judge"] and run["judge"] != model
    # only the judged score is the judge's: exact match is not advertised as judged
    scorers = run["summary"]["scorers"]
    assert scorers["similarity"] == {"by": run["judge"], "kind": "judge", "label": run["judge"]}
    assert scorers["exact_match,none"]["kind"] == "formula"
    page = _page(db, r.run_id)
    assert f"assay judge check --judge {model}" not in page
