"""The bytes of one value stored in a cell, and the value of a key column.

Not the wire format: compact and fast. Fixed-width numbers and date/times are little-endian
structs, strings UTF-8, numeric its ``str(Decimal)`` (exact, keeps the scale), json/jsonb their
text, uuid its 16 bytes, arrays a small length-prefixed format. Integers are decoded by their
length, so a column widened from smallint to bigint still reads its old cells. NULL is never
stored: the caller deletes the cell.

:func:`encoder_for_store` / :func:`decoder_for` choose the per-value function once per type.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from functools import cache

from percolator.server.sql.types import EnumType, Interval, SqlType, TypeId

_h = struct.Struct("<h")
_i = struct.Struct("<i")
_q = struct.Struct("<q")
_I = struct.Struct("<I")
_f = struct.Struct("<f")
_d = struct.Struct("<d")
_IVL = struct.Struct("<qii")
_INT_BY_LEN = {2: _h.unpack, 4: _i.unpack, 8: _q.unpack}

_UNIX_ORDINAL = dt.date(1970, 1, 1).toordinal()
_UNIX = dt.datetime(1970, 1, 1)
_UNIX_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US_PER_DAY = 86_400_000_000

Encoder = Callable[[object], bytes]
Decoder = Callable[[bytes], object]


# -- scalars ----------------------------------------------------------------------------------


def _int_decoder(data: bytes) -> object:
    return _INT_BY_LEN[len(data)](data)[0]


def _float_decoder(data: bytes) -> object:
    return (_f if len(data) == 4 else _d).unpack(data)[0]


def _bool_enc(v: object) -> bytes:
    return b"\x01" if v else b"\x00"


def _bool_dec(data: bytes) -> object:
    return data == b"\x01"


def _text_enc(v: object) -> bytes:
    return v.encode()  # type: ignore[attr-defined]


def _text_dec(data: bytes) -> object:
    return bytes(data).decode()


def _bytes_enc(v: object) -> bytes:
    return bytes(v)  # type: ignore[call-overload]


def _char_enc(v: object) -> bytes:
    return v.encode("latin-1")  # type: ignore[attr-defined]


def _char_dec(data: bytes) -> object:
    return bytes(data).decode("latin-1")


def _numeric_enc(v: object) -> bytes:
    return str(v).encode()


def _numeric_dec(data: bytes) -> object:
    return Decimal(bytes(data).decode())


def date_days(d: dt.date) -> int:
    """Days since 1970-01-01."""
    return d.toordinal() - _UNIX_ORDINAL


def time_us(t: dt.time) -> int:
    """Microseconds since midnight."""
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def timestamp_us(ts: dt.datetime) -> int:
    """Microseconds since 1970-01-01 00:00 (UTC for an aware value)."""
    off = ts.utcoffset()
    if off:
        ts = ts - off
    return (ts.toordinal() - _UNIX_ORDINAL) * _US_PER_DAY + (
        ((ts.hour * 60 + ts.minute) * 60 + ts.second) * 1_000_000 + ts.microsecond
    )


def _time_of(us: int) -> dt.time:
    secs, micro = divmod(us, 1_000_000)
    mins, sec = divmod(secs, 60)
    hours, mins = divmod(mins, 60)
    return dt.time(hours, mins, sec, micro)


def _date_enc(v: object) -> bytes:
    return _i.pack(v.toordinal())  # type: ignore[attr-defined]


def _date_dec(data: bytes) -> object:
    return dt.date.fromordinal(_i.unpack(data)[0])


def _time_enc(v: object) -> bytes:
    return _q.pack(time_us(v))  # type: ignore[arg-type]


def _time_dec(data: bytes) -> object:
    return _time_of(_q.unpack(data)[0])


def _ts_enc(v: object) -> bytes:
    return _q.pack(timestamp_us(v))  # type: ignore[arg-type]


def _ts_dec(data: bytes) -> object:
    return _UNIX + dt.timedelta(microseconds=_q.unpack(data)[0])


def _tstz_dec(data: bytes) -> object:
    return _UNIX_TZ + dt.timedelta(microseconds=_q.unpack(data)[0])


def _interval_enc(v: object) -> bytes:
    iv: Interval = v  # type: ignore[assignment]
    return _IVL.pack(iv.microseconds, iv.days, iv.months)


def _interval_dec(data: bytes) -> object:
    us, days, months = _IVL.unpack(data)
    return Interval(months, days, us)


def _uuid_enc(v: object) -> bytes:
    return v.bytes  # type: ignore[attr-defined]


def _uuid_dec(data: bytes) -> object:
    return uuid.UUID(bytes=bytes(data))


def _vector_codec(code: str) -> tuple[Encoder, Decoder]:
    size = struct.calcsize("<" + code)

    def enc(v: object) -> bytes:
        items: list[int] = v  # type: ignore[assignment]
        return struct.pack(f"<{len(items)}{code}", *items)

    def dec(data: bytes) -> object:
        return list(struct.unpack(f"<{len(data) // size}{code}", data))

    return enc, dec


# -- arrays -----------------------------------------------------------------------------------
# One byte of dimension count, a uint32 per dimension, then the elements flattened: a length
# byte (0xFF for NULL, 0xFE for a uint32 length following) and the element's cell bytes.


def _array_codec(enc_elem: Encoder, dec_elem: Decoder) -> tuple[Encoder, Decoder]:
    def enc(v: object) -> bytes:
        items: list[object] = v  # type: ignore[assignment]
        dims = []
        level: object = items
        while isinstance(level, list):
            dims.append(len(level))
            level = level[0] if level else None
        if not items:
            return b"\x00"
        flat = items
        for _ in range(len(dims) - 1):
            flat = [e for sub in flat for e in sub]  # type: ignore[attr-defined]
        out = bytearray([len(dims)])
        for n in dims:
            out += _I.pack(n)
        for e in flat:
            if e is None:
                out.append(0xFF)
                continue
            b = enc_elem(e)
            if len(b) < 0xFE:
                out.append(len(b))
            else:
                out.append(0xFE)
                out += _I.pack(len(b))
            out += b
        return bytes(out)

    def dec(data: bytes) -> object:
        ndim = data[0]
        if ndim == 0:
            return []
        dims = [_I.unpack_from(data, 1 + 4 * k)[0] for k in range(ndim)]
        total = 1
        for n in dims:
            total *= n
        pos = 1 + 4 * ndim
        flat: list[object] = []
        append = flat.append
        for _ in range(total):
            size = data[pos]
            pos += 1
            if size == 0xFF:
                append(None)
                continue
            if size == 0xFE:
                size = _I.unpack_from(data, pos)[0]
                pos += 4
            append(dec_elem(data[pos : pos + size]))
            pos += size
        for n in reversed(dims[1:]):
            flat = [flat[k : k + n] for k in range(0, len(flat), n)]
        return flat

    return enc, dec


def _pack_enc(st: struct.Struct) -> Encoder:
    pack = st.pack

    def enc(v: object) -> bytes:
        return pack(v)

    return enc


_SCALAR: dict[TypeId, tuple[Encoder, Decoder]] = {
    TypeId.BOOL: (_bool_enc, _bool_dec),
    TypeId.BYTEA: (_bytes_enc, bytes),
    TypeId.CHAR: (_char_enc, _char_dec),
    TypeId.NAME: (_text_enc, _text_dec),
    TypeId.INT2: (_pack_enc(_h), _int_decoder),
    TypeId.INT4: (_pack_enc(_i), _int_decoder),
    TypeId.INT8: (_pack_enc(_q), _int_decoder),
    TypeId.OID: (_pack_enc(_I), lambda data: _I.unpack(data)[0]),
    TypeId.REGPROC: (_pack_enc(_I), lambda data: _I.unpack(data)[0]),
    TypeId.REGCLASS: (_pack_enc(_I), lambda data: _I.unpack(data)[0]),
    TypeId.REGTYPE: (_pack_enc(_I), lambda data: _I.unpack(data)[0]),
    TypeId.REGNAMESPACE: (_pack_enc(_I), lambda data: _I.unpack(data)[0]),
    TypeId.INT2VECTOR: _vector_codec("h"),
    TypeId.OIDVECTOR: _vector_codec("I"),
    TypeId.TEXT: (_text_enc, _text_dec),
    TypeId.VARCHAR: (_text_enc, _text_dec),
    TypeId.BPCHAR: (_text_enc, _text_dec),
    TypeId.UNKNOWN: (_text_enc, _text_dec),
    TypeId.JSON: (_text_enc, _text_dec),
    TypeId.JSONB: (_text_enc, _text_dec),
    TypeId.FLOAT4: (_pack_enc(_f), _float_decoder),
    TypeId.FLOAT8: (_pack_enc(_d), _float_decoder),
    TypeId.NUMERIC: (_numeric_enc, _numeric_dec),
    TypeId.DATE: (_date_enc, _date_dec),
    TypeId.TIME: (_time_enc, _time_dec),
    TypeId.TIMESTAMP: (_ts_enc, _ts_dec),
    TypeId.TIMESTAMPTZ: (_ts_enc, _tstz_dec),
    TypeId.INTERVAL: (_interval_enc, _interval_dec),
    TypeId.UUID: (_uuid_enc, _uuid_dec),
}


@cache
def _codec(t: SqlType) -> tuple[Encoder, Decoder]:
    if t.array:
        enc, dec = _codec(t.element)
        return _array_codec(enc, dec)
    if isinstance(t.id, EnumType):
        # The label's sort order (8 bytes): positions move under ADD VALUE BEFORE and labels
        # under RENAME VALUE, a label's sort order never changes.
        order, label = t.id.sort_order, t.id.label_of
        return (lambda v: _d.pack(order(v))), (lambda data: label(_d.unpack(data)[0]))
    try:
        return _SCALAR[t.id]
    except KeyError:
        raise TypeError(f"values of type {t} cannot be stored") from None


def encoder_for_store(t: SqlType) -> Encoder:
    """The function turning a non-NULL value of ``t`` into its cell bytes."""
    return _codec(t)[0]


def decoder_for(t: SqlType) -> Decoder:
    """The function reading a value of ``t`` from its cell bytes."""
    return _codec(t)[1]


def store_encode(t: SqlType, v: object) -> bytes:
    """The cell bytes of a non-NULL value of ``t``."""
    return _codec(t)[0](v)


def store_decode(t: SqlType, data: bytes) -> object:
    """The value of ``t`` stored as ``data``."""
    return _codec(t)[1](data)


# -- key columns ------------------------------------------------------------------------------


def _identity(v: object) -> object:
    return v


def _key_date(v: object) -> object:
    return v.toordinal() - _UNIX_ORDINAL  # type: ignore[attr-defined]


def _key_bpchar(v: object) -> object:
    return v.rstrip(" ")  # type: ignore[attr-defined]


def _key_float(v: object) -> object:
    return float(v)  # type: ignore[arg-type]


_TO_KEY: dict[TypeId, Callable[[object], object]] = {
    TypeId.DATE: _key_date,
    TypeId.TIME: time_us,  # type: ignore[dict-item]
    TypeId.TIMESTAMP: timestamp_us,  # type: ignore[dict-item]
    TypeId.TIMESTAMPTZ: timestamp_us,  # type: ignore[dict-item]
    TypeId.BPCHAR: _key_bpchar,
    TypeId.FLOAT4: _key_float,
    TypeId.FLOAT8: _key_float,
}


def _from_key_date(kv: object) -> object:
    return dt.date.fromordinal(kv + _UNIX_ORDINAL)  # type: ignore[operator]


def _from_key_time(kv: object) -> object:
    return _time_of(kv)  # type: ignore[arg-type]


def _from_key_ts(kv: object) -> object:
    return _UNIX + dt.timedelta(microseconds=kv)  # type: ignore[arg-type]


def _from_key_tstz(kv: object) -> object:
    return _UNIX_TZ + dt.timedelta(microseconds=kv)  # type: ignore[arg-type]


_FROM_KEY: dict[TypeId, Callable[[object], object]] = {
    TypeId.DATE: _from_key_date,
    TypeId.TIME: _from_key_time,
    TypeId.TIMESTAMP: _from_key_ts,
    TypeId.TIMESTAMPTZ: _from_key_tstz,
}


@cache
def key_value_fn(t: SqlType) -> Callable[[object], object]:
    """The per-value function of :func:`key_value` for ``t``, chosen once."""
    if isinstance(t.id, EnumType):
        return t.id.sort_order  # type: ignore[return-value]  # stable under ALTER TYPE
    return _TO_KEY.get(t.id, _identity)


@cache
def from_key_value_fn(t: SqlType) -> Callable[[object], object]:
    """The per-value function of :func:`from_key_value` for ``t``, chosen once."""
    if t.id is TypeId.BPCHAR and (n := t.length) is not None:
        return lambda kv: kv.ljust(n)  # type: ignore[attr-defined]
    if isinstance(t.id, EnumType):
        return t.id.label_of  # type: ignore[return-value]
    return _FROM_KEY.get(t.id, _identity)


def key_value(t: SqlType, v: object) -> object:
    """The value handed to ``keycodec.encode_key`` for a key column of type ``t``: dates as days
    and times/timestamps as microseconds since 1970 (ints order like the values), bpchar
    without its pad spaces (Postgres ignores them when comparing), floats as float."""
    if v is None:
        return None
    return key_value_fn(t)(v)


def from_key_value(t: SqlType, kv: object) -> object:
    """The inverse of :func:`key_value` (bpchar gets its pad spaces back)."""
    if kv is None:
        return None
    return from_key_value_fn(t)(kv)
