"""Answer scoring: filters, exact_match's options, acc / acc_norm, pass@k, and reading a choice from text."""

from __future__ import annotations

import itertools
import math

import pytest

from assay.bench.quality.answers import FilterPipeline, choice_accuracy, exact_match, extract_choice, pass_at_k

GSM_STRICT = {"name": "strict-match", "filter": [{"function": "regex", "regex_pattern": r"#### (\-?[0-9\.\,]+)"},
                                                 {"function": "take_first"}]}
GSM_FLEX = {"name": "flexible-extract", "filter": [{"function": "regex", "group_select": -1,
                                                    "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)"},
                                                   {"function": "take_first"}]}
GSM_IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]


def test_strict_match_takes_the_number_after_the_marker():
    f = FilterPipeline.from_config(GSM_STRICT)
    assert f.name == "strict-match" and f.take_first
    assert f.apply("He saves 25 * 52 = 1,300 dollars.\n#### 1,300") == "1,300"
    assert f.apply("#### -7\nQuestion: next") == "-7"
    assert f.apply("The answer is 12.") == "[invalid]"


def test_flexible_extract_takes_the_last_number_and_the_matching_group():
    f = FilterPipeline.from_config(GSM_FLEX)
    assert f.apply("First 3 apples, then 12 pears, so $45.") == "$45."
    assert f.apply("one step: 7") == "7"              # only the second alternative matches: its group is taken
    assert f.apply("no digits here") == "[invalid]"


def test_regex_fallback_and_group_out_of_range():
    f = FilterPipeline.from_config({"name": "x", "filter": [
        {"function": "regex", "regex_pattern": r"answer: (\w+)", "group_select": 3, "fallback": "NONE"}]})
    assert f.apply("answer: yes") == "NONE"


def test_case_and_whitespace_steps():
    f = FilterPipeline.from_config({"name": "c", "filter": [{"function": "remove_whitespace"},
                                                            {"function": "lowercase"}]})
    assert f.apply("  Paris ") == " paris "          # lm-eval's remove_whitespace drops one leading space
    assert FilterPipeline.from_config({"name": "u", "filter": [{"function": "strip"},
                                                                {"function": "uppercase"}]}).apply(" ab\n") == "AB"


def test_selection_steps_act_on_a_docs_samples():
    first = FilterPipeline.from_config(GSM_STRICT)
    assert first.apply_all(["#### 1", "#### 2"]) == ["1"]
    vote = FilterPipeline.from_config({"name": "maj", "filter": [
        {"function": "regex", "regex_pattern": r"#### (\d+)"}, {"function": "majority_vote"}]})
    assert vote.apply_all(["#### 2", "#### 3", "#### 3", "#### 2 ", "x"]) == ["2"]   # 2 and 3 tie: first seen


def test_unknown_filter_function_is_refused():
    with pytest.raises(ValueError, match="filter function 'no_such_filter'"):
        FilterPipeline.from_config({"name": "x", "filter": [{"function": "no_such_filter"}]})
    # a custom filter is the task's own code: it needs its filter_fn (imported only with --trust-task-code)
    with pytest.raises(ValueError, match="custom filter needs filter_fn"):
        FilterPipeline.from_config({"name": "x", "filter": [{"function": "custom"}]})


def test_exact_match_plain_and_gsm8k_options():
    assert exact_match("12", "12") == 1.0
    assert exact_match("12 ", "12") == 0.0
    gold = "She makes 24 + 18 = 42 rolls.\n#### 1,300"
    assert exact_match("1,300", gold, ignore_case=True, regexes_to_ignore=GSM_IGNORE) == 1.0
    assert exact_match("$1300.", gold, regexes_to_ignore=GSM_IGNORE) == 1.0
    assert exact_match("1301", gold, regexes_to_ignore=GSM_IGNORE) == 0.0


def test_exact_match_option_order_regexes_before_case():
    # the regex is applied to the original case, before folding: "ABC" does not remove "abc"
    assert exact_match("abc1", "1", ignore_case=True, regexes_to_ignore=["ABC"]) == 0.0
    assert exact_match("ABC1", "1", ignore_case=True, regexes_to_ignore=["ABC"]) == 1.0
    assert exact_match("Paris!", "paris", ignore_case=True) == 0.0
    assert exact_match("Paris!", "paris", ignore_case=True, ignore_punctuation=True) == 1.0
    assert exact_match("route 66", "route ", ignore_numbers=True) == 1.0
    assert exact_match("route 66", "route ") == 0.0


def test_acc_norm_differs_from_acc_when_lengths_differ():
    # raw: choice 0 is likelier; per character: choice 1 (-6/8 > -4/2)
    r = choice_accuracy([-4.0, -6.0], ["ab", "abcdefgh"], 1)
    assert (r["acc"], r["acc_norm"]) == (0.0, 1.0)
    r = choice_accuracy([-4.0, -6.0], ["ab", "abcdefgh"], 0)
    assert (r["acc"], r["acc_norm"]) == (1.0, 0.0)
    # equal lengths: the two agree
    r = choice_accuracy([-1.0, -3.0, -2.0], ["aa", "bb", "cc"], 0)
    assert (r["acc"], r["acc_norm"]) == (1.0, 1.0)
    assert choice_accuracy([-1.0, -3.0], ["x", "y"], [1, 0])["acc"] == 1.0
    with pytest.raises(ValueError):
        choice_accuracy([-1.0], ["a", "b"], 0)


def _pass_at_k_brute(n: int, c: int, k: int) -> float:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_equals_enumeration_over_all_k_subsets():
    for n in range(1, 8):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_pass_at_k_brute(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_edges_and_refusals():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 7, 5) == 1.0                   # n - c < k: every 5-subset holds a pass
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    assert pass_at_k(200, 13, 10) == pytest.approx(1 - math.comb(187, 10) / math.comb(200, 10), rel=1e-12)
    with pytest.raises(ValueError, match="at least 5 samples"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 0)


CHOICES = ["Oxygen", "Carbon dioxide", "Nitrogen", "Helium"]


@pytest.mark.parametrize("text,expected", [
    ("B", 1), ("(C)", 2), ("The answer is D.", 3), ("Answer: A", 0), ("A) Oxygen", 0),
    ("carbon dioxide", 1), ("I think it is Nitrogen, since plants fix it.", 2), ("2", 1),
    ("A gas called Nitrogen", 2), ("Oxygen or Helium", None), ("no idea", None), ("", None), ("E", None),
])
def test_extract_choice(text, expected):
    assert extract_choice(text, CHOICES) == expected


def test_extract_choice_numeric_choices_are_matched_as_text():
    assert extract_choice("100", ["50", "90", "100", "212"]) == 2
    assert extract_choice("The answer is (B)", ["50", "90", "100", "212"]) == 1
    assert extract_choice("3", ["50", "90", "100", "212"]) is None
