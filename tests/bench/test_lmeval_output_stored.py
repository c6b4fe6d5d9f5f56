"""``assay bench quality --from-run RUN --output-lm-eval DIR``: lm-evaluation-harness's results JSON and samples
JSONL for a run already in the store, the same as the run itself would have written (its tasks read again from
their files, which must be unchanged)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.bench.quality.run import QualityConfig, export_lm_eval, run_quality
from assay.bench.quality.subject import Subject
from assay.errors import AssayError
from assay.store import open_store
from tests.bench.test_lmeval_groups import _folder, _model


def _files(folder: Path) -> dict[str, object]:
    """The files of one lm-eval output, their dates taken out of names and contents."""
    out: dict[str, object] = {}
    for f in sorted(folder.iterdir()):
        key = f.name.rsplit("_", 1)[0]
        if f.suffix == ".json":
            doc = json.loads(f.read_text())
            doc.pop("date", None)
            out[key] = doc
        else:
            out[key] = [json.loads(x) for x in f.read_text().splitlines()]
    return out


def test_a_stored_run_writes_the_files_its_run_wrote(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    model = _model()
    db = str(tmp_path / "store.db")
    cfg = QualityConfig(model=model, tasks="tiny_weighted", task_dirs=[str(root)], limit=4, name="tiny")
    asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=db, lm_eval_out=tmp_path / "live"))
    written = export_lm_eval(open_store(db), "tiny", tmp_path / "later")
    assert {p.name.rsplit("_", 1)[0] for p in written} == {"results", "samples_tiny_alpha", "samples_tiny_beta",
                                                          "samples_tiny_gamma"}
    live, later = _files(tmp_path / "live" / "scripted-lm"), _files(tmp_path / "later" / "scripted-lm")
    assert later == live
    assert later["results"]["groups"]["tiny_weighted"]["acc,none"] == pytest.approx(5 / 9)

    # through the CLI, no model needed
    from assay.cli.main import app

    r = CliRunner().invoke(app, ["bench", "quality", "--from-run", "tiny", "--output-lm-eval",
                                 str(tmp_path / "cli"), "--store", db])
    assert r.exit_code == 0, r.output
    assert _files(tmp_path / "cli" / "scripted-lm") == live
    r = CliRunner().invoke(app, ["bench", "quality", "--from-run", "tiny", "--store", db])
    assert r.exit_code != 0 and "give --output-lm-eval DIR" in str(r.exception)

    # a task file changed since the run: refused, naming it
    alpha = root / "alpha.yaml"
    alpha.write_text(alpha.read_text() + "description: 'Answer.'\n")
    with pytest.raises(AssayError, match=r"task tiny_alpha .*alpha.yaml.* changed since the run"):
        export_lm_eval(open_store(db), "tiny", tmp_path / "again")
