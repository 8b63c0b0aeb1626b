"""Client connections handed from the acceptor process to SQL worker processes.

With ``percolator serve --processes N`` one process listens and N worker processes serve. The
acceptor passes each accepted socket to the worker with the fewest open connections over a Unix
``SOCK_SEQPACKET`` pair (the descriptor travels as ``SCM_RIGHTS``; one packet is one message),
and routes CancelRequests: a backend key's pid names its worker (``pid % N``), and a worker that
receives a CancelRequest for another worker's pid sends it back to the acceptor, which forwards
it. A worker reports each handed connection's end, so the acceptor knows how many each holds and
can enforce ``max_connections`` over all of them.

Messages (first byte):

- ``C`` + admit flag, with one descriptor: acceptor -> worker, a client connection (flag 1: the
  deployment is full, answer 53300 after the startup message).
- ``K`` + pid, secret (two big-endian int32): a cancel, in either direction.
- ``S`` + pid (big-endian int32) + terminate flag: pg_cancel_backend / pg_terminate_backend of
  another worker's session, in either direction.
- ``E`` + count (big-endian int64): worker -> acceptor, how many handed connections have
  ended so far (a running total: a message lost to a full pair is made up by the next).
- ``R``: worker -> acceptor, the worker is serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

_CANCEL = struct.Struct(">ii")
_PID = struct.Struct(">i")
_TOTAL = struct.Struct(">q")
MAX_MESSAGE = 16


class Kind(enum.Enum):
    """What a message on the acceptor/worker pair says."""

    CONNECTION = b"C"
    CANCEL = b"K"
    SIGNAL = b"S"
    ENDED = b"E"
    READY = b"R"


@dataclass(frozen=True)
class Message:
    """One decoded message."""

    kind: Kind
    fd: int | None = None
    full: bool = False
    pid: int = 0
    secret: int = 0
    terminate: bool = False
    ended: int = 0


def encode_cancel(pid: int, secret: int) -> bytes:
    """A ``K`` message."""
    return Kind.CANCEL.value + _CANCEL.pack(pid, secret)


def encode_signal(pid: int, terminate: bool) -> bytes:
    """An ``S`` message."""
    return Kind.SIGNAL.value + _PID.pack(pid) + (b"\x01" if terminate else b"\x00")


def encode_ended(total: int) -> bytes:
    """An ``E`` message."""
    return Kind.ENDED.value + _TOTAL.pack(total)


def encode_connection(full: bool) -> bytes:
    """A ``C`` message (send it with the connection's descriptor)."""
    return Kind.CONNECTION.value + (b"\x01" if full else b"\x00")


def receive(channel: socket.socket) -> Message | None:
    """The next message on a non-blocking ``channel``; None when none is waiting.

    Raises :class:`EOFError` when the other end closed (its process is gone).
    """
    try:
        data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 1)
    except BlockingIOError:
        return None
    if not data:
        raise EOFError("the other process closed the channel")
    kind = Kind(data[:1])
    fd = fds[0] if fds else None
    if kind is Kind.CONNECTION:
        if fd is None:
            raise ValueError("a connection message without its descriptor")
        return Message(kind, fd=fd, full=data[1:2] == b"\x01")
    for extra in fds:  # a descriptor on any other message is a bug: do not leak it
        socket.close(extra)
    if kind is Kind.CANCEL:
        pid, secret = _CANCEL.unpack_from(data, 1)
        return Message(kind, pid=pid, secret=secret)
    if kind is Kind.ENDED:
        (total,) = _TOTAL.unpack_from(data, 1)
        return Message(kind, ended=total)
    if kind is Kind.SIGNAL:
        (pid,) = _PID.unpack_from(data, 1)
        return Message(kind, pid=pid, terminate=data[5:6] == b"\x01")
    return Message(kind)


def send(channel: socket.socket, payload: bytes, fd: int | None = None) -> bool:
    """Send one message; False when the other end is gone or its buffer is full."""
    try:
        if fd is None:
            channel.send(payload)
        else:
            socket.send_fds(channel, [payload], [fd])
    except (BlockingIOError, BrokenPipeError, ConnectionResetError):
        return False
    return True


class WorkerChannel:
    """A worker's end of the pair: receives connections and cancels, reports back."""

    def __init__(
        self,
        channel: socket.socket,
        *,
        on_connection: Callable[[socket.socket, bool], None],
        on_cancel: Callable[[int, int], None],
        on_closed: Callable[[], None],
    ) -> None:
        """``on_connection(sock, full)`` for a handed client socket, ``on_cancel(pid,
        secret)`` for a forwarded cancel, ``on_closed()`` once the acceptor is gone;
        :attr:`on_signal` for a forwarded pg_cancel_backend / pg_terminate_backend."""
        channel.setblocking(False)
        self._channel = channel
        self._on_connection = on_connection
        self._on_cancel = on_cancel
        self._on_closed = on_closed
        self.on_signal: Callable[[int, bool], object] | None = None
        self._ended = 0
        self._reading = False

    def start(self) -> None:
        """Start receiving and tell the acceptor this worker serves."""
        asyncio.get_running_loop().add_reader(self._channel.fileno(), self._readable)
        self._reading = True
        send(self._channel, Kind.READY.value)

    def _readable(self) -> None:
        while True:
            try:
                message = receive(self._channel)
            except (EOFError, OSError):
                self.stop()
                self._on_closed()
                return
            if message is None:
                return
            if message.kind is Kind.CONNECTION and message.fd is not None:
                self._on_connection(socket.socket(fileno=message.fd), message.full)
            elif message.kind is Kind.CANCEL:
                self._on_cancel(message.pid, message.secret)
            elif message.kind is Kind.SIGNAL and self.on_signal is not None:
                self.on_signal(message.pid, message.terminate)
            else:
                log.warning("unexpected message from the acceptor: %s", message.kind)

    def connection_ended(self) -> None:
        """A handed connection ended (counted down by the acceptor)."""
        self._ended += 1
        send(self._channel, encode_ended(self._ended))

    def forward_cancel(self, pid: int, secret: int) -> None:
        """A CancelRequest for another worker's session: the acceptor routes it."""
        send(self._channel, encode_cancel(pid, secret))

    def forward_signal(self, pid: int, terminate: bool) -> None:
        """pg_cancel_backend / pg_terminate_backend of another worker's session."""
        send(self._channel, encode_signal(pid, terminate))

    def stop(self) -> None:
        """Stop receiving (connections already handed over keep running)."""
        if self._reading:
            self._reading = False
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._channel.fileno())
