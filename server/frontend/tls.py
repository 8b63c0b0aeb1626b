"""TLS for client connections: the answer to SSLRequest and the server-side handshake.

With a certificate and key configured, SSLRequest is answered 'S' and the socket is upgraded
in place (``loop.start_tls(..., server_side=True)``); otherwise, and always for GSSENCRequest,
the answer is 'N' and the client goes on in plaintext on the same socket (or gives up, with
``sslmode=require``). The answer byte is sent alone: asyncpg requires it.

A self-signed certificate for testing::

    openssl req -x509 -newkey rsa:2048 -nodes -days 365 \\
        -keyout server.key -out server.crt -subj "/CN=localhost"

Clients then connect with ``sslmode=require`` (which does not verify the certificate); for
``verify-full`` give them the certificate as root (``sslrootcert=server.crt``).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from percolator.server.frontend.channel import MessageChannel
from percolator.server.wire.codec import PROTOCOL_VIOLATION, ProtocolViolation

_ACCEPT = b"S"
_REFUSE = b"N"
_HANDSHAKE_TIMEOUT = 30.0


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The server-side context for a PEM certificate chain and its private key."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


async def answer_ssl_request(channel: MessageChannel, context: ssl.SSLContext | None) -> None:
    """Answer an SSLRequest and, when accepted, run the handshake.

    Raises a fatal ProtocolViolation when the client sent more bytes before the answer: they
    would have been read as plaintext where TLS was promised.
    """
    if channel.protocol.is_tls:
        raise ProtocolViolation(PROTOCOL_VIOLATION, "SSLRequest received on an encrypted link")
    if context is None:
        await answer_gssenc_request(channel)
        return
    if channel.has_buffered_input:
        raise ProtocolViolation(PROTOCOL_VIOLATION, "received unencrypted data after SSL request")
    channel.send_bytes(_ACCEPT)
    await channel.flush()
    await channel.protocol.start_tls(context, _HANDSHAKE_TIMEOUT)


async def answer_gssenc_request(channel: MessageChannel) -> None:
    """Refuse GSSAPI encryption (and SSL when TLS is not configured)."""
    channel.send_bytes(_REFUSE)
    await channel.flush()
