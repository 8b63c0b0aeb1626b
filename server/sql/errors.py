"""The error a client sees: an SQLSTATE, a message, and optionally where in the SQL text.

Every layer above the transaction layer raises :class:`SqlError` for anything a user can cause;
the front end turns it into an ErrorResponse and the connection stays usable. Errors of the
transaction layer carry their own SQLSTATE (``TxnError.sqlstate``) and are translated by
:func:`from_exception`.
"""

from __future__ import annotations

from dataclasses import dataclass

# SQLSTATEs used across the SQL layers, named as in Postgres's errcodes.txt.
SUCCESSFUL_COMPLETION = "00000"
WARNING = "01000"
FEATURE_NOT_SUPPORTED = "0A000"
INVALID_TRANSACTION_STATE = "25000"
ACTIVE_SQL_TRANSACTION = "25001"
NO_ACTIVE_SQL_TRANSACTION = "25P01"
IN_FAILED_SQL_TRANSACTION = "25P02"
READ_ONLY_SQL_TRANSACTION = "25006"
SERIALIZATION_FAILURE = "40001"
SYNTAX_ERROR = "42601"
UNDEFINED_TABLE = "42P01"
UNDEFINED_COLUMN = "42703"
UNDEFINED_FUNCTION = "42883"
AMBIGUOUS_FUNCTION = "42725"
DUPLICATE_FUNCTION = "42723"
UNDEFINED_OBJECT = "42704"
DUPLICATE_TABLE = "42P07"
DUPLICATE_COLUMN = "42701"
DUPLICATE_OBJECT = "42710"
AMBIGUOUS_COLUMN = "42702"
DATATYPE_MISMATCH = "42804"
GROUPING_ERROR = "42803"
INVALID_OBJECT_DEFINITION = "42P17"
WINDOWING_ERROR = "42P20"
INVALID_COLUMN_REFERENCE = "42P10"
UNDEFINED_PARAMETER = "42P02"
INDETERMINATE_DATATYPE = "42P18"
INVALID_TABLE_DEFINITION = "42P16"
INSUFFICIENT_PRIVILEGE = "42501"
CANNOT_COERCE = "42846"
WRONG_OBJECT_TYPE = "42809"
PROTOCOL_VIOLATION = "08P01"
INVALID_SQL_STATEMENT_NAME = "26000"
INVALID_CURSOR_NAME = "34000"
DUPLICATE_PREPARED_STATEMENT = "42P05"
DUPLICATE_CURSOR = "42P03"
OBJECT_NOT_IN_PREREQUISITE_STATE = "55000"
NOT_NULL_VIOLATION = "23502"
UNIQUE_VIOLATION = "23505"
CHECK_VIOLATION = "23514"
FOREIGN_KEY_VIOLATION = "23503"
DATA_EXCEPTION = "22000"
STRING_DATA_RIGHT_TRUNCATION = "22001"
NUMERIC_VALUE_OUT_OF_RANGE = "22003"
INVALID_DATETIME_FORMAT = "22007"
DATETIME_FIELD_OVERFLOW = "22008"
DIVISION_BY_ZERO = "22012"
INVALID_TEXT_REPRESENTATION = "22P02"
BAD_COPY_FORMAT = "22P04"
INVALID_BINARY_REPRESENTATION = "22P03"
INVALID_PARAMETER_VALUE = "22023"
CARDINALITY_VIOLATION = "21000"
INVALID_REGULAR_EXPRESSION = "2201B"
CHARACTER_NOT_IN_REPERTOIRE = "22021"
UNTRANSLATABLE_CHARACTER = "22P05"
NULL_VALUE_NOT_ALLOWED = "22004"
INVALID_ESCAPE_SEQUENCE = "22025"
QUERY_CANCELED = "57014"
ADMIN_SHUTDOWN = "57P01"
TOO_MANY_CONNECTIONS = "53300"
PROGRAM_LIMIT_EXCEEDED = "54000"
INVALID_PASSWORD = "28P01"
INVALID_AUTHORIZATION_SPECIFICATION = "28000"
INVALID_CATALOG_NAME = "3D000"
INTERNAL_ERROR = "XX000"
IDLE_IN_TRANSACTION_TIMEOUT = "25P03"
LOCK_NOT_AVAILABLE = "55P03"
OBJECT_IN_USE = "55006"
DUPLICATE_DATABASE = "42P04"
DEPENDENT_OBJECTS_STILL_EXIST = "2BP01"
INVALID_FOREIGN_KEY = "42830"
INVALID_SCHEMA_NAME = "3F000"


@dataclass(frozen=True)
class ErrorObject:
    """The database object an error is about, as Postgres reports it in an ErrorResponse's
    schema, table, column and constraint name fields (drivers expose them: psycopg's
    ``Diagnostic.constraint_name``, asyncpg's ``constraint_name``, pgjdbc's
    ``ServerErrorMessage.getConstraint``)."""

    table: str
    column: str | None = None
    constraint: str | None = None
    schema: str = "public"


@dataclass
class SqlError(Exception):
    """An error reported to the client as an ErrorResponse.

    ``position`` is the 1-based character offset in the statement text (Postgres's ``P``
    field), when the error can be pinned to one; ``about`` the object a constraint violation
    is about.
    """

    sqlstate: str
    message: str
    position: int | None = None
    detail: str | None = None
    hint: str | None = None
    severity: str = "ERROR"
    about: ErrorObject | None = None
    context: str | None = None
    """Where it happened, Postgres's CONTEXT (``COPY t, line 3``)."""

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def undetermined_polymorphic() -> SqlError:
    """42804 as Postgres reports an ``anyelement`` / ``anyarray`` argument that is only an
    untyped literal (or a parameter, which is what a lifted literal is)."""
    return SqlError(
        DATATYPE_MISMATCH, "could not determine polymorphic type because input has type unknown"
    )


def unsupported(construct: str) -> SqlError:
    """0A000 naming the construct that is not supported."""
    return SqlError(FEATURE_NOT_SUPPORTED, f"{construct} is not supported")


def from_exception(exc: BaseException) -> SqlError:
    """The SqlError for any exception raised while running a statement.

    Transaction-layer errors keep their SQLSTATE (40001 for conflicts, 55P03 for lock waits, ...);
    anything unexpected becomes XX000 with its text, so the client sees a message instead of a
    dropped connection.
    """
    if isinstance(exc, SqlError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate == SERIALIZATION_FAILURE:
        # Postgres's words, which clients and retry loops look for; the transaction layer's
        # account (which cell, which timestamps) goes to DETAIL.
        return SqlError(
            SERIALIZATION_FAILURE,
            getattr(exc, "pg_message", "could not serialize access due to concurrent update"),
            detail=str(exc),
            hint=getattr(exc, "pg_hint", None),
        )
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        detail = getattr(exc, "detail", None)
        return SqlError(sqlstate, str(exc) or type(exc).__name__, detail=detail)
    return SqlError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")
