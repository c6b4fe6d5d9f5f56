"""The tests' llama.cpp server launcher (tests/helpers/llama_server_fast.py) ranks a vocabulary
exactly as llama-cpp-python's ``list(sorted(zip(logprobs, range(n)), reverse=True))`` does: the
same order (ties by the higher token id first), the same tuples, the same element types, for the
first ``k`` (what the server reads) and for the whole list."""

from __future__ import annotations

import builtins

import numpy as np

from tests.helpers import llama_server_fast as fast


def _both(values, *, reverse: bool = True) -> tuple[object, list]:
    """llama-cpp-python's ``list(sorted(zip(values, range(n)), reverse=True))``, fast and builtin."""
    mine = fast._list(fast._sorted(fast._zip(values, range(len(values))), reverse=reverse))
    theirs = list(builtins.sorted(builtins.zip(values, range(len(values))), reverse=reverse))
    return mine, theirs


def _same(mine: list, theirs: list) -> None:
    assert mine == theirs
    assert [(type(v), type(i)) for v, i in mine] == [(type(v), type(i)) for v, i in theirs]


def test_a_numpy_row_is_ranked_as_sorted_ranks_it_ties_and_types_included():
    rng = np.random.default_rng(7)
    row = rng.normal(size=5000).astype(np.float32)
    row[::50] = row[3]                     # ties
    row[7] = -np.inf
    row[100:110] = row.max()               # ties at the top
    mine, theirs = _both(row)
    for k in (0, 1, 5, 12, 20, 5000, 6000):
        _same(mine[:k], theirs[:k])
    _same(list(mine), theirs)
    assert len(mine) == 5000 and mine[3] == theirs[3] and mine[-1] == theirs[-1]


def test_a_list_is_ranked_as_sorted_ranks_it():
    rng = np.random.default_rng(8)
    values = [float(round(x, 1)) for x in rng.normal(size=3000)]      # many ties
    mine, theirs = _both(values)
    for k in (1, 3, 40):
        _same(mine[:k], theirs[:k])
    _same(list(mine), theirs)
    mine, theirs = _both(values, reverse=False)
    _same(mine[:7], theirs[:7])


def test_nan_is_left_to_pythons_sort():
    values = np.arange(2000, dtype=np.float32)
    values[5] = np.nan
    mine, theirs = _both(values)
    assert repr(mine[:4]) == repr(theirs[:4]) and repr(list(mine)) == repr(theirs)


def test_other_calls_are_the_builtins():
    assert list(fast._zip([1, 2], [3, 4])) == [(1, 3), (2, 4)]
    assert list(fast._zip(range(3), range(3))) == [(0, 0), (1, 1), (2, 2)]      # too short to be a vocabulary
    assert fast._sorted([3, 1, 2], reverse=True) == [3, 2, 1]
    assert fast._list("ab") == ["a", "b"] and fast._list() == [] and type(fast._list((1,))) is list
    assert isinstance([], fast._list) and not isinstance((), fast._list) and issubclass(list, fast._list)
    assert fast._list[int] == list[int]
    assert fast._sorted(fast._zip(list(range(2000)), range(2000)), key=lambda t: -t[1])[0] == (1999, 1999)
