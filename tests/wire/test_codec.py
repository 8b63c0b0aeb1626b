"""Wire codec: round trips, fragmentation, startup packets, byte-exact backend encodings
(checked against the Postgres 15 traces in /work/shared/reference/wire-traces) and malformed
input, which must only ever raise ProtocolViolation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from percolator.server.wire.codec import (
    DEFAULT_MAX_MESSAGE_SIZE,
    BackendDecoder,
    FrontendDecoder,
    ProtocolViolation,
    encode,
    encode_all,
    encode_data_row,
    encode_frontend,
    parse_sasl_initial_response,
    parse_sasl_response,
    password_text,
)
from percolator.server.wire.messages import (
    PROTOCOL_3_0,
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendKeyData,
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
    ErrorResponse,
    Execute,
    FieldDescription,
    Flush,
    GSSENCRequest,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
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

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(FAST, max_examples=300)

# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

# Protocol strings: any text without NUL (the terminator) or lone surrogates (not UTF-8).
names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
uint32 = st.integers(0, (1 << 32) - 1)
values = st.one_of(st.none(), st.binary(max_size=20))
kinds = st.sampled_from([TargetKind.STATEMENT, TargetKind.PORTAL])


@st.composite
def binds(draw: st.DrawFn) -> Bind:
    params = tuple(draw(st.lists(values, max_size=5)))
    n_formats = draw(st.sampled_from(sorted({0, 1, len(params)})))
    formats = tuple(draw(st.lists(st.sampled_from([0, 1]), min_size=n_formats, max_size=n_formats)))
    result_formats = tuple(draw(st.lists(int16, max_size=4)))
    return Bind(draw(names), draw(names), formats, params, result_formats)


typed_frontend = st.one_of(
    st.builds(Query, names),
    st.builds(Parse, names, names, st.lists(uint32, max_size=5).map(tuple)),
    binds(),
    st.builds(Describe, kinds, names),
    st.builds(Execute, names, int32),
    st.builds(Close, kinds, names),
    st.just(Sync()),
    st.just(Flush()),
    st.just(Terminate()),
    st.builds(PasswordMessage, st.binary(max_size=40)),
    st.builds(CopyData, st.binary(max_size=40)),
    st.just(CopyDone()),
    st.builds(CopyFail, names),
)

startups = st.builds(
    StartupMessage,
    st.integers(0, 0xFFFF).map(lambda minor: PROTOCOL_3_0 | minor),
    st.dictionaries(names.filter(bool), names, max_size=4),
)

untyped_frontend = st.one_of(
    startups,
    st.just(SSLRequest()),
    st.just(GSSENCRequest()),
    st.builds(CancelRequest, uint32, uint32),
)

STARTUP = StartupMessage(params={"user": "postgres", "database": "postgres"})


def decode_all(data: bytes, decoder: FrontendDecoder | None = None) -> list[object]:
    return (decoder or FrontendDecoder()).feed(data)


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


@FAST
@given(typed_frontend)
def test_typed_frontend_round_trip(msg: object) -> None:
    assert FrontendDecoder(startup=False).feed(encode_frontend(msg)) == [msg]


@FAST
@given(untyped_frontend)
def test_untyped_frontend_round_trip(msg: object) -> None:
    assert FrontendDecoder().feed(FrontendDecoder.encode_frontend(msg)) == [msg]


@pytest.mark.parametrize(
    "msg",
    [
        Query("SELECT 1"),
        Parse("__asyncpg_stmt_1__", "INSERT INTO ta VALUES ($1, $2, NULL)", (23, 25)),
        Bind("", "s", (1, 1), (b"\x00\x00\x00\x01", None), (1,)),
        Describe(TargetKind.PORTAL, ""),
        Execute("C_1", 10),
        Close(TargetKind.STATEMENT, "S_1"),
        Sync(),
        Flush(),
        Terminate(),
        PasswordMessage(b"secret\0"),
        CopyData(b"20\tcopy\n"),
        CopyDone(),
        CopyFail("aborted"),
    ],
)
def test_every_typed_frontend_message_round_trips(msg: object) -> None:
    assert FrontendDecoder(startup=False).feed(encode_frontend(msg)) == [msg]


def test_describe_and_close_kinds_compare_as_letters() -> None:
    assert Describe("S", "x") == Describe(TargetKind.STATEMENT, "x")
    decoded = FrontendDecoder(startup=False).feed(encode_frontend(Close("P", "c")))
    assert decoded == [Close("P", "c")]


def test_sasl_messages_arrive_as_password_messages_and_reparse() -> None:
    # psql's SASLInitialResponse as traced (wire_psql.log).
    traced = b"SCRAM-SHA-256\x00\x00\x00\x00 n,,n=,r=i1cdOQiBjJHfK/kytPRIrRbS"
    initial = SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=i1cdOQiBjJHfK/kytPRIrRbS")
    assert encode_frontend(initial) == b"p" + struct.pack(">i", 4 + len(traced)) + traced
    (msg,) = FrontendDecoder(startup=False).feed(encode_frontend(initial))
    assert msg == PasswordMessage(traced)
    assert parse_sasl_initial_response(msg) == initial

    no_data = SASLInitialResponse("SCRAM-SHA-256", None)
    (msg,) = FrontendDecoder(startup=False).feed(encode_frontend(no_data))
    assert parse_sasl_initial_response(msg) == no_data

    final = SASLResponse(b"c=biws,r=abc,p=xyz")
    (msg,) = FrontendDecoder(startup=False).feed(encode_frontend(final))
    assert parse_sasl_response(msg) == final


def test_password_text() -> None:
    assert password_text(PasswordMessage(b"md5abc\0")) == "md5abc"
    with pytest.raises(ProtocolViolation):
        password_text(PasswordMessage(b"no terminator"))
    with pytest.raises(ProtocolViolation):
        password_text(PasswordMessage(b"a\0b\0"))
    with pytest.raises(ProtocolViolation):
        parse_sasl_initial_response(PasswordMessage(b"SCRAM-SHA-256\0\0\0\0\x09short"))


BACKEND_EXAMPLES = [
    AuthenticationOk(),
    AuthenticationCleartextPassword(),
    AuthenticationMD5Password(b"\x01\x02\x03\x04"),
    AuthenticationSASL(("SCRAM-SHA-256",)),
    AuthenticationSASLContinue(b"r=abc,s=c2FsdA==,i=4096"),
    AuthenticationSASLFinal(b"v=c2ln"),
    ParameterStatus("server_version", "15.0"),
    BackendKeyData(17498, 0xFFFFFFFF),
    ReadyForQuery(TransactionStatus.IN_TRANSACTION),
    ReadyForQuery(TransactionStatus.FAILED),
    RowDescription(
        (FieldDescription("id", 16385, 1, 23, 4, -1, 1), FieldDescription("?", 0, 0, 25))
    ),
    RowDescription(()),
    DataRow((b"1", None, b"")),
    DataRow(()),
    CommandComplete("INSERT 0 1"),
    EmptyQueryResponse(),
    ErrorResponse(
        "ERROR",
        "42P01",
        'relation "x" does not exist',
        detail="d",
        hint="h",
        position=15,
        fields={"F": "parse_relation.c", "L": "1392", "R": "parserOpenTable"},
    ),
    NoticeResponse("NOTICE", "00000", "skipping"),
    ParseComplete(),
    BindComplete(),
    CloseComplete(),
    NoData(),
    ParameterDescription((23, 25, 0xFFFFFFFF)),
    PortalSuspended(),
    CopyInResponse(0, (0, 0)),
    CopyOutResponse(1, (1,)),
    CopyData(b"1\tx\n"),
    CopyDone(),
    NegotiateProtocolVersion(0, ("_pq_.foo",)),
]


@pytest.mark.parametrize("msg", BACKEND_EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_backend_message_round_trips(msg: object) -> None:
    assert BackendDecoder().feed(encode(msg)) == [msg]


def test_backend_stream_in_one_buffer_byte_by_byte() -> None:
    data = encode_all(BACKEND_EXAMPLES)
    decoder = BackendDecoder()
    out = []
    for i in range(len(data)):
        out.extend(decoder.feed(data[i : i + 1]))
    assert out == BACKEND_EXAMPLES


# ---------------------------------------------------------------------------------------------
# Byte-exact backend encodings (values from the Postgres 15 traces)
# ---------------------------------------------------------------------------------------------


def frame(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + struct.pack(">i", len(body) + 4) + body


def test_ready_for_query_bytes() -> None:
    assert encode(ReadyForQuery(TransactionStatus.IDLE)) == b"Z\x00\x00\x00\x05I"
    assert encode(ReadyForQuery("T")) == b"Z\x00\x00\x00\x05T"
    assert encode(ReadyForQuery(TransactionStatus.FAILED)) == b"Z\x00\x00\x00\x05E"


def test_error_response_bytes() -> None:
    # wire_asyncpg.log: E S=ERROR V=ERROR C=57014 M=canceling statement due to user request
    msg = ErrorResponse("ERROR", "57014", "canceling statement due to user request")
    body = b"SERROR\0VERROR\0C57014\0Mcanceling statement due to user request\0\0"
    assert encode(msg) == frame(b"E", body)


def test_notice_response_bytes() -> None:
    # wire_pgbench_i.log: N S=NOTICE V=NOTICE C=00000 M=table "pgbench_accounts" does not ...
    msg = NoticeResponse("NOTICE", "00000", 'table "pgbench_accounts" does not exist, skipping')
    body = b'SNOTICE\0VNOTICE\0C00000\0Mtable "pgbench_accounts" does not exist, skipping\0\0'
    assert encode(msg) == frame(b"N", body)


def test_error_field_order_and_extra_fields() -> None:
    msg = ErrorResponse("FATAL", "28P01", "m", detail="d", hint="h", position=3, fields={"t": "x"})
    assert encode(msg) == frame(b"E", b"SFATAL\0VFATAL\0C28P01\0Mm\0Dd\0Hh\0P3\0tx\0\0")


def test_error_text_with_nul_keeps_framing() -> None:
    data = encode(ErrorResponse("ERROR", "22P02", 'invalid input syntax: "a\0b"'))
    (decoded,) = BackendDecoder().feed(data)
    assert decoded.message == 'invalid input syntax: "a\\0b"'


def test_parameter_status_bytes() -> None:
    # wire_psql.log: S client_encoding=UTF8
    assert encode(ParameterStatus("client_encoding", "UTF8")) == (
        b"S\x00\x00\x00\x19client_encoding\x00UTF8\x00"
    )


def test_backend_key_data_bytes() -> None:
    # wire_psql.log: K pid/secret 0000445a37ac2dc4
    assert encode(BackendKeyData(0x445A, 0x37AC2DC4)) == (
        b"K\x00\x00\x00\x0c" + bytes.fromhex("0000445a37ac2dc4")
    )


def test_authentication_bytes() -> None:
    # wire_psql.log: R auth code=10 data=b'SCRAM-SHA-256\x00\x00', then code=0
    assert encode(AuthenticationSASL(("SCRAM-SHA-256",))) == frame(
        b"R", b"\x00\x00\x00\x0aSCRAM-SHA-256\x00\x00"
    )
    assert encode(AuthenticationOk()) == b"R\x00\x00\x00\x08\x00\x00\x00\x00"
    assert encode(AuthenticationSASLFinal(b"v=abc")) == frame(b"R", b"\x00\x00\x00\x0cv=abc")


def test_data_row_with_null_bytes() -> None:
    # wire_psql.log: D [b'name', b'text', None, b't', None, b'', b'']
    values = (b"name", b"text", None, b"t", None, b"", b"")
    body = (
        b"\x00\x07"
        + b"\x00\x00\x00\x04name"
        + b"\x00\x00\x00\x04text"
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x01t"
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x00"
    )
    assert encode(DataRow(values)) == frame(b"D", body)
    assert encode_data_row(list(values)) == frame(b"D", body)


def test_row_description_bytes() -> None:
    # wire_psql.log: T Schema:oid19/len64/mod-1/fmt0/tbl2615/att2; Type:oid25/len-1/...
    msg = RowDescription(
        (FieldDescription("Schema", 2615, 2, 19, 64, -1, 0), FieldDescription("Type", 0, 0, 25))
    )
    body = (
        b"\x00\x02"
        + b"Schema\0"
        + struct.pack(">IhIhih", 2615, 2, 19, 64, -1, 0)
        + b"Type\0"
        + struct.pack(">IhIhih", 0, 0, 25, -1, -1, 0)
    )
    assert encode(msg) == frame(b"T", body)


def test_small_fixed_messages() -> None:
    assert encode(CommandComplete("SELECT 9")) == frame(b"C", b"SELECT 9\0")
    assert encode(ParseComplete()) == b"1\x00\x00\x00\x04"
    assert encode(BindComplete()) == b"2\x00\x00\x00\x04"
    assert encode(NoData()) == b"n\x00\x00\x00\x04"
    assert encode(EmptyQueryResponse()) == b"I\x00\x00\x00\x04"
    assert encode(PortalSuspended()) == b"s\x00\x00\x00\x04"
    assert encode(ParameterDescription((23, 25))) == frame(b"t", b"\0\2\0\0\0\x17\0\0\0\x19")
    assert encode(CopyInResponse(0, (0, 0))) == frame(b"G", b"\0\0\2\0\0\0\0")


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(TypeError):
        encode(Query("SELECT 1"))  # a frontend message
    with pytest.raises(TypeError):
        encode_frontend(ReadyForQuery())
    with pytest.raises(ValueError):
        encode(CommandComplete("SELECT\0 1"))
    with pytest.raises(ValueError):
        encode(AuthenticationMD5Password(b"abc"))


# ---------------------------------------------------------------------------------------------
# Startup phase
# ---------------------------------------------------------------------------------------------


def test_startup_sequence_ssl_then_startup_then_typed() -> None:
    decoder = FrontendDecoder()
    assert decoder.in_startup
    assert decoder.feed(encode_frontend(GSSENCRequest())) == [GSSENCRequest()]
    assert decoder.feed(encode_frontend(SSLRequest())) == [SSLRequest()]
    assert decoder.in_startup
    assert decoder.feed(encode_frontend(STARTUP)) == [STARTUP]
    assert not decoder.in_startup
    assert decoder.feed(encode_frontend(Query("SELECT 1"))) == [Query("SELECT 1")]


def test_startup_bytes_as_clients_send_them() -> None:
    ssl = struct.pack(">ii", 8, 80877103)
    startup = b"\x00\x03\x00\x00user\0postgres\0database\0db\0application_name\0psql\0\0"
    data = ssl + struct.pack(">i", len(startup) + 4) + startup
    msgs = FrontendDecoder().feed(data)
    assert msgs == [
        SSLRequest(),
        StartupMessage(196608, {"user": "postgres", "database": "db", "application_name": "psql"}),
    ]
    assert (msgs[1].major, msgs[1].minor) == (3, 0)


def test_startup_keeps_quotes_and_protocol_options() -> None:
    msg = StartupMessage(PROTOCOL_3_0 | 2, {"client_encoding": "'utf-8'", "_pq_.x": "1"})
    assert decode_all(encode_frontend(msg)) == [msg]
    assert msg.minor == 2


def test_cancel_request_after_ssl_request() -> None:
    data = encode_frontend(SSLRequest()) + struct.pack(">iiII", 16, 80877102, 17498, 0x37AC2DC4)
    assert decode_all(data) == [SSLRequest(), CancelRequest(17498, 0x37AC2DC4)]


def test_nothing_may_follow_a_cancel_request() -> None:
    decoder = FrontendDecoder()
    decoder.feed(encode_frontend(CancelRequest(1, 2)))
    with pytest.raises(ProtocolViolation) as info:
        decoder.feed(b"x")
    assert info.value.fatal


@pytest.mark.parametrize(
    ("data", "sqlstate"),
    [
        (struct.pack(">i", 4), "08P01"),  # shorter than length + code
        (struct.pack(">i", -1), "08P01"),
        (struct.pack(">i", 10_001), "08P01"),  # over MAX_STARTUP_PACKET_LENGTH
        (struct.pack(">ii", 8, 2 << 16), "0A000"),  # protocol 2.0
        (struct.pack(">ii", 12, 80877103) + b"\0" * 4, "08P01"),  # SSLRequest of wrong size
        (struct.pack(">ii", 12, 80877102) + b"\0" * 4, "08P01"),  # CancelRequest too short
        (struct.pack(">ii", 8, PROTOCOL_3_0), "08P01"),  # no terminator at all
        (struct.pack(">ii", 14, PROTOCOL_3_0) + b"user\0x", "08P01"),  # value not terminated
        (struct.pack(">ii", 15, PROTOCOL_3_0) + b"user\0x\0", "08P01"),  # list not terminated
        (struct.pack(">ii", 12, PROTOCOL_3_0) + b"\0\0a\0", "08P01"),  # data after terminator
        (struct.pack(">ii", 14, PROTOCOL_3_0) + b"u\0\xff\xfe\0\0", "22021"),  # not UTF-8
    ],
)
def test_bad_startup_packets_are_fatal(data: bytes, sqlstate: str) -> None:
    decoder = FrontendDecoder()
    with pytest.raises(ProtocolViolation) as info:
        decoder.feed(data)
    assert info.value.sqlstate == sqlstate
    assert info.value.fatal
    with pytest.raises(ProtocolViolation):  # and the decoder stays failed
        decoder.feed(encode_frontend(STARTUP))


def test_empty_startup_parameter_list() -> None:
    assert decode_all(struct.pack(">ii", 9, PROTOCOL_3_0) + b"\0") == [StartupMessage()]


# ---------------------------------------------------------------------------------------------
# Fragmentation
# ---------------------------------------------------------------------------------------------


def feed_in_chunks(data: bytes, cuts: list[int]) -> list[object]:
    decoder = FrontendDecoder()
    out: list[object] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        out.extend(decoder.feed(data[start:cut]))
        start = cut
    assert decoder.buffered == 0
    return out


def test_byte_by_byte() -> None:
    msgs = [
        SSLRequest(),
        STARTUP,
        Parse("s", "SELECT $1", (23,)),
        Bind("", "s", (1,), (b"\0\0\0\1",), ()),
        Describe(TargetKind.PORTAL, ""),
        Execute("", 1),
        Sync(),
        Query("SELECT 'é'"),
        Terminate(),
    ]
    data = b"".join(encode_frontend(m) for m in msgs)
    assert feed_in_chunks(data, list(range(1, len(data)))) == msgs


@FAST
@given(
    st.lists(untyped_frontend.filter(lambda m: not isinstance(m, CancelRequest)), max_size=2),
    st.lists(typed_frontend, max_size=8),
    st.data(),
)
def test_random_chunks(pre: list[object], typed: list[object], data: st.DataObject) -> None:
    pre = [m for m in pre if not isinstance(m, StartupMessage)]
    msgs = [*pre, STARTUP, *typed]
    stream = b"".join(encode_frontend(m) for m in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    assert feed_in_chunks(stream, cuts) == msgs


# ---------------------------------------------------------------------------------------------
# Malformed typed messages
# ---------------------------------------------------------------------------------------------


def typed_decoder(**kwargs: int) -> FrontendDecoder:
    return FrontendDecoder(startup=False, **kwargs)


def test_too_large_is_refused_from_the_header() -> None:
    decoder = typed_decoder(max_message_size=100)
    with pytest.raises(ProtocolViolation) as info:
        decoder.feed(b"Q" + struct.pack(">i", 101))  # body not even sent
    assert info.value.sqlstate == "54000"
    assert info.value.fatal
    assert typed_decoder(max_message_size=100).feed(frame(b"d", b"x" * 96)) == [CopyData(b"x" * 96)]
    assert FrontendDecoder().max_message_size == DEFAULT_MAX_MESSAGE_SIZE == 64 * 1024 * 1024


@pytest.mark.parametrize("length", [-1, -(1 << 31), 0, 3])
def test_impossible_lengths(length: int) -> None:
    with pytest.raises(ProtocolViolation) as info:
        typed_decoder().feed(b"Q" + struct.pack(">i", length))
    assert info.value.sqlstate == "08P01"
    assert info.value.fatal


def test_unknown_type_is_fatal_at_its_first_byte() -> None:
    decoder = typed_decoder()
    with pytest.raises(ProtocolViolation) as info:
        decoder.feed(b"\x00")
    assert info.value.sqlstate == "08P01" and info.value.fatal
    with pytest.raises(ProtocolViolation):
        decoder.feed(encode_frontend(Sync()))


@pytest.mark.parametrize(
    ("data", "sqlstate"),
    [
        (frame(b"Q", b"SELECT 1"), "08P01"),  # missing NUL
        (frame(b"Q", b"SELECT 1\0junk"), "08P01"),  # trailing bytes
        (frame(b"Q", b"SELECT \xff\0"), "22021"),  # not UTF-8
        (frame(b"S", b"x"), "08P01"),  # Sync with a body
        (frame(b"D", b"Xname\0"), "08P01"),  # bad Describe kind
        (frame(b"C", b""), "08P01"),  # Close without kind
        (frame(b"E", b"\0\0\0"), "08P01"),  # Execute row count cut short
        (frame(b"P", b"s\0q\0\x00\x03\0\0\0\x17"), "08P01"),  # 3 param types, 1 present
        (frame(b"B", b"\0s\0\x00\x00\x00\x01\x00\x00\x00\x09abc\x00\x00"), "08P01"),  # overrun
        (frame(b"B", b"\0s\0\x00\x00\x00\x01\xff\xff\xff\xfe\x00\x00"), "08P01"),  # length -2
        (frame(b"B", b"\0s\0\x00\x02\0\0\0\0\x00\x01\xff\xff\xff\xff\x00\x00"), "08P01"),
        (frame(b"f", b"no terminator"), "08P01"),
    ],
)
def test_malformed_bodies_are_not_fatal(data: bytes, sqlstate: str) -> None:
    decoder = typed_decoder()
    with pytest.raises(ProtocolViolation) as info:
        decoder.feed(data + encode_frontend(Sync()))
    assert info.value.sqlstate == sqlstate
    assert not info.value.fatal
    assert info.value.to_error_response().severity == "ERROR"
    # The bad message was skipped; what followed it is still there.
    assert decoder.feed(b"") == [Sync()]


def test_messages_before_an_error_travel_with_it() -> None:
    data = encode_frontend(Query("SELECT 1")) + encode_frontend(Flush()) + b"\x01"
    with pytest.raises(ProtocolViolation) as info:
        typed_decoder().feed(data)
    assert info.value.messages == (Query("SELECT 1"), Flush())
    assert info.value.to_error_response() == ErrorResponse(
        "FATAL", "08P01", "invalid frontend message type 1"
    )


# ---------------------------------------------------------------------------------------------
# Fuzzing: only messages or ProtocolViolation, never another exception, never a hang
# ---------------------------------------------------------------------------------------------


def drain(decoder: FrontendDecoder, chunks: list[bytes]) -> None:
    """Feed every chunk, continuing after non-fatal errors as a server would."""
    for chunk in chunks:
        pending = chunk
        while True:
            try:
                decoder.feed(pending)
                break
            except ProtocolViolation as exc:
                if exc.fatal:
                    return
                pending = b""  # the bad message is gone; decode what is buffered
    assert decoder.buffered <= decoder.max_message_size + 1


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_random_bytes_after_startup(chunks: list[bytes]) -> None:
    decoder = FrontendDecoder(max_message_size=1 << 16)
    decoder.feed(encode_frontend(STARTUP))
    drain(decoder, chunks)


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_random_bytes_in_startup(chunks: list[bytes]) -> None:
    drain(FrontendDecoder(), chunks)


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(b"QPBDECSHXpdcf"), st.binary(max_size=40)),
        min_size=1,
        max_size=6,
    ),
    st.data(),
)
def test_random_bodies_in_valid_frames(
    frames: list[tuple[int, bytes]], data: st.DataObject
) -> None:
    # Well-framed garbage reaches every body reader, which random bytes alone rarely do.
    stream = b"".join(frame(bytes([t]), body) for t, body in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    drain(typed_decoder(), chunks)


@FUZZ
@given(typed_frontend, st.data())
def test_corrupted_valid_messages(msg: object, data: st.DataObject) -> None:
    raw = bytearray(encode_frontend(msg))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    drain(typed_decoder(max_message_size=1 << 16), [bytes(raw), encode_frontend(Sync())])
