"""The packed scan page format: packing rows, reading cells back, cutting the last row."""

from __future__ import annotations

import struct

import pytest

from percolator.server.storage import packed

COLUMNS = ["a", "b", "c"]
ROWS = [
    (b"r1", {"a": b"1", "c": b"333"}),
    (b"r2", {"b": b""}),  # an empty value is a value
    (b"r3", {"a": b"x", "b": b"yy", "c": b"zzz"}),
]


def test_packed_rows_read_back_as_they_were() -> None:
    page = packed.pack_rows(ROWS, COLUMNS)
    assert page.count == 6
    assert page.rows(COLUMNS) == ROWS
    assert list(page.cells())[:2] == [(b"r1", 0, b"1"), (b"r1", 2, b"333")]


def test_columns_not_asked_for_are_left_out() -> None:
    page = packed.pack_rows(ROWS, ["c"])
    assert page.rows(["c"]) == [(b"r1", {"c": b"333"}), (b"r3", {"c": b"zzz"})]


def test_a_cell_without_value_hides_nothing_else() -> None:
    """A DELETE record packed by the store: the column code says there is no value."""
    layout = [
        packed.word(1, 2, 0),
        packed.word(0, 2, packed.NO_VALUE),
        packed.word(0, 3, packed.NO_VALUE),
        packed.word(2, 3, 1),
    ]
    page = packed.PackedCells(
        4, b"r1r1r22r22", b"1" + b"zz", b"".join(struct.pack(">q", w) for w in layout)
    )
    assert page.rows(COLUMNS) == [(b"r1", {"a": b"1"}), (b"r22", {"b": b"zz"})]
    assert list(page.cells())[1] == (b"r1", packed.NO_VALUE, None)


def test_split_last_row_cuts_every_cell_of_it() -> None:
    page = packed.pack_rows(ROWS, COLUMNS)
    kept, last = packed.split_last_row(page)
    assert last == b"r3"
    assert kept.count == 3 and kept.rows(COLUMNS) == ROWS[:2]
    assert kept == packed.pack_rows(ROWS[:2], COLUMNS)


def test_words_keep_their_fields_apart() -> None:
    w = packed.word(1 << 30, packed.MAX_KEY_LENGTH, packed.MAX_COLUMNS - 1)
    assert packed.unpack_word(w) == (1 << 30, packed.MAX_KEY_LENGTH, packed.MAX_COLUMNS - 1)
    with pytest.raises(ValueError):
        packed.word(1, packed.MAX_KEY_LENGTH + 1, 0)
