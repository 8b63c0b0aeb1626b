"""Row keys: byte order equals SQL order, and decoding inverts encoding."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from percolator.server.sql.keycodec import (
    KeyDecodeError,
    KeyType,
    decode_key,
    encode_key,
    prefix_successor,
)

VALUES = {
    KeyType.INT: st.integers(-(1 << 63), (1 << 63) - 1),
    KeyType.FLOAT: st.floats(allow_nan=True, allow_infinity=True),
    KeyType.BOOL: st.booleans(),
    KeyType.TEXT: st.text(),
    KeyType.BYTES: st.binary(),
    KeyType.NUMERIC: st.one_of(
        st.decimals(allow_nan=False, allow_infinity=True, places=None),
        st.just(Decimal("NaN")),
    ),
    KeyType.UUID: st.uuids(),
}


def sql_compare(kind: KeyType, a: object, b: object) -> int:
    """How Postgres orders two values of a key column (ASC NULLS LAST, C collation)."""
    if a is None or b is None:
        return (a is None) - (b is None)
    if kind == KeyType.FLOAT or kind == KeyType.NUMERIC:
        a_nan = a != a
        b_nan = b != b
        if a_nan or b_nan:
            return a_nan - b_nan
    if kind == KeyType.TEXT:
        a, b = a.encode(), b.encode()  # type: ignore[union-attr]
    if kind == KeyType.UUID:
        a, b = a.bytes, b.bytes  # type: ignore[union-attr]
    return (a > b) - (a < b)  # type: ignore[operator]


@st.composite
def key_pairs(draw: st.DrawFn) -> tuple[list[KeyType], list[object], list[object]]:
    types = draw(st.lists(st.sampled_from(list(KeyType)), min_size=1, max_size=3))

    def one() -> list[object]:
        return [draw(st.one_of(st.none(), VALUES[t])) for t in types]

    first = one()
    # Often share a prefix, so that later components decide the order.
    second = (
        first[: draw(st.integers(0, len(types)))] + one()[len(first) :]
        if draw(st.booleans())
        else one()
    )
    return types, first, second[: len(types)] + one()[len(second) :]


@settings(max_examples=800, deadline=None)
@given(key_pairs())
def test_byte_order_is_key_order(case: tuple[list[KeyType], list[object], list[object]]) -> None:
    types, a, b = case
    expected = 0
    for kind, x, y in zip(types, a, b, strict=True):
        expected = sql_compare(kind, x, y)
        if expected:
            break
    ea, eb = encode_key(types, a), encode_key(types, b)
    assert ((ea > eb) - (ea < eb)) == expected, (a, b)


def same(kind: KeyType, x: object, y: object) -> bool:
    if x is None or y is None:
        return x is y
    if kind == KeyType.FLOAT and math.isnan(x):  # type: ignore[arg-type]
        return math.isnan(y)  # type: ignore[arg-type]
    if kind == KeyType.NUMERIC and x.is_nan():  # type: ignore[union-attr]
        return y.is_nan()  # type: ignore[union-attr]
    return x == y


@settings(max_examples=500, deadline=None)
@given(key_pairs())
def test_decode_inverts_encode(case: tuple[list[KeyType], list[object], list[object]]) -> None:
    types, values, _ = case
    decoded = decode_key(types, encode_key(types, values))
    assert all(same(t, x, y) for t, x, y in zip(types, values, decoded, strict=True))


def test_examples_sort_like_postgres() -> None:
    keys = [
        (-5, "b"),
        (-5, "b\x00"),
        (-5, "ba"),
        (0, ""),
        (0, "a"),
        (7, None),
        (None, "a"),
    ]
    types = [KeyType.INT, KeyType.TEXT]
    encoded = [encode_key(types, k) for k in keys]
    assert encoded == sorted(encoded)
    floats = [-math.inf, -1.5, -0.0, 0.0, 2.0, math.inf, math.nan]
    enc = [encode_key([KeyType.FLOAT], [f]) for f in floats]
    assert enc == sorted(enc) and enc[2] == enc[3]
    nums = [
        "-Infinity",
        "-10",
        "-9.99",
        "-0.001",
        "0",
        "0.00",
        "1E-9",
        "1",
        "1.5",
        "10",
        "Infinity",
        "NaN",
    ]
    enc = [encode_key([KeyType.NUMERIC], [Decimal(n)]) for n in nums]
    assert enc == sorted(enc) and enc[4] == enc[5]


def test_prefix_scan_bounds() -> None:
    types = [KeyType.INT, KeyType.TEXT]
    prefix = encode_key([KeyType.INT], [42])
    end = prefix_successor(prefix)
    assert end is not None
    inside = [encode_key(types, [42, s]) for s in ("", "z" * 50, "\uffff")]
    inside.append(encode_key(types, [42, None]))
    assert all(prefix <= k < end for k in inside)
    assert not encode_key(types, [43, ""]) < end
    assert prefix_successor(b"\xff\xff") is None
    assert prefix_successor(b"a\xff") == b"b"


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(KeyDecodeError):
        decode_key([KeyType.INT], b"\x01\x00")
    with pytest.raises(KeyDecodeError):
        decode_key([KeyType.TEXT], b"\x01abc")
    with pytest.raises(KeyDecodeError):
        decode_key([KeyType.INT], encode_key([KeyType.INT], [1]) + b"x")
    with pytest.raises(TypeError):
        encode_key([KeyType.INT], ["1"])
    with pytest.raises(OverflowError):
        encode_key([KeyType.INT], [1 << 63])
    with pytest.raises(ValueError):
        encode_key([KeyType.INT, KeyType.INT], [1])
    assert decode_key([KeyType.UUID], encode_key([KeyType.UUID], [uuid.UUID(int=5)])) == (
        uuid.UUID(int=5),
    )
