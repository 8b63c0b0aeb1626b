"""Bytes in and out of one client socket, with backpressure in both directions.

An ``asyncio.Protocol`` rather than streams so that the connection coroutine can wait for input
with its own wake-ups (shutdown, the idle-in-transaction timer) without a task per read, and so
that a TLS upgrade keeps the same protocol object.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import cast

# Reading stops while this much received input waits to be decoded (a client pipelining faster
# than statements run), and resumes below the low mark.
_READ_HIGH_WATER = 256 * 1024
_READ_LOW_WATER = 64 * 1024


class WireProtocol(asyncio.Protocol):
    """The byte pipe of one connection; the protocol logic lives in the connection task."""

    def __init__(self, on_connected: Callable[[WireProtocol], None]) -> None:
        """``on_connected`` is called once with this protocol when the socket is accepted."""
        self._on_connected: Callable[[WireProtocol], None] | None = on_connected
        self._transport: asyncio.Transport | None = None
        self._chunks: deque[bytes] = deque()
        self._pending = 0
        self._reading_paused = False
        self._eof = False
        self._lost = False
        self._reader: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drainer: asyncio.Future[None] | None = None
        self._tls = False
        self.peer = "?"

    # ---------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        elif peer:
            self.peer = str(peer)
        callback, self._on_connected = self._on_connected, None
        if callback is not None:
            callback(self)

    def data_received(self, data: bytes) -> None:
        if not data:
            return
        self._chunks.append(data)
        self._pending += len(data)
        if self._pending >= _READ_HIGH_WATER and not self._reading_paused:
            self._reading_paused = True
            assert self._transport is not None
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._eof = True
        self._wake()
        drainer, self._drainer = self._drainer, None
        if drainer is not None and not drainer.done():
            drainer.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        drainer, self._drainer = self._drainer, None
        if drainer is not None and not drainer.done():
            drainer.set_result(None)

    # ---------------------------------------------------------------- reading

    def take_chunk(self) -> bytes | None:
        """The oldest received chunk not yet taken, or None."""
        if not self._chunks:
            return None
        chunk = self._chunks.popleft()
        self._pending -= len(chunk)
        if self._reading_paused and self._pending <= _READ_LOW_WATER and not self._lost:
            self._reading_paused = False
            assert self._transport is not None
            self._transport.resume_reading()
        return chunk

    @property
    def has_input(self) -> bool:
        """True when received bytes are waiting to be taken."""
        return bool(self._chunks)

    @property
    def at_eof(self) -> bool:
        """True once the peer closed its side (or the connection was lost)."""
        return self._eof

    async def wait_readable(self, idle_limit: float | None = None) -> bool:
        """Wait until input or EOF arrives, :meth:`interrupt` is called or ``idle_limit``
        seconds pass.

        Returns False only on timeout.
        """
        if self._chunks or self._eof:
            return True
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._reader = waiter
        timer = None
        if idle_limit is not None:
            timer = loop.call_later(idle_limit, _settle, waiter, False)
        try:
            return await waiter
        finally:
            self._reader = None
            if timer is not None:
                timer.cancel()

    def interrupt(self) -> None:
        """Wake a pending :meth:`wait_readable` (it returns True with nothing to read)."""
        self._wake()

    def _wake(self) -> None:
        if self._reader is not None:
            _settle(self._reader, True)

    # ---------------------------------------------------------------- writing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue bytes on the transport (dropped silently once the connection is gone)."""
        if self._transport is not None and not self._lost and not self._transport.is_closing():
            self._transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._writing_paused:
            return
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_future()
        await self._drainer

    # ---------------------------------------------------------------- lifecycle

    async def start_tls(self, context: ssl.SSLContext, handshake_timeout: float) -> None:
        """Upgrade the connection to TLS as the server side; this protocol keeps receiving."""
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        transport = await loop.start_tls(
            self._transport,
            self,
            context,
            server_side=True,
            ssl_handshake_timeout=handshake_timeout,
        )
        if transport is None:
            raise ConnectionResetError("connection lost during the TLS handshake")
        self._transport = transport  # type: ignore[assignment]
        self._tls = True

    @property
    def is_tls(self) -> bool:
        """True once the connection runs over TLS."""
        return self._tls

    def close(self) -> None:
        """Close after writing what is queued."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is queued."""
        if self._transport is not None:
            self._transport.abort()

    @property
    def closed(self) -> bool:
        """True once the connection is lost."""
        return self._lost


def _settle(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)
