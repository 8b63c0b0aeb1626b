"""node-postgres (the npm package ``pg``) against the SQL server: parameters, transactions,
errors, multi-statement queries, named statements, result types and a pool.

The package is installed from tests/server/node/package.json (``.ci/run`` runs ``npm install``
there); without node or the package the module skips and says why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.conftest import SqlServer

NODE_DIR = Path(__file__).parent / "node"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (NODE_DIR / "node_modules" / "pg").is_dir(),
        reason="node-postgres is not installed: run npm install in tests/server/node",
    ),
]


@pytest.fixture(scope="module")
def results(sql_server: SqlServer) -> dict[str, object]:
    env = {
        **os.environ,
        "PGHOST": sql_server.host,
        "PGPORT": str(sql_server.port),
        "PGUSER": sql_server.user,
    }
    run = subprocess.run(
        ["node", "check.js"], cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    out: dict[str, object] = {}
    for line in run.stdout.splitlines():
        name, _, value = line.partition("=")
        out[name] = json.loads(value)
    return out


def test_parameters_and_returning(results: dict[str, object]) -> None:
    assert results["inserted"] == [1, 2]
    assert results["rowCount"] == 2
    assert results["row"] == ["ada", "12.50", "2024-01-02T03:04:05.000Z"]


def test_transaction_rollback(results: dict[str, object]) -> None:
    assert results["after_rollback"] == "bob"


def test_errors_carry_sqlstate(results: dict[str, object]) -> None:
    assert results["unique_code"] == "23505"
    assert results["undefined_column_code"] == "42703"


def test_multi_statement_and_named_statements(results: dict[str, object]) -> None:
    assert results["multi"] == [{"a": 1}, {"b": 2}]
    assert results["named"] == ["ada", "bob"]


def test_result_types(results: dict[str, object]) -> None:
    assert results["typed"] == ["1", True, "x"]  # pg returns int8 as a string by default
    assert results["oids"] == [20, 16, 25]


def test_pool(results: dict[str, object]) -> None:
    assert results["pool"] == [1, 2, 2, 2, 2, 2]
