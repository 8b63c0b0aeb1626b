"""The wire's binary format of each type, as Postgres's ``typsend`` / ``typreceive`` define it.

:func:`encoder_for` and :func:`decoder_for` choose the per-value function once per type (the
front end calls them once per column per portal); :func:`binary_out` / :func:`binary_in` are
conveniences over them. Malformed binary input raises 22P03.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from functools import cache

from percolator.server.sql.errors import (
    CHARACTER_NOT_IN_REPERTOIRE,
    DATATYPE_MISMATCH,
    INVALID_BINARY_REPRESENTATION,
    SqlError,
)
from percolator.server.sql.textio import (
    float_digits_reduced,
    normalize_jsonb,
    text_decoder,
    text_encoder,
)
from percolator.server.sql.types import EnumType, Interval, SqlType, TypeId

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_UI = struct.Struct(">I")
_F = struct.Struct(">f")
_D = struct.Struct(">d")
_NUMHDR = struct.Struct(">hhHH")
_IVL = struct.Struct(">qii")
_ARRHDR = struct.Struct(">iiI")
_DIM = struct.Struct(">ii")

_PG_EPOCH_ORDINAL = dt.date(2000, 1, 1).toordinal()
_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_TZ = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_US_PER_DAY = 86_400_000_000

_NUMERIC_POS = 0x0000
_NUMERIC_NEG = 0x4000
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF = 0xD000
_NUMERIC_NINF = 0xF000


def _bad(what: str = "incorrect binary data format") -> SqlError:
    return SqlError(INVALID_BINARY_REPRESENTATION, what)


# -- encoders ---------------------------------------------------------------------------------


def _bool_send(v: object) -> bytes:
    return b"\x01" if v else b"\x00"


def _bytes_send(v: object) -> bytes:
    return bytes(v)  # type: ignore[call-overload]


def _text_send(v: object) -> bytes:
    return v.encode()  # type: ignore[attr-defined]


def _char_send(v: object) -> bytes:
    s: str = v  # type: ignore[assignment]
    return bytes([ord(s[0]) & 0xFF]) if s else b""


def _jsonb_send(v: object) -> bytes:
    return b"\x01" + v.encode()  # type: ignore[attr-defined]


def _int2_send(v: object) -> bytes:
    return _H.pack(v)


def _int4_send(v: object) -> bytes:
    return _I.pack(v)


def _int8_send(v: object) -> bytes:
    return _Q.pack(v)


def _oid_send(v: object) -> bytes:
    return _UI.pack(v)


def _float4_send(v: object) -> bytes:
    return _F.pack(v)


def _float8_send(v: object) -> bytes:
    return _D.pack(v)


def numeric_send(v: object) -> bytes:
    """numeric_send: ndigits, weight, sign, dscale, then base-10000 digits."""
    d = v if isinstance(v, Decimal) else Decimal(v)  # type: ignore[arg-type]
    if not d.is_finite():
        if d.is_nan():
            return _NUMHDR.pack(0, 0, _NUMERIC_NAN, 0)
        # Postgres sends infinities with a display scale of 32 (what make_result leaves).
        return _NUMHDR.pack(0, 0, _NUMERIC_PINF if d > 0 else _NUMERIC_NINF, 32)
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    dscale = -exp if exp < 0 else 0
    coef = int("".join(map(str, digits)))
    if coef == 0:
        return _NUMHDR.pack(0, 0, _NUMERIC_POS, dscale)
    if exp > 0:
        coef *= 10**exp
        exp = 0
    pad = (-dscale) % 4  # align the fraction to whole base-10000 digits
    coef *= 10**pad
    frac_groups = (dscale + pad) // 4
    cs = str(coef)
    cs = "0" * ((-len(cs)) % 4) + cs
    groups = [int(cs[i : i + 4]) for i in range(0, len(cs), 4)]
    weight = len(groups) - frac_groups - 1
    while groups[-1] == 0:
        groups.pop()
    n = len(groups)
    head = _NUMHDR.pack(n, weight, _NUMERIC_NEG if sign else _NUMERIC_POS, dscale)
    return head + struct.pack(f">{n}H", *groups)


def _date_send(v: object) -> bytes:
    return _I.pack(v.toordinal() - _PG_EPOCH_ORDINAL)  # type: ignore[attr-defined]


def _time_us(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _time_send(v: object) -> bytes:
    return _Q.pack(_time_us(v))  # type: ignore[arg-type]


def _ts_us(ts: dt.datetime) -> int:
    days = ts.toordinal() - _PG_EPOCH_ORDINAL
    return days * _US_PER_DAY + (
        ((ts.hour * 60 + ts.minute) * 60 + ts.second) * 1_000_000 + ts.microsecond
    )


def _timestamp_send(v: object) -> bytes:
    return _Q.pack(_ts_us(v))  # type: ignore[arg-type]


def _timestamptz_send(v: object) -> bytes:
    ts: dt.datetime = v  # type: ignore[assignment]
    off = ts.utcoffset()
    if off:
        ts = ts - off
    return _Q.pack(_ts_us(ts))


def _interval_send(v: object) -> bytes:
    iv: Interval = v  # type: ignore[assignment]
    return _IVL.pack(iv.microseconds, iv.days, iv.months)


def _uuid_send(v: object) -> bytes:
    return v.bytes  # type: ignore[attr-defined]


def _array_encoder(
    elem: SqlType, elem_send: Callable[[object], bytes], lbound: int = 1
) -> Callable[[object], bytes]:
    elem_oid = elem.id.oid

    def send(v: object) -> bytes:
        items: list[object] = v  # type: ignore[assignment]
        if not items:
            return _ARRHDR.pack(0, 0, elem_oid)
        dims = []
        level: object = items
        while isinstance(level, list):
            dims.append(len(level))
            level = level[0] if level else None
        flat: list[object] = items
        for _ in range(len(dims) - 1):
            flat = [e for sub in flat for e in sub]  # type: ignore[attr-defined]
        out = [b""]
        has_null = 0
        for e in flat:
            if e is None:
                has_null = 1
                out.append(b"\xff\xff\xff\xff")
            else:
                b = elem_send(e)
                out.append(_I.pack(len(b)))
                out.append(b)
        out[0] = _ARRHDR.pack(len(dims), has_null, elem_oid) + b"".join(
            _DIM.pack(n, lbound) for n in dims
        )
        return b"".join(out)

    return send


_SEND: dict[TypeId, Callable[[object], bytes]] = {
    TypeId.BOOL: _bool_send,
    TypeId.BYTEA: _bytes_send,
    TypeId.CHAR: _char_send,
    TypeId.NAME: _text_send,
    TypeId.INT2: _int2_send,
    TypeId.INT4: _int4_send,
    TypeId.INT8: _int8_send,
    TypeId.OID: _oid_send,
    TypeId.REGPROC: _oid_send,
    TypeId.REGCLASS: _oid_send,
    TypeId.REGTYPE: _oid_send,
    TypeId.REGNAMESPACE: _oid_send,
    TypeId.TEXT: _text_send,
    TypeId.VARCHAR: _text_send,
    TypeId.BPCHAR: _text_send,
    TypeId.UNKNOWN: _text_send,
    TypeId.JSON: _text_send,
    TypeId.JSONB: _jsonb_send,
    TypeId.FLOAT4: _float4_send,
    TypeId.FLOAT8: _float8_send,
    TypeId.NUMERIC: numeric_send,
    TypeId.DATE: _date_send,
    TypeId.TIME: _time_send,
    TypeId.TIMESTAMP: _timestamp_send,
    TypeId.TIMESTAMPTZ: _timestamptz_send,
    TypeId.INTERVAL: _interval_send,
    TypeId.UUID: _uuid_send,
}

# int2vector and oidvector are sent as one-dimensional arrays of their element type.
_VECTOR_ELEM = {TypeId.INT2VECTOR: SqlType(TypeId.INT2), TypeId.OIDVECTOR: SqlType(TypeId.OID)}


@cache
def binary_encoder(t: SqlType) -> Callable[[object], bytes]:
    """The function sending non-NULL values of ``t`` in the binary format."""
    if t.array:
        return _array_encoder(t.element, binary_encoder(t.element))
    if t.id in _VECTOR_ELEM:
        elem = _VECTOR_ELEM[t.id]
        return _array_encoder(elem, binary_encoder(elem), lbound=0)  # vectors start at 0
    if t.id is TypeId.BPCHAR and t.length is not None:
        pad = text_encoder(t)
        return lambda v: pad(v).encode()
    if t.id is TypeId.RECORD and t.typmod >= 0:
        return _record_encoder(t)
    send = _SEND.get(t.id)
    if send is None:
        return _text_bytes_encoder(t)
    return send


def _record_encoder(t: SqlType) -> Callable[[object], bytes]:
    """record_send: the field count, then each field's type OID, length (-1 for NULL) and
    binary value."""
    from percolator.server.sql.set_functions import record_fields

    fields = [(ft.oid, binary_encoder(ft)) for _, ft in record_fields(t) or ()]
    count = _I.pack(len(fields))

    def send(v: object) -> bytes:
        parts = [count]
        for (oid, enc), f in zip(fields, v, strict=True):  # type: ignore[call-overload]
            if f is None:
                parts.append(_FIELD_HEAD.pack(oid, -1))
            else:
                data = enc(f)
                parts.append(_FIELD_HEAD.pack(oid, len(data)))
                parts.append(data)
        return b"".join(parts)

    return send


_FIELD_HEAD = struct.Struct(">Ii")


def _text_bytes_encoder(t: SqlType) -> Callable[[object], bytes]:
    out = text_encoder(t)

    def enc(v: object) -> bytes:
        return out(v).encode()

    return enc


def _int_text(v: object) -> bytes:
    return str(v).encode()


def encoder_for(t: SqlType, binary: bool) -> Callable[[object], bytes]:
    """The per-column encoder of non-NULL values: binary, or the text format as UTF-8."""
    if not binary and t.id in _FLOAT_IDS and float_digits_reduced():
        # The session's extra_float_digits <= 0: not the shared (cached) encoder.
        return _text_bytes_encoder(t)
    return _encoder_for(t, binary)


_FLOAT_IDS = frozenset({TypeId.FLOAT4, TypeId.FLOAT8})


@cache
def _encoder_for(t: SqlType, binary: bool) -> Callable[[object], bytes]:
    if binary:
        return binary_encoder(t)
    if not t.array and t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.OID):
        return _int_text
    if not t.array and t.id in (TypeId.TEXT, TypeId.VARCHAR, TypeId.NAME, TypeId.UNKNOWN):
        return _text_send
    if not t.array and t.id in (TypeId.JSON, TypeId.JSONB):
        return _text_send
    return _text_bytes_encoder(t)


def binary_out(t: SqlType, v: object) -> bytes:
    """A non-NULL value of ``t`` in the binary format."""
    return binary_encoder(t)(v)


# -- decoders ---------------------------------------------------------------------------------


def _fixed(st: struct.Struct) -> Callable[[bytes], object]:
    size = st.size
    unpack = st.unpack

    def recv(data: bytes) -> object:
        if len(data) != size:
            raise _bad()
        return unpack(data)[0]

    return recv


def _bool_recv(data: bytes) -> object:
    if len(data) != 1:
        raise _bad()
    return data[0] != 0


def _bytes_recv(data: bytes) -> object:
    return bytes(data)


def _utf8(data: bytes) -> str:
    try:
        return bytes(data).decode()
    except UnicodeDecodeError as exc:
        bad = bytes(data)[exc.start : exc.start + 1].hex()
        raise SqlError(
            CHARACTER_NOT_IN_REPERTOIRE, f'invalid byte sequence for encoding "UTF8": 0x{bad}'
        ) from None


def _text_recv(data: bytes) -> object:
    return _utf8(data)


def _char_recv(data: bytes) -> object:
    if len(data) > 1:
        raise _bad()
    return chr(data[0]) if data else ""


def _json_recv(data: bytes) -> object:
    return text_decoder(SqlType(TypeId.JSON))(_utf8(data))


def _jsonb_recv(data: bytes) -> object:
    if not data or data[0] != 1:
        raise SqlError(
            INVALID_BINARY_REPRESENTATION,
            f"unsupported jsonb version number {data[0] if data else 0}",
        )
    return normalize_jsonb(_utf8(data[1:]))


def numeric_recv(data: bytes) -> Decimal:
    """numeric_recv; digits beyond dscale are truncated away, as Postgres does."""
    if len(data) < 8:
        raise _bad()
    ndigits, weight, sign, dscale = _NUMHDR.unpack_from(data)
    if ndigits < 0 or len(data) != 8 + 2 * ndigits:
        raise _bad()
    if sign == _NUMERIC_NAN:
        return Decimal("NaN")
    if sign == _NUMERIC_PINF:
        return Decimal("Infinity")
    if sign == _NUMERIC_NINF:
        return Decimal("-Infinity")
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG):
        raise _bad('invalid sign in external "numeric" value')
    if dscale > 0x3FFF:
        raise _bad('invalid scale in external "numeric" value')
    digits = struct.unpack_from(f">{ndigits}H", data, 8)
    coef = 0
    for g in digits:
        if g >= 10000:
            raise _bad('invalid digit in external "numeric" value')
        coef = coef * 10000 + g
    exp = (weight - ndigits + 1) * 4
    if exp >= -dscale:
        coef *= 10 ** (exp + dscale)
    else:
        coef //= 10 ** (-dscale - exp)
    neg = "-" if sign == _NUMERIC_NEG and coef else ""
    return Decimal(f"{neg}{coef}E-{dscale}")


def _date_recv(data: bytes) -> object:
    if len(data) != 4:
        raise _bad()
    try:
        return dt.date.fromordinal(_I.unpack(data)[0] + _PG_EPOCH_ORDINAL)
    except (ValueError, OverflowError):
        raise SqlError("22008", "date out of range") from None


def _time_recv(data: bytes) -> object:
    if len(data) != 8:
        raise _bad()
    us = _Q.unpack(data)[0]
    if not 0 <= us < _US_PER_DAY:
        raise SqlError("22008", "time out of range")
    secs, micro = divmod(us, 1_000_000)
    mins, sec = divmod(secs, 60)
    hours, mins = divmod(mins, 60)
    return dt.time(hours, mins, sec, micro)


def _timestamp_recv(data: bytes) -> object:
    if len(data) != 8:
        raise _bad()
    try:
        return _PG_EPOCH + dt.timedelta(microseconds=_Q.unpack(data)[0])
    except OverflowError:
        raise SqlError("22008", "timestamp out of range") from None


def _timestamptz_recv(data: bytes) -> object:
    if len(data) != 8:
        raise _bad()
    try:
        return _PG_EPOCH_TZ + dt.timedelta(microseconds=_Q.unpack(data)[0])
    except OverflowError:
        raise SqlError("22008", "timestamp out of range") from None


def _interval_recv(data: bytes) -> object:
    if len(data) != 16:
        raise _bad()
    us, days, months = _IVL.unpack(data)
    return Interval(months, days, us)


def _uuid_recv(data: bytes) -> object:
    if len(data) != 16:
        raise _bad()
    return uuid.UUID(bytes=bytes(data))


def _array_decoder(
    elem: SqlType, elem_recv: Callable[[bytes], object]
) -> Callable[[bytes], object]:
    elem_oid = elem.id.oid

    def recv(data: bytes) -> object:
        mv = memoryview(data)
        try:
            ndim, _flags, oid = _ARRHDR.unpack_from(mv)
            if oid != elem_oid:
                raise SqlError(
                    DATATYPE_MISMATCH,
                    f"binary data has array element type {oid} instead of expected {elem_oid}",
                )
            if not 0 <= ndim <= 6:
                raise _bad(f"invalid number of dimensions: {ndim}")
            pos = 12
            dims = []
            for _ in range(ndim):
                n, _lbound = _DIM.unpack_from(mv, pos)
                if n < 0:
                    raise _bad()
                dims.append(n)
                pos += 8
            total = 1
            for n in dims:
                total *= n
            if ndim == 0:
                total = 0
            flat: list[object] = []
            for _ in range(total):
                (size,) = _I.unpack_from(mv, pos)
                pos += 4
                if size == -1:
                    flat.append(None)
                    continue
                if size < 0 or pos + size > len(mv):
                    raise _bad("insufficient data left in message")
                flat.append(elem_recv(bytes(mv[pos : pos + size])))
                pos += size
        except struct.error:
            raise _bad("insufficient data left in message") from None
        if pos != len(mv):
            raise _bad()
        for n in reversed(dims[1:]):
            flat = [flat[i : i + n] for i in range(0, len(flat), n)]
        return flat

    return recv


_RECV: dict[TypeId, Callable[[bytes], object]] = {
    TypeId.BOOL: _bool_recv,
    TypeId.BYTEA: _bytes_recv,
    TypeId.CHAR: _char_recv,
    TypeId.NAME: _text_recv,
    TypeId.INT2: _fixed(_H),
    TypeId.INT4: _fixed(_I),
    TypeId.INT8: _fixed(_Q),
    TypeId.OID: _fixed(_UI),
    TypeId.REGPROC: _fixed(_UI),
    TypeId.REGCLASS: _fixed(_UI),
    TypeId.REGTYPE: _fixed(_UI),
    TypeId.REGNAMESPACE: _fixed(_UI),
    TypeId.TEXT: _text_recv,
    TypeId.VARCHAR: _text_recv,
    TypeId.BPCHAR: _text_recv,
    TypeId.UNKNOWN: _text_recv,
    TypeId.JSON: _json_recv,
    TypeId.JSONB: _jsonb_recv,
    TypeId.FLOAT4: _fixed(_F),
    TypeId.FLOAT8: _fixed(_D),
    TypeId.NUMERIC: numeric_recv,
    TypeId.DATE: _date_recv,
    TypeId.TIME: _time_recv,
    TypeId.TIMESTAMP: _timestamp_recv,
    TypeId.TIMESTAMPTZ: _timestamptz_recv,
    TypeId.INTERVAL: _interval_recv,
    TypeId.UUID: _uuid_recv,
}


@cache
def binary_decoder(t: SqlType) -> Callable[[bytes], object]:
    """The function reading the binary format of ``t``."""
    if t.array:
        return _array_decoder(t.element, binary_decoder(t.element))
    if t.id in _VECTOR_ELEM:
        elem = _VECTOR_ELEM[t.id]
        return _array_decoder(elem, binary_decoder(elem))
    if isinstance(t.id, EnumType):
        parse = text_decoder(t)
        return lambda data: parse(_utf8(data))  # enum_recv: the label's bytes
    recv = _RECV.get(t.id)
    if recv is None:  # unknown, void, record: take the bytes as text
        return _text_recv
    return recv


def binary_in(t: SqlType, data: bytes) -> object:
    """A value of ``t`` from its binary format; 22P03 for malformed data."""
    return binary_decoder(t)(data)


def decode_param(t: SqlType, data: bytes, binary: bool) -> object:
    """A Bind parameter's value from its bytes in the given format."""
    if binary:
        return binary_decoder(t)(data)
    return text_decoder(t)(_utf8(data))


def decoder_for(t: SqlType, binary: bool) -> Callable[[bytes], object]:
    """The per-parameter decoder of ``decode_param``, chosen once."""
    if binary:
        return binary_decoder(t)
    parse = text_decoder(t)

    def dec(data: bytes) -> object:
        return parse(_utf8(data))

    return dec
