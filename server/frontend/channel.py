"""Protocol messages over a :class:`WireProtocol`: decoding input, buffering output.

Output is collected in one buffer and written out when the client must see it: before the
connection waits for input (which covers ReadyForQuery, Flush, and a COPY-in that waits for
data) and whenever the buffer passes its size limit during a large result. Waiting for the
transport to drain there is what keeps a huge result from piling up in memory.
"""

from __future__ import annotations

from collections import deque

from percolator.server.frontend.transport import WireProtocol
from percolator.server.wire.codec import FrontendDecoder, ProtocolViolation, encode
from percolator.server.wire.messages import BackendMessage, FrontendMessage


class ClientGone(Exception):
    """The client closed the connection (or it broke)."""


class IdleTimeout(Exception):
    """No input arrived within the idle timeout."""


class ShutdownRequested(Exception):
    """The server is shutting down and the connection was waiting for the client."""


class MessageChannel:
    """Frontend messages in, backend messages out, for one connection."""

    def __init__(
        self,
        protocol: WireProtocol,
        *,
        max_message_size: int,
        output_buffer_size: int = 64 * 1024,
    ) -> None:
        """Decode at most ``max_message_size`` bytes per message; write out at
        ``output_buffer_size`` bytes during large results."""
        self.protocol = protocol
        self.decoder = FrontendDecoder(max_message_size)
        self._inbox: deque[FrontendMessage | ProtocolViolation] = deque()
        self._out = bytearray()
        self._flush_at = output_buffer_size
        self._shutdown = False
        self.waiting = False
        """True while blocked waiting for client input."""

    # ---------------------------------------------------------------- output

    def send(self, msg: BackendMessage) -> None:
        """Queue one message."""
        self._out += encode(msg)

    def send_bytes(self, data: bytes) -> None:
        """Queue already encoded bytes (DataRows, the SSLRequest answer)."""
        self._out += data

    @property
    def output_full(self) -> bool:
        """True when the buffered output should be written out."""
        return len(self._out) >= self._flush_at

    async def flush(self) -> None:
        """Write the buffered output and wait while the transport is over its high-water mark."""
        if self._out:
            self.protocol.write(bytes(self._out))
            self._out.clear()
        await self.protocol.drain()

    # ---------------------------------------------------------------- input

    @property
    def has_buffered_input(self) -> bool:
        """True when input beyond the messages handled so far has arrived (or is decoded)."""
        return bool(self._inbox) or self.decoder.buffered > 0 or self.protocol.has_input

    def request_shutdown(self) -> None:
        """Make the next (or the current) wait for input raise :class:`ShutdownRequested`."""
        self._shutdown = True
        self.protocol.interrupt()

    @property
    def shutdown_requested(self) -> bool:
        """True once :meth:`request_shutdown` was called."""
        return self._shutdown

    async def receive(
        self, *, idle_timeout: float | None = None, interruptible: bool = True
    ) -> FrontendMessage | ProtocolViolation:
        """The next message, or the ProtocolViolation of a bad one (in stream order).

        Flushes the output before waiting. Raises :class:`ClientGone` at EOF,
        :class:`IdleTimeout` after ``idle_timeout`` seconds without input and, when
        ``interruptible``, :class:`ShutdownRequested` once the server shuts down.
        """
        while not self._inbox:
            chunk = self.protocol.take_chunk()
            if chunk is not None:
                self._decode(chunk)
                continue
            if self.protocol.at_eof:
                raise ClientGone
            if interruptible and self._shutdown:
                raise ShutdownRequested
            await self.flush()
            self.waiting = True
            try:
                ready = await self.protocol.wait_readable(idle_timeout)
            finally:
                self.waiting = False
            if not ready:
                raise IdleTimeout
        return self._inbox.popleft()

    def _decode(self, chunk: bytes) -> None:
        data: bytes = chunk
        while True:
            try:
                self._inbox.extend(self.decoder.feed(data))
                return
            except ProtocolViolation as exc:
                self._inbox.extend(exc.messages)
                self._inbox.append(exc)
                if exc.fatal:
                    return
                data = b""  # what followed the bad message is still buffered in the decoder
