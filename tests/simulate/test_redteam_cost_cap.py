"""A red-team run stopped by --max-cost through the attacker's spend is stored ``interrupted``
(resumable), not ``failed``; a resumed run counts what the attacker spent in its earlier
sessions, so the cap holds over the whole run (against a scripted attacker endpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.errors import BudgetExceeded
from assay.simulate.redteam import redteam
from assay.store import open_store
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.redteam_apps import REFUSAL
from tests.simulate.test_redteam_models import Recorder, attacker_reply

CALL_USD = 0.11          # one attacker call at ASSAY_ATTACKER_PRICE=1000,1000 (the scripted usage)


@pytest.fixture
def attacker() -> Any:
    server = FakeOpenAI().start()
    server.default = attacker_reply
    yield server
    server.stop()


def _setup(attacker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Recorder, dict[str, Any]]:
    import assay.engine.run as engine_run

    monkeypatch.setattr(engine_run, "CHUNK", 4)
    monkeypatch.setenv("ASSAY_ATTACKER_PRICE", "1000,1000")
    app = Recorder(lambda q, h: REFUSAL)
    kw = dict(categories="violence", strategies="rephrase", attacker=f"{attacker.base_url}#att",
              store=str(tmp_path / "s.db"), seed=3, concurrency=1)
    return app, kw


def test_attacker_cap_leaves_the_run_interrupted(attacker: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    app, kw = _setup(attacker, tmp_path, monkeypatch)
    with pytest.raises(BudgetExceeded) as stop:
        redteam(app, max_cost=0.5, **kw)
    (run,) = open_store(str(tmp_path / "s.db")).list_runs()
    assert run["status"] == "interrupted"
    assert "--resume" in str(stop.value) and "reaching --max-cost" in str(stop.value)
    assert "reaching --max-cost $0.5" in (run.get("error") or "")


def test_resumed_run_counts_the_attackers_earlier_spend(attacker: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    app, kw = _setup(attacker, tmp_path, monkeypatch)
    with pytest.raises(BudgetExceeded):
        redteam(app, max_cost=0.5, **kw)
    first = len(attacker.chat_requests)
    assert first * CALL_USD >= 0.5 - 1e-9            # the first session spent up to the cap
    st = open_store(str(tmp_path / "s.db"))
    (run,) = st.list_runs()
    recorded = sum(float(((s["usage"] or {}).get("other") or {}).get("cost_usd") or 0.0) for s in st.sessions(run["id"]))
    assert recorded == pytest.approx(first * CALL_USD, abs=1e-6)   # the attacker's spend, kept with the session
    with pytest.raises(BudgetExceeded):
        redteam(app, max_cost=0.8, resume=True, **kw)
    later = len(attacker.chat_requests) - first
    # 0.8 leaves room for (0.8 - 0.55) / 0.11 more calls (3), not 0.8 / 0.11 (8)
    assert 0 < later <= int((0.8 - first * CALL_USD) / CALL_USD) + 1
