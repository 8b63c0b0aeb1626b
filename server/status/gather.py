"""Collecting a :class:`~percolator.server.status.model.ClusterStatus`, every part bounded by a
timeout: a dead shard or coordinator is reported as unreachable, never raised.

Three independent parts run in parallel:

- the coordinator (:class:`LocalCoordinator` in its own process, :class:`RemoteCoordinator`
  over gRPC): latest timestamp, the registry's safe point, the ``servers`` and ``workers``
  groups;
- the shards (:class:`ShardProbe`): one query per shard on a connection of its own (not the
  store's pools: a probe must work when the store cannot open, and must never migrate);
- the observers (:class:`ObserverReader`): the catalog (for names and tables) and the store's
  notification summary and run counters.

:func:`assemble` turns the parts into a status and decides what counts as a problem.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import asyncpg

from percolator.server.sql import catalog_store
from percolator.server.sql.catalog import Catalog
from percolator.server.status.model import (
    ClusterStatus,
    CoordinatorStatus,
    ObserverStatus,
    Sample,
    ServerStatus,
    ShardStatus,
    WorkerStatus,
)
from percolator.server.storage.cells import ts_physical_ms
from percolator.server.storage.errors import redact_dsn
from percolator.server.storage.schema import SCHEMA_VERSION
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.coordinator import CoordinatorHandle
from percolator.server.txn.membership import GroupMember, hash_slice
from percolator.server.txn.observers import admin
from percolator.server.txn.observers.slices import WORKERS_GROUP
from percolator.server.txn.timestamp_client import CoordinatorClient
from percolator.server.txn.transaction import Transaction

DEFAULT_TIMEOUT_S = 3.0
"""How long each part of a status may take before it is reported as not answering."""
SERVERS_GROUP = "servers"
"""The coordinator group every ``percolator serve`` joins (see :mod:`.announce`)."""
LOCK_COUNT_CAP = 100_000
"""Locks are counted up to this many: the count is a health hint, not worth a long scan."""

T = TypeVar("T")


async def bounded(coro: Awaitable[T], timeout_s: float) -> T | BaseException:
    """``await coro`` within ``timeout_s``; any exception (the timeout included) is returned."""
    try:
        async with asyncio.timeout(timeout_s):
            return await coro
    except TimeoutError:
        return TimeoutError(f"no answer within {timeout_s:g}s")
    except Exception as exc:
        return exc


def describe(exc: BaseException) -> str:
    """A one-line reason for an error (its message, or its type when it has none)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or type(exc).__name__


# -- shards ------------------------------------------------------------------------------------

_PASSWORD_KV = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
_PASSWORD_QUERY = re.compile(r"(?i)([?&]password=)[^&]*")


def public_dsn(dsn: str) -> str:
    """``dsn`` without its password, whether a URL (``postgresql://u:pw@h/db?password=...``)
    or libpq ``key=value`` pairs."""
    if "://" in dsn:
        return _PASSWORD_QUERY.sub(r"\1***", redact_dsn(dsn))
    return _PASSWORD_KV.sub(r"\1***", dsn)


_PROBE = f"""
SELECT current_setting('server_version'),
    pg_database_size(current_database()),
    (SELECT value FROM percolator_meta WHERE key = 'schema_version'),
    (SELECT safe_point FROM percolator_gc WHERE id = 1),
    (SELECT count(*) FROM (SELECT 1 FROM percolator_lock LIMIT {LOCK_COUNT_CAP}) l)"""
_PROBE_BARE = "SELECT current_setting('server_version'), pg_database_size(current_database())"


class ShardProbe:
    """One probe query per shard (one round trip on an open connection).

    With ``keep_connections`` (the coordinator, probing every second or two) each shard's
    connection stays open between probes and is reopened after a failure; without (the
    command line) they are closed after each probe.
    """

    def __init__(self, dsns: Sequence[str], *, keep_connections: bool = False) -> None:
        self.dsns = list(dsns)
        self._keep = keep_connections
        self._conns: list[asyncpg.Connection | None] = [None] * len(self.dsns)
        self._locks = [asyncio.Lock() for _ in self.dsns]

    async def probe(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[ShardStatus]:
        """Every shard's facts, in shard order; an unreachable shard is reported, not raised."""
        return list(
            await asyncio.gather(*(self._probe(i, timeout_s) for i in range(len(self.dsns))))
        )

    async def _probe(self, index: int, timeout_s: float) -> ShardStatus:
        shard = ShardStatus(index, public_dsn(self.dsns[index]), reachable=False)
        # Concurrent probes of one shard share its connection one at a time (asyncpg allows
        # one statement in flight per connection).
        async with self._locks[index]:
            started = time.monotonic()
            result = await bounded(self._query(index, timeout_s), timeout_s)
            shard.probe_ms = round((time.monotonic() - started) * 1000, 1)
            if isinstance(result, BaseException):
                await self._drop(index)
                shard.error = describe(result)
                return shard
            if not self._keep:
                await self._drop(index)
        version, size, schema, safe_point, locks = result
        shard.reachable = True
        shard.postgres_version = version
        shard.size_bytes = size
        shard.schema_version = None if schema is None else int(schema)
        shard.safe_point = safe_point
        shard.locks = locks
        if shard.schema_version is None:
            shard.error = "no Percolator schema (never opened by a Percolator process)"
        return shard

    async def _query(self, index: int, timeout_s: float) -> tuple[object, ...]:
        conn = self._conns[index]
        if conn is None or conn.is_closed():
            conn = await asyncpg.connect(
                self.dsns[index],
                timeout=timeout_s,
                server_settings={"application_name": "percolator status"},
            )
            self._conns[index] = conn
        try:
            row = await conn.fetchrow(_PROBE)
        except asyncpg.UndefinedTableError:
            # A database no Percolator process has opened yet: reachable, but empty.
            bare = await conn.fetchrow(_PROBE_BARE)
            return (bare[0], bare[1], None, None, None)
        assert row is not None
        return tuple(row)

    async def _drop(self, index: int) -> None:
        conn, self._conns[index] = self._conns[index], None
        if conn is not None and not conn.is_closed():
            # terminate(), not close(): after a timeout the connection may be mid-statement.
            conn.terminate()

    async def close(self) -> None:
        """Close the kept connections."""
        for i in range(len(self._conns)):
            await self._drop(i)


# -- coordinator -------------------------------------------------------------------------------


@dataclass
class CoordinatorRead:
    """What one read of the coordinator returned."""

    status: CoordinatorStatus
    servers: list[GroupMember] = field(default_factory=list)
    workers: list[GroupMember] = field(default_factory=list)


class CoordinatorView(Protocol):
    """Where the coordinator's facts come from."""

    address: str

    async def read(self) -> CoordinatorRead:
        """The coordinator's facts and groups (may raise: the caller bounds and reports it)."""
        ...


class LocalCoordinator:
    """The coordinator of this process: read from memory, no round trip."""

    def __init__(self, handle: CoordinatorHandle, gc_lifetime_ms: int | None = None) -> None:
        """``gc_lifetime_ms`` (the coordinator's setting) enables ``gc_next_safe_point``."""
        self.address = handle.address
        self._handle = handle
        self._gc_lifetime_ms = gc_lifetime_ms

    async def read(self) -> CoordinatorRead:
        h = self._handle
        latest = h.oracle.last
        next_point = None
        if self._gc_lifetime_ms is not None:
            next_point = h.registry.safe_point(latest, self._gc_lifetime_ms)
        status = CoordinatorStatus(
            self.address,
            reachable=True,
            latest_ts=latest,
            latest_ts_ms=ts_physical_ms(latest),
            gc_next_safe_point=next_point,
            live_clients=len(h.registry.live_clients()),
        )
        return CoordinatorRead(
            status, h.groups.members(SERVERS_GROUP), h.groups.members(WORKERS_GROUP)
        )


class RemoteCoordinator:
    """A coordinator over gRPC: four calls in parallel (GetTimestamps for a fresh timestamp,
    GetSafePoint, ListGroup twice)."""

    def __init__(self, client: CoordinatorClient) -> None:
        self.address = client.target
        self._client = client

    async def read(self) -> CoordinatorRead:
        c = self._client
        latest, next_point, servers, workers = await asyncio.gather(
            c.get_timestamps(1),
            c.get_safe_point(),
            c.list_group(SERVERS_GROUP),
            c.list_group(WORKERS_GROUP),
        )
        status = CoordinatorStatus(
            self.address,
            reachable=True,
            latest_ts=latest,
            latest_ts_ms=ts_physical_ms(latest),
            gc_next_safe_point=next_point,
        )
        return CoordinatorRead(status, servers, workers)


async def read_coordinator(view: CoordinatorView, timeout_s: float) -> CoordinatorRead:
    """The coordinator's facts, or a status saying why it did not answer."""
    result = await bounded(view.read(), timeout_s)
    if isinstance(result, BaseException):
        return CoordinatorRead(
            CoordinatorStatus(view.address, reachable=False, error=describe(result))
        )
    return result


# -- observers ---------------------------------------------------------------------------------

CatalogSource = Callable[[], Awaitable[Catalog]]
"""Returns the current catalog (observer names, tables, columns)."""


class StoreCatalog:
    """The catalog read from the store (one scan the first time), reloaded only when its
    version moved (one round trip per call when it did not: a read-only transaction reading
    the version cell).

    With ``snapshot_ts`` (the coordinator's: the oracle's latest timestamp) it reads at that
    timestamp instead of taking a new one, so that a status or a sample does not count in the
    throughput it reports. Any timestamp already handed out is a valid snapshot: every commit
    still to come gets a later one."""

    def __init__(
        self, client: TransactionClient, snapshot_ts: Callable[[], int] | None = None
    ) -> None:
        self._client = client
        self._snapshot_ts = snapshot_ts
        self._catalog: Catalog | None = None

    async def __call__(self) -> Catalog:
        txn_cm: AbstractAsyncContextManager[Transaction]
        if self._snapshot_ts is None:
            txn_cm = self._client.begin()
        else:
            ts = self._snapshot_ts()
            if ts <= 0:
                # The oracle never handed a timestamp out on this store: nothing was written.
                return Catalog()
            txn_cm = self._client.begin_at(ts)
        async with txn_cm as txn:
            # The first call loads at once (the load reads the version too).
            if self._catalog is None or self._catalog.version != (
                await catalog_store.read_version(txn)
            ):
                self._catalog = await catalog_store.load(txn)
        return self._catalog


class ObserverReader:
    """Every observer with its backlog and counters: the catalog, plus one round trip per
    shard (notification summary) and one to the first shard (counters), in parallel."""

    def __init__(self, client: TransactionClient, catalog: CatalogSource) -> None:
        self.client = client
        self.catalog = catalog

    async def read(self) -> list[ObserverStatus]:
        catalog, by_key = await asyncio.gather(self.catalog(), admin.observer_status(self.client))
        now_ms = int(time.time() * 1000)
        rows = []
        for name in sorted(catalog.observers):
            o = catalog.observers[name]
            table = catalog.table_by_id(o.table_id)
            columns = ", ".join(table.column_by_id(c).name for c in o.column_ids) if table else ""
            s = by_key.get(o.key, admin.ObserverStatus())
            c = s.counters
            lag = None
            if s.oldest_pending_ts is not None:
                lag = max(0, now_ms - ts_physical_ms(s.oldest_pending_ts))
            rows.append(
                ObserverStatus(
                    name=o.name,
                    table=table.name if table else None,
                    columns=columns,
                    kind=o.kind,
                    paused=o.paused,
                    pending=s.pending,
                    lag_ms=lag,
                    runs=c.runs if c else 0,
                    commits=c.commits if c else 0,
                    conflicts=c.conflicts if c else 0,
                    failures=c.failures if c else 0,
                    parked=s.parked,
                    last_error=c.last_error if c else None,
                )
            )
        return rows


async def read_observers(
    reader: ObserverReader, timeout_s: float
) -> tuple[list[ObserverStatus], str | None]:
    """The observers, or an empty list and why they could not be read."""
    result = await bounded(reader.read(), timeout_s)
    if isinstance(result, BaseException):
        return [], describe(result)
    return result, None


# -- putting it together -----------------------------------------------------------------------


def server_from_member(member: GroupMember) -> ServerStatus:
    """A server's row from its group membership; ``info`` is the JSON :mod:`.announce` sends
    (anything else is shown as the host)."""
    try:
        info = json.loads(member.info)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        info = {"host": member.info}
    pid = info.get("pid")
    return ServerStatus(
        id=member.member_id,
        sql_address=info.get("sql"),
        metrics_url=info.get("metrics"),
        host=info.get("host"),
        pid=pid if isinstance(pid, int) else None,
        lease_remaining_ms=member.lease_remaining_ms,
        joined_ms=member.joined_ms,
    )


def workers_from_members(members: Sequence[GroupMember]) -> list[WorkerStatus]:
    """The workers' rows, with the slice each scans: members are sorted by id and member i of
    n scans slice i (as :class:`~percolator.server.txn.observers.slices.GroupSlices` does)."""
    n = len(members)
    return [
        WorkerStatus(
            id=m.member_id,
            info=m.info,
            lease_remaining_ms=m.lease_remaining_ms,
            slice=f"{i + 1}/{n}",
            slice_range=list(hash_slice(i, n)),
            joined_ms=m.joined_ms,
        )
        for i, m in enumerate(members)
    ]


def assemble(
    coordinator: CoordinatorRead,
    shards: list[ShardStatus],
    observers: list[ObserverStatus],
    observers_error: str | None,
    *,
    source: str,
    history: Sequence[Sample] = (),
) -> ClusterStatus:
    """The status from its parts, with the problems found in them."""
    coord = coordinator.status
    points = [s.safe_point for s in shards if s.safe_point is not None]
    if points and len(points) == len(shards):
        # Like the store's set_gc_safe_point: the deployment's point is the lowest shard's.
        coord.gc_safe_point = min(points)
        coord.gc_safe_point_ms = ts_physical_ms(coord.gc_safe_point)
        if coord.gc_next_safe_point is not None:
            # A pass never lowers the point in force: a client's report of an older running
            # transaction (one that began before the last pass and reported after it) holds
            # the candidate back, not the point.
            coord.gc_next_safe_point = max(coord.gc_next_safe_point, coord.gc_safe_point)
    status = ClusterStatus(
        generated_ms=int(time.time() * 1000),
        source=source,
        coordinator=coord,
        shards=shards,
        servers=[server_from_member(m) for m in coordinator.servers],
        workers=workers_from_members(coordinator.workers),
        observers=observers,
        observers_error=observers_error,
        history=list(history),
    )
    status.problems = find_problems(status)
    return status


def find_problems(status: ClusterStatus) -> list[str]:
    """What is down or stuck: an unreachable coordinator or shard, a shard without the right
    schema, unreadable observers, or active observers with no worker to run them."""
    problems = []
    c = status.coordinator
    if not c.reachable:
        problems.append(f"coordinator {c.address} does not answer: {c.error}")
    for s in status.shards:
        if not s.reachable:
            problems.append(f"shard {s.index} ({s.dsn}) is unreachable: {s.error}")
        elif s.schema_version is None:
            problems.append(f"shard {s.index} ({s.dsn}) has no Percolator schema")
        elif s.schema_version != SCHEMA_VERSION:
            problems.append(
                f"shard {s.index} ({s.dsn}) has schema version {s.schema_version}, "
                f"this Percolator uses {SCHEMA_VERSION}"
            )
    if status.observers_error is not None:
        problems.append(f"observers cannot be read: {status.observers_error}")
    active = [o.name for o in status.observers if not o.paused]
    if active and c.reachable and not status.workers:
        problems.append(
            f"no observer worker is running: changes to {len(active)} observer(s) "
            f"({', '.join(active)}) wait"
        )
    return problems


async def gather_status(
    coordinator: CoordinatorView,
    shards: ShardProbe | None,
    observers: ObserverReader | None,
    *,
    source: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    history: Sequence[Sample] = (),
) -> ClusterStatus:
    """Read the three parts in parallel, each within ``timeout_s``, and assemble them."""

    async def no_shards() -> list[ShardStatus]:
        return []

    async def no_observers() -> tuple[list[ObserverStatus], str | None]:
        return [], None

    coord, shard_list, (observer_list, observers_error) = await asyncio.gather(
        read_coordinator(coordinator, timeout_s),
        shards.probe(timeout_s) if shards is not None else no_shards(),
        read_observers(observers, timeout_s) if observers is not None else no_observers(),
    )
    return assemble(
        coord, shard_list, observer_list, observers_error, source=source, history=history
    )
