"""Errors a user can act on. The CLI prints their message on one line and exits with the
error's ``exit_code``: 2 for bad input or usage (every :class:`AssayError` unless it says
otherwise), 3 for work that could not be completed as asked (:class:`RunIncomplete`)."""


class AssayError(Exception):
    """Base class for problems with the user's input or configuration."""

    exit_code = 2


class RunIncomplete(AssayError):
    """The input was fine but the work could not be completed as asked: a run stopped before
    its end (resumable), a metric errored on every row, a server could not start. The
    message says why and what to do; the CLI exits 3."""

    exit_code = 3


class InputError(AssayError):
    """Bad input data: names the source, the line (or row) and the field."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.source, self.line, self.field = source, line, field
        where = []
        if source:
            where.append(str(source))
        if line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field {field!r}")
        self.detail = message
        super().__init__(f"{': '.join([', '.join(where)] if where else [])}{': ' if where else ''}{message}")


class BudgetExceeded(RunIncomplete):
    """A run stopped by one of its caps (``max_cost``, ``max_errors``): the rows scored before
    are saved, the run is left ``interrupted`` with the reason, and a resume with a raised cap
    goes on. ``cap`` is ``"max_cost"`` or ``"max_errors"``; the CLI exits 3."""

    cap: str = ""


class CapReached(BaseException):
    """A cap reached inside one row's work (a red team's attacker spending under ``max_cost``).
    A BaseException, so that no row takes it for its own error: the engine stops the run as it
    does for :class:`BudgetExceeded` (the rows scored saved, the run ``interrupted`` with this
    message, :class:`BudgetExceeded` raised). ``cap`` names the cap (``"max_cost"``)."""

    def __init__(self, message: str, cap: str = "max_cost"):
        super().__init__(message)
        self.cap = cap
