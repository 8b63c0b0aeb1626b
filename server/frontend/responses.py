"""ErrorResponse and NoticeResponse from the engine's errors and notices."""

from __future__ import annotations

from percolator.server.engine_api import Notice
from percolator.server.sql.errors import SqlError
from percolator.server.wire.messages import ErrorResponse, NoticeResponse

ADMIN_SHUTDOWN_MESSAGE = "terminating connection due to administrator command"
IDLE_IN_TRANSACTION_MESSAGE = "terminating connection due to idle-in-transaction timeout"
TOO_MANY_CLIENTS_MESSAGE = "sorry, too many clients already"


def error_response(error: SqlError, severity: str | None = None) -> ErrorResponse:
    """The ErrorResponse reporting ``error`` (its own severity unless one is given)."""
    return ErrorResponse(
        severity=severity or error.severity or "ERROR",
        code=error.sqlstate,
        message=error.message,
        detail=error.detail,
        hint=error.hint,
        position=error.position,
    )


def fatal(sqlstate: str, message: str) -> ErrorResponse:
    """A FATAL ErrorResponse (the connection closes after it)."""
    return ErrorResponse(severity="FATAL", code=sqlstate, message=message)


def notice_response(notice: Notice) -> NoticeResponse:
    """The NoticeResponse of an engine notice."""
    return NoticeResponse(severity=notice.severity, code=notice.sqlstate, message=notice.message)
