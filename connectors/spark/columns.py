"""Arrow columns built straight from scanned cells, a whole column at a time.

A bulk read spends most of its Python time decoding values one by one. For the common types the
stored bytes already are what Arrow holds: little-endian integers and floats of a fixed width
(``storage_codec``), UTF-8 text, raw bytea. Those columns are decoded in C, by numpy over the
joined bytes or by an Arrow cast; a single-column integer primary key likewise from its key
bytes. Every other type, and any column whose bytes are not as expected (a value of another
width), goes through the per-value decoder and the Spark conversion, as
:class:`~percolator.connectors.spark.reader.BatchEncoder` does for decoded rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from percolator.connectors.spark.types import to_spark
from percolator.server.sql import keycodec, storage_codec
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.types import KeyType, TypeId, key_type

Raw = Sequence[bytes | None]
ColumnDecoder = Callable[[Raw], pa.Array]

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


def value_decoder(column: ColumnDef, arrow_type: pa.DataType) -> ColumnDecoder:
    """How the stored cells of ``column`` (None: no value) become an Arrow array."""
    slow = _per_value(column, arrow_type)
    if column.type.array:
        return slow
    if (dtype := _FIXED.get(column.type.id)) is not None:
        return lambda raw: _fixed(raw, dtype, arrow_type, slow)
    if column.type.id in _UTF8 and pa.types.is_string(arrow_type):
        return lambda raw: _utf8(raw, arrow_type)
    if column.type.id is TypeId.BYTEA and pa.types.is_binary(arrow_type):
        return lambda raw: pa.array(raw, type=arrow_type)
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

    def columns(self, keys: Sequence[bytes]) -> list[pa.Array]:
        """One array per primary-key column, in key order."""
        if self._single_int:
            fast = _int_keys(keys, self.arrow_types[0])
            if fast is not None:
                return [fast]
        decoded = [keycodec.decode_key(self.key_types, k) for k in keys]
        arrays = []
        for i, (t, arrow_type) in enumerate(zip(self.types, self.arrow_types, strict=True)):
            from_key = storage_codec.from_key_value_fn(t)
            convert = self.converters[i]
            values = [None if v[i] is None else from_key(v[i]) for v in decoded]
            arrays.append(to_arrow(values, convert, arrow_type))
        return arrays


def _int_keys(keys: Sequence[bytes], arrow_type: pa.DataType) -> pa.Array | None:
    """A single integer key column decoded in one pass; None if a key is not one plain value."""
    joined = b"".join(keys)
    if len(joined) != _KEY_WIDTH * len(keys):
        return None
    parsed = np.frombuffer(joined, dtype=_KEY_DTYPE)
    if not (parsed["tag"] == keycodec.VALUE_TAG).all():
        return None
    values = (parsed["value"] ^ np.uint64(1 << 63)).view(np.int64)
    return pa.array(values.astype(arrow_type.to_pandas_dtype(), copy=False), type=arrow_type)


def _fixed(
    raw: Raw, dtype: np.dtype[Any], arrow_type: pa.DataType, slow: ColumnDecoder
) -> pa.Array:
    mask = None
    present = raw
    if None in raw:
        zero = bytes(dtype.itemsize)
        mask = np.fromiter((v is None for v in raw), dtype=bool, count=len(raw))
        present = [zero if v is None else v for v in raw]
    joined = b"".join(present)  # type: ignore[arg-type]
    if len(joined) != dtype.itemsize * len(raw):
        return slow(raw)  # a value of another width: decode each as stored
    return pa.array(np.frombuffer(joined, dtype=dtype), type=arrow_type, mask=mask)


def _utf8(raw: Raw, arrow_type: pa.DataType) -> pa.Array:
    # The cast checks that every value is UTF-8, as decoding each would.
    return pa.array(raw, type=pa.binary()).cast(arrow_type)


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

    def decoder(raw: Raw) -> pa.Array:
        return to_arrow([None if v is None else decode(v) for v in raw], convert, arrow_type)

    return decoder
