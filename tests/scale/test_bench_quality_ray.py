"""``assay bench quality --engine ray`` (issue 16): the shipped sample tasks (generation with
filters, multiple choice, code in the sandbox) and a judged task, asked of a model behind the
fake OpenAI endpoint, give the same items, scores and stored rows on Ray as locally; the calls
the workers make are the run's; the subject is resolved once per actor; a stopped run resumes
on Ray; the CLI takes ``--engine ray``, and without Ray says how to install it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray (pip install 'assay[ray]', in the dev extra)")

import assay  # noqa: E402
from assay.bench.quality.run import QualityConfig, run_quality  # noqa: E402
from assay.errors import AssayError  # noqa: E402
from assay.scale import bench_quality as rbq  # noqa: E402
from assay.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"
SRC = str(Path(assay.__file__).resolve().parents[1])

# the folder's Ray cluster (num_cpus=2, tests/scale/conftest.py): run apart from the parallel tests (`make test`)
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module", autouse=True)
def cluster(ray_cluster):
    """The folder's Ray cluster (tests/scale/conftest.py)."""


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")       # every item is a request to the fake endpoint
    for k in ("ASSAY_JUDGE", "ASSAY_JUDGE_TIMEOUT", "ASSAY_JUDGE_MAX_ATTEMPTS"):
        monkeypatch.delenv(k, raising=False)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASKS / name).read_text().splitlines() if line.strip()]


ARITH = {r["question"]: r["answer"].rsplit("#### ", 1)[1] for r in _rows("arithmetic.jsonl")}
MC = {r["question"]: r["answer"] for r in _rows("science_mc.jsonl")}
CODE = {r["entry_point"]: r["canonical_solution"] for r in _rows("code.jsonl")}


def answer(req: dict) -> dict:
    """The fake model: right on the even-numbered items of each task, wrong on the others (so the
    scores are not all one number); a judge (asked with more than one message, or in JSON mode)
    scores by the answer's length, 1-5."""
    body = req.get("body") or {}
    msgs = body.get("messages") or []
    prompt = msgs[-1]["content"] if msgs else str(body.get("prompt") or "")
    if len(msgs) != 1 or "response_format" in body:
        m = re.search(r"Capital of (\w+)", json.dumps(msgs))
        return {"content": json.dumps({"score": len(m.group(1)) % 5 + 1 if m else 3, "reason": "fake judge"})}
    if "def " in prompt and '"""' in prompt:
        name = re.findall(r"^def (\w+)\(", prompt, re.M)[-1]
        k = list(CODE).index(name)
        return {"content": CODE[name] if k % 2 == 0 else "    return None\n"}
    if "Capital of" in prompt:
        return {"content": "Paris" if "France" in prompt else "Cusco"}
    q = prompt.rsplit("Question:", 1)[1].split("\n", 1)[0].strip()
    if q in MC:
        k, gold = list(MC).index(q), MC[q]
        return {"content": "ABCD"[gold if k % 2 == 0 else (gold + 1) % 4]}
    k = list(ARITH).index(q)
    return {"content": f"Let me think.\n#### {ARITH[q] if k % 2 == 0 else 0}"}


def stored(store: Store, run_id: str) -> list[tuple]:
    """The run's rows as the store has them: position, item id, inputs, and every score."""
    return [(row.idx, row.row_id, {k: v for k, v in row.inputs.items() if k != "sandbox"},
             {m: {o: (s.value, s.status, s.passed, s.reason) for o, s in outs.items()} for m, outs in row.scores.items()})
            for row in store.iter_scored(run_id)]


def comparable(summary: dict) -> dict:
    """The summary without what differs between two runs of the same items (times, ids)."""
    drop = ("run_id", "created_at", "duration_s", "ref", "name", "engine")
    out = {k: v for k, v in summary.items() if k not in drop}
    out["config"] = {k: v for k, v in out["config"].items() if k != "name"}
    return out


def test_the_ray_run_equals_the_local_run(fake, tmp_path):
    fake.default = answer
    db = str(tmp_path / "runs.db")
    tasks = f"{TASKS / 'arithmetic.yaml'},{TASKS / 'science_mc.yaml'},{TASKS / 'code.yaml'}"
    cfg = dict(model=f"{fake.base_url}#m", tasks=tasks, api="chat", scoring="generate", concurrency=3)
    local = asyncio.run(run_quality(QualityConfig(**cfg, name="local"), store=db, out=tmp_path / "local"))
    asked = len(fake.chat_requests)
    on_ray = asyncio.run(run_quality(QualityConfig(**cfg, name="ray"), store=db, out=tmp_path / "ray",
                                     engine="ray"))

    assert asked == 36 and len(fake.chat_requests) == 2 * asked    # each item asked once per run
    t = on_ray.summary["tasks"]
    assert t["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 0.5
    assert t["science_mc"]["metrics"]["acc"]["mean"] == 0.5 and t["science_mc"]["modes"] == ["generate"]
    assert t["code"]["metrics"]["pass@1"]["mean"] == 0.5
    # the same items, scores and summary, the workers' calls counted as the run's
    assert [{k: v for k, v in i.items() if k != "sandbox"} for i in on_ray.items] == \
        [{k: v for k, v in i.items() if k != "sandbox"} for i in local.items]
    assert comparable(on_ray.summary) == comparable(local.summary)
    assert (on_ray.summary["engine"], local.summary["engine"]) == ("ray", "local")
    assert on_ray.summary["calls"]["calls"] == local.summary["calls"]["calls"] == 36
    st = Store(db)
    assert st.get_run(on_ray.run_id)["status"] == st.get_run(local.run_id)["status"] == "completed"
    rows = stored(st, on_ray.run_id)
    assert [idx for idx, *_ in rows] == list(range(36))             # every item once, in order
    assert rows == stored(st, local.run_id)
    assert (tmp_path / "ray" / "items.jsonl").read_text().count("\n") == 36


def test_a_judged_task_on_ray_scores_as_locally(fake, tmp_path):
    fake.default = answer
    (tmp_path / "capitals.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"c": "France", "a": "Paris"}, {"c": "Peru", "a": "Lima"}, {"c": "Chile", "a": "Santiago"},
        {"c": "Italy", "a": "Rome"}]) + "\n")
    (tmp_path / "capitals.yaml").write_text(
        "task: capitals\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: capitals.jsonl\n"
        "output_type: generate_until\ntest_split: test\ndoc_to_text: \"Capital of {{c}}?\"\n"
        "doc_to_target: \"{{a}}\"\nmetric_list:\n  - metric: exact_match\n  - metric: similarity\n"
        "generation_kwargs:\n  until: [\"\\n\"]\n  max_gen_toks: 8\n")
    cfg = dict(model=f"{fake.base_url}#m", tasks=str(tmp_path / "capitals.yaml"), api="chat",
               judge=f"{fake.base_url}#judge")
    local = asyncio.run(run_quality(QualityConfig(**cfg), store=None))
    on_ray = asyncio.run(run_quality(QualityConfig(**cfg), store=None, engine="ray", actors=2))
    t = on_ray.summary["tasks"]["capitals"]
    assert t["metrics"]["exact_match,none"]["mean"] == 0.25
    assert t["metrics"]["similarity"]["evaluated"] == 4
    assert on_ray.items == local.items
    assert comparable(on_ray.summary) == comparable(local.summary)


def test_the_subject_is_resolved_once_per_actor_and_its_limits_are_shared(fake, monkeypatch):
    fake.default = answer
    made: list = []
    start = rbq.RayItemScorer.start

    def keep(self):
        start(self)
        made.append(self)

    monkeypatch.setattr(rbq.RayItemScorer, "start", keep)
    builds: list = []
    close = rbq.RayItemScorer.close

    def ask_then_close(self):
        # each actor built its item scorer once, in its own process, however many chunks it scored
        builds.extend(ray.get([a.loads.remote() for a in self.actors]))
        builds.append(ray.get(self.actors[0].__ray_call__.remote(
            lambda w: type(getattr(w.models["subject"].limiter, "shared", None)).__name__)))
        close(self)

    monkeypatch.setattr(rbq.RayItemScorer, "close", ask_then_close)
    cfg = QualityConfig(model=f"{fake.base_url}#m", tasks=str(TASKS / "arithmetic.yaml"), api="chat",
                        concurrency=1)
    run = asyncio.run(run_quality(cfg, store=None, engine="ray", actors=2))
    assert run.summary["tasks"]["arithmetic"]["items"] == 12
    loads, shared = builds[:2], builds[2]
    assert len({x["pid"] for x in loads}) == 2
    assert sorted(x["chunks"] for x in loads) == [3, 3]               # 12 items, 2 a chunk, in turn
    assert shared == "ClusterLimits"
    assert made[0].depth == 4


def test_a_stopped_run_resumes_on_ray(fake, tmp_path, monkeypatch):
    fake.default = answer
    db = str(tmp_path / "runs.db")
    cfg = QualityConfig(model=f"{fake.base_url}#m", tasks=str(TASKS / "arithmetic.yaml"), api="chat", concurrency=2)
    real = rbq.RayItemScorer.score
    seen: list = []

    def stop_at_third(self, ks):
        # one actor, two chunks of 4 in flight: the third is asked for once the first is written
        seen.append(ks)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(self, ks)

    monkeypatch.setattr(rbq.RayItemScorer, "score", stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_quality(cfg, store=db, engine="ray", actors=1))
    st = Store(db)
    run = st.list_runs()[0]
    assert run["status"] == "interrupted" and run["rows_done"] == 4
    monkeypatch.setattr(rbq.RayItemScorer, "score", real)
    asked = len(fake.chat_requests)
    done = asyncio.run(run_quality(cfg, store=db, resume=True, engine="ray"))
    assert done.run_id == run["id"] and done.summary["resumed_at_item"] == 4
    questions = list(ARITH)
    again = {r["body"]["messages"][-1]["content"].rsplit("Question:", 1)[1].split("\n", 1)[0].strip()
             for r in fake.chat_requests[asked:]}
    assert again == set(questions[4:])                   # only the items not yet stored were asked again
    assert [idx for idx, *_ in stored(st, done.run_id)] == list(range(12))
    assert done.summary["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 0.5


def test_bad_engine_options_are_refused_before_the_run(fake):
    cfg = QualityConfig(model=f"{fake.base_url}#m", tasks=str(TASKS / "arithmetic.yaml"), api="chat")
    with pytest.raises(AssayError, match="unknown engine 'spark'"):
        asyncio.run(run_quality(cfg, engine="spark"))
    with pytest.raises(AssayError, match="--ray-address needs --engine ray"):
        asyncio.run(run_quality(cfg, ray_address="auto"))
    with pytest.raises(AssayError, match="actors must be at least 1"):
        asyncio.run(run_quality(cfg, engine="ray", actors=0))


def test_cli_engine_ray_and_the_install_hint_without_ray(fake, tmp_path):
    fake.default = answer
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": SRC, "ASSAY_CACHE": "off"}
    env.pop("RAY_ADDRESS", None)          # a Ray of its own, started and shut down by the command
    args = ["bench", "quality", "--model", f"{fake.base_url}#m", "--tasks", str(TASKS / "arithmetic.yaml"),
            "--api", "chat", "--store", str(db), "--json", "--quiet"]
    r = subprocess.run([sys.executable, "-m", "assay", *args, "--engine", "ray"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"]["mean"] == 0.5
    assert Store(str(db)).get_run(summary["run_id"])["status"] == "completed"
    # without Ray: the install hint of assay eval --engine ray, one line, no traceback
    blocker = tmp_path / "noray" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    r = subprocess.run([sys.executable, "-m", "assay", *args[:-2], "--engine", "ray"], capture_output=True,
                       text=True, env={**env, "PYTHONPATH": os.pathsep.join([str(blocker.parent), SRC])}, timeout=120)
    assert r.returncode == 2
    assert "pip install 'assay[ray]'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    assert Store(str(db)).list_runs()[0]["id"] == summary["run_id"]       # nothing opened for the refused run


def refuse_logliks(req: dict) -> dict:
    """An endpoint without prompt log-probabilities: /completions is refused (400)."""
    if req["path"].split("?")[0].endswith("/completions") and not req["path"].split("?")[0].endswith("/chat/completions"):
        return {"status": 400, "json": {"error": {"message": "echo is not supported", "type": "invalid_request_error"}}}
    return answer(req)


def test_a_refused_loglik_on_the_workers_switches_the_run_to_generation_as_locally(fake):
    fake.default = refuse_logliks
    cfg = dict(model=f"{fake.base_url}#m", tasks=str(TASKS / "science_mc.yaml"), api="chat")
    local = asyncio.run(run_quality(QualityConfig(**cfg), store=None))
    on_ray = asyncio.run(run_quality(QualityConfig(**cfg), store=None, engine="ray"))
    t = on_ray.summary["tasks"]["science_mc"]
    assert t["modes"] == ["generate"] and t["metrics"]["acc"]["mean"] == 0.5
    assert any("refused log-likelihood scoring" in n for n in t["notes"])       # the workers' finding, reported
    assert on_ray.items == local.items
    # each worker finds out once (two actors, one chunk of 8 items each): one refused call more than locally
    assert (local.summary["calls"]["errors"], on_ray.summary["calls"]["errors"]) == (1, 2)
    assert on_ray.summary["calls"]["calls"] == local.summary["calls"]["calls"] + 1
    assert comparable({**on_ray.summary, "calls": None}) == comparable({**local.summary, "calls": None})


def test_an_embedded_subject_is_loaded_once_per_actor_and_scores_as_locally(monkeypatch):
    from assay.models.embedded import embedded_available

    if not embedded_available():
        pytest.skip("the embedded model is not installed")
    loads: list = []
    close = rbq.RayItemScorer.close

    def ask_then_close(self):
        loads.extend(ray.get([a.loads.remote() for a in self.actors]))
        close(self)

    monkeypatch.setattr(rbq.RayItemScorer, "close", ask_then_close)
    # log-likelihood multiple choice in process: 8 items, chunks of 2, two chunks on each of two actors
    cfg = dict(model="embedded", tasks=str(TASKS / "science_mc.yaml"), limit=8, concurrency=1)
    on_ray = asyncio.run(run_quality(QualityConfig(**cfg), store=None, engine="ray", actors=2))
    assert sorted(x["chunks"] for x in loads) == [2, 2]
    assert [x["models_loaded"] for x in loads] == [1, 1]          # the GGUF once per actor, not per chunk
    local = asyncio.run(run_quality(QualityConfig(**cfg), store=None))
    assert on_ray.summary["tasks"]["science_mc"]["modes"] == ["loglik"]
    flat = lambda run: [x for i in run.items for x in i["logliks"]]    # noqa: E731
    assert flat(on_ray) == pytest.approx(flat(local), abs=1e-4)
    assert [i["scores"] for i in on_ray.items] == [i["scores"] for i in local.items]


def test_a_worker_keeps_concurrency_items_in_flight_whatever_the_chunks_it_holds(tmp_path, monkeypatch):
    # the item scorer of one actor, two chunks at once (the driver keeps two in flight per actor)
    from assay.bench.quality.run import ItemScorer, plan_tasks
    from assay.bench.quality.tasks import load_tasks

    (tmp_path / "qpipe_peak.py").write_text(
        "import asyncio\nNOW = [0]\nPEAK = [0]\n"
        "async def answer(prompt):\n"
        "    NOW[0] += 1\n    PEAK[0] = max(PEAK[0], NOW[0])\n"
        "    await asyncio.sleep(0.02)\n    NOW[0] -= 1\n    return '#### 0'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = QualityConfig(model="python:qpipe_peak:answer", tasks=str(TASKS / "arithmetic.yaml"), concurrency=3)
    scorer = ItemScorer(cfg, plan_tasks(cfg, load_tasks(cfg.tasks)))

    async def two_chunks():
        return await asyncio.gather(scorer.score(list(range(0, 6))), scorer.score(list(range(6, 12))))

    a, b = asyncio.run(two_chunks())
    assert [r.idx for r in a["rows"] + b["rows"]] == list(range(12))
    import qpipe_peak

    assert qpipe_peak.PEAK[0] == 3
