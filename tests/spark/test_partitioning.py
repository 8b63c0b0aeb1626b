"""Partition planning and primary-key pushdown, without Spark: key ranges are byte ranges."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, StringStartsWith

from percolator.connectors.spark.partitioning import EVERYTHING, KeyRange, key_ranges, plan
from percolator.server.planner.row_codec import RowCodec
from percolator.server.sql import types as T
from percolator.server.sql.catalog import ColumnDef, TableDef

TABLE = TableDef(
    id=1,
    name="t",
    columns=(ColumnDef(1, "id", T.INT8, not_null=True), ColumnDef(2, "v", T.TEXT)),
    primary_key=(1,),
    storage="t1",
)
CODEC = RowCodec(TABLE)


def key(i: int) -> bytes:
    return CODEC.key_of((i, None))


def inside(ranges: tuple[KeyRange, ...] | list[KeyRange], k: bytes) -> bool:
    return any((r.start is None or r.start <= k) and (r.end is None or k < r.end) for r in ranges)


def test_equality_is_one_point_and_exact() -> None:
    f = EqualTo(("id",), 5)
    pushed = key_ranges(TABLE, [f])
    assert [i for i in range(10) if inside(pushed.ranges, key(i))] == [5]
    assert pushed.exact == (f,)


def test_range_filters_intersect() -> None:
    pushed = key_ranges(TABLE, [GreaterThan(("id",), 3), LessThanOrEqual(("id",), 7)])
    assert [i for i in range(-5, 20) if inside(pushed.ranges, key(i))] == [4, 5, 6, 7]


def test_in_list_and_contradiction() -> None:
    pushed = key_ranges(TABLE, [In(("id",), (9, 2, 4))])
    assert [i for i in range(12) if inside(pushed.ranges, key(i))] == [2, 4, 9]
    assert key_ranges(TABLE, [EqualTo(("id",), 1), EqualTo(("id",), 2)]).ranges == ()


def test_other_filters_and_columns_are_left_to_spark() -> None:
    filters = [EqualTo(("v",), "x"), StringStartsWith(("v",), "a"), EqualTo(("id",), "nan")]
    pushed = key_ranges(TABLE, filters)
    assert pushed.ranges == (EVERYTHING,)
    assert pushed.exact == ()


def test_plan_cuts_at_split_points_and_drops_empty_partitions() -> None:
    points = [key(100), key(200), key(300)]
    parts = plan([EVERYTHING], points, 4)
    assert len(parts) == 4
    assert parts[0].ranges == (KeyRange(None, key(100)),)
    assert parts[3].ranges == (KeyRange(key(300), None),)
    narrow = plan([KeyRange(key(150), key(160))], points, 4)
    assert [p.ranges for p in narrow] == [(KeyRange(key(150), key(160)),)]
    assert len(plan([EVERYTHING], [key(i) for i in range(100)], 3)) == 3
