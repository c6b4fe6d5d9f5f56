"""End to end with the embedded model (Gemma 3 270M, in-process) as the attacker, the simulated
user and the target: seeded, reproducible, and read by `assay eval`'s reader. Kept to a few
generations (about 1-2 s each on a small CPU)."""

from typing import Any

import pytest

from assay.formats import open_dataset
from assay.simulate import simulate_adversarial, simulate_users


def _embedded() -> Any:
    from assay.models.embedded import embedded_available

    if not embedded_available():
        pytest.skip("the embedded model is not installed (llama-cpp-python and the GGUF package: make test installs them)")
    from assay.models import build_judge
    from assay.models.embedded import embedded_judge

    try:
        return build_judge(embedded_judge(), cache=None)
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"the embedded model cannot start here: {exc}")


@pytest.fixture(scope="module")
def embedded():
    return _embedded()


def _target(model):
    async def chat(query: str, history: list | None = None) -> str:
        msgs = [{"role": m["role"], "content": m["content"]} for m in history or []]
        gen = await model.generate(msgs + [{"role": "user", "content": query}], max_tokens=16)
        return gen.text
    return chat


def test_adversarial_end_to_end_is_seeded(embedded, tmp_path):
    out = tmp_path / "attacks.jsonl"
    kw = dict(scenario="adv_conversation", turns=2, seed=4, attacker=embedded, max_tokens=32)
    res = simulate_adversarial(_target(embedded), max_conversations=1, out=out, **kw)
    assert res.conversations == 1 and res.target_errors == 0 and res.model_calls == 1
    assert res.model == "embedded:gemma-3-270m-q4_k_m"
    for row in res.rows:
        msgs = row["conversation"]["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
        assert all(isinstance(m["content"], str) and m["content"].strip() for m in msgs[:3])
        assert row["attacker"] == "embedded:gemma-3-270m-q4_k_m"
    recs = list(open_dataset(str(out)))
    assert len(recs) == 2 and recs[1].history and recs[1].extra["template_version"] == "1"
    # same seed, no cache: conversation 0 again, word for word
    again = simulate_adversarial(_target(embedded), max_conversations=1, **kw)
    assert again.rows[0] == res.rows[0]


def test_users_end_to_end(embedded):
    text = "# Opening hours\n\nThe shop opens at nine and closes at six, Monday to Saturday."
    res = simulate_users(_target(embedded), text=text, tasks=["find out when the shop opens on Saturday"],
                         turns=2, seed=1, model=embedded, max_tokens=32)
    row = res.rows[0]
    assert [m["role"] for m in row["conversation"]["messages"]] == ["user", "assistant"] * 2
    assert row["task"] == "find out when the shop opens on Saturday" and "nine" in row["source_passage"]
    assert res.model_calls == 2
