"""SCRAM-SHA-256 (RFC 5802, RFC 7677) as Postgres does it on the server side.

Postgres stores ``SCRAM-SHA-256$<iterations>:<b64 salt>$<b64 StoredKey>:<b64 ServerKey>`` and
never the password; :class:`ScramExchange` verifies a client's proof against that, sans-IO.
The SCRAM user name the client sends is ignored (the startup packet's user is the one
authenticated) and channel binding is not offered, so the gs2 flag must be ``n`` or ``y``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass

MECHANISM = "SCRAM-SHA-256"
DEFAULT_ITERATIONS = 4096
_SALT_BYTES = 16
_NONCE_BYTES = 18

# Unknown users get a made-up exchange with a salt derived from this, so the server's answers do
# not reveal whether a user exists (Postgres' mock authentication).
_MOCK_SECRET = secrets.token_bytes(32)


class ScramError(Exception):
    """A malformed SCRAM message (reported as a protocol violation)."""


@dataclass(frozen=True)
class ScramVerifier:
    """What the server stores for a password."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @classmethod
    def parse(cls, text: str) -> ScramVerifier | None:
        """Read Postgres's verifier format; None when ``text`` is not one."""
        try:
            mechanism, rest = text.split("$", 1)
            iter_salt, keys = rest.split("$", 1)
            iterations, salt = iter_salt.split(":", 1)
            stored_key, server_key = keys.split(":", 1)
            if mechanism != MECHANISM:
                return None
            return cls(
                int(iterations),
                base64.b64decode(salt, validate=True),
                base64.b64decode(stored_key, validate=True),
                base64.b64decode(server_key, validate=True),
            )
        except (ValueError, binascii.Error):
            return None

    def __str__(self) -> str:
        return (
            f"{MECHANISM}${self.iterations}:{_b64(self.salt)}"
            f"${_b64(self.stored_key)}:{_b64(self.server_key)}"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def saslprep(password: str) -> str:
    """SASLprep (RFC 4013) as Postgres applies it: a password it cannot prepare (prohibited
    characters, bad bidirectional text) is used as it is."""
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in password
        if not stringprep.in_table_b1(ch)
    )
    prepared = unicodedata.normalize("NFKC", mapped)
    if not prepared:
        return password
    for ch in prepared:
        if (
            stringprep.in_table_c12(ch)
            or stringprep.in_table_c21_c22(ch)
            or stringprep.in_table_c3(ch)
            or stringprep.in_table_c4(ch)
            or stringprep.in_table_c5(ch)
            or stringprep.in_table_c6(ch)
            or stringprep.in_table_c7(ch)
            or stringprep.in_table_c8(ch)
            or stringprep.in_table_c9(ch)
            or stringprep.in_table_a1(ch)
        ):
            return password
    if any(stringprep.in_table_d1(ch) for ch in prepared):
        if any(stringprep.in_table_d2(ch) for ch in prepared):
            return password
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            return password
    return prepared


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password).encode(), salt, iterations)
    stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    return stored_key, _hmac(salted, b"Server Key")


def make_scram_verifier(
    password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> str:
    """The verifier Postgres would store for ``password`` (for CREATE USER ... PASSWORD)."""
    if salt is None:
        salt = secrets.token_bytes(_SALT_BYTES)
    stored_key, server_key = _keys(password, salt, iterations)
    return str(ScramVerifier(iterations, salt, stored_key, server_key))


def verify_password(verifier: ScramVerifier, password: str) -> bool:
    """True when ``password`` is the one the verifier was made from (cleartext method)."""
    stored_key, server_key = _keys(password, verifier.salt, verifier.iterations)
    return hmac.compare_digest(stored_key, verifier.stored_key) and hmac.compare_digest(
        server_key, verifier.server_key
    )


def _mock_verifier(user: str) -> ScramVerifier:
    salt = hashlib.sha256(_MOCK_SECRET + user.encode()).digest()[:_SALT_BYTES]
    return ScramVerifier(DEFAULT_ITERATIONS, salt, b"\0" * 32, b"\0" * 32)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed SCRAM message: {message!r}")
        out.append((part[0], part[2:]))
    return out


class ScramExchange:
    """The server side of one SCRAM-SHA-256 exchange.

    Call :meth:`server_first` with the client-first-message and :meth:`server_final` with the
    client-final-message; then :attr:`authenticated` tells the outcome. A verifier of None
    (unknown user, or no usable password) runs the exchange to the end and fails.
    """

    def __init__(self, verifier: ScramVerifier | None, user: str) -> None:
        """Authenticate ``user`` against ``verifier``."""
        self._real = verifier is not None
        self._verifier = verifier if verifier is not None else _mock_verifier(user)
        self._gs2_flag = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authenticated = False

    def server_first(self, client_first: bytes) -> bytes:
        """Answer the client-first-message (``n,,n=user,r=nonce``)."""
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise ScramError("malformed SCRAM message: not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise ScramError("malformed SCRAM message: missing gs2 header")
        flag, authzid, bare = parts
        if flag.startswith("p="):
            raise ScramError("channel binding is not supported by this server")
        if flag not in ("n", "y"):
            raise ScramError(f"malformed SCRAM message: unexpected channel-binding flag {flag!r}")
        if authzid:
            raise ScramError("client uses authorization identity, but it is not supported")
        attrs = _attributes(bare)
        if attrs[0][0] == "m":
            raise ScramError("client requires an unsupported SCRAM extension")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("malformed SCRAM message: expected n= and r=")
        client_nonce = attrs[1][1]
        if not all(0x21 <= ord(c) <= 0x7E and c != "," for c in client_nonce):
            raise ScramError("malformed SCRAM message: invalid nonce")
        self._gs2_flag = flag
        self._client_first_bare = bare
        self._nonce = client_nonce + _b64(secrets.token_bytes(_NONCE_BYTES))
        v = self._verifier
        self._server_first = f"r={self._nonce},s={_b64(v.salt)},i={v.iterations}"
        return self._server_first.encode()

    def server_final(self, client_final: bytes) -> bytes:
        """Check the client-final-message (``c=biws,r=nonce,p=proof``); returns the
        server-final-message, meaningful only when :attr:`authenticated` became True."""
        if not self._server_first:
            raise ScramError("malformed SCRAM message: client-final before client-first")
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise ScramError("malformed SCRAM message: not UTF-8") from None
        attrs = _attributes(text)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise ScramError("malformed SCRAM message: expected c=, r= and p=")
        expected_binding = _b64(f"{self._gs2_flag},,".encode())
        if attrs[0][1] != expected_binding:
            raise ScramError("SCRAM channel binding check failed")
        if attrs[1][1] != self._nonce:
            raise ScramError("SCRAM nonce does not match")
        try:
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except binascii.Error:
            raise ScramError("malformed SCRAM message: invalid proof") from None
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        v = self._verifier
        client_signature = _hmac(v.stored_key, auth_message)
        if len(proof) == len(client_signature):
            client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
            matches = hmac.compare_digest(hashlib.sha256(client_key).digest(), v.stored_key)
        else:
            matches = False
        self.authenticated = self._real and matches
        return f"v={_b64(_hmac(v.server_key, auth_message))}".encode()
