"""Writing rows of a table inside one transaction, as INSERT (or an upsert) does.

The SQL layer's building blocks do the work (:mod:`percolator.server.planner.dml`): generated
columns, NOT NULL and CHECK constraints, the unique checks of the primary key and of unique
indexes against the snapshot (one batched read per constraint and chunk), index entries, and
the update of an existing row for an upsert. What differs from INSERT is what a Spark job needs:

- keys must not depend on the attempt: a retried task writes the same cells again, which a
  prewrite at the same start_ts accepts (idempotent). A table without a primary key gets hidden
  row ids derived from the job's timestamp, the partition and the row's content (not its
  position, which a recomputed partition may change);
- a row that collides with another of the same task (in any of its batches) is a unique
  violation, as within one INSERT;
- in per-partition mode, a retried task finds the rows its failed attempt committed: a row equal
  to the one already stored is skipped instead of being a duplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from percolator.server.planner.context import ExecContext
from percolator.server.planner.dml import (
    CHUNK,
    TableWriter,
    duplicate_key,
    find_conflicts,
    key_detail,
    unique_key_groups,
    update_row,
)
from percolator.server.planner.row_codec import Row, RowCodec
from percolator.server.sql.catalog import TableDef
from percolator.server.sql.errors import CARDINALITY_VIOLATION, SqlError

_COUNTER_BITS = 62


@dataclass
class WriteStats:
    """What a task wrote."""

    inserted: int = 0
    updated: int = 0
    skipped: int = 0


@dataclass
class RowWriter:
    """Inserts (or upserts) rows of one table for one task attempt, over several transactions
    (one per batch), remembering the keys it wrote so that duplicates across batches are
    caught."""

    writer: TableWriter
    job_ts: int
    """Seeds hidden row ids (the distributed transaction's start_ts, or the job's timestamp)."""
    partition: int
    upsert: bool
    upsert_positions: tuple[int, ...]
    """Positions an upsert takes from the new row (the DataFrame's columns)."""
    tolerate_existing: bool
    """Skip a row equal to the stored one (a retried per-partition task)."""
    stats: WriteStats = field(default_factory=WriteStats)
    _seen: dict[str, set[bytes]] = field(default_factory=dict)
    _occurrences: dict[bytes, int] = field(default_factory=dict)

    @property
    def table(self) -> TableDef:
        return self.writer.table

    def keys_of(self, rows: Sequence[Row]) -> list[bytes]:
        """The row keys: the primary key's encoding, or a hidden id that depends only on the
        job, the partition and the row's content (and how often that content came before)."""
        if self.table.primary_key:
            return [self.writer.codec.key_of(r) for r in rows]
        keys = []
        for r in rows:
            digest = hashlib.blake2b(
                repr((self.partition, r)).encode(), digest_size=8, person=b"spark-rowid"
            ).digest()
            n = self._occurrences.get(digest, 0)
            self._occurrences[digest] = n + 1
            if n:
                digest = hashlib.blake2b(digest + n.to_bytes(8, "big"), digest_size=8).digest()
            counter = int.from_bytes(digest, "big") & ((1 << _COUNTER_BITS) - 1)
            keys.append(RowCodec.hidden_row_id(self.job_ts, counter))
        return keys

    async def write(self, ctx: ExecContext, rows: list[Row]) -> None:
        """Check and buffer ``rows`` in ``ctx.txn``."""
        for start in range(0, len(rows), CHUNK):
            await self._write_chunk(ctx, rows[start : start + CHUNK])

    async def _write_chunk(self, ctx: ExecContext, rows: list[Row]) -> None:
        writer = self.writer
        rows = [writer.generate(row, ctx) for row in rows]
        for row in rows:
            writer.check_row(row, ctx)
        keys = self.keys_of(rows)
        self._check_duplicates(rows, keys)
        needs_check = bool(self.table.primary_key) or bool(writer.unique_indexes)
        conflicts = await find_conflicts(writer, ctx, rows, keys) if needs_check else []
        txn = ctx.txn
        # The rows the new ones collide with: one batched read for the chunk.
        clashing = [(i, c) for i, c in enumerate(conflicts) if c is not None]
        stored = await writer.codec.get_rows(txn, [c.existing_key for _, c in clashing])
        existing = {i: row for (i, _), row in zip(clashing, stored, strict=True)}
        for i, row in enumerate(rows):
            conflict = conflicts[i] if conflicts else None
            if conflict is not None:
                await self._on_conflict(ctx, row, keys[i], conflict, existing[i])
                continue
            writer.codec.write_new(txn, keys[i], row)
            for ix in writer.indexes:
                ix.write(txn, row, keys[i])
            self.stats.inserted += 1

    async def _on_conflict(
        self, ctx: ExecContext, row: Row, key: bytes, conflict: Any, existing: Row | None
    ) -> None:
        """``row`` collides with the stored row ``existing`` (as the snapshot shows it)."""
        writer = self.writer
        is_pk = (
            conflict.constraint == self.table.pk_constraint_name and conflict.existing_key == key
        )
        if existing is not None and self.tolerate_existing and _same(existing, row, self.table):
            self.stats.skipped += 1
            return
        if self.upsert and is_pk and existing is not None:
            new = list(existing[: len(self.table.columns)])
            for p in self.upsert_positions:
                new[p] = row[p]
            updated = writer.generate(tuple(new), ctx)
            writer.check_row(updated, ctx)
            await update_row(writer, ctx, key, existing, updated)
            self.stats.updated += 1
            return
        raise duplicate_key(self.table, conflict.constraint, conflict.key, row)

    def _check_duplicates(self, rows: list[Row], keys: list[bytes]) -> None:
        """Rows of this task that collide with each other (the snapshot cannot show those)."""
        table = self.table
        for constraint, column_ids, key_of in unique_key_groups(self.writer, rows, keys):
            seen = self._seen.setdefault(constraint, set())
            for i in range(len(rows)):
                k = key_of(i)
                if k is None:
                    continue
                if k in seen:
                    if self.upsert:
                        raise SqlError(
                            CARDINALITY_VIOLATION,
                            "an upsert cannot affect a row a second time",
                            detail=key_detail(table, column_ids, rows[i]),
                            hint="Ensure that no rows of the DataFrame have duplicate "
                            "constrained values.",
                        )
                    raise duplicate_key(table, constraint, column_ids, rows[i])
                seen.add(k)


def _same(existing: Row, row: Row, table: TableDef) -> bool:
    width = len(table.columns)
    return tuple(existing[:width]) == tuple(row[:width])
