"""Judge text -> (value, reason, ok): a table of inputs and expected outputs."""

from __future__ import annotations

import math

import pytest

from assay.judges.parse import Scale, parse_score, score_from_logprobs, score_from_token_logprobs

CASES = [
    # text, scale, value, ok, method
    ('{"score": 4, "reason": "mostly grounded"}', "1-5", 4, True, "json"),
    ('```json\n{"score": 5, "reason": "all supported"}\n```', "1-5", 5, True, "json"),
    ('```\n{"rating": "3"}\n```', "1-5", 3, True, "json"),
    ('Here is my evaluation:\n{"reasoning": "x", "score": 2}\nHope this helps!', "1-5", 2, True, "json"),
    ('Thoughts first. {"Score": 4.0, "Explanation": "ok"} done', "1-5", 4, True, "json"),
    ("{'score': 3, 'reason': 'single quotes'}", "1-5", 3, True, "json"),
    ('{"score": 4, "reason": "trailing comma",}', "1-5", 4, True, "json"),
    ('{"result": {"score": 1, "reason": "nested"}}', "1-5", 1, True, "json"),
    ('{"score": "4/5"}', "1-5", 4, True, "json"),
    ('{"score": 9, "reason": "out of range"}', "1-5", None, False, "json"),
    ('{"score": 9} Score: 4', "1-5", None, False, "json"),   # an explicit off-scale answer is not guessed at
    ('{"score": 6}', "0-7", 6, True, "json"),
    ('{"score": 0}', "0-7", 0, True, "json"),
    ('{"answer": "yes", "rationale": "it is"}', "yes/no", "yes", True, "json"),
    ('{"result": "No"}', "yes/no", "no", True, "json"),
    ('{"score": true}', "yes/no", "yes", True, "json"),
    ('{"score": 0.75}', "0.0-1.0", 0.75, True, "json"),
    ('{"score": 1.5}', "0.0-1.0", None, False, "json"),
    ("4", "1-5", 4, True, "json"),
    ("<S0>think</S0><S1>because</S1><S2>3</S2>", "1-5", 3, True, "tag"),
    ("<reason>clear</reason>\n<score>4</score>", "1-5", 4, True, "tag"),
    ("<rating>yes</rating>", "yes/no", "yes", True, "tag"),
    ("<score> 7 </score>", "1-5", None, False, "tag"),
    ("Score: 4", "1-5", 4, True, "text"),
    ("The response is mostly relevant.\n\nFinal rating: **3**", "1-5", 3, True, "text"),
    ("I would give it 4/5.", "1-5", 4, True, "text"),
    ("I would give it a 4 out of 5 because 2 facts are missing.", "1-5", 4, True, "text"),
    ("4/10", "1-5", None, False, "none"),
    ("5\nThe answer is complete.", "1-5", 5, True, "text"),
    ("There are 3 claims; 2 are supported, so overall I'd say 4.", "1-5", 4, True, "text"),
    ("7", "1-5", None, False, "none"),
    ("0", "0-7", 0, True, "json"),
    ("Score: 7", "0-7", 7, True, "text"),
    ("Yes", "yes/no", "yes", True, "text"),
    ("no.", "yes/no", "no", True, "text"),
    ("Answer: NO - the context does not say so", "yes/no", "no", True, "text"),
    ("Judgment: yes. Nothing is missing, no.", "yes/no", "yes", True, "text"),
    ("The response is supported: yes", "yes/no", "yes", True, "text"),
    ("maybe?", "yes/no", None, False, "none"),
    ("yes and no", "yes/no", "yes", True, "text"),     # the first word decides
    ("It could be yes or it could be no.", "yes/no", None, False, "none"),
    ("", "1-5", None, False, "none"),
    ("   \n", "1-5", None, False, "none"),
    ("I cannot rate this.", "1-5", None, False, "none"),
    ("\x00\x01 {broken json", "1-5", None, False, "none"),
    ("{{{{}", "1-5", None, False, "none"),
    ("The scores 2, 3 and 4 were considered.", "1-5", None, False, "none"),
]


@pytest.mark.parametrize("text,scale,value,ok,method", CASES)
def test_parse_table(text, scale, value, ok, method):
    res = parse_score(text, scale)
    v, reason, got_ok = res
    assert (v, got_ok) == (value, ok), res
    assert res.method == method, res
    if ok and value is not None and scale != "yes/no":
        assert type(v) in (int, float)


def test_reasons_are_kept():
    assert parse_score('{"score": 4, "reason": "mostly grounded"}').reason == "mostly grounded"
    assert parse_score("<S1>because</S1><S2>3</S2>").reason == "because"
    assert parse_score("Score: 2 - the answer misses the point").reason.startswith("Score: 2")
    assert parse_score('{"score": 9, "reason": "r"}').reason == "r"


def test_never_raises_on_odd_input():
    for junk in (None, 42, 3.5, {"score": 2}, ["x"], b"bytes", "{" * 5000, "}" * 100, "```json\n```",
                 '{"score": null}', '{"score": [1, 2]}', '{"score": {"a": 1}}', "nan", "inf", "-1"):
        res = parse_score(junk, "1-5")
        assert isinstance(res.ok, bool)
    assert parse_score({"score": 2}, "1-5")[:] == (2, None, True)
    assert parse_score(3, "1-5").ok and not parse_score(True, "1-5").ok
    assert not parse_score("4", "not a scale").ok


@pytest.mark.parametrize("spec,expected", [
    ("1-5", Scale("int", 1, 5)), ("1–5", Scale("int", 1, 5)), ("0-7", Scale("int", 0, 7)),
    ("0.0-1.0", Scale("float", 0.0, 1.0)), ("yes/no", Scale("yesno", 0, 1)), ((1, 10), Scale("int", 1, 10)),
])
def test_scale_specs(spec, expected):
    assert Scale.of(spec) == expected


def test_scale_labels():
    assert Scale.of("1-5").labels() == ["1", "2", "3", "4", "5"]
    assert Scale.of("yes/no").labels() == ["yes", "no"]


# -- log-probabilities ----------------------------------------------------------------------
def lp(p):
    return math.log(p)


def test_expected_score_over_scale_tokens_with_spaces_and_duplicates():
    top = {"4": lp(0.5), " 4": lp(0.1), "5": lp(0.2), "\u25813": lp(0.1), "The": lp(0.1)}
    r = score_from_logprobs(top, "1-5")
    assert r.mass == pytest.approx(0.9)
    assert r.probs == pytest.approx({3: 0.1 / 0.9, 4: 0.6 / 0.9, 5: 0.2 / 0.9})
    assert r.value == pytest.approx((3 * 0.1 + 4 * 0.6 + 5 * 0.2) / 0.9)


def test_p_yes_handles_case_and_leading_spaces():
    r = score_from_logprobs({"Yes": lp(0.6), " yes": lp(0.1), " No": lp(0.2), "Maybe": lp(0.1)}, "yes/no")
    assert r.value == pytest.approx(0.7 / 0.9)
    assert r.probs == pytest.approx({"yes": 0.7 / 0.9, "no": 0.2 / 0.9})


def test_logprobs_off_the_scale_give_none():
    assert score_from_logprobs({"7": lp(0.9), "The": lp(0.1)}, "1-5") is None
    assert score_from_logprobs({}, "1-5") is None
    assert score_from_logprobs(None, "yes/no") is None
    assert score_from_logprobs({"0.5": lp(1.0)}, "0.0-1.0") is None
    assert score_from_logprobs({"yes": float("-inf"), "no": lp(1.0)}, "yes/no").value == 0.0


def test_score_from_the_score_position_inside_json():
    seq = [('{"', {'{"': -0.01}), ("score", {"score": -0.01}), ('":', {'":': -0.01}),
           (" 4", {" 4": lp(0.7), " 3": lp(0.3)}), (",", {",": -0.01})]
    r = score_from_token_logprobs(seq, "1-5")
    assert r.value == pytest.approx(3.7)
    assert score_from_token_logprobs([("x", {"x": 0.0})], "1-5") is None
    assert score_from_token_logprobs(None, "1-5") is None


def test_json_key_finds_a_key_in_the_first_object_that_has_it():
    from assay.judges.parse import json_key

    assert json_key('noise {"a": 1} then ```json\n{"Intents": ["x", "y"]}\n```', "intents") == ["x", "y"]
    assert json_key('{"intrusion": true, "rating": "no"}', "intrusion") is True
    assert json_key("no json here", "intents") is None and json_key("", "intents") is None
