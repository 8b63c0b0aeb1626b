"""psql (libpq) against the front end: authentication methods and TLS."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from percolator.server.frontend.config import AuthMethod
from percolator.server.frontend.listener import Server
from tests.frontend.conftest import MakeServer
from tests.frontend.fake_engine import PASSWORD

PSQL = shutil.which("psql") or "/usr/bin/psql"
pytestmark = pytest.mark.skipif(not os.path.exists(PSQL), reason="psql not installed")


async def psql(
    server: Server,
    sql: str,
    *,
    user: str = "u",
    password: str | None = None,
    sslmode: str = "prefer",
) -> tuple[int, str, str]:
    """Run ``psql -c sql``; returns (exit code, stdout, stderr)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin"),
        "PGPASSFILE": "/nonexistent",
        "PGCONNECT_TIMEOUT": "10",
        "PGSSLMODE": sslmode,
    }
    if password is not None:
        env["PGPASSWORD"] = password
    proc = await asyncio.create_subprocess_exec(
        PSQL,
        "-X",
        "-A",
        "-t",
        "-w",
        "-h",
        "127.0.0.1",
        "-p",
        str(server.port),
        "-U",
        user,
        "-d",
        "db",
        "-c",
        sql,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_trust_query(server: Server) -> None:
    code, out, err = await psql(server, "select 1, 'x'; select generate_series(1, 3)")
    assert code == 0, err
    assert out.split() == ["1|x", "1", "2", "3"]
    code, out, err = await psql(server, "select fail")
    assert code == 1 and 'column "fail" does not exist' in err


@pytest.mark.parametrize("method", [AuthMethod.SCRAM_SHA_256, AuthMethod.MD5, AuthMethod.PASSWORD])
async def test_password_methods(make_server: MakeServer, method: AuthMethod) -> None:
    server = await make_server(auth_method=method)
    code, out, err = await psql(server, "select 1", password=PASSWORD)
    assert (code, out.strip()) == (0, "1"), err
    code, _, err = await psql(server, "select 1", password="wrong")
    assert code == 2 and 'password authentication failed for user "u"' in err
    code, _, err = await psql(server, "select 1", user="ghost", password=PASSWORD)
    assert code == 2 and 'password authentication failed for user "ghost"' in err


async def test_md5_falls_back_to_scram_and_md5_only_user(make_server: MakeServer) -> None:
    server = await make_server(auth_method=AuthMethod.MD5)
    code, out, err = await psql(server, "select 1", user="scramonly", password=PASSWORD)
    assert (code, out.strip()) == (0, "1"), err
    code, out, err = await psql(server, "select 1", user="md5only", password=PASSWORD)
    assert (code, out.strip()) == (0, "1"), err
    server = await make_server(auth_method=AuthMethod.PASSWORD)
    code, out, err = await psql(server, "select 1", user="md5only", password=PASSWORD)
    assert (code, out.strip()) == (0, "1"), err


async def test_tls_required(make_server: MakeServer, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server = await make_server(tls_cert=cert, tls_key=key, auth_method=AuthMethod.SCRAM_SHA_256)
    code, out, err = await psql(server, "select 42", password=PASSWORD, sslmode="require")
    assert (code, out.strip()) == (0, "42"), err
    plain = await make_server()
    code, _, err = await psql(plain, "select 1", sslmode="require")
    assert code == 2 and "does not support SSL" in err
