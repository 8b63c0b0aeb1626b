"""``percolator cluster``: a real local cluster (2 shards, 2 SQL servers, 1 worker) started by
the CLI as a user would, then driven through SQL, the status command and the Python API's
fault operations (kill, restart), and finally stopped.

One cluster for the whole module; the tests run in order and the last one stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from percolator.server.cluster import Cluster, ClusterError, ClusterSpec, Role
from tests.faults.load import wait_until

CLI_TIMEOUT_S = 300  # a loaded 2-core machine starts six processes slowly


def cli(*args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``percolator cluster ...`` as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "percolator.server.cli", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Running:
    dir: Path
    up_output: str

    @property
    def cluster(self) -> Cluster:
        # Loaded afresh each time: the state file is the truth other commands change.
        return Cluster.load(self.dir)

    def status_json(self) -> tuple[int, dict[str, Any]]:
        result = cli("status", "--dir", str(self.dir), "--json", timeout=60)
        assert result.stderr == "", result.stderr
        return result.returncode, json.loads(result.stdout)

    def alive(self) -> dict[str, bool]:
        _, data = self.status_json()
        return {p["name"]: p["alive"] for p in data["processes"]}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("cluster") / "c"
    up = cli("up", "--dir", str(folder), "--shards", "2", "--servers", "2", "--workers", "1")
    try:
        assert up.returncode == 0, f"cluster up failed:\n{up.stdout}\n{up.stderr}"
        yield Running(folder, up.stdout)
    finally:
        # Whatever the tests did, leave nothing running.
        try:
            Cluster.load(folder).down(timeout=20)
        except ClusterError:
            pass


def gone(pid: int | None) -> bool:
    """True when the process no longer runs (a zombie waiting for its parent counts)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def connect(conninfo: str) -> psycopg.Connection[Any]:
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)


def query(conninfo: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with connect(conninfo) as conn:
        return conn.execute(sql, params or None).fetchall()


def test_up_prints_how_to_connect(running: Running) -> None:
    cluster = running.cluster
    out = running.up_output
    ports = [port for _, port in cluster.server_addresses]
    assert len(ports) == 2
    for port in ports:
        assert f'psql "host=127.0.0.1 port={port} user=postgres dbname=postgres"' in out
    assert f"host=127.0.0.1,127.0.0.1 port={ports[0]},{ports[1]}" in out
    assert cluster.conninfo in out
    assert cluster.coordinator_address in out
    assert cluster.store in out
    # Every process has its log in the cluster's folder.
    names = {p.name for p in cluster.state.processes}
    assert names == {"shard-0", "shard-1", "coordinator", "server-0", "server-1", "worker-0"}
    for record in cluster.state.processes:
        assert Path(record.log) == running.dir / "logs" / f"{record.name}.log"
        assert Path(record.log).exists()


def test_status_json_shows_everything_alive(running: Running) -> None:
    code, data = running.status_json()
    assert code == 0
    assert data["dir"] == str(running.dir)
    by_name = {p["name"]: p for p in data["processes"]}
    assert {p["role"] for p in data["processes"]} == {r.value for r in Role}
    for name, p in by_name.items():
        assert p["alive"] and p["pid_alive"], name
        assert psutil.pid_exists(p["pid"]), name
        if p["role"] == "worker":
            assert p["address"] is None and p["port_open"] is None
        else:
            assert p["address"].startswith("127.0.0.1:") and p["port_open"], name
    # The table form too.
    table = cli("status", "--dir", str(running.dir), timeout=60)
    assert table.returncode == 0
    assert table.stdout.count(" alive") == 6, table.stdout


def test_processes_outlive_up_in_their_own_sessions(running: Running) -> None:
    for record in running.cluster.state.processes:
        assert record.pid is not None and not gone(record.pid), record.name
        # Each leads a session of its own: a Ctrl-C at the terminal that ran `up` (which has
        # exited by now) does not reach them.
        assert os.getsid(record.pid) == record.pid, record.name


def test_write_on_one_server_read_on_the_other(running: Running) -> None:
    a, b = (running.cluster.server_conninfo(i) for i in range(2))
    with connect(a) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance int)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO accounts VALUES (%s, %s, %s)",
                [(i, f"owner-{i}", 100) for i in range(50)],
            )
    # DDL reaches the other server's catalog cache within its catalog poll (1 s); the rows,
    # once it knows the table, are there at once: they are in the shards.
    rows = wait_until(
        lambda: query(b, "SELECT count(*), sum(balance) FROM accounts"), 60, "the table on server-1"
    )
    assert rows == [(50, 5000)]
    # And the other way round, in one transaction on server-1.
    with connect(b) as conn, conn.transaction():
        conn.execute("UPDATE accounts SET balance = balance - 30 WHERE id = 1")
        conn.execute("UPDATE accounts SET balance = balance + 30 WHERE id = 2")
    assert query(a, "SELECT id, balance FROM accounts WHERE id IN (1, 2) ORDER BY id") == [
        (1, 70),
        (2, 130),
    ]


def test_multi_host_connection_string(running: Running) -> None:
    cluster = running.cluster
    with connect(cluster.conninfo) as conn:
        assert conn.execute("SELECT count(*) FROM accounts").fetchone() == (50,)
        assert conn.info.port == cluster.server_addresses[0][1]


def test_observer_runs_in_the_worker(running: Running) -> None:
    a, b = (running.cluster.server_conninfo(i) for i in range(2))
    with connect(a) as conn:
        conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
        conn.execute("CREATE TABLE lengths (id int PRIMARY KEY, n int)")
        conn.execute(
            "CREATE OBSERVER doc_length ON docs (body) AS $$ "
            "INSERT INTO lengths VALUES (NEW.id, length(NEW.body)) "
            "ON CONFLICT (id) DO UPDATE SET n = excluded.n $$"
        )
    # Written through the other server; the servers run no observers (--observer-workers 0),
    # so only the worker process can fill `lengths`.
    wait_until(lambda: query(b, "SELECT count(*) FROM docs") == [(0,)], 60, "docs on server-1")
    with connect(b) as conn:
        conn.execute("INSERT INTO docs VALUES (1, 'hello'), (2, 'percolator'), (3, '')")
    expected = [(1, 5), (2, 10), (3, 0)]
    wait_until(
        lambda: query(a, "SELECT id, n FROM lengths ORDER BY id") == expected,
        90,
        "the observer's writes",
    )


def test_up_on_a_running_cluster_is_refused(running: Running) -> None:
    result = cli("up", "--dir", str(running.dir), "--shards", "2", timeout=60)
    assert result.returncode != 0
    assert "already running" in result.stderr
    assert all(running.alive().values())
    with pytest.raises(ClusterError, match="already running"):
        Cluster.up(ClusterSpec(shards=2, dir=running.dir))


def test_kill_a_server_then_restart_it(running: Running) -> None:
    cluster = running.cluster
    old_pid = cluster.state.process("server-1").pid
    cluster.kill("server-1")
    assert gone(old_pid)

    code, data = running.status_json()
    assert code == 1  # something is dead
    alive = {p["name"]: p["alive"] for p in data["processes"]}
    assert alive.pop("server-1") is False
    assert all(alive.values()), alive

    # The other server still works, and the multi-host string falls over to it.
    assert query(cluster.server_conninfo(0), "SELECT count(*) FROM accounts") == [(50,)]
    b_port, a_port = cluster.server_addresses[1][1], cluster.server_addresses[0][1]
    failover = f"host=127.0.0.1,127.0.0.1 port={b_port},{a_port} user=postgres dbname=postgres"
    with connect(failover) as conn:
        assert conn.info.port == a_port
        conn.execute("INSERT INTO accounts VALUES (100, 'during the outage', 1)")

    status = cluster.restart("server-1")
    assert status.alive and status.pid != old_pid
    assert Cluster.load(running.dir).state.process("server-1").pid == status.pid
    assert all(running.alive().values())
    assert query(cluster.server_conninfo(1), "SELECT owner FROM accounts WHERE id = 100") == [
        ("during the outage",)
    ]


def test_kill_a_shard_then_restart_it(running: Running) -> None:
    cluster = running.cluster
    cluster.kill("shard-1")
    assert running.alive()["shard-1"] is False
    cluster.restart("shard-1")
    assert all(running.alive().values())
    # The servers reconnect to the restarted shard; nothing committed was lost.
    rows = wait_until(
        lambda: query(cluster.server_conninfo(0), "SELECT count(*), sum(balance) FROM accounts"),
        60,
        "reads after the shard restart",
    )
    assert rows == [(51, 5001)]


def test_kill_and_restart_via_the_cli(running: Running) -> None:
    result = cli("kill", "worker-0", "--dir", str(running.dir), timeout=60)
    assert result.returncode == 0, result.stderr
    assert running.alive()["worker-0"] is False
    result = cli("restart", "worker-0", "--dir", str(running.dir), timeout=180)
    assert result.returncode == 0, result.stderr
    assert running.alive()["worker-0"] is True
    # The restarted worker runs observers.
    with connect(running.cluster.server_conninfo(0)) as conn:
        conn.execute("UPDATE docs SET body = 'restarted' WHERE id = 3")
    wait_until(
        lambda: (
            query(running.cluster.server_conninfo(1), "SELECT n FROM lengths WHERE id = 3")
            == [(9,)]
        ),
        90,
        "the restarted worker's observer run",
    )


def test_down_stops_everything_and_is_idempotent(running: Running) -> None:
    cluster = running.cluster
    pids = [r.pid for r in cluster.state.processes]
    # The shards' backends too, not just their postmasters.
    for record in cluster.state.of_role(Role.SHARD):
        pids += [p.pid for p in psutil.Process(record.pid).children(recursive=True)]

    result = cli("down", "--dir", str(running.dir), timeout=180)
    assert result.returncode == 0, result.stderr
    assert "stopped 6 process(es)" in result.stdout

    still = [pid for pid in pids if not gone(pid)]
    assert still == [], [psutil.Process(p).cmdline() for p in still]
    code, data = running.status_json()
    assert code == 1
    assert not any(p["alive"] or p["pid_alive"] for p in data["processes"])

    again = cli("down", "--dir", str(running.dir), timeout=60)
    assert again.returncode == 0, again.stderr
    assert "was not running" in again.stdout
