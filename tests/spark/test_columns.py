"""Arrow columns decoded a column at a time from packed scan pages (the bulk read's fast path)
must equal the per-value path, for every type, NULLs, and bytes it does not expect."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

from percolator.connectors.spark.errors import PercolatorSparkError
from percolator.connectors.spark.reader import BatchEncoder
from percolator.connectors.spark.types import table_schema
from percolator.server.planner.row_codec import MARKER, RowCodec
from percolator.server.sql import types as T
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.storage import packed
from percolator.server.storage.packed import pack_rows

COLUMNS = (
    ("i2", T.INT2), ("i4", T.INT4), ("i8", T.INT8), ("f4", T.FLOAT4), ("f8", T.FLOAT8),
    ("b", T.BOOL), ("t", T.TEXT), ("vc", T.VARCHAR), ("by", T.BYTEA),
    ("n", T.NUMERIC), ("d", T.DATE), ("ts", T.TIMESTAMPTZ), ("u", T.UUID), ("j", T.JSONB),
)  # fmt: skip


def table(key: tuple[tuple[str, T.SqlType], ...]) -> TableDef:
    cols = [ColumnDef(i + 1, n, t, not_null=True) for i, (n, t) in enumerate(key)]
    cols += [ColumnDef(len(cols) + i + 1, n, t) for i, (n, t) in enumerate(COLUMNS)]
    return TableDef(
        id=1, name="x", columns=tuple(cols), primary_key=tuple(range(1, len(key) + 1)), storage="t1"
    )


def name_of(t: TableDef, column: str) -> str:
    """The cell name of a column (its id)."""
    return next(str(c.id) for c in t.columns if c.name == column)


def value_row(i: int) -> tuple[Any, ...]:
    if i % 3 == 2:
        return (None,) * len(COLUMNS)  # every value NULL
    return (
        -i, i * 1000, -(1 << 40) + i, 1.5 * i, -2.25 * i, i % 2 == 0, f"tekst-{i}-é",
        f"v{i}", bytes([i % 256, 0]), Decimal(f"{i}.25"), dt.date(2024, 1, 1 + i % 28),
        dt.datetime(2024, 3, 1, 12, i % 60, tzinfo=dt.UTC), uuid.UUID(int=i), f'{{"k": [{i}]}}',
    )  # fmt: skip


def scanned(codec: RowCodec, rows: list[tuple[Any, ...]]) -> list[tuple[bytes, dict[str, bytes]]]:
    """The rows as a scan returns them: in key order, the row key and the cells that hold a
    value."""
    out = []
    for row in rows:
        cells = {MARKER: b""}
        for i, name, encode, _ in codec.value_columns:
            if row[i] is not None:
                cells[name] = encode(row[i])
        out.append((codec.key_of(row), cells))
    return sorted(out, key=lambda r: r[0])


def batch_of(encoder: BatchEncoder, cells: list[tuple[bytes, dict[str, bytes]]]) -> Any:
    """The batch the reader makes of these rows, scanned as one packed page."""
    return encoder.batch_of_packed(pack_rows(cells, encoder.codec.read_names))


def both_paths(t: TableDef, rows: list[tuple[Any, ...]]) -> tuple[Any, Any]:
    encoder = BatchEncoder(t, table_schema(t))
    cells = scanned(encoder.codec, rows)
    reference = encoder.batch([encoder.codec.decode(k, c) for k, c in cells])
    return batch_of(encoder, cells), reference


@pytest.mark.parametrize(
    "key",
    [
        (("id", T.INT8),),
        (("id", T.INT2),),
        (("id", T.INT4),),
        (("name", T.TEXT),),
        (("a", T.INT4), ("b", T.TEXT)),
    ],
    ids=["bigint", "smallint", "integer", "text", "composite"],
)
def test_fast_columns_equal_the_per_value_path(key: tuple[tuple[str, T.SqlType], ...]) -> None:
    t = table(key)
    rows = []
    for i in range(-20, 40):
        kv = tuple(
            f"k{i:03d}" if kt is T.TEXT else i * (7919 if kt is T.INT8 else 1) for _, kt in key
        )
        rows.append(kv + value_row(abs(i)))
    fast, reference = both_paths(t, rows)
    assert fast.equals(reference)
    assert fast.num_rows == 60 and fast.column("i8").null_count == 20


def test_a_value_of_another_width_is_decoded_as_stored() -> None:
    t = table((("id", T.INT8),))
    encoder = BatchEncoder(t, table_schema(t))
    cells = scanned(encoder.codec, [(1, *value_row(1)), (2, *value_row(4))])
    cells[1][1][name_of(t, "i8")] = struct.pack(
        "<i", 77
    )  # i8 written as 4 bytes (read by its length)
    batch = batch_of(encoder, cells)
    assert batch.column("i8").to_pylist() == [-(1 << 40) + 1, 77]


def test_invalid_utf8_is_a_clear_error_naming_the_column() -> None:
    t = table((("id", T.INT8),))
    encoder = BatchEncoder(t, table_schema(t))
    cells = scanned(encoder.codec, [(1, *value_row(1))])
    cells[0][1][name_of(t, "t")] = b"\xff\xfe"
    with pytest.raises(PercolatorSparkError) as info:
        batch_of(encoder, cells)
    assert '"t"' in str(info.value)


def test_rows_without_their_presence_cell_are_left_out() -> None:
    """Only a row with the presence cell exists; a row whose cells are all DELETE records (as
    the store packs them) or that has other cells only is no row of the result."""
    t = table((("id", T.INT8),))
    encoder = BatchEncoder(t, table_schema(t))
    cells = scanned(encoder.codec, [(i, *value_row(i)) for i in range(1, 5)])
    del cells[1][1][MARKER]  # row 2: cells but no marker
    page = pack_rows(cells, encoder.codec.read_names)
    row5 = encoder.codec.key_of_values([5])  # only a DELETE record
    deleted = packed.PackedCells(
        1, row5, b"", struct.pack(">q", packed.word(0, len(row5), packed.NO_VALUE))
    )
    page = packed.PackedCells(
        page.count + 1,
        page.keys + deleted.keys,
        page.values,
        page.layout + deleted.layout,
    )
    batch = encoder.batch_of_packed(page)
    assert batch.column("id").to_pylist() == [1, 3, 4]
    assert batch.column("i4").to_pylist() == [1000, 3000, 4000]


def test_cells_out_of_key_order_are_refused() -> None:
    t = table((("id", T.INT8),))
    encoder = BatchEncoder(t, table_schema(t))
    cells = scanned(encoder.codec, [(1, *value_row(1)), (2, *value_row(4))])
    with pytest.raises(PercolatorSparkError, match="not in key order"):
        batch_of(encoder, cells[::-1])
