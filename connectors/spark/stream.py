"""The change stream: ``spark.readStream.format("percolator")`` yields committed changes.

Each output row is one row of the table as a commit left it: the table's columns (after the
change; for a delete only the key columns are set), ``_commit_ts`` and ``_op`` (``insert``,
``update`` or ``delete``), and for a table without a primary key ``_row_key`` (the hidden row id).

Offsets are commit timestamps: ``{"ts": T}`` means every change committed at or before T has been
delivered. A micro-batch (start, end] holds the changes with start < commit_ts <= end, and ``end``
is never above the *closed timestamp* (below it no transaction can still commit, so the changes
up to it are complete and never change). Replaying a batch after a restart therefore yields
exactly the same changes: with Spark's checkpointed offsets each change is delivered once.

Within a micro-batch the changes are in commit order (one partition, ordered by commit_ts and row
key); batches follow each other in commit order.

The history of changes is kept only above the GC safe point, so the stream holds a GC barrier at
its current offset (renewed at every micro-batch, released when the query stops). ``startingTs``
``earliest`` starts at the safe point: the oldest complete history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from percolator.clients.database import Database
from percolator.connectors.spark import snapshot
from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.options import StreamOptions
from percolator.connectors.spark.reader import BatchEncoder
from percolator.connectors.spark.runtime import iterate, open_database, run
from percolator.connectors.spark.types import table_schema
from percolator.server.planner.row_codec import RowCodec
from percolator.server.sql.catalog import TableDef
from percolator.server.storage.cells import CellKey, WriteKind, ts_physical_ms
from percolator.server.storage.errors import SnapshotTooOld
from percolator.server.txn.changes import read_changes
from percolator.server.txn.transaction import Transaction

COMMIT_TS = "_commit_ts"
OPERATION = "_op"
ROW_KEY = "_row_key"
IDLE_ADVANCE_MS = 60_000
"""An idle stream's offset moves (an empty batch) once it lags the closed timestamp this much."""
PAGE = 5000
"""Changes (cells) fetched per round trip."""
_READ_CONCURRENCY = 32


def stream_schema(table: TableDef) -> StructType:
    """The change stream's schema: the table's columns (all nullable: a delete carries only the
    key), then ``_commit_ts``, ``_op`` and, without a primary key, ``_row_key``."""
    fields = [StructField(f.name, f.dataType, nullable=True) for f in table_schema(table).fields]
    fields += [
        StructField(COMMIT_TS, LongType(), nullable=False),
        StructField(OPERATION, StringType(), nullable=False),
    ]
    if not table.primary_key:
        fields.append(StructField(ROW_KEY, BinaryType(), nullable=False))
    return StructType(fields)


class ChangeRange(InputPartition):
    """The changes with start < commit_ts <= end."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end


class ChangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches by commit timestamp and reads their changes.

    Spark keeps this object in one long-lived process for the whole query, so the GC barrier's
    id and the ``availableNow`` target live on it."""

    def __init__(self, options: StreamOptions, table: TableDef, schema: StructType) -> None:
        expected = stream_schema(table)
        if [f.name for f in schema.fields] != [f.name for f in expected.fields]:
            raise PercolatorSparkError(
                "42804",
                f'a change stream of "{table.name}" has the columns '
                f"{', '.join(expected.fieldNames())}, not {', '.join(schema.fieldNames())}",
                hint='add .option("changes", "true"): Spark asks a source for its schema before '
                "it says whether it reads a stream",
            )
        self.options = options
        self.table = table
        self.schema = schema
        self.barrier = snapshot.barrier_id("stream", 0)
        self._target: int | None = None

    # -- offsets (the driver side) -----------------------------------------------------------

    def initialOffset(self) -> dict[str, int]:
        return {"ts": run(self._initial())}

    async def _initial(self) -> int:
        async with open_database(self.options.connection) as db:
            starting = self.options.starting
            if starting == "latest":
                ts = await snapshot.closed_timestamp(db, self.table.storage)
            elif starting == "earliest":
                ts = await snapshot.gc_safe_point(db, self.table.storage)
            else:
                ts = int(starting)
            await snapshot.hold_gc(self._coordinator, self.barrier, ts, self._barrier_ttl_s)
            return ts

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"ts": run(self._latest(int(start["ts"]), limit))}

    async def _latest(self, start: int, limit: ReadLimit) -> int:
        async with open_database(self.options.connection) as db:
            await snapshot.hold_gc(self._coordinator, self.barrier, start, self._barrier_ttl_s)
            closed = await snapshot.closed_timestamp(db, self.table.storage)
            if self._target is not None:
                closed = min(closed, self._target)
            if closed <= start:
                return start
            max_rows = self._max_rows(limit)
            end = await _end_within(db, self.table.storage, start, closed, max_rows)
            if end is None:
                # Nothing changed. The offset stays (Spark then sees no new data and plans no
                # batch), unless it lags far behind: then an empty batch moves it, and the GC
                # barrier with it, so that an idle stream does not hold GC back for ever.
                idle_ms = ts_physical_ms(closed) - ts_physical_ms(start)
                return closed if idle_ms >= IDLE_ADVANCE_MS else start
            return end

    def _max_rows(self, limit: ReadLimit) -> int | None:
        if isinstance(limit, ReadAllAvailable):
            return None
        if isinstance(limit, ReadMaxRows):
            return max(1, int(limit.max_rows))
        return self.options.max_rows_per_trigger

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_rows_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = run(self._closed())

    async def _closed(self) -> int:
        async with open_database(self.options.connection) as db:
            return await snapshot.closed_timestamp(db, self.table.storage)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        lo, hi = int(start["ts"]), int(end["ts"])
        return [ChangeRange(lo, hi)] if hi > lo else []

    def commit(self, end: dict[str, int]) -> None:
        """Spark is done with everything up to ``end``: move the GC barrier up to it."""
        run(self._hold(int(end["ts"])))

    async def _hold(self, ts: int) -> None:
        await snapshot.hold_gc(self._coordinator, self.barrier, ts, self._barrier_ttl_s)

    def stop(self) -> None:
        run(snapshot.release_gc(self._coordinator, self.barrier))

    @property
    def _coordinator(self) -> str:
        return self.options.connection.coordinator

    @property
    def _barrier_ttl_s(self) -> float:
        return 3600.0

    # -- reading (a task) ----------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangeRange)
        return iterate(lambda: self._read(partition.start, partition.end))

    async def _read(self, start: int, end: int) -> AsyncIterator[pa.RecordBatch]:
        """The changes of (start, end] as batches of whole rows, one batch per ``PAGE`` cells
        or so (a row's cells may come in two pages: a batch ends only where a row does)."""
        encoder = ChangeEncoder(self.table, self.schema)
        wanted = set(encoder.codec.cell_names)
        existence = encoder.codec.existence
        async with open_database(self.options.connection) as db:
            rows: list[RowChange] = []
            cells = 0
            try:
                async for c in read_changes(
                    db.client, self.table.storage, start, end, page_size=PAGE
                ):
                    if c.key.column not in wanted:
                        continue  # a dropped column's cells
                    last = rows[-1] if rows else None
                    if last is None or (last.commit_ts, last.row) != (c.commit_ts, c.key.row):
                        if cells >= PAGE:
                            yield await encoder.batch(db, rows)
                            rows, cells = [], 0
                        last = RowChange(c.commit_ts, c.key.row, None)
                        rows.append(last)
                    cells += 1
                    if c.key.column == existence:
                        last.existence_kind = c.kind
            except SnapshotTooOld as exc:
                raise snapshot.too_old(start, exc) from exc
            if rows:
                yield await encoder.batch(db, rows)


@dataclass
class RowChange:
    """The cells one commit changed in one row."""

    commit_ts: int
    row: bytes
    existence_kind: WriteKind | None
    """What the commit did to the row's existence cell (PUT: inserted or updated; DELETE:
    deleted; None: cell-level writes only)."""


async def _end_within(
    db: Database, storage: str, start: int, closed: int, max_rows: int | None
) -> int | None:
    """The end of the next batch: ``closed``, or with ``max_rows`` the highest end such that
    (start, end] holds about that many changed rows (whole commits: a larger commit is a batch
    of its own); None when nothing changed in (start, closed]."""
    limit = 1 if max_rows is None else max_rows * 4 + 1
    changes = await db.store.scan_changes(storage, start, closed, limit=limit)
    if not changes:
        return None
    if max_rows is None:
        return closed
    first = changes[0].commit_ts
    rows: set[tuple[int, bytes]] = set()
    for c in changes:
        rows.add((c.commit_ts, c.key.row))
        if len(rows) > max_rows:
            # Stop before the commit that overflows, unless it is the first: taken whole.
            return c.commit_ts if c.commit_ts == first else c.commit_ts - 1
    if len(changes) < limit:
        return closed
    last = changes[-1].commit_ts  # the page may end inside this commit
    return last if last == first else last - 1


class ChangeEncoder:
    """Turns row changes into Arrow batches of the stream's schema (reading each changed row as
    its commit left it)."""

    def __init__(self, table: TableDef, schema: StructType) -> None:
        self.table = table
        self.codec = RowCodec(table)
        self.rows = BatchEncoder(table, table_schema(table))
        self.arrow_schema = _spark_arrow_schema(schema)

    async def batch(self, db: Database, changes: list[RowChange]) -> pa.RecordBatch:
        after = await self._rows_at(
            db, [c for c in changes if c.existence_kind != WriteKind.DELETE]
        )
        existed = await self._existed(db, [c for c in changes if c.existence_kind == WriteKind.PUT])
        rows = []
        ops = []
        for c in changes:
            if c.existence_kind == WriteKind.DELETE:
                rows.append(self._key_only(c.row))
                ops.append("delete")
                continue
            row = after.get((c.commit_ts, c.row))
            if row is None:  # a row whose existence cell was not written
                rows.append(self._key_only(c.row))
                ops.append("update")
                continue
            rows.append(row)
            created = c.existence_kind == WriteKind.PUT and not existed.get(
                (c.commit_ts, c.row), True
            )
            ops.append("insert" if created else "update")
        base = self.rows.batch(rows)
        arrays = [*base.columns, pa.array([c.commit_ts for c in changes], pa.int64())]
        arrays.append(pa.array(ops, pa.string()))
        if not self.table.primary_key:
            arrays.append(pa.array([c.row for c in changes], pa.binary()))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _key_only(self, row: bytes) -> tuple[Any, ...]:
        return self.codec.decode(row, {})

    async def _rows_at(
        self, db: Database, changes: list[RowChange]
    ) -> dict[tuple[int, bytes], tuple[Any, ...]]:
        """Each changed row as of its commit (one read per commit, several at a time)."""
        out: dict[tuple[int, bytes], tuple[Any, ...]] = {}

        async def read(txn: Transaction, ts: int, keys: list[bytes]) -> None:
            rows = await self.codec.get_rows(txn, keys)
            for k, r in zip(keys, rows, strict=True):
                if r is not None:
                    out[(ts, k)] = r

        await _per_commit(db, changes, 0, read)
        return out

    async def _existed(
        self, db: Database, changes: list[RowChange]
    ) -> dict[tuple[int, bytes], bool]:
        """Whether each row existed just before its commit (insert or update)."""
        out: dict[tuple[int, bytes], bool] = {}
        storage = self.table.storage
        existence = self.codec.existence

        async def read(txn: Transaction, ts: int, keys: list[bytes]) -> None:
            found = await txn.get_many([CellKey(storage, k, existence) for k in keys])
            for k, v in zip(keys, found, strict=True):
                out[(ts, k)] = v is not None

        await _per_commit(db, changes, -1, read)
        return out


async def _per_commit(
    db: Database,
    changes: list[RowChange],
    offset: int,
    read: Callable[[Transaction, int, list[bytes]], Awaitable[None]],
) -> None:
    """``read(txn, commit_ts, rows)`` for each commit of ``changes`` with its rows, in a
    snapshot at commit_ts + ``offset``; ``_READ_CONCURRENCY`` at a time."""
    by_ts: dict[int, list[bytes]] = {}
    for c in changes:
        by_ts.setdefault(c.commit_ts, []).append(c.row)
    gate = asyncio.Semaphore(_READ_CONCURRENCY)

    async def one(ts: int, keys: list[bytes]) -> None:
        async with gate:
            txn = await snapshot.begin_at(db, ts + offset)
            try:
                await read(txn, ts, keys)
            finally:
                await txn.rollback()

    await asyncio.gather(*(one(ts, keys) for ts, keys in by_ts.items()))


def _spark_arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
