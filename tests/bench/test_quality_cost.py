"""What stored quality runs cost (issue 28 item 4): `assay bench cost --runs` lists each quality run
once (its benchmark; the evaluation run holding its items is not a second row) and prices it from
the tokens the model under test spent, or says "no price: <reason>"."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.bench.cost import stored_costs
from assay.bench.quality.run import QualityConfig, run_quality
from assay.models.price_table import load_table
from assay.store import Store

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"
PRICES = "prices:\n  - {model: served-model, input: 2.0, output: 8.0, source: our contract}\n"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake) -> dict:
    monkeypatch.setenv("ASSAY_CACHE", "off")
    name = f"qcost_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def answer(prompt):\n    return '#### 7'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    fake.models = ["served-model"]
    fake.default = {"content": "#### 7"}           # usage: 100 prompt + 10 completion tokens a call
    db = str(tmp_path / "s.db")
    tasks = str(TASKS / "arithmetic.yaml")
    served = asyncio.run(run_quality(QualityConfig(model=f"{fake.base_url}#served-model", tasks=tasks, limit=5,
                                                   api="chat", name="served"), store=db))
    piped = asyncio.run(run_quality(QualityConfig(model=f"python:{name}:answer", tasks=tasks, limit=5, name="piped"),
                                    store=db))
    (tmp_path / "prices.yaml").write_text(PRICES)
    return {"db": db, "served": served, "piped": piped, "prices": tmp_path / "prices.yaml"}


def test_each_quality_run_is_listed_once_and_priced(setup: dict) -> None:
    st = Store(setup["db"])
    costs = stored_costs(st, load_table(setup["prices"]))
    st.close()
    assert len(costs) == 2 and {c["kind"] for c in costs} == {"quality"}
    by = {c["name"]: c for c in costs}
    s = by["served"]
    assert (s["input_tokens"], s["output_tokens"]) == (500, 50)
    assert s["cost_usd"] == pytest.approx((500 * 2.0 + 50 * 8.0) / 1e6) and s["no_price"] is None
    p = by["piped"]
    assert p["cost_usd"] is None and p["no_price"].startswith("no price: ") and "pipeline" in p["no_price"]


def test_cli_lists_each_quality_run_once_with_its_price_or_why_not(setup: dict) -> None:
    from assay.cli.main import app

    r = CliRunner().invoke(app, ["bench", "cost", "--runs", "--prices", str(setup["prices"]), "--store", setup["db"]])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert sum("served" in ln for ln in lines) == 1 and sum("piped" in ln for ln in lines) == 1
    assert sum(ln.lstrip("│ ").startswith("eval") for ln in lines) == 0
    assert "no price:" in r.output and "0.0014" in r.output
