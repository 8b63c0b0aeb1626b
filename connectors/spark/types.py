"""SQL types <-> Spark types, and the values of each on the way through Arrow.

Every column type a table can have maps to one Spark type (see docs/spark.md for the table):
integers, floats, booleans, strings, bytes, dates, ``timestamp`` (TimestampNTZType),
``timestamptz`` (TimestampType, an instant), ``time`` (TimeType(6)) and arrays map to their
Spark namesakes; ``numeric(p,s)`` with p <= 38 to DecimalType(p,s); other numerics to
DecimalType(38,18), as Spark's JDBC source does; ``uuid``, ``json``, ``jsonb`` and
``interval`` to strings in Postgres's text format (Spark has no type that holds them exactly).

Reading turns a SQL value (the Python value :mod:`percolator.server.sql.types` documents) into
what Arrow takes for the Spark type; writing turns what Arrow gives back into the SQL value of
the column, with Postgres's assignment-cast rules (range checks, ``varchar(n)`` lengths,
``numeric(p,s)`` rounding): the per-value functions are chosen once per column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any

from pyspark.sql import types as st

from percolator.server.sql import casts
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    NUMERIC_VALUE_OUT_OF_RANGE,
    SqlError,
)
from percolator.server.sql.textio import text_encoder
from percolator.server.sql.types import SqlType, TypeId

Convert = Callable[[Any], Any]
"""A per-value conversion (never called with None)."""

MAX_SPARK_PRECISION = 38
DEFAULT_SCALE = 18
"""The scale of an unconstrained ``numeric`` in Spark (DecimalType(38,18), as JDBC maps it)."""

_INTEGERS = {
    TypeId.INT2: st.ShortType(),
    TypeId.INT4: st.IntegerType(),
    TypeId.INT8: st.LongType(),
    # Unsigned 32-bit: only a long holds every value.
    TypeId.OID: st.LongType(),
    TypeId.REGCLASS: st.LongType(),
    TypeId.REGTYPE: st.LongType(),
    TypeId.REGPROC: st.LongType(),
    TypeId.REGNAMESPACE: st.LongType(),
}
_SCALARS: dict[TypeId, st.DataType] = {
    **_INTEGERS,
    TypeId.BOOL: st.BooleanType(),
    TypeId.FLOAT4: st.FloatType(),
    TypeId.FLOAT8: st.DoubleType(),
    TypeId.TEXT: st.StringType(),
    TypeId.VARCHAR: st.StringType(),
    TypeId.BPCHAR: st.StringType(),
    TypeId.NAME: st.StringType(),
    TypeId.CHAR: st.StringType(),
    TypeId.BYTEA: st.BinaryType(),
    TypeId.DATE: st.DateType(),
    TypeId.TIME: st.TimeType(6),
    TypeId.TIMESTAMP: st.TimestampNTZType(),
    TypeId.TIMESTAMPTZ: st.TimestampType(),
    TypeId.UUID: st.StringType(),
    TypeId.JSON: st.StringType(),
    TypeId.JSONB: st.StringType(),
    TypeId.INTERVAL: st.StringType(),
    TypeId.INT2VECTOR: st.ArrayType(st.ShortType()),
    TypeId.OIDVECTOR: st.ArrayType(st.LongType()),
}
_AS_TEXT = frozenset({TypeId.UUID, TypeId.INTERVAL})
"""Types Spark sees as their Postgres text form (json/jsonb values already are text)."""
_FROM_STRING = frozenset(
    {
        TypeId.TEXT,
        TypeId.VARCHAR,
        TypeId.BPCHAR,
        TypeId.NAME,
        TypeId.CHAR,
        TypeId.UUID,
        TypeId.JSON,
        TypeId.JSONB,
        TypeId.INTERVAL,
        TypeId.TIME,
    }
)
"""Column types a Spark string may be written to (parsed from Postgres's text format)."""


def spark_type(t: SqlType) -> st.DataType:
    """The Spark type of a column of SQL type ``t``; 0A000 for a type Spark cannot hold."""
    if t.array:
        return st.ArrayType(spark_type(t.element), containsNull=True)
    if t.id is TypeId.NUMERIC:
        ps = t.precision_scale
        if ps is not None and ps[0] <= MAX_SPARK_PRECISION:
            return st.DecimalType(ps[0], ps[1])
        return st.DecimalType(MAX_SPARK_PRECISION, DEFAULT_SCALE)
    found = _SCALARS.get(t.id)
    if found is None:
        raise SqlError(FEATURE_NOT_SUPPORTED, f"columns of type {t} cannot be read by Spark")
    return found


def table_schema(table: TableDef) -> st.StructType:
    """The DataFrame schema of a table: its columns in order, nullable unless NOT NULL or part
    of the primary key."""
    pk = set(table.primary_key)
    return st.StructType(
        [
            st.StructField(c.name, spark_type(c.type), nullable=not (c.not_null or c.id in pk))
            for c in table.columns
        ]
    )


# -- reading: SQL value -> Spark (Arrow) value ------------------------------------------------


def to_spark(t: SqlType) -> Convert | None:
    """The conversion of a non-NULL SQL value of ``t`` to what Arrow takes for its Spark type,
    or None when the value already is that."""
    if t.array:
        inner = to_spark(t.element)

        def array(v: list[Any], _inner: Convert | None = inner) -> list[Any]:
            if v and isinstance(v[0], list):
                raise SqlError(
                    FEATURE_NOT_SUPPORTED,
                    f"multi-dimensional {t} values cannot be read by Spark",
                )
            if _inner is None:
                return v
            return [None if e is None else _inner(e) for e in v]

        return array
    if t.id in _AS_TEXT:
        return text_encoder(t)
    if t.id is TypeId.NUMERIC:
        target = spark_type(t)
        assert isinstance(target, st.DecimalType)
        return _decimal_for_spark(t, target.precision, target.scale)
    return None


_DECIMAL_CONTEXT = Context(prec=1000, rounding=ROUND_HALF_EVEN)


def _decimal_for_spark(t: SqlType, precision: int, scale: int) -> Convert:
    exponent = Decimal(1).scaleb(-scale)
    limit = precision - scale

    def convert(v: Decimal) -> Decimal:
        if not v.is_finite():
            raise SqlError(
                NUMERIC_VALUE_OUT_OF_RANGE,
                f"{t} value {v} cannot be represented as Spark's DecimalType({precision},{scale})",
            )
        # numeric(p,s) values already have scale s; an unconstrained numeric is rounded to 18
        # places, half to even (what Spark's own decimal casts do).
        r = v.quantize(exponent, context=_DECIMAL_CONTEXT)
        if not r.is_zero() and r.adjusted() >= limit:
            raise SqlError(
                NUMERIC_VALUE_OUT_OF_RANGE,
                f"{t} value {v} does not fit Spark's DecimalType({precision},{scale})",
            )
        return r

    return convert


# -- writing: Spark (Arrow) value -> SQL value --------------------------------------------------


def sql_type_of(spark: st.DataType) -> SqlType:
    """The SQL type whose values a Spark type carries (0A000 for one with no such type)."""
    if isinstance(spark, st.ArrayType):
        return sql_type_of(spark.elementType).array_of()
    if isinstance(spark, st.DecimalType):
        from percolator.server.sql.types import numeric

        return numeric(spark.precision, spark.scale)
    for cls, sql in _SPARK_TO_SQL:
        if isinstance(spark, cls):
            return sql
    raise SqlError(
        FEATURE_NOT_SUPPORTED, f"Spark type {spark.simpleString()} cannot be written to a table"
    )


_SPARK_TO_SQL: list[tuple[type[st.DataType], SqlType]] = [
    (st.BooleanType, SqlType(TypeId.BOOL)),
    (st.ByteType, SqlType(TypeId.INT2)),
    (st.ShortType, SqlType(TypeId.INT2)),
    (st.IntegerType, SqlType(TypeId.INT4)),
    (st.LongType, SqlType(TypeId.INT8)),
    (st.FloatType, SqlType(TypeId.FLOAT4)),
    (st.DoubleType, SqlType(TypeId.FLOAT8)),
    (st.StringType, SqlType(TypeId.TEXT)),  # also CharType / VarcharType (subclasses)
    (st.BinaryType, SqlType(TypeId.BYTEA)),
    (st.DateType, SqlType(TypeId.DATE)),
    (st.TimestampNTZType, SqlType(TypeId.TIMESTAMP)),
    (st.TimestampType, SqlType(TypeId.TIMESTAMPTZ)),
    (st.TimeType, SqlType(TypeId.TIME)),
    (st.NullType, SqlType(TypeId.UNKNOWN)),
]


def check_assignable(spark: st.DataType, column: ColumnDef, table: str) -> SqlType:
    """The SQL type of a DataFrame column after checking that it may be written to ``column``
    (Postgres's assignment casts, plus strings into the types Spark reads as strings); 42804
    when it may not."""
    src = sql_type_of(spark)
    if not _assignable(src, column.type):
        raise SqlError(
            DATATYPE_MISMATCH,
            f'column "{column.name}" of table "{table}" is of type {column.type} but the '
            f"DataFrame's column is {spark.simpleString()}",
            hint=f"Cast the DataFrame's column to {spark_type(column.type).simpleString()}.",
        )
    return src


def _assignable(src: SqlType, dst: SqlType) -> bool:
    if src.id is TypeId.UNKNOWN and not src.array:
        return True  # a column of NULLs
    if src.array != dst.array:
        return False
    if src.array:
        return _assignable(src.element, dst.element)
    if src.id is dst.id:
        return True
    if src.id is TypeId.TEXT and dst.id in _FROM_STRING:
        return True
    if dst.id in (TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NAME):
        return src.id in (TypeId.TEXT,)  # no silent formatting of numbers or dates as text
    if dst.id in (TypeId.BOOL, TypeId.BYTEA, TypeId.UUID, TypeId.JSON, TypeId.JSONB):
        return False
    return casts.can_assign(src, dst)


def from_spark(spark: st.DataType, src: SqlType, dst: SqlType) -> Convert | None:
    """The conversion of a non-NULL value Arrow gives for ``spark`` (of SQL type ``src``) into
    a value of column type ``dst``, or None when none is needed."""
    if src.id is TypeId.UNKNOWN and not src.array:
        return None
    normalize = _normalizer(spark)
    if src == dst and normalize is None:
        return None
    if src.array and dst.array and src.element == dst.element and normalize is None:
        return None

    def convert(v: Any) -> Any:
        if normalize is not None:
            v = normalize(v)
        return casts.cast(v, src, dst, explicit=False)

    return convert


def _normalizer(spark: st.DataType) -> Convert | None:
    """Arrow's Python values that differ from the SQL layer's: aware datetimes in another
    zone object (the SQL layer's are in ``datetime.UTC``)."""
    if isinstance(spark, st.TimestampType):
        return _as_utc
    if isinstance(spark, st.ArrayType):
        inner = _normalizer(spark.elementType)
        if inner is None:
            return None
        return lambda v: [None if e is None else inner(e) for e in v]
    return None


def _as_utc(v: dt.datetime) -> dt.datetime:
    return v.astimezone(dt.UTC)


__all__ = [
    "check_assignable",
    "from_spark",
    "spark_type",
    "sql_type_of",
    "table_schema",
    "to_spark",
]
