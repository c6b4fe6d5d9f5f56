"""One model, one leaderboard row (issue 28, item 4): a quality run stores the model as
``http://HOST/v1#NAME`` and a perf run as ``NAME``; the board gives them one identity (the model the
spec names, or the name given with ``--model-name``, or an alias), says which stored run each figure
came from, and uses a pinned run instead of the latest when asked (``--pin KIND=REF``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from assay.bench.board import build_leaderboard
from assay.bench.kinds import model_identity, store_benchmark
from assay.bench.quality.run import QualityConfig, run_quality
from assay.errors import AssayError
from assay.store import open_store
from tests.helpers.cli import run_assay
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.perfdata import make_run

ROOT = Path(__file__).resolve().parents[2]
ARITH = str(ROOT / "examples" / "tasks" / "arithmetic.yaml")


@pytest.fixture(scope="module")
def served() -> Any:
    fake = FakeOpenAI()
    fake.models = ["tiny"]
    fake.default = {"content": "#### 4"}
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def two_kinds(served: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = str(tmp_path_factory.mktemp("ident") / "store.db")
    st = open_store(path)
    q = asyncio.run(run_quality(QualityConfig(model=f"{served.base_url}#tiny", tasks=ARITH, limit=3, api="chat",
                                              name="q tiny"), store=st))
    old, ox = make_run(name="perf old", model="tiny", levels=(1,), n=30, seed=1, speed=0.5, created_at=1_600_000_000.0)
    new, nx = make_run(name="perf new", model="tiny", levels=(1,), n=30, seed=2, speed=2.0)
    refs = {"quality": q.ref, "perf_old": store_benchmark(st, "perf", old, ox),
            "perf_new": store_benchmark(st, "perf", new, nx)}
    yield {"store": st, "path": path, "refs": refs, "quality": q, "spelling": f"{served.base_url}#tiny"}
    st.close()


def test_the_identity_rule():
    assert model_identity("http://127.0.0.1:8000/v1#tiny") == "tiny"
    assert model_identity("https://user@host.example/v1#org/model-7b ") == "org/model-7b"
    assert model_identity("openai:gpt-4o-mini") == "gpt-4o-mini" and model_identity("azure:prod-4o") == "prod-4o"
    assert model_identity("gpt-4o-mini") == "gpt-4o-mini"
    assert model_identity("python:pkg.mod:fn") == "python:pkg.mod:fn"       # a pipeline is its own name
    assert model_identity("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"   # names no model
    assert model_identity("http://h/v1#x", {"model_name": "mine"}) == "mine"              # --model-name wins
    assert model_identity("http://h/v1#x", {"config": {"model_name": "mine"}}) == "mine"
    assert model_identity("http://h/v1#x", aliases={"x": "y"}) == "y"
    assert model_identity("http://h/v1#x", aliases={"http://h/v1#x": "z"}) == "z"


def test_quality_and_perf_of_one_model_are_one_row(two_kinds):
    st, refs = two_kinds["store"], two_kinds["refs"]
    assert st.get_benchmark(refs["quality"])["model"] == two_kinds["spelling"]      # as quality stores it
    board = build_leaderboard(st)
    assert [r.model for r in board.rows] == ["tiny"]
    row = board.rows[0]
    assert row.get("quality_index") is not None and row.get("latency_index") is not None
    assert row.refs == {"quality": refs["quality"], "perf": refs["perf_new"]}        # each figure's run
    src = board.as_dict()["rows"][0]["sources"]
    assert src["quality"]["ref"] == refs["quality"] and src["quality"]["spelling"] == two_kinds["spelling"]
    assert src["perf"] == {**src["perf"], "ref": refs["perf_new"], "name": "perf new", "pinned": False}
    chart = board.tradeoff("quality-latency")
    assert len(chart["points"]) == 1 and chart["points"][0]["ref"]["perf"] == refs["perf_new"]
    assert any("spelled" in n and two_kinds["spelling"] in n for n in board.notes)


def test_a_pinned_run_is_used_instead_of_the_latest(two_kinds):
    st, refs = two_kinds["store"], two_kinds["refs"]
    latest = build_leaderboard(st).rows[0].get("latency_index")
    board = build_leaderboard(st, pins={"perf": [refs["perf_old"]]})
    row = board.rows[0]
    assert row.refs["perf"] == refs["perf_old"] and row.get("latency_index") > latest    # the old, slower run
    assert board.as_dict()["rows"][0]["sources"]["perf"]["pinned"] is True
    assert any("pinned" in n and refs["perf_old"] in n for n in board.notes)
    with pytest.raises(AssayError, match="--pin perf=nope"):
        build_leaderboard(st, pins={"perf": ["nope"]})
    with pytest.raises(AssayError, match="--pin quality="):
        build_leaderboard(st, pins={"quality": [refs["perf_old"]]})       # a perf run is not a quality result
    with pytest.raises(AssayError, match="--runs latest"):
        build_leaderboard(st, runs="all", pins={"perf": [refs["perf_old"]]})


def test_model_name_and_aliases(two_kinds, tmp_path):
    st = open_store(str(tmp_path / "named.db"))
    try:
        q = asyncio.run(run_quality(QualityConfig(model=f"{two_kinds['spelling']}", tasks=ARITH, limit=2, api="chat",
                                                  model_name="team/tiny-v2"), store=st))
        s, x = make_run(name="perf", model="tiny")
        store_benchmark(st, "perf", {**s, "model_name": "team/tiny-v2"}, x)
        o, ox = make_run(name="other", model="tiny-other")
        store_benchmark(st, "perf", o, ox)
        assert st.get_benchmark(q.ref)["model"] == "team/tiny-v2"
        board = build_leaderboard(st)
        assert sorted(r.model for r in board.rows) == ["team/tiny-v2", "tiny-other"]
        merged = build_leaderboard(st, aliases={"tiny-other": "team/tiny-v2"})
        assert [r.model for r in merged.rows] == ["team/tiny-v2"]       # the latest perf of the two spellings
    finally:
        st.close()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_assay(args, env={**os.environ, "COLUMNS": "250", **(env or {})})


def test_cli_names_the_runs_and_pins(two_kinds):
    refs, path = two_kinds["refs"], two_kinds["path"]
    p = cli("bench", "leaderboard", "--store", path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("tiny") >= 1 and f"perf {refs['perf_new'][:8]}" in p.stdout
    assert f"quality {refs['quality'][:8]}" in p.stdout
    js = json.loads(cli("bench", "leaderboard", "--store", path, "--json", "--pin", f"perf={refs['perf_old']}").stdout)
    assert [r["model"] for r in js["rows"]] == ["tiny"] and js["rows"][0]["refs"]["perf"] == refs["perf_old"]
    bad = cli("bench", "leaderboard", "--store", path, "--pin", "perf")
    assert bad.returncode == 2 and "--pin" in bad.stderr and "Traceback" not in bad.stderr
    js = json.loads(cli("bench", "leaderboard", "--store", path, "--json", "--alias", "tiny=Tiny 1B").stdout)
    assert [r["model"] for r in js["rows"]] == ["Tiny 1B"]


def test_model_name_on_the_command_line(tmp_path):
    (tmp_path / "idpipe.py").write_text("def answer(prompt):\n    return '#### 4'\n", encoding="utf-8")
    path = str(tmp_path / "s.db")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    p = cli("bench", "quality", "--model", "python:idpipe:answer", "--tasks", ARITH, "--limit", "2", "-q",
            "--model-name", "tiny", "--store", path, env=env)
    assert p.returncode == 0, p.stderr
    st = open_store(path)
    try:
        s, x = make_run(name="perf", model="http://127.0.0.1:9/v1#tiny")
        store_benchmark(st, "perf", s, x)
        board = build_leaderboard(st)
        assert [r.model for r in board.rows] == ["tiny"] and set(board.rows[0].refs) == {"quality", "perf"}
    finally:
        st.close()
