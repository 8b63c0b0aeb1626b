"""What the wire front end needs from the SQL engine, and nothing more.

The front end (``percolator.server.frontend``) owns sockets, message framing, authentication
and the extended-protocol bookkeeping (named statements, portals, Sync/Flush); the engine
(``percolator.server.session``) owns SQL: parsing, binding, transactions, execution. They meet
here. Values cross this boundary as Python objects (see ``percolator.server.sql.types`` for the
representation of each SQL type); the front end encodes and decodes them with the type codecs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from percolator.server.sql.types import SqlType


@dataclass(frozen=True, slots=True)
class ResultColumn:
    """One column of a result: what RowDescription says of it."""

    name: str
    type: SqlType
    table_oid: int = 0
    column_number: int = 0


@dataclass(frozen=True, slots=True)
class Notice:
    """A NoticeResponse to send before the statement's completion."""

    sqlstate: str
    message: str
    severity: str = "NOTICE"
    detail: str | None = None
    hint: str | None = None
    context: str | None = None
    """Where it was raised (Postgres's CONTEXT: a PL/pgSQL RAISE's line)."""


class CopyIn(Protocol):
    """``COPY ... FROM STDIN``: the front end sends CopyInResponse, then feeds the data."""

    binary: bool
    column_count: int

    async def write(self, data: bytes) -> None:
        """One CopyData payload (rows may span payloads)."""

    async def finish(self) -> str:
        """CopyDone arrived: apply the rows; returns the command tag (``COPY n``)."""

    async def fail(self, message: str) -> None:
        """CopyFail arrived, or the connection broke: discard everything written."""


class CopyOut(Protocol):
    """``COPY ... TO STDOUT``: the front end sends CopyOutResponse, the chunks, CopyDone."""

    binary: bool
    column_count: int
    command_tag: str
    """Valid once :meth:`chunks` is exhausted."""

    def chunks(self) -> AsyncIterator[bytes]:
        """The CopyData payloads, in order."""


class Execution(Protocol):
    """A statement being executed (the engine side of a portal)."""

    columns: list[ResultColumn] | None
    """None when the statement returns no rows (the front end answers Describe with NoData)."""
    copy: CopyIn | CopyOut | None
    """Set for COPY FROM STDIN / TO STDOUT; then the rows API is unused."""
    notices: list[Notice]

    async def fetch(self, max_rows: int) -> list[tuple[object, ...]]:
        """Up to ``max_rows`` more rows (0: all that remain); an empty list once done."""

    @property
    def done(self) -> bool:
        """True when every row has been fetched (or the statement returns no rows)."""

    @property
    def command_tag(self) -> str:
        """The CommandComplete tag (``SELECT 3``, ``INSERT 0 1``, ...); valid once done."""

    async def close(self) -> None:
        """Release what the execution holds (a portal closed before it was exhausted)."""


@dataclass(frozen=True)
class ParsedStatement:
    """One statement of a query string, as split and parsed by the engine."""

    sql: str
    """The statement's own text (no trailing semicolon)."""
    empty: bool = False
    """True for an empty statement (EmptyQueryResponse)."""
    payload: object = None
    """Engine-private parse result."""


@dataclass
class PreparedStatement:
    """A parsed and bound statement: what Parse created and Describe('S') reports."""

    statement: ParsedStatement
    param_types: list[SqlType]
    columns: list[ResultColumn] | None
    payload: object = None
    """Engine-private plan."""
    param_oids_requested: list[int] = field(default_factory=list)
    wire_cache: dict[object, object] = field(default_factory=dict, repr=False, compare=False)
    """Front-end-private: what its results look like on the wire, per result format request
    (so that each execution of a prepared statement does not work it out again)."""


class Session(Protocol):
    """One client connection's SQL state: transaction, settings, prepared statements."""

    def idle_in_transaction_timeout_s(self) -> float:
        """The session's ``idle_in_transaction_session_timeout`` in seconds (0: not set)."""

    @property
    def transaction_status(self) -> str:
        """``I`` idle, ``T`` in a transaction block, ``E`` in a failed transaction block."""

    def startup_parameters(self) -> list[tuple[str, str]]:
        """The ParameterStatus messages to send after AuthenticationOk, in order."""

    def take_parameter_changes(self) -> list[tuple[str, str]]:
        """ParameterStatus messages owed since the last call (after ``SET application_name``)."""

    def take_deallocations(self) -> list[str | None]:
        """Named statements that SQL ``DEALLOCATE`` removed since the last call (None: all of
        them); the front end drops them from its table of prepared statements."""

    def parse(self, sql: str) -> list[ParsedStatement]:
        """Split a query string into statements and parse them; raises SqlError (42601 with a
        position) for bad syntax. An empty string gives one empty statement."""

    async def prepare(
        self, statement: ParsedStatement, param_oids: Sequence[int]
    ) -> PreparedStatement:
        """Bind a statement: resolve names, infer parameter types (an OID of 0 in
        ``param_oids`` or a missing one is inferred), plan. Raises SqlError."""

    async def execute(self, prepared: PreparedStatement, params: Sequence[object]) -> Execution:
        """Start executing a prepared statement with decoded parameter values. Raises SqlError.

        Outside an explicit transaction block, the statement joins the implicit transaction
        that :meth:`sync` ends."""

    def on_notification(self, sink: Callable[[int, str, str], None]) -> None:
        """Have ``sink(pid, channel, payload)`` called for each notification on a channel the
        session listens to (the front end sends it to the client when it may)."""

    def cursor_columns(self, name: str) -> list[ResultColumn] | None:
        """The result columns of the SQL cursor ``name`` (DECLARE), or None if none is open
        (a Describe of a portal the protocol did not bind)."""

    def share_portal(
        self,
        name: str,
        statement: str,
        columns: list[ResultColumn],
        rows: AsyncIterator[tuple[object, ...]],
        on_close: Callable[[], Awaitable[None]],
    ) -> None:
        """Let SQL FETCH, MOVE and CLOSE reach the named protocol portal ``name`` (cursors and
        portals share one namespace in Postgres): ``rows`` reads its next rows, ``on_close``
        closes it."""

    def unshare_portal(self, name: str) -> None:
        """The front end closed the shared portal ``name``."""

    async def sync(self) -> None:
        """End of a simple Query or an extended-protocol Sync: commit the implicit transaction
        if one is open (raising SqlError if that fails), or roll it back if a statement of it
        failed."""

    def statement_failed(self, error: BaseException) -> None:
        """Tell the session that the current statement failed (the front end reports it):
        an explicit block becomes failed (``E``), an implicit one will roll back at sync."""

    def cancel(self) -> None:
        """Cancel the running statement, if any, as a CancelRequest asks (it fails with 57014).
        Never cancels a commit that has passed its commit point."""

    async def close(self) -> None:
        """The connection is gone: roll back whatever is open."""


@dataclass(frozen=True)
class UserInfo:
    """A role that may log in."""

    name: str
    scram_verifier: str | None
    """``SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`` as Postgres stores it."""
    md5_hash: str | None
    """``md5`` + md5(password + user), for the md5 method; None if the password was set while
    ``password_encryption`` was scram-sha-256."""
    superuser: bool = False


class Engine(Protocol):
    """The per-process SQL engine the front end opens sessions on."""

    async def lookup_user(self, name: str) -> UserInfo | None:
        """The login role ``name``, or None."""

    def open_session(
        self, user: str, database: str, options: dict[str, str], backend_pid: int
    ) -> Session:
        """A new session for an authenticated connection (startup parameters in ``options``)."""
