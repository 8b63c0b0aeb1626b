"""Connecting to a Percolator deployment from Python.

``await connect(store=..., coordinator=...)`` assembles the pieces of the transaction layer:

- the cell store on the shards' DSNs (or, with no DSN, the embedded Postgres in ``data_dir``);
- timestamps from the coordinator (batched gRPC), or, with no coordinator, from an oracle run in
  this process — allowed for one process per deployment only, since the oracle takes exclusive
  ownership of its high-water mark;
- with a coordinator, a liveness reporter that keeps the GC safe point below this process's
  running transactions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from percolator.server.engine import Engine, EngineConfig
from percolator.server.observer_api import ObserverTransaction as SqlTransaction
from percolator.server.session import internal_session, run_autocommit
from percolator.server.sql.catalog import Catalog
from percolator.server.storage.dsn import parse_dsns
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn.client import TransactionClient, _Begin
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.liveness import LivenessReporter
from percolator.server.txn.sync import SyncTransactionClient
from percolator.server.txn.timestamp_client import CoordinatorClient, GrpcTimestampSource
from percolator.server.txn.timestamps import TimestampOracle
from percolator.server.txn.transaction import Transaction

T = TypeVar("T")


@dataclass
class Database:
    """An open connection to a deployment; begin transactions on it, then ``close()``."""

    client: TransactionClient
    store: PostgresCellStore
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _embedded: EmbeddedPostgres | None = None
    _engine: Engine | None = None

    def begin(self) -> _Begin:
        """``txn = await db.begin()`` or ``async with db.begin() as txn:``."""
        return self.client.begin()

    async def run_in_transaction(
        self, fn: Callable[[Transaction], Awaitable[T]], *, retries: int = 10
    ) -> T:
        """Run ``fn`` in a transaction, retrying write conflicts."""
        return await self.client.run_in_transaction(fn, retries=retries)

    # -- SQL ------------------------------------------------------------------------------------

    async def execute(self, sql: str, *args: object) -> str:
        """Run one SQL statement in a transaction of its own and commit it; returns the command
        tag (``INSERT 0 3``). Writes set notifications like any other (observers fire)."""
        return (await self._autocommit(sql, args)).tag

    async def fetch(self, sql: str, *args: object) -> list[dict[str, Any]]:
        """Run one SQL statement in a transaction of its own; returns its rows as dicts."""
        result = await self._autocommit(sql, args)
        return [dict(zip(result.columns, r, strict=True)) for r in result.rows]

    async def sql(self, txn: Transaction) -> SqlTransaction:
        """SQL inside an open transaction (mixing SQL and the cell API in one transaction):
        ``await (await db.sql(txn)).execute("UPDATE ...")``; the caller commits ``txn``."""
        return SqlTransaction(internal_session(await self._sql_engine(), txn), txn)

    async def catalog(self) -> Catalog:
        """The SQL catalog (tables, columns, observers) as last loaded; it is reloaded when
        another process's DDL commits (checked once a second)."""
        return (await self._sql_engine()).catalog

    async def _autocommit(self, sql: str, args: Sequence[object]) -> Any:
        return await run_autocommit(await self._sql_engine(), sql, args)

    async def _sql_engine(self) -> Engine:
        if self._engine is None:
            engine = Engine(self.client, EngineConfig())
            await engine.start()
            self._engine = engine
            self._closers.append(engine.close)
        return self._engine

    async def close(self) -> None:
        """Finish pending secondary commits and release everything this connection opened."""
        await self.client.close()
        for close in reversed(self._closers):
            await close()
        if self._embedded is not None:
            self._embedded.stop()


async def connect(
    store: str | Sequence[str] | None = None,
    *,
    coordinator: str | None = None,
    data_dir: str | Path = "data",
    config: TxnConfig | None = None,
) -> Database:
    """Open a :class:`Database` (see the module docstring for what each argument selects)."""
    embedded = None
    if store is None:
        embedded = EmbeddedPostgres(Path(data_dir))
        dsns = [embedded.start()]
    else:
        dsns = parse_dsns(store)
    cell_store = await PostgresCellStore.connect(dsns)
    closers: list[Callable[[], Awaitable[None]]] = [cell_store.close]
    if coordinator is not None:
        clock: GrpcTimestampSource | TimestampOracle = GrpcTimestampSource(coordinator)
    else:
        clock = await TimestampOracle.open(dsns[0])
    closers.append(clock.close)
    client = TransactionClient(cell_store, clock, config)
    if coordinator is not None:
        control = CoordinatorClient(coordinator)
        reporter = LivenessReporter(control, client.min_running_start_ts)
        reporter.start()
        closers += [control.close, reporter.stop]
    return Database(client, cell_store, closers, embedded)


def connect_sync(
    store: str | Sequence[str] | None = None,
    *,
    coordinator: str | None = None,
    data_dir: str | Path = "data",
    config: TxnConfig | None = None,
) -> SyncTransactionClient:
    """The blocking twin of :func:`connect`, for scripts."""
    databases: list[Database] = []

    async def open_client() -> TransactionClient:
        db = await connect(store, coordinator=coordinator, data_dir=data_dir, config=config)
        databases.append(db)
        return db.client

    async def close_client(_client: TransactionClient) -> None:
        for db in databases:
            await db.close()

    return SyncTransactionClient(open_client, close_client)
