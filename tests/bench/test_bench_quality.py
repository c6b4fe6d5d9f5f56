"""`assay bench quality` end to end: the shipped sample tasks against Python pipelines whose
answers are known (so every score can be checked), and against the embedded model in process and
behind llama.cpp's server (log-likelihood multiple choice, generation, the sandbox)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.errors import AssayError
from assay.store import open_store
from tests.helpers.cli import run_assay

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASKS / name).read_text().splitlines() if line.strip()]


PIPELINE = '''
import json, re
from pathlib import Path
TASKS = Path({tasks!r})
rows = lambda n: [json.loads(l) for l in (TASKS / n).read_text().splitlines() if l.strip()]
ARITH = {{r["question"]: r["answer"].rsplit("#### ", 1)[1] for r in rows("arithmetic.jsonl")}}
MC = {{r["question"]: "ABCD"[r["answer"]] for r in rows("science_mc.jsonl")}}
CODE = {{r["entry_point"]: r["canonical_solution"] for r in rows("code.jsonl")}}
CALLS = []

def _last(prompt, key):
    return prompt.rsplit(key, 1)[1].split("\\n", 1)[0].strip()

def right(prompt: str) -> str:
    CALLS.append(prompt)
    if "def " in prompt and '"""' in prompt:
        name = re.findall(r"^def (\\w+)\\(", prompt, re.M)[-1]
        return CODE[name]
    q = _last(prompt, "Question:")
    if q in MC:
        return MC[q]
    return "Let me think.\\n#### " + ARITH[q]

def wrong(prompt: str) -> str:
    if "def " in prompt and '"""' in prompt:
        return "    return None\\n"
    q = _last(prompt, "Question:")
    if q in MC:
        return "ABCD"[("ABCD".index(MC[q]) + 1) % 4]
    return "#### 0"

def half(prompt: str) -> str:
    # right on even-numbered items, wrong on the others
    q = _last(prompt, "Question:") if "Question:" in prompt else ""
    keys = list(ARITH) + list(MC)
    return right(prompt) if q in keys and keys.index(q) % 2 == 0 else wrong(prompt)

STOP_AFTER = [None]

def stops(prompt: str) -> str:
    if STOP_AFTER[0] is not None and len(CALLS) >= STOP_AFTER[0]:
        raise KeyboardInterrupt
    return right(prompt)
'''


@pytest.fixture
def pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a fresh module of answering pipelines, importable from the working directory."""
    name = f"qpipe_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PIPELINE.format(tasks=str(TASKS)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _run(cfg: QualityConfig, store: str | None, **kw) -> object:
    return asyncio.run(run_quality(cfg, store=store, **kw))


def test_right_answers_score_full_marks_and_wrong_ones_zero(pipe: str, tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    tasks = f"{TASKS / 'arithmetic.yaml'},{TASKS / 'code.yaml'},{TASKS / 'science_mc.yaml'}"
    good = _run(QualityConfig(model=f"python:{pipe}:right", tasks=tasks, name="good"), store, out=tmp_path / "out")
    t = good.summary["tasks"]
    assert t["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 1.0
    assert t["arithmetic"]["metrics"]["exact_match,flexible-extract"]["mean"] == 1.0
    assert t["code"]["metrics"]["pass@1"]["mean"] == 1.0
    # a pipeline gives no log-probabilities: multiple choice was generated, and the result says so
    assert t["science_mc"]["modes"] == ["generate"]
    assert t["science_mc"]["metrics"]["acc"]["mean"] == 1.0
    assert "acc_norm" in t["science_mc"]["metrics"] and t["science_mc"]["metrics"]["acc_norm"]["evaluated"] == 0
    assert good.summary["index"]["value"] == 1.0 and good.summary["index"]["tasks"] == 3
    assert good.summary["isolation"]
    # every item is kept: in the store, and in items.jsonl
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert len(items) == 36
    code = [i for i in items if i["task"] == "code"]
    assert all(i["sandbox"][0]["status"] == "passed" for i in code)
    arith = [i for i in items if i["task"] == "arithmetic"]
    assert arith[0]["extracted"]["strict-match"] == _rows("arithmetic.jsonl")[0]["answer"].rsplit("#### ", 1)[1]
    st = open_store(store)
    rec = st.get_benchmark(good.ref, kind="quality")
    assert rec["run_id"] == good.run_id and len(list(st.iter_scored(good.run_id))) == 36

    bad = _run(QualityConfig(model=f"python:{pipe}:wrong", tasks=tasks, name="bad"), store)
    tb = bad.summary["tasks"]
    assert tb["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 0.0
    assert tb["code"]["metrics"]["pass@1"]["mean"] == 0.0
    assert tb["science_mc"]["metrics"]["acc"]["mean"] == 0.0
    assert bad.summary["index"]["value"] == 0.0


def test_compare_uses_mcnemar_on_the_same_items_and_refuses_other_data(pipe: str, tmp_path: Path) -> None:
    from assay.bench.quality.report import compare_quality
    from assay.stats import mcnemar_exact

    store = str(tmp_path / "s.db")
    tasks = str(TASKS / "arithmetic.yaml")
    a = _run(QualityConfig(model=f"python:{pipe}:wrong", tasks=tasks), store)
    b = _run(QualityConfig(model=f"python:{pipe}:right", tasks=tasks), store)
    cmp = compare_quality(open_store(store), a.ref, b.ref)
    e = cmp["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"]
    assert e["items"] == 12 and e["diff"] == 1.0
    assert e["mcnemar"] == {"only_a_right": 0, "only_b_right": 12, "p_value": mcnemar_exact(0, 12)}
    assert e["significant"] and e["mcnemar"]["p_value"] < 0.001
    assert cmp["index"]["diff"] == 1.0

    # the same task over other data is refused
    other = tmp_path / "other"
    other.mkdir()
    for f in ("arithmetic.yaml", "arithmetic_fewshot.jsonl"):
        (other / f).write_text((TASKS / f).read_text())
    lines = (TASKS / "arithmetic.jsonl").read_text().splitlines()
    (other / "arithmetic.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    c = _run(QualityConfig(model=f"python:{pipe}:right", tasks=str(other / "arithmetic.yaml")), store)
    with pytest.raises(AssayError, match="the data differs"):
        compare_quality(open_store(store), a.ref, c.ref)


def test_resume_continues_a_stopped_run_without_asking_again(pipe: str, tmp_path: Path) -> None:
    import importlib

    mod = importlib.import_module(pipe)
    store = str(tmp_path / "s.db")
    cfg = QualityConfig(model=f"python:{pipe}:stops", tasks=str(TASKS / "arithmetic.yaml"), concurrency=1)
    mod.STOP_AFTER[0] = 5
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, store)
    st = open_store(store)
    run = st.list_runs()[0]
    assert run["status"] == "interrupted" and run["rows_done"] == 5
    mod.STOP_AFTER[0] = None
    asked_before = len(mod.CALLS)
    done = asyncio.run(run_quality(cfg, store=store, resume=True))
    assert len(mod.CALLS) - asked_before == 7          # only the items not yet scored
    assert done.run_id == run["id"] and done.summary["resumed_at_item"] == 5
    assert done.summary["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"] == \
        {**done.summary["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"], "mean": 1.0, "evaluated": 12}


def test_pass_at_k_samples_and_refuses_k_above_n(pipe: str, tmp_path: Path) -> None:
    code = str(TASKS / "code.yaml")
    with pytest.raises(AssayError, match=r"pass@5 needs at least 5 answers.*3 are sampled"):
        _run(QualityConfig(model=f"python:{pipe}:right", tasks=code, samples=3, pass_at=[1, 5]), None)
    r = _run(QualityConfig(model=f"python:{pipe}:right", tasks=code, samples=3, pass_at=[1, 3], limit=4), None)
    m = r.summary["tasks"]["code"]
    assert m["samples"] == 3 and m["metrics"]["pass@1"]["mean"] == 1.0 and m["metrics"]["pass@3"]["mean"] == 1.0
    assert all(len(i["sandbox"]) == 3 for i in r.items)
    # sampling several answers at the task's temperature 0 would repeat one answer: the run says what it used
    assert m["temperature"] > 0 and any("temperature" in n for n in m["notes"])


def test_bad_task_file_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: x\noutput_type: multiple_choice\ndataset_path: json\n"
                   "dataset_kwargs:\n  data_files:\n    test: missing.jsonl\ndoc_to_text: '{{q}}'\ndoc_to_choice: '{{c}}'\ndoc_to_target: 0\ntest_split: test\n")
    p = run_assay(["bench", "quality", "--model", "embedded", "--tasks", str(bad), "--store", str(tmp_path / "s.db")],
                  cwd=tmp_path)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and "bad.yaml" in p.stderr and "missing.jsonl" in p.stderr
    assert len([x for x in p.stderr.splitlines() if x.strip()]) == 1


def test_cli_runs_shows_lists_and_compares(pipe: str, tmp_path: Path) -> None:
    def assay(*args: str) -> subprocess.CompletedProcess:
        return run_assay([*args, "--store", str(tmp_path / "s.db")], cwd=tmp_path)

    tasks = str(TASKS / "arithmetic.yaml")
    a = assay("bench", "quality", "--model", f"python:{pipe}:half", "--tasks", tasks, "--name", "half", "--json")
    assert a.returncode == 0, a.stderr
    sa = json.loads(a.stdout)
    assert sa["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 0.5
    b = assay("bench", "quality", "--model", f"python:{pipe}:right", "--tasks", tasks, "--name", "right",
              "--out", str(tmp_path / "o"))
    assert b.returncode == 0, b.stderr
    assert "quality index 100.0" in b.stdout and (tmp_path / "o" / "items.jsonl").exists()
    ls = assay("bench", "list", "--kind", "quality")
    assert ls.returncode == 0 and "half" in ls.stdout and "right" in ls.stdout
    show = assay("bench", "show", "half")
    assert show.returncode == 0 and "exact_match,strict-match" in show.stdout and "50.0%" in show.stdout
    cmp = assay("bench", "compare", "half", "right")
    assert cmp.returncode == 0, cmp.stderr
    assert re.search(r"only A\s+right", cmp.stdout) and "+50.0" in cmp.stdout
    # the items are an ordinary stored run
    shown = assay("show", sa["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "quality index 50.0" in shown.stdout and f"assay export {sa['run_id']}" in shown.stdout
    exp = assay("export", sa["run_id"], "-o", str(tmp_path / "items.jsonl"))
    assert exp.returncode == 0, exp.stderr
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and sum(r["outputs.quality.exact_match,strict-match"] for r in rows) == 6
    runs = assay("runs")
    assert runs.returncode == 0 and sa["run_id"] in runs.stdout


# -- the embedded model: in process, and behind llama.cpp's server ---------------------------------

def test_python_task_with_a_judged_metric(pipe: str, tmp_path: Path) -> None:
    _embedded()
    (tmp_path / f"{pipe}_task.py").write_text(
        "from assay.bench.quality.tasks import task\n"
        "@task(name='capitals', output_type='generate_until', doc_to_text=lambda d: f\"Capital of {d['c']}?\",\n"
        "      doc_to_target=lambda d: d['a'], generation_kwargs={'until': ['\\n'], 'max_gen_toks': 8},\n"
        "      metric_list=[{'metric': 'exact_match'}, {'metric': 'similarity'}])\n"
        "def capitals():\n"
        "    return [{'c': 'France', 'a': 'Paris'}, {'c': 'Peru', 'a': 'Lima'}]\n")
    (tmp_path / f"{pipe}_ans.py").write_text("def answer(p):\n    return 'Paris' if 'France' in p else 'Cusco'\n")
    with pytest.raises(AssayError, match="--judge"):
        _run(QualityConfig(model=f"python:{pipe}_ans:answer", tasks=f"python:{pipe}_task:capitals"), None)
    r = _run(QualityConfig(model=f"python:{pipe}_ans:answer", tasks=f"python:{pipe}_task:capitals",
                           judge="embedded"), None)
    t = r.summary["tasks"]["capitals"]
    assert t["metrics"]["exact_match,none"]["mean"] == 0.5
    assert t["metrics"]["similarity"]["evaluated"] == 2 and 1 <= t["metrics"]["similarity"]["mean"] <= 5
    assert r.summary["judge"] and "embedded" in r.summary["judge"]
    assert all(1 <= i["scores"]["similarity"] <= 5 for i in r.items)


def _embedded() -> None:
    from assay.models.embedded import embedded_available

    if not embedded_available():
        pytest.skip("the embedded model is not installed")


def test_embedded_in_process_loglik_multiple_choice_and_call_cache(tmp_path: Path, monkeypatch) -> None:
    _embedded()
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    cfg = QualityConfig(model="embedded", tasks=str(TASKS / "science_mc.yaml"), limit=6, shots=2)
    r = _run(cfg, str(tmp_path / "s.db"))
    t = r.summary["tasks"]["science_mc"]
    assert t["modes"] == ["loglik"] and t["num_fewshot"] == 2
    for it in r.items:
        assert len(it["logliks"]) == 4 and all(x < 0 for x in it["logliks"])
        best = max(range(4), key=lambda j: it["logliks"][j])
        assert it["scores"]["acc"] == (1.0 if best == it["gold"][0] else 0.0)
    assert r.summary["calls"]["calls"] == 6 and r.summary["calls"]["cache_hits"] == 0
    again = _run(cfg, str(tmp_path / "s.db"))
    assert again.summary["calls"]["cache_hits"] == 6
    assert [i["logliks"] for i in again.items] == [i["logliks"] for i in r.items]


def test_embedded_multiple_choice_by_generation(tmp_path: Path) -> None:
    _embedded()
    r = _run(QualityConfig(model="embedded", tasks=str(TASKS / "science_mc.yaml"), limit=3, scoring="generate",
                           api="chat"), None)
    t = r.summary["tasks"]["science_mc"]
    assert t["modes"] == ["generate"] and t["metrics"]["acc"]["evaluated"] == 3
    for it in r.items:
        assert "A. " in it["prompt"] and isinstance(it["answer"], str)


def test_llama_server_loglik_agrees_with_in_process_and_generates(llama_server: str, tmp_path: Path) -> None:
    from tests.conftest import LLAMA_ALIAS

    mc = str(TASKS / "science_mc.yaml")
    served = _run(QualityConfig(model=f"{llama_server}#{LLAMA_ALIAS}", tasks=mc, limit=4), None)
    local = _run(QualityConfig(model="embedded", tasks=mc, limit=4), None)
    assert served.summary["tasks"]["science_mc"]["modes"] == ["loglik"]
    for s, l in zip(served.items, local.items):
        assert s["logliks"] == pytest.approx(l["logliks"], abs=0.25)
    gen = _run(QualityConfig(model=f"{llama_server}#{LLAMA_ALIAS}", tasks=str(TASKS / "arithmetic.yaml"), limit=2,
                             max_tokens=24), None)
    for it in gen.items:
        assert it["mode"] == "generate" and isinstance(it["answer"], str) and "Question:" not in it["answer"]
        assert set(it["extracted"]) == {"strict-match", "flexible-extract"}
