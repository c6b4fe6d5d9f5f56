"""The kind table (assay.bench.kinds): a fourth kind of benchmark is its own module plus one row in
the table. A toy kind, written here into its own module and named in the table at run time, is
stored, listed and read back through the generic store path, priced by cost, and shown on the
leaderboard — with no other module changed. The built-in kinds are loaded by name, on first use."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from assay.bench import kinds
from assay.bench.board import build_leaderboard
from assay.bench.cost import benchmark_cost, stored_costs
from assay.bench.kinds import get_kind, kind_names, store_benchmark
from assay.errors import AssayError
from assay.models.price_table import load_table
from assay.store import Store

SRC = str(Path(__file__).resolve().parents[2] / "src")

TOY = textwrap.dedent('''
    """A toy kind of benchmark: how many words per second a model writes, per corpus."""

    from __future__ import annotations

    from assay.bench.board import Column, Group, finite
    from assay.bench.kinds import BenchKind
    from assay.errors import AssayError

    SCHEMA = "toy.bench.words/1"


    def check(summary):
        if not isinstance(summary.get("corpora"), dict):
            raise AssayError("not a toy result: 'corpora' must be a mapping")


    def headline(summary):
        return {"wps": {name: c["wps"] for name, c in summary["corpora"].items()}}


    def board(recs, rows, columns, groups, notes):
        names = sorted({n for _, rec in recs for n in rec["metrics"]["wps"]})
        for name in names:
            key = f"toy:{name}"
            columns.append(Column(key, f"{name} words/s", "toy", "words/s", "high", key))
            have = [rid for rid, rec in recs if name in rec["metrics"]["wps"]]
            groups.append(Group("toy", key, f"{name} words/s", [rows[r].model for r in have], {"corpus": name}))
            for rid, rec in recs:
                v = rec["metrics"]["wps"].get(name)
                rows[rid].values[key] = float(v) if finite(v) else None


    def tokens(details):
        t = (details or {}).get("tokens") or {}
        return t.get("input"), t.get("output"), "toy counts"


    KIND = BenchKind(name="toy", schema=SCHEMA, title="toy", headline=headline,
                     task=lambda s: ",".join(s["corpora"]), list_columns=("ref", "model", "corpora", "when"),
                     check=check, part="corpus", parts=lambda s: len(s["corpora"]), board=board, tokens=tokens)
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy kind's module on the path and its one row in the kind table (both gone afterwards)."""
    (tmp_path / "toy_words_kind.py").write_text(TOY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(kinds.KIND_MODULES, "toy", "toy_words_kind")
    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))           # what this test loads is forgotten after
    yield get_kind("toy")
    sys.modules.pop("toy_words_kind", None)


def summary(model: str, wps: dict[str, float], **extra) -> dict:
    return {"schema": "toy.bench.words/1", "model": model, "name": f"words of {model}",
            "corpora": {name: {"wps": v} for name, v in wps.items()}, "tokens": {"input": 1_000_000, "output": 500_000},
            **extra}


def test_a_toy_kind_is_its_module_plus_one_row(toy, tmp_path):
    assert toy.name == "toy" and kind_names()[-1] == "toy"
    st = Store(str(tmp_path / "toy.db"))
    s = summary("gpt-4o-mini", {"news": 41.5, "poems": 12.0})
    ref = store_benchmark(st, "toy", s, {1: {"gaps": np.array([0.5, 0.25, 0.125])}})
    rec = st.get_benchmark(ref, kind="toy")
    assert rec["kind"] == "toy" and rec["model"] == "gpt-4o-mini" and rec["name"] == "words of gpt-4o-mini"
    assert rec["task"] == "news,poems" and rec["metrics"] == {"wps": {"news": 41.5, "poems": 12.0}}
    assert rec["details"] == s
    np.testing.assert_array_equal(st.benchmark_samples(rec["id"])[1]["gaps"], [0.5, 0.25, 0.125])
    listed = st.list_benchmarks(kind="toy", details=False)
    assert [r["ref"] for r in listed] == [ref] and "details" not in listed[0]

    # its own check, its own word for a part of a run
    with pytest.raises(AssayError, match="not a toy result: expected schema 'toy.bench.words/1'"):
        store_benchmark(st, "toy", {**s, "schema": "assay.bench.perf/1"})
    with pytest.raises(AssayError, match="'corpora' must be a mapping"):
        store_benchmark(st, "toy", {**s, "corpora": []})
    with pytest.raises(AssayError, match="samples for corpus 2, but the run has 2 corpus"):
        store_benchmark(st, "toy", s, {2: {"gaps": np.array([1.0])}})

    # cost reads its tokens through the kind; the leaderboard shows its columns beside the others
    table = load_table(_prices(tmp_path))
    priced = benchmark_cost(rec, table)
    assert (priced["kind"], priced["input_tokens"], priced["output_tokens"]) == ("toy", 1_000_000, 500_000)
    assert priced["tokens_from"] == "toy counts" and priced["cost_usd"] == pytest.approx(1.0 * 1 + 0.5 * 4)
    assert [c["kind"] for c in stored_costs(st, table)] == ["toy"]
    store_benchmark(st, "toy", summary("qwen2.5-7b", {"news": 88.0}))
    board = build_leaderboard(st, table=table)
    assert "toy" in board.kinds
    by_model = {r.model: r for r in board.rows}
    assert by_model["gpt-4o-mini"].values["toy:news"] == 41.5 and by_model["qwen2.5-7b"].values["toy:poems"] is None
    assert [r.model for r in board.sorted("toy:news")] == ["qwen2.5-7b", "gpt-4o-mini"]     # higher is better
    assert board.column("toy:news").label == "news words/s"
    only = build_leaderboard(st, kinds="toy", table=table)
    assert only.kinds == ("toy",) and {c.key for c in only.columns} == {"toy:news", "toy:poems", "cost_index"}
    with pytest.raises(AssayError, match="kind must be quality, perf, embed, toy or all"):
        build_leaderboard(st, kinds="speed")
    st.close()


def _prices(tmp_path: Path) -> Path:
    p = tmp_path / "prices.csv"
    p.write_text("model,deployment,input,output\ngpt-4o-mini,standard,1.0,4.0\n", encoding="utf-8")
    return p


def test_an_unknown_kind_names_the_kinds_there_are(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    with pytest.raises(AssayError, match="unknown benchmark kind 'speed': the kinds are quality, perf, embed"):
        store_benchmark(st, "speed", {"schema": "x/1"})
    st.close()


def test_the_built_in_kinds_load_by_name_on_first_use():
    """The kind table, the board and cost import no kind; asking for one by name imports its package
    (light: its row and what the store keeps), not its runner."""
    code = ("import json, sys\nimport assay.bench.board, assay.bench.cost\n"
            "before = sorted(m for m in sys.modules if m.startswith('assay.bench.'))\n"
            "from assay.bench.kinds import get_kind\n"
            "rows = [get_kind(k).schema for k in ('perf', 'quality', 'embed')]\n"
            "print(json.dumps([before, rows, sorted(sys.modules)]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": SRC, "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    before, schemas, after = json.loads(proc.stdout)
    assert before == ["assay.bench.board", "assay.bench.cost", "assay.bench.kinds"]
    assert schemas == ["assay.bench.perf/1", "assay.bench.quality/1", "assay.bench.embed/1"]
    assert {"assay.bench.perf", "assay.bench.quality", "assay.bench.embed"} <= set(after)
    assert not {"assay.bench.perf.run", "assay.bench.quality.run", "assay.bench.embed.run", "numpy"} & set(after)
