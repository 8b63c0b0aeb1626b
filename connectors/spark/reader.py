"""Batch reads: every partition scans its key ranges at the one snapshot of the whole read.

The snapshot's timestamp is taken once, when the DataFrame is loaded (or given by ``asOf``), and
travels inside the pickled reader, so every task and every action on the DataFrame sees the same
committed state: a single consistent snapshot, which Spark's JDBC source cannot promise (each of
its partitions is a query of its own). A GC barrier holds that timestamp readable; each task
renews it while it reads (see :mod:`percolator.connectors.spark.snapshot`).

Rows leave as Arrow record batches of at most ``batchSize`` rows, built a column at a time
from packed scan pages (:mod:`percolator.connectors.spark.columns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from percolator.connectors.spark import columns, partitioning, snapshot
from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.options import ReadOptions
from percolator.connectors.spark.runtime import iterate, open_database, run
from percolator.connectors.spark.types import to_spark
from percolator.server.planner.row_codec import RowCodec
from percolator.server.sql.catalog import TableDef
from percolator.server.storage.packed import PackedCells
from percolator.server.txn.errors import TransactionTooOld

T = TypeVar("T")

SCAN_PAGE_CELLS = 32768
"""Cells per shard and round trip of a partition's scan, at most: big pages for a bulk read
(about a megabyte for rows of small values; pages of 12,288 cells read 15 % slower than of
49,152 in one measurement). The store makes pages of wide values smaller (about 8 MB)."""


class PercolatorReader(DataSourceReader):
    """Plans the partitions of a read and reads one of them (in a Spark task)."""

    def __init__(
        self, options: ReadOptions, table: TableDef, schema: StructType, start_ts: int
    ) -> None:
        self.options = options
        self.table = table
        self.schema = schema
        self.start_ts = start_ts
        self.ranges: tuple[partitioning.KeyRange, ...] = (partitioning.EVERYTHING,)
        self.barrier = snapshot.barrier_id("read", start_ts)
        """The GC barrier of this read (one per planned read, shared by its tasks)."""

    def partitions(self) -> Sequence[InputPartition]:
        if not self.ranges:
            return [partitioning.ReadPartition(0, [])]
        points = run(self._plan())
        return partitioning.plan(self.ranges, points, self.options.partitions)

    async def _plan(self) -> list[bytes]:
        """Hold GC at the snapshot for the job, and sample split points."""
        async with open_database(self.options.connection) as db:
            await self._gc_barrier().renew()
            if self.options.partitions == 1:
                return []
            return await snapshot.sample_row_keys(db, self.table.storage, self.options.partitions)

    def _gc_barrier(self) -> snapshot.GcBarrier:
        return snapshot.GcBarrier(
            self.options.connection.coordinator,
            self.barrier,
            self.start_ts,
            self.options.gc_barrier_ttl_s,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, partitioning.ReadPartition)
        ranges = partition.ranges
        if not ranges:
            return iter(())
        return iterate(lambda: self._read(ranges))

    async def _read(self, ranges: Sequence[partitioning.KeyRange]) -> AsyncIterator[pa.RecordBatch]:
        encoder = BatchEncoder(self.table, self.schema)
        limit = self.options.batch_rows
        async with open_database(self.options.connection) as db:
            barrier = self._gc_barrier()
            await barrier.renew()
            keeper = asyncio.ensure_future(barrier.keep())
            try:
                txn = await snapshot.begin_at(db, self.start_ts)
                try:
                    for r in ranges:
                        async for page in txn.scan_packed(
                            self.table.storage,
                            r.start,
                            r.end,
                            encoder.codec.read_names,
                            page_size=SCAN_PAGE_CELLS,
                            prefetch=True,
                        ):
                            batch = encoder.batch_of_packed(page)
                            for at in range(0, batch.num_rows, limit):
                                yield batch.slice(at, limit)
                except TransactionTooOld as exc:
                    raise snapshot.too_old(self.start_ts, exc) from exc
                finally:
                    await txn.rollback()
            finally:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper


class PushdownReader(PercolatorReader):
    """A reader that also narrows its key ranges by primary-key filters.

    A separate class because Spark refuses every read through a reader that implements
    ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled`` is false; the data source
    hands this one out only when Spark is asking for filters (see :func:`pushdown_requested`).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        pushed = partitioning.key_ranges(self.table, filters)
        self.ranges = pushed.ranges
        exact = {id(f) for f in pushed.exact}
        for f in filters:
            if id(f) not in exact:
                yield f


_PUSHDOWN_MODULE = "pyspark.sql.worker.data_source_pushdown_filters"


def pushdown_requested() -> bool:
    """True when ``reader()`` is being called by Spark's filter-pushdown step.

    PySpark 4.3 calls ``reader()`` from that module only when filter pushdown is enabled, and
    from the plain planning module otherwise; the configuration itself is not visible in the
    worker, so the caller is the only signal."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == _PUSHDOWN_MODULE:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class BatchEncoder:
    """Turns decoded rows of a table into Arrow record batches of the DataFrame's schema."""

    def __init__(self, table: TableDef, schema: StructType) -> None:
        self.codec = RowCodec(table)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.width = len(table.columns)
        self.converters = [to_spark(c.type) for c in table.columns]
        self.types = [self.arrow_schema.field(i).type for i in range(self.width)]
        self.keys = columns.KeyDecoder(table, self.types)
        names = self.codec.read_names
        self.presence = names.index(self.codec.presence)
        self.value_decoders = [
            (i, names.index(name), columns.value_decoder(table.columns[i], self.types[i]))
            for i, name, _, _ in self.codec.value_columns
        ]

    def batch_of_packed(self, page: PackedCells) -> pa.RecordBatch:
        """The rows of a packed scan page (of :attr:`codec`'s ``read_names``)."""
        keys, stored = columns.unpack_page(page, len(self.codec.read_names), self.presence)
        arrays: list[pa.Array | None] = [None] * self.width
        if self.keys.positions:
            key_arrays = self._converting(self.keys.positions[0], lambda: self.keys.columns(keys))
            for p, array in zip(self.keys.positions, key_arrays, strict=True):
                arrays[p] = array
        for i, code, decode in self.value_decoders:
            arrays[i] = self._converting(i, lambda: decode(stored[code]))  # noqa: B023 (called at once)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _converting(self, i: int, build: Callable[[], T]) -> T:
        try:
            return build()
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise self._cannot_convert(i, exc) from exc

    def _cannot_convert(self, i: int, exc: Exception) -> PercolatorSparkError:
        return PercolatorSparkError(
            "22003",
            f'column "{self.table_column(i)}": a value cannot be converted for Spark: {exc}',
        )

    def batch(self, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
        values_of = list(zip(*rows, strict=False)) if rows else [() for _ in range(self.width)]
        arrays = []
        for i in range(self.width):
            try:
                arrays.append(columns.to_arrow(values_of[i], self.converters[i], self.types[i]))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise self._cannot_convert(i, exc) from exc
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def table_column(self, i: int) -> str:
        return self.codec.table.columns[i].name
