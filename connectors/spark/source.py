"""The ``percolator`` data source: where Spark asks for a schema, a reader, a writer, a stream.

Spark creates the data source in a Python worker when a DataFrame is loaded, calls
:meth:`PercolatorDataSource.schema` there and pickles the instance for every later step (planning
a read, each task, commit). So ``schema()`` is where the read's snapshot timestamp is taken: the
DataFrame then reads one snapshot in every partition and every action.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from percolator.connectors.spark import options as opts
from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.runtime import find_table, open_database, run
from percolator.connectors.spark.types import table_schema
from percolator.server.sql.catalog import TableDef


class PercolatorDataSource(DataSource):
    """``spark.read.format("percolator")``, ``df.write.format("percolator")`` and
    ``spark.readStream.format("percolator")``: see docs/spark.md."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._table: TableDef | None = None
        self._snapshot_ts: int | None = None

    @classmethod
    def name(cls) -> str:
        return "percolator"

    def schema(self) -> StructType:
        """The table's columns as Spark types; also fixes the snapshot a read will see."""
        where = opts.table_options(self.options)
        table, ts = run(_describe(where.connection, where.table))
        self._table = table
        self._snapshot_ts = ts
        if where.changes:
            from percolator.connectors.spark.stream import stream_schema

            return stream_schema(table)
        return table_schema(table)

    def reader(self, schema: StructType) -> DataSourceReader:
        from percolator.connectors.spark.reader import (
            PercolatorReader,
            PushdownReader,
            pushdown_requested,
        )

        read = opts.read_options(self.options)
        table, ts = self._table, self._snapshot_ts
        if table is None or ts is None:
            # A schema given by the caller: schema() never ran.
            table, ts = run(_describe(read.connection, read.table))
        _check_schema(table, schema)
        if read.as_of is not None:
            ts = read.as_of
        cls = PushdownReader if pushdown_requested() else PercolatorReader
        return cls(read, table, schema, ts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from percolator.connectors.spark.writer import PercolatorWriter, plan_write

        write = opts.write_options(self.options)
        return PercolatorWriter(run(plan_write(write, schema, overwrite)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from percolator.connectors.spark.stream import ChangeStreamReader

        stream = opts.stream_options(self.options)
        table = self._table
        if table is None:
            table, _ = run(_describe(stream.connection, stream.table))
        return ChangeStreamReader(stream, table, schema)


async def _describe(connection: opts.Connection, table: str) -> tuple[TableDef, int]:
    """The table's definition and a fresh timestamp (the snapshot of a read)."""
    async with open_database(connection) as db:
        catalog = await db.catalog()
        found = find_table(catalog, table)
        ts = await db.client.clock.get_timestamp()
        return found, ts


def _check_schema(table: TableDef, schema: StructType) -> None:
    """A schema given with ``.schema(...)`` must be the table's (there is no column pruning)."""
    expected = table_schema(table)
    got = [(f.name, f.dataType) for f in schema.fields]
    want = [(f.name, f.dataType) for f in expected.fields]
    if got != want:
        raise PercolatorSparkError(
            "42804",
            f'the schema given does not match table "{table.name}"',
            detail=f"table: {expected.simpleString()}; given: {schema.simpleString()}",
            hint="leave the schema out: it comes from the table",
        )
