"""ErrorResponse and NoticeResponse from the engine's errors and notices."""

from __future__ import annotations

from percolator.server.engine_api import Notice
from percolator.server.sql.errors import ErrorObject, SqlError
from percolator.server.sql.schemas import bare, split
from percolator.server.wire.messages import ErrorField, ErrorResponse, NoticeResponse

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
        fields=_object_fields(error.about, error.context),
    )


def _object_fields(about: ErrorObject | None, context: str | None = None) -> dict[str, str]:
    """The ErrorResponse fields naming the object (and CONTEXT, where given)."""
    if about is None:
        return {} if context is None else {ErrorField.WHERE: context}
    # A table of a schema other than public is named by its catalog key ``schema.table``
    # (server/sql/schemas.py): the fields split it.
    schema, table = about.schema, about.table
    if about.schema == "public" and "." in about.table:
        schema, table = split(about.table)
    fields = {ErrorField.SCHEMA_NAME: schema, ErrorField.TABLE_NAME: table}
    if about.column is not None:
        fields[ErrorField.COLUMN_NAME] = about.column
    if about.constraint is not None:
        fields[ErrorField.CONSTRAINT_NAME] = bare(about.constraint)
    if context is not None:
        fields[ErrorField.WHERE] = context
    return {str(k): v for k, v in fields.items()}


def fatal(sqlstate: str, message: str) -> ErrorResponse:
    """A FATAL ErrorResponse (the connection closes after it)."""
    return ErrorResponse(severity="FATAL", code=sqlstate, message=message)


def notice_response(notice: Notice) -> NoticeResponse:
    """The NoticeResponse of an engine notice."""
    return NoticeResponse(
        severity=notice.severity,
        code=notice.sqlstate,
        message=notice.message,
        detail=notice.detail,
        hint=notice.hint,
        fields=_object_fields(None, notice.context),
    )
