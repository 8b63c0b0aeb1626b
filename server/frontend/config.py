"""Settings of the wire front end."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

DEFAULT_PORT = 5433
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024


class AuthMethod(StrEnum):
    """How clients prove who they are (the pg_hba.conf method names)."""

    TRUST = "trust"
    PASSWORD = "password"
    """Cleartext password, checked against the stored verifier."""
    MD5 = "md5"
    """MD5 challenge; users with only a SCRAM verifier get SCRAM instead, as in Postgres."""
    SCRAM_SHA_256 = "scram-sha-256"


@dataclass(frozen=True)
class FrontendConfig:
    """Where to listen and how to treat connections."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    """0 picks a free port (see ``Server.port``)."""
    max_connections: int = 100
    auth_method: AuthMethod = AuthMethod.SCRAM_SHA_256
    tls_cert: Path | None = None
    """PEM certificate chain; with ``tls_key`` it makes SSLRequest answer 'S'."""
    tls_key: Path | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    """Largest frontend message (a Query's SQL text, a Bind, a CopyData) in bytes."""
    idle_in_transaction_session_timeout: float = 0.0
    """Seconds a client may sit idle inside a transaction block before it is disconnected;
    0 disables the limit."""
    authentication_timeout: float = 60.0
    """Seconds from connect to the end of authentication (Postgres' authentication_timeout)."""
    output_buffer_size: int = 64 * 1024
    """Bytes of output collected before they are written out during a large result."""
    fetch_batch_rows: int = 1000
    """Rows asked of the engine at a time while streaming a result."""

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
