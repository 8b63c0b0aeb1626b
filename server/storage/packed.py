"""A page of scanned cells packed into three buffers, for readers that decode whole columns.

A bulk reader (the Spark connector) spends most of its time on per-cell work: one record per
cell from the driver, one Python object per value. A packed page has no per-cell object. The
store concatenates, in (row, column) order:

``keys``
    every cell's row key;
``values``
    every cell's value;
``layout``
    per cell, a big-endian 64-bit word: ``value length << 32 | key length << 12 | column``,
    where ``column`` is the cell's position in the column list the scan was given, or
    :data:`NO_VALUE` for a cell that carries none (a DELETE record: the cell is absent; its
    value length is 0).

A reader cuts the buffers at the running sums of the lengths, with numpy or Arrow, and finds
the rows where the key changes. A row's cells are contiguous, but a row with no value (only
DELETE records) may still appear: its cells all say :data:`NO_VALUE`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

COLUMN_BITS = 12
KEY_BITS = 20
NO_VALUE = (1 << COLUMN_BITS) - 1
"""The column code of a cell without a value."""
MAX_COLUMNS = NO_VALUE
"""The most columns a packed scan can name (more: the store answers with rows)."""
MAX_KEY_LENGTH = (1 << KEY_BITS) - 1

_WORD = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class PackedCells:
    """One page of a packed scan (see the module docstring)."""

    count: int
    """Cells in the page."""
    keys: bytes
    values: bytes
    layout: bytes

    def cells(self) -> Iterable[tuple[bytes, int, bytes | None]]:
        """(row key, column code, value or None) per cell, decoded one by one: for tests and
        small pages, not for bulk reads."""
        key_at = value_at = 0
        for (word,) in _WORD.iter_unpack(self.layout):
            value_len, key_len, column = unpack_word(word)
            key = self.keys[key_at : key_at + key_len]
            value = self.values[value_at : value_at + value_len]
            key_at += key_len
            value_at += value_len
            yield key, column, None if column == NO_VALUE else value

    def rows(self, columns: Sequence[str]) -> list[tuple[bytes, dict[str, bytes]]]:
        """The page as (row key, values by column name), rows without a value left out."""
        out: list[tuple[bytes, dict[str, bytes]]] = []
        current: bytes | None = None
        values: dict[str, bytes] = {}
        for key, column, value in self.cells():
            if key != current:
                if values:
                    out.append((current, values))  # type: ignore[arg-type]
                current, values = key, {}
            if value is not None:
                values[columns[column]] = value
        if values:
            out.append((current, values))  # type: ignore[arg-type]
        return out


EMPTY = PackedCells(0, b"", b"", b"")


def word(value_len: int, key_len: int, column: int) -> int:
    """The layout word of one cell."""
    if key_len > MAX_KEY_LENGTH:
        raise ValueError(f"a row key of {key_len} bytes is too long for a packed page")
    return value_len << 32 | key_len << COLUMN_BITS | column


def unpack_word(w: int) -> tuple[int, int, int]:
    """(value length, key length, column code) of a layout word."""
    return w >> 32, (w >> COLUMN_BITS) & MAX_KEY_LENGTH, w & NO_VALUE


def pack_rows(
    rows: Iterable[tuple[bytes, dict[str, bytes]]], columns: Sequence[str]
) -> PackedCells:
    """Rows (row key, values by column name) as a packed page; values of columns not in
    ``columns`` are left out."""
    code = {name: i for i, name in enumerate(columns)}
    keys: list[bytes] = []
    values: list[bytes] = []
    layout: list[bytes] = []
    for row, cells in rows:
        for name in sorted(cells):
            column = code.get(name)
            if column is None:
                continue
            value = cells[name]
            keys.append(row)
            values.append(value)
            layout.append(_WORD.pack(word(len(value), len(row), column)))
    return PackedCells(len(layout), b"".join(keys), b"".join(values), b"".join(layout))


def split_last_row(page: PackedCells) -> tuple[PackedCells, bytes]:
    """The page without the cells of its last row, and that row's key: a page cut at a cell
    limit may end inside a row, which the next page then reads whole. The page must hold at
    least one cell."""
    last_word = _WORD.unpack_from(page.layout, (page.count - 1) * 8)[0]
    last = page.keys[len(page.keys) - unpack_word(last_word)[1] :]
    n = page.count
    key_end = len(page.keys)
    value_end = len(page.values)
    while n > 0:
        value_len, key_len, _ = unpack_word(_WORD.unpack_from(page.layout, (n - 1) * 8)[0])
        if page.keys[key_end - key_len : key_end] != last:
            break
        n -= 1
        key_end -= key_len
        value_end -= value_len
    kept = PackedCells(n, page.keys[:key_end], page.values[:value_end], page.layout[: n * 8])
    return kept, last
