"""Postgres's own isolation tester against the server: each spec in ``isolation/`` runs on a
database of the real Postgres and on the server, and the two outputs must be the same, line for
line (which step waited, which completed when, each error's message, each result).

``isolationtester`` ships in the pgserver wheel (and in Debian's postgresql-15 package). It
tells a waiting step by asking ``pg_isolation_test_session_is_blocked``, so these specs also
test that function and ``pg_blocking_pids`` (server/sql/backends.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.conftest import SqlServer

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


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_spec_runs_as_on_postgres(
    tester: Path, sql_server: SqlServer, reference_dsn: str, spec: Path
) -> None:
    expected = run_spec(tester, reference_dsn, spec)
    assert "starting permutation" in expected and "step " in expected, expected
    got = run_spec(tester, sql_server.conninfo(), spec)
    assert got.splitlines() == expected.splitlines()
