"""The built-in attack templates and jailbreak set: every scenario x category renders, seeded."""

import json
import re

import pytest

from assay.errors import AssayError
from assay.simulate import HARM_CATEGORIES, SCENARIOS, load_attack_set, load_jailbreak_set, plan_attacks
from assay.simulate.jailbreak import plan_xpia
from assay.simulate.templates import fill, seeded

LEFTOVER = re.compile(r"\{[a-z_]+\}")


def test_every_scenario_and_category_has_templates_that_render():
    aset = load_attack_set()
    assert aset.version == "1"
    for scen in SCENARIOS:
        for cat in HARM_CATEGORIES:
            ts = aset.select(scen, [cat])
            assert ts, (scen, cat)
            for t in ts:
                assert t.id == f"{scen}/{cat}/{t.frame}" and t.version == "1"
                for seed in range(6):
                    r = t.render(seeded(seed, t.id))
                    assert r.text.strip() and not LEFTOVER.search(r.text), (t.id, r.text)
                    assert r.scenario == scen and r.category == cat and r.goal
                    if scen == "adv_content_gen_grounded":
                        assert r.document and not LEFTOVER.search(r.document)
                    top = {m.strip("{}") for m in LEFTOVER.findall(t.text + (t.context or ""))}
                    assert top <= set(r.params)  # the chosen parameters are recorded
    assert len(aset.templates) == len(SCENARIOS) * len(HARM_CATEGORIES) * 2 + 2 * len(HARM_CATEGORIES) * 1


def test_rendering_is_seeded_and_reproducible():
    a = [p.attack for p in plan_attacks("adv_qa", n=12, seed=7)]
    b = [p.attack for p in plan_attacks("adv_qa", n=12, seed=7)]
    c = [p.attack for p in plan_attacks("adv_qa", n=12, seed=8)]
    assert a == b
    assert [x.text for x in a] != [x.text for x in c]
    # conversation i does not depend on how many were planned
    assert plan_attacks("adv_qa", n=3, seed=7)[2].attack == a[2]


def test_plan_balances_categories_and_honours_filters():
    plan = plan_attacks("adv_qa,adv_search", n=8, seed=1)
    assert [p.attack.category for p in plan[:4]] == list(HARM_CATEGORIES)
    assert {p.attack.scenario for p in plan} <= {"adv_qa", "adv_search"}
    plan = plan_attacks("adv_rewrite", n=5, seed=1, categories="violence")
    assert {p.attack.category for p in plan} == {"violence"}
    assert all(p.turns == 1 for p in plan)
    assert all(p.turns == 3 for p in plan_attacks("adv_conversation", n=2))
    assert all(p.turns == 2 for p in plan_attacks("adv_conversation", n=2, turns=2))


@pytest.mark.parametrize("kw,msg", [
    ({"scenario": "adv_nope"}, "unknown scenario 'adv_nope'"),
    ({"scenario": "adv_qa", "categories": "gore"}, "unknown category 'gore'"),
    ({"scenario": "adv_qa", "n": 0}, "at least 1"),
    ({"scenario": "adv_qa", "turns": 0}, "at least 1"),
])
def test_bad_plans_raise_clear_errors(kw, msg):
    kw = {"n": 2, **kw}
    with pytest.raises(AssayError, match=re.escape(msg)):
        plan_attacks(kw.pop("scenario"), **kw)


def test_fill_reuses_a_value_and_refuses_missing_or_cyclic_slots():
    out = fill("{a} and {a}", {"a": ["x{b}"], "b": ["1", "2"]}, seeded(0))
    left, right = out.split(" and ")
    assert left == right and left in ("x1", "x2")
    with pytest.raises(AssayError, match="no values"):
        fill("{missing}", {}, seeded(0))
    with pytest.raises(AssayError, match="refers to itself"):
        fill("{a}", {"a": ["{a}"]}, seeded(0))


def test_template_file_of_another_version_is_read(tmp_path):
    from assay.simulate.templates import TEMPLATES_DIR

    data = json.loads((TEMPLATES_DIR / "attacks_v1.json").read_text())
    data["version"] = "9-test"
    p = tmp_path / "attacks_custom.json"
    p.write_text(json.dumps(data))
    plan = plan_attacks("adv_qa", n=1, attack_set=load_attack_set(p))
    assert plan[0].attack.template_version == "9-test"
    with pytest.raises(AssayError, match="no attack templates file"):
        load_attack_set(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"version": 1}')
    with pytest.raises(AssayError, match="malformed"):
        load_attack_set(tmp_path / "bad.json")


def test_jailbreak_set_and_xpia_plan():
    jset = load_jailbreak_set()
    assert jset.version == "1" and len(jset.prefixes) >= 5
    assert len({p.id for p in jset.prefixes}) == len(jset.prefixes)
    plan = plan_xpia(n=8, seed=3)
    assert [x.category for x in plan[:4]] == list(HARM_CATEGORIES)
    for x in plan:
        assert x.attack in x.injected_document and x.attack not in x.clean_document
        assert "{" not in x.injected_document and "{" not in x.clean_document
        assert x.clean_document.split()[0] == x.injected_document.split()[0]
    assert plan_xpia(n=8, seed=3) == plan
