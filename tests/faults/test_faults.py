"""Fault tests on a local cluster (2 shards, coordinator, 2 SQL servers, 2 workers) under a
steady load of bank transfers and observer work (see :mod:`tests.faults.load`).

One cluster and one load for the whole module; the tests run in order, each SIGKILLs one
process while the load runs, checks what clients see, restarts it and checks that everything
goes on. The last test stops the load and checks that nothing was lost: the bank total is
conserved, every acknowledged transfer is there (and no aborted one), balances agree with the
transfers, every transfer was processed by the observer exactly once, and timestamps never
went back.

What each fault does to clients, and how long recovery takes, is in docs/operations.md
("Failures").
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from percolator.server.cluster import Cluster, ClusterError, ClusterSpec
from tests.faults.load import (
    ACCOUNTS,
    INITIAL_BALANCE,
    SCHEMA,
    TOTAL,
    BankLoad,
    ClientError,
    wait_until,
)

LEASE_MS = 1500
"""The workers' membership lease: how soon a dead worker's slice is taken over."""
LOCK_TTL_S = 3.0
"""A small transaction's lock TTL (TxnConfig.base_lock_ttl_ms)."""

S0 = ("s0-a", "s0-b")
"""Clients connected to server-0 only."""
S1 = ("s1-a", "s1-b")
"""Clients that prefer server-1 and fall back to server-0 (a multi-host connection string)."""

CONNECTION_CLASS = "08006"
SERIALIZATION_FAILURE = "40001"
COMMIT_OUTCOME_UNKNOWN = "08007"
DEADLOCK_DETECTED = "40P01"
"""Two transfers between the same two accounts in opposite directions: each holds the row
the other updates next, and one is told (the load picks accounts at random, as a careless
application would; Postgres answers the same)."""
LOCK_NOT_AVAILABLE = "55P03"
"""A transfer waiting for a row lock held by one stuck on the outage (a dead shard, or the
coordinator it waits up to 5 s for, then the next holder in line) until its lock timeout: the
outage's effect on a waiter, as in Postgres behind a stuck transaction."""

OUTAGE_ERRORS = {
    CONNECTION_CLASS,
    SERIALIZATION_FAILURE,
    COMMIT_OUTCOME_UNKNOWN,
    LOCK_NOT_AVAILABLE,
    DEADLOCK_DETECTED,
}
"""What a transfer may get while the coordinator or a shard is down."""


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("faults") / "c"
    cluster = Cluster.up(
        ClusterSpec(
            shards=2,
            servers=2,
            workers=2,
            dir=Path(folder),
            server_args=("--catalog-poll", "0.2"),
            worker_args=("--lease-ms", str(LEASE_MS), "--catalog-poll", "0.2"),
            ready_timeout=180,
        )
    )
    try:
        yield cluster
    finally:
        # Whatever the tests did, leave nothing running.
        try:
            cluster.down(timeout=20)
        except ClusterError:
            pass


@pytest.fixture(scope="module")
def load(cluster: Cluster) -> Iterator[BankLoad]:
    with connect(cluster.server_conninfo(0)) as conn:
        for statement in SCHEMA:
            conn.execute(statement)
        for i in range(ACCOUNTS):
            conn.execute("INSERT INTO accounts VALUES (%s, %s)", (i, INITIAL_BALANCE))
    # Server-1 learns the tables from its catalog poll.
    wait_until(
        lambda: query(cluster.server_conninfo(1), "SELECT count(*) FROM accounts") == [(ACCOUNTS,)],
        60,
        "server-1 to see the accounts",
    )
    (h0, p0), (h1, p1) = cluster.server_addresses
    prefer_1 = f"host={h1},{h0} port={p1},{p0} user=postgres dbname=postgres"
    bank = BankLoad(
        {S0[0]: cluster.server_conninfo(0), S0[1]: cluster.server_conninfo(0)}
        | {S1[0]: prefer_1, S1[1]: prefer_1}
    )
    bank.start()
    try:
        for name in (*S0, *S1):
            bank.wait_for_commits(3, [name], timeout=90)
        yield bank
    finally:
        if not bank.stopping.is_set():
            bank.stop()


# -- helpers -----------------------------------------------------------------------------------


def connect(conninfo: str) -> psycopg.Connection[Any]:
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)


def query(conninfo: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with connect(conninfo) as conn:
        return conn.execute(sql, params or None).fetchall()


def port_of(cluster: Cluster, name: str) -> int:
    port = cluster.state.process(name).port
    assert port is not None
    return port


def unexpected(errors: list[ClientError], allowed: set[str | None]) -> list[ClientError]:
    """The errors whose SQLSTATE is not among ``allowed``; prints a summary of all (``-s``)."""
    summary = collections.Counter((e.step, e.sqlstate) for e in errors)
    samples = {e.sqlstate: e.message for e in errors}
    print(f"client errors: {dict(summary)}; e.g. {samples}")
    return [e for e in errors if e.sqlstate not in allowed]


def bank_total(conninfo: str) -> tuple[int, int]:
    """(sum of balances, number of accounts) in one snapshot: a full read of ``accounts``."""
    rows = query(conninfo, "SELECT sum(balance), count(*) FROM accounts")
    return int(rows[0][0]), int(rows[0][1])


def old_locks(cluster: Cluster, below_ts: int) -> int:
    """Locks with a start_ts below ``below_ts`` left on the shards (read straight from them)."""
    total = 0
    for dsn in cluster.dsns:
        with psycopg.connect(dsn, connect_timeout=10) as shard:
            row = shard.execute(
                "SELECT count(*) FROM percolator_lock WHERE start_ts < %s", (below_ts,)
            ).fetchone()
            assert row is not None
            total += int(row[0])
    return total


def observer_status(conninfo: str) -> dict[str, Any]:
    with connect(conninfo) as conn:
        cur = conn.execute("SELECT * FROM percolator.observers WHERE name = 'audit_transfers'")
        row = cur.fetchone()
        assert row is not None and cur.description is not None
        return dict(zip([d.name for d in cur.description], row, strict=True))


def audited(conninfo: str) -> collections.Counter[int]:
    """How many committed observer runs each transfer got."""
    return collections.Counter(int(r[0]) for r in query(conninfo, "SELECT id FROM audit"))


# -- the faults --------------------------------------------------------------------------------


def test_kill_a_sql_server(cluster: Cluster, load: BankLoad) -> None:
    """SIGKILL server-1: server-0's clients go on with nothing worse than 40001; the dead
    server's in-flight transactions are resolved by readers once their TTL ends; server-1's
    clients move to server-0; restarted, server-1 serves again."""
    p1 = port_of(cluster, "server-1")
    wait_until(
        lambda: all(load.stats(n).commit_ports[-1:] == [p1] for n in S1), 30, "S1 on server-1"
    )
    killed_at = time.monotonic()
    cluster.kill("server-1")
    # Every transaction server-1 had started began below this timestamp.
    kill_ts = int(query(cluster.server_conninfo(0), "SELECT txid_current()")[0][0])

    load.wait_for_commits(10, S0, since=killed_at, timeout=60)
    load.wait_for_commits(3, S1, since=killed_at, timeout=60)  # they moved to server-0

    # Readers resolve the dead server's locks (rolled back, or forward when its primary had
    # committed) once their TTL ends: a full read of the bank works and the total holds.
    time.sleep(LOCK_TTL_S)
    assert wait_until(lambda: bank_total(cluster.server_conninfo(0)), 30, "a full read") == (
        TOTAL,
        ACCOUNTS,
    )
    # Nothing stays locked: after full reads of everything the transfers wrote, no lock of a
    # transaction older than the kill is left on either shard.

    def no_old_locks() -> bool:
        query(cluster.server_conninfo(0), "SELECT * FROM accounts")
        query(cluster.server_conninfo(0), "SELECT * FROM transfers")
        return old_locks(cluster, kill_ts) == 0

    wait_until(no_old_locks, 60, "the dead server's locks to be resolved", every=1.0)

    errors = load.errors(S0, since=killed_at)
    assert not unexpected(errors, {SERIALIZATION_FAILURE, DEADLOCK_DETECTED}), errors
    # server-1's clients lost their connection (no SQLSTATE) and reconnected to server-0.
    errors = load.errors(S1, since=killed_at)
    assert not unexpected(errors, {None, SERIALIZATION_FAILURE, DEADLOCK_DETECTED}), errors

    cluster.restart("server-1")
    restarted_at = time.monotonic()
    assert bank_total(cluster.server_conninfo(1)) == (TOTAL, ACCOUNTS)
    load.reconnect(S1)  # back to their preferred server
    wait_until(
        lambda: all(
            p1 in load.stats(n).commit_ports[-3:] and load.commits([n], restarted_at) >= 3
            for n in S1
        ),
        60,
        "S1 to commit on the restarted server-1",
    )


def test_kill_a_worker(cluster: Cluster, load: BankLoad) -> None:
    """SIGKILL worker-0: the other worker takes its slice once its lease ends; every transfer
    committed meanwhile is processed, while worker-0 stays dead."""
    killed_at = time.monotonic()
    cluster.kill("worker-0")
    load.wait_for_commits(20, since=killed_at, timeout=60)
    # Transfers committed while worker-0 was dead, spread over both slices by their hash.
    committed = load.acked()

    def processed() -> bool:
        return committed <= set(audited(cluster.server_conninfo(0)))

    wait_until(processed, 90, "worker-1 to process worker-0's slice", every=0.5)
    took = time.monotonic() - killed_at
    assert not cluster.process_status("worker-0").pid_alive
    print(f"worker-0 killed: everything processed by worker-1 {took:.1f} s later")
    cluster.restart("worker-0")


def test_kill_the_coordinator(cluster: Cluster, load: BankLoad) -> None:
    """SIGKILL the coordinator: statements fail with 08006 naming the coordinator (the
    connection stays usable); after the restart everything goes on and timestamps never go
    back."""
    probe = connect(cluster.server_conninfo(0))
    try:
        before = int(probe.execute("SELECT txid_current()").fetchone()[0])  # type: ignore[index]
        killed_at = time.monotonic()
        cluster.kill("coordinator")
        before = max(before, load.max_start_ts())
        try:
            with pytest.raises(psycopg.Error) as info:
                probe.execute("SELECT txid_current()")
            print(f"coordinator killed: first error after {time.monotonic() - killed_at:.1f} s")
            assert info.value.sqlstate == CONNECTION_CLASS, info.value
            message = str(info.value)
            assert "coordinator" in message and cluster.coordinator_address in message, message
            assert "internal error" not in message
            with pytest.raises(psycopg.Error) as info:
                probe.execute("SELECT balance FROM accounts WHERE id = 1")
            assert info.value.sqlstate == CONNECTION_CLASS, info.value
            time.sleep(2)  # the load stalls meanwhile
        finally:
            # Restarted even when an assertion fails, so that the later tests find a cluster.
            cluster.restart("coordinator")
        restarted_at = time.monotonic()
        # The same connection goes on once the servers have reconnected.
        after = wait_until(
            lambda: int(probe.execute("SELECT txid_current()").fetchone()[0]),  # type: ignore[index]
            60,
            "a timestamp from the restarted coordinator",
        )
        print(
            f"coordinator restarted: statements work again after "
            f"{time.monotonic() - restarted_at:.1f} s"
        )
        assert after > before, (before, after)
    finally:
        probe.close()

    for name in (*S0, *S1):
        load.wait_for_commits(3, [name], since=restarted_at, timeout=60)
    errors = load.errors(since=killed_at)
    assert not unexpected(
        errors,
        OUTAGE_ERRORS,
    ), errors
    assert all("internal error" not in e.message for e in errors), errors
    # Each client's transactions ran one after another: their start timestamps increase,
    # across the restart too (the oracle persists a high-water mark ahead of what it hands out).
    for name in (*S0, *S1):
        ts = load.stats(name).start_ts
        assert all(a < b for a, b in itertools.pairwise(list(ts))), name


def test_kill_a_shard(cluster: Cluster, load: BankLoad) -> None:
    """SIGKILL shard-1 (postmaster and backends): statements touching it fail with 08006
    naming the shard, the connection stays usable, statements on shard-0 alone may go on;
    restarted, everything resumes and the total holds."""
    shard_port = port_of(cluster, "shard-1")
    probe = connect(cluster.server_conninfo(0))
    try:
        killed_at = time.monotonic()
        cluster.kill("shard-1")
        with pytest.raises(psycopg.Error) as info:
            probe.execute("SELECT sum(balance) FROM accounts")
        assert info.value.sqlstate == CONNECTION_CLASS, info.value
        message = str(info.value)
        assert "shard" in message and f":{shard_port}/" in message, message
        assert "internal error" not in message
        # The connection is still usable, and rows on shard-0 can still be read.
        assert probe.execute("SELECT 1").fetchall() == [(1,)]
        read, failed = [], []
        for i in range(ACCOUNTS):
            try:
                probe.execute("SELECT balance FROM accounts WHERE id = %s", (i,)).fetchall()
                read.append(i)
            except psycopg.Error as exc:
                failed.append(exc)
        assert read, "no account on shard-0 could be read"
        assert failed, "no account lives on shard-1?"
        assert all(e.sqlstate == CONNECTION_CLASS for e in failed), failed

        time.sleep(2)  # the load meets the outage meanwhile
        cluster.restart("shard-1")
        restarted_at = time.monotonic()
        assert wait_until(
            lambda: bank_total(cluster.server_conninfo(0)), 60, "a full read after the restart"
        ) == (TOTAL, ACCOUNTS)
        assert wait_until(
            lambda: bank_total(cluster.server_conninfo(1)), 60, "a full read on server-1"
        ) == (TOTAL, ACCOUNTS)
    finally:
        probe.close()

    for name in (*S0, *S1):
        load.wait_for_commits(3, [name], since=restarted_at, timeout=90)
    errors = load.errors(since=killed_at)
    assert not unexpected(
        errors,
        OUTAGE_ERRORS,
    ), errors
    assert all("internal error" not in e.message for e in errors), errors


def test_nothing_was_lost(cluster: Cluster, load: BankLoad) -> None:
    """Stop the load; the total is conserved, every acknowledged transfer is there and no
    aborted one, balances agree with the transfers, each transfer was audited exactly once,
    timestamps only went up, and every process is alive."""
    load.stop()
    conninfo = cluster.server_conninfo(0)
    assert bank_total(conninfo) == (TOTAL, ACCOUNTS)

    transfers = query(conninfo, "SELECT id, src, dst, amount FROM transfers")
    ids = {int(r[0]) for r in transfers}
    acked, unknown, aborted = load.acked(), load.unknown(), load.aborted()
    assert len(acked) > 100, f"too little load to mean anything: {len(acked)} transfers"
    assert acked <= ids, f"acknowledged transfers missing: {sorted(acked - ids)[:20]}"
    assert not ids & aborted, f"aborted transfers committed: {sorted(ids & aborted)[:20]}"
    assert ids <= acked | unknown, sorted(ids - acked - unknown)[:20]
    # Atomicity across shards: each balance is its start plus what the transfers moved.
    expected = dict.fromkeys(range(ACCOUNTS), INITIAL_BALANCE)
    for _, src, dst, amount in transfers:
        expected[src] -= amount
        expected[dst] += amount
    balances = dict(query(conninfo, "SELECT id, balance FROM accounts"))
    assert balances == expected

    for name in load.clients:
        ts = load.stats(name).start_ts
        assert all(a < b for a, b in itertools.pairwise(list(ts))), f"{name}: a timestamp went back"

    # Every transfer processed exactly once (a STRONG observer's ack: at most one run commits
    # per change), none parked.
    def all_audited() -> bool:
        return set(audited(conninfo)) == ids

    wait_until(all_audited, 120, "the observer to process every transfer", every=1.0)
    runs = audited(conninfo)
    assert set(runs) == ids
    assert max(runs.values()) == 1, [i for i, n in runs.items() if n > 1][:20]
    status = wait_until(
        lambda: (s := observer_status(conninfo))["pending"] == 0 and s, 60, "no pending change"
    )
    assert status["parked"] == 0, status
    print(f"observer: {status}")

    dead = [s.name for s in cluster.status() if not s.alive]
    assert not dead, dead
    print(
        f"{len(acked)} transfers acknowledged, {len(unknown)} unknown "
        f"({len(ids & unknown)} of them committed), {len(aborted)} aborted"
    )
