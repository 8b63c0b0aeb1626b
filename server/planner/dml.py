"""INSERT, UPDATE and DELETE over the transaction layer, with constraints and indexes.

Writes are buffered in the transaction and sent at commit (Percolator's prewrite); reads made
here (does the key exist? is the unique value taken?) go through the same snapshot, batched per
statement chunk: one round trip per shard for the primary keys and one per unique index. A
concurrent transaction that inserts the same key after our snapshot is caught at commit as a
write conflict (40001), since both write the same cells.

Round trips for an INSERT of n rows into a table with u unique indexes: ``1 + u`` reads per
chunk of :data:`CHUNK` rows (none for a table without a primary key or unique index).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from percolator.server.planner import foreign_keys
from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.planner.foreign_keys import ForeignKeys
from percolator.server.planner.physical import Node, PointGet
from percolator.server.planner.row_codec import MARKER, IndexCodec, Row, RowCodec
from percolator.server.planner.row_locking import (
    lock_for_write,
    lock_new_keys,
    stale_statement,
)
from percolator.server.planner.triggers import RowTriggers
from percolator.server.sql.bound import BExpr, OnConflict
from percolator.server.sql.catalog import Catalog, ColumnDef, IndexDef, TableDef, key_signature
from percolator.server.sql.errors import (
    CARDINALITY_VIOLATION,
    CHECK_VIOLATION,
    NOT_NULL_VIOLATION,
    UNIQUE_VIOLATION,
    ErrorObject,
    SqlError,
)
from percolator.server.sql.schemas import bare
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import RowLockMode

T = TypeVar("T")
L = TypeVar("L")

CHUNK = 1000
"""Rows checked and written per batch of reads."""

_row_counter = itertools.count(1)


@dataclass
class TableWriter:
    """Everything needed to write rows of one table: codecs and compiled constraints."""

    table: TableDef
    codec: RowCodec
    indexes: list[IndexCodec]
    checks: list[tuple[str, Compiled]]
    not_null: list[tuple[int, ColumnDef]]
    foreign_keys: ForeignKeys = field(default_factory=ForeignKeys)
    generated: list[tuple[int, Compiled]] = field(default_factory=list)
    """(position, expression over the row) of the stored generated columns."""
    triggers: RowTriggers | None = None
    """The table's row triggers, for the statements that fire them (not DDL's rewrites)."""

    @property
    def unique_indexes(self) -> list[IndexCodec]:
        return [ix for ix in self.indexes if ix.unique]

    @functools.cached_property  # a writer is built once per plan; UPDATE asks per statement
    def key_positions(self) -> frozenset[int]:
        """Positions of the columns a foreign key could reference (the primary key's and
        the unique indexes'): an UPDATE that changes none of them locks its rows FOR NO KEY
        UPDATE, which a foreign key's check of them does not wait for, as in Postgres."""
        table = self.table
        ids = [
            *table.primary_key,
            *(c for ix in self.unique_indexes for c in ix.index.plain_column_ids),
        ]
        return frozenset(table.position(c) for c in ids)

    def generate(self, row: Row, ctx: Any) -> Row:
        """``row`` with its generated columns computed from its other columns (which are
        all a generation expression may read), as Postgres does before checking a row."""
        if not self.generated:
            return row
        new = list(row)
        for pos, expression in self.generated:
            new[pos] = expression(row, ctx)
        return tuple(new)

    def check_row(self, row: Row, ctx: Any) -> None:
        for pos, col in self.not_null:
            if row[pos] is None:
                raise SqlError(
                    NOT_NULL_VIOLATION,
                    f'null value in column "{col.name}" of relation "{bare(self.table.name)}" '
                    "violates not-null constraint",
                    detail=f"Failing row contains {format_row(self.table, row)}.",
                    about=ErrorObject(self.table.name, column=col.name),
                )
        for name, check in self.checks:
            if check(row, ctx) is False:
                raise SqlError(
                    CHECK_VIOLATION,
                    f'new row for relation "{bare(self.table.name)}" violates check constraint '
                    f'"{bare(name)}"',
                    detail=f"Failing row contains {format_row(self.table, row)}.",
                    about=ErrorObject(self.table.name, constraint=name),
                )

    def row_key(self, row: Row) -> bytes:
        if self.table.primary_key:
            return self.codec.key_of(row)
        return RowCodec.hidden_row_id(0, 0)  # replaced by the caller with a fresh id


def format_row(table: TableDef, row: Row) -> str:
    from percolator.server.sql.textio import text_out

    parts = [
        "null" if v is None else text_out(c.type, v)
        for c, v in zip(table.columns, row, strict=False)
    ]
    return "(" + ", ".join(parts) + ")"


KeyColumns = tuple[int, ...] | IndexCodec
"""A unique key's columns: the primary key's column ids, or a unique index (whose key
columns may be expressions)."""


def key_detail(table: TableDef, key: KeyColumns, row: Row) -> str:
    """The DETAIL of a unique violation: ``Key (a, b)=(1, x) already exists.``, ``Key
    (lower(email))=(a@x) already exists.``"""
    return f"{key_text(table, key, row)} already exists."


def key_text(table: TableDef, key: KeyColumns, row: Row) -> str:
    """``row``'s values of a unique key as Postgres's messages show them: ``Key (a, b)=(1,
    x)``."""
    from percolator.server.sql.textio import text_out

    if isinstance(key, IndexCodec):
        names = key_names(table, key.index)
        types = key.types
        values = key.values_of(row)
    else:
        cols = [table.column_by_id(c) for c in key]
        names = [c.name for c in cols]
        types = [c.type for c in cols]
        values = [row[table.position(c.id)] for c in cols]
    shown = ", ".join(
        "null" if v is None else text_out(t, v) for t, v in zip(types, values, strict=True)
    )
    return f"Key ({', '.join(names)})=({shown})"


def key_names(table: TableDef, index: IndexDef) -> list[str]:
    """The key columns of ``index`` as a unique violation's DETAIL names them: a column's
    name, an expression as Postgres prints it (``lower(email)``, ``(a + b)``)."""
    from percolator.server.sql.pg_catalog_tables import index_expression_text

    return [
        table.column_by_id(cid).name
        if (sql := index.expression(i)) is None
        else index_expression_text(table, sql, True)
        for i, cid in enumerate(index.column_ids)
    ]


def key_signature_of(table: TableDef, key: KeyColumns) -> tuple[object, ...]:
    """What ``key`` is keyed on, order aside (as an ON CONFLICT target names it)."""
    if isinstance(key, IndexCodec):
        return key.index.signature
    return key_signature(key, ())


def duplicate_key(table: TableDef, constraint: str, key: KeyColumns, row: Row) -> SqlError:
    """The 23505 error for ``row`` colliding on ``constraint``."""
    return SqlError(
        UNIQUE_VIOLATION,
        f'duplicate key value violates unique constraint "{bare(constraint)}"',
        detail=key_detail(table, key, row),
        about=ErrorObject(table.name, constraint=constraint),
    )


class Conflict:
    """Which constraint an inserted row collides with, and the existing row's key."""

    def __init__(self, constraint: str, key: KeyColumns, existing_key: bytes) -> None:
        self.constraint = constraint
        self.key = key
        self.existing_key = existing_key


def _constraints(
    writer: TableWriter, arbiter: tuple[object, ...] | None
) -> list[IndexCodec | None]:
    """The unique constraints a new row is checked against, in order: the primary key (None)
    then the unique indexes, except that an ON CONFLICT target (its key signature) comes first,
    as Postgres checks its arbiter before inserting: a row that collides there takes the
    conflict action even if it would also collide elsewhere."""
    out: list[IndexCodec | None] = [None] if writer.table.primary_key else []
    out.extend(writer.unique_indexes)
    if arbiter is not None:
        table = writer.table
        out.sort(
            key=lambda ix: (
                key_signature_of(table, table.primary_key if ix is None else ix) != arbiter
            )
        )
    return out


async def find_conflicts(
    writer: TableWriter,
    ctx: Any,
    rows: list[Row],
    keys: list[bytes],
    arbiter: tuple[object, ...] | None = None,
) -> list[Conflict | None]:
    """For each new row: the first unique constraint (in :func:`_constraints`'s order) it
    collides with in the snapshot, or None. One batched read per constraint."""
    txn = ctx.txn
    out: list[Conflict | None] = [None] * len(rows)
    table = writer.table
    for ix in _constraints(writer, arbiter):
        if ix is None:
            if await _no_row_between(writer.codec, txn, keys):
                continue
            todo = [i for i in range(len(rows)) if out[i] is None]
            cells = [CellKey(writer.codec.storage, keys[i], writer.codec.presence) for i in todo]
            present = await txn.get_many(cells)
            for i, v in zip(todo, present, strict=True):
                if v is not None:
                    out[i] = Conflict(table.pk_constraint_name, table.primary_key, keys[i])
            continue
        todo = [i for i in range(len(rows)) if out[i] is None and ix.has_unique_entry(rows[i])]
        if not todo:
            continue
        cells = [CellKey(ix.storage, ix.entry_key(rows[i], keys[i]), MARKER) for i in todo]
        found = await txn.get_many(cells)
        for i, v in zip(todo, found, strict=True):
            if v is not None:  # owned by another row, or by the row of the same key
                out[i] = Conflict(ix.index.name, ix, v)
    return out


RANGE_PROBE_ROWS = 64
"""From this many new rows, the primary-key check first asks whether any row lies between
the smallest and the largest new key."""


async def _no_row_between(codec: RowCodec, txn: Any, keys: list[bytes]) -> bool:
    """Whether none of ``keys`` can collide because the snapshot holds nothing at all (no row,
    nor a deleted one) between the smallest and the largest of them, and the transaction has
    written none of them itself: one round trip answers for all the rows (a bulk load into a
    new key range; a Spark write's chunk of 1,000 rows read 1,000 cells instead). Few keys,
    or keys among stored ones: False."""
    if len(keys) < RANGE_PROBE_ROWS:
        return False
    storage, presence = codec.storage, codec.presence
    if any(txn.has_write(CellKey(storage, k, presence)) for k in keys):
        return False
    end = max(keys) + b"\x00"  # the smallest key above the largest
    return await txn.snapshot_range_empty(storage, min(keys), end, presence)


def _check_batch_duplicates(
    writer: TableWriter,
    rows: list[Row],
    keys: list[bytes],
    skip: list[bool],
    on_conflict: OnConflict | None,
) -> None:
    """Rows of one statement that collide with each other (the store cannot see those yet):
    an error, except that ON CONFLICT DO NOTHING skips the later ones."""
    if on_conflict is not None and not on_conflict.do_update:
        duplicate = None
    elif on_conflict is not None:

        def duplicate(constraint: str, key: KeyColumns, row: Row) -> SqlError:
            return SqlError(
                CARDINALITY_VIOLATION,
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
                hint="Ensure that no rows proposed for insertion within the same command "
                "have duplicate constrained values.",
            )
    else:

        def duplicate(constraint: str, key: KeyColumns, row: Row) -> SqlError:
            return duplicate_key(writer.table, constraint, key, row)

    for constraint, key, key_of in unique_key_groups(writer, rows, keys):
        seen: set[bytes] = set()
        for i in range(len(rows)):
            if skip[i]:
                continue
            k = key_of(i)
            if k is None:
                continue
            if k in seen:
                if duplicate is not None:
                    raise duplicate(constraint, key, rows[i])
                skip[i] = True
            else:
                seen.add(k)


UniqueKeyGroup = tuple[str, KeyColumns, Callable[[int], bytes | None]]
"""A constraint's name, its columns, and the key a row (by index) takes in it (None: NULLs
never collide)."""


def unique_key_groups(
    writer: TableWriter, rows: list[Row], keys: list[bytes]
) -> list[UniqueKeyGroup]:
    """The primary key and every unique index of the writer's table, each with a function
    giving row ``i``'s key in it: what rows of one statement must not share."""
    table = writer.table
    groups: list[UniqueKeyGroup] = []
    if table.primary_key:
        groups.append((table.pk_constraint_name, table.primary_key, lambda i: keys[i]))
    for ix in writer.unique_indexes:
        groups.append(
            (
                ix.index.name,
                ix,
                lambda i, ix=ix: (
                    ix.entry_key(rows[i], keys[i]) if ix.has_unique_entry(rows[i]) else None
                ),
            )
        )
    return groups


@dataclass
class InsertResult:
    count: int
    rows: list[Row]
    """The rows inserted or updated (for RETURNING)."""


async def insert_rows(
    writer: TableWriter,
    ctx: Any,
    rows: list[Row],
    on_conflict: OnConflict | None = None,
    conflict_update: Callable[[Row, Row], Any] | None = None,
) -> InsertResult:
    """Insert complete rows (defaults already applied; generated columns are computed
    here, after BEFORE triggers), checking constraints."""
    triggers = writer.triggers
    # With BEFORE INSERT triggers each row is written before the next one's triggers run,
    # as in Postgres (a trigger may read what the statement wrote so far).
    size = 1 if triggers is not None and triggers.fires(True, "insert") else CHUNK
    count = 0
    written: list[Row] = []
    inserted: list[Row] = []
    changed: list[tuple[Row, Row]] = []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        if size == 1:
            assert triggers is not None
            chunk = await triggers.before_insert(ctx, chunk)
        if writer.generated:
            chunk = [writer.generate(r, ctx) for r in chunk]
        for row in chunk:
            writer.check_row(row, ctx)
        if writer.table.primary_key:
            keys = [writer.codec.key_of(r) for r in chunk]
        else:
            keys = [RowCodec.hidden_row_id(ctx.txn.start_ts, next(_row_counter)) for _ in chunk]
        skip = [False] * len(chunk)
        since: dict[int, int] = {}
        needs_check = bool(writer.table.primary_key) or bool(writer.unique_indexes)
        if needs_check:
            _check_batch_duplicates(writer, chunk, keys, skip, on_conflict)
            # The keys' locks and the read of their rows go out together: a lock that waited
            # for a key's other inserter reports whether it committed (the statement then
            # runs again, and finds the key taken), so the read at the snapshot stands.
            conflicts, taken = await _beside(
                _lock_new_keys(writer, ctx, chunk, keys),
                find_conflicts(writer, ctx, chunk, keys, on_conflict and on_conflict.target_key),
            )
            since = await _recheck_new_keys(writer, ctx, chunk, keys, conflicts, taken, on_conflict)
            updates: list[tuple[Row, Conflict]] = []
            for i, c in enumerate(conflicts):
                if c is None or skip[i]:
                    continue
                if on_conflict is None:
                    raise duplicate_key(writer.table, c.constraint, c.key, chunk[i])
                if (
                    on_conflict.target_key is not None
                    and on_conflict.target_key != key_signature_of(writer.table, c.key)
                ):
                    raise duplicate_key(writer.table, c.constraint, c.key, chunk[i])
                skip[i] = True
                if on_conflict.do_update and conflict_update is not None:
                    updates.append((chunk[i], c))
            for old, updated in await _update_conflicting(
                writer, ctx, updates, conflict_update, _upsert_mode(writer, on_conflict)
            ):
                written.append(updated)
                changed.append((old, updated))
                count += 1
        for i, row in enumerate(chunk):
            if skip[i]:
                continue
            with ctx.txn.deciding_at(since.get(i)):
                writer.codec.write_new(ctx.txn, keys[i], row)
                for ix in writer.indexes:
                    ix.write(ctx.txn, row, keys[i])
            written.append(row)
            if triggers is not None:
                inserted.append(row)
            count += 1
    if writer.foreign_keys:
        # At the end of the statement, as Postgres checks them.
        await foreign_keys.check_references(writer.foreign_keys, ctx, written)
        await foreign_keys.on_update(writer.foreign_keys, ctx, changed)
    if triggers is not None:
        await triggers.after(ctx, "insert", [(None, r) for r in inserted])
        await triggers.after(ctx, "update", changed)
    return InsertResult(count, written)


async def _lock_new_keys(
    writer: TableWriter, ctx: Any, rows: list[Row], keys: list[bytes]
) -> list[CellKey]:
    """Lock the keys new rows take (primary key, unique index entries), as Postgres makes a
    second inserter of a key wait for the first: once it commits, the key is taken (23505 or
    the ON CONFLICT action) or free. Returns the cells (a row's presence, an index entry) of
    the keys that changed after the snapshot, for _recheck_new_keys."""
    if ctx.row_locking is None:
        return []
    codec = writer.codec
    changed: list[CellKey] = []
    if writer.table.primary_key:
        taken = await lock_new_keys(ctx, codec, sorted(set(keys)))
        changed += [CellKey(codec.storage, k, codec.presence) for k in sorted(taken)]
    return changed + await _lock_unique_entries(writer, ctx, list(zip(rows, keys, strict=True)))


async def _recheck_new_keys(
    writer: TableWriter,
    ctx: Any,
    rows: list[Row],
    keys: list[bytes],
    conflicts: list[Conflict | None],
    changed: list[CellKey],
    on_conflict: OnConflict | None,
) -> dict[int, int]:
    """The rows whose keys another transaction took or gave up after the snapshot (their
    locks said so): whether they collide now, every constraint read again at a fresh
    timestamp, as Postgres's unique check sees the newest state. ``conflicts`` is updated: a
    key taken now is 23505, or the ON CONFLICT action (DO NOTHING passes the row by under READ
    COMMITTED, DO UPDATE runs the statement again to update the newest version); a key freed
    since is no conflict. Under REPEATABLE READ any such key is a serialization failure.
    Returns, for the rows free now, the timestamp their writes are conflict-checked from."""
    if not changed:
        return {}
    if not ctx.row_locking.read_committed:
        # REPEATABLE READ is snapshot isolation: a key another transaction committed after
        # the snapshot is a write conflict (40001, which clients and observer runs retry),
        # where Postgres reports 23505 or goes on.
        stale_statement(ctx.row_locking)
    moved = set(changed)
    arbiter = None if on_conflict is None else on_conflict.target_key
    probes = {i: _key_cells(writer, row, keys[i], arbiter) for i, row in enumerate(rows)}
    affected = [i for i, cells in probes.items() if any(c for _, c in cells if c in moved)]
    wanted = [c for i in affected for _, c in probes[i]]
    ts, values = await ctx.txn.read_newest(wanted)
    now = dict(zip(wanted, values, strict=True))
    since: dict[int, int] = {}
    for i in affected:
        hit = None
        for (name, ids), cell in probes[i]:
            owner = now[cell]
            if cell.table == writer.codec.storage and owner is not None:
                hit = Conflict(name, ids, keys[i])  # the primary key: its row is there
            elif owner is not None:
                hit = Conflict(name, ids, owner)  # a unique entry a row owns
            if hit is not None:
                break
        conflicts[i] = hit
        if hit is None:
            since[i] = ts
        elif on_conflict is not None and on_conflict.do_update:
            stale_statement(ctx.row_locking)
    return since


def _key_cells(
    writer: TableWriter, row: Row, key: bytes, arbiter: tuple[object, ...] | None = None
) -> list[tuple[tuple[str, KeyColumns], CellKey]]:
    """The cells that say whether ``row``'s keys are taken, with their constraints, in
    find_conflicts's order: the row's presence (primary key) and each unique entry."""
    table = writer.table
    codec = writer.codec
    out = []
    for ix in _constraints(writer, arbiter):
        if ix is None:
            pk = (table.pk_constraint_name, table.primary_key)
            out.append((pk, CellKey(codec.storage, key, codec.presence)))
        elif ix.has_unique_entry(row):
            constraint: tuple[str, KeyColumns] = (ix.index.name, ix)
            out.append((constraint, CellKey(ix.storage, ix.entry_key(row, key), MARKER)))
    return out


async def _lock_moved_keys(
    writer: TableWriter, ctx: Any, targets: Sequence[tuple[bytes, Row, Row]]
) -> None:
    """Lock the keys an UPDATE gives rows (a new primary key, new unique index entries), as an
    INSERT locks its keys: a concurrent taker of the same value waits, then finds it taken
    (23505) or free."""
    if ctx.row_locking is None:
        return
    codec = writer.codec
    by_key = bool(writer.table.primary_key)
    new_keys = {key: codec.key_of(new) if by_key else key for key, _, new in targets}
    moved = sorted({nk for key, nk in new_keys.items() if nk != key})
    taken = await lock_new_keys(ctx, codec, moved)
    entries = await _lock_unique_entries(
        writer,
        ctx,
        [(new, new_keys[key]) for key, _, new in targets],
        changed_from={new_keys[key]: old for key, old, _ in targets if new_keys[key] == key},
    )
    if taken or entries:
        # Taken by a transaction that committed after the snapshot: the statement runs
        # again (READ COMMITTED) and finds it taken, or fails (REPEATABLE READ).
        stale_statement(ctx.row_locking)


async def _lock_unique_entries(
    writer: TableWriter,
    ctx: Any,
    rows: list[tuple[Row, bytes]],
    changed_from: dict[bytes, Row] | None = None,
) -> list[CellKey]:
    """Lock the unique index entries that ``(row, key)`` pairs take (NULLs take none), as a
    second taker of one waits for the first; ``changed_from``: the old row of a key that
    stays, whose entries that do not change are its own already. Returns the cells of the
    entries that changed after the snapshot."""
    old_of = changed_from or {}
    changed: list[CellKey] = []
    for ix in writer.unique_indexes:
        entries = {
            ix.entry_key(row, key)
            for row, key in rows
            if ix.has_unique_entry(row)
            and (
                key not in old_of
                or not ix.has_unique_entry(old_of[key])
                or ix.values_of(old_of[key]) != ix.values_of(row)
            )
        }
        taken = await lock_new_keys(ctx, _EntryCells(ix.storage), sorted(entries))
        changed += [CellKey(ix.storage, e, MARKER) for e in sorted(taken)]
    return changed


@dataclass(frozen=True)
class _EntryCells:
    """Where a unique index's entries are, for lock_for_write (a row codec's two names)."""

    storage: str
    existence: str = MARKER


def _upsert_mode(writer: TableWriter, on_conflict: OnConflict | None) -> RowLockMode:
    """ON CONFLICT DO UPDATE locks the rows it updates FOR NO KEY UPDATE unless it sets a key
    column (Postgres decides by the columns set, not by the values)."""
    keys_at = writer.key_positions
    table = writer.table
    sets = [] if on_conflict is None else on_conflict.assignments
    if any(table.position(c.id) in keys_at for c, _ in sets):
        return RowLockMode.UPDATE
    return RowLockMode.NO_KEY_UPDATE


async def _update_conflicting(
    writer: TableWriter,
    ctx: Any,
    updates: list[tuple[Row, Conflict]],
    conflict_update: Callable[[Row, Row], Any] | None,
    mode: RowLockMode,
) -> list[tuple[Row, Row]]:
    """ON CONFLICT DO UPDATE: update each existing row a proposed row collided with; returns
    the (old, updated) rows. The existing rows are read in one batch, unless two proposed rows hit
    the same row (through different constraints): then each must see the other's update."""
    if not updates or conflict_update is None:
        return []
    keys = [c.existing_key for _, c in updates]
    referenced = bool(writer.foreign_keys.referrers)
    await lock_for_write(ctx, writer.codec, sorted(set(keys)), referenced=referenced, mode=mode)
    batched = len(set(keys)) == len(keys)
    existing_rows = await writer.codec.get_rows(ctx.txn, keys) if batched else []
    out: list[tuple[Row, Row]] = []
    for j, (proposed, c) in enumerate(updates):
        if batched:
            existing = existing_rows[j]
        else:
            (existing,) = await writer.codec.get_rows(ctx.txn, [c.existing_key])
        if existing is None:
            continue
        updated = await conflict_update(existing, proposed)
        if updated is not None and writer.triggers is not None:
            changed = await writer.triggers.before_update(ctx, existing, updated)
            if changed is not None and changed != updated:
                changed = writer.generate(changed, ctx)
            updated = changed
        if updated is not None:
            writer.check_row(updated, ctx)
            await update_row(writer, ctx, c.existing_key, existing, updated)
            out.append((existing, updated))
    return out


async def update_row(writer: TableWriter, ctx: Any, key: bytes, old: Row, new: Row) -> None:
    """Write one updated row (checked by the caller), moving it if its key changed."""
    txn = ctx.txn
    codec = writer.codec
    new_key = codec.key_of(new) if writer.table.primary_key else key
    if new_key != key:
        (present,) = await txn.get_many([CellKey(codec.storage, new_key, codec.presence)])
        if present is not None:
            raise duplicate_key(
                writer.table, writer.table.pk_constraint_name, writer.table.primary_key, new
            )
        codec.write_delete(txn, key, old)
        codec.write_new(txn, new_key, new)
    else:
        codec.write_update(txn, key, old, new)
    for ix in writer.indexes:
        old_vals, new_vals = ix.values_of(old), ix.values_of(new)
        if old_vals == new_vals and new_key == key and ix.covers(old) == ix.covers(new):
            continue
        ix.delete(txn, old, key)
        if ix.unique and ix.has_unique_entry(new):
            ek = ix.entry_key(new, new_key)
            (owner,) = await txn.get_many([CellKey(ix.storage, ek, MARKER)])
            if owner is not None and owner != new_key and owner != key:
                raise duplicate_key(writer.table, ix.index.name, ix, new)
        ix.write(txn, new, new_key)


async def update_rows(
    writer: TableWriter,
    ctx: Any,
    source: Node,
    assignments: list[tuple[int, Compiled]],
    runners: list[Any],
) -> list[Row]:
    """UPDATE: the source yields the table's row (first ``width`` values) plus any FROM
    tables' columns; each matching row is updated once. Returns the new rows, each followed
    by the FROM tables' columns it was updated with (for RETURNING)."""
    width = len(writer.table.columns) + (0 if writer.table.primary_key else 1)
    joined: dict[bytes, Row] = {}

    async def updated(full: Row) -> tuple[Row, Row]:
        for r in runners:
            await r.prepare(full, ctx)
        old = full[:width]
        if len(full) > width:
            joined[writer.codec.key_of_stored(old)] = full[width:]
        new = list(old)
        for pos, fn in assignments:
            new[pos] = fn(full, ctx)
        # Generated before the row lock below, which must see whether a generated key column
        # moves.
        return old, writer.generate(tuple(new), ctx)

    recheck = _can_recheck(writer, source)
    keys_at = writer.key_positions
    # Rows whose key columns the statement may change are locked after they are read, so that
    # the others can be locked FOR NO KEY UPDATE.
    sets_keys = any(pos in keys_at for pos, _ in assignments)
    found, changed = await _rows_locked_early(
        writer, ctx, source, recheck, RowLockMode.NO_KEY_UPDATE, early=not sets_keys
    )
    targets: dict[bytes, tuple[Row, Row]] = {}
    for full in found:
        key = writer.codec.key_of_stored(full[:width])
        if key not in targets:
            targets[key] = await updated(full)
    by_mode: dict[RowLockMode, list[bytes]] = {}
    for key, (old, new) in targets.items():
        moves = any(old[p] != new[p] for p in keys_at)
        mode = RowLockMode.UPDATE if moves else RowLockMode.NO_KEY_UPDATE
        by_mode.setdefault(mode, []).append(key)
    for mode, keys in by_mode.items():
        changed |= await _lock_targets(writer, ctx, keys, recheck, mode)
    since = await _recheck_targets(ctx, source, targets, changed, updated)
    rows = [(key, old, new) for key, (old, new) in targets.items()]
    rows = await update_keys(writer, ctx, rows, since)
    return [new + joined.get(key, ()) for key, _, new in rows]


async def update_keys(
    writer: TableWriter,
    ctx: Any,
    targets: Sequence[tuple[bytes, Row, Row]],
    since: Mapping[bytes, int] | None = None,
) -> list[tuple[bytes, Row, Row]]:
    """Update rows given as (row key, old row, new row, its generated columns computed:
    :meth:`TableWriter.generate`), then enforce the foreign keys; the rows updated, as BEFORE
    UPDATE triggers left them. ``since``: rows re-read at a later timestamp than the
    snapshot (_recheck_targets)."""
    triggers = writer.triggers
    before = triggers is not None and triggers.fires(True, "update")
    if not before:
        await _lock_moved_keys(writer, ctx, targets)
    at = since or {}
    written: list[tuple[bytes, Row, Row]] = []
    for key, old, new in targets:
        if before:
            # Each row's BEFORE UPDATE triggers run as it is about to be written.
            assert triggers is not None
            changed = await triggers.before_update(ctx, old, new)
            if changed is None:
                continue
            if changed != new:
                new = writer.generate(changed, ctx)
            await _lock_moved_keys(writer, ctx, [(key, old, new)])
        writer.check_row(new, ctx)
        with ctx.txn.deciding_at(at.get(key)):
            await update_row(writer, ctx, key, old, new)
        written.append((key, old, new))
    targets = written
    fks = writer.foreign_keys
    if fks:
        moved = [
            new
            for _, old, new in targets
            if any(ref.key_of(old) != ref.key_of(new) for ref in fks.references)
        ]
        await foreign_keys.check_references(fks, ctx, moved)
        await foreign_keys.on_update(fks, ctx, [(old, new) for _, old, new in targets])
    if triggers is not None:
        await triggers.after(ctx, "update", [(old, new) for _, old, new in targets])
    return targets


async def delete_rows(writer: TableWriter, ctx: Any, source: Node) -> list[Row]:
    """DELETE: the rows deleted, each followed by the USING tables' columns it was found
    with (for RETURNING)."""
    width = len(writer.table.columns) + (0 if writer.table.primary_key else 1)
    joined: dict[bytes, Row] = {}

    async def deleted(full: Row) -> Row:
        old = full[:width]
        if len(full) > width:
            joined[writer.codec.key_of_stored(old)] = full[width:]
        return old

    recheck = _can_recheck(writer, source)
    found, changed = await _rows_locked_early(writer, ctx, source, recheck, RowLockMode.UPDATE)
    victims: dict[bytes, Row] = {}
    for full in found:
        key = writer.codec.key_of_stored(full[:width])
        if key not in victims:
            victims[key] = await deleted(full)
    changed |= await _lock_targets(writer, ctx, list(victims), recheck, RowLockMode.UPDATE)
    since = await _recheck_targets(ctx, source, victims, changed, deleted)
    victims = await delete_keys(writer, ctx, victims, since)
    return [old + joined.get(key, ()) for key, old in victims.items()]


def _can_recheck(writer: TableWriter, source: Node) -> bool:
    """Whether the rows an UPDATE or DELETE found can be re-checked one by one when they
    changed (READ COMMITTED): they come from one table access, and no other table's foreign
    key references them (whose actions must see a new snapshot: the statement runs again)."""
    return source.access() is not None and not writer.foreign_keys.referrers


async def _lock_targets(
    writer: TableWriter, ctx: Any, keys: list[bytes], recheck: bool, mode: RowLockMode
) -> set[bytes]:
    """Lock the rows an UPDATE or DELETE changes; the ones that changed since the snapshot,
    for the caller to re-check."""
    referenced = bool(writer.foreign_keys.referrers)
    return await lock_for_write(
        ctx, writer.codec, keys, recheck=recheck, referenced=referenced, mode=mode
    )


async def _recheck_targets(
    ctx: Any,
    source: Node,
    targets: dict[bytes, T],
    changed: set[bytes],
    redo: Callable[[Row], Awaitable[T]],
) -> dict[bytes, int]:
    """READ COMMITTED: re-check the target rows that changed after the snapshot (the source's
    filters on their newest versions, Node.recheck_keys). ``targets`` is updated in place: a
    row that no longer qualifies is dropped, one that does is ``redo``ne from its newest
    version. Returns the timestamp each re-read row was read at, from which its writes are
    conflict-checked."""
    keys = [k for k in targets if k in changed]
    if not keys:
        return {}
    ts, newest = await source.recheck_keys(ctx, keys)
    for key, full in newest.items():
        if full is None:
            del targets[key]
        else:
            targets[key] = await redo(full)
    return dict.fromkeys(newest, ts)


async def _rows_locked_early(
    writer: TableWriter,
    ctx: Any,
    source: Node,
    recheck: bool,
    mode: RowLockMode,
    *,
    early: bool = True,
) -> tuple[list[Row], set[bytes]]:
    """The rows an UPDATE or DELETE changes, and those of them known to have changed since the
    snapshot. When they are found by primary key alone, their locks are taken while they are
    read, in parallel (one round trip less on the statement's path: the lock's answer says
    whether a row changed after the snapshot read, whichever comes first); else the caller
    locks what was found (``early`` False: always)."""
    if (
        not early
        or ctx.row_locking is None
        or not isinstance(source, PointGet)
        or not source.key_only
    ):
        return [r async for r in source.rows(ctx)], set()
    keys = sorted(set(source.keys(ctx)))
    return await _beside(_lock_targets(writer, ctx, keys, recheck, mode), _all_rows(source, ctx))


async def _all_rows(source: Node, ctx: Any) -> list[Row]:
    return [r async for r in source.rows(ctx)]


async def _beside(lock: Awaitable[L], read: Awaitable[T]) -> tuple[T, L]:
    """``read`` while ``lock`` is out, in parallel (one round trip on the statement's path
    instead of two): the lock's answer says whether what was read still stands. A failed read
    withdraws the lock call."""
    locking = asyncio.ensure_future(lock)
    try:
        result = await read
    except BaseException:
        locking.cancel()
        with contextlib.suppress(BaseException):
            await locking
        raise
    return result, await locking


async def delete_keys(
    writer: TableWriter,
    ctx: Any,
    victims: dict[bytes, Row],
    since: Mapping[bytes, int] | None = None,
) -> dict[bytes, Row]:
    """Delete rows given by row key, then run the actions of the foreign keys referencing
    them; the rows deleted (BEFORE DELETE triggers may skip some). ``since``: rows re-read
    at a later timestamp than the snapshot (_recheck_targets)."""
    txn = ctx.txn
    at = since or {}
    triggers = writer.triggers
    deleted: dict[bytes, Row] = {}
    for key, old in victims.items():
        if triggers is not None and not await triggers.before_delete(ctx, old):
            continue
        with txn.deciding_at(at.get(key)):
            writer.codec.write_delete(txn, key, old)
            for ix in writer.indexes:
                ix.delete(txn, old, key)
        deleted[key] = old
    victims = deleted
    if writer.foreign_keys.referrers:
        await foreign_keys.on_delete(writer.foreign_keys, ctx, list(victims.values()))
    if triggers is not None:
        await triggers.after(ctx, "delete", [(old, None) for old in victims.values()])
    return victims


def make_writer(
    table: TableDef,
    codec: RowCodec,
    checks: list[tuple[str, BExpr]],
    catalog: Catalog | None = None,
    writer_for: Callable[[TableDef], TableWriter] | None = None,
    generated: Sequence[tuple[int, BExpr]] = (),
    index_expressions: Mapping[int, Sequence[BExpr | None]] | None = None,
    index_predicates: Mapping[int, BExpr] | None = None,
    triggers: RowTriggers | None = None,
) -> TableWriter:
    """A writer of ``table``; with ``catalog``, one that enforces its foreign keys (building
    the writers of referencing tables with ``writer_for`` when an action writes them).
    ``generated``: the generated columns' positions and expressions over the row;
    ``index_expressions``: per index id, its key columns' expressions over the row
    (:func:`percolator.server.sql.index_expressions.bind_all`); ``index_predicates``: per
    partial index id, its WHERE over the row (``bind_predicates``)."""
    bound = index_expressions or {}
    predicates = index_predicates or {}
    indexes = [
        IndexCodec(table, ix, bound.get(ix.id, ()), predicates.get(ix.id)) for ix in table.indexes
    ]
    pk = set(table.primary_key)
    not_null = [(i, c) for i, c in enumerate(table.columns) if c.not_null or c.id in pk]
    compiled = [(name, compile_expr(e)) for name, e in checks]
    fks = (
        foreign_keys.for_table(table, catalog, writer_for) if catalog is not None else ForeignKeys()
    )
    computed = [(pos, compile_expr(e)) for pos, e in generated]
    return TableWriter(table, codec, indexes, compiled, not_null, fks, computed, triggers)


__all__ = ["TableWriter", "insert_rows", "make_writer"]
