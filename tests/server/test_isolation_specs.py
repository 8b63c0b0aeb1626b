"""Postgres's own isolation tester against the server: each spec in ``isolation/`` runs on a
database of the real Postgres and on the server, and the two outputs must be the same, line for
line (which step waited, which completed when, each error's message, each result).

``isolationtester`` ships in the pgserver wheel (and in Debian's postgresql-15 package). It
tells a waiting step by asking ``pg_isolation_test_session_is_blocked``, so these specs also
test that function and ``pg_blocking_pids`` (server/sql/backends.py). They run again against
``percolator serve --processes 2`` (server/pool_backends.py), where the sessions of one spec
are served by two processes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, server_process

SPECS = sorted((Path(__file__).parent / "isolation").glob("*.spec"))
_TESTER = Path("lib/postgresql/pgxs/src/test/isolation/isolationtester")


def isolation_tester() -> Path | None:
    """The isolationtester binary: pgserver's, else the system Postgres's."""
    candidates = []
    try:
        import pgserver

        candidates.append(Path(pgserver.__file__).parent / "pginstall" / _TESTER)
    except ImportError:
        pass
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        libdir = subprocess.run(
            [pg_config, "--pkglibdir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        candidates.append(Path(libdir) / "pgxs/src/test/isolation/isolationtester")
    candidates.append(Path("/usr/lib/postgresql/15") / _TESTER)
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def run_spec(tester: Path, conninfo: str, spec: Path) -> str:
    with spec.open() as stdin:
        done = subprocess.run(
            [str(tester), conninfo],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, f"isolationtester failed on {spec.name}:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def tester() -> Path:
    found = isolation_tester()
    if found is None:
        pytest.skip("isolationtester not found (pgserver's wheel or Debian's postgresql-15)")
    return found


_EXPECTED: dict[str, str] = {}


def expected_output(tester: Path, reference_dsn: str, spec: Path) -> str:
    """The spec's output on the real Postgres (run once per module)."""
    if spec.stem not in _EXPECTED:
        expected = run_spec(tester, reference_dsn, spec)
        assert "starting permutation" in expected and "step " in expected, expected
        _EXPECTED[spec.stem] = expected
    return _EXPECTED[spec.stem]


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_spec_runs_as_on_postgres(
    tester: Path, sql_server: SqlServer, reference_dsn: str, spec: Path
) -> None:
    expected = expected_output(tester, reference_dsn, spec)
    got = run_spec(tester, sql_server.conninfo(), spec)
    assert got.splitlines() == expected.splitlines()


POOL_DIFFERENCES = {
    "sequence": "each worker process draws nextval from a reservation of its own",
}
"""Specs whose output differs with several worker processes, and why (docs/operations.md)."""


@pytest.fixture(scope="module")
def pool_server(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    """``percolator serve --processes 2``: the tester's sessions land on both workers, so
    lock waits, pg_isolation_test_session_is_blocked and DDL cross processes."""
    store = asyncio.run(create_database(embedded_pg.dsn, "isopool"))
    with server_process(store, "--processes", "2") as server:
        yield server


@pytest.mark.parametrize(
    "spec",
    [s for s in SPECS if s.stem not in POOL_DIFFERENCES],
    ids=[s.stem for s in SPECS if s.stem not in POOL_DIFFERENCES],
)
def test_spec_runs_as_on_postgres_with_two_worker_processes(
    tester: Path, pool_server: SqlServer, reference_dsn: str, spec: Path
) -> None:
    expected = expected_output(tester, reference_dsn, spec)
    got = run_spec(tester, pool_server.conninfo(), spec)
    assert got.splitlines() == expected.splitlines()
