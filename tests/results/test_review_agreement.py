"""Agreement statistics against values computed by hand (the working is in the comments)."""

from __future__ import annotations

import math

import pytest

from assay.results.agreement import (
    agreement,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    paired_difference,
)

P, F = "pass", "fail"

# Two raters, 10 rows: both pass 4, A pass / B fail 1, A fail / B pass 2, both fail 3.
# p_o = 7/10; A passes 5/10, B passes 6/10: p_e = .5*.6 + .5*.4 = .5; kappa = (.7-.5)/(1-.5) = 0.4
COHEN = [[P, P]] * 4 + [[P, F]] + [[F, P]] * 2 + [[F, F]] * 3

# Three raters, 4 rows: ppp, ppf, fff, pff.
# Fleiss: P_i = 1, 1/3, 1, 1/3 -> P_bar = 2/3; pooled p(pass) = 6/12 -> p_e = .25+.25 = .5;
#   kappa = (2/3 - 1/2) / (1/2) = 1/3
# Krippendorff (nominal): every unit has m=3 labels, each ordered pair weighs 1/(m-1) = 1/2:
#   ppp: o_pp += 3;  ppf: o_pp += 1, o_pf += 1, o_fp += 1;  fff: o_ff += 3;  pff: o_ff += 1, o_pf += 1, o_fp += 1
#   o_pf + o_fp = 4, n_p = n_f = 6, n = 12: alpha = 1 - (n-1) * 4 / (n_p*n_f + n_f*n_p) = 1 - 44/72 = 7/18
FLEISS = [[P, P, P], [P, P, F], [F, F, F], [P, F, F]]


def test_cohen_kappa_of_the_two_by_two_table():
    assert cohen_kappa(COHEN) == pytest.approx(0.4)


def test_cohen_kappa_uses_only_the_rows_both_labelled():
    assert cohen_kappa(COHEN + [[P, None], [None, F]]) == pytest.approx(0.4)


def test_fleiss_kappa_three_raters():
    assert fleiss_kappa(FLEISS) == pytest.approx(1 / 3)


def test_krippendorff_nominal_and_a_missing_label_changes_nothing():
    assert krippendorff_alpha(FLEISS) == pytest.approx(7 / 18)
    # a row with one label is not pairable: it adds nothing (alpha allows missing labels)
    assert krippendorff_alpha(FLEISS + [[None, P, None]]) == pytest.approx(7 / 18)


def test_krippendorff_ordinal_credits_near_misses():
    # Two raters, 1-5 scale, rows (1,1), (2,3), (3,3); m=2 so each pair weighs 1:
    #   o_11 = 2, o_23 = o_32 = 1, o_33 = 2; n_1 = 2, n_2 = 1, n_3 = 3, n = 6
    # ordinal delta(c,k) = (sum n_g for g=c..k - (n_c+n_k)/2)^2:
    #   d12 = (3 - 1.5)^2 = 2.25, d23 = (4 - 2)^2 = 4, d13 = (6 - 2.5)^2 = 12.25
    #   observed: o_23*d23 + o_32*d32 = 8
    #   expected: 2*(n1 n2 d12 + n2 n3 d23 + n1 n3 d13) = 2*(4.5 + 12 + 73.5) = 180
    #   alpha = 1 - (n-1)*8/180 = 1 - 40/180 = 7/9
    # nominal: observed 2, expected 2*(2*1 + 1*3 + 2*3) = 22: alpha = 1 - 5*2/22 = 6/11
    units = [[1, 1], [2, 3], [3, 3]]
    assert krippendorff_alpha(units, "ordinal") == pytest.approx(7 / 9)
    assert krippendorff_alpha(units, "nominal") == pytest.approx(6 / 11)


def test_undefined_when_every_label_is_the_same():
    assert math.isnan(cohen_kappa([[P, P]] * 5))
    assert math.isnan(fleiss_kappa([[P, P, P]] * 3))
    assert math.isnan(krippendorff_alpha([[P, P]] * 3))
    assert math.isnan(cohen_kappa([]))


def test_bootstrap_interval_brackets_the_value_and_is_seeded():
    a = agreement(COHEN * 3, "cohen_kappa", seed=1)
    assert a.value == pytest.approx(0.4) and a.units == 30
    assert a.low < a.value < a.high and -1 <= a.low and a.high <= 1
    assert agreement(COHEN * 3, "cohen_kappa", seed=1) == a
    assert agreement(COHEN * 3, "cohen_kappa", seed=2) != a
    f = agreement(FLEISS * 5, "fleiss_kappa")
    assert f.value == pytest.approx(1 / 3) and f.low < f.value < f.high


def test_perfect_agreement_has_no_room_to_move():
    units = [[P, P]] * 6 + [[F, F]] * 4
    a = agreement(units, "alpha_nominal")
    assert a.value == pytest.approx(1.0) and a.low == pytest.approx(1.0) and a.high == pytest.approx(1.0)


def test_paired_difference_sees_a_rater_that_got_better():
    human = [P] * 20 + [F] * 20
    before = [[h, P if i % 2 else F] for i, h in enumerate(human)]   # a judge alternating: kappa 0
    after = [[h, h] for h in human]                          # then agrees with every label: kappa 1
    d = paired_difference(before, after, "cohen_kappa")
    assert d.value == pytest.approx(1.0 - cohen_kappa(before))
    assert d.low > 0


def test_unknown_statistic_is_refused():
    with pytest.raises(ValueError, match="unknown agreement statistic"):
        agreement(COHEN, "spearman")
