"""The dashboard's conversation view (/runs/RUN/conversations, /runs/RUN/conversations/ID): per
conversation the transcript in turn order, each turn's turn-level scores, the conversation-level
judgments with their reasons, the goal and why the conversation stopped, and the turn-level and
conversation-level figures side by side with the run's mean per conversation; text from the data
escaped. The run is made in-process from a small conversation file, scored by a scripted judge
that reads the transcript (tests/helpers/convo_brain.py)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import assay  # noqa: E402
from assay.store import Store  # noqa: E402
from assay.ui.server import create_app  # noqa: E402
from tests.helpers.convo_brain import Brain  # noqa: E402
from tests.helpers.fake_openai_server import FakeOpenAI  # noqa: E402
from tests.helpers.uihelpers import XSS_IMG, XSS_SCRIPT, assert_escaped  # noqa: E402

SYSTEM = f"You are a support assistant. {XSS_IMG}"


def _conversation(cid: str, answer: str, stop: str, detail: str) -> dict[str, Any]:
    msgs = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "My order number is 4417."},
            {"role": "assistant", "content": "Noted: your order number is 4417."},
            {"role": "user", "content": "What is my order number?"},
            {"role": "assistant", "content": answer}]
    return {"conversation_id": cid, "conversation": {"messages": msgs}, "conversation_turns": 2,
            "goal": {"goal": f"Get my order number confirmed {XSS_SCRIPT}", "done": "The assistant says 4417."},
            "stop_reason": stop, "stop_detail": detail}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("convo-view")
    data = d / "conv.jsonl"
    rows = [_conversation("forgets", "Your order number is 4471.", "abandoned", f"the user gave up {XSS_SCRIPT}"),
            _conversation("keeps/2", "Your order number is 4417.", "met", "the assistant confirmed 4417")]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    judge = FakeOpenAI().start()
    judge.default = Brain()
    mp = pytest.MonkeyPatch()
    mp.setenv("ASSAY_CACHE", str(d / "cache.sqlite"))
    mp.delenv("ASSAY_JUDGE", raising=False)
    st = Store(str(d / "s.db"))
    try:
        res = assay.evaluate(str(data), metrics=["knowledge_retention", "relevance"],
                             judge=f"{judge.base_url}#fake-judge", name="convo", store=st, workers=1)
        flat = assay.evaluate([{"query": "q", "response": "r", "ground_truth": "r"}], metrics=["f1_score"],
                              store=st, workers=1)
    finally:
        judge.stop()
        mp.undo()
    yield {"store": st, "run": res.run["run_id"], "flat": flat.run["run_id"]}
    st.close()


def client(st: Store) -> TestClient:
    return TestClient(create_app(st), base_url="http://127.0.0.1")


def _section(html: str, cls: str) -> str:
    return html.split(f'class="{cls}"', 1)[1].split("</table>", 1)[0]


def test_a_conversation_shows_transcript_turn_scores_judgments_goal_and_stop(stored: dict[str, Any]) -> None:
    res = client(stored["store"]).get(f"/runs/{stored['run']}/conversations/forgets")
    assert res.status_code == 200
    html = res.text
    assert_escaped(html)
    turns = _section(html, "conversation-turns").split('<tr class="turn"')[1:]
    assert len(turns) == 2
    assert turns[0].index("My order number is 4417.") < turns[0].index("Noted: your order number is 4417.")
    assert "What is my order number?" in turns[1] and "Your order number is 4471." in turns[1]
    for t in turns:                                   # each turn its turn-level score, never the whole-transcript one
        assert "relevance" in t and "knowledge_retention" not in t
    assert 'href="/runs/' + stored["run"] + '/rows/1"' in turns[1]
    judged = _section(html, "conversation-judgments")
    assert "knowledge_retention" in judged and "gives the order number as 4471, not 4417" in judged
    assert '<span class="badge fail">' in judged and "fake-judge" in judged
    facts = html.split('class="kv conversation-facts"', 1)[1].split("</dl>", 1)[0]
    assert "Get my order number confirmed &lt;script&gt;" in facts and "The assistant says 4417." in facts
    assert '<span class="mono">abandoned</span>: the user gave up &lt;script&gt;' in facts
    assert "You are a support assistant. &lt;img" in html.split("<h2>Transcript</h2>", 1)[1]


def test_turn_level_and_conversation_level_figures_side_by_side(stored: dict[str, Any]) -> None:
    c = client(stored["store"])
    aggs = stored["store"].get_run(stored["run"])["aggregates"]
    assert aggs["knowledge_retention"]["conversation_mean"] == pytest.approx(3.5)   # 2 and 5: the run's mean
    fig = _section(c.get(f"/runs/{stored['run']}/conversations/forgets").text, "conversation-figures")
    rel = fig.split("<td>relevance</td>", 1)[1].split("</tr>", 1)[0]
    assert "<td>turn (mean of turns)</td>" in rel and "2 of 2 turns scored" in rel
    assert f'<td class="num">{aggs["relevance"]["conversation_mean"]:.3f}</td>' in rel
    kr = fig.split("<td>knowledge_retention</td>", 1)[1].split("</tr>", 1)[0]
    assert "<td>conversation (whole transcript)</td>" in kr and "judged on turn 1" in kr
    assert '<td class="num">3.500</td>' in kr and '<td class="num">2 <span class="badge fail">fail</span></td>' in kr
    good = c.get(f"/runs/{stored['run']}/conversations/{quote('keeps/2')}").text
    kr_good = _section(good, "conversation-figures").split("<td>knowledge_retention</td>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">5 <span class="badge pass">' in kr_good
    api = c.get(f"/api/runs/{stored['run']}/conversations/forgets").json()["conversation"]
    assert [t["turn"] for t in api["turns"]] == [0, 1] and api["stop_reason"] == "abandoned"
    assert api["judgments"][0]["value"] == 2


def test_the_list_links_each_conversation_and_the_run_and_row_pages_link_it(stored: dict[str, Any]) -> None:
    c = client(stored["store"])
    html = c.get(f"/runs/{stored['run']}/conversations").text
    assert_escaped(html)
    items = _section(html, "conversations")
    assert f'href="/runs/{stored["run"]}/conversations/forgets"' in items
    assert f'href="/runs/{stored["run"]}/conversations/keeps/2"' in items
    assert "abandoned" in items and "met" in items and "Get my order number confirmed &lt;script&gt;" in items
    per = _section(html, "per-conversation")
    assert "conversation (whole transcript)" in per and "turn (mean of turns)" in per
    assert f'href="/runs/{stored["run"]}/conversations"' in c.get(f"/runs/{stored['run']}").text
    assert f'href="/runs/{stored["run"]}/conversations/forgets"' in c.get(f"/runs/{stored['run']}/rows/0").text


def test_unknown_conversation_and_a_run_without_conversations_are_404(stored: dict[str, Any]) -> None:
    c = client(stored["store"])
    assert c.get(f"/runs/{stored['run']}/conversations/nope").status_code == 404
    res = c.get(f"/runs/{stored['flat']}/conversations")
    assert res.status_code == 404 and "has no conversations" in res.text
    assert "/conversations" not in c.get(f"/runs/{stored['flat']}").text
