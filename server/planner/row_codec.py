"""How a SQL row is stored as Percolator cells, and a secondary index entry as one cell.

A row of table T lives in store table ``T.storage`` under its row key: the memcomparable
encoding of its primary key (or, without one, a hidden row id: the inserting transaction's
start_ts and a counter, unique across the deployment). Its cells:

- one cell per non-key column, named by the column's id (never reused), holding the value's
  storage encoding; NULL is the absence of the cell;
- the *existence cell*, which every row has, so that a row whose other columns are all NULL
  still exists: the cell of the table's existence column (``TableDef.existence``, a NOT NULL
  non-key column chosen at CREATE TABLE, so that it costs no cell of its own) or, in a table
  without one, ``_``: the row marker, an empty value. UPDATE writes the existence cell again
  whichever columns it changes, so two transactions updating the same row conflict (row-level
  write conflicts, as in Postgres). When the existence column is dropped its cell stays the
  existence cell, empty in rows written since; ALTER COLUMN ... DROP NOT NULL on it, or an
  observer of it, gives every row a marker, which takes over.

A read tells an existing row by its *presence cell*: the existence cell or, when the read
includes another NOT NULL column, that column's cell, which every row has too (INSERT, UPDATE
and the Spark writer refuse a NULL there; ADD COLUMN fills existing rows; SET NOT NULL checks
them). Reading some of a row's NOT NULL columns then costs no extra cell. DDL's own reads
(``trust_not_null=False``) use the existence cell: they run while a new NOT NULL column is not
filled yet.

An index entry lives in store table ``index.storage``: its key is the encoded index columns
followed by the row key (for a unique index only when a column is NULL, since NULLs never
collide), and its single cell ``_`` holds the row key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from percolator.server.planner.compile import compile_expr
from percolator.server.sql import storage_codec
from percolator.server.sql.bound import BExpr
from percolator.server.sql.catalog import ROW_MARKER, IndexDef, TableDef
from percolator.server.sql.keycodec import KeyType, decode_key, encode_key
from percolator.server.sql.types import key_type
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import Transaction

MARKER = ROW_MARKER
_ROWID_TYPES = (KeyType.INT, KeyType.INT)

Row = tuple[Any, ...]


class RowCodec:
    """Encodes and decodes the rows of one table (built once per table definition)."""

    def __init__(
        self, table: TableDef, read: frozenset[int] | None = None, *, trust_not_null: bool = True
    ) -> None:
        """``read``: positions of the columns to read (None: all); others decode as None.
        ``trust_not_null``: whether a NOT NULL column's cell may tell that a row exists."""
        self.table = table
        self.hidden_key = not table.primary_key
        self.storage = table.storage
        self.width = len(table.columns)
        self.pk_positions = [table.position(cid) for cid in table.primary_key]
        pk_types = [table.column_by_id(cid).type for cid in table.primary_key]
        self.pk_types = pk_types
        self.key_types = [key_type(t) for t in pk_types]
        self._key_values = [storage_codec.key_value_fn(t) for t in pk_types]
        self._key_parts = list(zip(self._key_values, self.pk_positions, strict=True))
        self._from_key = [(lambda v, _t=t: storage_codec.from_key_value(_t, v)) for t in pk_types]
        pk = set(table.primary_key)
        read_columns = [
            (i, c)
            for i, c in enumerate(table.columns)
            if c.id not in pk and (read is None or i in read)
        ]
        self.value_columns: list[tuple[int, str, Any, Any]] = [
            (
                i,
                str(c.id),
                storage_codec.encoder_for_store(c.type),
                storage_codec.decoder_for(c.type),
            )
            for i, c in read_columns
        ]
        names = [name for _, name, _, _ in self.value_columns]
        self.existence = table.existence_cell
        """The cell every row has (see the module docstring)."""
        self._own_existence = table.existence not in {c.id for c in table.columns}
        """Whether the existence cell is no column's: the marker or a dropped column's (written
        empty); else the existence column's value is written as any other."""
        self.cell_names = [self.existence, *(n for n in names if n != self.existence)]
        """Every cell a row of this codec has when its columns are set."""
        trusted = [str(c.id) for _, c in read_columns if c.not_null and trust_not_null]
        self.presence = trusted[0] if trusted and self.existence not in names else self.existence
        """The cell whose presence means the row exists (see the module docstring)."""
        self.read_names = names if self.presence in names else [self.presence, *names]
        """The cells a read of a row fetches: the presence cell and the columns read."""
        self._presence_at = self.read_names.index(self.presence)

    # -- keys ------------------------------------------------------------------------------

    def key_of(self, row: Row) -> bytes:
        """The row key of a full row (tables with a primary key)."""
        return encode_key(
            self.key_types,  # type: ignore[arg-type]
            [None if (v := row[p]) is None else kv(v) for kv, p in self._key_parts],
        )

    def key_of_values(self, values: Sequence[object]) -> bytes:
        """The row key (or key prefix) for leading primary-key values."""
        n = len(values)
        return encode_key(
            self.key_types[:n],  # type: ignore[arg-type]
            [
                None if v is None else kv(v)
                for kv, v in zip(self._key_values[:n], values, strict=True)
            ],
        )

    @staticmethod
    def hidden_row_id(start_ts: int, counter: int) -> bytes:
        return encode_key(_ROWID_TYPES, [start_ts, counter])

    # -- reading ---------------------------------------------------------------------------

    def decode(self, key: bytes, cells: dict[str, bytes]) -> Row:
        """A full row from its key and the cells a scan returned."""
        row: list[object] = [None] * self.width
        if self.pk_positions:
            values = decode_key(self.key_types, key)  # type: ignore[arg-type]
            for p, fk, v in zip(self.pk_positions, self._from_key, values, strict=True):
                row[p] = fk(v)
        else:
            row.append(key)  # the hidden row id, after the table's columns
        for i, name, _, dec in self.value_columns:
            raw = cells.get(name)
            if raw is not None:
                row[i] = dec(raw)
        return tuple(row)

    def key_of_stored(self, row: Row) -> bytes:
        """The row key of a row read from the store (hidden row id included)."""
        return self.key_of(row) if self.pk_positions else row[self.width]

    def exists(self, cells: dict[str, bytes]) -> bool:
        """Whether a row whose read cells (of :attr:`read_names`) are ``cells`` exists."""
        return self.presence in cells

    def cell_keys(self, key: bytes) -> list[CellKey]:
        """The cells a read of the row fetches (:attr:`read_names`)."""
        return [CellKey(self.storage, key, name) for name in self.read_names]

    async def get_rows(self, txn: Transaction, keys: Sequence[bytes]) -> list[Row | None]:
        """The rows with these keys (None where absent): one batch, one round trip per shard."""
        if not keys:
            return []
        return self._rows_of(keys, await txn.get_many(self._cells_of(keys)))

    async def get_newest_rows(
        self, txn: Transaction, keys: Sequence[bytes]
    ) -> tuple[int, list[Row | None]]:
        """The newest versions of rows this transaction holds row locks on, and the timestamp
        they were read at (Transaction.read_newest)."""
        ts, values = await txn.read_newest(self._cells_of(keys))
        return ts, self._rows_of(keys, values)

    def _cells_of(self, keys: Sequence[bytes]) -> list[CellKey]:
        names = self.read_names
        return [CellKey(self.storage, k, n) for k in keys for n in names]

    def _rows_of(self, keys: Sequence[bytes], values: list[bytes | None]) -> list[Row | None]:
        """Rows from the values of :meth:`_cells_of` (None where absent)."""
        names = self.read_names
        per = len(names)
        at = self._presence_at
        out: list[Row | None] = []
        for j, key in enumerate(keys):
            chunk = values[j * per : (j + 1) * per]
            if chunk[at] is None:
                out.append(None)
                continue
            out.append(self.decode(key, dict(zip(names, chunk, strict=True))))
        return out

    # -- writing ---------------------------------------------------------------------------

    def write_new(self, txn: Transaction, key: bytes, row: Row) -> None:
        """Buffer the cells of a new row (of a codec of all columns)."""
        cells = [(self.existence, b"")] if self._own_existence else []
        cells += [
            (name, enc(row[i])) for i, name, enc, _ in self.value_columns if row[i] is not None
        ]
        txn.set_row(self.storage, key, cells)

    def write_update(self, txn: Transaction, key: bytes, old: Row, new: Row) -> None:
        """Buffer the cells that changed, and the existence cell even when unchanged: two
        transactions updating the same row then conflict whichever columns they change
        (row-level conflicts), and a later read of the row in this transaction finds it in its
        own writes instead of asking the store."""
        storage = self.storage
        existence = self.existence
        if self._own_existence:
            txn.set(storage, key, existence, b"")
        for i, name, enc, _ in self.value_columns:
            v = new[i]
            if v == old[i] and type(v) is type(old[i]) and name != existence:
                continue
            if v is None:
                txn.delete(storage, key, name)
            else:
                txn.set(storage, key, name, enc(v))

    def write_delete(self, txn: Transaction, key: bytes, row: Row) -> None:
        storage = self.storage
        if self._own_existence:
            txn.delete(storage, key, self.existence)
        for i, name, _, _ in self.value_columns:
            if row[i] is not None:
                txn.delete(storage, key, name)

    def lock(self, txn: Transaction, key: bytes) -> None:
        """SELECT ... FOR UPDATE: a lock-only write on the existence cell."""
        txn.lock(self.storage, key, self.existence)


class IndexCodec:
    """Encodes the entries of one secondary index. An index on expressions needs them bound
    over the table's row (``expressions``, one per key column, None for a plain column):
    they give the key columns' types and, compiled, their values."""

    def __init__(
        self,
        table: TableDef,
        index: IndexDef,
        expressions: Sequence[BExpr | None] = (),
        predicate: BExpr | None = None,
    ) -> None:
        """``predicate``: a partial index's WHERE bound over the row; a codec of a partial
        index built without it may only read entries (foreign keys' and scans' lookups do
        not use partial indexes), not decide which rows have one."""
        self.index = index
        self._predicate = None if predicate is None else compile_expr(predicate)
        self.storage = index.storage
        self.positions = [table.position(cid) if cid else -1 for cid in index.column_ids]
        bound = list(expressions) or [None] * len(index.column_ids)
        # Without its expressions bound, only the key's leading plain columns can be encoded
        # (a prefix: a foreign key's lookup of the child rows of a key).
        self._complete = all(
            index.expression(i) is None or e is not None for i, e in enumerate(bound)
        )
        types = [
            e.type if e is not None else table.column_by_id(cid).type if cid else None
            for cid, e in zip(index.column_ids, bound, strict=True)
        ]
        self.types = types
        self.key_types = [key_type(t) if t is not None else None for t in types]
        self._key_values = [(lambda v, _t=t: storage_codec.key_value(_t, v)) for t in types]
        self.unique = index.unique
        self._computed = (
            [None if e is None else compile_expr(e) for e in bound]
            if any(e is not None for e in bound)
            else None
        )

    def covers(self, row: Row) -> bool:
        """Whether ``row`` has an entry: always, unless the index is partial and its predicate
        is not true for the row (false or NULL, as Postgres's WHERE)."""
        if self.index.predicate is None:
            return True
        if self._predicate is None:
            raise AssertionError(f"index {self.index.name} needs its predicate bound")
        # Immutable, as index expressions are: the row alone decides.
        return self._predicate(row, None) is True

    def has_unique_entry(self, row: Row) -> bool:
        """Whether ``row`` takes a key of this (unique) index that no other row may share:
        it has an entry and no NULL in its key (NULLs are distinct)."""
        return self.covers(row) and None not in self.values_of(row)

    def values_of(self, row: Row) -> list[object]:
        if not self._complete:
            raise AssertionError(f"index {self.index.name} needs its expressions bound")
        computed = self._computed
        if computed is None:
            return [row[p] for p in self.positions]
        # Index expressions are immutable: they read the row alone, never the context.
        return [
            row[p] if f is None else f(row, None)
            for p, f in zip(self.positions, computed, strict=True)
        ]

    def prefix(self, values: Sequence[object]) -> bytes:
        """Encoded leading index values (an exact key of a unique index without NULLs)."""
        n = len(values)
        return encode_key(
            self.key_types[:n],  # type: ignore[arg-type]
            [
                kv(v) if v is not None else None
                for kv, v in zip(self._key_values[:n], values, strict=True)
            ],
        )

    def entry_key(self, row: Row, row_key: bytes) -> bytes:
        values = self.values_of(row)
        base = self.prefix(values)
        if self.unique and None not in values:
            return base
        return base + row_key

    def write(self, txn: Transaction, row: Row, row_key: bytes) -> None:
        if self.covers(row):
            txn.set(self.storage, self.entry_key(row, row_key), MARKER, row_key)

    def delete(self, txn: Transaction, row: Row, row_key: bytes) -> None:
        if self.covers(row):
            txn.delete(self.storage, self.entry_key(row, row_key), MARKER)
