"""Fixtures: a fake engine and front-end servers on ephemeral ports."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from percolator.server.frontend.config import AuthMethod, FrontendConfig
from percolator.server.frontend.listener import Server, serve
from tests.frontend.fake_engine import FakeEngine

MakeServer = Callable[..., Awaitable[Server]]


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def make_server(engine: FakeEngine) -> AsyncIterator[MakeServer]:
    """Start a server on an ephemeral port with config overrides; shut down at the end."""
    servers: list[Server] = []

    async def start(**overrides: Any) -> Server:
        settings: dict[str, Any] = {"port": 0, "auth_method": AuthMethod.TRUST}
        settings.update(overrides)
        server = await serve(engine, FrontendConfig(**settings))
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.shutdown(timeout=5)


@pytest.fixture
async def server(make_server: MakeServer) -> Server:
    return await make_server()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate and key, made with openssl."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
