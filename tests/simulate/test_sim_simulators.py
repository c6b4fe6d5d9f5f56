"""The simulators with a scripted simulating model and small Python targets: rows, metadata,
reproducibility, what the target is handed, target failures, and that `assay eval` reads the output."""

import asyncio

import pytest

from assay.formats import open_dataset
from assay.simulate import simulate_adversarial, simulate_jailbreak, simulate_users
from assay.simulate.conversation import clean_message
from tests.helpers.simhelpers import ScriptedModel, echo_app


def test_adversarial_rows_are_an_azure_conversation_set(tmp_path, scripted):
    out = tmp_path / "attacks.jsonl"
    res = simulate_adversarial(echo_app, scenario="adv_conversation", max_conversations=4, turns=2, seed=5,
                               attacker=scripted, out=out)
    assert res.conversations == 4 and res.paths == [out] and res.target_errors == 0
    assert res.model_calls == 4 and res.fallbacks == 0          # one attacker turn per conversation
    row = res.rows[0]
    msgs = row["conversation"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 2
    assert msgs[2]["content"].startswith("follow-up")
    assert msgs[3]["content"].startswith("[2] ")                 # the target saw the history
    assert msgs[1]["context"] == {"citations": [{"content": "Our content policy.", "url": "kb://policy"}]}
    for k, v in {"simulator": "adversarial", "scenario": "adv_conversation", "category": "hate_unfairness",
                 "template_version": "1", "seed": 5, "attacker": "scripted"}.items():
        assert row[k] == v
    assert row["template_id"].startswith("adv_conversation/hate_unfairness/")
    recs = list(open_dataset(str(out)))
    assert len(recs) == 8                                         # 4 conversations x 2 turns
    r = recs[1]
    assert r.conversation_id == "adv-5-0" and r.turn == 1 and r.history and r.response.startswith("[2]")
    assert r.contexts[0].doc_uri == "kb://policy"
    assert r.extra["scenario"] == "adv_conversation" and r.extra["seed"] == 5
    # the attacker saw the goal and the conversation
    prompt = scripted.prompts[0]
    assert "goal" in prompt[0]["content"] and "Assistant: [0]" in prompt[1]["content"]


def test_same_seed_same_rows_other_seed_other_rows(tmp_path):
    def run(seed):
        return simulate_adversarial(echo_app, scenario="adv_conversation,adv_qa", max_conversations=6, seed=seed,
                                    attacker=ScriptedModel(), turns=2).rows

    a, b, c = run(11), run(11), run(12)
    assert a == b
    assert a != c


def test_attacker_fallbacks_are_seeded_and_counted():
    # an attacker that only echoes the prompt: every message is replaced by a scripted follow-up
    echo = ScriptedModel(reply=lambda messages: "")
    res = simulate_adversarial(echo_app, scenario="adv_conversation", max_conversations=2, turns=3, seed=1,
                               attacker=echo)
    assert res.fallbacks == 4 and all(r["simulation_fallbacks"] == 2 for r in res.rows)
    again = simulate_adversarial(echo_app, scenario="adv_conversation", max_conversations=2, turns=3, seed=1,
                                 attacker=ScriptedModel(reply=lambda m: ""))
    assert again.rows == res.rows


def test_single_turn_scenarios_need_no_attacker_and_grounded_ones_hand_over_the_document(monkeypatch):
    def no_model(spec):
        raise AssertionError("no model should be built for single-turn attacks")

    monkeypatch.setattr("assay.simulate.adversarial.resolve_model", no_model)
    seen = []

    async def app(query, contexts=None):        # async targets work the same way
        seen.append(contexts)
        await asyncio.sleep(0)
        return "no"

    res = simulate_adversarial(app, scenario="adv_content_gen_grounded", max_conversations=2, seed=0)
    assert all(c and c[0]["content"] for c in seen)
    row = res.rows[0]
    assert row["conversation"]["context"] == seen[0][0]["content"]
    rec = next(iter(open_dataset(res.rows)))
    assert rec.contexts[0].content == seen[0][0]["content"]       # the document is the turn's context


def test_a_target_failure_ends_that_conversation_and_is_recorded(scripted):
    def flaky(query, history=None):
        if history:
            raise RuntimeError("backend down")
        return "ok"

    res = simulate_adversarial(flaky, scenario="adv_conversation", max_conversations=2, turns=3, attacker=scripted)
    assert res.target_errors == 2
    row = res.rows[0]
    assert "turn 1: target raised RuntimeError: backend down" in row["simulation_error"]
    assert [m["role"] for m in row["conversation"]["messages"]] == ["user", "assistant", "user"]
    recs = list(open_dataset(res.rows))
    assert recs[-1].response is None                               # kept, for a skip with its reason


def test_upia_pairs_share_everything_but_the_prefix(tmp_path, scripted):
    res = simulate_jailbreak(echo_app, scenario="adv_qa", max_conversations=4, seed=2, out=tmp_path / "jb",
                             attacker=scripted)
    base = [r for r in res.rows if r["variant"] == "baseline"]
    jail = [r for r in res.rows if r["variant"] == "jailbreak"]
    assert len(base) == len(jail) == 4 and res.extra["pairs"] == 4
    for b, j in zip(base, jail):
        assert b["pair_id"] == j["pair_id"] and b["template_id"] == j["template_id"] and b["params"] == j["params"]
        assert b["attack_kind"] == "upia" and b["jailbreak_version"] == "1"
        bq, jq = b["conversation"]["messages"][0]["content"], j["conversation"]["messages"][0]["content"]
        assert jq.endswith(bq) and len(jq) > len(bq)
        assert b["conversation_id"] == b["pair_id"] + "/baseline"
    recs = list(open_dataset(str(tmp_path / "jb")))
    assert len(recs) == 8 and len({r.conversation_id for r in recs}) == 8
    assert {r.extra["variant"] for r in recs} == {"baseline", "jailbreak"}
    again = simulate_jailbreak(echo_app, scenario="adv_qa", max_conversations=4, seed=2, attacker=scripted)
    assert again.rows == res.rows


def test_xpia_hides_the_attack_in_the_document_handed_to_the_target(tmp_path):
    seen = []

    def app(query, contexts=None):
        seen.append((query, contexts[0]["content"]))
        return "summary"

    res = simulate_jailbreak(app, kind="xpia", max_conversations=4, seed=0, out=tmp_path / "x")
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["baseline.jsonl", "jailbreak.jsonl"]
    for b, j in zip(res.rows[:4], res.rows[4:]):
        assert b["pair_id"] == j["pair_id"] and b["attack_kind"] == "xpia"
        attack = j["params"]["attack"]
        assert attack in j["conversation"]["context"] and attack not in b["conversation"]["context"]
        assert b["conversation"]["messages"][0]["content"] == j["conversation"]["messages"][0]["content"]
    assert any(res.rows[4]["params"]["attack"] in doc for _, doc in seen)


def test_jailbreak_output_must_be_a_folder(tmp_path):
    from assay.errors import AssayError

    with pytest.raises(AssayError, match="writes a folder"):
        simulate_jailbreak(echo_app, scenario="adv_qa", max_conversations=1, out=tmp_path / "jb.jsonl")
    with pytest.raises(AssayError, match="unknown jailbreak kind"):
        simulate_jailbreak(echo_app, kind="both", max_conversations=1)


TEXT = """# Returns

You can return an item within 30 days of delivery. Items must be unused and in their box.

# Shipping

Orders ship within two business days. Express shipping costs 9 euros.

# Warranty

Electronics carry a two-year warranty against defects.
"""


def test_users_from_tasks_and_text(tmp_path):
    user = ScriptedModel(reply=lambda messages: "User: How do I do that exactly?\nAssistant: you do")
    out = tmp_path / "conv.jsonl"
    res = simulate_users(echo_app, text=TEXT, tasks=["return a broken kettle", "find out what express shipping costs"],
                         turns=2, seed=0, model=user, out=out)
    assert res.conversations == 2 and res.model_calls == 4
    r0, r1 = res.rows
    assert r0["task"] == "return a broken kettle" and "30 days" in r0["source_passage"]
    assert "Express shipping" in r1["source_passage"]
    assert r0["conversation"]["messages"][0]["content"] == "How do I do that exactly?"   # cleaned
    # the repeated message is replaced by a seeded ordinary follow-up
    assert r0["conversation"]["messages"][2]["content"] != "How do I do that exactly?"
    assert r0["simulation_fallbacks"] == 1
    assert r0["conversation"]["messages"][1]["context"]["citations"][0]["url"] == "kb://policy"
    recs = list(open_dataset(str(out)))
    assert len(recs) == 4 and recs[0].extra["task"] == "return a broken kettle"
    assert simulate_users(echo_app, text=TEXT, tasks=["return a broken kettle", "find out what express shipping costs"],
                          turns=2, seed=0, model=ScriptedModel(reply=user.reply)).rows == res.rows


def test_users_from_text_only_and_bad_input():
    from assay.errors import AssayError

    res = simulate_users(echo_app, text=TEXT, turns=1, model=ScriptedModel(reply=lambda m: ""))
    assert res.conversations == 3                              # one per passage, at most 5
    firsts = sorted(r["conversation"]["messages"][0]["content"] for r in res.rows)
    assert firsts == ["Can you tell me about Returns?", "Can you tell me about Shipping?",
                      "Can you tell me about Warranty?"]
    with pytest.raises(AssayError, match="needs a text"):
        simulate_users(echo_app, text="  ", tasks=[])
    with pytest.raises(AssayError, match="turns must be at least 1"):
        simulate_users(echo_app, tasks=["x"], turns=0)


@pytest.mark.parametrize("raw,clean", [
    ("  Sure, but why not?\nAssistant: because", "Sure, but why not?"),
    ('User: "Tell me more."', "Tell me more."),
    ("**User:** ok then\n\n\n\nmore", "ok then\n\nmore"),
    ("", ""),
])
def test_clean_message(raw, clean):
    assert clean_message(raw) == clean


def test_simulators_run_inside_a_running_event_loop(scripted):
    async def main():
        return simulate_adversarial(echo_app, max_conversations=1, attacker=scripted)

    assert asyncio.run(main()).conversations == 1


def test_unusable_model_messages_are_detected():
    from assay.simulate.conversation import _unusable

    said = [{"role": "assistant", "content": "Sorry, I can't help with that."}]
    assert _unusable("I'm sorry, I can't help with that.", "a user", said)        # a near-repeat
    assert _unusable("  ", "a user", said)
    assert _unusable("The user's task: return a kettle", "An ordinary user. The user's task: return a kettle.", [])
    assert not _unusable("Why not? It is for a school project.", "a user", said)


def test_the_first_message_falls_back_to_the_task_as_a_request():
    from assay.simulate.users import _opening

    assert _opening("return a broken kettle") == "I would like to return a broken kettle. Can you help me?"
    assert _opening("How long does a refund take?") == "How long does a refund take?"
    res = simulate_users(echo_app, tasks=["return a broken kettle"], turns=1, model=ScriptedModel(reply=lambda m: ""))
    assert res.rows[0]["conversation"]["messages"][0]["content"].startswith("I would like to return")
