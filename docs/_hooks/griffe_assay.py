"""A Griffe extension that makes assay's docstrings render as Markdown in the docs site.

assay's docstrings are written for ``help()`` and Sphinx-style readers: cross-references are
reST roles (``:class:`~assay.results.EvalResult```, ``:func:`evaluate```). Each role becomes an
*optional* autorefs reference: a link when the target is on the site's API pages, plain code
when it is not (an internal module), so ``mkdocs build --strict`` fails only on references the
site promises. A function whose docstring is completed at import time (``evaluate``'s
parameters, appended by its ``@documented`` decorator) gets the docstring Python sees.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any

import griffe

# :class:`~a.b.C`, :func:`f`, :mod:`a.b`, :meth:`C.m`, :data:`X`, :attr:`C.x`, :exc:`E`
ROLE = re.compile(r":(?:class|func|mod|meth|data|attr|exc|obj):`(?P<tilde>~?)(?P<target>[\w.]+)(?:\(\))?`")
# decorators that rewrite the docstring at import time: take the runtime one for these
RUNTIME_DOCSTRING = frozenset({"documented"})


def qualified(obj: griffe.Object, target: str) -> str:
    """``target`` as a full path, looked up from ``obj`` outwards (``missing`` in a class's
    docstring is that class's method); a path that is found nowhere is kept as written."""
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            return scope[target].path
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            scope = scope.parent
    return target


def autorefs(obj: griffe.Object, text: str) -> str:
    """Every reST role in ``text`` as an optional autorefs reference (``~``: the last name shown)."""

    def one(match: re.Match[str]) -> str:
        target = match["target"]
        title = target.rsplit(".", 1)[-1] if match["tilde"] else target
        return (f'<autoref identifier="{html.escape(qualified(obj, target))}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")

    return ROLE.sub(one, text)


def runtime_docstring(obj: griffe.Object) -> str | None:
    """The docstring the imported object has, for a function whose decorator builds it."""
    if not isinstance(obj, griffe.Function):
        return None
    names = {str(d.value).rsplit(".", 1)[-1] for d in obj.decorators}
    if not names & RUNTIME_DOCSTRING:
        return None
    value: Any = importlib.import_module(obj.module.path)
    for part in obj.path[len(obj.module.path) + 1:].split("."):
        value = getattr(value, part)
    return inspect.cleandoc(value.__doc__ or "")


class AssayDocstrings(griffe.Extension):
    """Rewrite reST roles as autorefs and load import-time docstrings (see the module docstring)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        text = runtime_docstring(obj) or obj.docstring.value
        obj.docstring.value = autorefs(obj, text)
