"""Splitting a read into partitions: ranges of row keys, narrowed by primary-key filters.

Row keys are memcomparable (byte order is key order, DESIGN.md §3), so a condition on the first
primary-key column is a range of bytes: ``id = 5`` is the keys starting with the encoding of 5,
``id >= 5`` the keys from it on. :func:`key_ranges` turns the filters Spark pushes into such
ranges (always a superset of the matching rows); :func:`plan` cuts them at split points sampled
from the table so that each partition reads about the same number of rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from percolator.server.sql import storage_codec
from percolator.server.sql.catalog import TableDef
from percolator.server.sql.keycodec import encode_key, prefix_successor
from percolator.server.sql.types import SqlType, TypeId, key_type


@dataclass(frozen=True, order=True)
class KeyRange:
    """Row keys in [start, end); None is unbounded."""

    start: bytes | None = None
    end: bytes | None = None

    @property
    def empty(self) -> bool:
        return self.start is not None and self.end is not None and self.start >= self.end

    def intersect(self, other: KeyRange) -> KeyRange:
        start = _max_start(self.start, other.start)
        end = _min_end(self.end, other.end)
        return KeyRange(start, end)


EVERYTHING = KeyRange()


def _max_start(a: bytes | None, b: bytes | None) -> bytes | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_end(a: bytes | None, b: bytes | None) -> bytes | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class ReadPartition(InputPartition):
    """One Spark task of a read: the key ranges it scans, in order."""

    def __init__(self, index: int, ranges: Sequence[KeyRange]) -> None:
        super().__init__(index)
        self.index = index
        self.ranges = tuple(ranges)

    def __repr__(self) -> str:
        return f"ReadPartition({self.index}, {list(self.ranges)})"


# -- filters -> key ranges -----------------------------------------------------------------------

_EXACT_TYPES = frozenset({TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.TEXT, TypeId.VARCHAR})
"""Key types whose order and equality in Spark are exactly the key encoding's, so a filter on
them is answered by the key range alone (for others Spark checks the rows again)."""


@dataclass(frozen=True)
class Pushdown:
    """What the primary-key filters allow: the key ranges to read, and which filters the ranges
    answer exactly (Spark need not evaluate those again)."""

    ranges: tuple[KeyRange, ...]
    exact: tuple[Filter, ...]


def key_ranges(table: TableDef, filters: Iterable[Filter]) -> Pushdown:
    """The key ranges that hold every row matching all of ``filters`` (ANDed).

    Only filters on the first primary-key column narrow the ranges; others are ignored."""
    if not table.primary_key:
        return Pushdown((EVERYTHING,), ())
    first = table.column_by_id(table.primary_key[0])
    single_column = len(table.primary_key) == 1
    ranges: list[KeyRange] = [EVERYTHING]
    exact: list[Filter] = []
    for f in filters:
        if getattr(f, "attribute", None) != (first.name,):
            continue  # another column, or a Not(...)
        narrowed = _filter_ranges(first.type, f)
        if narrowed is None:
            continue
        ranges = _intersect_all(ranges, narrowed)
        if single_column and first.type.id in _EXACT_TYPES and not first.type.array:
            exact.append(f)
    return Pushdown(tuple(r for r in ranges if not r.empty), tuple(exact))


def _filter_ranges(t: SqlType, f: Filter) -> list[KeyRange] | None:
    """The key ranges a filter on the first key column allows, or None if it cannot say."""
    if isinstance(f, In):
        points = [_encode(t, v) for v in f.value]
        if any(p is None for p in points):
            return None
        return sorted({_prefix_range(p) for p in points if p is not None})
    if not isinstance(f, EqualTo | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
        return None
    encoded = _encode(t, f.value)
    if encoded is None:
        return None
    if isinstance(f, EqualTo):
        return [_prefix_range(encoded)]
    if isinstance(f, GreaterThanOrEqual):
        return [KeyRange(encoded, None)]
    if isinstance(f, GreaterThan):
        after = prefix_successor(encoded)
        return [KeyRange(after, None)] if after is not None else []
    if isinstance(f, LessThan):
        return [KeyRange(None, encoded)]
    return [KeyRange(None, prefix_successor(encoded))]


def _prefix_range(prefix: bytes) -> KeyRange:
    return KeyRange(prefix, prefix_successor(prefix))


def _intersect_all(a: list[KeyRange], b: list[KeyRange]) -> list[KeyRange]:
    out = [x.intersect(y) for x in a for y in b]
    return sorted(r for r in out if not r.empty)


def _encode(t: SqlType, value: Any) -> bytes | None:
    """The encoding of a filter's literal as the first component of a key, or None when the
    literal is not a value of the column's type."""
    kt = key_type(t)
    if kt is None or value is None:
        return None
    v = _literal(t, value)
    if v is None:
        return None
    try:
        return encode_key([kt], [storage_codec.key_value(t, v)])
    except (TypeError, ValueError, OverflowError):
        return None


def _literal(t: SqlType, value: Any) -> object | None:
    tid = t.id
    if tid in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if tid in (TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NAME):
        return value if isinstance(value, str) else None
    if tid is TypeId.NUMERIC:
        if isinstance(value, Decimal) or (isinstance(value, int) and not isinstance(value, bool)):
            return Decimal(value)
        return None
    if tid is TypeId.UUID:
        try:
            return uuid.UUID(value) if isinstance(value, str) else None
        except ValueError:
            return None
    if tid is TypeId.BYTEA:
        return bytes(value) if isinstance(value, bytes | bytearray) else None
    if tid is TypeId.DATE:
        import datetime as dt

        is_date = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        return value if is_date else None
    return None  # floats, booleans, times: not worth the corner cases


# -- ranges -> partitions ------------------------------------------------------------------------


def plan(ranges: Sequence[KeyRange], points: Sequence[bytes], count: int) -> list[ReadPartition]:
    """At most ``count`` partitions covering ``ranges``, cut at split points (sorted row keys;
    when there are more than ``count - 1``, chosen evenly among them); partitions that would
    read nothing are dropped."""
    points = _split_points(sorted(set(points)), count)
    bounds: list[bytes | None] = [None, *points, None]
    partitions: list[ReadPartition] = []
    for i in range(len(bounds) - 1):
        window = KeyRange(bounds[i], bounds[i + 1])
        pieces = [r.intersect(window) for r in ranges]
        pieces = [p for p in pieces if not p.empty]
        if pieces:
            partitions.append(ReadPartition(len(partitions), pieces))
    return partitions or [ReadPartition(0, [])]


def _split_points(samples: list[bytes], count: int) -> list[bytes]:
    if count <= 1 or not samples:
        return []
    if len(samples) <= count - 1:
        return samples
    n = count - 1
    step = len(samples) / (n + 1)
    picked = [samples[min(len(samples) - 1, int(step * (i + 1)))] for i in range(n)]
    return sorted(set(picked))
