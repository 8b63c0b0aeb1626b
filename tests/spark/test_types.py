"""Every SQL type through Spark and back: read with Spark, written back with Spark, compared in
SQL, with the Spark type each maps to."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import types as st

from tests.spark.conftest import Deployment

COLUMNS = """
    id integer PRIMARY KEY, b boolean, i2 smallint, i4 integer, i8 bigint, f4 real,
    f8 double precision, n numeric, n2 numeric(10,2), t text, vc varchar(10), c char(3),
    by bytea, d date, tm time, ts timestamp, tz timestamptz, iv interval, u uuid, j json,
    jb jsonb, ai integer[], at text[], o oid, ch "char", nm name"""

ROW = """(1, true, -32768, 2147483647, -9223372036854775808, 1.5, 2.25, 12345.678901234567890123,
    -3.14, 'héllo', 'abc', 'ab', '\\x00ff', '2024-02-29', '13:14:15.123456',
    '2024-01-02 03:04:05.678901', '2024-01-02 03:04:05.678901+02', '1 year 2 mons 3 days 04:05:06',
    '12345678-1234-5678-1234-567812345678', '{"a": [1, 2]}', '{"b": 1, "a": 2}', '{1,NULL,3}',
    ARRAY['x', 'y z'], 4000000000, 'z', 'aname')"""

EXPECTED_TYPES = {
    "id": st.IntegerType(),
    "b": st.BooleanType(),
    "i2": st.ShortType(),
    "i4": st.IntegerType(),
    "i8": st.LongType(),
    "f4": st.FloatType(),
    "f8": st.DoubleType(),
    "n": st.DecimalType(38, 18),
    "n2": st.DecimalType(10, 2),
    "t": st.StringType(),
    "vc": st.StringType(),
    "c": st.StringType(),
    "by": st.BinaryType(),
    "d": st.DateType(),
    "tm": st.TimeType(6),
    "ts": st.TimestampNTZType(),
    "tz": st.TimestampType(),
    "iv": st.StringType(),
    "u": st.StringType(),
    "j": st.StringType(),
    "jb": st.StringType(),
    "ai": st.ArrayType(st.IntegerType()),
    "at": st.ArrayType(st.StringType()),
    "o": st.LongType(),
    "ch": st.StringType(),
    "nm": st.StringType(),
}


def _options(r: Any, deployment: Deployment, **extra: str) -> Any:
    for k, v in {**deployment.options, **extra}.items():
        r = r.option(k, v)
    return r


@pytest.fixture(scope="module")
def typed(deployment: Deployment) -> str:
    deployment.sql(f"CREATE TABLE typed ({COLUMNS})")
    deployment.sql(f"INSERT INTO typed VALUES {ROW}")
    deployment.sql("INSERT INTO typed (id) VALUES (2)")  # every other column NULL
    return "typed"


def test_schema_maps_every_type(spark: Any, deployment: Deployment, typed: str) -> None:
    df = _options(spark.read.format("percolator"), deployment, table=typed).load()
    assert {f.name: f.dataType for f in df.schema.fields} == EXPECTED_TYPES
    assert not df.schema["id"].nullable


def test_values_read(spark: Any, deployment: Deployment, typed: str) -> None:
    df = _options(spark.read.format("percolator"), deployment, table=typed).load()
    rows = {r["id"]: r.asDict() for r in df.collect()}
    assert set(rows) == {1, 2}
    assert all(v is None for k, v in rows[2].items() if k != "id")
    r = rows[1]
    assert r["b"] is True
    assert (r["i2"], r["i4"], r["i8"]) == (-32768, 2147483647, -9223372036854775808)
    assert (r["f4"], r["f8"]) == (1.5, 2.25)
    assert r["n"] == Decimal("12345.678901234567890123").quantize(Decimal("1e-18"))
    assert r["n2"] == Decimal("-3.14")
    assert (r["t"], r["vc"], r["c"]) == ("héllo", "abc", "ab ")
    assert r["by"] == bytearray(b"\x00\xff")
    assert r["d"] == dt.date(2024, 2, 29)
    assert r["tm"] == dt.time(13, 14, 15, 123456)
    assert r["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 678901)
    # The session time zone is UTC: an instant comes back as its UTC wall time.
    assert r["tz"] == dt.datetime(2024, 1, 2, 1, 4, 5, 678901)
    assert r["iv"] == "1 year 2 mons 3 days 04:05:06"
    assert r["u"] == "12345678-1234-5678-1234-567812345678"
    assert r["j"] == '{"a": [1, 2]}'
    assert r["jb"] == '{"a": 2, "b": 1}'
    assert r["ai"] == [1, None, 3]
    assert r["at"] == ["x", "y z"]
    assert (r["o"], r["ch"], r["nm"]) == (4000000000, "z", "aname")


@pytest.mark.parametrize("mode", ["atomic", "partition"])
def test_round_trip_through_spark(
    spark: Any, deployment: Deployment, typed: str, mode: str
) -> None:
    """Read with Spark, write with Spark into a table of the same columns: equal in SQL."""
    copy = f"typed_{mode}"
    deployment.sql(f"CREATE TABLE {copy} ({COLUMNS})")
    df = _options(spark.read.format("percolator"), deployment, table=typed).load()
    _options(df.write.format("percolator"), deployment, table=copy, writeMode=mode).mode(
        "append"
    ).save()
    columns = "id, b, i2, i4, i8, f4, f8, n, n2, t, vc, c, by, d, tm, ts, tz, iv, u, j::text, jb, "
    columns += "ai, at, o, ch, nm"
    original = deployment.sql(f"SELECT {columns} FROM typed ORDER BY id")
    copied = deployment.sql(f"SELECT {columns} FROM {copy} ORDER BY id")
    assert copied == original
