"""Client authentication: trust, cleartext password, MD5 and SCRAM-SHA-256.

Every failure a user could cause (unknown user, wrong password, no usable password) gives the
same FATAL 28P01 ``password authentication failed for user "x"``, so user names cannot be probed;
a malformed exchange is a FATAL protocol violation. Helpers for CREATE USER make the stored forms.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Protocol

from percolator.server.engine_api import UserInfo
from percolator.server.frontend.config import AuthMethod
from percolator.server.frontend.scram import (
    MECHANISM,
    ScramError,
    ScramExchange,
    ScramVerifier,
    make_scram_verifier,
    verify_password,
)
from percolator.server.sql.errors import (
    INVALID_AUTHORIZATION_SPECIFICATION,
    INVALID_PASSWORD,
    PROTOCOL_VIOLATION,
    SqlError,
)
from percolator.server.wire.codec import (
    ProtocolViolation,
    parse_sasl_initial_response,
    password_text,
)
from percolator.server.wire.messages import (
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendMessage,
    PasswordMessage,
)

__all__ = [
    "AuthExchange",
    "AuthFailed",
    "authenticate",
    "make_md5_hash",
    "make_scram_verifier",
]


class AuthFailed(Exception):
    """Authentication did not succeed; ``error`` is the FATAL to send before closing."""

    def __init__(self, error: SqlError) -> None:
        super().__init__(error.message)
        self.error = error


class AuthExchange(Protocol):
    """The connection, as the authentication exchange sees it."""

    def send(self, msg: BackendMessage) -> None:
        """Queue a message for the client."""

    async def receive_password(self) -> PasswordMessage:
        """Flush and wait for the client's next 'p' message (anything else fails)."""


def make_md5_hash(user: str, password: str) -> str:
    """What Postgres stores for the md5 method: ``md5`` + md5(password + user) in hex."""
    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


def _failed(user: str) -> AuthFailed:
    return AuthFailed(
        SqlError(
            INVALID_PASSWORD, f'password authentication failed for user "{user}"', severity="FATAL"
        )
    )


def _malformed(message: str) -> AuthFailed:
    return AuthFailed(SqlError(PROTOCOL_VIOLATION, message, severity="FATAL"))


async def authenticate(
    method: AuthMethod, user: str, info: UserInfo | None, exchange: AuthExchange
) -> None:
    """Run the exchange ``method`` asks for; returns when ``user`` is authenticated.

    ``info`` is the role as the engine knows it (None: no such role). Raises
    :class:`AuthFailed`.
    """
    if method is AuthMethod.TRUST:
        if info is None:
            raise AuthFailed(
                SqlError(
                    INVALID_AUTHORIZATION_SPECIFICATION,
                    f'role "{user}" does not exist',
                    severity="FATAL",
                )
            )
        return
    verifier = None
    if info is not None and info.scram_verifier is not None:
        verifier = ScramVerifier.parse(info.scram_verifier)
    if method is AuthMethod.PASSWORD:
        await _cleartext(user, info, verifier, exchange)
    elif method is AuthMethod.MD5 and (info is None or info.md5_hash is not None or not verifier):
        # Postgres answers md5 with SCRAM for a user whose password is stored as SCRAM.
        await _md5(user, info, exchange)
    else:
        await _scram(user, verifier, exchange)


async def _cleartext(
    user: str, info: UserInfo | None, verifier: ScramVerifier | None, exchange: AuthExchange
) -> None:
    exchange.send(AuthenticationCleartextPassword())
    password = _password(await exchange.receive_password())
    if info is None or not password:
        raise _failed(user)
    if verifier is not None:
        ok = verify_password(verifier, password)
    elif info.md5_hash is not None:
        ok = hmac.compare_digest(make_md5_hash(user, password), info.md5_hash)
    else:
        ok = False
    if not ok:
        raise _failed(user)


async def _md5(user: str, info: UserInfo | None, exchange: AuthExchange) -> None:
    salt = secrets.token_bytes(4)
    exchange.send(AuthenticationMD5Password(salt))
    answer = _password(await exchange.receive_password())
    if info is None or info.md5_hash is None or not info.md5_hash.startswith("md5"):
        raise _failed(user)
    expected = "md5" + hashlib.md5(info.md5_hash[3:].encode() + salt).hexdigest()
    if not hmac.compare_digest(answer.encode(), expected.encode()):
        raise _failed(user)


async def _scram(user: str, verifier: ScramVerifier | None, exchange: AuthExchange) -> None:
    scram = ScramExchange(verifier, user)
    exchange.send(AuthenticationSASL((MECHANISM,)))
    try:
        initial = parse_sasl_initial_response(await exchange.receive_password())
    except ProtocolViolation as exc:
        raise _malformed(exc.message) from None
    if initial.mechanism != MECHANISM:
        raise _malformed("client selected an invalid SASL authentication mechanism")
    if initial.data is None:
        raise _malformed("malformed SCRAM message (empty message)")
    try:
        exchange.send(AuthenticationSASLContinue(scram.server_first(initial.data)))
        final_message = await exchange.receive_password()
        server_final = scram.server_final(final_message.data)
    except ScramError as exc:
        raise _malformed(str(exc)) from None
    if not scram.authenticated:
        raise _failed(user)
    exchange.send(AuthenticationSASLFinal(server_final))


def _password(msg: PasswordMessage) -> str:
    try:
        return password_text(msg)
    except ProtocolViolation as exc:
        raise _malformed(exc.message) from None
