"""A store for the leaderboard tests, written through the real APIs: quality runs made by
`run_quality` (Python pipelines whose answers are known, on the shipped sample tasks and on a
copy of one with other data), perf runs through `store_benchmark(st, "perf", ...)` (perfdata.py), embedding
results in the stored shape of the embed runner, and a price table of our own."""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from assay.bench.kinds import store_benchmark
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.stored import headline
from assay.models.price_table import load_table
from assay.store import open_store
from tests.helpers.perfdata import make_run

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"

PIPELINE = '''
import json
from pathlib import Path
TASKS = Path({tasks!r})
rows = lambda n: [json.loads(l) for l in (TASKS / n).read_text().splitlines() if l.strip()]
ARITH = {{r["question"]: r["answer"].rsplit("#### ", 1)[1] for r in rows("arithmetic.jsonl")}}
MC = {{r["question"]: "ABCD"[r["answer"]] for r in rows("science_mc.jsonl")}}

def _q(prompt):
    return prompt.rsplit("Question:", 1)[1].split("\\n", 1)[0].strip()

def right(prompt):
    q = _q(prompt)
    return MC[q] if q in MC else "#### " + ARITH[q]

def wrong(prompt):
    q = _q(prompt)
    return "ABCD"[("ABCD".index(MC[q]) + 1) % 4] if q in MC else "#### 0"

def half(prompt):
    keys = list(ARITH) + list(MC)
    return right(prompt) if keys.index(_q(prompt)) % 2 == 0 else wrong(prompt)
'''

EMBED_SCHEMA = "assay.bench.embed/1"


def embed_result(model: str, tasks: dict[str, tuple[str, str, float, str]]) -> tuple[dict, dict]:
    """(headline, summary) of a stored embed run, as the brief's contract lays them out.
    ``tasks``: name -> (type, main score, value, metric version)."""
    head = {"tasks": {n: {"type": ty, "metric": m, "value": v, "task_hash": f"th-{n}", "data_hash": f"dh-{n}",
                          "metric_version": mv} for n, (ty, m, v, mv) in tasks.items()}}
    summary = {"schema": EMBED_SCHEMA, "ref": None, "name": f"embed {model}", "model": model, "model_kind": "openai",
               "dim": 384, "created_at": 1_700_000_000.0, "duration_s": 3.0, "config": {}, "calls": {},
               "texts_per_s": 120.0,
               "tasks": {n: {"type": ty, "main_score": m, "value": v, "ci95_low": v - 0.05, "ci95_high": v + 0.05,
                             "scores": {m: v}, "n_units": 20, "task_hash": f"th-{n}", "data_hash": f"dh-{n}",
                             "metric_version": mv, "source": f"builtin:{n}", "split": "test"}
                         for n, (ty, m, v, mv) in tasks.items()}}
    return head, summary


def build_board_store(d: Path, *, hostile: str | None = None) -> dict[str, Any]:
    """A store with:

    - right, half: quality on arithmetic + science_mc (the shipped files); perf at c=1,4 (800→200);
      right also an embed run;
    - wrong: quality on arithmetic only, from a copy whose data differs (another task set, another
      arithmetic definition); no perf, no price;
    - slowpoke: perf only, at another token shape (800→100); priced;
    - gpt-4o-mini: perf at c=1,4 and an embed run with another metric version for `sts`.
    

    ``hostile``: also a model of that name (markup in it) with a quality result (half's summary),
    a perf run and an embed result. Puts the pipelines' folder on ``sys.path``; ``info["syspath"]``.
    """
    mod = f"lbpipe_{uuid.uuid4().hex[:8]}"
    (d / f"{mod}.py").write_text(PIPELINE.format(tasks=str(TASKS)))
    sys.path.insert(0, str(d))
    other = d / "other"
    other.mkdir()
    for f in ("arithmetic.yaml", "arithmetic_fewshot.jsonl"):
        shutil.copy(TASKS / f, other / f)
    lines = (TASKS / "arithmetic.jsonl").read_text().splitlines()
    (other / "arithmetic.jsonl").write_text("\n".join(lines[:-1]) + "\n")     # one item less: other data
    path = str(d / "store.db")
    st = open_store(path)
    both = f"{TASKS / 'arithmetic.yaml'},{TASKS / 'science_mc.yaml'}"
    runs = {}
    for fn, tasks in (("right", both), ("half", both), ("wrong", str(other / "arithmetic.yaml"))):
        runs[fn] = asyncio.run(run_quality(QualityConfig(model=f"python:{mod}:{fn}", tasks=tasks, limit=4, name=fn),
                                           store=st))
    names = {fn: f"python:{mod}:{fn}" for fn in runs}
    perf = {}
    for who, model, kw in (("right", names["right"], {"speed": 2.0}), ("half", names["half"], {"speed": 1.0}),
                           ("mini", "gpt-4o-mini", {"speed": 1.5}),
                           ("slow", "slowpoke", {"speed": 0.5, "output_tokens": 100})):
        s, x = make_run(name=f"perf {who}", model=model, levels=(1, 4), n=40, seed=len(perf), **kw)
        perf[who] = (store_benchmark(st, "perf", s, x), s)
    # an older perf run of `right`: the latest one is used
    old, ox = make_run(name="old", model=names["right"], levels=(1,), n=20, seed=9, created_at=1_600_000_000.0)
    store_benchmark(st, "perf", old, ox)
    embeds = {}
    for model, tasks in ((names["right"], {"sts": ("sts", "cosine_spearman", 0.81, "1"),
                                           "retrieval": ("retrieval", "ndcg_at_10", 0.62, "1")}),
                         ("gpt-4o-mini", {"sts": ("sts", "cosine_spearman", 0.77, "2")})):
        head, summary = embed_result(model, tasks)
        embeds[model] = st.add_benchmark(kind="embed", name=summary["name"], model=model, task=",".join(tasks),
                                         metrics=head, details=summary)
    prices = d / "prices.csv"
    prices.write_text("model,deployment,input,output\n"
                      f"{names['right']},standard,2.0,8.0\n{names['half']},standard,0.5,1.5\n"
                      "slowpoke,standard,0.1,0.3\ngpt-4o-mini,standard,0.15,0.6\n")
    if hostile is not None:
        s = dict(runs["half"].summary, model=hostile)
        st.add_benchmark(kind="quality", name="hostile", model=hostile, task=",".join(s["tasks"]),
                         metrics=headline(s), details=s)
        hs, hx = make_run(name="perf hostile", model=hostile, levels=(1, 4), n=40, seed=7, speed=1.2)
        store_benchmark(st, "perf", hs, hx)
        head, summary = embed_result(hostile, {"sts": ("sts", "cosine_spearman", 0.5, "1")})
        st.add_benchmark(kind="embed", name="hostile embed", model=hostile, task="sts", metrics=head, details=summary)
        with prices.open("a") as fh:
            fh.write(f'"{hostile.replace(chr(34), chr(34) * 2)}",standard,1.0,2.0\n')
    return {"path": path, "store": st, "names": names, "runs": runs, "perf": perf, "prices": prices,
            "table": load_table(prices), "embeds": embeds, "syspath": str(d)}
