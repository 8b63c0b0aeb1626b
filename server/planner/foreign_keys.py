"""FOREIGN KEY enforcement: what a write to a referencing or a referenced table checks or does.

Checks run once a statement's rows are written, as Postgres checks NO ACTION constraints at
the end of the statement (so one statement may insert a parent and its children in any order,
or delete a whole tree of a self-referencing table):

- referencing side (INSERT, UPDATE of the referencing columns): the referenced row must be in
  the snapshot (own writes included): one batched read per constraint, 23503 otherwise. The
  commit reads the same cells again (``txn/commit_checks.py``): a concurrent transaction that
  deleted the parent then makes this one fail with 40001 instead of leaving a dangling row.
- referenced side (DELETE, UPDATE of the referenced columns): the referencing rows of each old
  key are found, by a prefix scan when the referencing columns lead the child's primary key
  or one of its indexes (one round trip per key), else by a scan of the whole child table;
  then the constraint's action runs: NO ACTION and RESTRICT fail with 23503 if any is left,
  CASCADE deletes them (or moves them to the new key), SET NULL empties their referencing
  columns. The commit scans the same ranges again for rows committed concurrently.

MATCH SIMPLE: a row with a NULL in any referencing column references nothing.

A DEFERRABLE constraint that is deferred (INITIALLY DEFERRED, or SET CONSTRAINTS ... DEFERRED)
is checked at COMMIT instead: its checks wait in the transaction's :class:`Deferred` (the
referencing side's rows, the referenced side's NO ACTION keys) and :func:`run_deferred` makes
them then. Actions (CASCADE, SET NULL) are never deferred, as in Postgres.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from percolator.server.planner.row_codec import MARKER, IndexCodec, Row, RowCodec
from percolator.server.planner.row_locking import lock_for_reference
from percolator.server.sql.catalog import Catalog, FkAction, ForeignKeyDef, TableDef
from percolator.server.sql.errors import FOREIGN_KEY_VIOLATION, ErrorObject, SqlError
from percolator.server.sql.keycodec import prefix_successor
from percolator.server.sql.schemas import bare
from percolator.server.storage.cells import CellKey
from percolator.server.txn.commit_checks import StillAbsent, StillPresent

if TYPE_CHECKING:
    from percolator.server.planner.dml import TableWriter

Key = tuple[object, ...]
"""The values of a constraint's columns, in the constraint's column order."""


@dataclass(frozen=True)
class Reference:
    """A constraint of the written table, seen from it: how to find the row it references."""

    fk: ForeignKeyDef
    table: TableDef
    parent: TableDef
    order: tuple[int, ...]
    """The constraint's columns (by index) in the order the probe key takes them."""
    storage: str
    column: str
    encode: Callable[[Sequence[object]], bytes]
    """Probe-ordered values -> the row key of the cell that exists iff the parent does."""
    references_key: bool
    """The constraint names the parent's primary key: the probe is the parent's own row.
    Else it probes a unique index entry, whose value is the parent row's key."""
    parent_cell: Callable[[bytes], CellKey]
    """A parent row's key -> the cell its row lock is taken on (as its writers take it)."""

    def key_of(self, row: Row) -> Key | None:
        """The referenced key of ``row`` (in the constraint's order), None if it has a NULL."""
        values = tuple(row[self.table.position(c)] for c in self.fk.column_ids)
        return None if None in values else values

    def probe(self, key: Key) -> CellKey:
        """The cell that exists iff the row referenced by ``key`` does."""
        return CellKey(self.storage, self.encode([key[i] for i in self.order]), self.column)


@dataclass(frozen=True)
class Referrer:
    """A constraint of another table that references the written table."""

    fk: ForeignKeyDef
    parent: TableDef
    child: TableDef
    reference: Reference
    """The same constraint seen from the child (how it finds a referenced row)."""
    parent_positions: tuple[int, ...]
    """Positions in the written table's rows of the referenced columns, in constraint order."""
    child_positions: tuple[int, ...]
    """Positions in the child's rows of the referencing columns, in constraint order."""
    codec: RowCodec
    prefix: Callable[[Key], bytes] | None
    """Key -> the prefix under which the child's referencing rows (or index entries) sort,
    when the referencing columns lead its primary key or an index; None: scan the table."""
    range_storage: str
    range_column: str
    index: IndexCodec | None = None
    """The child index that ``prefix`` walks (None: its primary key, or a table scan)."""

    def key_of(self, row: Row) -> Key | None:
        values = tuple(row[p] for p in self.parent_positions)
        return None if None in values else values


@dataclass
class ForeignKeys:
    """The foreign keys a table's writer enforces, in both directions."""

    references: list[Reference] = field(default_factory=list)
    referrers: list[Referrer] = field(default_factory=list)
    writer_for: Callable[[TableDef], TableWriter] | None = None
    """Builds the writer of a child table (cascading actions write through it)."""

    def __bool__(self) -> bool:
        return bool(self.references or self.referrers)


def for_table(
    table: TableDef, catalog: Catalog, writer_for: Callable[[TableDef], TableWriter] | None
) -> ForeignKeys:
    """What a writer of ``table`` enforces under ``catalog``."""
    references = []
    for fk in table.foreign_keys:
        parent = table if fk.ref_table_id == table.id else catalog.table_by_id(fk.ref_table_id)
        if parent is not None:
            references.append(_reference(table, parent, fk))
    referrers = [
        _referrer(table, table if child.id == table.id else child, fk)
        for child, fk in catalog.references_to(table.id)
    ]
    return ForeignKeys(references, referrers, writer_for)


def _reference(table: TableDef, parent: TableDef, fk: ForeignKeyDef) -> Reference:
    by_key = bool(parent.primary_key) and sorted(parent.primary_key) == sorted(fk.ref_column_ids)
    if by_key:
        order = parent.primary_key
        codec = RowCodec(parent)
        storage, column, encode = parent.storage, codec.presence, codec.key_of_values
    else:
        index = parent.unique_index_on(fk.ref_column_ids)
        assert index is not None  # the foreign key's DDL required it
        order = index.column_ids
        storage, column, encode = index.storage, MARKER, IndexCodec(parent, index).prefix
    indices = tuple(fk.ref_column_ids.index(c) for c in order)
    existence = RowCodec(parent).existence

    def parent_cell(row_key: bytes) -> CellKey:
        return CellKey(parent.storage, row_key, existence)

    return Reference(fk, table, parent, indices, storage, column, encode, by_key, parent_cell)


def _referrer(parent: TableDef, child: TableDef, fk: ForeignKeyDef) -> Referrer:
    codec = RowCodec(child)
    prefix, storage, column, index = _child_lookup(child, codec, fk)
    return Referrer(
        fk,
        parent,
        child,
        _reference(child, parent, fk),
        tuple(parent.position(c) for c in fk.ref_column_ids),
        tuple(child.position(c) for c in fk.column_ids),
        codec,
        prefix,
        storage,
        column,
        index,
    )


def _child_lookup(
    child: TableDef, codec: RowCodec, fk: ForeignKeyDef
) -> tuple[Callable[[Key], bytes] | None, str, str, IndexCodec | None]:
    """How to find the child rows of a key: (prefix, storage, cell column, index walked). A
    prefix scan needs the referencing columns first, in any order, in the primary key or an
    index; else (None, the table's storage, ...): a scan of the table."""
    n = len(fk.column_ids)
    wanted = sorted(fk.column_ids)
    if child.primary_key and sorted(child.primary_key[:n]) == wanted:
        order = [fk.column_ids.index(c) for c in child.primary_key[:n]]
        return _reordered(codec.key_of_values, order), child.storage, codec.presence, None
    for ix in child.indexes:
        if ix.predicate is None and sorted(ix.column_ids[:n]) == wanted:
            index = IndexCodec(child, ix)
            order = [fk.column_ids.index(c) for c in ix.column_ids[:n]]
            return _reordered(index.prefix, order), ix.storage, MARKER, index
    return None, child.storage, codec.presence, None


def _reordered(
    encode: Callable[[Sequence[object]], bytes], order: list[int]
) -> Callable[[Key], bytes]:
    """``encode`` of a key's values taken in ``order``."""
    return lambda key: encode([key[i] for i in order])


# -- deferred constraints -------------------------------------------------------------------


@dataclass
class Deferred:
    """One transaction's SET CONSTRAINTS modes and the checks its deferred constraints owe."""

    all_deferred: bool | None = None
    """SET CONSTRAINTS ALL DEFERRED (True) / IMMEDIATE (False); None: not said."""
    by_name: dict[str, bool] = field(default_factory=dict)
    references: list[tuple[Reference, list[Row]]] = field(default_factory=list)
    referrers: list[tuple[Referrer, list[Key]]] = field(default_factory=list)

    def is_deferred(self, fk: ForeignKeyDef) -> bool:
        if not fk.deferrable:
            return False
        if fk.name in self.by_name:
            return self.by_name[fk.name]
        if self.all_deferred is not None:
            return self.all_deferred
        return fk.initially_deferred

    @property
    def pending(self) -> bool:
        """Whether anything is to be done or undone at the end of the transaction."""
        return bool(
            self.references or self.referrers or self.by_name or self.all_deferred is not None
        )

    def clear(self) -> None:
        self.all_deferred = None
        self.by_name.clear()
        self.references.clear()
        self.referrers.clear()


@dataclass
class StatementEnd(Deferred):
    """The checks of a statement made of parts that each write (data-modifying CTEs): every
    NO ACTION check waits for the end of the whole statement, as Postgres makes them once
    all its parts ran (a CTE may insert children whose parent the main statement inserts);
    the transaction's deferred constraints then go on waiting for COMMIT."""

    outer: Deferred | None = None

    def is_deferred(self, fk: ForeignKeyDef) -> bool:
        return True


async def run_statement_end(checks: StatementEnd, ctx: Any) -> None:
    """Make a :class:`StatementEnd`'s checks (the statement's own: they take the referenced
    rows' locks), or hand those of deferred constraints to the transaction's."""
    outer = checks.outer
    for ref, rows in checks.references:
        if outer is not None and outer.is_deferred(ref.fk):
            outer.references.append((ref, rows))
        else:
            await check_reference(ref, ctx, rows, lock=True)
    for referrer, keys in checks.referrers:
        if outer is not None and outer.is_deferred(referrer.fk):
            outer.referrers.append((referrer, keys))
        else:
            await _check_unreferenced(referrer, ctx, keys)
    checks.references.clear()
    checks.referrers.clear()


def _deferred(ctx: Any, fk: ForeignKeyDef) -> Deferred | None:
    """The transaction's Deferred if ``fk`` is deferred now, else None."""
    deferred: Deferred | None = getattr(ctx, "deferred_constraints", None)
    return deferred if deferred is not None and deferred.is_deferred(fk) else None


async def run_deferred(deferred: Deferred, ctx: Any, names: set[str] | None = None) -> None:
    """Make the deferred checks (of the constraints ``names``, or all): at COMMIT, or when
    SET CONSTRAINTS makes them IMMEDIATE."""
    keep_refs, keep_referrers = [], []
    for ref, rows in deferred.references:
        if names is not None and ref.fk.name not in names:
            keep_refs.append((ref, rows))
            continue
        await check_reference(ref, ctx, rows)
    for referrer, keys in deferred.referrers:
        if names is not None and referrer.fk.name not in names:
            keep_referrers.append((referrer, keys))
            continue
        await _check_unreferenced(referrer, ctx, keys)
    deferred.references, deferred.referrers = keep_refs, keep_referrers


# -- the referencing side -------------------------------------------------------------------


async def check_references(fks: ForeignKeys, ctx: Any, rows: Sequence[Row]) -> None:
    """Every row's referenced rows exist (23503 otherwise); the commit checks again."""
    for ref in fks.references:
        deferred = _deferred(ctx, ref.fk)
        if deferred is not None:
            deferred.references.append((ref, list(rows)))
            continue
        await check_reference(ref, ctx, rows, lock=True)


async def check_reference(
    ref: Reference, ctx: Any, rows: Sequence[Row], *, lock: bool = False
) -> None:
    """The rows' referenced rows exist (23503 otherwise); the commit checks again. ``lock``:
    a statement's own check, which takes the referenced rows' locks (not a deferred check at
    COMMIT, nor ALTER TABLE's check of the rows already there)."""
    probes: dict[CellKey, Row] = {}
    for row in rows:
        key = ref.key_of(row)
        if key is not None:
            probes.setdefault(ref.probe(key), row)
    if not probes:
        return
    cells = list(probes)
    if lock:
        await lock_for_reference(ctx, await _referenced_rows(ref, ctx, cells))
    found = await ctx.txn.get_many(cells)
    for row, value in zip(probes.values(), found, strict=True):
        if value is None:
            raise _missing_parent(ref, row)
    ctx.txn.check_at_commit(StillPresent(tuple(cells)))


async def _referenced_rows(ref: Reference, ctx: Any, probes: list[CellKey]) -> list[CellKey]:
    """The cells of the parent rows ``probes`` find, to lock FOR KEY SHARE: the probes
    themselves for a primary key; for a unique index, the rows its entries name (read first:
    the check's own read of them then costs no round trip)."""
    if ref.references_key:
        return [ref.parent_cell(p.row) for p in probes]
    row_keys = await ctx.txn.get_many(probes)
    return [ref.parent_cell(k) for k in row_keys if k is not None]


def _missing_parent(ref: Reference, row: Row) -> SqlError:
    key = ref.key_of(row)
    assert key is not None
    ids = ref.fk.column_ids
    return SqlError(
        FOREIGN_KEY_VIOLATION,
        f'insert or update on table "{bare(ref.table.name)}" violates foreign key constraint '
        f'"{ref.fk.name}"',
        detail=f"Key ({_names(ref.table, ids)})=({_texts(ref.table, ids, key)}) is not "
        f'present in table "{bare(ref.parent.name)}".',
        about=ErrorObject(ref.table.name, constraint=ref.fk.name),
    )


# -- the referenced side --------------------------------------------------------------------


async def on_delete(fks: ForeignKeys, ctx: Any, old_rows: Sequence[Row]) -> None:
    """After rows of the table were deleted: the actions of the constraints referencing it."""
    for referrer in fks.referrers:
        keys = _distinct_keys(referrer, old_rows)
        if keys:
            await _act(fks, referrer, ctx, keys, None, referrer.fk.on_delete)


async def on_update(fks: ForeignKeys, ctx: Any, changes: Sequence[tuple[Row, Row]]) -> None:
    """After rows were updated (old, new): the actions of the constraints whose referenced
    columns changed."""
    for referrer in fks.referrers:
        moved: dict[Key, Key | None] = {}
        for old, new in changes:
            before, after = referrer.key_of(old), referrer.key_of(new)
            if before is not None and before != after:
                moved.setdefault(before, after)
        if moved:
            await _act(fks, referrer, ctx, list(moved), moved, referrer.fk.on_update)


def _distinct_keys(referrer: Referrer, rows: Sequence[Row]) -> list[Key]:
    return list(dict.fromkeys(k for row in rows if (k := referrer.key_of(row)) is not None))


async def _act(
    fks: ForeignKeys,
    referrer: Referrer,
    ctx: Any,
    keys: list[Key],
    moved: dict[Key, Key | None] | None,
    action: FkAction,
) -> None:
    """Run ``action`` on the rows that reference ``keys`` (old keys; ``moved`` maps each to
    its new key on UPDATE), then have the commit check that none appeared meanwhile."""
    if action is FkAction.NO_ACTION and (deferred := _deferred(ctx, referrer.fk)) is not None:
        deferred.referrers.append((referrer, keys))
        return
    if action in (FkAction.NO_ACTION, FkAction.RESTRICT):
        await _check_unreferenced(referrer, ctx, keys)
        return
    keys = await _gone(referrer, ctx, keys)
    if not keys:
        return
    children = await _referencing_rows(referrer, ctx, keys)
    if children:
        writer = fks.writer_for(referrer.child) if fks.writer_for is not None else None
        assert writer is not None
        from percolator.server.planner import dml

        if action is FkAction.CASCADE and moved is None:
            await dml.delete_keys(writer, ctx, {key: row for key, row, _ in children})
        else:
            updates = []
            for key, row, parent_key in children:
                new = list(row)
                target = moved.get(parent_key) if moved is not None else None
                for i, p in enumerate(referrer.child_positions):
                    new[p] = None if action is FkAction.SET_NULL or target is None else target[i]
                updates.append((key, row, writer.generate(tuple(new), ctx)))
            await dml.update_keys(writer, ctx, updates)
    _check_at_commit(referrer, ctx, keys)


async def _referencing_rows(
    referrer: Referrer, ctx: Any, keys: list[Key]
) -> list[tuple[bytes, Row, Key]]:
    """(row key, row, referenced key) of the child rows that reference one of ``keys``."""
    txn = ctx.txn
    codec = referrer.codec
    out: list[tuple[bytes, Row, Key]] = []
    if referrer.prefix is None:
        wanted = set(keys)
        async for row_key, cells in txn.scan(codec.storage, None, None, codec.read_names):
            if not codec.exists(cells):
                continue
            row = codec.decode(row_key, cells)
            key = tuple(row[p] for p in referrer.child_positions)
            if key in wanted:
                out.append((row_key, row, key))
        return out
    for key in keys:
        start = referrer.prefix(key)
        end = prefix_successor(start)
        row_keys = []
        async for entry, cells in txn.scan(
            referrer.range_storage, start, end, [referrer.range_column]
        ):
            if referrer.range_column not in cells:
                continue
            row_keys.append(cells[MARKER] if referrer.index is not None else entry)
        for row_key, row in zip(row_keys, await codec.get_rows(txn, row_keys), strict=True):
            if row is not None:
                out.append((row_key, row, key))
    return out


async def _gone(referrer: Referrer, ctx: Any, keys: list[Key]) -> list[Key]:
    """The referenced ``keys`` that no row has now: a key the statement wrote back (deleted
    and inserted again) still exists, and its referencing rows stay valid. One read."""
    found = await ctx.txn.get_many([referrer.reference.probe(k) for k in keys])
    return [k for k, v in zip(keys, found, strict=True) if v is None]


async def _check_unreferenced(referrer: Referrer, ctx: Any, keys: list[Key]) -> None:
    """NO ACTION / RESTRICT: no row references ``keys`` (unless a row with that key exists
    again): 23503 otherwise; the commit looks again."""
    keys = await _gone(referrer, ctx, keys)
    if not keys:
        return
    children = await _referencing_rows(referrer, ctx, keys)
    if children:
        raise _still_referenced(referrer, children[0][2])
    _check_at_commit(referrer, ctx, keys)


def _check_at_commit(referrer: Referrer, ctx: Any, keys: list[Key]) -> None:
    """Have the commit look again for rows referencing ``keys`` (committed concurrently)."""
    txn = ctx.txn
    if referrer.prefix is not None:
        for key in keys:
            start = referrer.prefix(key)
            txn.check_at_commit(
                StillAbsent(
                    referrer.range_storage, start, prefix_successor(start), referrer.range_column
                )
            )
        return
    codec = referrer.codec
    wanted = set(keys)
    # Without an index the whole table is scanned again, one column of it: the first
    # referencing column not in the primary key (whose values are in the row keys).
    pk_positions = set(codec.pk_positions)
    scanned = next(p for p in referrer.child_positions if p not in pk_positions)
    name = str(referrer.child.columns[scanned].id)

    def references_one(row_key: bytes, value: bytes) -> bool:
        row = codec.decode(row_key, {name: value})
        return tuple(row[p] for p in referrer.child_positions) in wanted

    txn.check_at_commit(StillAbsent(codec.storage, None, None, name, references_one))


def _still_referenced(referrer: Referrer, key: Key) -> SqlError:
    parent_ids = referrer.fk.ref_column_ids
    parent = referrer.parent
    return SqlError(
        FOREIGN_KEY_VIOLATION,
        f'update or delete on table "{bare(parent.name)}" violates foreign key constraint '
        f'"{referrer.fk.name}" on table "{bare(referrer.child.name)}"',
        detail=f"Key ({_names(parent, parent_ids)})=({_texts(parent, parent_ids, key)}) is "
        f'still referenced from table "{bare(referrer.child.name)}".',
        about=ErrorObject(referrer.child.name, constraint=referrer.fk.name),
    )


def _names(table: TableDef, column_ids: Sequence[int]) -> str:
    return ", ".join(table.column_by_id(c).name for c in column_ids)


def _texts(table: TableDef, column_ids: Sequence[int], values: Key) -> str:
    from percolator.server.sql.textio import text_out

    return ", ".join(
        "null" if v is None else text_out(table.column_by_id(c).type, v)
        for c, v in zip(column_ids, values, strict=True)
    )
