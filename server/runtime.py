"""Assembling a running SQL server: store, timestamps, transaction client, engine, front end.

With no coordinator configured the process runs one itself (oracle, liveness registry, GC,
gRPC on ``coordinator_listen`` for other processes) and the engine takes timestamps from that
oracle directly; with one, timestamps come batched over gRPC and this process reports its
oldest running transaction to it for the GC safe point. With ``metrics_listen`` it also
serves Prometheus metrics over HTTP (:mod:`percolator.server.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from percolator.server.cluster.processes import free_ports
from percolator.server.config import ServerConfig
from percolator.server.engine import Engine, EngineConfig
from percolator.server.frontend.config import AuthMethod, FrontendConfig
from percolator.server.frontend.listener import Server, WorkerSlot, serve
from percolator.server.metrics.collectors import ObserverBacklog, StoreRoundTrips
from percolator.server.metrics.http import MetricsServer, start_metrics_server
from percolator.server.observer_programs import CatalogObservers
from percolator.server.pool_backends import ActivityBoard, PoolBackends
from percolator.server.settings import parse_duration_ms
from percolator.server.shared_counter import SharedCounter
from percolator.server.status.announce import announce_server
from percolator.server.status.service import start_status_page
from percolator.server.storage.dsn import parse_dsns
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.storage.store import CellStore
from percolator.server.storage_reclaimer import StorageReclaimer
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.coordinator import CoordinatorHandle, start_coordinator
from percolator.server.txn.liveness import LivenessReporter
from percolator.server.txn.membership import GroupMember, GroupRegistry, MembershipService
from percolator.server.txn.observers.slices import DEFAULT_WORKER_LEASE_MS, GroupSlices
from percolator.server.txn.observers.worker import ObserverWorker, WorkerConfig
from percolator.server.txn.shared_timestamps import (
    TIMESTAMPS_FILE,
    SharedRange,
    SharedTimestampSource,
)
from percolator.server.txn.timestamp_client import CoordinatorClient, GrpcTimestampSource

log = logging.getLogger(__name__)


@dataclass
class RunningServer:
    """A started SQL server and everything it opened, closed in reverse order."""

    config: ServerConfig
    engine: Engine
    frontend: Server
    coordinator_address: str | None
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    workers: list[ObserverWorker] = field(default_factory=list)
    """The observer workers running in this process."""
    metrics: MetricsServer | None = None
    """The HTTP endpoint serving ``/metrics`` (None unless ``metrics_listen`` is set); more
    routes can be added to it with ``add_route``."""

    @property
    def port(self) -> int:
        return self.frontend.port

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT/metrics``, or None when no endpoint runs."""
        return None if self.metrics is None else self.metrics.url("/metrics")

    async def close(self) -> None:
        """Stop accepting, let in-flight statements finish (up to the shutdown timeout; the
        rest roll back), then close the engine, the transaction layer and the store."""
        await self.frontend.shutdown(self.config.shutdown_timeout)
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:
                log.warning("error while shutting down", exc_info=True)


class _RegistryTarget:
    """Liveness reports straight into an in-process coordinator's registry."""

    def __init__(self, registry: object) -> None:
        self._registry = registry

    async def keep_alive(self, client_id: str, min_start_ts: int, lease_ms: int) -> bool:
        self._registry.keep_alive(client_id, min_start_ts, lease_ms)  # type: ignore[attr-defined]
        return True


async def start_reclaimer(
    store: PostgresCellStore, handle: CoordinatorHandle, interval_s: float
) -> Callable[[], Awaitable[None]]:
    """Run the storage reclaimer (DROP/TRUNCATE's old storages) beside a coordinator of this
    process, with a transaction client of its own on the coordinator's oracle; returns the
    function that stops it. One per deployment: the coordinator's process runs it, and a
    server runs it only when it runs the coordinator itself."""
    client = TransactionClient(store, handle.oracle)
    reporter = LivenessReporter(_RegistryTarget(handle.registry), client.min_running_start_ts)
    reporter.start()
    task = asyncio.create_task(StorageReclaimer(client).run(interval_s))

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await reporter.stop()
        await client.close()

    return stop


async def start_local_coordinator(
    config: ServerConfig,
    dsns: list[str],
    store: PostgresCellStore,
    closers: list[Callable[[], Awaitable[None]]],
    shared_timestamps: SharedRange | None = None,
) -> CoordinatorHandle:
    """The coordinator of ``percolator serve`` in this process, with its settings from
    ``config``, and the storage reclaimer beside it; their stops go onto ``closers``."""
    handle = await start_coordinator(
        config.coordinator_listen,
        dsns[0],
        gc_lifetime_ms=int(config.gc_lifetime * 1000),
        gc_store=store,
        gc_interval_s=config.gc_interval,
        shared_timestamps=shared_timestamps,
    )
    closers.append(handle.stop)
    closers.append(await start_reclaimer(store, handle, config.gc_interval))
    return handle


class _GroupTarget:
    """Group membership straight in an in-process coordinator's registry."""

    def __init__(self, groups: GroupRegistry) -> None:
        self._groups = groups

    async def join_group(
        self, group: str, member_id: str, lease_ms: int, info: str = ""
    ) -> list[GroupMember]:
        return self._groups.join(group, member_id, lease_ms, info)


def resolve_dsns(config: ServerConfig) -> tuple[list[str], EmbeddedPostgres | None]:
    """The shard DSNs, starting the embedded Postgres when none are configured (blocking)."""
    if config.store:
        return parse_dsns(config.store), None
    embedded = EmbeddedPostgres(Path(config.data_dir))
    return [embedded.start()], embedded


async def start_server(
    config: ServerConfig,
    dsns: list[str],
    *,
    worker_slot: WorkerSlot | None = None,
    shared_dir: str | None = None,
) -> RunningServer:
    """Open everything and start listening for SQL clients.

    A worker process of ``percolator serve --processes N`` passes its ``worker_slot`` (its
    connections come from the acceptor) and the path of the coordinator's shared timestamp
    range (``config.coordinator`` is then the coordinator in the acceptor's process).
    """
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        store = await PostgresCellStore.connect(dsns)
        closers.append(store.close)
        coordinator_address = config.coordinator
        if config.coordinator is None:
            handle = await start_local_coordinator(config, dsns, store, closers)
            coordinator_address = handle.address
            membership: MembershipService = _GroupTarget(handle.groups)
            client = TransactionClient(store, handle.oracle)
            reporter = LivenessReporter(
                _RegistryTarget(handle.registry), client.min_running_start_ts
            )
        else:
            clock: GrpcTimestampSource | SharedTimestampSource = (
                GrpcTimestampSource(config.coordinator)
                if shared_dir is None
                else SharedTimestampSource(SharedRange.open(Path(shared_dir) / TIMESTAMPS_FILE))
            )
            closers.append(clock.close)
            client = TransactionClient(store, clock)
            control = CoordinatorClient(config.coordinator)
            closers.append(control.close)
            membership = control
            reporter = LivenessReporter(control, client.min_running_start_ts)
        closers.append(client.close)
        reporter.start()
        closers.append(reporter.stop)
        engine = Engine(
            client,
            EngineConfig(
                database=config.database,
                bootstrap_user=config.user,
                bootstrap_password=config.password,
                settings={
                    "statement_timeout": config.statement_timeout,
                    "percolator.locking": config.locking,
                },
                catalog_poll_s=config.catalog_poll,
            ),
        )
        await engine.start()
        closers.append(engine.close)
        workers: list[ObserverWorker] = []
        for _ in range(config.observer_workers):
            worker = await start_observer_worker(
                client,
                engine,
                membership,
                config=WorkerConfig(
                    concurrency=config.observer_concurrency,
                    max_failures=config.observer_max_failures,
                    retry_base_s=config.observer_retry_base,
                ),
            )
            closers.append(worker.stop)
            workers.append(worker)
        metrics: MetricsServer | None = None
        if config.metrics_listen:
            metrics = await start_process_metrics(config.metrics_listen, store, engine)
            closers.append(metrics.close)
            if config.coordinator is None:  # the in-process coordinator's /status page
                lifetime_ms = int(config.gc_lifetime * 1000)
                status = await start_status_page(
                    metrics, handle, dsns, store, engine=engine, gc_lifetime_ms=lifetime_ms
                )
                closers.append(status.close)
        host, port = config.host_port
        frontend = await serve(
            engine,
            FrontendConfig(
                host=host,
                port=port,
                max_connections=config.max_connections,
                auth_method=AuthMethod(config.auth_method),
                tls_cert=Path(config.tls_cert) if config.tls_cert else None,
                tls_key=Path(config.tls_key) if config.tls_key else None,
                idle_in_transaction_session_timeout=parse_duration_ms(
                    config.idle_in_transaction_session_timeout
                )
                / 1000,
            ),
            worker_slot,
        )
        if worker_slot is not None and shared_dir is not None:
            closers.append(share_sessions(engine, frontend, worker_slot, Path(shared_dir)))
            engine.shared_version = SharedCounter.open(Path(shared_dir) / CATALOG_VERSION_FILE)
        # Listed in the coordinator's "servers" group (percolator status, the /status page).
        metrics_url = metrics.url("/metrics") if metrics is not None else None
        announcement = await announce_server(membership, f"{host}:{frontend.port}", metrics_url)
        closers.append(announcement.stop)
    except BaseException:
        for close in reversed(closers):
            try:
                await close()
            except Exception:
                log.warning("error while cleaning up a failed start", exc_info=True)
        raise
    return RunningServer(
        config, engine, frontend, coordinator_address, closers, workers, metrics=metrics
    )


CATALOG_VERSION_FILE = "catalog_version"
"""The pool directory's file with the newest catalog version any worker published."""


def share_sessions(
    engine: Engine, frontend: Server, slot: WorkerSlot, shared_dir: Path
) -> Callable[[], Awaitable[None]]:
    """Make a worker's pg_stat_activity and backend signals reach the other workers'
    sessions (:mod:`percolator.server.pool_backends`); returns the function that stops it."""
    backends = PoolBackends(
        engine.backends,
        ActivityBoard(shared_dir, slot.index, slot.count),
        frontend.forward_signal,
        slot.index,
        slot.count,
    )
    engine.backends = backends
    frontend.on_signal(lambda pid, terminate: backends.local.signal(pid, terminate=terminate))
    backends.start()
    return backends.stop


async def start_process_metrics(
    listen: str, store: CellStore, engine: Engine | None = None
) -> MetricsServer:
    """The metrics endpoint of a process: the process-wide metrics, the store's round trips
    and, with an engine (whose catalog names the observers), the observers' backlog."""
    collectors: list[Any] = [StoreRoundTrips(store)]
    if engine is not None:

        def observers() -> dict[str, str]:
            return {o.key: o.name for o in engine.catalog.observers.values()}

        collectors.append(ObserverBacklog(store, observers))
    return await start_metrics_server(listen, collectors)


async def start_observer_worker(
    client: TransactionClient,
    engine: Engine,
    membership: MembershipService,
    *,
    config: WorkerConfig | None = None,
    lease_ms: int = DEFAULT_WORKER_LEASE_MS,
) -> ObserverWorker:
    """Start an observer worker running the engine's observers. It joins the workers group
    through ``membership`` (a CoordinatorClient, or the in-process coordinator's registry)."""
    member_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    worker = ObserverWorker(
        client,
        CatalogObservers(engine),
        slices=GroupSlices(membership, member_id, lease_ms=lease_ms),
        config=config,
        name=f"worker {member_id}",
    )
    await worker.start()
    return worker


class ServerThread:
    """A server on its own event loop in a background thread (tests, benchmarks, embedding)."""

    def __init__(self, config: ServerConfig, dsns: list[str]) -> None:
        self._config = config
        self._dsns = dsns
        self._ready = threading.Event()
        self._stop: object = None
        self.server: RunningServer | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="percolator-sql", daemon=True)

    def start(self, timeout: float = 60.0) -> RunningServer:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the SQL server did not start in time")
        if self._error is not None:
            raise self._error
        assert self.server is not None
        return self.server

    def _run(self) -> None:
        import asyncio

        from percolator.server.txn import eventloop

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            self._stop = (loop, stop)
            try:
                self.server = await start_server(self._config, self._dsns)
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await stop.wait()
            await self.server.close()

        eventloop.run(main())

    def stop(self, timeout: float = 60.0) -> None:
        if self._stop is not None:
            loop, event = self._stop  # type: ignore[misc]
            loop.call_soon_threadsafe(event.set)
        self._thread.join(timeout)


class ServerProcess:
    """``percolator serve`` as a child process on a free loopback port, with trust
    authentication (benchmarks, and tests whose timing a server sharing their interpreter
    lock would distort)."""

    def __init__(
        self,
        store_dsn: str,
        *extra_args: str,
        stderr: IO[str] | None = None,
        python_args: Sequence[str] = (),
    ) -> None:
        """``python_args`` go to the interpreter before the module (``-m cProfile -o F``)."""
        self.store_dsn = store_dsn
        self.port = free_ports(1, "127.0.0.1")[0]
        self._cmd = [
            sys.executable, *python_args, "-m", "percolator.server.cli", "serve",
            "--store", store_dsn,
            "--listen", f"127.0.0.1:{self.port}", "--coordinator-listen", "127.0.0.1:0",
            "--auth", "trust", *extra_args,
        ]  # fmt: skip
        self._stderr = stderr
        self._proc: subprocess.Popen[str] | None = None
        self.coordinator: str | None = None
        """The coordinator's address (its in-process one unless ``--coordinator`` was given)."""
        self.metrics_url: str | None = None
        """``http://HOST:PORT/metrics`` when started with ``--metrics-listen``."""

    def start(self) -> int:
        """Start it and wait for its banner; returns the SQL port."""
        self._proc = subprocess.Popen(
            self._cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr if self._stderr is not None else subprocess.DEVNULL,
            text=True,
        )
        # Imported here: that module imports this one.
        from percolator.server.commands.serve import BANNER

        first, *rest = BANNER.splitlines()
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith(first):
            self.stop()
            raise RuntimeError(f"percolator serve did not start: {line!r}")
        for _ in rest:
            name, _, value = self._proc.stdout.readline().strip().partition(":")
            if name == "coordinator":
                self.coordinator = value.strip()
            elif name == "metrics" and value.strip().startswith("http"):
                self.metrics_url = value.strip()
        return self.port

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it takes too long."""
        if self._proc is None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
