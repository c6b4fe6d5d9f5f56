"""The embedded support scorer and the fidelity figures of judges/check.py, on worked examples."""

from __future__ import annotations

import pytest

from assay.judges.check import Scored, measure, roc_auc
from assay.judges.scorers import to_unit
from assay.judges.support import support, terms


def test_terms_drop_function_words_and_match_stems_and_numbers():
    assert [t.text for t in terms("It was written by the composer in 1,958 and the 2nd.")] == \
        ["written", "composer", "1,958", "2nd"]
    s = support("Magazines were started in 1,200 towns.", ["The magazine started in 1200 towns."])
    assert s.share == 1.0 and s.missing == []


def test_support_lists_what_the_context_lacks_sentence_by_sentence():
    ctx = ["The Halvorsen Bridge was designed by Marta Lind and opened in 1968."]
    s = support("Marta Lind designed the bridge. It opened in 1972 after a flood.", ctx)
    assert s.n_terms == 7 and s.missing == ["1972", "flood"] and s.share == pytest.approx(5 / 7)
    assert [x.share for x in s.sentences] == [1.0, pytest.approx(1 / 3)]
    assert s.sentences[1].missing == ["1972", "flood"]
    assert support("No.", ctx).share is None                    # nothing to check


def test_the_cut_lands_on_the_middle():
    assert [to_unit(x, 0.8) for x in (0.0, 0.4, 0.8, 0.9, 1.0)] == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])


def test_roc_auc_counts_ties_as_half():
    assert roc_auc([3, 2], [1, 2]) == pytest.approx((1 + 1 + 1 + 0.5) / 4)
    assert roc_auc([1], [1]) == 0.5 and roc_auc([], [1]) is None


def _items(score_good, score_bad, score_swap, n=30):
    out = []
    for g in range(n):
        wg, wb = (3, 3) if g % 2 else (2, 12)                   # half the pairs are length-matched
        out += [Scored(f"q{g}", "good", score_good(g, wg), True, wg),
                Scored(f"q{g}", "bad", score_bad(g, wb), False, wb),
                Scored(f"q{g}", "swap", score_swap(g, wg), None, wg)]
    return out


def test_controls_catch_a_length_reader_and_an_answer_reader():
    by_length = measure(_items(lambda g, w: -w, lambda g, w: -w, lambda g, w: -w), resamples=50)
    assert by_length["auc"]["auc"] > 0.7                     # looks good on the whole set ...
    assert by_length["length_matched"]["auc"] == 0.5         # ... reads nothing on matched pairs
    assert by_length["swap"]["auc"] == 0.5           # and never reads the context
    reader = measure(_items(lambda g, w: 1.0, lambda g, w: 0.0, lambda g, w: 0.2), resamples=50)
    assert reader["auc"]["auc"] == reader["length_matched"]["auc"] == reader["swap"]["auc"] == 1.0
    assert reader["agreement"] == 1.0 and reader["errors"] == 0
    assert reader["length_matched"]["groups"] == 15 and reader["length_matched"]["length_only_auc"] == 0.5


def test_unscored_items_are_errors_left_out_of_the_auc():
    items = _items(lambda g, w: 1.0, lambda g, w: 0.0, lambda g, w: 0.0, n=4)
    items[0] = Scored("q0", "good", None, None, 2, error="judge call failed: timeout")
    m = measure(items, resamples=20)
    assert m["errors"] == 1 and m["error_reasons"] == {"judge call failed: timeout": 1}
    assert m["auc"]["auc"] == 1.0 and m["auc"]["groups"] == 3


def test_logistic_fit_recovers_a_known_slope_and_puts_the_cut_between_the_classes():
    import numpy as np

    from assay.judges.check import fit_logistic

    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, 4000)
    y = (rng.uniform(size=x.size) < 1 / (1 + np.exp(-(2.0 * x - 1.0)))).astype(int)
    a, b = fit_logistic(x, y, l2=0.0)
    assert a == pytest.approx(2.0, rel=0.1) and b == pytest.approx(-1.0, abs=0.15)
    a, b = fit_logistic([0.80, 0.81, 0.82, 0.90, 0.91, 0.92], [0, 0, 0, 1, 1, 1])   # separable: finite, steep
    assert a > 10 and 0.82 < -b / a < 0.90
    with pytest.raises(ValueError):
        fit_logistic([0.1, 0.2], [1, 1])
