"""Memcomparable encoding of row keys: byte order equals key order (DESIGN.md §3).

A primary key or index key is a tuple of typed values; its encoding is the concatenation of
each component's encoding, and comparing two encodings with ``<`` on bytes orders them as the
tuples order in SQL, so a range of keys is a range of bytes and a prefix scan is a byte-prefix
scan. Every component starts with a tag byte so that NULL sorts after every value, as in
Postgres's default ``ASC NULLS LAST``.

Per type (after the tag):

- integers (also dates as days and timestamps as microseconds): 8 bytes big-endian with the
  sign bit flipped;
- floats: the IEEE-754 bits, sign bit flipped for positives and every bit inverted for
  negatives; -0.0 is encoded as 0.0 and every NaN as one NaN that sorts above +inf (Postgres);
- booleans: one byte;
- text (UTF-8, so the order is the "C" collation) and bytes: 0x00 escaped as 0x00 0xFF, then the
  terminator 0x00 0x01, so a prefix sorts before its extensions;
- numeric: a class byte (-inf, negative, zero, positive, +inf, NaN), then for non-zero finite
  values the decimal exponent and the digits, inverted for negatives, so magnitudes order right;
- uuid: the 16 bytes (Postgres orders uuids by their bytes too).
"""

from __future__ import annotations

import math
import struct
import uuid
from collections.abc import Sequence
from decimal import Decimal
from enum import Enum

_VALUE = 0x01
VALUE_TAG = _VALUE
"""The byte before each non-NULL value of a key (bulk decoders check it)."""
_NULL = 0x02

_INT = struct.Struct(">Q")
_FLOAT = struct.Struct(">Q")
_DOUBLE = struct.Struct(">d")
_SIGN = 1 << 63

# numeric class bytes, in order
_NUM_NEG_INF, _NUM_NEG, _NUM_ZERO, _NUM_POS, _NUM_POS_INF, _NUM_NAN = range(6)
_EXP_BIAS = 1 << 31


class KeyType(Enum):
    """How a key component is encoded; the SQL layer maps its column types onto these."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    TEXT = "text"
    BYTES = "bytes"
    NUMERIC = "numeric"
    UUID = "uuid"


class KeyDecodeError(ValueError):
    """Bytes that are not a key of the given types."""


def encode_key(types: Sequence[KeyType], values: Sequence[object]) -> bytes:
    """Encode a tuple of values (None for NULL) of the given types."""
    if len(types) != len(values):
        raise ValueError(f"{len(values)} values for a key of {len(types)} columns")
    out = bytearray()
    for kind, value in zip(types, values, strict=True):
        if value is None:
            out.append(_NULL)
        else:
            out.append(_VALUE)
            _ENCODERS[kind](out, value)
    return bytes(out)


def decode_key(types: Sequence[KeyType], data: bytes) -> tuple[object, ...]:
    """The values of an encoded key; raises KeyDecodeError if ``data`` is not one."""
    values: list[object] = []
    pos = 0
    try:
        for kind in types:
            tag = data[pos]
            pos += 1
            if tag == _NULL:
                values.append(None)
            elif tag == _VALUE:
                value, pos = _DECODERS[kind](data, pos)
                values.append(value)
            else:
                raise KeyDecodeError(f"bad tag {tag:#x} at byte {pos - 1}")
    except (IndexError, struct.error, ValueError) as exc:
        if isinstance(exc, KeyDecodeError):
            raise
        raise KeyDecodeError(f"truncated or malformed key: {exc}") from None
    if pos != len(data):
        raise KeyDecodeError(f"{len(data) - pos} trailing bytes after the key")
    return tuple(values)


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix`` (the end
    of a prefix scan), or None when there is none (the prefix is all 0xFF)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


# -- encoders ---------------------------------------------------------------------------------


def _enc_int(out: bytearray, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"integer key expected, got {type(v).__name__}")
    if not -(1 << 63) <= v < (1 << 63):
        raise OverflowError(f"integer key {v} out of 64-bit range")
    out += _INT.pack((v + _SIGN) & 0xFFFF_FFFF_FFFF_FFFF)


def _enc_float(out: bytearray, v: object) -> None:
    f = float(v)  # type: ignore[arg-type]
    if math.isnan(f):
        bits = 0xFFF8_0000_0000_0000  # canonical NaN, above +inf once flipped
    else:
        (bits,) = _FLOAT.unpack(_DOUBLE.pack(f + 0.0))  # + 0.0 turns -0.0 into 0.0
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits & _SIGN and not math.isnan(f) else bits | _SIGN
    out += _FLOAT.pack(bits)


def _enc_bool(out: bytearray, v: object) -> None:
    if not isinstance(v, bool):
        raise TypeError(f"boolean key expected, got {type(v).__name__}")
    out.append(1 if v else 0)


def _enc_bytes(out: bytearray, v: object) -> None:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise TypeError(f"bytes key expected, got {type(v).__name__}")
    out += bytes(v).replace(b"\x00", b"\x00\xff")
    out += b"\x00\x01"


def _enc_text(out: bytearray, v: object) -> None:
    if not isinstance(v, str):
        raise TypeError(f"text key expected, got {type(v).__name__}")
    # The bytes encoding inlined: text keys are the most common, encoded for every row read.
    out += v.encode().replace(b"\x00", b"\x00\xff")
    out += b"\x00\x01"


def _enc_numeric(out: bytearray, v: object) -> None:
    d = v if isinstance(v, Decimal) else Decimal(v)  # type: ignore[arg-type]
    if d.is_nan():
        out.append(_NUM_NAN)
        return
    if d.is_infinite():
        out.append(_NUM_POS_INF if d > 0 else _NUM_NEG_INF)
        return
    if d.is_zero():
        out.append(_NUM_ZERO)
        return
    # Not normalize(): it rounds to the context's precision, and numeric keys must be exact.
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    while digits[-1] == 0:
        digits, exponent = digits[:-1], exponent + 1
    while digits[0] == 0:
        digits = digits[1:]
    # value = 0.d1d2...dn x 10**e with d1 != 0: e orders magnitudes, then the digits do.
    e = exponent + len(digits)
    body = _INT.pack(e + _EXP_BIAS)[4:] + bytes(dig + 1 for dig in digits) + b"\x00"
    if sign:
        out.append(_NUM_NEG)
        out += bytes(0xFF - b for b in body)
    else:
        out.append(_NUM_POS)
        out += body


def _enc_uuid(out: bytearray, v: object) -> None:
    u = v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))
    out += u.bytes


_ENCODERS = {
    KeyType.INT: _enc_int,
    KeyType.FLOAT: _enc_float,
    KeyType.BOOL: _enc_bool,
    KeyType.TEXT: _enc_text,
    KeyType.BYTES: _enc_bytes,
    KeyType.NUMERIC: _enc_numeric,
    KeyType.UUID: _enc_uuid,
}


# -- decoders ---------------------------------------------------------------------------------


def _dec_int(data: bytes, pos: int) -> tuple[object, int]:
    (raw,) = _INT.unpack_from(data, pos)
    return raw - _SIGN, pos + 8


def _dec_float(data: bytes, pos: int) -> tuple[object, int]:
    (bits,) = _FLOAT.unpack_from(data, pos)
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    (f,) = _DOUBLE.unpack(_FLOAT.pack(bits))
    return f, pos + 8


def _dec_bool(data: bytes, pos: int) -> tuple[object, int]:
    b = data[pos]
    if b > 1:
        raise KeyDecodeError(f"bad boolean byte {b:#x}")
    return b == 1, pos + 1


def _dec_bytes(data: bytes, pos: int) -> tuple[object, int]:
    out = bytearray()
    while True:
        end = data.index(b"\x00", pos)
        out += data[pos:end]
        marker = data[end + 1]
        if marker == 0x01:
            return bytes(out), end + 2
        if marker != 0xFF:
            raise KeyDecodeError(f"bad escape {marker:#x} in a string key")
        out.append(0)
        pos = end + 2


def _dec_text(data: bytes, pos: int) -> tuple[object, int]:
    raw, pos = _dec_bytes(data, pos)
    assert isinstance(raw, bytes)
    return raw.decode(), pos


def _dec_numeric(data: bytes, pos: int) -> tuple[object, int]:
    cls = data[pos]
    pos += 1
    special = {_NUM_NAN: "NaN", _NUM_POS_INF: "Infinity", _NUM_NEG_INF: "-Infinity", _NUM_ZERO: "0"}
    if cls in special:
        return Decimal(special[cls]), pos
    if cls not in (_NUM_POS, _NUM_NEG):
        raise KeyDecodeError(f"bad numeric class {cls:#x}")
    flip = (lambda b: 0xFF - b) if cls == _NUM_NEG else (lambda b: b)
    e = int.from_bytes(bytes(flip(b) for b in data[pos : pos + 4]), "big") - _EXP_BIAS
    pos += 4
    digits = []
    while (b := flip(data[pos])) != 0:
        digits.append(b - 1)
        pos += 1
    return Decimal((1 if cls == _NUM_NEG else 0, tuple(digits), e - len(digits))), pos + 1


def _dec_uuid(data: bytes, pos: int) -> tuple[object, int]:
    if pos + 16 > len(data):
        raise KeyDecodeError("truncated uuid key")
    return uuid.UUID(bytes=bytes(data[pos : pos + 16])), pos + 16


_DECODERS = {
    KeyType.INT: _dec_int,
    KeyType.FLOAT: _dec_float,
    KeyType.BOOL: _dec_bool,
    KeyType.TEXT: _dec_text,
    KeyType.BYTES: _dec_bytes,
    KeyType.NUMERIC: _dec_numeric,
    KeyType.UUID: _dec_uuid,
}
