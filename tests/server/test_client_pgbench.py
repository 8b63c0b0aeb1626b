"""pgbench 15 against the SQL server: its own initialization (COPY ... FREEZE, ALTER TABLE ADD
PRIMARY KEY, VACUUM, the partition probe), and a TPC-B-like custom script under the simple,
extended and prepared protocols, checked for conservation of money afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.server.conftest import SqlServer

pytestmark = pytest.mark.skipif(shutil.which("pgbench") is None, reason="pgbench is not installed")

SCRIPT = """\\set aid random(1, 200)
\\set tid random(1, 10)
\\set delta random(-100, 100)
BEGIN;
UPDATE t_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM t_accounts WHERE aid = :aid;
UPDATE t_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
INSERT INTO t_history (tid, aid, delta, mtime) VALUES (:tid, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""


def pgbench(server: SqlServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PGHOST": server.host,
        "PGPORT": str(server.port),
        "PGUSER": server.user,
        "PGDATABASE": "postgres",
    }
    return subprocess.run(["pgbench", *args], capture_output=True, text=True, env=env, timeout=300)


def test_pgbench_initializes_its_tables(sql_server: SqlServer) -> None:
    result = pgbench(sql_server, "-i", "-s", "1", "-q")
    assert result.returncode == 0, result.stderr
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pgbench_accounts").fetchone() == (100000,)
        assert conn.execute("SELECT count(*) FROM pgbench_tellers").fetchone() == (10,)
        # ALTER TABLE ... ADD PRIMARY KEY made aid a key: a point lookup by it.
        plan = conn.execute("EXPLAIN SELECT abalance FROM pgbench_accounts WHERE aid = 7")
        assert "Point Get" in plan.fetchone()[0]  # type: ignore[index]
    run = pgbench(sql_server, "-S", "-t", "50", "-c", "2")
    assert run.returncode == 0, run.stderr
    assert "number of failed transactions: 0" in run.stdout


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_tpcb_like_script_conserves_money(sql_server: SqlServer, tmp_path: Path, mode: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        for t in ("t_accounts", "t_tellers", "t_history"):
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute("CREATE TABLE t_accounts (aid int PRIMARY KEY, abalance int)")
        conn.execute("CREATE TABLE t_tellers (tid int PRIMARY KEY, tbalance int)")
        conn.execute("CREATE TABLE t_history (tid int, aid int, delta int, mtime timestamp)")
        conn.execute("INSERT INTO t_accounts SELECT g, 0 FROM generate_series(1, 200) g")
        conn.execute("INSERT INTO t_tellers SELECT g, 0 FROM generate_series(1, 10) g")
    script = tmp_path / "tpcb.sql"
    script.write_text(SCRIPT)
    result = pgbench(
        sql_server,
        "-n",
        "-f",
        str(script),
        "-M",
        mode,
        "-c",
        "4",
        "-j",
        "2",
        "-t",
        "25",
        "--max-tries",
        "100",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "number of transactions actually processed: 100/100" in result.stdout
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        (n, history) = conn.execute(
            "SELECT count(*), coalesce(sum(delta), 0) FROM t_history"
        ).fetchone()  # type: ignore[misc]
        (accounts,) = conn.execute("SELECT sum(abalance) FROM t_accounts").fetchone()  # type: ignore[misc]
        (tellers,) = conn.execute("SELECT sum(tbalance) FROM t_tellers").fetchone()  # type: ignore[misc]
    # Every committed transaction moved delta through both tables and logged it once;
    # retried (conflicted) attempts left nothing behind.
    assert n == 100
    assert accounts == tellers == history
