"""One client connection: startup, authentication, then the simple and extended query protocols.

The connection task reads messages one at a time and runs each to its end before reading the
next, as a Postgres backend does; a CancelRequest reaches the running statement from another
socket through :meth:`Connection.cancel`. Named statements and portals are this connection's
own state. After an error in the extended protocol everything up to the next Sync is skipped.
Whatever happens, the session is closed (rolling back what is open) when the connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Protocol

from percolator.server.engine_api import (
    CopyIn,
    CopyOut,
    Engine,
    ParsedStatement,
    PreparedStatement,
    Session,
)
from percolator.server.frontend.auth import AuthFailed, authenticate
from percolator.server.frontend.channel import (
    ClientGone,
    IdleTimeout,
    MessageChannel,
    ShutdownRequested,
)
from percolator.server.frontend.config import FrontendConfig
from percolator.server.frontend.copy import copy_in, copy_out
from percolator.server.frontend.portal import Portal, decode_params, row_description
from percolator.server.frontend.responses import (
    ADMIN_SHUTDOWN_MESSAGE,
    IDLE_IN_TRANSACTION_MESSAGE,
    TOO_MANY_CLIENTS_MESSAGE,
    error_response,
    fatal,
    notice_response,
)
from percolator.server.frontend.startup import negotiation_for, read_startup, session_options
from percolator.server.frontend.transport import WireProtocol
from percolator.server.metrics import definitions as metrics
from percolator.server.sql.errors import (
    ADMIN_SHUTDOWN,
    DUPLICATE_CURSOR,
    DUPLICATE_PREPARED_STATEMENT,
    IDLE_IN_TRANSACTION_TIMEOUT,
    INVALID_AUTHORIZATION_SPECIFICATION,
    INVALID_CURSOR_NAME,
    INVALID_SQL_STATEMENT_NAME,
    PROTOCOL_VIOLATION,
    SYNTAX_ERROR,
    TOO_MANY_CONNECTIONS,
    SqlError,
    from_exception,
)
from percolator.server.wire.codec import ProtocolViolation
from percolator.server.wire.messages import (
    AuthenticationOk,
    BackendKeyData,
    BackendMessage,
    Bind,
    BindComplete,
    CancelRequest,
    Close,
    CloseComplete,
    CommandComplete,
    CopyData,
    CopyDone,
    CopyFail,
    Describe,
    EmptyQueryResponse,
    ErrorResponse,
    Execute,
    Flush,
    FormatCode,
    FrontendMessage,
    NoData,
    NotificationResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    ParseComplete,
    PasswordMessage,
    PortalSuspended,
    Query,
    ReadyForQuery,
    Sync,
    TargetKind,
    Terminate,
    TransactionStatus,
)

logger = logging.getLogger(__name__)

_EXTENDED = (Parse, Bind, Describe, Execute, Close)


class ConnectionRegistry(Protocol):
    """What a connection needs of the listener: the connection limit and CancelRequest routing."""

    def admit(self, connection: Connection) -> bool:
        """Count a connection that sent its StartupMessage; False when the server is full."""

    def release(self, connection: Connection) -> None:
        """The connection ended (admitted or not)."""

    def cancel(self, pid: int, secret: int) -> None:
        """A CancelRequest arrived for (pid, secret)."""


class Connection:
    """The protocol state machine of one client connection."""

    def __init__(
        self,
        protocol: WireProtocol,
        engine: Engine,
        config: FrontendConfig,
        registry: ConnectionRegistry,
        tls: ssl.SSLContext | None,
        pid: int,
        secret: int,
    ) -> None:
        """A connection with backend key (``pid``, ``secret``); :meth:`run` serves it."""
        self.protocol = protocol
        self.engine = engine
        self.config = config
        self.registry = registry
        self.tls = tls
        self.pid = pid
        self.secret = secret
        self.channel = MessageChannel(
            protocol,
            max_message_size=config.max_message_size,
            output_buffer_size=config.output_buffer_size,
        )
        self.session: Session | None = None
        self.user = ""
        self.database = ""
        self._statements: dict[str, PreparedStatement] = {}
        self._portals: dict[str, Portal] = {}
        self._skip_until_sync = False
        self._in_extended_batch = False
        self._ready_sent = False
        self._notifications: list[NotificationResponse] = []
        self._flush_task: asyncio.Task[None] | None = None
        self._terminating = False

    # ------------------------------------------------------------------ lifecycle

    def cancel(self) -> None:
        """Cancel the running statement (CancelRequest)."""
        if self.session is not None:
            self.session.cancel()

    def request_shutdown(self) -> None:
        """Close as soon as the connection waits for its client (at once if it does now)."""
        self.channel.request_shutdown()

    def _terminate(self) -> None:
        """pg_terminate_backend: cancel the running statement, then close with 57P01."""
        self._terminating = True
        self.cancel()
        self.request_shutdown()

    async def run(self) -> None:
        """Serve the connection until it ends; never raises but CancelledError."""
        try:
            if await self._start():
                await self._serve()
        except ShutdownRequested:
            await self._send_fatal(fatal(ADMIN_SHUTDOWN, ADMIN_SHUTDOWN_MESSAGE))
        except IdleTimeout:
            logger.info("idle-in-transaction timeout: pid=%d user=%s", self.pid, self.user)
            await self._send_fatal(fatal(IDLE_IN_TRANSACTION_TIMEOUT, IDLE_IN_TRANSACTION_MESSAGE))
        except ProtocolViolation as exc:
            logger.info("protocol violation: pid=%d peer=%s: %s", self.pid, self.protocol.peer, exc)
            await self._send_fatal(ErrorResponse("FATAL", exc.sqlstate, exc.message))
        except (ClientGone, ConnectionError):
            pass
        except Exception:
            logger.exception("connection failed: pid=%d peer=%s", self.pid, self.protocol.peer)
            self.protocol.abort()
        finally:
            await self._cleanup()

    async def _cleanup(self) -> None:
        self.registry.release(self)
        for portal in self._portals.values():
            await self._close_execution(portal)
        self._portals.clear()
        session, self.session = self.session, None
        if session is not None:
            try:
                await session.close()
            except Exception:
                logger.exception("session close failed: pid=%d", self.pid)
            logger.info(
                "connection closed: pid=%d user=%s database=%s peer=%s",
                self.pid,
                self.user,
                self.database,
                self.protocol.peer,
                extra={"pid": self.pid, "user": self.user, "peer": self.protocol.peer},
            )
        self.protocol.close()

    async def _send_fatal(self, error: ErrorResponse) -> None:
        self.channel.send(error)
        with contextlib.suppress(ConnectionError):
            await self.channel.flush()
        self.protocol.close()

    # ------------------------------------------------------------------ startup

    async def _start(self) -> bool:
        """Startup and authentication; True when the connection goes on to queries."""
        try:
            async with asyncio.timeout(self.config.authentication_timeout):
                first = await read_startup(self.channel, self.tls)
                if isinstance(first, CancelRequest):
                    self.registry.cancel(first.pid, first.secret)
                    return False
                if not self.registry.admit(self):
                    logger.warning("too many clients: refused peer=%s", self.protocol.peer)
                    await self._send_fatal(fatal(TOO_MANY_CONNECTIONS, TOO_MANY_CLIENTS_MESSAGE))
                    return False
                negotiation = negotiation_for(first)
                if negotiation is not None:
                    self.channel.send(negotiation)
                options = session_options(first)
                self.user = options.get("user", "")
                if not self.user:
                    await self._send_fatal(
                        fatal(
                            INVALID_AUTHORIZATION_SPECIFICATION,
                            "no PostgreSQL user name specified in startup packet",
                        )
                    )
                    return False
                self.database = options.get("database") or self.user
                info = await self.engine.lookup_user(self.user)
                await authenticate(self.config.auth_method, self.user, info, _Exchange(self))
                self.session = self.engine.open_session(self.user, self.database, options, self.pid)
                self.session.on_notification(self._notified)
                self.session.on_terminate = self._terminate
        except TimeoutError:
            logger.info("authentication timeout: peer=%s", self.protocol.peer)
            self.protocol.close()
            return False
        except AuthFailed as exc:
            logger.info(
                "authentication failed: user=%s peer=%s: %s",
                self.user,
                self.protocol.peer,
                exc.error.message,
            )
            await self._send_fatal(error_response(exc.error, "FATAL"))
            return False
        except SqlError as exc:  # open_session: no such database, ...
            await self._send_fatal(error_response(exc, "FATAL"))
            return False
        except Exception as exc:
            if isinstance(exc, ClientGone | ProtocolViolation | ConnectionError):
                raise
            # The engine failed (lookup_user, open_session): tell the client why.
            logger.exception(
                "connection setup failed: user=%s peer=%s", self.user, self.protocol.peer
            )
            await self._send_fatal(error_response(from_exception(exc), "FATAL"))
            return False

        session = self.session
        self.channel.send(AuthenticationOk())
        for name, value in session.startup_parameters():
            self.channel.send(ParameterStatus(name, value))
        self.channel.send(BackendKeyData(self.pid, self.secret))
        self._send_ready()
        logger.info(
            "connection authorized: pid=%d user=%s database=%s peer=%s tls=%s",
            self.pid,
            self.user,
            self.database,
            self.protocol.peer,
            self.protocol.is_tls,
            extra={"pid": self.pid, "user": self.user, "peer": self.protocol.peer},
        )
        return True

    # ------------------------------------------------------------------ main loop

    async def _serve(self) -> None:
        server_limit = self.config.idle_in_transaction_session_timeout
        while True:
            timeout = None
            if self._ready_sent and self._status() is not TransactionStatus.IDLE:
                # The session's SET, else the server's option (a transaction holding row locks
                # must not keep them forever from an abandoned client).
                assert self.session is not None
                limit = self.session.idle_in_transaction_timeout_s() or server_limit
                timeout = limit if limit > 0 else None
            msg = await self.channel.receive(idle_timeout=timeout)
            self._ready_sent = False
            if isinstance(msg, Terminate):
                return
            if self._skip_until_sync and not isinstance(msg, Sync):
                if isinstance(msg, ProtocolViolation) and msg.fatal:
                    raise msg
                continue
            await self._dispatch(msg)

    async def _dispatch(self, msg: FrontendMessage | ProtocolViolation) -> None:
        if isinstance(msg, _EXTENDED):
            self._in_extended_batch = True
            try:
                await self._extended(msg)
            except Exception as exc:
                self._fail(exc)
                self._skip_until_sync = True
        elif isinstance(msg, Sync):
            await self._sync()
        elif isinstance(msg, Flush):
            await self.channel.flush()
        elif isinstance(msg, Query):
            await self._simple_query(msg.sql)
        elif isinstance(msg, CopyData | CopyDone | CopyFail):
            pass  # late COPY messages after a failed COPY: Postgres ignores them too
        elif isinstance(msg, ProtocolViolation):
            if msg.fatal:
                raise msg
            self._fail(SqlError(msg.sqlstate, msg.message))
            if self._in_extended_batch:
                self._skip_until_sync = True
            else:
                await self._end_of_query()
        elif isinstance(msg, PasswordMessage):
            raise ProtocolViolation(PROTOCOL_VIOLATION, "unexpected password message")
        else:
            raise ProtocolViolation(
                PROTOCOL_VIOLATION, f"unexpected {type(msg).__name__} after startup"
            )

    def _fail(self, exc: Exception) -> None:
        """Report a failed statement or message (the connection goes on)."""
        if isinstance(exc, ClientGone | ProtocolViolation) or self.protocol.closed:
            raise exc
        if self._terminating:
            # Its statement stopped for pg_terminate_backend: the client gets the FATAL, as
            # from Postgres, not the cancel's 57014 first.
            raise ShutdownRequested from exc
        error = from_exception(exc)
        metrics.STATEMENT_ERRORS.labels(error.sqlstate).inc()  # errors only: off the hot path
        if not isinstance(exc, SqlError):
            logger.error(
                "statement failed unexpectedly: pid=%d user=%s", self.pid, self.user, exc_info=exc
            )
        for notice in getattr(error, "notices", None) or ():
            self.channel.send(notice_response(notice))  # raised before the error (DO blocks)
        self.channel.send(error_response(error, "ERROR" if error.severity == "FATAL" else None))
        if self.session is not None:
            self.session.statement_failed(error)

    def _status(self) -> TransactionStatus:
        assert self.session is not None
        return TransactionStatus(self.session.transaction_status)

    def _send_ready(self) -> None:
        self._send_parameter_changes()
        if self._notifications and self._status() is TransactionStatus.IDLE:
            for msg in self._notifications:
                self.channel.send(msg)
            self._notifications = []
        self.channel.send(ReadyForQuery(self._status()))
        self._ready_sent = True

    def _notified(self, pid: int, channel: str, payload: str) -> None:
        """A notification for the session: sent now if it waits idle for its client, else
        before the ReadyForQuery that ends its transaction (as Postgres does)."""
        msg = NotificationResponse(pid, channel, payload)
        if not (self._ready_sent and self._status() is TransactionStatus.IDLE):
            self._notifications.append(msg)
            return
        self.channel.send(msg)
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self.channel.flush()

    def _send_parameter_changes(self) -> None:
        assert self.session is not None
        for name, value in self.session.take_parameter_changes():
            self.channel.send(ParameterStatus(name, value))
        for statement in self.session.take_deallocations():
            if statement is None:
                self._statements.clear()
            else:
                self._statements.pop(statement, None)

    async def _end_of_query(self) -> None:
        """End a simple Query or an extended batch: sync the session, drop the portals that
        the end of the transaction ends, ReadyForQuery."""
        assert self.session is not None
        try:
            await self.session.sync()
        except Exception as exc:
            if isinstance(exc, ClientGone) or self.protocol.closed:
                raise
            error = from_exception(exc)
            self.channel.send(error_response(error, "ERROR"))
        if self._status() is TransactionStatus.IDLE:
            await self._close_all_portals()
        self._send_ready()

    # ------------------------------------------------------------------ simple query

    async def _simple_query(self, sql: str) -> None:
        assert self.session is not None
        # As in Postgres, a simple Query runs in (and so destroys) the unnamed statement/portal.
        self._statements.pop("", None)
        unnamed = self._portals.pop("", None)
        if unnamed is not None:
            await self._close_execution(unnamed)
        try:
            statements = self.session.parse(sql)
            self.session.alone_in_query = sum(not s.empty for s in statements) <= 1
            for statement in statements:
                if statement.empty:
                    self.channel.send(EmptyQueryResponse())
                    continue
                prepared = await self.session.prepare(statement, ())
                portal = Portal("", prepared, [], ())
                try:
                    await self._run_portal(portal, 0, describe=True)
                finally:
                    await self._close_execution(portal)
                self._send_parameter_changes()
        except Exception as exc:
            self._fail(exc)
        finally:
            self.session.alone_in_query = True
        await self._end_of_query()

    # ------------------------------------------------------------------ extended protocol

    async def _extended(self, msg: Parse | Bind | Describe | Execute | Close) -> None:
        if isinstance(msg, Parse):
            await self._parse(msg)
        elif isinstance(msg, Bind):
            await self._bind(msg)
        elif isinstance(msg, Describe):
            self._describe(msg)
        elif isinstance(msg, Execute):
            await self._execute(msg)
        else:
            await self._close(msg)

    async def _parse(self, msg: Parse) -> None:
        assert self.session is not None
        if msg.name and msg.name in self._statements:
            raise SqlError(
                DUPLICATE_PREPARED_STATEMENT, f'prepared statement "{msg.name}" already exists'
            )
        statements = self.session.parse(msg.query)
        if len(statements) > 1:
            raise SqlError(
                SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"
            )
        if not statements or statements[0].empty:
            parsed = statements[0] if statements else ParsedStatement("", empty=True)
            prepared = PreparedStatement(parsed, [], None)
        else:
            prepared = await self.session.prepare(statements[0], msg.param_types)
        self._statements[msg.name] = prepared
        self.channel.send(ParseComplete())

    async def _bind(self, msg: Bind) -> None:
        prepared = self._statements.get(msg.statement)
        if prepared is None:
            raise SqlError(
                INVALID_SQL_STATEMENT_NAME, f'prepared statement "{msg.statement}" does not exist'
            )
        if msg.portal:
            if msg.portal in self._portals or self._is_cursor(msg.portal):
                raise SqlError(DUPLICATE_CURSOR, f'portal "{msg.portal}" already exists')
        else:
            unnamed = self._portals.pop("", None)
            if unnamed is not None:
                await self._close_execution(unnamed)
        params = decode_params(prepared, msg.statement, msg.param_formats, msg.params)
        portal = Portal(msg.portal, prepared, params, msg.result_formats)
        portal.formats()  # refuse a bad result-format count at Bind, as Postgres does
        if msg.portal and prepared.columns is not None:
            self._share(portal)
        self._portals[msg.portal] = portal
        self.channel.send(BindComplete())

    def _is_cursor(self, name: str) -> bool:
        assert self.session is not None
        return self.session.cursor_columns(name) is not None

    def _share(self, portal: Portal) -> None:
        """Let SQL FETCH, MOVE and CLOSE reach a named portal, as in Postgres (asyncpg's
        ``Cursor.forward`` sends MOVE)."""
        assert self.session is not None

        async def close() -> None:
            if self._portals.get(portal.name) is portal:
                del self._portals[portal.name]
                await self._close_execution(portal)

        self.session.share_portal(
            portal.name,
            portal.prepared.statement.sql,
            portal.columns or [],
            self._rows_of(portal),
            close,
        )

    async def _rows_of(self, portal: Portal) -> AsyncIterator[tuple[object, ...]]:
        """A portal's next rows, one at a time (a MOVE must not read past its count)."""
        assert self.session is not None
        if portal.execution is None:
            portal.execution = await self.session.execute(portal.prepared, portal.params)
        while portal.execution is not None and not portal.execution.done:
            rows = await portal.execution.fetch(1)
            if not rows:
                return
            yield rows[0]

    def _describe(self, msg: Describe) -> None:
        if msg.kind is TargetKind.STATEMENT:
            prepared = self._statements.get(msg.name)
            if prepared is None:
                raise SqlError(
                    INVALID_SQL_STATEMENT_NAME, f'prepared statement "{msg.name}" does not exist'
                )
            self.channel.send(ParameterDescription(tuple(t.oid for t in prepared.param_types)))
            columns = prepared.columns
            if columns is None:
                self.channel.send(NoData())
            else:
                self.channel.send(row_description(columns, [FormatCode.TEXT] * len(columns)))
            return
        portal = self._portals.get(msg.name)
        if portal is None:
            # A cursor DECLAREd in SQL is a portal too (psycopg's server-side cursors
            # describe theirs this way).
            assert self.session is not None
            columns = self.session.cursor_columns(msg.name)
            if columns is None:
                raise SqlError(INVALID_CURSOR_NAME, f'portal "{msg.name}" does not exist')
            self.channel.send(row_description(columns, [FormatCode.TEXT] * len(columns)))
            return
        description = portal.row_description()
        if description is None:
            self.channel.send(NoData())
        else:
            self.channel.send_bytes(description)

    async def _execute(self, msg: Execute) -> None:
        portal = self._portal(msg.portal)
        try:
            await self._run_portal(portal, msg.max_rows, describe=False)
        except BaseException:
            # A portal whose execution failed cannot be resumed.
            if self._portals.get(portal.name) is portal:
                del self._portals[portal.name]
            await self._close_execution(portal)
            raise
        self._send_parameter_changes()

    async def _close(self, msg: Close) -> None:
        if msg.kind is TargetKind.STATEMENT:
            self._statements.pop(msg.name, None)
        else:
            portal = self._portals.pop(msg.name, None)
            if portal is not None:
                await self._close_execution(portal)
        self.channel.send(CloseComplete())

    async def _sync(self) -> None:
        self._skip_until_sync = False
        self._in_extended_batch = False
        await self._end_of_query()

    def _portal(self, name: str) -> Portal:
        portal = self._portals.get(name)
        if portal is None:
            raise SqlError(INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

    async def _close_all_portals(self) -> None:
        portals = list(self._portals.values())
        self._portals.clear()
        for portal in portals:
            await self._close_execution(portal)

    async def _close_execution(self, portal: Portal) -> None:
        if portal.name and self.session is not None:
            self.session.unshare_portal(portal.name)
        execution, portal.execution = portal.execution, None
        if execution is None:
            return
        try:
            await execution.close()
        except Exception:
            logger.exception("closing an execution failed: pid=%d", self.pid)

    # ------------------------------------------------------------------ running a portal

    async def _run_portal(self, portal: Portal, max_rows: int, *, describe: bool) -> None:
        """Execute ``portal`` for up to ``max_rows`` rows (<= 0: all); ``describe`` sends the
        RowDescription first (simple Query)."""
        assert self.session is not None
        channel = self.channel
        if portal.prepared.statement.empty:
            channel.send(EmptyQueryResponse())
            return
        if portal.completed_tag is not None:
            channel.send(CommandComplete(_rerun_tag(portal.completed_tag)))
            return
        if portal.execution is None:
            portal.execution = await self.session.execute(portal.prepared, portal.params)
        execution = portal.execution
        self._send_notices(portal)
        copy = execution.copy
        if copy is not None:
            if _is_copy_out(copy):
                tag = await copy_out(channel, copy)  # type: ignore[arg-type]
            else:
                tag = await copy_in(channel, copy)  # type: ignore[arg-type]
            self._send_notices(portal)
            portal.completed_tag = tag
            channel.send(CommandComplete(tag))
            return
        if describe and execution.columns is not None:
            description = portal.row_description()
            assert description is not None
            channel.send_bytes(description)
        batch = self.config.fetch_batch_rows
        remaining = max_rows if max_rows > 0 else -1
        while not execution.done and remaining != 0:
            want = batch if remaining < 0 else min(batch, remaining)
            rows = await execution.fetch(want)
            if not rows:
                break
            if remaining > 0:
                remaining -= len(rows)
            for data in portal.encode_rows(rows):
                channel.send_bytes(data)
                if channel.output_full:
                    await channel.flush()
        self._send_notices(portal)
        if remaining == 0 and not execution.done:
            channel.send(PortalSuspended())
            return
        portal.completed_tag = execution.command_tag
        channel.send(CommandComplete(portal.completed_tag))

    def _send_notices(self, portal: Portal) -> None:
        execution = portal.execution
        if execution is None:
            return
        notices = execution.notices
        for notice in notices[portal.notices_sent :]:
            self.channel.send(notice_response(notice))
        portal.notices_sent = len(notices)


class _Exchange:
    """The connection as :func:`authenticate` sees it."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def send(self, msg: BackendMessage) -> None:
        self._connection.channel.send(msg)

    async def receive_password(self) -> PasswordMessage:
        msg = await self._connection.channel.receive(interruptible=False)
        if isinstance(msg, PasswordMessage):
            return msg
        if isinstance(msg, ProtocolViolation):
            raise AuthFailed(SqlError(msg.sqlstate, msg.message, severity="FATAL"))
        raise AuthFailed(
            SqlError(
                PROTOCOL_VIOLATION,
                f"expected password response, got {type(msg).__name__}",
                severity="FATAL",
            )
        )


def _is_copy_out(copy: CopyIn | CopyOut) -> bool:
    return hasattr(copy, "chunks")


def _rerun_tag(tag: str) -> str:
    """The tag of executing an exhausted portal again: no more rows."""
    if tag.startswith(("SELECT ", "FETCH ", "MOVE ")):
        return tag.split(" ", 1)[0] + " 0"
    return tag
