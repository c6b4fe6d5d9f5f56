"""`assay bench quality` on a code task where one answer's process is killed every time it runs: the
sample is retried once, then reported as killed (a count in the summary, a line in the report) and
kept out of pass@k, which is computed over the samples that were judged; the memory limit in force is
in the summary and the report."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import orjson
import pytest

from assay.bench.quality.run import QualityConfig, run_quality

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"

PIPELINE = '''
import json, re
from pathlib import Path
CODE = {{}}
for line in (Path({tasks!r}) / "code.jsonl").read_text().splitlines():
    if line.strip():
        row = json.loads(line)
        CODE[row["entry_point"]] = row["canonical_solution"]

def answer(prompt: str) -> str:
    name = re.findall(r"^def (\\w+)\\(", prompt, re.M)[-1]
    if name == "digit_sum":          # killed whenever the tests call it, as a host's OOM killer would
        return "    import os, signal\\n    os.kill(os.getpid(), signal.SIGKILL)\\n"
    if name == "count_vowels":       # plainly wrong: a judged failure
        return "    return None\\n"
    return CODE[name]
'''


@pytest.fixture
def pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"kpipe_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PIPELINE.format(tasks=str(TASKS)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_killed_samples_are_retried_counted_and_kept_out_of_pass_at_k(pipe: str, tmp_path: Path) -> None:
    cfg = QualityConfig(model=f"python:{pipe}:answer", tasks=str(TASKS / "code.yaml"), sandbox_timeout=5.0,
                        sandbox_memory_mb=256)
    run = asyncio.run(run_quality(cfg, store=None, out=tmp_path / "out"))
    task = run.summary["tasks"]["code"]
    # 12 items: one killed twice (not judged), one wrong, ten right: pass@1 over the 11 judged
    assert task["metrics"]["pass@1"]["evaluated"] == 11
    assert task["metrics"]["pass@1"]["mean"] == pytest.approx(10 / 11)
    assert task["killed"] == 1
    assert any(n.startswith("1 sample(s) killed twice, not judged (first: killed by SIGKILL)") for n in task["notes"])
    killed = [i for i in run.items if i["sandbox"][0]["status"] == "killed"]
    assert len(killed) == 1
    entry = killed[0]["sandbox"][0]
    assert entry["attempts"] == 2 and entry["retried"] == "killed: killed by SIGKILL"
    assert killed[0]["killed"] == 1 and killed[0]["passed"] == 0
    wrong = [i for i in run.items if i["sandbox"][0]["status"] == "failed"]
    assert len(wrong) == 1 and wrong[0]["sandbox"][0].get("attempts", 1) == 1
    assert len(run.items) == 12
    # the memory limit in force: in the summary, on every sample, and in the report's sandbox line
    assert run.summary["memory_limit"] in ("cgroup", "rlimit")
    assert {i["sandbox"][0]["limit"] for i in run.items} == {run.summary["memory_limit"]}
    stored = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert stored["tasks"]["code"]["killed"] == 1 and stored["memory_limit"] == run.summary["memory_limit"]
    # the typed summary reads it and writes it back byte for byte (the new keys in their places)
    from assay.bench.quality.summary import QualitySummary

    opt = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    model = QualitySummary.load(run.summary)
    assert model.tasks["code"].killed == 1 and model.memory_limit == run.summary["memory_limit"]
    assert (tmp_path / "out" / "summary.json").read_bytes() == orjson.dumps(model.to_json(), option=opt)

    from assay.cli.bench.quality import render_quality
    from assay.cli.common import out

    with out.capture() as cap:
        render_quality(run.summary)
    text = " ".join(cap.get().split())
    assert "code: 1 sample(s) killed twice, not judged" in text
    assert f"memory limit: {run.summary['memory_limit']}" in text
