"""``python -m llama_cpp.server`` for the tests, with one change that only makes it faster: the
ranking of the whole vocabulary by log-probability that llama-cpp-python does for every token it
returns log-probabilities for.

llama-cpp-python finds a token's ``top_logprobs`` as ``list(sorted(zip(logprobs,
range(n_vocab)), reverse=True))[:k]``: 262,144 tuples sorted in Python for Gemma 3, about half a
second of CPU per token, so a log-likelihood request that echoes a 40-token prompt spends some
20 s there and the llama.cpp tests spent most of their time in it. Here that expression gives
the same ``k`` ``(logprob, token id)`` tuples (the same values, order, ties and element types:
ascending by value then id, reversed, as ``sorted(..., reverse=True)`` orders tuples), worked out
by numpy for those ``k`` alone; read any other way, the whole list is made. Every other call of
``zip``, ``sorted`` and ``list`` in ``llama_cpp.llama`` is the builtin's. The server, its model, its arguments and every byte of its answers are otherwise
llama-cpp-python's own.

Run as a script: ``python tests/helpers/llama_server_fast.py --model ... (llama_cpp.server's
arguments)``."""

from __future__ import annotations

import builtins
import runpy
import sys
from typing import Any

_MIN_VOCAB = 1000      # a vocabulary ranking; anything shorter is left to the builtins


class _VocabZip:
    """``zip(logprobs, range(len(logprobs)))``, remembered so that ``sorted`` can rank it fast; it
    iterates exactly as the builtin ``zip`` of the two would."""

    def __init__(self, values: Any, ids: range):
        self.values, self.ids = values, ids

    def __iter__(self) -> Any:
        return builtins.zip(self.values, self.ids)


def _zip(*args: Any, **kw: Any) -> Any:
    if not kw and len(args) == 2 and isinstance(args[1], range) and args[1].start == 0 and args[1].step == 1:
        values, ids = args
        n = len(ids)
        if n >= _MIN_VOCAB and hasattr(values, "__len__") and len(values) == n:
            return _VocabZip(values, ids)
    return builtins.zip(*args, **kw)


class _Ranked:
    """``sorted(zip(values, range(n)), reverse=reverse)``, worked out only as far as it is read:
    ``ranked[:k]`` (all that llama-cpp-python reads of it) ranks the top ``k`` alone; anything else
    makes the whole list."""

    def __init__(self, values: Any, reverse: bool):
        self.values, self.reverse = values, reverse
        self._all: list | None = None

    def _items(self, order: Any) -> list:
        import numpy as np

        ids = order.tolist()
        # the elements zip would have given: numpy scalars from an array row, the list's own items from a list
        if isinstance(self.values, np.ndarray):
            return list(builtins.zip(list(self.values[order]), ids))
        return [(self.values[i], i) for i in ids]

    def _ranked(self, arr: Any, ids: Any) -> Any:
        import numpy as np

        order = ids[np.lexsort((ids, arr[ids]))]       # ascending by value, then by index
        return order[::-1] if self.reverse else order

    def all(self) -> list:
        import numpy as np

        if self._all is None:
            arr = np.asarray(self.values)
            if np.isnan(arr).any():     # NaN has no place in an order: leave it to Python's sort
                self._all = builtins.sorted(builtins.zip(self.values, range(len(arr))), reverse=self.reverse)
            else:
                self._all = self._items(self._ranked(arr, np.arange(len(arr))))
        return self._all

    def top(self, k: int) -> list:
        import numpy as np

        arr = np.asarray(self.values)
        n = len(arr)
        if k >= n or not self.reverse or np.isnan(arr).any():
            return self.all()[:k]
        if k <= 0:
            return []
        kth = np.partition(arr, n - k)[n - k]                # the k-th largest value
        ties_in = np.flatnonzero(arr >= kth)                 # every index that can rank in the top k
        return self._items(self._ranked(arr, ties_in)[:k])

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice) and item.start in (None, 0) and item.step in (None, 1) \
                and isinstance(item.stop, int) and item.stop >= 0:
            return self.top(item.stop)
        return self.all()[item]

    def __iter__(self) -> Any:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self.values)


def _sorted(iterable: Any, /, *, key: Any = None, reverse: bool = False) -> Any:
    if isinstance(iterable, _VocabZip) and key is None:
        return _Ranked(iterable.values, reverse)
    return builtins.sorted(iterable, key=key, reverse=reverse)


class _ListType(type):
    """The type of :class:`_list`: ``_list(ranked)`` keeps a ranking lazy; any other call, and
    ``isinstance``/``issubclass`` checks against it, are the builtin ``list``'s."""

    def __call__(cls, *args: Any) -> Any:
        if len(args) == 1 and isinstance(args[0], _Ranked):
            return args[0]
        return builtins.list(*args)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.list)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, builtins.list)

    def __getitem__(cls, item: Any) -> Any:
        return builtins.list[item]


class _list(metaclass=_ListType):  # noqa: N801 - it stands in for ``list``
    """``list`` in ``llama_cpp.llama``: ``list(sorted(zip(...)))`` keeps the ranking lazy."""


def patch() -> None:
    """Give ``llama_cpp.llama`` the fast ``zip``, ``sorted`` and ``list`` (module globals shadow the builtins)."""
    import llama_cpp.llama as llama

    llama.zip = _zip          # type: ignore[attr-defined]
    llama.sorted = _sorted    # type: ignore[attr-defined]
    llama.list = _list        # type: ignore[attr-defined]


def main() -> None:
    patch()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
