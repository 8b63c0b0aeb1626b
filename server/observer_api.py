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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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


class _Runner(Protocol):
    async def run_statement(
        self, sql: str, params: Sequence[object] = (), param_oids: Sequence[int] = ()
    ) -> Any: ...


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

    async def fetchval(self, sql: str, *args: object) -> Any:
        """The first column of the first row, or None."""
        result = await self._runner.run_statement(sql, args)
        return result.rows[0][0] if result.rows else None
