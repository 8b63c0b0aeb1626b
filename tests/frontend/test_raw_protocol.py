"""Message-level behaviour of the front end, through raw sockets and the project's codec."""

from __future__ import annotations

import asyncio
import struct

from percolator.server.frontend.listener import Server
from percolator.server.wire.messages import (
    PROTOCOL_3_0,
    AuthenticationOk,
    BackendKeyData,
    Bind,
    CancelRequest,
    Close,
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
    Flush,
    GSSENCRequest,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    ParseComplete,
    Query,
    ReadyForQuery,
    RowDescription,
    SSLRequest,
    StartupMessage,
    Sync,
    TargetKind,
    Terminate,
    TransactionStatus,
)
from tests.frontend.conftest import MakeServer
from tests.frontend.fake_engine import FakeEngine
from tests.frontend.rawclient import TIMEOUT, RawClient

S, P = TargetKind.STATEMENT, TargetKind.PORTAL


def kinds(msgs: list) -> list[str]:
    return [type(m).__name__ for m in msgs]


async def still_serving(server: Server) -> None:
    """A fresh connection can log in and run a query."""
    client = await RawClient.connect(server.port)
    client.send(Query("select 7"))
    msgs = await client.until(ReadyForQuery)
    assert DataRow((b"7",)) in msgs
    await client.close()


async def test_ssl_and_gssenc_requests_answered_n_then_startup(server: Server) -> None:
    client = await RawClient.open(server.port)
    client.send(GSSENCRequest())
    assert await client.read_byte() == b"N"
    client.send(SSLRequest())
    assert await client.read_byte() == b"N"
    client.send(StartupMessage(PROTOCOL_3_0, {"user": "u", "database": "db"}))
    msgs = await client.until(ReadyForQuery)
    assert isinstance(msgs[0], AuthenticationOk)
    statuses = [m.name for m in msgs if isinstance(m, ParameterStatus)]
    assert "server_version" in statuses and len(statuses) == 13
    assert isinstance(msgs[-2], BackendKeyData)
    assert msgs[-1] == ReadyForQuery(TransactionStatus.IDLE)
    await client.close()


async def test_simple_query_results_errors_and_empty(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("select 1; select fail; select 2"))
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == [
        "RowDescription",
        "DataRow",
        "CommandComplete",
        "ErrorResponse",
        "ReadyForQuery",
    ]
    error = msgs[3]
    assert (error.severity, error.code, error.position) == ("ERROR", "42703", 8)
    client.send(Query(""))
    assert await client.until(ReadyForQuery) == [EmptyQueryResponse(), ReadyForQuery()]
    client.send(Query("select boom"))
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "XX000" and "boom" in msgs[0].message
    await client.close()


async def test_transaction_status_bytes(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("begin"))
    assert (await client.until(ReadyForQuery))[-1].status == TransactionStatus.IN_TRANSACTION
    client.send(Query("select fail"))
    assert (await client.until(ReadyForQuery))[-1].status == TransactionStatus.FAILED
    client.send(Query("select 1"))
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "25P02" and msgs[-1].status == TransactionStatus.FAILED
    client.send(Query("rollback"))
    msgs = await client.until(ReadyForQuery)
    assert msgs == [CommandComplete("ROLLBACK"), ReadyForQuery(TransactionStatus.IDLE)]
    await client.close()


async def test_parse_describe_flush_answered_without_sync(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(
        Parse("__asyncpg_stmt_1__", "select $1::int, $2", (0, 25)),
        Describe(S, "__asyncpg_stmt_1__"),
        Flush(),
    )
    msgs = await client.until(RowDescription)
    assert msgs[0] == ParseComplete()
    assert msgs[1] == ParameterDescription((23, 25))
    assert [f.type_oid for f in msgs[2].fields] == [23, 25]
    client.send(Parse("nodata", "insert into t values (1)", ()), Describe(S, "nodata"), Flush())
    assert await client.until(NoData) == [ParseComplete(), ParameterDescription(()), NoData()]
    await client.close()


async def test_error_skips_until_sync(server: Server, engine: FakeEngine) -> None:
    client = await RawClient.connect(server.port)
    client.send(
        Parse("", "select fail", ()),
        Bind("", "", (), (), ()),
        Execute("", 0),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == ["ParseComplete", "BindComplete", "ErrorResponse", "ReadyForQuery"]
    client.send(
        Parse("", "xyz", ()),  # parse error: everything up to Sync is skipped
        Bind("", "", (), (), ()),
        Execute("", 0),
        Parse("", "select 1", ()),
        Sync(),
        Parse("", "select 3", ()),
        Bind("", "", (), (), ()),
        Execute("", 0),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == ["ErrorResponse", "ReadyForQuery"]
    assert msgs[0].code == "42601"
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == [
        "ParseComplete",
        "BindComplete",
        "DataRow",
        "CommandComplete",
        "ReadyForQuery",
    ]
    await client.close()


async def test_execute_with_row_limit_suspends(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(
        Parse("", "select generate_series(1, 5)", ()),
        Bind("", "", (), (), ()),
        Describe(P, ""),
        Execute("", 2),
        Execute("", 2),
        Execute("", 2),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == [
        "ParseComplete",
        "BindComplete",
        "RowDescription",
        "DataRow",
        "DataRow",
        "PortalSuspended",
        "DataRow",
        "DataRow",
        "PortalSuspended",
        "DataRow",
        "CommandComplete",
        "ReadyForQuery",
    ]
    assert [m.values[0] for m in msgs if isinstance(m, DataRow)] == [b"1", b"2", b"3", b"4", b"5"]
    assert msgs[-2] == CommandComplete("SELECT 5")
    # The portal is gone after Sync outside a transaction block.
    client.send(Execute("", 1), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "34000"
    await client.close()


async def test_named_portal_survives_sync_inside_transaction(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("begin"))
    await client.until(ReadyForQuery)
    client.send(
        Parse("st", "select generate_series(1, 3)", ()),
        Bind("cur", "st", (), (), ()),
        Execute("cur", 1),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs)[-2:] == ["PortalSuspended", "ReadyForQuery"]
    client.send(Execute("cur", 0), Close(P, "cur"), Sync())
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == [
        "DataRow",
        "DataRow",
        "CommandComplete",
        "CloseComplete",
        "ReadyForQuery",
    ]
    client.send(Query("commit"))
    await client.until(ReadyForQuery)
    await client.close()


async def test_named_and_unnamed_statements(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(
        Parse("a", "select 1", ()), Parse("", "select 2", ()), Parse("", "select 3", ()), Sync()
    )
    assert kinds(await client.until(ReadyForQuery)) == ["ParseComplete"] * 3 + ["ReadyForQuery"]
    client.send(Parse("a", "select 4", ()), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "42P05"
    client.send(
        Bind("", "", (), (), ()),
        Execute("", 0),
        Bind("", "a", (), (), ()),
        Execute("", 0),
        Close(S, "a"),
        Close(S, "never-existed"),
        Close(P, "never-existed"),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    rows = [m.values for m in msgs if isinstance(m, DataRow)]
    assert rows == [(b"3",), (b"1",)]
    assert kinds(msgs)[-4:] == ["CloseComplete", "CloseComplete", "CloseComplete", "ReadyForQuery"]
    client.send(Bind("", "a", (), (), ()), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "26000"
    client.send(Parse("", "select 1; select 2", ()), Sync())
    assert (await client.until(ReadyForQuery))[0].code == "42601"
    await client.close()


async def test_bind_params_and_formats(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(
        Parse("", "select $1::int8, $2, 5", (0, 0)),
        Bind("", "", (1, 0), (struct.pack(">q", 2**40), b"txt"), (1,)),
        Execute("", 0),
        Sync(),
    )
    msgs = await client.until(ReadyForQuery)
    assert msgs[2] == DataRow((struct.pack(">q", 2**40), b"txt", struct.pack(">i", 5)))
    client.send(Bind("", "", (), (b"1",), ()), Sync())  # stale unnamed statement still there
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "08P01" and "supplies 1 parameters" in msgs[0].message
    client.send(Bind("", "", (), (b"1", None), (0, 0)), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "08P01" and "result formats" in msgs[0].message
    client.send(Bind("", "", (), (b"notanint", None), ()), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "22P02"
    await client.close()


async def test_copy_in_and_out(server: Server, engine: FakeEngine) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("copy t from stdin"))
    assert await client.recv() == CopyInResponse(0, (0, 0))
    client.send(CopyData(b"1\ta\n2\t"), Flush(), Sync(), CopyData(b"b\n"), CopyDone())
    assert await client.until(ReadyForQuery) == [CommandComplete("COPY 2"), ReadyForQuery()]
    assert engine.copied == [b"1\ta\n2\tb\n"]
    client.send(Query("copy t from stdin"))
    assert isinstance(await client.recv(), CopyInResponse)
    client.send(CopyData(b"1\n"), CopyFail("client gave up"))
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "57014" and "client gave up" in msgs[0].message
    assert engine.copy_failures == ["client gave up"]
    client.send(Query("copy t to stdout"))
    msgs = await client.until(ReadyForQuery)
    assert msgs[0] == CopyOutResponse(0, (0, 0))
    assert [m.data for m in msgs if isinstance(m, CopyData)] == [
        b"1\tone\n",
        b"2\ttwo\n",
        b"3\tthree\n",
    ]
    assert kinds(msgs)[-3:] == ["CopyDone", "CommandComplete", "ReadyForQuery"]
    assert msgs[-2] == CommandComplete("COPY 3")
    # COPY through the extended protocol.
    client.send(Parse("", "copy t from stdin", ()), Bind("", "", (), (), ()), Execute("", 0))
    msgs = await client.until(CopyInResponse)
    client.send(CopyData(b"9\tz\n"), CopyDone(), Sync())
    msgs = await client.until(ReadyForQuery)
    assert msgs == [CommandComplete("COPY 1"), ReadyForQuery()]
    await client.close()


async def test_notices_and_parameter_status(server: Server) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("select notice; set application_name = 'app'"))
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == [
        "NoticeResponse",
        "RowDescription",
        "DataRow",
        "CommandComplete",
        "CommandComplete",
        "ParameterStatus",
        "ReadyForQuery",
    ]
    assert isinstance(msgs[0], NoticeResponse) and msgs[0].message == "hello from the engine"
    assert msgs[5] == ParameterStatus("application_name", "app")
    await client.close()


async def test_large_result_streams(make_server: MakeServer) -> None:
    server = await make_server(output_buffer_size=4096, fetch_batch_rows=100)
    client = await RawClient.connect(server.port)
    client.send(Query("select generate_series(1, 50000)"))
    msgs = await client.until(ReadyForQuery)
    assert len(msgs) == 50003 and msgs[-2] == CommandComplete("SELECT 50000")
    await client.close()


async def test_slow_reader_applies_backpressure(server: Server, engine: FakeEngine) -> None:
    """A client that does not read stalls the result instead of growing server memory."""
    client = await RawClient.connect(server.port)
    total = 10_000_000
    client.send(Query(f"select generate_series(1, {total})"))
    # Poll until row production stops (the server waits for the transport to drain).
    produced, stable = -1, 0
    async with asyncio.timeout(TIMEOUT):
        while stable < 5:
            await asyncio.sleep(0.05)
            rows = engine.last_rows
            count = rows.count if rows is not None else 0
            stable = stable + 1 if count == produced and count > 0 else 0
            produced = count
    assert 0 < produced < total // 10
    client.writer.transport.abort()
    await asyncio.wait_for(engine.sessions[0].closed.wait(), TIMEOUT)


async def test_protocol_negotiation(server: Server) -> None:
    client = await RawClient.open(server.port)
    client.send(StartupMessage((3 << 16) | 2, {"user": "u", "_pq_.something": "x"}))
    msgs = await client.until(ReadyForQuery)
    assert msgs[0] == NegotiateProtocolVersion(0, ("_pq_.something",))
    assert isinstance(msgs[1], AuthenticationOk)
    await client.close()
    client = await RawClient.open(server.port)
    client.send_bytes(struct.pack(">ii", 8, 2 << 16))
    msgs = await client.closed_by_server()
    assert msgs[0].severity == "FATAL" and "unsupported frontend protocol" in msgs[0].message


async def test_unknown_database_is_fatal(server: Server) -> None:
    client = await RawClient.open(server.port)
    client.send(StartupMessage(PROTOCOL_3_0, {"user": "u", "database": "nosuchdb"}))
    msgs = await client.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "3D000")]
    client = await RawClient.open(server.port)
    client.send(StartupMessage(PROTOCOL_3_0, {"user": "nobody"}))
    msgs = await client.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "28000")]


async def test_garbage_closes_only_that_connection(server: Server) -> None:
    # An unknown message type: fatal.
    client = await RawClient.connect(server.port)
    client.send_bytes(b"\x01\x00\x00\x00\x08garbage!")
    msgs = await client.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "08P01")]
    await still_serving(server)
    # A length beyond the limit: fatal.
    client = await RawClient.connect(server.port)
    client.send_bytes(b"Q" + struct.pack(">i", 1 << 30))
    msgs = await client.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "54000")]
    await still_serving(server)
    # A malformed body (Bind cut short): an ERROR, and the connection goes on.
    client = await RawClient.connect(server.port)
    client.send(Parse("", "select 1", ()))
    client.send_bytes(b"B\x00\x00\x00\x06\x00\x00")
    client.send(Execute("", 0), Sync())
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == ["ParseComplete", "ErrorResponse", "ReadyForQuery"]
    assert msgs[1].code == "08P01"
    client.send(Query("select 1"))
    assert DataRow((b"1",)) in await client.until(ReadyForQuery)
    # A malformed simple Query (no terminating NUL): ERROR + ReadyForQuery.
    client.send_bytes(b"Q\x00\x00\x00\x08abcd")
    msgs = await client.until(ReadyForQuery)
    assert kinds(msgs) == ["ErrorResponse", "ReadyForQuery"]
    await client.close()
    # Garbage instead of a startup packet, and a truncated message before disconnecting.
    client = await RawClient.open(server.port)
    client.send_bytes(b"\xff" * 64)
    assert (await client.closed_by_server())[0].severity == "FATAL"
    client = await RawClient.connect(server.port)
    client.send_bytes(b"Q\x00\x00\x01\x00sel")
    await client.close()
    await still_serving(server)


async def test_disconnect_mid_transaction_closes_session(
    server: Server, engine: FakeEngine
) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("begin; insert into t values (1)"))
    assert (await client.until(ReadyForQuery))[-1].status == TransactionStatus.IN_TRANSACTION
    client.writer.transport.abort()
    await asyncio.wait_for(engine.sessions[0].closed.wait(), TIMEOUT)
    assert server.connection_count == 0


async def test_terminate(server: Server, engine: FakeEngine) -> None:
    client = await RawClient.connect(server.port)
    client.send(Terminate())
    assert await client.closed_by_server() == []
    await asyncio.wait_for(engine.sessions[0].closed.wait(), TIMEOUT)


async def test_connection_limit(make_server: MakeServer) -> None:
    server = await make_server(max_connections=1)
    first = await RawClient.connect(server.port)
    client = await RawClient.open(server.port)
    client.send(SSLRequest())
    assert await client.read_byte() == b"N"
    client.send(StartupMessage(PROTOCOL_3_0, {"user": "u"}))
    msgs = await client.closed_by_server()
    assert msgs == [ErrorResponse("FATAL", "53300", "sorry, too many clients already")]
    # CancelRequests are not counted against the limit.
    canceller = await RawClient.open(server.port)
    assert first.key is not None
    canceller.send(CancelRequest(first.key.pid, first.key.secret))
    assert await canceller.closed_by_server() == []
    await first.close()


async def test_cancel_request_after_ssl_request(server: Server, engine: FakeEngine) -> None:
    client = await RawClient.connect(server.port)
    client.send(Query("select pg_sleep(30)"))
    await asyncio.wait_for(engine.sleeping.wait(), TIMEOUT)
    canceller = await RawClient.open(server.port)
    canceller.send(SSLRequest())
    assert await canceller.read_byte() == b"N"
    assert client.key is not None
    canceller.send(CancelRequest(client.key.pid, client.key.secret))
    assert await canceller.closed_by_server() == []  # closed with no reply
    msgs = await client.until(ReadyForQuery)
    assert msgs[0].code == "57014"
    client.send(Query("select 1"))
    assert DataRow((b"1",)) in await client.until(ReadyForQuery)
    # A wrong secret cancels nothing.
    canceller = await RawClient.open(server.port)
    canceller.send(CancelRequest(client.key.pid, client.key.secret ^ 1))
    assert await canceller.closed_by_server() == []
    await client.close()


async def test_idle_in_transaction_timeout(make_server: MakeServer, engine: FakeEngine) -> None:
    server = await make_server(idle_in_transaction_session_timeout=0.2)
    client = await RawClient.connect(server.port)
    client.send(Query("select 1"))
    await client.until(ReadyForQuery)
    client.send(Query("begin"))
    await client.until(ReadyForQuery)
    msgs = await client.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "25P03")]
    await asyncio.wait_for(engine.sessions[0].closed.wait(), TIMEOUT)


async def test_shutdown_idle_and_busy(make_server: MakeServer, engine: FakeEngine) -> None:
    server = await make_server()
    idle = await RawClient.connect(server.port)
    busy = await RawClient.connect(server.port)
    busy.send(Query("select wait"))
    await asyncio.wait_for(engine.waiting.wait(), TIMEOUT)
    shutdown = asyncio.create_task(server.shutdown(timeout=TIMEOUT))
    msgs = await idle.closed_by_server()
    assert [(m.severity, m.code) for m in msgs] == [("FATAL", "57P01")]
    assert not shutdown.done()
    engine.release.set()
    msgs = await busy.closed_by_server()
    assert kinds(msgs) == [
        "RowDescription",
        "DataRow",
        "CommandComplete",
        "ReadyForQuery",
        "ErrorResponse",
    ]
    assert msgs[-1].code == "57P01"
    await asyncio.wait_for(shutdown, TIMEOUT)
    assert all(s.closed.is_set() for s in engine.sessions)
    try:
        await RawClient.open(server.port)
    except OSError:
        pass
    else:
        raise AssertionError("server still accepting")


async def test_shutdown_timeout_cuts_busy_connection(
    make_server: MakeServer, engine: FakeEngine
) -> None:
    server = await make_server()
    busy = await RawClient.connect(server.port)
    busy.send(Query("begin; select wait"))
    await asyncio.wait_for(engine.waiting.wait(), TIMEOUT)
    await asyncio.wait_for(server.shutdown(timeout=0.1), TIMEOUT)
    assert engine.sessions[0].closed.is_set()
    await busy.closed_by_server()
