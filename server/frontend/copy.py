"""The COPY sub-protocol: CopyInResponse/CopyData/CopyDone from the client, CopyOutResponse and
CopyData to it. Flush and Sync arriving during COPY FROM STDIN are ignored, as Postgres does
(libpq may send them)."""

from __future__ import annotations

import contextlib

from percolator.server.engine_api import CopyIn, CopyOut
from percolator.server.frontend.channel import ClientGone, MessageChannel
from percolator.server.sql.errors import PROTOCOL_VIOLATION, QUERY_CANCELED, SqlError
from percolator.server.wire.codec import ProtocolViolation
from percolator.server.wire.messages import (
    CopyData,
    CopyDone,
    CopyFail,
    CopyInResponse,
    CopyOutResponse,
    Flush,
    FormatCode,
    Sync,
)

BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\0"
_HEADER_FIXED = len(BINARY_SIGNATURE) + 8  # + flags (int32) + extension length (int32)


def _format(binary: bool) -> int:
    return FormatCode.BINARY if binary else FormatCode.TEXT


async def copy_in(channel: MessageChannel, copy: CopyIn) -> str:
    """Receive the client's COPY data into ``copy``; returns the command tag.

    Raises SqlError when the client fails the COPY or breaks the sub-protocol (after telling
    ``copy`` to discard), ClientGone or a fatal ProtocolViolation for the connection to handle.
    """
    fmt = _format(copy.binary)
    channel.send(CopyInResponse(fmt, (fmt,) * copy.column_count))
    try:
        while True:
            msg = await channel.receive(interruptible=False)
            if isinstance(msg, CopyData):
                await copy.write(msg.data)
            elif isinstance(msg, CopyDone):
                return await copy.finish()
            elif isinstance(msg, CopyFail):
                await copy.fail(msg.message)
                raise SqlError(QUERY_CANCELED, f"COPY from stdin failed: {msg.message}")
            elif isinstance(msg, Flush | Sync):
                continue
            elif isinstance(msg, ProtocolViolation):
                await copy.fail(msg.message)
                if msg.fatal:
                    raise msg
                raise SqlError(msg.sqlstate, msg.message)
            else:
                await copy.fail("unexpected message during COPY")
                raise SqlError(
                    PROTOCOL_VIOLATION,
                    f"unexpected message type {type(msg).__name__} during COPY from stdin",
                )
    except (ClientGone, ConnectionError):
        with contextlib.suppress(Exception):
            await copy.fail("connection lost during COPY")
        raise


async def copy_out(channel: MessageChannel, copy: CopyOut) -> str:
    """Send ``copy``'s data to the client; returns the command tag."""
    fmt = _format(copy.binary)
    channel.send(CopyOutResponse(fmt, (fmt,) * copy.column_count))
    held = b""
    first = True
    async for chunk in copy.chunks():
        if first and copy.binary and _is_binary_header(chunk):
            # Postgres sends the binary header in the CopyData of the first row (or of the
            # trailer): psycopg parses each CopyData as one row and fails on a lone header.
            held, first = chunk, False
            continue
        first = False
        channel.send(CopyData(held + chunk))
        held = b""
        if channel.output_full:
            await channel.flush()
    if held:
        channel.send(CopyData(held))
    channel.send(CopyDone())
    return copy.command_tag


def _is_binary_header(chunk: bytes) -> bool:
    """True for a chunk that is exactly the binary COPY header (signature, flags, extension
    area) without row data."""
    if not chunk.startswith(BINARY_SIGNATURE) or len(chunk) < _HEADER_FIXED:
        return False
    extension = int.from_bytes(chunk[_HEADER_FIXED - 4 : _HEADER_FIXED], "big")
    return len(chunk) == _HEADER_FIXED + extension
