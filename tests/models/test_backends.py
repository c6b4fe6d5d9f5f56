"""The backend table (:mod:`assay.models.backends`): the spec grammar, the accepted forms and the
roles' choices all come from its rows; a package installed beside assay adds a backend through the
``assay.backends`` entry-point group (here a real distribution written to a temporary folder on
``sys.path``, found by :mod:`importlib.metadata` as an installed one is)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from assay.errors import AssayError
from assay.models import ACCEPTED_FORMS, ROLES, LimitedModel, ModelSpec, ModelSpecError, parse_model_spec, resolve
from assay.models.backends import BUILTIN, ENTRY_POINT_GROUP, Backend, find_backend, load_attribute, plugin_backends
from assay.models.spec import KINDS, accepted_forms

TOY_MODULE = '''
from assay.models.backends import Backend
from assay.models.base import Generation, TokenUsage


class ToyModel:
    """Answers every question with its name, reversed."""

    default_concurrency = 3

    def __init__(self, model, *, temperature=None, api_key=None):
        self.model, self.temperature, self.api_key = model, temperature, api_key
        self.name = f"toy:{model}"

    async def generate(self, messages, **kw):
        return Generation(text=self.model[::-1], usage=TokenUsage(2, 1))


class ToyEmbedder:
    name = "toy-embedder"

    def __init__(self, model):
        self.model = model

    async def embed(self, texts, *, input_type=None):
        import numpy as np
        return np.ones((len(texts), 4), dtype=np.float32)


BACKEND = Backend("toy", "toy:MODEL (e.g. toy:abc)", chat="toy_assay_backend:ToyModel",
                  embed="toy_assay_backend:ToyEmbedder", roles=("judge", "embedder", "target"),
                  role_env={"target": {"api_key": "TOY_TARGET_KEY"}})
SHADOW = Backend("openai", "openai:SHADOW", chat="toy_assay_backend:ToyModel")
NOT_A_ROW = object()
'''


def install_plugin(root: Path, entry_points: str) -> None:
    """A distribution ``toy-assay-backend`` in ``root``: its module and its dist-info."""
    (root / "toy_assay_backend.py").write_text(TOY_MODULE)
    info = root / "toy_assay_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-assay-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + textwrap.dedent(entry_points))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy backend installed (sys.path and sys.modules restored afterwards)."""
    install_plugin(tmp_path, "toy = toy_assay_backend:BACKEND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_assay_backend", raising=False)
    yield tmp_path
    sys.modules.pop("toy_assay_backend", None)


# -- the table ------------------------------------------------------------------------------------
def test_the_built_in_rows_are_the_grammar():
    native = ("anthropic", "gemini", "vertex", "bedrock", "litellm")
    assert KINDS == ("openai", "azure", "http", "local", "embedded", *native) == tuple(b.kind for b in BUILTIN)
    assert ACCEPTED_FORMS == tuple(b.form for b in BUILTIN if b.form)
    assert [b.kind for b in BUILTIN if b.http] == ["openai", "azure", "http", *native]
    assert [b.kind for b in BUILTIN if "target" in b.roles] == ["http"]
    assert ROLES["target"].kinds == ("http",) and ROLES["judge"].kinds == KINDS


def test_every_built_in_builder_names_a_real_callable():
    for row in BUILTIN:
        for target in filter(None, (row.chat, row.embed)):
            assert callable(load_attribute(target)), target


def test_a_row_is_checked_when_made():
    with pytest.raises(ValueError, match="syntax must be one of"):
        Backend("x", syntax="scheme", chat="m:C")
    with pytest.raises(ValueError, match="argument must be 'model' or 'path'"):
        Backend("x", argument="url", chat="m:C")
    with pytest.raises(ValueError, match="names no class to build"):
        Backend("x")


def test_a_built_in_spec_reads_no_entry_point(monkeypatch):
    def refuse(**kw):
        raise AssertionError("entry points read for a built-in spec")

    monkeypatch.setattr("importlib.metadata.entry_points", refuse)
    assert parse_model_spec("openai:gpt-4o-mini").kind == "openai"
    assert find_backend("local") is not None


def test_with_no_plugin_installed_the_errors_list_the_built_in_forms():
    assert plugin_backends() == () and accepted_forms() == ACCEPTED_FORMS
    with pytest.raises(ModelSpecError) as ei:
        parse_model_spec("toy:abc")
    assert str(ei.value) == f"unknown judge 'toy:abc'; accepted forms: {'; '.join(ACCEPTED_FORMS)}"


def test_an_unknown_kind_cannot_be_built():
    with pytest.raises(ModelSpecError, match="unknown judge kind 'toy'"):
        ModelSpec("toy", model="abc").build()


# -- a backend from another package ---------------------------------------------------------------
async def test_a_plugin_backend_resolves_end_to_end(toy, tmp_path, monkeypatch):
    assert parse_model_spec(" Toy: abc ") == ModelSpec("toy", model="abc", spec="Toy: abc")
    assert accepted_forms() == (*ACCEPTED_FORMS, "toy:MODEL (e.g. toy:abc)")
    judge = resolve("toy:abc", role="judge", cache=tmp_path / "calls.sqlite", temperature=0.5)
    assert isinstance(judge, LimitedModel) and type(judge.model).__name__ == "ToyModel"
    assert (judge.name, judge.model.temperature, judge.limiter.concurrency) == ("toy:abc", 0.5, 3)
    assert "timeout" not in vars(judge.model)          # not an HTTP row: no timeout passed
    gen = await judge.generate([{"role": "user", "content": "hi"}], max_tokens=5)
    assert gen.text == "cba" and judge.stats.calls == 1
    again = await judge.generate([{"role": "user", "content": "hi"}], max_tokens=5)
    assert again.cached and judge.stats.cache_hits == 1
    await judge.aclose()


async def test_a_plugin_row_says_which_roles_and_what_they_read_from_the_environment(toy, monkeypatch):
    monkeypatch.setenv("TOY_TARGET_KEY", "k-1")
    target = resolve("toy:abc", role="target")
    assert (target.model.api_key, target.limiter.concurrency, target.cache) == ("k-1", 64, None)
    assert resolve("toy:abc", role="judge", cache=None).model.api_key is None
    embedder = resolve("toy:abc", role="embedder", cache=None)
    assert type(embedder.model).__name__ == "ToyEmbedder"
    assert (await embedder.embed(["a", "b"])).shape == (2, 4)
    with pytest.raises(AssayError, match="a simulator cannot be 'toy'"):
        resolve("toy:abc", role="simulator")
    with pytest.raises(ModelSpecError, match="judge 'toy:': no model named; accepted forms: .*toy:MODEL"):
        parse_model_spec("toy:")


def test_a_plugin_cannot_replace_a_built_in_and_a_broken_one_is_skipped(tmp_path, monkeypatch, caplog):
    install_plugin(tmp_path, """\
        shadow = toy_assay_backend:SHADOW
        odd = toy_assay_backend:NOT_A_ROW
        gone = toy_assay_backend:NO_SUCH_NAME
        toy = toy_assay_backend:BACKEND
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_assay_backend", raising=False)
    try:
        rows = plugin_backends()
        assert [r.kind for r in rows] == ["toy"]
        assert find_backend("openai") is next(b for b in BUILTIN if b.kind == "openai")
        assert parse_model_spec("openai:gpt-4o").kind == "openai"
        log = caplog.text
        assert "'shadow' reuses the built-in kind 'openai'" in log
        assert "'odd' is a object, not an assay.models.backends.Backend" in log
        assert "'gone' did not load: AttributeError" in log
    finally:
        sys.modules.pop("toy_assay_backend", None)
