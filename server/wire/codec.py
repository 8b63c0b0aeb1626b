"""Byte encoding of the PostgreSQL v3 protocol: backend messages out, frontend messages in.

Sans-IO: ``encode`` turns a backend message into the bytes to write, ``FrontendDecoder`` turns
whatever chunks the socket delivers into frontend messages. Every message after the startup
phase is ``type byte + int32 length (counting itself) + body``; the first packets of a
connection have no type byte and are told apart by the int32 code after the length.

Decoding never raises anything but ``ProtocolViolation``. A violation in the framing (unknown
type, impossible length, too large) is *fatal*: the byte stream can no longer be trusted, so the
server must send the error and close. A malformed body is not fatal, like Postgres' ERROR
"invalid message format": the message is skipped and the connection can go on (in the extended
protocol, by skipping to the next Sync).

Integers on the wire are big-endian. Counts of parameters, formats and columns are read as
unsigned 16-bit (Postgres accepts up to 65535 parameters); OIDs, the cancel key and the
BackendKeyData values are unsigned 32-bit.

``encode_frontend`` and ``BackendDecoder`` are the mirror images, for tests and test clients.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from percolator.server.wire.messages import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    SSL_REQUEST_CODE,
    AuthCode,
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendKeyData,
    BackendMessage,
    Bind,
    BindComplete,
    CancelRequest,
    Close,
    CloseComplete,
    CommandComplete,
    CopyData,
    CopyDone,
    CopyFail,
    CopyInResponse,
    CopyOutResponse,
    DataRow,
    Describe,
    EmptyQueryResponse,
    ErrorField,
    ErrorResponse,
    Execute,
    FieldDescription,
    Flush,
    FrontendMessage,
    GSSENCRequest,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
    NotificationResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    ParseComplete,
    PasswordMessage,
    PortalSuspended,
    Query,
    ReadyForQuery,
    RowDescription,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    TargetKind,
    Terminate,
    TransactionStatus,
)

DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024
# Postgres' MAX_STARTUP_PACKET_LENGTH: the first packet is small, so refuse early what is not.
DEFAULT_MAX_STARTUP_SIZE = 10_000

PROTOCOL_VIOLATION = "08P01"
PROGRAM_LIMIT_EXCEEDED = "54000"
FEATURE_NOT_SUPPORTED = "0A000"
CHARACTER_NOT_IN_REPERTOIRE = "22021"

_HEAD = struct.Struct(">ci")  # type byte, length
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I32_PAIR = struct.Struct(">ii")
_U32_PAIR = struct.Struct(">II")
_CANCEL = struct.Struct(">iiII")  # length, code, pid, secret
_DATA_ROW_HEAD = struct.Struct(">ciH")
_FIELD = struct.Struct(">IhIhih")  # table oid, attnum, type oid, size, typmod, format
_NULL_VALUE = _I32.pack(-1)


class ProtocolViolation(Exception):
    """The client broke the protocol; carries the SQLSTATE to report.

    ``fatal`` means the stream is out of step and the connection must be closed after reporting
    the error. ``messages`` holds the messages decoded by the same ``feed`` call before the bad
    one: the server handles them first, then the error.
    """

    def __init__(self, sqlstate: str, message: str, *, fatal: bool = True) -> None:
        super().__init__(sqlstate, message)
        self.sqlstate = sqlstate
        self.message = message
        self.fatal = fatal
        self.messages: tuple[FrontendMessage, ...] = ()

    def __str__(self) -> str:
        return f"{self.sqlstate}: {self.message}"

    def to_error_response(self) -> ErrorResponse:
        """The ErrorResponse to send: FATAL when the connection is to be closed, else ERROR."""
        return ErrorResponse("FATAL" if self.fatal else "ERROR", self.sqlstate, self.message)


def _malformed(what: str) -> ProtocolViolation:
    return ProtocolViolation(PROTOCOL_VIOLATION, f"invalid message format: {what}", fatal=False)


# --------------------------------------------------------------------------------------------
# Encoding backend messages
# --------------------------------------------------------------------------------------------


def _frame(type_byte: bytes, body: bytes) -> bytes:
    return _HEAD.pack(type_byte, len(body) + 4) + body


def _cstr(text: str) -> bytes:
    raw = text.encode()
    # A NUL inside would end the string early and desynchronise the client's parser.
    if b"\0" in raw:
        raise ValueError(f"protocol string contains NUL: {text!r}")
    return raw + b"\0"


def _empty(type_byte: bytes) -> bytes:
    return _HEAD.pack(type_byte, 4)


_PARSE_COMPLETE = _empty(b"1")
_BIND_COMPLETE = _empty(b"2")
_CLOSE_COMPLETE = _empty(b"3")
_NO_DATA = _empty(b"n")
_PORTAL_SUSPENDED = _empty(b"s")
_EMPTY_QUERY = _empty(b"I")
_COPY_DONE = _empty(b"c")
_READY = {status: _frame(b"Z", status.encode()) for status in TransactionStatus}
_AUTH_OK = _frame(b"R", _I32.pack(AuthCode.OK))
_AUTH_CLEARTEXT = _frame(b"R", _I32.pack(AuthCode.CLEARTEXT_PASSWORD))


def encode_data_row(values: Sequence[bytes | None]) -> bytes:
    """Encode a DataRow straight from its values (the hot path: no dataclass per row)."""
    pack_len = _I32.pack
    parts: list[bytes] = [b""]
    append = parts.append
    size = 6  # length field + column count
    for value in values:
        if value is None:
            append(_NULL_VALUE)
            size += 4
        else:
            n = len(value)
            append(pack_len(n))
            append(value)
            size += 4 + n
    parts[0] = _DATA_ROW_HEAD.pack(b"D", size, len(values))
    return b"".join(parts)


def encode_row_description(fields: Sequence[FieldDescription]) -> bytes:
    """Encode a RowDescription from its fields."""
    pack = _FIELD.pack
    body = b"".join(
        _cstr(f.name)
        + pack(f.table_oid, f.column_attr, f.type_oid, f.type_size, f.type_modifier, f.format)
        for f in fields
    )
    return _frame(b"T", _U16.pack(len(fields)) + body)


def _error_body(msg: ErrorResponse | NoticeResponse) -> bytes:
    # Postgres always sends both S (localised) and V (never localised); libpq reads V first.
    items: list[tuple[str, str]] = [
        (ErrorField.SEVERITY, msg.severity),
        (ErrorField.SEVERITY_NONLOCALIZED, msg.severity),
        (ErrorField.CODE, msg.code),
        (ErrorField.MESSAGE, msg.message),
    ]
    if msg.detail is not None:
        items.append((ErrorField.DETAIL, msg.detail))
    if msg.hint is not None:
        items.append((ErrorField.HINT, msg.hint))
    if msg.position is not None:
        items.append((ErrorField.POSITION, str(msg.position)))
    named = {code for code, _ in items}
    items.extend((code, value) for code, value in msg.fields.items() if code not in named)
    parts = []
    for code, value in items:
        if len(code) != 1 or code == "\0":
            raise ValueError(f"invalid error field code: {code!r}")
        # Error texts may quote client data; a NUL there must not break the framing.
        parts.append(code.encode() + value.replace("\0", "\\0").encode() + b"\0")
    parts.append(b"\0")
    return b"".join(parts)


def _encode_authentication_sasl(msg: AuthenticationSASL) -> bytes:
    names = b"".join(_cstr(name) for name in msg.mechanisms)
    return _frame(b"R", _I32.pack(AuthCode.SASL) + names + b"\0")


def _encode_md5(msg: AuthenticationMD5Password) -> bytes:
    if len(msg.salt) != 4:
        raise ValueError("MD5 salt must be 4 bytes")
    return _frame(b"R", _I32.pack(AuthCode.MD5_PASSWORD) + msg.salt)


def _encode_copy_response(type_byte: bytes, msg: CopyInResponse | CopyOutResponse) -> bytes:
    formats = msg.column_formats
    body = struct.pack(f">bH{len(formats)}h", msg.format, len(formats), *formats)
    return _frame(type_byte, body)


def _encode_negotiate(msg: NegotiateProtocolVersion) -> bytes:
    options = b"".join(_cstr(name) for name in msg.unrecognized_options)
    return _frame(b"v", _I32_PAIR.pack(msg.newest_minor, len(msg.unrecognized_options)) + options)


def _encode_parameter_description(msg: ParameterDescription) -> bytes:
    oids = msg.oids
    return _frame(b"t", struct.pack(f">H{len(oids)}I", len(oids), *oids))


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    DataRow: lambda m: encode_data_row(m.values),
    RowDescription: lambda m: encode_row_description(m.fields),
    CommandComplete: lambda m: _frame(b"C", _cstr(m.tag)),
    ReadyForQuery: lambda m: _READY[m.status],
    ParseComplete: lambda m: _PARSE_COMPLETE,
    BindComplete: lambda m: _BIND_COMPLETE,
    CloseComplete: lambda m: _CLOSE_COMPLETE,
    NoData: lambda m: _NO_DATA,
    PortalSuspended: lambda m: _PORTAL_SUSPENDED,
    EmptyQueryResponse: lambda m: _EMPTY_QUERY,
    ParameterDescription: _encode_parameter_description,
    ErrorResponse: lambda m: _frame(b"E", _error_body(m)),
    NoticeResponse: lambda m: _frame(b"N", _error_body(m)),
    NotificationResponse: lambda m: _frame(
        b"A", _I32.pack(m.pid) + _cstr(m.channel) + _cstr(m.payload)
    ),
    ParameterStatus: lambda m: _frame(b"S", _cstr(m.name) + _cstr(m.value)),
    BackendKeyData: lambda m: _frame(b"K", _U32_PAIR.pack(m.pid, m.secret)),
    AuthenticationOk: lambda m: _AUTH_OK,
    AuthenticationCleartextPassword: lambda m: _AUTH_CLEARTEXT,
    AuthenticationMD5Password: _encode_md5,
    AuthenticationSASL: _encode_authentication_sasl,
    AuthenticationSASLContinue: lambda m: _frame(b"R", _I32.pack(AuthCode.SASL_CONTINUE) + m.data),
    AuthenticationSASLFinal: lambda m: _frame(b"R", _I32.pack(AuthCode.SASL_FINAL) + m.data),
    CopyInResponse: lambda m: _encode_copy_response(b"G", m),
    CopyOutResponse: lambda m: _encode_copy_response(b"H", m),
    CopyData: lambda m: _frame(b"d", bytes(m.data)),
    CopyDone: lambda m: _COPY_DONE,
    NegotiateProtocolVersion: _encode_negotiate,
}


def encode(msg: BackendMessage) -> bytes:
    """The wire bytes of one backend message."""
    try:
        encoder = _ENCODERS[type(msg)]
    except KeyError:
        raise TypeError(f"not a backend message: {type(msg).__name__}") from None
    return encoder(msg)


def encode_all(msgs: Iterable[BackendMessage]) -> bytes:
    """The wire bytes of several backend messages, for one write."""
    return b"".join(encode(m) for m in msgs)


# --------------------------------------------------------------------------------------------
# Reading message bodies
# --------------------------------------------------------------------------------------------


def _utf8(raw: bytes, *, fatal: bool = False) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProtocolViolation(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8"', fatal=fatal
        ) from None


class _Reader:
    """Cursor over one message body; every overrun is a (non-fatal) ProtocolViolation."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise _malformed("insufficient data left in message")
        self.pos = start + n
        return start

    def cstring(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise _malformed("invalid string in message")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        return _utf8(raw)

    def byte(self) -> int:
        return self.data[self._take(1)]

    def int16(self) -> int:
        return _I16.unpack_from(self.data, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.data, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.data, self._take(4))[0]

    def array(self, code: str, size: int, count: int) -> tuple[int, ...]:
        start = self._take(size * count)
        return struct.unpack_from(f">{count}{code}", self.data, start)

    def raw(self, n: int) -> bytes:
        start = self._take(n)
        return self.data[start : self.pos]

    def rest(self) -> bytes:
        start = self.pos
        self.pos = len(self.data)
        return self.data[start:]

    def end(self) -> None:
        if self.pos != len(self.data):
            raise _malformed("unexpected data at end of message")


# --------------------------------------------------------------------------------------------
# Decoding frontend messages
# --------------------------------------------------------------------------------------------


def _target_kind(r: _Reader, what: str) -> TargetKind:
    kind = r.byte()
    if kind == 0x53:
        return TargetKind.STATEMENT
    if kind == 0x50:
        return TargetKind.PORTAL
    raise ProtocolViolation(
        PROTOCOL_VIOLATION, f"invalid {what} message subtype {kind}", fatal=False
    )


def _read_bind(r: _Reader) -> Bind:
    portal = r.cstring()
    statement = r.cstring()
    param_formats = r.array("h", 2, r.uint16())
    n_params = r.uint16()
    if len(param_formats) > 1 and len(param_formats) != n_params:
        raise ProtocolViolation(
            PROTOCOL_VIOLATION,
            f"bind message has {len(param_formats)} parameter formats but {n_params} parameters",
            fatal=False,
        )
    params: list[bytes | None] = []
    for _ in range(n_params):
        n = r.int32()
        if n == -1:
            params.append(None)
        else:
            params.append(r.raw(n))
    result_formats = r.array("h", 2, r.uint16())
    return Bind(portal, statement, param_formats, tuple(params), result_formats)


def _read_parse(r: _Reader) -> Parse:
    name = r.cstring()
    query = r.cstring()
    return Parse(name, query, r.array("I", 4, r.uint16()))


def _read_describe(r: _Reader) -> Describe:
    return Describe(_target_kind(r, "DESCRIBE"), r.cstring())


def _read_close(r: _Reader) -> Close:
    return Close(_target_kind(r, "CLOSE"), r.cstring())


def _read_execute(r: _Reader) -> Execute:
    portal = r.cstring()
    return Execute(portal, r.int32())


_SYNC, _FLUSH, _TERMINATE, _COPY_DONE_MSG = Sync(), Flush(), Terminate(), CopyDone()

# Readers by type byte; each must consume the whole body (checked by the caller).
_FRONTEND_READERS: dict[int, Callable[[_Reader], FrontendMessage]] = {
    ord("Q"): lambda r: Query(r.cstring()),
    ord("P"): _read_parse,
    ord("B"): _read_bind,
    ord("D"): _read_describe,
    ord("E"): _read_execute,
    ord("C"): _read_close,
    ord("S"): lambda r: _SYNC,
    ord("H"): lambda r: _FLUSH,
    ord("X"): lambda r: _TERMINATE,
    ord("p"): lambda r: PasswordMessage(r.rest()),
    ord("d"): lambda r: CopyData(r.rest()),
    ord("c"): lambda r: _COPY_DONE_MSG,
    ord("f"): lambda r: CopyFail(r.cstring()),
}


def _read_startup_params(body: bytes) -> dict[str, str]:
    params: dict[str, str] = {}
    start = 0
    while True:
        name_end = body.find(b"\0", start)
        if name_end < 0:
            break
        if name_end == start:  # the empty name is the list terminator
            if name_end == len(body) - 1:
                return params
            break
        value_end = body.find(b"\0", name_end + 1)
        if value_end < 0:
            break
        name = _utf8(body[start:name_end], fatal=True)
        params[name] = _utf8(body[name_end + 1 : value_end], fatal=True)
        start = value_end + 1
    raise ProtocolViolation(
        PROTOCOL_VIOLATION, "invalid startup packet layout: expected terminator as last byte"
    )


def _read_startup(packet: bytes) -> FrontendMessage:
    """Decode an untyped first packet (length already checked to be >= 8)."""
    length = len(packet)
    code = _I32.unpack_from(packet, 4)[0]
    if code == SSL_REQUEST_CODE or code == GSSENC_REQUEST_CODE:
        if length != 8:
            raise ProtocolViolation(PROTOCOL_VIOLATION, "invalid length of startup packet")
        return SSLRequest() if code == SSL_REQUEST_CODE else GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        if length != 16:
            raise ProtocolViolation(PROTOCOL_VIOLATION, "invalid length of cancel request")
        _, _, pid, secret = _CANCEL.unpack(packet)
        return CancelRequest(pid, secret)
    major, minor = code >> 16, code & 0xFFFF
    if major != 3:
        raise ProtocolViolation(
            FEATURE_NOT_SUPPORTED,
            f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0",
        )
    return StartupMessage(code, _read_startup_params(packet[8:]))


class FrontendDecoder:
    """Incremental decoder of what a client sends, from the first byte of the connection.

    ``feed`` accepts chunks of any size and returns the messages completed so far. The decoder
    starts in the untyped startup phase: SSLRequest and GSSENCRequest keep it there (a real
    startup packet follows the server's 'N'); StartupMessage moves it to typed messages;
    after a CancelRequest nothing more may arrive. When the server upgrades to TLS after an
    SSLRequest, anything already decoded after it or still ``buffered`` came in plaintext
    before the handshake and must be rejected.

    After a non-fatal ProtocolViolation the bad message has been consumed and messages may be
    left buffered: call ``feed(b"")`` to get them. After a fatal one every ``feed`` raises.
    """

    def __init__(
        self,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        *,
        max_startup_size: int = DEFAULT_MAX_STARTUP_SIZE,
        startup: bool = True,
    ) -> None:
        """``startup=False`` starts in the typed phase (for tests and for resumed streams)."""
        self.max_message_size = max_message_size
        self.max_startup_size = max_startup_size
        self._buf = bytearray()
        self._startup = startup
        self._cancelled = False
        self._failed: ProtocolViolation | None = None

    @property
    def in_startup(self) -> bool:
        """True until a StartupMessage has been decoded."""
        return self._startup

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete message."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[FrontendMessage]:
        """Add received bytes; return every message now complete, in order."""
        if self._failed is not None:
            raise ProtocolViolation(self._failed.sqlstate, self._failed.message)
        if data:
            self._buf += data
        out: list[FrontendMessage] = []
        pos = 0
        try:
            while True:
                frame = self._next_frame(pos)
                if frame is None:
                    break
                type_byte, start, pos = frame
                out.append(self._decode(type_byte, start, pos))
        except ProtocolViolation as exc:
            exc.messages = tuple(out)
            if exc.fatal:
                self._failed = exc
                self._buf.clear()
                pos = 0
            raise
        finally:
            if pos:
                del self._buf[:pos]
        return out

    def _next_frame(self, pos: int) -> tuple[int, int, int] | None:
        """(type byte or -1 if untyped, body start, end) of the next complete frame, or None."""
        buf = self._buf
        available = len(buf) - pos
        if available <= 0:
            return None
        if self._cancelled:
            raise ProtocolViolation(PROTOCOL_VIOLATION, "unexpected data after CancelRequest")
        if self._startup:
            if available < 4:
                return None
            length = _I32.unpack_from(buf, pos)[0]
            if length < 8 or length > self.max_startup_size:
                raise ProtocolViolation(PROTOCOL_VIOLATION, "invalid length of startup packet")
            if available < length:
                return None
            return -1, pos, pos + length
        type_byte = buf[pos]
        # Checked before the length arrives: garbage is refused at its first byte.
        if type_byte not in _FRONTEND_READERS:
            raise ProtocolViolation(
                PROTOCOL_VIOLATION, f"invalid frontend message type {type_byte}"
            )
        if available < 5:
            return None
        length = _I32.unpack_from(buf, pos + 1)[0]
        if length < 4:
            raise ProtocolViolation(PROTOCOL_VIOLATION, f"invalid message length {length}")
        if length > self.max_message_size:
            raise ProtocolViolation(
                PROGRAM_LIMIT_EXCEEDED,
                f"message of {length} bytes exceeds the limit of {self.max_message_size}",
            )
        if available < 1 + length:
            return None
        return type_byte, pos + 5, pos + 1 + length

    def _decode(self, type_byte: int, start: int, end: int) -> FrontendMessage:
        body = bytes(self._buf[start:end])
        if type_byte < 0:
            msg = _read_startup(body)
            if isinstance(msg, StartupMessage):
                self._startup = False
            elif isinstance(msg, CancelRequest):
                self._cancelled = True
            return msg
        reader = _Reader(body)
        try:
            msg = _FRONTEND_READERS[type_byte](reader)
        except (ValueError, IndexError, struct.error) as exc:
            # Safety net: the readers check bounds themselves, but the server must only ever
            # see ProtocolViolation from here, whatever the client sent.
            raise _malformed(str(exc)) from None
        reader.end()
        return msg

    @staticmethod
    def encode_frontend(msg: FrontendMessage) -> bytes:
        """The bytes a client would send for ``msg`` (see module-level ``encode_frontend``)."""
        return encode_frontend(msg)


# --------------------------------------------------------------------------------------------
# SASL reinterpretation of PasswordMessage
# --------------------------------------------------------------------------------------------


def parse_sasl_initial_response(msg: PasswordMessage) -> SASLInitialResponse:
    """Read a 'p' message as SASLInitialResponse: mechanism, int32 length (-1: none), data."""
    r = _Reader(msg.data)
    mechanism = r.cstring()
    n = r.int32()
    data = None if n == -1 else r.raw(n)
    r.end()
    return SASLInitialResponse(mechanism, data)


def parse_sasl_response(msg: PasswordMessage) -> SASLResponse:
    """Read a 'p' message as SASLResponse (the body is the mechanism's payload)."""
    return SASLResponse(msg.data)


def password_text(msg: PasswordMessage) -> str:
    """Read a 'p' message as a cleartext or MD5 password (a NUL-terminated string)."""
    r = _Reader(msg.data)
    password = r.cstring()
    r.end()
    return password


# --------------------------------------------------------------------------------------------
# Encoding frontend messages (tests, test clients)
# --------------------------------------------------------------------------------------------


def _encode_startup(msg: StartupMessage) -> bytes:
    body = _I32.pack(msg.protocol_version) + b"".join(
        _cstr(k) + _cstr(v) for k, v in msg.params.items()
    )
    body += b"\0"
    return _I32.pack(len(body) + 4) + body


def _encode_bind(msg: Bind) -> bytes:
    parts = [
        _cstr(msg.portal),
        _cstr(msg.statement),
        struct.pack(f">H{len(msg.param_formats)}h", len(msg.param_formats), *msg.param_formats),
        _U16.pack(len(msg.params)),
    ]
    for value in msg.params:
        parts.append(_NULL_VALUE if value is None else _I32.pack(len(value)) + value)
    formats = msg.result_formats
    parts.append(struct.pack(f">H{len(formats)}h", len(formats), *formats))
    return _frame(b"B", b"".join(parts))


def _encode_parse(msg: Parse) -> bytes:
    types = msg.param_types
    body = _cstr(msg.name) + _cstr(msg.query) + struct.pack(f">H{len(types)}I", len(types), *types)
    return _frame(b"P", body)


def _encode_sasl_initial(msg: SASLInitialResponse) -> bytes:
    data = _NULL_VALUE if msg.data is None else _I32.pack(len(msg.data)) + msg.data
    return _frame(b"p", _cstr(msg.mechanism) + data)


_FRONTEND_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    StartupMessage: _encode_startup,
    SSLRequest: lambda m: _I32_PAIR.pack(8, SSL_REQUEST_CODE),
    GSSENCRequest: lambda m: _I32_PAIR.pack(8, GSSENC_REQUEST_CODE),
    CancelRequest: lambda m: _CANCEL.pack(16, CANCEL_REQUEST_CODE, m.pid, m.secret),
    PasswordMessage: lambda m: _frame(b"p", bytes(m.data)),
    SASLInitialResponse: _encode_sasl_initial,
    SASLResponse: lambda m: _frame(b"p", bytes(m.data)),
    Query: lambda m: _frame(b"Q", _cstr(m.sql)),
    Parse: _encode_parse,
    Bind: _encode_bind,
    Describe: lambda m: _frame(b"D", m.kind.encode() + _cstr(m.name)),
    Execute: lambda m: _frame(b"E", _cstr(m.portal) + _I32.pack(m.max_rows)),
    Close: lambda m: _frame(b"C", m.kind.encode() + _cstr(m.name)),
    Sync: lambda m: _empty(b"S"),
    Flush: lambda m: _empty(b"H"),
    Terminate: lambda m: _empty(b"X"),
    CopyData: lambda m: _frame(b"d", bytes(m.data)),
    CopyDone: lambda m: _COPY_DONE,
    CopyFail: lambda m: _frame(b"f", _cstr(m.message)),
}


def encode_frontend(msg: FrontendMessage) -> bytes:
    """The bytes a client sends for ``msg``; the mirror image of ``FrontendDecoder``."""
    try:
        encoder = _FRONTEND_ENCODERS[type(msg)]
    except KeyError:
        raise TypeError(f"not a frontend message: {type(msg).__name__}") from None
    return encoder(msg)


# --------------------------------------------------------------------------------------------
# Decoding backend messages (tests, test clients)
# --------------------------------------------------------------------------------------------


def _read_authentication(r: _Reader) -> BackendMessage:
    code = r.int32()
    if code == AuthCode.OK:
        return AuthenticationOk()
    if code == AuthCode.CLEARTEXT_PASSWORD:
        return AuthenticationCleartextPassword()
    if code == AuthCode.MD5_PASSWORD:
        return AuthenticationMD5Password(r.raw(4))
    if code == AuthCode.SASL:
        names = []
        while (name := r.cstring()) != "":
            names.append(name)
        return AuthenticationSASL(tuple(names))
    if code == AuthCode.SASL_CONTINUE:
        return AuthenticationSASLContinue(r.rest())
    if code == AuthCode.SASL_FINAL:
        return AuthenticationSASLFinal(r.rest())
    raise _malformed(f"unsupported authentication code {code}")


def _read_error_fields(r: _Reader, cls: type[ErrorResponse] | type[NoticeResponse]) -> Any:
    fields: dict[str, str] = {}
    while (code := r.byte()) != 0:
        fields[chr(code)] = r.cstring()
    severity = fields.pop(ErrorField.SEVERITY_NONLOCALIZED, None)
    localized = fields.pop(ErrorField.SEVERITY, "")
    position = fields.pop(ErrorField.POSITION, None)
    if position is not None and not position.isdigit():
        fields[ErrorField.POSITION] = position  # keep what cannot be an int as it came
        position = None
    return cls(
        severity=severity if severity is not None else localized,
        code=fields.pop(ErrorField.CODE, ""),
        message=fields.pop(ErrorField.MESSAGE, ""),
        detail=fields.pop(ErrorField.DETAIL, None),
        hint=fields.pop(ErrorField.HINT, None),
        position=None if position is None else int(position),
        fields=fields,
    )


def _read_row_description(r: _Reader) -> RowDescription:
    fields = []
    for _ in range(r.uint16()):
        name = r.cstring()
        start = r._take(_FIELD.size)
        fields.append(FieldDescription(name, *_FIELD.unpack_from(r.data, start)))
    return RowDescription(tuple(fields))


def _read_data_row(r: _Reader) -> DataRow:
    values: list[bytes | None] = []
    for _ in range(r.uint16()):
        n = r.int32()
        values.append(None if n == -1 else r.raw(n))
    return DataRow(tuple(values))


def _read_copy_response(r: _Reader, cls: type[CopyInResponse] | type[CopyOutResponse]) -> Any:
    overall = r.byte()
    return cls(overall, r.array("h", 2, r.uint16()))


def _read_negotiate(r: _Reader) -> NegotiateProtocolVersion:
    minor = r.int32()
    count = r.int32()
    return NegotiateProtocolVersion(minor, tuple(r.cstring() for _ in range(max(count, 0))))


_BACKEND_READERS: dict[int, Callable[[_Reader], BackendMessage]] = {
    ord("R"): _read_authentication,
    ord("S"): lambda r: ParameterStatus(r.cstring(), r.cstring()),
    ord("K"): lambda r: BackendKeyData(r.uint32(), r.uint32()),
    ord("Z"): lambda r: ReadyForQuery(TransactionStatus(chr(r.byte()))),
    ord("T"): _read_row_description,
    ord("D"): _read_data_row,
    ord("C"): lambda r: CommandComplete(r.cstring()),
    ord("I"): lambda r: EmptyQueryResponse(),
    ord("E"): lambda r: _read_error_fields(r, ErrorResponse),
    ord("N"): lambda r: _read_error_fields(r, NoticeResponse),
    ord("A"): lambda r: NotificationResponse(r.int32(), r.cstring(), r.cstring()),
    ord("1"): lambda r: ParseComplete(),
    ord("2"): lambda r: BindComplete(),
    ord("3"): lambda r: CloseComplete(),
    ord("n"): lambda r: NoData(),
    ord("t"): lambda r: ParameterDescription(r.array("I", 4, r.uint16())),
    ord("s"): lambda r: PortalSuspended(),
    ord("G"): lambda r: _read_copy_response(r, CopyInResponse),
    ord("H"): lambda r: _read_copy_response(r, CopyOutResponse),
    ord("d"): lambda r: CopyData(r.rest()),
    ord("c"): lambda r: CopyDone(),
    ord("v"): _read_negotiate,
}


class BackendDecoder:
    """Incremental decoder of what a server sends (typed messages only), for test clients.

    The single-byte answers to SSLRequest/GSSENCRequest are not messages; a client reads them
    itself before feeding this decoder.
    """

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """Create a decoder refusing messages longer than ``max_message_size`` bytes."""
        self.max_message_size = max_message_size
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[BackendMessage]:
        """Add received bytes; return every message now complete, in order."""
        self._buf += data
        buf = self._buf
        out: list[BackendMessage] = []
        pos = 0
        try:
            while len(buf) - pos >= 5:
                type_byte = buf[pos]
                length = _I32.unpack_from(buf, pos + 1)[0]
                reader_fn = _BACKEND_READERS.get(type_byte)
                if reader_fn is None or length < 4 or length > self.max_message_size:
                    raise ProtocolViolation(PROTOCOL_VIOLATION, f"bad backend frame {type_byte}")
                if len(buf) - pos < 1 + length:
                    break
                reader = _Reader(bytes(buf[pos + 5 : pos + 1 + length]))
                pos += 1 + length
                try:
                    msg = reader_fn(reader)
                except ValueError:  # e.g. an unknown transaction status byte
                    raise _malformed("invalid value") from None
                reader.end()
                out.append(msg)
        finally:
            del buf[:pos]
        return out
