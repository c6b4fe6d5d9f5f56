"""``vertex:MODEL``: Gemini's body at the Vertex AI URL with a bearer token (from the environment,
or from ``gcloud auth print-access-token``, asked again once on a 401), and the shipped calibration
rows scored against a loopback Vertex endpoint as through the OpenAI-compatible backend."""

from __future__ import annotations

import os
import stat

import pytest

from assay.errors import AssayError
from assay.models import resolve
from assay.models.vertex import VertexModel
from tests.helpers.provider_servers import (
    REPORT_KEYS,
    ProviderServer,
    calibration_judge,
    calibration_report,
    google_error,
    openai_reference,
)

# judge check on groundedness: its 120 calibration cases + 60 for the 30 context-words pairs
CALLS = 180

MSGS = [{"role": "user", "content": "Is 2+2=4?"}]


@pytest.fixture
def server():
    s = ProviderServer("vertex").start()
    yield s
    s.stop()


@pytest.fixture
def env(server, monkeypatch):
    for k in ("VERTEX_ACCESS_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    monkeypatch.setenv("VERTEX_BASE_URL", server.url)
    return server


def fake_gcloud(tmp_path, monkeypatch, tokens):
    """A ``gcloud`` on PATH that prints the next of ``tokens`` each time it is asked."""
    state = tmp_path / "n"
    state.write_text("0")
    exe = tmp_path / "gcloud"
    exe.write_text("#!/bin/sh\nn=$(cat %s)\necho $((n+1)) > %s\ncase $n in\n%s\nesac\n" % (
        state, state, "\n".join(f"{i}) echo {t};;" for i, t in enumerate(tokens))))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


async def test_the_url_and_the_token_from_the_environment(env, monkeypatch):
    monkeypatch.setenv("VERTEX_ACCESS_TOKEN", "ya29.env-token")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    m = VertexModel("gemini-2.5-flash")
    g = await m.generate(MSGS, max_tokens=5)
    req = env.calls[0]
    assert req["path"] == ("/v1/projects/proj-1/locations/europe-west4/publishers/google/models/"
                           "gemini-2.5-flash:generateContent")
    assert req["headers"]["authorization"] == "Bearer ya29.env-token"
    assert req["body"]["generationConfig"]["maxOutputTokens"] == 5 and g.text
    assert m.name == "vertex:gemini-2.5-flash" and "ya29" not in repr(m)
    await m.aclose()


async def test_a_gcloud_token_is_asked_again_once_after_a_401(env, tmp_path, monkeypatch):
    fake_gcloud(tmp_path, monkeypatch, ["ya29.old", "ya29.new"])
    env.push({"status": 401, "json": google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")})
    m = VertexModel("gemini-2.5-flash")
    assert (await m.generate(MSGS)).text
    assert [r["headers"]["authorization"] for r in env.calls] == ["Bearer ya29.old", "Bearer ya29.new"]
    await m.aclose()


def test_no_project_or_no_token_is_one_line(env, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(AssayError, match="no access token: set VERTEX_ACCESS_TOKEN"):
        import asyncio

        asyncio.run(VertexModel("gemini-2.5-flash").generate(MSGS))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    with pytest.raises(AssayError, match="GOOGLE_CLOUD_PROJECT is not set"):
        resolve("vertex:gemini-2.5-flash", cache=None)


async def test_the_calibration_rows_score_as_through_the_openai_compatible_backend(env, fake, monkeypatch):
    monkeypatch.setenv("VERTEX_ACCESS_TOKEN", "ya29.env-token")
    ref = await openai_reference(fake)
    env.judge(calibration_judge)
    got = await calibration_report("vertex:gemini-2.5-flash")
    assert {k: got[k] for k in REPORT_KEYS} == {k: ref[k] for k in REPORT_KEYS}
    assert got["errors"] == 0 and len(env.calls) == CALLS
