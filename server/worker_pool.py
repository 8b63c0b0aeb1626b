"""``percolator serve --processes N``: one acceptor process and N SQL worker processes.

A Python process runs on one core. With workers, the process started by ``percolator serve``
runs the coordinator (oracle, liveness, GC, storage reclaimer) and listens for SQL clients;
each accepted socket goes to the worker process with the fewest open connections
(:mod:`percolator.server.frontend.handoff`), which serves it to the end. Workers are ordinary SQL
servers of one deployment (as behind a load balancer): they share the store, take timestamps
from the coordinator's oracle through shared memory (:mod:`percolator.server.txn.shared_timestamps`)
and see each other's DDL through the catalog's version cell. A worker that dies is started
again; its sessions' clients see their connection close and their open transactions roll back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from percolator.server.config import ServerConfig
from percolator.server.frontend import handoff
from percolator.server.pool_backends import activity_file
from percolator.server.runtime import CATALOG_VERSION_FILE, start_local_coordinator
from percolator.server.shared_counter import SharedCounter
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn.shared_timestamps import SharedRange, shared_memory_dir

log = logging.getLogger(__name__)

SPEC_ENV = "PERCOLATOR_WORKER_SPEC"
"""The environment variable that hands a worker process its :class:`WorkerSpec` (JSON)."""
READY_TIMEOUT_S = 120.0
RESTART_DELAY_S = 1.0
_LISTEN_BACKLOG = 1024


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to start (sent as JSON in :data:`SPEC_ENV`)."""

    config: dict[str, object]
    """Its :class:`ServerConfig` fields."""
    dsns: list[str]
    index: int
    count: int
    channel_fd: int
    shared_dir: str
    """The pool's directory in shared memory: the oracle's timestamps, the workers' activity."""
    log_level: str
    log_format: str

    def to_json(self) -> str:
        """The spec as one JSON object."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        """The spec :meth:`to_json` wrote."""
        return cls(**json.loads(text))

    def server_config(self) -> ServerConfig:
        """The worker's settings."""
        return ServerConfig(**self.config)  # type: ignore[arg-type]


@dataclass
class _Worker:
    """One worker slot: its process (while running) and the acceptor's end of its pair."""

    index: int
    process: asyncio.subprocess.Process | None = None
    channel: socket.socket | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    handed: int = 0
    """Connections handed to this run of the worker."""
    ended: int = 0
    """Of those, how many it reported ended (its running total)."""

    @property
    def open_connections(self) -> int:
        return self.handed - self.ended


class WorkerPool:
    """The acceptor: listens, hands connections to workers, routes cancels, restarts workers."""

    def __init__(
        self,
        config: ServerConfig,
        dsns: list[str],
        coordinator: str,
        shared_dir: str,
        log_settings: tuple[str, str],
    ) -> None:
        self._config = config
        self._dsns = dsns
        self._coordinator = coordinator
        self._shared_dir = shared_dir
        self._log_settings = log_settings
        self._workers = [_Worker(i) for i in range(config.processes)]
        self._listeners: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.port = 0

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        """Listen, then start the first worker (it creates the catalog of a new store), then
        the others at once, and wait until each serves."""
        self._listen()
        first, *others = self._workers
        await self._spawn(first)
        await self._wait_ready(first)
        for worker in others:
            await self._spawn(worker)
        await asyncio.gather(*(self._wait_ready(w) for w in others))
        loop = asyncio.get_running_loop()
        self._tasks += [loop.create_task(self._accept(sock)) for sock in self._listeners]

    def _listen(self) -> None:
        host, port = self._config.host_port
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                # Port 0: every address gets the port the first one was given.
                sock.bind((address[0], self.port or port, *address[2:]))
                sock.listen(_LISTEN_BACKLOG)
                sock.setblocking(False)
            except OSError:
                sock.close()
                self._close_listeners()
                raise
            self.port = sock.getsockname()[1]
            self._listeners.append(sock)

    def _spec(self, worker: _Worker, channel_fd: int) -> WorkerSpec:
        config = dataclasses.replace(
            self._config,
            coordinator=self._coordinator,
            observer_workers=self._config.observer_workers if worker.index == 0 else 0,
            listen=f"{self._config.host_port[0]}:{self.port}",
        )
        return WorkerSpec(
            config=dataclasses.asdict(config),
            dsns=self._dsns,
            index=worker.index,
            count=len(self._workers),
            channel_fd=channel_fd,
            shared_dir=self._shared_dir,
            log_level=self._log_settings[0],
            log_format=self._log_settings[1],
        )

    async def _spawn(self, worker: _Worker) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            env = {**os.environ, SPEC_ENV: self._spec(worker, theirs.fileno()).to_json()}
            worker.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "percolator.server.worker_process",
                pass_fds=(theirs.fileno(),),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        worker.channel = ours
        worker.ready.clear()
        worker.handed = worker.ended = 0
        loop = asyncio.get_running_loop()
        loop.add_reader(ours.fileno(), self._readable, worker)
        self._tasks = [t for t in self._tasks if not t.done()]  # earlier watchers of restarts
        self._tasks.append(loop.create_task(self._watch(worker)))

    async def _wait_ready(self, worker: _Worker) -> None:
        assert worker.process is not None
        ready = asyncio.ensure_future(worker.ready.wait())
        exited = asyncio.ensure_future(worker.process.wait())
        try:
            done, _ = await asyncio.wait(
                {ready, exited}, timeout=READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
            exited.cancel()
        if ready not in done:
            raise OSError(
                f"SQL worker {worker.index} did not start"
                + (f" (exit code {worker.process.returncode})" if exited in done else "")
            )

    # ------------------------------------------------------------------ connections

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            try:
                client, _ = await loop.sock_accept(listener)
            except OSError as exc:
                if self._closing:
                    return
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)  # e.g. out of file descriptors: do not spin
                continue
            with client:
                if client.family in (socket.AF_INET, socket.AF_INET6):
                    # As asyncio's own servers do: replies are small and must not wait.
                    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._hand_over(client)

    def _hand_over(self, client: socket.socket) -> None:
        full = sum(w.open_connections for w in self._workers) >= self._config.max_connections
        message = handoff.encode_connection(full)
        for worker in sorted(self._ready_workers(), key=lambda w: w.open_connections):
            assert worker.channel is not None
            if handoff.send(worker.channel, message, client.fileno()):
                worker.handed += 1
                return
        log.warning("no SQL worker could take a connection: closing it")

    def _ready_workers(self) -> list[_Worker]:
        return [w for w in self._workers if w.ready.is_set() and w.channel is not None]

    def _readable(self, worker: _Worker) -> None:
        channel = worker.channel
        while channel is not None:
            try:
                message = handoff.receive(channel)
            except (EOFError, OSError, ValueError):
                self._drop_channel(worker)
                return
            if message is None:
                return
            if message.kind is handoff.Kind.READY:
                worker.ready.set()
            elif message.kind is handoff.Kind.ENDED:
                worker.ended = max(worker.ended, message.ended)
            elif message.kind is handoff.Kind.CANCEL:
                self._route(message.pid, handoff.encode_cancel(message.pid, message.secret))
            elif message.kind is handoff.Kind.SIGNAL:
                self._route(message.pid, handoff.encode_signal(message.pid, message.terminate))

    def _route(self, pid: int, payload: bytes) -> None:
        """Pass a message to the worker whose session has ``pid``."""
        target = self._workers[pid % len(self._workers)]
        if target.channel is not None:
            handoff.send(target.channel, payload)

    def _drop_channel(self, worker: _Worker) -> None:
        channel, worker.channel = worker.channel, None
        worker.ready.clear()
        if channel is not None:
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                asyncio.get_running_loop().remove_reader(channel.fileno())
            channel.close()

    async def _watch(self, worker: _Worker) -> None:
        process = worker.process
        assert process is not None
        code = await process.wait()
        self._drop_channel(worker)
        # Its sessions are gone, whether it removed its list of them or was killed.
        with contextlib.suppress(OSError):
            activity_file(Path(self._shared_dir), worker.index).unlink()
        # A Ctrl-C reaches the workers too: one may end before this process starts closing.
        await asyncio.sleep(RESTART_DELAY_S)
        if self._closing:
            return
        log.error(
            "SQL worker %d (pid %d) exited with code %s; its sessions are gone, starting it again",
            worker.index,
            process.pid,
            code,
        )
        try:
            await self._spawn(worker)
        except OSError:
            log.exception("cannot start SQL worker %d again", worker.index)

    # ------------------------------------------------------------------ shutdown

    def _close_listeners(self) -> None:
        for sock in self._listeners:
            sock.close()
        self._listeners.clear()

    async def close(self) -> None:
        """Stop accepting; SIGTERM the workers (each shuts down gracefully: running
        statements get the shutdown timeout, open transactions roll back) and wait for them."""
        self._closing = True
        self._close_listeners()
        processes = [w.process for w in self._workers if w.process is not None]
        for process in processes:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        deadline = self._config.shutdown_timeout + 15.0
        for process in processes:
            try:
                await asyncio.wait_for(process.wait(), deadline)
            except TimeoutError:
                log.warning("SQL worker pid %d did not stop in time: killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for worker in self._workers:
            self._drop_channel(worker)


@dataclass
class RunningPool:
    """The acceptor process's running parts, closed in reverse order."""

    pool: WorkerPool
    coordinator_address: str
    _closers: list[Callable[[], Awaitable[None]]]

    @property
    def port(self) -> int:
        """The SQL port the workers serve on."""
        return self.pool.port

    @property
    def metrics_url(self) -> str | None:
        """No metrics endpoint with several processes (yet)."""
        return None

    async def close(self) -> None:
        """Stop the workers, then the coordinator and the store."""
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:
                log.warning("error while shutting down", exc_info=True)


_SHARED_PREFIX = "percolator-pool-"
_OWNER_FILE = "owner"


def _new_shared_dir() -> Path:
    """A fresh directory in shared memory for this pool, with this process's pid in it; the
    directories of pools whose acceptor was killed (it removes its own when it stops) are
    removed first, so they do not pile up in memory."""
    parent = shared_memory_dir()
    for stale in Path(parent or tempfile.gettempdir()).glob(_SHARED_PREFIX + "*"):
        try:
            owner = int((stale / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not psutil.pid_exists(owner):
            shutil.rmtree(stale, ignore_errors=True)
    directory = Path(tempfile.mkdtemp(prefix=_SHARED_PREFIX, dir=parent))
    (directory / _OWNER_FILE).write_text(str(os.getpid()))
    return directory


async def start_pool(
    config: ServerConfig, dsns: list[str], log_settings: tuple[str, str]
) -> RunningPool:
    """Run the coordinator in this process and ``config.processes`` SQL worker processes."""
    if config.coordinator is not None:
        raise ValueError(
            "processes > 1 runs the coordinator in the serving process (its timestamps are "
            "shared through memory): leave out coordinator, or set processes = 1"
        )
    if config.metrics_listen:
        raise ValueError(
            "metrics_listen is not available with processes > 1 yet: run processes = 1, or one "
            "percolator serve per core with --coordinator and a port each"
        )
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        shared_dir = _new_shared_dir()
        shared = SharedRange.create(shared_dir)
        SharedCounter.create(shared_dir / CATALOG_VERSION_FILE).close()

        async def remove_shared() -> None:
            shared.close()
            shutil.rmtree(shared_dir, ignore_errors=True)

        closers.append(remove_shared)
        store = await PostgresCellStore.connect(dsns)
        closers.append(store.close)
        handle = await start_local_coordinator(config, dsns, store, closers, shared)
        pool = WorkerPool(config, dsns, handle.address, str(shared_dir), log_settings)
        closers.append(pool.close)
        await pool.start()
    except BaseException:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                await close()
        raise
    return RunningPool(pool, handle.address, closers)
