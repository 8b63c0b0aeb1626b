"""A raw protocol client over the project's codec, for message-level tests."""

from __future__ import annotations

import asyncio

from percolator.server.wire.codec import BackendDecoder, encode_frontend
from percolator.server.wire.messages import (
    PROTOCOL_3_0,
    AuthenticationOk,
    BackendKeyData,
    BackendMessage,
    FrontendMessage,
    ReadyForQuery,
    SSLRequest,
    StartupMessage,
)

TIMEOUT = 10.0


class RawClient:
    """One socket; send frontend messages, receive decoded backend messages."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = BackendDecoder()
        self.inbox: list[BackendMessage] = []
        self.key: BackendKeyData | None = None

    @classmethod
    async def open(cls, port: int) -> RawClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)
        return cls(reader, writer)

    @classmethod
    async def connect(
        cls, port: int, *, user: str = "u", database: str = "db", ssl_request: bool = False
    ) -> RawClient:
        """Connect and log in with trust authentication (up to the first ReadyForQuery)."""
        client = await cls.open(port)
        if ssl_request:
            client.send(SSLRequest())
            assert await client.read_byte() == b"N"
        client.send(StartupMessage(PROTOCOL_3_0, {"user": user, "database": database}))
        msgs = await client.until(ReadyForQuery)
        assert isinstance(msgs[0], AuthenticationOk), msgs
        keys = [m for m in msgs if isinstance(m, BackendKeyData)]
        client.key = keys[0]
        return client

    def send(self, *msgs: FrontendMessage) -> None:
        self.writer.write(b"".join(encode_frontend(m) for m in msgs))

    def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)

    async def read_byte(self) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(1), TIMEOUT)

    async def recv(self) -> BackendMessage:
        """The next message (fails on EOF or after TIMEOUT seconds)."""
        while not self.inbox:
            data = await asyncio.wait_for(self.reader.read(65536), TIMEOUT)
            if not data:
                raise EOFError("server closed the connection")
            self.inbox.extend(self.decoder.feed(data))
        return self.inbox.pop(0)

    async def until(self, kind: type) -> list[BackendMessage]:
        """Messages up to and including the first of type ``kind``."""
        out = []
        while True:
            msg = await self.recv()
            out.append(msg)
            if isinstance(msg, kind):
                return out

    async def closed_by_server(self) -> list[BackendMessage]:
        """Read until EOF; returns the messages that came before it."""
        out = list(self.inbox)
        self.inbox.clear()
        while True:
            try:
                data = await asyncio.wait_for(self.reader.read(65536), TIMEOUT)
            except ConnectionResetError:
                return out
            if not data:
                return out
            out.extend(self.decoder.feed(data))

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), TIMEOUT)
        except (ConnectionError, TimeoutError):
            pass
