"""`assay eval` on agent data, as a user runs it: Azure agent rows read, the plan, the code
metrics' values and the agent judges asked with the agent's turn, through a judge endpoint."""

import json
from pathlib import Path

from tests.helpers.cli import run_assay

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "agents"
AGENT_JUDGES = ("tool_call_accuracy", "intent_resolution", "task_adherence", "response_completeness")


def run(*args):
    p = run_assay(args)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "rows.jsonl").read_text(encoding="utf-8").splitlines()]


def test_azure_agent_rows_run_end_to_end_without_a_judge(tmp_path):
    out = tmp_path / "out"
    p = run("eval", str(FIXTURES / "azure_agent.jsonl"), "--metrics", "auto", "--store", "off", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "  agent_steps: 4 rows" in p.stdout and "  tool_errors: 4 rows" in p.stdout
    got = rows(out)
    assert len(got) == 4
    # the weather row: two tool calls, both answered, three assistant messages
    assert got[0]["outputs.agent_steps.agent_steps"] == 3
    assert got[0]["outputs.tool_errors.tool_errors"] == 0
    assert [c["name"] for c in got[0]["inputs.tool_calls"]] == ["get_forecast", "convert_temperature"]
    # one row's tool failed: the code metric counts it and the row fails its threshold of 0
    failed = [r for r in got if r["outputs.tool_errors.tool_errors"]]
    assert len(failed) == 1 and failed[0]["outputs.tool_errors.tool_errors_result"] == "fail"
    # no judge: the agent judges say so on every row, never a made-up score
    for name in AGENT_JUDGES:
        assert all(r[f"outputs.{name}.{name}_status"] == "skipped" for r in got), name


def test_agent_judges_see_the_agent_turn(tmp_path, fake):
    fake.default = {"content": json.dumps({"score": 4, "reason": "the calls fit the request", "explanation": "ok"})}
    out = tmp_path / "out"
    p = run("eval", str(FIXTURES / "azure_agent.jsonl"), "--metrics", ",".join(AGENT_JUDGES[:2]),
            "--judge", f"{fake.base_url}#fake-judge", "--store", "off", "--out", str(out), "-q")
    assert p.returncode == 0, p.stderr
    got = rows(out)
    assert all(r["outputs.intent_resolution.intent_resolution"] == 4 for r in got)
    assert all(r["outputs.tool_call_accuracy.tool_call_accuracy_status"] == "completed" for r in got)
    prompts = [json.dumps(r["body"]["messages"]) for r in fake.chat_requests]
    # the judge is shown the tool calls with their arguments and results, not only the final answer
    assert any("get_forecast" in t and "Lisbon" in t and "rain_probability" in t for t in prompts)
