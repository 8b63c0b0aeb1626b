"""Value codecs and casts checked against a real Postgres: text output and input, input errors,
the binary format (Postgres's *send functions), casts and their errors, common types, ordering.
Storage round trips and key order are property tests."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from percolator.server.sql import types as T
from percolator.server.sql.binaryio import (
    binary_in,
    binary_out,
    decode_param,
    encoder_for,
)
from percolator.server.sql.casts import (
    _PG_CAST,
    can_assign,
    can_implicitly_cast,
    cast,
    cast_context,
    common_type,
    compare_key,
)
from percolator.server.sql.errors import SqlError
from percolator.server.sql.keycodec import encode_key
from percolator.server.sql.storage_codec import (
    from_key_value,
    key_value,
    store_decode,
    store_encode,
)
from percolator.server.sql.textio import normalize_jsonb, text_in, text_out
from percolator.server.sql.types import Interval, SqlType, key_type, make_type


class PG:
    """One connection for the module, driven synchronously."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn: asyncpg.Connection = self.loop.run_until_complete(asyncpg.connect(dsn))
        self.loop.run_until_complete(
            self.conn.execute("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'")
        )

    def val(self, sql: str, *args: object) -> Any:
        return self.loop.run_until_complete(self.conn.fetchval(sql, *args))

    def error(self, sql: str, *args: object) -> asyncpg.PostgresError:
        try:
            self.val(sql, *args)
        except asyncpg.PostgresError as exc:
            return exc
        raise AssertionError(f"Postgres accepted {sql}")

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


@pytest.fixture(scope="module")
def pg(embedded_pg: Any) -> Iterator[PG]:
    p = PG(embedded_pg.dsn)
    yield p
    p.close()


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ty(spelling: str) -> SqlType:
    """Our type for a Postgres spelling such as ``varchar(3)`` or ``int4[]``."""
    array = spelling.endswith("[]")
    base = spelling.removesuffix("[]")
    mods: tuple[int, ...] = ()
    if "(" in base:
        base, _, rest = base.partition("(")
        mods = tuple(int(x) for x in rest.rstrip(")").split(","))
    t = make_type(base, mods, array)
    assert t is not None, spelling
    return t


# -- text format ------------------------------------------------------------------------------

TEXT_CASES: list[tuple[str, str]] = [
    ("bool", "t"), ("bool", " YES "), ("bool", "off"), ("bool", "0"), ("bool", "TRUE"),
    ("int2", "-32768"), ("int2", " 12 "), ("int4", "+5"), ("int4", "-0"), ("int4", "0x1F"),
    ("int4", "1_000"), ("int8", "9223372036854775807"), ("int8", "0o17"), ("int8", "0b101"),
    ("oid", "4294967295"), ("oid", "-1"),
    ("float8", "0.1"), ("float8", "1e20"), ("float8", "-0"), ("float8", "NaN"),
    ("float8", "-Infinity"), ("float8", "inf"), ("float8", "1e15"), ("float8", "1e16"),
    ("float8", "123456789012345678"), ("float8", "0.0001"), ("float8", "0.00001"),
    ("float8", "1.7976931348623157e308"), ("float8", "5e-324"), ("float8", "100"),
    ("float8", "3.141592653589793"), ("float8", "-1.5e-7"), ("float8", "999999999999999"),
    ("float4", "1.1"), ("float4", "1e6"), ("float4", "123456"), ("float4", "0.1"),
    ("float4", "3.4028235e38"), ("float4", "1e-45"), ("float4", "-0"), ("float4", "NaN"),
    ("float4", "16777217"), ("float4", "0.333333333"), ("float4", "1234567"),
    ("numeric", "1.50"), ("numeric", "1.5e3"), ("numeric", "-0.00"), ("numeric", "NaN"),
    ("numeric", "Infinity"), ("numeric", "-inf"), ("numeric", "1.50e-2"),
    ("numeric", "123456789012345678901234567890.123456789012345678901234567890"),
    ("numeric", "1e100"), ("numeric", " 42 "), ("numeric", ".5"), ("numeric", "5."),
    ("numeric", "1_000.5"), ("numeric", "0x1F"),
    ("text", "héllo wörld"), ("varchar", "x y"), ("name", "a" * 70), ('"char"', "a"),
    ("char(5)", "ab"), ("bpchar", "ab  "),
    ("bytea", "\\x0102ff"), ("bytea", "ab\\000c\\\\"), ("bytea", "\\x"), ("bytea", "\\x01 02"),
    ("date", "2024-01-02"), ("date", "20240102"), ("date", "Jan 2 2024"), ("date", "2 Jan 2024"),
    ("date", "1/2/2024"), ("date", "2024-01-02 04:05"), ("date", "January 2, 2024"),
    ("date", "0001-01-01"), ("date", "9999-12-31"), ("date", "epoch"), ("date", "2024-Jan-02"),
    ("time", "03:04:05"), ("time", "03:04:05.120"), ("time", "23:59:59.999999"),
    ("time", "3:04 pm"), ("time", "12:00 am"), ("time", "allballs"),
    ("timestamp", "2024-01-02 03:04:05"), ("timestamp", "2024-01-02 03:04:05.123456"),
    ("timestamp", "2024-01-02T03:04:05Z"), ("timestamp", "2024-01-02 03:04:05+05:30"),
    ("timestamp", "2024-01-02"), ("timestamp", "2024-01-02 03:04:05.1234567"),
    ("timestamp", "Jan 2 2024 03:04"), ("timestamp", "2024-01-02 24:00:00"),
    ("timestamptz", "2024-01-02 03:04:05+02"), ("timestamptz", "2024-01-02 03:04:05Z"),
    ("timestamptz", "2024-01-02 03:04:05+05:30"), ("timestamptz", "2024-01-02 03:04:05-0800"),
    ("timestamptz", "2024-01-02 03:04:05"), ("timestamptz", "2024-06-01 12:00 America/New_York"),
    ("timestamptz", "2024-01-02T03:04:05.5+00:00"), ("timestamptz", "2024-01-02 03:04:05 UTC"),
    ("interval", "1 year 2 mons 3 days 04:05:06"), ("interval", "1 day"),
    ("interval", "2 hours 30 minutes"), ("interval", "1 year 2 mons"), ("interval", "01:02:03"),
    ("interval", "P1D"), ("interval", "P1Y2M3DT4H5M6.5S"), ("interval", "-1 year -2 mons +3 days"),
    ("interval", "1 day -1 hour"), ("interval", "-1 day +1 hour"), ("interval", "5"),
    ("interval", "1.5 years"), ("interval", "1.5 months"), ("interval", "1.5 days"),
    ("interval", "1.5 weeks"), ("interval", "1 day ago"), ("interval", "@ 3 hours ago"),
    ("interval", "1-2"), ("interval", "1 01:02:03"), ("interval", "0"), ("interval", "-00:00:01.5"),
    ("interval", "36 hours"), ("interval", "100 years"), ("interval", "1 millisecond"),
    ("interval", "1 mon -1 day"), ("interval", "-1 mon 1 day"),
    ("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
    ("uuid", "{a0eebc999c0b4ef8bb6d6bb9bd380a11}"),
    ("uuid", "a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11"),
    ("json", '{"b":1, "a" : [1,2.50]}'), ("jsonb", '{"b":1,"a":2,"aa":[1,2.50],"a":3}'),
    ("jsonb", '"\\u00e9\\n\\u001f/"'), ("jsonb", "-0"), ("jsonb", "1e2"), ("jsonb", "[]"),
    ("jsonb", "{}"), ("jsonb", ' {"é": null, "z": true, "ab": false, "b": {"y": 1, "x": 2}} '),
    ("jsonb", "1.0E-3"), ("jsonb", '"\\ud83d\\ude00"'),
    ("int4[]", "{1,2,NULL}"), ("int4[]", "{}"), ("int4[]", "{{1,2},{3,4}}"),
    ("int4[]", " { 1 , 2 } "), ("text[]", '{"a b","x\\"y",NULL,"NULL",""}'),
    ("text[]", "{a\\,b,c\\\\d}"), ("text[]", '{"{}",null,Null}'), ("text[]", "{ a b }"),
    ("float8[]", "{NaN,-0,1e20}"), ("bytea[]", "{\\\\x01}"), ("bool[]", "{t,f}"),
    ("date[]", "{2024-01-02}"), ("numeric[]", "{1.50,NaN}"), ("varchar[]", '{"a,b"}'),
    ("int2vector", "1 2 3"), ("oidvector", " 23  25 "), ("int2vector", ""),
]  # fmt: skip


@pytest.mark.parametrize(("type_name", "literal"), TEXT_CASES)
def test_text_round_trip_matches_postgres(pg: PG, type_name: str, literal: str) -> None:
    # format('%s') prints with the type's output function (::text differs for bool and char(n)).
    expected = pg.val(f"SELECT format('%s', {lit(literal)}::{type_name})")
    t = ty(type_name)
    assert text_out(t, text_in(t, literal)) == expected
    # Our output reads back as the same value.
    v = text_in(t, expected)
    assert text_out(t, v) == expected


ERROR_CASES: list[tuple[str, str]] = [
    ("int4", "abc"), ("int4", ""), ("int4", "1.5"), ("int4", "_1"), ("int4", "1_"),
    ("int4", "2147483648"), ("int2", "99999"), ("int8", "9223372036854775808"), ("int2", "1e3"),
    ("oid", "4294967296"), ("oid", "x"),
    ("bool", "maybe"), ("bool", ""), ("bool", "o"),
    ("float8", "abc"), ("float8", "1e400"), ("float8", "1e-400"), ("float8", "1_0"),
    ("float4", "1e39"), ("float4", "3.4028236e38"), ("float4", "1e-46"),
    ("numeric", "abc"), ("numeric", "1e"), ("numeric", "--1"), ("numeric", ""),
    ("date", "abc"), ("date", "2024-13-01"), ("date", "2024-02-30"), ("date", "2024-01-32"),
    ("timestamp", "2024-01-02 25:00"), ("timestamp", "2024-01-02 03:60"), ("timestamp", "nope"),
    ("timestamptz", "2024-01-02 03:04:05 Nowhere/Zone"), ("time", "25:00"), ("time", "abc"),
    ("interval", "abc"), ("interval", "1 fortnight"), ("interval", ""),
    ("uuid", "abc"), ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"),
    ("uuid", "{a0eebc999c0b4ef8bb6d6bb9bd380a11"),
    ("uuid", "a0ee-bc99-9c0b-4ef8-bb6d6bb9bd380a11x"),
    ("bytea", "\\xg0"), ("bytea", "\\x012"), ("bytea", "a\\9"),
    ("json", "{"), ("json", "{'a': 1}"), ("json", "NaN"), ("json", "[1,]"), ("json", ""),
    ("jsonb", "01"), ("jsonb", '"\\ud800"'), ("jsonb", '"\\u0000"'), ("jsonb", "Infinity"),
    ("int4[]", "{1,2"), ("int4[]", "1,2"), ("int4[]", "{{1},{2,3}}"), ("int4[]", "{1,}"),
    ("int4[]", "{1,x}"), ("int4[]", "{1} x"), ("int4[]", "{{1},2}"),
]  # fmt: skip


@pytest.mark.parametrize(("type_name", "literal"), ERROR_CASES)
def test_input_errors_match_postgres(pg: PG, type_name: str, literal: str) -> None:
    exc = pg.error(f"SELECT {lit(literal)}::{type_name}")
    with pytest.raises(SqlError) as ours:
        text_in(ty(type_name), literal)
    assert ours.value.sqlstate == exc.sqlstate, (ours.value.message, exc.message)
    if exc.sqlstate in ("22P02", "22003", "22007", "22008") and "json" not in type_name:
        assert ours.value.message == exc.message


def test_json_type_keeps_lone_surrogate_escapes(pg: PG) -> None:
    assert pg.val("""SELECT '"\\ud800"'::json::text""") == text_in(T.JSON, '"\\ud800"')


def test_bc_and_far_dates_are_refused_clearly() -> None:
    for s in ("0044-03-15 BC", "10000-01-01"):
        with pytest.raises(SqlError) as exc:
            text_in(T.DATE, s)
        assert exc.value.sqlstate == "22008"
    with pytest.raises(SqlError) as exc:
        text_in(T.DATE, "infinity")
    assert exc.value.sqlstate == "0A000"


def test_text_out_of_python_values() -> None:
    assert text_out(T.BOOL, True) == "t"
    assert text_out(T.BYTEA, b"\x01\x02") == "\\x0102"
    assert text_out(T.TIMESTAMP, dt.datetime(2024, 1, 2, 3, 4, 5, 120000)) == (
        "2024-01-02 03:04:05.12"
    )
    tz = dt.timezone(dt.timedelta(hours=2))
    assert text_out(T.TIMESTAMPTZ, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tz)) == (
        "2024-01-02 01:04:05+00"
    )
    assert text_out(T.bpchar(4), "ab") == "ab  "
    assert text_out(T.INT2VECTOR, [1, 2]) == "1 2"
    assert text_out(T.INTERVAL, Interval(14, 3, 14_706_000_000)) == "1 year 2 mons 3 days 04:05:06"
    assert text_out(T.TEXT_ARRAY, [["a", None], ["b c", ""]]) == '{{a,NULL},{"b c",""}}'
    assert normalize_jsonb('{"b": [1, {"d": 1, "c": 2}], "a": "x"}') == (
        '{"a": "x", "b": [1, {"c": 2, "d": 1}]}'
    )


@pytest.mark.parametrize(
    "value",
    [
        0.1, 1e20, -0.0, 1e15, 1e16, 1e-5, 123.0, 5e-324, 1.7976931348623157e308, 2.5e-5,
        123456789.123, -1e-300, 0.3333333333333333, 1e22, 4.35e15,
    ],
)  # fmt: skip
def test_float8_out_matches_postgres(pg: PG, value: float) -> None:
    assert text_out(T.FLOAT8, value) == pg.val("SELECT $1::float8::text", value)
    if 1e-38 < abs(value) < 3.4e38:
        f4 = cast(value, T.FLOAT8, T.FLOAT4)
        assert text_out(T.FLOAT4, f4) == pg.val("SELECT $1::float8::float4::text", value)


# -- binary format ----------------------------------------------------------------------------

BINARY_CASES: list[tuple[str, str, str]] = [
    ("bool", "t", "boolsend"), ("bool", "f", "boolsend"),
    ("int2", "-2", "int2send"), ("int4", "5", "int4send"), ("int8", "-9000000000", "int8send"),
    ("oid", "4294967295", "oidsend"), ("regclass", "1259", "regclasssend"),
    ("text", "héllo", "textsend"), ("varchar", "ab", "varcharsend"), ("name", "pg", "namesend"),
    ("char(4)", "ab", "bpcharsend"), ('"char"', "x", "charsend"), ("bytea", "\\x00ff", "byteasend"),
    ("float4", "1.1", "float4send"), ("float4", "NaN", "float4send"),
    ("float8", "-0", "float8send"), ("float8", "Infinity", "float8send"),
    ("numeric", "1.50", "numeric_send"), ("numeric", "0", "numeric_send"),
    ("numeric", "0.000", "numeric_send"), ("numeric", "-123456789.000012345", "numeric_send"),
    ("numeric", "1e20", "numeric_send"), ("numeric", "0.0001", "numeric_send"),
    ("numeric", "10000", "numeric_send"), ("numeric", "12345.6789", "numeric_send"),
    ("numeric", "NaN", "numeric_send"), ("numeric", "Infinity", "numeric_send"),
    ("numeric", "-Infinity", "numeric_send"), ("numeric", "-0.5", "numeric_send"),
    ("numeric", "0.00001", "numeric_send"), ("numeric", "99999999", "numeric_send"),
    ("date", "2024-01-02", "date_send"), ("date", "1999-12-31", "date_send"),
    ("date", "0001-01-01", "date_send"),
    ("time", "03:04:05.000006", "time_send"),
    ("timestamp", "2024-01-02 03:04:05.123456", "timestamp_send"),
    ("timestamp", "1970-01-01", "timestamp_send"),
    ("timestamptz", "2024-01-02 03:04:05+02", "timestamptz_send"),
    ("interval", "1 year 2 mons -3 days 04:05:06.7", "interval_send"),
    ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "uuid_send"),
    ("json", '{"b": 1, "a": 2}', "json_send"), ("jsonb", '{"b": 1, "a": [2]}', "jsonb_send"),
    ("int4[]", "{1,2,NULL}", "array_send"), ("int4[]", "{}", "array_send"),
    ("int4[]", "{{1,2},{3,4}}", "array_send"), ("text[]", '{"a b",NULL,""}', "array_send"),
    ("numeric[]", "{1.5,NaN}", "array_send"), ("int8[]", "{7}", "array_send"),
    ("int2vector", "1 2 3", "int2vectorsend"), ("oidvector", "23 25", "oidvectorsend"),
]  # fmt: skip


@pytest.mark.parametrize(("type_name", "literal", "send"), BINARY_CASES)
def test_binary_matches_postgres_send(pg: PG, type_name: str, literal: str, send: str) -> None:
    expected = pg.val(f"SELECT {send}({lit(literal)}::{type_name})")
    t = ty(type_name)
    v = text_in(t, literal)
    assert binary_out(t, v) == expected
    back = binary_in(t, expected)
    if isinstance(v, float) and math.isnan(v):
        assert isinstance(back, float) and math.isnan(back)
    elif isinstance(v, Decimal) and v.is_nan():
        assert isinstance(back, Decimal) and back.is_nan()
    else:
        assert text_out(t, back) == text_out(t, v)
    assert encoder_for(t, True)(v) == expected
    assert encoder_for(t, False)(v) == text_out(t, v).encode()


@pytest.mark.parametrize(
    ("type_name", "data"),
    [
        ("int4", b"\x00\x01"), ("int8", b"\x00" * 9), ("bool", b""), ("uuid", b"\x00" * 15),
        ("numeric", b"\x00\x01\x00\x00\x00\x00\x00\x00"),
        ("numeric", b"\x00\x01\x00\x00\x00\x00\x00\x00\x27\x10"),
        ("numeric", b"\x00\x00\x00\x00\x12\x34\x00\x00"),
        ("interval", b"\x00" * 15), ("int4[]", b"\x00\x00\x00\x01\x00\x00"),
        ("int4[]", b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x17\x00\x00\x00\x02"
         b"\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x01"),
    ],
)  # fmt: skip
def test_malformed_binary_is_22p03(type_name: str, data: bytes) -> None:
    with pytest.raises(SqlError) as exc:
        binary_in(ty(type_name), data)
    assert exc.value.sqlstate == "22P03"


def test_decode_param_text_and_unknown_binary() -> None:
    assert decode_param(T.INT4, b" 42 ", False) == 42
    assert decode_param(T.UNKNOWN, b"abc", True) == "abc"
    assert decode_param(T.INT8, b"\x00" * 7 + b"\x05", True) == 5
    with pytest.raises(SqlError) as exc:
        decode_param(T.TEXT, b"\xff", False)
    assert exc.value.sqlstate == "22021"


# -- casts ------------------------------------------------------------------------------------

CAST_CASES: list[tuple[str, str, str]] = [
    ("numeric", "2.5", "int4"), ("numeric", "-2.5", "int4"), ("numeric", "3.5", "int2"),
    ("float8", "2.5", "int4"), ("float8", "3.5", "int4"), ("float8", "-2.5", "int8"),
    ("float4", "2.5", "int2"), ("float8", "0.5", "int4"), ("float8", "-0.5", "int4"),
    ("numeric", "123.456", "numeric(5,2)"), ("numeric", "3.7", "numeric(1,0)"),
    ("numeric", "-0.001", "numeric(4,2)"), ("numeric", "NaN", "numeric(4,2)"),
    ("float8", "0.1", "numeric"), ("float8", "0.3333333333333333", "numeric"),
    ("float4", "0.1", "numeric"), ("float8", "Infinity", "numeric"), ("float8", "NaN", "numeric"),
    ("float8", "1e20", "numeric"), ("float8", "123456789.123", "numeric"),
    ("numeric", "0.1", "float8"), ("numeric", "1.5", "float4"), ("float8", "1.1", "float4"),
    ("int4", "7", "numeric"), ("int8", "9007199254740993", "float8"),
    ("int4", "16777217", "float4"),
    ("int4", "-1", "oid"), ("oid", "4294967295", "int4"), ("int8", "5", "oid"),
    ("int4", "5", "bool"), ("int4", "0", "bool"), ("bool", "t", "int4"),
    ("bool", "t", "text"), ("bool", "f", "varchar"), ("int4", "42", "text"),
    ("float8", "1e20", "text"), ("numeric", "1.50", "text"), ("date", "2024-01-02", "text"),
    ("interval", "1 day 02:00", "text"), ("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "text"),
    ("bytea", "\\x61", "text"), ("text", "\\x6162", "bytea"), ("text", "ab", "bytea"),
    ("text", "abcdef", "varchar(3)"), ("text", "ab", "char(5)"), ("char(5)", "ab", "text"),
    ("char(5)", "ab", "varchar"), ("varchar", "abcdef", "char(3)"), ("text", "abc", '"char"'),
    ('"char"', "a", "int4"), ("int4", "65", '"char"'), ("text", "a" * 70, "name"),
    ("date", "2024-01-02", "timestamp"), ("date", "2024-01-02", "timestamptz"),
    ("timestamp", "2024-01-02 03:04:05", "date"), ("timestamptz", "2024-01-02 23:04:05-05", "date"),
    ("timestamp", "2024-01-02 03:04:05", "timestamptz"),
    ("timestamptz", "2024-01-02 03:04:05+02", "timestamp"),
    ("timestamp", "2024-01-02 03:04:05.5", "time"),
    ("timestamptz", "2024-01-02 03:04:05+02", "time"),
    ("time", "03:04:05", "interval"), ("interval", "1 day 03:04:05", "time"),
    ("interval", "-03:00:00", "time"),
    ("json", '{"b":1,"a":2}', "jsonb"), ("jsonb", '{"b":1,"a":2}', "json"),
    ("jsonb", "1.5", "int4"), ("jsonb", "1.5", "numeric"), ("jsonb", "true", "bool"),
    ("jsonb", "2.5", "float8"), ("text", " 12 ", "int4"), ("text", "1 day", "interval"),
    ("text", "{1,2}", "int4[]"), ("int4[]", "{1,2,NULL}", "text"), ("int4[]", "{1,2}", "int8[]"),
    ("numeric[]", "{1.5,2.5}", "int4[]"), ("text", "a0eebc999c0b4ef8bb6d6bb9bd380a11", "uuid"),
    ("int2", "5", "int8"), ("int8", "5", "int2"), ("float4", "1.1", "float8"),
    ("varchar(5)", "abc", "varchar(2)"), ("numeric(5,2)", "1.50", "numeric(3,1)"),
    ("name", "abc", "char(2)"),
]  # fmt: skip


@pytest.mark.parametrize(("src", "literal", "dst"), CAST_CASES)
def test_casts_match_postgres(pg: PG, src: str, literal: str, dst: str) -> None:
    expected = pg.val(f"SELECT ({lit(literal)}::{src}::{dst})::text")
    s, d = ty(src), ty(dst)
    got = cast(text_in(s, literal), s, d)
    expected_out = text_out(d, got)
    if d.id is T.TypeId.BOOL and not d.array:
        expected_out = "true" if got else "false"  # bool::text prints true/false
    if d.id is T.TypeId.BPCHAR and not d.array:
        expected_out = expected_out.rstrip(" ")  # char(n)::text drops the padding
    assert expected_out == expected


CAST_ERRORS: list[tuple[str, str, str]] = [
    ("int4", "70000", "int2"), ("int8", "3000000000", "int4"), ("numeric", "1e20", "int8"),
    ("float8", "1e10", "int4"), ("float8", "NaN", "int4"), ("numeric", "NaN", "int4"),
    ("numeric", "Infinity", "int8"), ("numeric", "123.456", "numeric(4,2)"),
    ("numeric", "Infinity", "numeric(5,2)"), ("numeric", "0.95", "numeric(1,1)"),
    ("float8", "1e300", "float4"), ("float8", "1e-300", "float4"), ("int8", "-1", "oid"),
    ("numeric", "1e39", "float4"), ("text", "abc", "int4"), ("text", "{1,x}", "int4[]"),
    ("jsonb", '{"a": 1}', "int4"), ("jsonb", '"x"', "numeric"), ("jsonb", "1", "bool"),
    ("int4", "1000", '"char"'), ("text", "\\xzz", "bytea"),
    ("date", "2024-01-02", "int4"), ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "bytea"),
    ("int4", "1", "date"), ("interval", "1 day", "int8"), ("bool", "t", "numeric"),
    ("float8", "1", "bool"), ("json", "1", "int4"), ("bytea", "\\x01", "uuid"),
    ("date", "2024-01-02", "time"), ("int4", "1", "interval"),
]  # fmt: skip


@pytest.mark.parametrize(("src", "literal", "dst"), CAST_ERRORS)
def test_cast_errors_match_postgres(pg: PG, src: str, literal: str, dst: str) -> None:
    exc = pg.error(f"SELECT ({lit(literal)}::{src}::{dst})::text")
    s, d = ty(src), ty(dst)
    with pytest.raises(SqlError) as ours:
        cast(text_in(s, literal), s, d)
    assert ours.value.sqlstate == exc.sqlstate, (ours.value.message, str(exc))
    if exc.sqlstate != "22P02":
        assert ours.value.message == exc.message
    if exc.sqlstate == "22003" and getattr(exc, "detail", None):
        assert ours.value.detail == exc.detail


ASSIGN_CASES: list[tuple[str, str, str]] = [
    ("varchar(3)", "text", "abcdef"), ("varchar(3)", "text", "ab     "),
    ("varchar(3)", "text", "abc"), ("char(3)", "text", "ab"), ("char(3)", "text", "abcd"),
    ("char(3)", "text", "abc   "), ("numeric(4,1)", "numeric", "123.45"),
    ("numeric(4,1)", "numeric", "1234.5"), ("int2", "int4", "40000"), ("int4", "numeric", "2.5"),
    ("int4", "float8", "2.5"), ("varchar(2)", "int4", "123"), ("text", "date", "2024-01-02"),
    ("varchar(5)", "bool", "t"), ("int4", "int8", "12"), ("char(2)", "varchar", "ab  "),
]  # fmt: skip


@pytest.mark.parametrize(("col", "src", "literal"), ASSIGN_CASES)
def test_assignment_matches_postgres(pg: PG, col: str, src: str, literal: str) -> None:
    try:
        pg.val("DROP TABLE IF EXISTS asg")
        pg.val(f"CREATE TEMP TABLE asg (c {col})")
        pg.val(f"INSERT INTO asg VALUES ({lit(literal)}::{src})")
        expected: object = pg.val("SELECT c::text FROM asg")
    except asyncpg.PostgresError as exc:
        expected = exc
    s, d = ty(src), ty(col)
    assert can_assign(s, d)
    if isinstance(expected, asyncpg.PostgresError):
        with pytest.raises(SqlError) as ours:
            cast(text_in(s, literal), s, d, explicit=False)
        assert ours.value.sqlstate == expected.sqlstate
        assert ours.value.message == expected.message
    else:
        got = cast(text_in(s, literal), s, d, explicit=False)
        out = text_out(d, got)
        assert (out.rstrip(" ") if d.id is T.TypeId.BPCHAR else out) == expected


def test_explicit_only_and_missing_casts() -> None:
    assert not can_assign(T.INT4, T.BOOL)
    assert not can_implicitly_cast(T.INT8, T.INT4) and can_assign(T.INT8, T.INT4)
    assert can_implicitly_cast(T.INT2, T.FLOAT8) and can_implicitly_cast(T.UNKNOWN, T.DATE)
    assert can_assign(T.DATE, T.TEXT) and not can_assign(T.TEXT, T.DATE)
    assert can_implicitly_cast(T.INT4.array_of(), T.INT8.array_of())
    with pytest.raises(SqlError) as exc:
        cast(1, T.INT4, T.DATE)
    assert exc.value.sqlstate == "42846"
    assert exc.value.message == "cannot cast type integer to date"
    with pytest.raises(SqlError) as exc:
        cast("pg_class", T.TEXT, T.REGCLASS)
    assert exc.value.sqlstate == "0A000"


def test_cast_table_matches_pg_cast(pg: PG) -> None:
    names = {t.id.oid: t for t in map(SqlType, T.TypeId)}
    rows = pg.loop.run_until_complete(
        pg.conn.fetch("SELECT castsource::int, casttarget::int, castcontext FROM pg_cast")
    )
    seen = 0
    for src_oid, dst_oid, ctx in rows:
        src, dst = names.get(src_oid), names.get(dst_oid)
        if src is None or dst is None or src.id in (T.TypeId.VOID, T.TypeId.RECORD):
            continue
        if src.id in (T.TypeId.INT2VECTOR, T.TypeId.OIDVECTOR):
            continue
        seen += 1
        assert cast_context(src, dst) == ctx.decode(), (src, dst)
        if src.id is not dst.id:
            assert (src.id, dst.id) in _PG_CAST
    assert seen > 90


COMMON_CASES: list[list[str]] = [
    ["int2", "int8"], ["int4", "numeric"], ["numeric", "float4"], ["int8", "float8"],
    ["unknown", "int4"], ["unknown", "unknown"], ["varchar", "text"], ["text", "varchar"],
    ["char(3)", "varchar"], ["date", "timestamp"], ["timestamp", "timestamptz"],
    ["date", "timestamptz"], ["int4", "text"], ["bool", "int4"], ["varchar(3)", "varchar(3)"],
    ["varchar(3)", "varchar(5)"], ["int4[]", "int8[]"], ["json", "jsonb"], ["int4", "oid"],
    ["float8", "numeric", "int4"], ["uuid", "text"], ["interval", "time"], ["name", "text"],
]  # fmt: skip


@pytest.mark.parametrize("names", COMMON_CASES)
def test_common_type_matches_postgres(pg: PG, names: list[str]) -> None:
    def null_of(n: str) -> str:
        return "NULL" if n == "unknown" else f"NULL::{n}"

    union = " UNION ALL ".join(f"SELECT {null_of(n)} AS x" for n in names)
    types = [ty(n) if n != "unknown" else T.UNKNOWN for n in names]
    try:
        pg.val("DROP VIEW IF EXISTS cv")
        pg.val(f"CREATE TEMP VIEW cv AS {union}")
        expected = pg.val(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'cv'::regclass AND attname = 'x'"
        )
    except asyncpg.PostgresError as exc:
        with pytest.raises(SqlError) as ours:
            common_type(types, "UNION")
        assert ours.value.sqlstate == exc.sqlstate
        assert ours.value.message == exc.message
        return
    assert common_type(types, "UNION").format() == expected


# -- ordering ---------------------------------------------------------------------------------

ORDER_CASES: list[tuple[str, list[str]]] = [
    ("float8", ["NaN", "1", "-Infinity", "Infinity", "-0", "0.5", "-2"]),
    ("numeric", ["NaN", "1.0", "-Infinity", "Infinity", "0", "0.50", "-2"]),
    ("char(4)", ["b", "a ", "a", "ab"]),
    ("text", ["b", "B", "é", "a", "ab", "", "z\u00ff", "\u4e2d"]),
    ("interval", ["1 mon", "29 days", "31 days", "1 day", "24:00:01", "-1 day"]),
    ("uuid", ["ffffffff-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001"]),
    ("jsonb", ['{"a": 1}', "[1, 2]", "[]", "null", '"a"', "1", "true", "[3]", '{"a": 1, "b": 2}']),
    ("int4[]", ["{1,2}", "{1}", "{1,NULL}", "{0,5}", "{}"]),
    ("bytea", ["\\x00", "\\x", "\\xff", "\\x0001"]),
]  # fmt: skip


@pytest.mark.parametrize(("type_name", "values"), ORDER_CASES)
def test_compare_key_orders_like_postgres(pg: PG, type_name: str, values: list[str]) -> None:
    expected = pg.val(
        f"SELECT array_agg(i ORDER BY v, i) FROM (SELECT i, ($1::text[])[i]::{type_name} AS v "
        f"FROM generate_subscripts($1::text[], 1) i) s",
        values,
    )
    t = ty(type_name)
    key = compare_key(t)
    ours = sorted(range(1, len(values) + 1), key=lambda i: (key(text_in(t, values[i - 1])), i))
    assert ours == expected


# -- storage and keys -------------------------------------------------------------------------

_dates = st.dates()
_datetimes = st.datetimes()
_aware = st.datetimes(timezones=st.just(dt.UTC))
_finite_decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None)
_STORE_STRATEGIES: list[tuple[SqlType, st.SearchStrategy[Any]]] = [
    (T.BOOL, st.booleans()),
    (T.INT2, st.integers(-(1 << 15), (1 << 15) - 1)),
    (T.INT4, st.integers(-(1 << 31), (1 << 31) - 1)),
    (T.INT8, st.integers(-(1 << 63), (1 << 63) - 1)),
    (T.OID, st.integers(0, (1 << 32) - 1)),
    (T.FLOAT8, st.floats(allow_nan=False)),
    (T.FLOAT4, st.floats(width=32, allow_nan=False)),
    (T.NUMERIC, st.decimals(allow_nan=False)),
    (T.TEXT, st.text()),
    (T.bpchar(5), st.text(max_size=5).map(lambda s: s.ljust(5))),
    (T.BYTEA, st.binary()),
    (T.DATE, _dates),
    (T.TIME, st.times()),
    (T.TIMESTAMP, _datetimes),
    (T.TIMESTAMPTZ, _aware),
    (T.INTERVAL, st.builds(Interval, st.integers(-(1 << 31), (1 << 31) - 1),
                           st.integers(-(1 << 31), (1 << 31) - 1),
                           st.integers(-(1 << 63), (1 << 63) - 1))),
    (T.UUID, st.uuids()),
    (T.JSONB, st.just('{"a": [1, 2.50]}')),
    (T.CHAR, st.characters(max_codepoint=255).map(str)),
    (T.INT4.array_of(), st.lists(st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1)))),
    (T.TEXT_ARRAY, st.lists(st.one_of(st.none(), st.text(max_size=300)))),
    (T.INT4.array_of(), st.lists(st.lists(st.integers(0, 9), min_size=2, max_size=2), min_size=1)),
    (T.INT2VECTOR, st.lists(st.integers(-(1 << 15), (1 << 15) - 1))),
    (T.OIDVECTOR, st.lists(st.integers(0, (1 << 32) - 1))),
]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_storage_round_trip(data: st.DataObject) -> None:
    for t, strategy in _STORE_STRATEGIES:
        v = data.draw(strategy)
        back = store_decode(t, store_encode(t, v))
        assert back == v and type(back) is type(v), (t, v, back)
        if isinstance(v, Decimal):
            assert str(back) == str(v)  # the scale survives


_KEY_STRATEGIES: list[tuple[SqlType, st.SearchStrategy[Any]]] = [
    (T.INT4, st.integers(-(1 << 31), (1 << 31) - 1)),
    (T.FLOAT8, st.floats(allow_nan=False)),
    (T.FLOAT4, st.floats(width=32, allow_nan=False)),
    (T.NUMERIC, _finite_decimals),
    (T.TEXT, st.text()),
    (T.bpchar(4), st.text(alphabet="ab ", max_size=4).map(lambda s: s.ljust(4))),
    (T.DATE, _dates),
    (T.TIME, st.times()),
    (T.TIMESTAMP, _datetimes),
    (T.TIMESTAMPTZ, _aware),
    (T.UUID, st.uuids()),
    (T.BYTEA, st.binary()),
    (T.BOOL, st.booleans()),
]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_key_values_order_like_values(data: st.DataObject) -> None:
    for t, strategy in _KEY_STRATEGIES:
        a, b = data.draw(strategy), data.draw(strategy)
        kt = key_type(t)
        assert kt is not None
        ka, kb = key_value(t, a), key_value(t, b)
        ea, eb = encode_key([kt], [ka]), encode_key([kt], [kb])
        sa, sb = compare_key(t)(a), compare_key(t)(b)
        assert (ea < eb) == (sa < sb) and (ea == eb) == (sa == sb), (t, a, b)
        back = from_key_value(t, ka)
        assert back == a or (t.id is T.TypeId.FLOAT4 and back == a), (t, a, back)


def test_key_value_shapes() -> None:
    assert key_value(T.DATE, dt.date(1970, 1, 2)) == 1
    assert key_value(T.TIMESTAMP, dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    assert key_value(T.TIME, dt.time(0, 0, 0, 5)) == 5
    assert key_value(T.bpchar(4), "ab  ") == "ab"
    assert from_key_value(T.bpchar(4), "ab") == "ab  "
    assert key_value(T.UUID, uuid.UUID(int=1)) == uuid.UUID(int=1)
    assert key_value(T.INT4, None) is None
