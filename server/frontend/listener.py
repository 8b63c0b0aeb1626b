"""The TCP listener: accepts connections, enforces the connection limit, routes CancelRequests
and shuts down gracefully.

    server = await serve(engine, FrontendConfig(port=5433))
    ...
    await server.shutdown(timeout=30)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass

from percolator.server.engine_api import Engine
from percolator.server.frontend.config import FrontendConfig
from percolator.server.frontend.connection import Connection
from percolator.server.frontend.handoff import WorkerChannel
from percolator.server.frontend.tls import server_context
from percolator.server.frontend.transport import WireProtocol
from percolator.server.metrics import definitions as metrics

logger = logging.getLogger(__name__)

_PID_LIMIT = 1 << 31
# After the shutdown timeout, cancelled connections get this long to roll back their sessions.
_CLEANUP_GRACE = 5.0


@dataclass(frozen=True)
class WorkerSlot:
    """This process is worker ``index`` of ``count`` behind an acceptor process
    (:mod:`percolator.server.frontend.handoff`)."""

    index: int
    count: int
    channel_fd: int
    """This worker's end of the socket pair to the acceptor."""


class Server:
    """A running front end; create it with :func:`serve`."""

    def __init__(
        self, engine: Engine, config: FrontendConfig, worker: WorkerSlot | None = None
    ) -> None:
        """Not listening yet: :func:`serve` starts it."""
        self.engine = engine
        self.config = config
        self.worker = worker
        self._channel: WorkerChannel | None = None
        self._refused: set[Connection] = set()
        self.acceptor_gone = asyncio.Event()
        """Set when this worker's acceptor process went away (it should stop too)."""
        self._tls = (
            server_context(config.tls_cert, config.tls_key)
            if config.tls_cert is not None and config.tls_key is not None
            else None
        )
        self._server: asyncio.Server | None = None
        self._tasks: dict[Connection, asyncio.Task[None]] = {}
        self._admitted: dict[int, Connection] = {}
        self._pids = itertools.count(secrets.randbelow(1 << 20) + 1000)
        self._shutting_down = False
        self._addresses: list[tuple[str, int]] = []

    async def start(self) -> None:
        """Listen on the configured host and port (as a worker: take connections from the
        acceptor instead)."""
        if self.worker is not None:
            self._start_worker(self.worker)
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: WireProtocol(self._accept),
            self.config.host,
            self.config.port,
            reuse_address=True,
        )
        self._addresses = [sock.getsockname()[:2] for sock in self._server.sockets]
        logger.info(
            "listening on %s (tls=%s, auth=%s)",
            ", ".join(f"{h}:{p}" for h, p in self.addresses),
            self._tls is not None,
            self.config.auth_method.value,
        )

    def _start_worker(self, worker: WorkerSlot) -> None:
        self._channel = WorkerChannel(
            socket.socket(fileno=worker.channel_fd),
            on_connection=self._handed_over,
            on_cancel=self._cancel_here,
            on_closed=self.acceptor_gone.set,
        )
        self._addresses = [(self.config.host, self.config.port)]
        self._channel.start()
        logger.info("worker %d of %d serving", worker.index, worker.count)

    def forward_signal(self, pid: int, terminate: bool) -> None:
        """Pass pg_cancel_backend / pg_terminate_backend of another worker's session on."""
        if self._channel is not None:
            self._channel.forward_signal(pid, terminate)

    def on_signal(self, handler: Callable[[int, bool], object]) -> None:
        """Call ``handler(pid, terminate)`` for such a signal another worker passed on."""
        if self._channel is not None:
            self._channel.on_signal = handler

    def _handed_over(self, sock: socket.socket, full: bool) -> None:
        if self._shutting_down:
            sock.close()
            self._handed_connection_ended()
            return
        asyncio.get_running_loop().create_task(self._adopt(sock, full))

    async def _adopt(self, sock: socket.socket, full: bool) -> None:
        def accept(protocol: WireProtocol) -> None:
            connection = self._accept(protocol)
            if full and connection is not None:
                self._refused.add(connection)

        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: WireProtocol(accept), sock
            )
        except OSError:
            logger.info("a handed-over connection closed before it was adopted")
            sock.close()
            self._handed_connection_ended()

    def _handed_connection_ended(self) -> None:
        if self._channel is not None:
            self._channel.connection_ended()

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The (host, port) pairs listened on (kept after shutdown)."""
        return list(self._addresses)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self.addresses[0][1]

    @property
    def connection_count(self) -> int:
        """Connections past their StartupMessage, as counted against ``max_connections``."""
        return len(self._admitted)

    # ------------------------------------------------------------------ registry

    def _new_pid(self) -> int:
        # A worker's pids are its index modulo the worker count: the acceptor routes a
        # CancelRequest by them.
        index, count = (0, 1) if self.worker is None else (self.worker.index, self.worker.count)
        while True:
            pid = (next(self._pids) % (_PID_LIMIT // count)) * count + index
            if pid and pid not in self._admitted:
                return pid

    def _accept(self, protocol: WireProtocol) -> Connection | None:
        if self._shutting_down:
            protocol.abort()
            if self.worker is not None:
                self._handed_connection_ended()
            return None
        # Positive 31-bit secret: some clients read it as a signed int32.
        connection = Connection(
            protocol,
            self.engine,
            self.config,
            self,
            self._tls,
            self._new_pid(),
            secrets.randbelow(_PID_LIMIT),
        )
        logger.debug("connection received: pid=%d peer=%s", connection.pid, protocol.peer)
        task = asyncio.get_running_loop().create_task(connection.run())
        self._tasks[connection] = task
        metrics.CONNECTIONS_ACCEPTED.inc()
        metrics.CONNECTIONS_OPEN.inc()
        task.add_done_callback(lambda _: self._connection_ended(connection))
        return connection

    def _connection_ended(self, connection: Connection) -> None:
        self._tasks.pop(connection, None)
        self._refused.discard(connection)
        metrics.CONNECTIONS_OPEN.dec()
        self._handed_connection_ended()

    def admit(self, connection: Connection) -> bool:
        """Count ``connection`` against the limit; False when the server is full (a worker's
        acceptor counts the connections of all workers)."""
        if (
            self._shutting_down
            or len(self._admitted) >= self.config.max_connections
            or connection in self._refused
        ):
            metrics.CONNECTIONS_REJECTED.inc()
            return False
        self._admitted[connection.pid] = connection
        return True

    def release(self, connection: Connection) -> None:
        """Forget a connection that ended."""
        if self._admitted.get(connection.pid) is connection:
            del self._admitted[connection.pid]

    def cancel(self, pid: int, secret: int) -> None:
        """Cancel the statement running on the connection with this backend key, if any (a
        worker passes another worker's key to the acceptor)."""
        worker = self.worker
        if worker is not None and self._channel is not None and pid % worker.count != worker.index:
            self._channel.forward_cancel(pid, secret)
            return
        self._cancel_here(pid, secret)

    def _cancel_here(self, pid: int, secret: int) -> None:
        connection = self._admitted.get(pid)
        if connection is None or not secrets.compare_digest(
            connection.secret.to_bytes(4, "big"), secret.to_bytes(4, "big")
        ):
            logger.info("cancel request for an unknown backend key (pid=%d)", pid)
            return
        logger.info("cancel request: pid=%d user=%s", pid, connection.user)
        connection.cancel()

    # ------------------------------------------------------------------ shutdown

    # The API asks for a grace period, not a deadline for the call: hence a parameter.
    async def shutdown(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Stop accepting; end idle connections with FATAL 57P01 at once and busy ones when
        their statement ends, giving them ``timeout`` seconds before they are cut off (their
        sessions roll back)."""
        self._shutting_down = True
        if self._server is not None:
            self._server.close()
        if self._channel is not None:
            self._channel.stop()
        for connection in list(self._tasks):
            if connection.session is None:
                connection.protocol.abort()  # still in startup: nothing to end politely
            connection.request_shutdown()
        tasks = list(self._tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                logger.warning("shutdown timeout: closing %d busy connections", len(pending))
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=_CLEANUP_GRACE)
        for connection in list(self._tasks):
            connection.protocol.abort()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), _CLEANUP_GRACE)
        logger.info("front end stopped")

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()


async def serve(engine: Engine, config: FrontendConfig, worker: WorkerSlot | None = None) -> Server:
    """Start a front end for ``engine``; it serves until :meth:`Server.shutdown`."""
    server = Server(engine, config, worker)
    await server.start()
    return server
