"""Parameter decoding and result encoding, through the type codecs of ``sql.binaryio``.

The codecs are imported on first use so the front end works before they exist; until then a
small fallback covers text format for every type and binary format for the basic scalars.
"""

from __future__ import annotations

import decimal
import functools
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    INVALID_BINARY_REPRESENTATION,
    INVALID_TEXT_REPRESENTATION,
    SqlError,
)
from percolator.server.sql.types import SqlType, TypeId

Encoder = Callable[[object], bytes]


@functools.cache
def _codecs() -> ModuleType | None:
    try:
        from percolator.server.sql import binaryio
    except ImportError:
        return None
    return binaryio


def decode_param(t: SqlType, data: bytes, binary: bool) -> object:
    """The Python value of one Bind parameter of type ``t`` (never called for NULL)."""
    codecs = _codecs()
    try:
        if codecs is not None:
            return codecs.decode_param(t, data, binary)
        return _fallback_decode(t, data, binary)
    except SqlError:
        raise
    except Exception as exc:
        if binary:
            raise SqlError(
                INVALID_BINARY_REPRESENTATION,
                f"incorrect binary data format in bind parameter of type {t}",
            ) from exc
        text = data.decode(errors="replace")
        raise SqlError(
            INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {t}: "{text}"'
        ) from exc


def encoder_for(t: SqlType, binary: bool) -> Encoder:
    """The function encoding non-NULL values of a result column of type ``t``."""
    codecs = _codecs()
    if codecs is not None:
        return codecs.encoder_for(t, binary)
    return _fallback_encoder(t, binary)


# ------------------------------------------------------------------------------------------
# Fallback codecs (used only until sql.binaryio exists)
# ------------------------------------------------------------------------------------------

_INTS = {TypeId.INT2: ">h", TypeId.INT4: ">i", TypeId.INT8: ">q", TypeId.OID: ">I"}
_FLOATS = {TypeId.FLOAT4: ">f", TypeId.FLOAT8: ">d"}
_STRINGS = {TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NAME, TypeId.UNKNOWN}
_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


def _fallback_decode(t: SqlType, data: bytes, binary: bool) -> object:
    if t.array:
        if binary:
            raise SqlError(FEATURE_NOT_SUPPORTED, f"binary format for type {t} is not supported")
        return data.decode()
    if binary:
        if t.id in _INTS:
            return struct.unpack(_INTS[t.id], data)[0]
        if t.id in _FLOATS:
            return struct.unpack(_FLOATS[t.id], data)[0]
        if t.id is TypeId.BOOL:
            return data != b"\0"
        if t.id is TypeId.BYTEA:
            return bytes(data)
        if t.id in _STRINGS:
            return data.decode()
        raise SqlError(FEATURE_NOT_SUPPORTED, f"binary format for type {t} is not supported")
    text = data.decode()
    if t.id in _INTS:
        return int(text)
    if t.id in _FLOATS:
        return float(text)
    if t.id is TypeId.NUMERIC:
        return decimal.Decimal(text)
    if t.id is TypeId.BOOL:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(text)
    if t.id is TypeId.BYTEA and text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    return text


def _text(value: Any) -> bytes:
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, bytes | bytearray):
        return b"\\x" + bytes(value).hex().encode()
    return str(value).encode()


def _fallback_encoder(t: SqlType, binary: bool) -> Encoder:
    if not binary:
        return _text
    if t.array:
        raise SqlError(FEATURE_NOT_SUPPORTED, f"binary format for type {t} is not supported")
    if t.id in _INTS:
        return struct.Struct(_INTS[t.id]).pack
    if t.id in _FLOATS:
        return struct.Struct(_FLOATS[t.id]).pack
    if t.id is TypeId.BOOL:
        return lambda v: b"\1" if v else b"\0"
    if t.id is TypeId.BYTEA:
        return bytes
    if t.id in _STRINGS:
        return lambda v: str(v).encode()
    raise SqlError(FEATURE_NOT_SUPPORTED, f"binary format for type {t} is not supported")
