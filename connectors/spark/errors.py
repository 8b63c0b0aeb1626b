"""The one error type the connector raises, carrying a SQLSTATE.

Spark shows an exception raised in a Python worker as its type and text, so the text starts with
the SQLSTATE (``[23505] duplicate key value ...``): the same codes a SQL client would get.
"""

from __future__ import annotations

from percolator.server.sql.errors import SqlError, from_exception

INVALID_OPTION = "22023"
CONNECTION_FAILURE = "08006"


class PercolatorSparkError(Exception):
    """A connector error: bad options, a missing table or column, a type mismatch, an
    unreachable store, a constraint violation, a failed commit."""

    def __init__(
        self, sqlstate: str, message: str, detail: str | None = None, hint: str | None = None
    ) -> None:
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint
        super().__init__(sqlstate, message, detail, hint)  # args: what unpickling passes back

    def __str__(self) -> str:
        text = f"[{self.sqlstate}] {self.message}"
        if self.detail:
            text += f" ({self.detail})"
        if self.hint:
            text += f" Hint: {self.hint}"
        return text

    @classmethod
    def of(cls, exc: BaseException, context: str = "") -> PercolatorSparkError:
        """The connector error for any exception (its SQLSTATE kept when it has one)."""
        if isinstance(exc, PercolatorSparkError):
            return exc
        err: SqlError = from_exception(exc)
        message = f"{context}: {err.message}" if context else err.message
        return cls(err.sqlstate, message, detail=err.detail, hint=err.hint)


def invalid_option(message: str, hint: str | None = None) -> PercolatorSparkError:
    """22023 for an option that is missing or malformed."""
    return PercolatorSparkError(INVALID_OPTION, message, hint=hint)
