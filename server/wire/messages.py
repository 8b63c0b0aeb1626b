"""Dataclasses for the PostgreSQL v3 protocol messages, frontend (received) and backend (sent).

Each message is a frozen, slotted dataclass holding decoded values (``str`` for protocol strings,
``bytes`` for raw payloads, ``None`` for SQL NULL). The byte layout lives in ``codec``; these
classes carry no encoding logic so the server can build and match them cheaply.

CopyData and CopyDone travel in both directions with the same layout, so one class serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum

# Protocol version 3.0 as sent in the StartupMessage: major in the high 16 bits, minor in the low.
PROTOCOL_3_0 = 3 << 16

# Request codes that stand in place of a protocol version in the untyped first packets.
CANCEL_REQUEST_CODE = 80877102
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104


class FrontendType(bytes, Enum):
    """Type bytes of the typed frontend messages."""

    BIND = b"B"
    CLOSE = b"C"
    COPY_DATA = b"d"
    COPY_DONE = b"c"
    COPY_FAIL = b"f"
    DESCRIBE = b"D"
    EXECUTE = b"E"
    FLUSH = b"H"
    PARSE = b"P"
    PASSWORD = b"p"
    QUERY = b"Q"
    SYNC = b"S"
    TERMINATE = b"X"


class BackendType(bytes, Enum):
    """Type bytes of the backend messages."""

    AUTHENTICATION = b"R"
    BACKEND_KEY_DATA = b"K"
    BIND_COMPLETE = b"2"
    CLOSE_COMPLETE = b"3"
    COMMAND_COMPLETE = b"C"
    COPY_DATA = b"d"
    COPY_DONE = b"c"
    COPY_IN_RESPONSE = b"G"
    COPY_OUT_RESPONSE = b"H"
    DATA_ROW = b"D"
    EMPTY_QUERY_RESPONSE = b"I"
    ERROR_RESPONSE = b"E"
    NEGOTIATE_PROTOCOL_VERSION = b"v"
    NO_DATA = b"n"
    NOTICE_RESPONSE = b"N"
    PARAMETER_DESCRIPTION = b"t"
    PARAMETER_STATUS = b"S"
    PARSE_COMPLETE = b"1"
    PORTAL_SUSPENDED = b"s"
    READY_FOR_QUERY = b"Z"
    ROW_DESCRIPTION = b"T"


class AuthCode(IntEnum):
    """The int32 subcode of an Authentication ('R') message."""

    OK = 0
    CLEARTEXT_PASSWORD = 3
    MD5_PASSWORD = 5
    SASL = 10
    SASL_CONTINUE = 11
    SASL_FINAL = 12


class FormatCode(IntEnum):
    """Format of a parameter, result column or COPY stream."""

    TEXT = 0
    BINARY = 1


class TransactionStatus(StrEnum):
    """The status byte of ReadyForQuery."""

    IDLE = "I"
    IN_TRANSACTION = "T"
    FAILED = "E"


class TargetKind(StrEnum):
    """What a Describe or Close names: a prepared statement or a portal."""

    STATEMENT = "S"
    PORTAL = "P"


class ErrorField(StrEnum):
    """Field codes of ErrorResponse and NoticeResponse."""

    SEVERITY = "S"
    SEVERITY_NONLOCALIZED = "V"
    CODE = "C"
    MESSAGE = "M"
    DETAIL = "D"
    HINT = "H"
    POSITION = "P"
    INTERNAL_POSITION = "p"
    INTERNAL_QUERY = "q"
    WHERE = "W"
    SCHEMA_NAME = "s"
    TABLE_NAME = "t"
    COLUMN_NAME = "c"
    DATA_TYPE_NAME = "d"
    CONSTRAINT_NAME = "n"
    FILE = "F"
    LINE = "L"
    ROUTINE = "R"


# --------------------------------------------------------------------------------------------
# Frontend messages (client -> server)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartupMessage:
    """First packet of a session: protocol version and the run-time parameters (user, ...)."""

    protocol_version: int = PROTOCOL_3_0
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def major(self) -> int:
        """Major protocol version (3 for every supported client)."""
        return self.protocol_version >> 16

    @property
    def minor(self) -> int:
        """Minor protocol version; above 0 the server answers NegotiateProtocolVersion."""
        return self.protocol_version & 0xFFFF


@dataclass(frozen=True, slots=True)
class SSLRequest:
    """Asks whether the server accepts TLS; the answer is the single byte 'S' or 'N'."""


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    """Asks whether the server accepts GSSAPI encryption; answered with a single 'N'."""


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Sent on a fresh connection to cancel the query running on another one."""

    pid: int
    secret: int


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    """Every 'p' message as received; what it means depends on the authentication exchange.

    The decoder cannot tell a password from a SASL message, so it always yields this class and
    the server reinterprets it with ``codec.parse_sasl_initial_response`` or
    ``codec.parse_sasl_response`` when SASL is under way. ``data`` is the whole body.
    """

    data: bytes


@dataclass(frozen=True, slots=True)
class SASLInitialResponse:
    """First SASL message: the chosen mechanism and the optional initial client response."""

    mechanism: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class SASLResponse:
    """Later SASL messages: the mechanism-specific payload."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Query:
    """Simple query protocol: one string that may hold several statements."""

    sql: str


@dataclass(frozen=True, slots=True)
class Parse:
    """Creates a prepared statement ('' is the unnamed one); OID 0 leaves a type to the server."""

    name: str
    query: str
    param_types: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Bind:
    """Creates a portal from a prepared statement and parameter values (None is NULL).

    ``param_formats`` has 0 entries (all text), 1 (applies to all) or one per parameter; the
    decoder checks that. ``result_formats`` follows the same rule against the result columns.
    """

    portal: str
    statement: str
    param_formats: tuple[int, ...] = ()
    params: tuple[bytes | None, ...] = ()
    result_formats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Describe:
    """Asks for ParameterDescription/RowDescription of a statement ('S') or portal ('P')."""

    kind: TargetKind
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    """Runs a portal; ``max_rows`` <= 0 means all rows, else PortalSuspended after that many."""

    portal: str
    max_rows: int = 0


@dataclass(frozen=True, slots=True)
class Close:
    """Closes a prepared statement ('S') or portal ('P')."""

    kind: TargetKind
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    """Ends an extended-protocol batch: commit if implicit, then ReadyForQuery."""


@dataclass(frozen=True, slots=True)
class Flush:
    """Asks the server to send everything produced so far (asyncpg relies on it)."""


@dataclass(frozen=True, slots=True)
class Terminate:
    """The client is closing the connection."""


@dataclass(frozen=True, slots=True)
class CopyData:
    """A chunk of COPY data, in either direction."""

    data: bytes


@dataclass(frozen=True, slots=True)
class CopyDone:
    """End of COPY data, in either direction."""


@dataclass(frozen=True, slots=True)
class CopyFail:
    """The client aborts COPY FROM STDIN with an error message."""

    message: str


# --------------------------------------------------------------------------------------------
# Backend messages (server -> client)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthenticationOk:
    """Authentication succeeded."""


@dataclass(frozen=True, slots=True)
class AuthenticationCleartextPassword:
    """Asks for the password in clear text."""


@dataclass(frozen=True, slots=True)
class AuthenticationMD5Password:
    """Asks for md5(md5(password + user) + salt); ``salt`` is 4 random bytes."""

    salt: bytes


@dataclass(frozen=True, slots=True)
class AuthenticationSASL:
    """Starts SASL, listing the mechanisms the server accepts (e.g. 'SCRAM-SHA-256')."""

    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticationSASLContinue:
    """A SASL challenge (SCRAM server-first-message)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class AuthenticationSASLFinal:
    """The SASL outcome (SCRAM server-final-message, 'v=<signature>')."""

    data: bytes


@dataclass(frozen=True, slots=True)
class ParameterStatus:
    """Reports a run-time parameter (server_version, client_encoding, ...)."""

    name: str
    value: str


@dataclass(frozen=True, slots=True)
class BackendKeyData:
    """The (pid, secret) a client needs to send a CancelRequest; both unsigned 32-bit."""

    pid: int
    secret: int


@dataclass(frozen=True, slots=True)
class ReadyForQuery:
    """The server is ready for a new query; carries the transaction status."""

    status: TransactionStatus = TransactionStatus.IDLE


@dataclass(frozen=True, slots=True)
class FieldDescription:
    """One column of a RowDescription, fields in wire order.

    ``table_oid``/``column_attr`` are 0 for computed columns (pgjdbc issues metadata queries
    only when they are non-zero); ``type_size`` is negative for variable-length types and
    ``type_modifier`` is -1 when the type has none.
    """

    name: str
    table_oid: int
    column_attr: int
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1
    format: int = FormatCode.TEXT


@dataclass(frozen=True, slots=True)
class RowDescription:
    """Describes the columns of the rows that follow (or would follow)."""

    fields: tuple[FieldDescription, ...]


@dataclass(frozen=True, slots=True)
class DataRow:
    """One result row; each value is already encoded in its column's format, None is NULL."""

    values: tuple[bytes | None, ...]


@dataclass(frozen=True, slots=True)
class CommandComplete:
    """A statement finished; ``tag`` is e.g. 'SELECT 3', 'INSERT 0 1', 'BEGIN'."""

    tag: str


@dataclass(frozen=True, slots=True)
class EmptyQueryResponse:
    """Answer to an empty query string, instead of CommandComplete."""


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """An error; ``severity`` is ERROR, FATAL or PANIC and ``code`` the SQLSTATE.

    ``fields`` holds any further field (keyed by its one-letter code, see ``ErrorField``);
    the named attributes take precedence over the same codes in it.
    """

    severity: str
    code: str
    message: str
    detail: str | None = None
    hint: str | None = None
    position: int | None = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NotificationResponse:
    """A NOTIFY delivered to a session that LISTENs on ``channel`` (``pid``: the notifier's
    backend process id)."""

    pid: int
    channel: str
    payload: str


@dataclass(frozen=True, slots=True)
class NoticeResponse:
    """A notice (WARNING, NOTICE, DEBUG, INFO, LOG); same layout as ErrorResponse."""

    severity: str
    code: str
    message: str
    detail: str | None = None
    hint: str | None = None
    position: int | None = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParseComplete:
    """Parse succeeded."""


@dataclass(frozen=True, slots=True)
class BindComplete:
    """Bind succeeded."""


@dataclass(frozen=True, slots=True)
class CloseComplete:
    """Close succeeded (also for names that did not exist)."""


@dataclass(frozen=True, slots=True)
class NoData:
    """Describe of a statement or portal that returns no rows."""


@dataclass(frozen=True, slots=True)
class ParameterDescription:
    """The parameter types of a prepared statement (clients such as asyncpg encode by them)."""

    oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PortalSuspended:
    """Execute stopped at its row limit; the portal can be executed again."""


@dataclass(frozen=True, slots=True)
class CopyInResponse:
    """The server is ready to receive COPY data (overall format and one format per column)."""

    format: int = FormatCode.TEXT
    column_formats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CopyOutResponse:
    """The server is about to send COPY data (overall format and one format per column)."""

    format: int = FormatCode.TEXT
    column_formats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class NegotiateProtocolVersion:
    """The newest minor version the server supports and the startup options it did not know."""

    newest_minor: int
    unrecognized_options: tuple[str, ...] = ()


FrontendMessage = (
    StartupMessage
    | SSLRequest
    | GSSENCRequest
    | CancelRequest
    | PasswordMessage
    | SASLInitialResponse
    | SASLResponse
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | CopyData
    | CopyDone
    | CopyFail
)
"""Anything the client sends (SASL messages only ever come out of the ``parse_sasl_*`` helpers)."""

BackendMessage = (
    AuthenticationOk
    | AuthenticationCleartextPassword
    | AuthenticationMD5Password
    | AuthenticationSASL
    | AuthenticationSASLContinue
    | AuthenticationSASLFinal
    | ParameterStatus
    | BackendKeyData
    | ReadyForQuery
    | RowDescription
    | DataRow
    | CommandComplete
    | EmptyQueryResponse
    | ErrorResponse
    | NoticeResponse
    | NotificationResponse
    | ParseComplete
    | BindComplete
    | CloseComplete
    | NoData
    | ParameterDescription
    | PortalSuspended
    | CopyInResponse
    | CopyOutResponse
    | CopyData
    | CopyDone
    | NegotiateProtocolVersion
)
"""Anything the server sends."""
