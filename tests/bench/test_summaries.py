"""The typed benchmark summaries: a real run's summary of each kind (perf against the scripted
endpoint, quality on the shipped sample tasks, embed on shipped tasks with a control embedder)
reads into its model and writes back as the same JSON, byte for byte; summaries stored before
(fewer keys, blocks stored as null, extra keys) still read, with the defaults the readers assumed;
a newer version or another kind's schema is refused with its tag named."""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
import pytest

from assay.bench.embed.run import EmbedConfig, run_embed
from assay.bench.embed.stored import SCHEMA as EMBED_SCHEMA
from assay.bench.embed.summary import EmbedHeadline, EmbedSummary
from assay.bench.perf.run import PerfConfig, run_perf
from assay.bench.perf.stored import SCHEMA as PERF_SCHEMA
from assay.bench.perf.summary import PerfPoint, PerfSummary
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.stored import SCHEMA as QUALITY_SCHEMA
from assay.bench.quality.stored import headline
from assay.bench.quality.summary import QualityHeadline, QualitySummary
from assay.errors import AssayError
from tests.helpers.leaderboard_data import PIPELINE, TASKS, embed_result
from tests.helpers.perfdata import make_run

JSON_OPT = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY


def same_json(model, summary) -> None:
    """``summary.json`` written from the model is the file written from the runner's dict."""
    assert orjson.dumps(model.to_json(), option=JSON_OPT) == orjson.dumps(summary, option=JSON_OPT)


# -- perf ---------------------------------------------------------------------------------------
def test_a_real_perf_run_reads_and_writes_back_the_same(endpoint):
    ep = endpoint("--ttft", "0.02", "--itl", "0.004", "--tokenize")
    cfg = PerfConfig(endpoint=f"http://127.0.0.1:{ep.port}/v1", model="scripted", input_tokens=32, output_tokens=6,
                     warmup=1, requests=8, concurrency=[1, 2], slo={"itl": 0.5, "ttft": 1.0})
    run = asyncio.run(run_perf(cfg))
    rated = asyncio.run(run_perf(PerfConfig(endpoint=cfg.endpoint, model="scripted", input_tokens=32, output_tokens=6,
                                            warmup=0, requests=6, rates=[25.0], stream=False)))
    ep.stop()
    for s in (run.summary, rated.summary):
        m = PerfSummary.load(s)
        same_json(m, s)
        assert m.schema_ == s["schema"] == PERF_SCHEMA and m.model == "scripted"
        assert [p.requests.ok for p in m.points] == [p["requests"]["ok"] for p in s["points"]]
    m = PerfSummary.load(run.summary)
    p = m.points[1]
    assert p.concurrency == 2 and p.metric("ttft").mean == run.summary["points"][1]["metrics"]["ttft"]["mean"]
    assert p.metric("ttft").interval("p99") == run.summary["points"][1]["metrics"]["ttft"]["ci"]["p99"]
    assert list(p.slo) == ["itl", "ttft", "attainment", "goodput"]          # the objectives in the order given
    assert p.validity.valid is True and p.tokens.output_mean == 6 and m.settings.ignore_eos is True
    assert m.tokenizer.source == "server /tokenize" and m.cost is not None and m.cost.usd is None
    assert p.metric("no such figure").is_empty()
    r = PerfSummary.load(rated.summary).points[0]
    assert r.rate == 25.0 and r.concurrency is None and "ttft" not in r.metrics and r.validity.schedule_lag_ms


def test_perf_summaries_stored_before_still_read_with_the_defaults():
    s, _ = make_run(levels=(1, 4), n=20, track="t1")          # no client, notes, cost block, ci_method ...
    same_json(PerfSummary.load(s), s)
    old = {"schema": PERF_SCHEMA, "model": "m", "points": [
        {"concurrency": 1, "requests": {"sent": 10, "ok": 9, "failed": 1}, "tokens": {"input_mean": 800.0}},
        {"rate": 2, "requests": None, "validity": None, "metrics": {"ttft": {"mean": 0.2}}, "later": {"x": 1}}]}
    m = PerfSummary.load(old)
    a, b = m.points
    assert a.requests.failures == {} and a.tokens.disagreements == 0 and a.validity.valid is None
    assert a.validity.is_empty() and not a.tokens.is_empty() and a.metrics == {}
    assert b.requests.failed == 0 and b.requests.ok is None and b.metric("ttft").mean == 0.2
    assert b.rate == 2 and isinstance(b.rate, int) and b.model_extra == {"later": {"x": 1}}
    assert m.settings.input_tokens is None and m.repeat is None and m.cost is None and m.notes == []
    assert m.to_json()["points"][0] == old["points"][0]                   # what was read is what is written
    assert PerfSummary.load(None).points == [] and PerfSummary.load(m) is m
    assert PerfPoint.read({"concurrency": 4}).concurrency == 4 and PerfPoint.read("nonsense").is_empty()


def test_perf_schema_versions_and_damage_are_refused_by_name():
    with pytest.raises(AssayError, match=r"'assay\.bench\.perf/2', newer than this assay reads"):
        PerfSummary.load({"schema": "assay.bench.perf/2", "points": []})
    with pytest.raises(AssayError, match=r"not a perf summary: its schema is 'assay\.bench\.quality/1'"):
        PerfSummary.load({"schema": "assay.bench.quality/1"})
    with pytest.raises(AssayError, match="points"):
        PerfSummary.load({"schema": PERF_SCHEMA, "points": "none"})
    with pytest.raises(AssayError, match="JSON object"):
        PerfSummary.load([1, 2])
    assert PerfSummary.load_or_empty({"points": "none"}).points == []
    assert PerfSummary.load({"points": []}).schema_ == PERF_SCHEMA == PerfSummary.tag()   # no tag: version 1


# -- quality ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quality_run(tmp_path_factory):
    import sys
    import uuid

    d = tmp_path_factory.mktemp("quality-summary")
    mod = f"sumpipe_{uuid.uuid4().hex[:8]}"
    (d / f"{mod}.py").write_text(PIPELINE.format(tasks=str(TASKS)))
    sys.path.insert(0, str(d))
    try:
        tasks = f"{TASKS / 'arithmetic.yaml'},{TASKS / 'science_mc.yaml'}"
        run = asyncio.run(run_quality(QualityConfig(model=f"python:{mod}:half", tasks=tasks, limit=4, name="half"),
                                      store=str(d / "s.db"), out=d / "out"))
        yield run, d / "out"
    finally:
        sys.path.remove(str(d))


def test_a_real_quality_run_reads_and_writes_back_the_same(quality_run):
    run, out = quality_run
    s = run.summary
    m = QualitySummary.load(s)
    same_json(m, s)
    assert (out / "summary.json").read_bytes() == orjson.dumps(m.to_json(), option=JSON_OPT)
    assert m.schema_ == QUALITY_SCHEMA and m.ref == run.ref and m.run_id == run.run_id and m.index.value == s["index"]["value"]
    assert list(m.tasks) == list(s["tasks"])
    for name, t in m.tasks.items():
        raw = s["tasks"][name]
        assert t.primary == raw["primary"] and t.primary_value == raw["primary_value"]
        assert t.metrics[t.primary].mean == raw["metrics"][raw["primary"]]["mean"]
        assert t.task_hash == raw["task_hash"] and t.modes == raw["modes"]
    h = QualityHeadline.read(headline(s))
    assert h.quality_index == s["index"]["value"] and set(h.tasks) == set(s["tasks"])
    assert QualityHeadline.read(None).tasks == {} and QualityHeadline.read({"tasks": 3}).is_empty()


def test_quality_summaries_stored_before_still_read_with_the_defaults():
    old = {"tasks": {"arith": {"primary": "acc", "metrics": {"acc": {"mean": 0.5, "ci95_low": 0.1}}, "notes": None}},
           "index": None, "schema": QUALITY_SCHEMA, "old_key": 1}
    m = QualitySummary.load(old)
    t = m.tasks["arith"]
    assert t.notes == [] and t.modes == [] and t.unsupported == [] and t.errors is None and t.items is None
    assert t.metrics["acc"].ci95_high is None and m.index.value is None and m.index.is_empty()
    assert m.model_extra == {"old_key": 1} and m.calls is None
    with pytest.raises(AssayError, match=r"'assay\.bench\.quality/7', newer"):
        QualitySummary.load({"schema": "assay.bench.quality/7"})
    with pytest.raises(AssayError, match="not a quality summary"):
        QualitySummary.load({"schema": PERF_SCHEMA})


# -- embed --------------------------------------------------------------------------------------
class Control:
    """An embedder whose vectors are drawn from a generator seeded by the text; it fails on the
    texts that hold ``fail_on``."""

    name = "control:seeded"
    embed_batch_size = 64

    def __init__(self, fail_on: str | None = None):
        self.fail_on = fail_on

    async def embed(self, texts, *, input_type=None):
        from assay.models.base import ModelCallError

        if self.fail_on and any(self.fail_on in t for t in texts):
            raise ModelCallError("HTTP 500 from the control", kind="server")
        out = []
        for t in texts:
            v = np.random.default_rng(abs(hash(t)) % (2 ** 32)).standard_normal(16)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


def test_a_real_embed_run_reads_and_writes_back_the_same(tmp_path):
    run = asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts,retrieval", name="c"), store=False,
                                model=Control(), out=tmp_path))
    s = run.summary
    m = EmbedSummary.load(s)
    same_json(m, s)
    assert (tmp_path / "summary.json").read_bytes() == orjson.dumps(m.to_json(), option=JSON_OPT)
    assert m.schema_ == EMBED_SCHEMA and list(m.tasks) == ["sts", "retrieval"] and m.ref is None
    sts = m.tasks["sts"]
    assert sts.main_score == s["tasks"]["sts"]["main_score"] and sts.value == s["tasks"]["sts"]["value"]
    assert sts.scores == s["tasks"]["sts"]["scores"] and sts.error is None
    from assay.bench.embed.stored import headline as embed_headline

    h = EmbedHeadline.read(embed_headline(s))
    assert h.tasks["sts"].metric == sts.main_score and h.tasks["retrieval"].value == m.tasks["retrieval"].value


def test_an_embed_task_that_failed_keeps_its_error(tmp_path):
    from assay.bench.embed.tasks import load_embed_tasks

    retrieval = load_embed_tasks("retrieval")[0]
    word = next(iter(retrieval.texts()))[0]
    run = asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts,retrieval"), store=False,
                                model=Control(fail_on=word)))
    m = EmbedSummary.load(run.summary)
    same_json(m, run.summary)
    assert m.tasks["retrieval"].error.startswith("embedding failed") and m.tasks["retrieval"].value is None


def test_embed_summaries_stored_before_still_read_with_the_defaults():
    _, old = embed_result("m", {"sts": ("sts", "cosine_spearman", 0.8, "1")})     # no note, embed_s, error ...
    m = EmbedSummary.load(old)
    assert m.to_json() == old              # key for key (an extra key is written after the named ones)
    assert m.note is None and m.embed_s is None and m.tasks["sts"].error is None
    assert m.model_extra == {"model_kind": "openai"}
    assert EmbedSummary.load({"tasks": None}).tasks == {}
    with pytest.raises(AssayError, match=r"'assay\.bench\.embed/2', newer"):
        EmbedSummary.load({"schema": "assay.bench.embed/2"})


# -- the kind table -----------------------------------------------------------------------------
def test_each_kind_row_names_its_summary_whose_tag_is_the_kinds_schema():
    from assay.bench.kinds import get_kind

    for name, model in (("perf", PerfSummary), ("quality", QualitySummary), ("embed", EmbedSummary)):
        kind = get_kind(name)
        assert kind.summary is model and model.tag() == kind.schema
        read = kind.read({"schema": kind.schema, "model": "m"})
        assert isinstance(read, model) and read.model == "m"
        assert kind.read({"schema": "assay.bench.other/1", "model": "m"}).model is None   # does not read: empty
    with pytest.raises(AssayError, match="does not read"):
        get_kind("quality").check({"schema": QUALITY_SCHEMA, "tasks": [1, 2]})
