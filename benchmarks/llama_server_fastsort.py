"""llama-cpp-python's OpenAI-compatible server with its top-log-probability sort done by numpy.

For every echoed token of a ``/v1/completions`` request with ``logprobs``, llama-cpp-python 0.3.x sorts the
whole vocabulary in Python (``sorted(zip(logprobs, range(n)), reverse=True)``, 262,144 entries for Gemma 3)
only to keep the first ``logprobs`` entries: about half a second a token on a loaded 2-core machine, so a
log-likelihood request takes close to a minute. This launcher gives ``llama_cpp.llama`` a ``sorted`` that,
for exactly that call, returns the same leading entries in the same order (largest first, a tie going to the
larger token id, as a reversed sort of ``(logprob, id)`` pairs orders them) from ``numpy.argpartition``; every
other call goes to the builtin. Nothing else changes: the numbers the server returns are the ones it computed.

    python benchmarks/llama_server_fastsort.py --model M.gguf ...   # the arguments of python -m llama_cpp.server
"""

from __future__ import annotations

import builtins
import runpy
import sys

KEEP = 64      # leading entries returned; callers read ``[:logprobs]`` (lm-eval asks for 1, assay for at most 20)


def leading(values: object, keep: int = KEEP) -> list[tuple[object, int]]:
    """``sorted(zip(values, range(len(values))), reverse=True)[:keep]`` (and the ties at its end) for a 1-D
    numpy array, without sorting the rest."""
    import numpy as np

    arr = np.asarray(values)
    if arr.size <= keep:
        idx = np.arange(arr.size)
    else:
        cut = np.partition(arr, arr.size - keep)[arr.size - keep]      # the keep-th largest value
        idx = np.flatnonzero(arr >= cut)                               # all of them, ties at the cut included
    order = np.lexsort((-idx, -arr[idx]))                              # value down, then id down
    return [(values[int(i)], int(i)) for i in idx[order]]


def numpy_source(it: object) -> tuple[object, int] | None:
    """The array behind ``zip(array, range(len(array)))`` when that is what ``it`` is, and its length."""
    import numpy as np

    if type(it) is not zip:
        return None
    parts = it.__reduce__()[1]
    if len(parts) != 2 or type(parts[0]).__name__ != "iterator" or type(parts[1]).__name__ != "range_iterator":
        return None
    fn, args, pos = parts[0].__reduce__()[:3]
    rfn, rargs, rpos = parts[1].__reduce__()[:3]
    arr, rng = args[0], rargs[0]
    if not (isinstance(arr, np.ndarray) and arr.ndim == 1 and pos == 0 and rpos == 0
            and rng == range(len(arr))):
        return None
    return arr, len(arr)


def fast_sorted(iterable: object, /, *, key: object = None, reverse: bool = False) -> list:
    if key is None and reverse:
        src = numpy_source(iterable)
        if src is not None:
            return leading(src[0])
    return builtins.sorted(iterable, key=key, reverse=reverse)  # type: ignore[arg-type]


def main() -> None:
    import llama_cpp.llama

    llama_cpp.llama.sorted = fast_sorted      # the module's global name, looked up before the builtin
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
