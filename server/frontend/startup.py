"""The untyped first packets of a connection, up to the StartupMessage or a CancelRequest.

SSLRequest and GSSENCRequest may come first (in either order, each at most once); the
StartupMessage follows on the same socket. A CancelRequest ends the exchange: it is never
answered.
"""

from __future__ import annotations

import ssl

from percolator.server.frontend.channel import MessageChannel
from percolator.server.frontend.tls import answer_gssenc_request, answer_ssl_request
from percolator.server.wire.codec import PROTOCOL_VIOLATION, ProtocolViolation
from percolator.server.wire.messages import (
    CancelRequest,
    GSSENCRequest,
    NegotiateProtocolVersion,
    SSLRequest,
    StartupMessage,
)

# The startup options of the protocol itself (``_pq_.*``); none is supported.
_PROTOCOL_OPTION_PREFIX = "_pq_."


async def read_startup(
    channel: MessageChannel, tls: ssl.SSLContext | None
) -> StartupMessage | CancelRequest:
    """Answer the encryption requests and return the StartupMessage or CancelRequest.

    Raises ProtocolViolation (fatal) for anything else, ``ClientGone`` at EOF.
    """
    seen_ssl = seen_gss = False
    while True:
        msg = await channel.receive(interruptible=False)
        if isinstance(msg, ProtocolViolation):
            raise msg
        if isinstance(msg, SSLRequest) and not seen_ssl:
            seen_ssl = True
            await answer_ssl_request(channel, tls)
        elif isinstance(msg, GSSENCRequest) and not seen_gss:
            seen_gss = True
            await answer_gssenc_request(channel)
        elif isinstance(msg, StartupMessage | CancelRequest):
            return msg
        else:
            raise ProtocolViolation(
                PROTOCOL_VIOLATION, f"unexpected {type(msg).__name__} during startup"
            )


def negotiation_for(startup: StartupMessage) -> NegotiateProtocolVersion | None:
    """The NegotiateProtocolVersion owed for a 3.x (x > 0) startup or protocol options."""
    unknown = tuple(k for k in startup.params if k.startswith(_PROTOCOL_OPTION_PREFIX))
    if startup.minor == 0 and not unknown:
        return None
    return NegotiateProtocolVersion(0, unknown)


def session_options(startup: StartupMessage) -> dict[str, str]:
    """The startup parameters that become session settings (protocol options removed)."""
    return {k: v for k, v in startup.params.items() if not k.startswith(_PROTOCOL_OPTION_PREFIX)}
