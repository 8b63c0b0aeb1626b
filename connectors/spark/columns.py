"""Arrow columns built straight from a packed scan page, a whole column at a time.

A bulk read spends most of its Python time on per-value work. A packed page
(:mod:`percolator.server.storage.packed`) has none: :func:`unpack_page` cuts its buffers into
Arrow arrays, finds the rows where the key changes and gathers each column's cells into a
column of rows (null where a row has no cell), all with numpy and Arrow kernels. For the common
types the stored bytes already are what Arrow holds: little-endian integers and floats of a
fixed width (``storage_codec``), UTF-8 text, raw bytea; those columns are converted in C, and a
single-column integer primary key likewise from its key bytes. Every other type, and any column
whose bytes are not as expected (a value of another width), goes through the per-value decoder
and the Spark conversion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.types import to_spark
from percolator.server.sql import keycodec, storage_codec
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.types import KeyType, TypeId, key_type
from percolator.server.storage import packed

Stored = pa.BinaryArray
"""A column's stored values, one per row; null where the row has no cell (SQL NULL)."""
ColumnDecoder = Callable[[Stored], pa.Array]

_FIXED: dict[TypeId, np.dtype[Any]] = {
    TypeId.INT2: np.dtype("<i2"),
    TypeId.INT4: np.dtype("<i4"),
    TypeId.INT8: np.dtype("<i8"),
    TypeId.FLOAT4: np.dtype("<f4"),
    TypeId.FLOAT8: np.dtype("<f8"),
    TypeId.BOOL: np.dtype("?"),
}
"""Types stored as one fixed-width little-endian value (``storage_codec``'s structs)."""

_UTF8 = frozenset({TypeId.TEXT, TypeId.VARCHAR})
_KEY_WIDTH = 9
"""An integer key column: a tag byte, then 8 bytes big-endian of value + 2**63 (keycodec)."""
_KEY_DTYPE = np.dtype([("tag", "u1"), ("value", ">u8")])
_LAYOUT = np.dtype(">i8")


def unpack_page(page: packed.PackedCells, width: int, presence: int) -> tuple[Stored, list[Stored]]:
    """The rows of a packed page: their keys, and for each column code below ``width`` the
    column's stored values, one per row. A row exists when it has the ``presence`` cell; rows
    without it (only DELETE records, or cells the snapshot shows without the row) are left out.
    """
    layout = np.frombuffer(page.layout, dtype=_LAYOUT).astype(np.int64)
    codes = layout & packed.NO_VALUE
    keys = _binary(page.keys, (layout >> packed.COLUMN_BITS) & packed.MAX_KEY_LENGTH)
    values = _binary(page.values, layout >> 32)
    starts = np.ones(page.count, dtype=bool)
    if page.count > 1:
        before, after = keys[:-1], keys[1:]
        if not pc.all(pc.less_equal(before, after)).as_py():
            # The store aggregates a page in the order its scan produced it (packed.py).
            raise PercolatorSparkError("XX001", "a scan page's cells are not in key order")
        starts[1:] = pc.not_equal(before, after).to_numpy(zero_copy_only=False)
    row_of_cell = np.cumsum(starts) - 1
    rows = int(row_of_cell[-1]) + 1 if page.count else 0
    present = np.zeros(rows, dtype=bool)
    present[row_of_cell[codes == presence]] = True
    row_keys = keys.filter(pa.array(starts)).filter(pa.array(present))
    columns = []
    for code in range(width):
        cells = np.flatnonzero(codes == code)
        at = np.full(rows, -1, dtype=np.int64)
        at[row_of_cell[cells]] = cells
        at = at[present]
        columns.append(values.take(pa.array(at, mask=at < 0)))
    return row_keys, columns


def _binary(data: bytes, lengths: np.ndarray[Any, Any]) -> Stored:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), len(lengths), buffers)  # type: ignore[return-value]


def value_decoder(column: ColumnDef, arrow_type: pa.DataType) -> ColumnDecoder:
    """How the stored values of ``column`` become an Arrow array."""
    slow = _per_value(column, arrow_type)
    if column.type.array:
        return slow
    if (dtype := _FIXED.get(column.type.id)) is not None:
        return lambda stored: _fixed(stored, dtype, arrow_type, slow)
    if column.type.id in _UTF8 and pa.types.is_string(arrow_type):
        # The cast checks that every value is UTF-8, as decoding each would.
        return lambda stored: stored.cast(arrow_type)
    if column.type.id is TypeId.BYTEA and pa.types.is_binary(arrow_type):
        return lambda stored: stored
    return slow


class KeyDecoder:
    """How row keys become the Arrow arrays of the table's primary-key columns."""

    def __init__(self, table: TableDef, arrow_types: Sequence[pa.DataType]) -> None:
        self.positions = [table.position(cid) for cid in table.primary_key]
        self.types = [table.column_by_id(cid).type for cid in table.primary_key]
        self.key_types: list[KeyType] = [key_type(t) for t in self.types]  # type: ignore[misc]
        self.arrow_types = [arrow_types[p] for p in self.positions]
        self.converters = [to_spark(t) for t in self.types]
        self._single_int = (
            len(self.types) == 1
            and self.key_types[0] is KeyType.INT
            and self.types[0].id in (TypeId.INT2, TypeId.INT4, TypeId.INT8)
        )

    def columns(self, keys: Stored) -> list[pa.Array]:
        """One array per primary-key column, in key order."""
        if self._single_int:
            fast = _int_keys(keys, self.arrow_types[0])
            if fast is not None:
                return [fast]
        decoded = [keycodec.decode_key(self.key_types, k) for k in keys.to_pylist()]
        arrays = []
        for i, (t, arrow_type) in enumerate(zip(self.types, self.arrow_types, strict=True)):
            from_key = storage_codec.from_key_value_fn(t)
            convert = self.converters[i]
            values = [None if v[i] is None else from_key(v[i]) for v in decoded]
            arrays.append(to_arrow(values, convert, arrow_type))
        return arrays


def _int_keys(keys: Stored, arrow_type: pa.DataType) -> pa.Array | None:
    """A single integer key column decoded in one pass; None if a key is not one plain value."""
    joined = _joined(keys, _KEY_WIDTH)
    if joined is None:
        return None
    parsed = np.frombuffer(joined, dtype=_KEY_DTYPE)
    if not (parsed["tag"] == keycodec.VALUE_TAG).all():
        return None
    values = (parsed["value"] ^ np.uint64(1 << 63)).view(np.int64)
    return pa.array(values.astype(arrow_type.to_pandas_dtype(), copy=False), type=arrow_type)


def _joined(stored: Stored, width: int) -> pa.Buffer | None:
    """The values of a column without nulls, one after another, if each is ``width`` bytes;
    else None."""
    if len(stored) == 0:
        return pa.py_buffer(b"")
    if stored.null_count or not pc.all(pc.equal(pc.binary_length(stored), width)).as_py():
        return None
    offsets = np.frombuffer(stored.buffers()[1], dtype=np.int32)
    start = int(offsets[stored.offset])
    return stored.buffers()[2][start : start + width * len(stored)]


def _fixed(
    stored: Stored, dtype: np.dtype[Any], arrow_type: pa.DataType, slow: ColumnDecoder
) -> pa.Array:
    mask = None
    filled = stored
    if stored.null_count:
        mask = stored.is_null().to_numpy(zero_copy_only=False)
        filled = stored.fill_null(pa.scalar(bytes(dtype.itemsize), pa.binary()))
    joined = _joined(filled, dtype.itemsize)
    if joined is None:
        return slow(stored)  # a value of another width: decode each as stored
    return pa.array(np.frombuffer(joined, dtype=dtype), type=arrow_type, mask=mask)


def to_arrow(
    values: Sequence[Any], convert: Callable[[Any], Any] | None, arrow_type: pa.DataType
) -> pa.Array:
    """Decoded SQL values (None: NULL) as an Arrow array, through their Spark conversion."""
    if convert is not None:
        values = [None if v is None else convert(v) for v in values]
    return pa.array(values, type=arrow_type)


def _per_value(column: ColumnDef, arrow_type: pa.DataType) -> ColumnDecoder:
    decode = storage_codec.decoder_for(column.type)
    convert = to_spark(column.type)

    def decoder(stored: Stored) -> pa.Array:
        values = [None if v is None else decode(v) for v in stored.to_pylist()]
        return to_arrow(values, convert, arrow_type)

    return decoder
