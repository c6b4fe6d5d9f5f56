"""``assay judge check --judge anthropic:… | gemini:… | vertex:… | bedrock:…`` as a user types it
(the command run in-process), each against its loopback endpoint: the shipped groundedness rows are
scored exactly as through the OpenAI-compatible backend with the same judge behind it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.helpers.provider_servers import REPORT_KEYS, ProviderServer, calibration_judge

# judge check on groundedness: its 120 calibration cases + 60 for the 30 context-words pairs
CALLS = 180


SPECS = {"anthropic": "anthropic:claude-haiku-4-5", "gemini": "gemini:gemini-2.5-flash",
         "vertex": "vertex:gemini-2.5-flash", "bedrock": "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0"}


def env_for(kind: str, url: str) -> dict[str, str]:
    return {"anthropic": {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url},
            "gemini": {"GEMINI_API_KEY": "k", "GEMINI_BASE_URL": url},
            "vertex": {"GOOGLE_CLOUD_PROJECT": "p", "VERTEX_ACCESS_TOKEN": "t", "VERTEX_BASE_URL": url},
            "bedrock": {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url}}[kind]


def check(judge: str, env: dict[str, str]) -> dict:
    from assay.cli.judge import app

    res = CliRunner().invoke(app, ["check", "--judge", judge, "--metrics", "groundedness", "--json", "--no-save", "-q"],
                             env={"ASSAY_CACHE": "off", **env})
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.fixture(scope="module")
def reference():
    from tests.helpers.fake_openai_server import FakeOpenAI

    fake = FakeOpenAI().start()
    fake.default = lambda req: {"content": calibration_judge(req["body"]["messages"][-1]["content"])}
    try:
        yield check(f"{fake.base_url}#fake-judge", {})["metrics"]["groundedness"]
    finally:
        fake.stop()


@pytest.mark.parametrize("kind", list(SPECS))
def test_judge_check_through_each_native_backend(kind, reference):
    server = ProviderServer(kind).start()
    try:
        server.judge(calibration_judge)
        rep = check(SPECS[kind], env_for(kind, server.url))
    finally:
        server.stop()
    g = rep["metrics"]["groundedness"]
    assert rep["judge"] == SPECS[kind] and g["cases"] == 120 and len(server.calls) == CALLS
    assert {k: g[k] for k in REPORT_KEYS} == {k: reference[k] for k in REPORT_KEYS}
    assert g["usage"]["calls"] == CALLS and g["usage"]["cost_usd"] > 0          # priced from the table
