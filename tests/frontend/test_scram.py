"""SCRAM-SHA-256 and password-hash helpers, without sockets."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from percolator.server.frontend.auth import make_md5_hash
from percolator.server.frontend.scram import (
    ScramError,
    ScramExchange,
    ScramVerifier,
    make_scram_verifier,
    saslprep,
    verify_password,
)


def client_final(
    password: str, client_first_bare: str, server_first: str, binding: str = "biws"
) -> str:
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c={binding},r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def run(verifier: str | None, password: str, gs2: str = "n,,", binding: str = "biws") -> bool:
    parsed = ScramVerifier.parse(verifier) if verifier else None
    exchange = ScramExchange(parsed, "u")
    bare = "n=ignored,r=clientnonce123"
    server_first = exchange.server_first(f"{gs2}{bare}".encode()).decode()
    assert server_first.startswith("r=clientnonce123")
    final = client_final(password, bare, server_first, binding)
    exchange.server_final(final.encode())
    return exchange.authenticated


def test_verifier_format_and_password_check() -> None:
    text = make_scram_verifier("pencil", iterations=4096, salt=b"0123456789abcdef")
    mechanism, rest = text.split("$", 1)
    assert mechanism == "SCRAM-SHA-256" and rest.startswith("4096:MDEyMzQ1Njc4OWFiY2RlZg==$")
    verifier = ScramVerifier.parse(text)
    assert verifier is not None and str(verifier) == text
    assert verify_password(verifier, "pencil")
    assert not verify_password(verifier, "pencil2")
    assert ScramVerifier.parse("md5abc") is None
    assert make_md5_hash("u", "secret") == "md5" + hashlib.md5(b"secretu").hexdigest()


def test_exchange_accepts_right_password_only() -> None:
    verifier = make_scram_verifier("secret")
    assert run(verifier, "secret")
    assert run(verifier, "secret", gs2="y,,", binding="eSws")
    assert not run(verifier, "wrong")
    assert not run(None, "secret")  # unknown user: a full exchange that fails


def test_exchange_rejects_bad_binding_and_malformed_messages() -> None:
    verifier = make_scram_verifier("secret")
    with pytest.raises(ScramError):
        run(verifier, "secret", gs2="n,,", binding="eSws")
    with pytest.raises(ScramError):
        run(verifier, "secret", gs2="p=tls-server-end-point,,")
    exchange = ScramExchange(ScramVerifier.parse(verifier), "u")
    with pytest.raises(ScramError):
        exchange.server_first(b"garbage")
    exchange.server_first(b"n,,n=,r=abc")
    with pytest.raises(ScramError):
        exchange.server_final(b"c=biws,r=othernonce,p=AAAA")


def test_saslprep() -> None:
    assert saslprep("I\u00adX") == "IX"  # soft hyphen maps to nothing
    assert saslprep("\u2168") == "IX"  # NFKC
    assert saslprep("a\u00a0b") == "a b"  # non-ASCII space maps to space
    assert saslprep("\u0007") == "\u0007"  # prohibited: used as it is, like Postgres
