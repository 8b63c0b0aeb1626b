"""The API a Python observer is written against.

``CREATE OBSERVER name ON table (column, ...) EXECUTE 'package.module:function'`` names an
``async def function(txn: ObserverTransaction, row: ChangedRow) -> None``. The worker calls it
inside the observer's transaction for each changed row; it may read and write any table through
``txn`` and the worker commits when it returns (or rolls back when it raises). Example::

    async def count_words(txn, row):
        if row.deleted:
            await txn.execute("DELETE FROM word_counts WHERE doc = $1", row.key["id"])
            return
        n = len((row.values["body"] or "").split())
        await txn.execute(
            "INSERT INTO word_counts VALUES ($1, $2) "
            "ON CONFLICT (doc) DO UPDATE SET n = excluded.n",
            row.key["id"], n,
        )

Arguments are Python values of the parameters' types (int, str, Decimal, datetime, bytes,
bool, UUID, ...), as with asyncpg; json and jsonb parameters also take a dict or list. Results
are the same Python values; json and jsonb come back as JSON text, as asyncpg returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from percolator.server.planner.row_codec import RowCodec
from percolator.server.sql.catalog import Catalog, TableDef
from percolator.server.sql.errors import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SqlError
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import Transaction


@dataclass(frozen=True)
class ChangedRow:
    """The row an observer runs for, as its transaction reads it."""

    observer: str
    """The observer's name."""
    table: str
    """The observed table."""
    key: dict[str, Any]
    """The primary-key columns (empty for a table without a primary key)."""
    values: dict[str, Any] | None
    """Every column of the row; None when the row no longer exists."""
    raw_key: bytes
    """The row key as stored."""

    @property
    def deleted(self) -> bool:
        return self.values is None


@dataclass(frozen=True)
class Rows:
    """Rows of one table for :meth:`ObserverTransaction.prefetch`: primary keys (a value for a
    one-column key, a tuple for a composite one) and the columns to read (None: every one)."""

    table: str
    keys: Iterable[object]
    columns: Sequence[str] | None = None


def _cells_of(runner: _Runner, catalog: Catalog, request: Rows) -> list[CellKey]:
    """The cells that hold the requested columns of the requested rows."""
    table = catalog.table(request.table)
    if not table.primary_key:
        raise SqlError(
            FEATURE_NOT_SUPPORTED, f'prefetch of table "{request.table}", which has no primary key'
        )
    read = None
    if request.columns is not None:
        read = frozenset(table.position(table.column(c).id) for c in request.columns)
    codec = runner.row_codec(table, read)
    width = len(table.primary_key)
    cells: list[CellKey] = []
    for key in request.keys:
        values = key if isinstance(key, tuple) else (key,)
        if len(values) != width:
            raise SqlError(
                INVALID_PARAMETER_VALUE,
                f'prefetch of "{request.table}": a key of {width} column(s) expected, '
                f"got {values!r}",
            )
        cells += codec.cell_keys(codec.key_of_values(values))
    return cells


class _Runner(Protocol):
    async def run_statement(
        self, sql: str, params: Sequence[object] = (), param_oids: Sequence[int] = ()
    ) -> Any: ...

    def current_catalog(self) -> Catalog: ...

    def row_codec(self, table: TableDef, read: frozenset[int] | None = None) -> RowCodec: ...


class ObserverTransaction:
    """SQL inside the observer's transaction (which the worker commits)."""

    def __init__(self, runner: _Runner, txn: Transaction) -> None:
        self._runner = runner
        self.transaction = txn
        """The underlying :class:`~percolator.server.txn.transaction.Transaction`, for the
        cell-level API."""

    @property
    def start_ts(self) -> int:
        return self.transaction.start_ts

    async def execute(self, sql: str, *args: object) -> str:
        """Run one statement; returns its command tag (``INSERT 0 1``, ...)."""
        return (await self._runner.run_statement(sql, args)).tag

    async def fetch(self, sql: str, *args: object) -> list[dict[str, Any]]:
        """Run one statement; returns its rows as dicts."""
        result = await self._runner.run_statement(sql, args)
        return [dict(zip(result.columns, r, strict=True)) for r in result.rows]

    async def fetchrow(self, sql: str, *args: object) -> dict[str, Any] | None:
        """The first row, or None."""
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def prefetch(
        self,
        rows: Mapping[str, Iterable[object]] | Iterable[Rows],
        columns: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Read rows of one or more tables together, in one round trip per shard, so that the
        statements that follow find them in the transaction instead of each reading the store
        (the transaction remembers up to 4,096 cells read). ``rows`` maps a table name to
        primary keys: a value for a one-column key, a tuple for a composite one; ``columns``
        may limit what is read of a table (else every column). A row that does not exist is
        remembered as absent. ``rows`` may also be a list of :class:`Rows`, each with columns
        of its own, to read all of some rows of a table and a few columns of others.

        Example: ``await txn.prefetch({"docs": [url, *targets], "anchors": [(t, url)]})``
        before the ``SELECT`` and ``INSERT ... ON CONFLICT`` statements that read them."""
        if isinstance(rows, Mapping):
            wanted = columns or {}
            requests = [Rows(name, keys, wanted.get(name)) for name, keys in rows.items()]
        else:
            requests = list(rows)
        catalog = self._runner.current_catalog()
        cells = [cell for request in requests for cell in _cells_of(self._runner, catalog, request)]
        if cells:
            await self.transaction.get_many(cells)

    async def fetchval(self, sql: str, *args: object) -> Any:
        """The first column of the first row, or None."""
        result = await self._runner.run_statement(sql, args)
        return result.rows[0][0] if result.rows else None
