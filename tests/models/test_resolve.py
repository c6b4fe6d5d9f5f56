"""One spec grammar (``parse_model_spec``) and one way to a ready model (``resolve``), with each
role's defaults; one target loader. No network beyond the loopback fake endpoint."""

from __future__ import annotations

import os
import textwrap

import pytest

import assay.models.embedded
from assay.engine.evaluate import resolve_judge
from assay.engine.target import EndpointApp, Target, load_target
from assay.errors import AssayError
from assay.models import (
    ACCEPTED_FORMS,
    ROLES,
    JudgeSpec,
    JudgeSpecError,
    LimitedModel,
    Limiter,
    ModelSpec,
    ModelSpecError,
    build_judge,
    parse_judge_spec,
    parse_model_spec,
    resolve,
    resolve_spec,
)
from assay.models.base import Generation, TokenUsage
from assay.simulate.conversation import resolve_model

FORMS = "; ".join(ACCEPTED_FORMS)


# -- the grammar ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,expected", [
    ("openai:gpt-4o-mini", ModelSpec("openai", model="gpt-4o-mini", spec="openai:gpt-4o-mini")),
    (" OpenAI: gpt-4o ", ModelSpec("openai", model="gpt-4o", spec="OpenAI: gpt-4o")),
    ("azure:my-deployment", ModelSpec("azure", model="my-deployment", spec="azure:my-deployment")),
    ("http://127.0.0.1:8000/v1#qwen2.5-7b",
     ModelSpec("http", model="qwen2.5-7b", base_url="http://127.0.0.1:8000/v1", spec="http://127.0.0.1:8000/v1#qwen2.5-7b")),
    ("HTTPS://host.example/v1/#org/model:tag",
     ModelSpec("http", model="org/model:tag", base_url="HTTPS://host.example/v1", spec="HTTPS://host.example/v1/#org/model:tag")),
    ("http://localhost:11434/v1", ModelSpec("http", base_url="http://localhost:11434/v1", spec="http://localhost:11434/v1")),
    ("http://localhost:11434/v1#", ModelSpec("http", base_url="http://localhost:11434/v1", spec="http://localhost:11434/v1#")),
    ("local:/models/any.gguf", ModelSpec("local", path="/models/any.gguf", spec="local:/models/any.gguf")),
    ("embedded", ModelSpec("embedded", spec="embedded")),
    (" Embedded ", ModelSpec("embedded", spec="embedded")),
])
def test_every_form_parses(spec, expected):
    assert parse_model_spec(spec) == expected
    assert str(parse_model_spec(spec)) == expected.spec


def test_a_local_path_expands_the_home_folder():
    assert parse_model_spec("local:~/m.gguf").path == os.path.expanduser("~/m.gguf")


@pytest.mark.parametrize("spec,message", [
    ("", f"empty judge spec; accepted forms: {FORMS}"),
    ("   ", f"empty judge spec; accepted forms: {FORMS}"),
    ("gpt-4o", f"unknown judge 'gpt-4o'; accepted forms: {FORMS}"),
    ("cohere:command", f"unknown judge 'cohere:command'; accepted forms: {FORMS}"),
    ("default", f"unknown judge 'default'; accepted forms: {FORMS}"),
    ("openai:", f"judge 'openai:': no model named; accepted forms: {FORMS}"),
    ("azure: ", f"judge 'azure: ': no deployment named; accepted forms: {FORMS}"),
    ("local:", f"judge 'local:': no model file named; accepted forms: {FORMS}"),
    ("ftp://x/v1#m", f"unknown judge 'ftp://x/v1#m'; accepted forms: {FORMS}"),
    ("http://#m", f"judge 'http://#m': no host in the URL; accepted forms: {FORMS}"),
])
def test_bad_forms_are_one_clear_error(spec, message):
    with pytest.raises(ModelSpecError) as ei:
        parse_model_spec(spec)
    assert str(ei.value) == message
    assert isinstance(ei.value, AssayError)


def test_the_judge_names_are_the_same_parser():
    assert parse_judge_spec is parse_model_spec and JudgeSpec is ModelSpec and JudgeSpecError is ModelSpecError


# -- resolve: one backend stand-in ----------------------------------------------------------------
class Stub:
    """A ChatModel stand-in that is never called."""

    def __init__(self, name: str = "stub", default_concurrency: int = 2, **kw):
        self.name, self.default_concurrency, self.kw = name, default_concurrency, kw

    async def generate(self, messages, **kw) -> Generation:  # pragma: no cover - never called
        return Generation(text="", usage=TokenUsage())

    async def aclose(self) -> None:
        pass


@pytest.fixture
def no_embedded(monkeypatch):
    """The embedded model replaced by a stub (``ModelSpec.build`` imports it at call time)."""
    made = []

    def fake(**kw):
        made.append(kw)
        return Stub(name="embedded-stub", **kw)

    monkeypatch.setattr(assay.models.embedded, "embedded_judge", fake)
    return made


@pytest.fixture
def cache_at(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    monkeypatch.setenv("ASSAY_CACHE", str(path))
    return path


def test_role_defaults_table():
    assert set(ROLES) == {"judge", "simulator", "target", "model", "embedder"}
    assert (ROLES["model"].concurrency, ROLES["model"].max_attempts, ROLES["model"].cache, ROLES["model"].default) \
        == (None, 4, True, None)
    assert (ROLES["judge"].concurrency, ROLES["judge"].max_attempts, ROLES["judge"].cache) == (None, 6, True)
    assert (ROLES["target"].concurrency, ROLES["target"].max_attempts, ROLES["target"].cache) == (64, 4, False)


def test_judge_defaults(cache_at, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://x.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    j = resolve("http://127.0.0.1:9/v1#m")
    assert isinstance(j, LimitedModel)
    assert (j.limiter.concurrency, j.limiter.retry.max_attempts, j.limiter.timeout) == (8, 6, 120.0)
    assert j.cache is not None and j.cache.path == cache_at
    assert j.name == "http://127.0.0.1:9/v1#m" and j.model.timeout == 120.0
    assert resolve("openai:gpt-4o-mini", role="judge").limiter.concurrency == 32
    assert resolve("azure:dep", role="judge").limiter.concurrency == 16
    k = resolve("http://127.0.0.1:9/v1#m", concurrency=3, max_attempts=2, timeout=5, rpm=60, cache=None)
    assert (k.limiter.concurrency, k.limiter.retry.max_attempts, k.limiter.timeout, k.cache) == (3, 2, 5, None)
    assert k.model.timeout == 5  # the HTTP backend's own timeout follows (a longer one is not cut at 120 s)
    assert resolve("http://127.0.0.1:9/v1#m", cache=cache_at.parent / "other.sqlite").cache.path.name == "other.sqlite"
    assert resolve("http://127.0.0.1:9/v1#m", cache=None, price="0.5,1.5").price == (0.5, 1.5)


def test_judge_builds_what_build_judge_builds(cache_at):
    a, b = resolve("http://127.0.0.1:9/v1#m"), build_judge("http://127.0.0.1:9/v1#m")
    assert (a.name, a.limiter.concurrency, a.limiter.retry, a.cache.path) == (
        b.name, b.limiter.concurrency, b.limiter.retry, b.cache.path)


def test_a_limited_model_comes_back_as_it_is_and_a_backend_is_wrapped(cache_at):
    given = LimitedModel(Stub(), Limiter(concurrency=5))
    for role in ROLES:
        assert resolve(given, role=role, concurrency=99) is given
    wrapped = resolve(Stub(default_concurrency=2), role="judge")
    assert wrapped.limiter.concurrency == 2 and wrapped.cache is not None
    assert resolve(Stub(), role="target").limiter.concurrency == 64


def test_a_parsed_spec_is_accepted(cache_at):
    assert resolve(parse_model_spec("http://127.0.0.1:9/v1#m"), cache=None).name == "http://127.0.0.1:9/v1#m"


def test_no_spec_is_the_embedded_model_for_judges_and_simulators(no_embedded, cache_at):
    j = resolve(None, role="judge")
    assert j.name == "embedded-stub" and j.limiter.concurrency == 2 and j.cache is not None
    assert resolve("embedded", role="judge").name == "embedded-stub"
    for spec in (None, "", "  ", "default", "Default", "embedded"):
        s = resolve(spec, role="simulator")
        assert s.name == "embedded-stub" and s.limiter.retry.max_attempts == 6 and s.cache is not None
    assert no_embedded and all(kw == {} for kw in no_embedded)


def test_a_judge_spec_must_not_be_blank():
    with pytest.raises(AssayError, match="empty judge spec"):
        resolve("", role="judge")
    with pytest.raises(AssayError, match="unknown judge 'default'"):
        resolve("default", role="judge")


def test_simulator_errors_keep_their_words():
    with pytest.raises(AssayError, match="unknown simulator 'bogus:x'"):
        resolve_model("bogus:x")


def test_target_defaults(cache_at, monkeypatch):
    monkeypatch.setenv("ASSAY_TARGET_API_KEY", "sk-target")
    t = resolve("http://127.0.0.1:9/v1#m", role="target", timeout=7.5)
    assert (t.limiter.concurrency, t.limiter.retry.max_attempts, t.cache) == (64, 4, None)
    assert t.limiter.timeout == 7.5 and t.model.timeout == 7.5  # a target's timeout reaches the backend too
    assert resolve("http://127.0.0.1:9/v1#m", role="target", concurrency=4).limiter.concurrency == 4


async def test_a_target_sends_the_target_key(fake, monkeypatch):
    monkeypatch.setenv("ASSAY_TARGET_API_KEY", "sk-target")
    t = resolve(f"{fake.base_url}#fake-judge", role="target")
    await t.generate([{"role": "user", "content": "hi"}], max_tokens=5)
    await t.aclose()
    assert fake.chat_requests[-1]["headers"]["authorization"] == "Bearer sk-target"


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "azure:d", "local:/m.gguf", "embedded"])
def test_a_target_must_be_an_endpoint(spec):
    with pytest.raises(AssayError) as ei:
        resolve(spec, role="target")
    assert str(ei.value) == f"target {spec!r}: an endpoint target must look like http://HOST:PORT/v1#MODEL"
    with pytest.raises(AssayError, match="needs a model spec"):
        resolve_spec(None, role="target")


def test_an_unknown_role_is_an_error():
    with pytest.raises(AssayError, match="unknown model role 'bench'"):
        resolve("http://127.0.0.1:9/v1#m", role="bench")


# -- the callers use it ---------------------------------------------------------------------------
def test_endpoint_app_resolves_as_a_target(monkeypatch):
    monkeypatch.setenv("ASSAY_TARGET_API_KEY", "sk-t")
    app = EndpointApp("http://127.0.0.1:9/v1#m", timeout=30.0, max_attempts=3)
    llm = app._llm()
    assert (llm.limiter.concurrency, llm.limiter.retry.max_attempts, llm.limiter.timeout, llm.cache) == (64, 3, 30.0, None)
    assert llm.model.timeout == 30.0 and llm is app._llm()
    assert (app.base_url, app.model_name, app.target_name) == ("http://127.0.0.1:9/v1", "m", "http://127.0.0.1:9/v1#m")


def test_resolve_judge_uses_the_judge_role(no_embedded, cache_at, monkeypatch):
    from assay.metrics.base import get_metric

    coherence, violence = get_metric("coherence"), get_metric("violence")
    monkeypatch.delenv("ASSAY_JUDGE", raising=False)
    assert resolve_judge(None, [get_metric("f1_score")]) == (None, None)
    assert resolve_judge(None, [violence]) == (None, "embedded safety classifier")
    # no judge named anywhere: no judge model (embedded scorers where measured, the rest skipped)
    assert resolve_judge(None, [coherence], concurrency=3) == (None, "no judge: embedded scorers where measured")
    model, source = resolve_judge("embedded", [coherence], concurrency=3)    # the small LLM, by name only
    assert (model.name, source, model.limiter.concurrency) == ("embedded-stub", "given", 3)
    monkeypatch.setenv("ASSAY_JUDGE", "http://127.0.0.1:9/v1#env")
    model, source = resolve_judge(None, [coherence])
    assert (model.name, source, model.limiter.concurrency) == ("http://127.0.0.1:9/v1#env", "$ASSAY_JUDGE", 8)
    model, source = resolve_judge("http://127.0.0.1:9/v1#given", [coherence])
    assert (model.name, source) == ("http://127.0.0.1:9/v1#given", "given")
    given = LimitedModel(Stub(), Limiter(concurrency=5))
    assert resolve_judge(given, [coherence], concurrency=9) == (given, "given")


# -- one target loader ----------------------------------------------------------------------------
def test_load_target_imports_module_function_from_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "resolve_app_mod.py").write_text(textwrap.dedent("""
        def chat(query):
            return "echo " + query
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    fn = load_target("resolve_app_mod:chat")
    assert fn("hi") == "echo hi"
    assert Target("resolve_app_mod:chat").name == "chat"


def test_load_target_reads_an_endpoint():
    app = load_target(" http://127.0.0.1:9/v1#m ")
    assert isinstance(app, EndpointApp) and app.target_name == "http://127.0.0.1:9/v1#m"
    assert Target("http://127.0.0.1:9/v1#m").name == "http://127.0.0.1:9/v1#m"


@pytest.mark.parametrize("spec,message", [
    ("nocolon", "--target 'nocolon' must look like module:function"),
    (":fn", "--target ':fn' must look like module:function"),
    ("no_such_module_xyz:fn", "--target: cannot import 'no_such_module_xyz': ModuleNotFoundError"),
    ("os:no_such_function", "--target: module 'os' has no attribute 'no_such_function'"),
    ("ftp://nowhere", "unknown target 'ftp://nowhere'"),
])
def test_load_target_errors(spec, message, monkeypatch):
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    with pytest.raises(AssayError) as ei:
        load_target(spec)
    assert str(ei.value).startswith(message)


def test_the_cli_loader_is_the_engine_loader(monkeypatch):
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    from assay.cli.common import load_target as cli_load

    assert isinstance(cli_load("http://127.0.0.1:9/v1#m"), EndpointApp)
    assert cli_load("os:getcwd") is os.getcwd
