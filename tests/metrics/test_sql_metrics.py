"""A real SQL server with its metrics endpoint: SQL through psycopg moves the counters by
exactly what it did. The server runs in this interpreter, whose registry is shared with other
in-process servers: the tests compare scrapes taken before and after."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import PostgresServer, create_database
from tests.metrics.conftest import delta, scrape, value, wait_for
from tests.server.conftest import SqlServer, start_sql_server


@pytest.fixture(scope="module")
def sql_server(embedded_pg: PostgresServer) -> Iterator[SqlServer]:
    """A server whose only transactions are the test's: no catalog polls, no observer workers."""
    store = asyncio.run(create_database(embedded_pg.dsn, "metrics"))
    thread, server = start_sql_server(
        store, catalog_poll=0.0, observer_workers=0, metrics_listen="127.0.0.1:0"
    )
    yield server
    thread.stop()


@pytest.fixture(scope="module")
def metrics_url(sql_server: SqlServer) -> str:
    url = sql_server.running.metrics_url
    assert url is not None and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    return url


def test_transactions_statements_and_connections(sql_server: SqlServer, metrics_url: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as setup:
        setup.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
    # The setup connection's end is counted asynchronously: wait until no connection is open.
    before = wait_for(metrics_url, lambda s: value(s, "percolator_connections_open") == 0)
    assert value(before, "percolator_connections_open") == 0

    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as b,
    ):
        a.execute("INSERT INTO accounts VALUES (1, 10), (2, 20)")  # commits
        a.execute("UPDATE accounts SET balance = 11 WHERE id = 1")  # commits
        assert a.execute("SELECT count(*) FROM accounts").fetchone() == (2,)  # commits, read-only
        a.execute("BEGIN")
        a.execute("INSERT INTO accounts VALUES (3, 30)")
        a.execute("ROLLBACK")  # rolls back
        # A write conflict: b commits a write of the cell a wrote since a's start_ts (b
        # takes no row locks, so it does not wait for a's).
        b.execute("SET percolator.locking = optimistic")
        a.execute("BEGIN")
        a.execute("UPDATE accounts SET balance = 21 WHERE id = 2")
        b.execute("UPDATE accounts SET balance = 22 WHERE id = 2")  # commits
        with pytest.raises(psycopg.errors.SerializationFailure):
            a.execute("COMMIT")  # 40001: rolls back
        during = scrape(metrics_url)
    after = wait_for(metrics_url, lambda s: value(s, "percolator_connections_open") == 0)

    def moved(name: str, **labels: str) -> float:
        return delta(before, after, name, **labels)

    assert moved("percolator_txn_started_total") == 6
    assert moved("percolator_txn_committed_total") == 4
    assert moved("percolator_txn_rolled_back_total") == 2
    assert moved("percolator_txn_conflicts_total") == 1
    # Two-phase commits: the INSERT, the UPDATE and b's UPDATE (read-only commits send nothing).
    assert moved("percolator_txn_commit_seconds_count") == 3
    assert moved("percolator_statements_total", type="insert") == 2
    assert moved("percolator_statements_total", type="update") == 3
    assert moved("percolator_statements_total", type="select") == 1
    # BEGIN, ROLLBACK, SET, BEGIN, COMMIT
    assert moved("percolator_statements_total", type="other") == 5
    assert moved("percolator_statements_total", type="ddl") == 0
    assert moved("percolator_statement_errors_total", sqlstate="40001") == 1
    assert moved("percolator_connections_accepted_total") == 2
    assert value(during, "percolator_connections_open") == 2
    assert value(after, "percolator_connections_open") == 0


def test_round_trips_are_the_stores_own_counts(sql_server: SqlServer, metrics_url: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE rt_metrics (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO rt_metrics VALUES (1, 'a'), (2, 'b')")
        conn.execute("SELECT v FROM rt_metrics WHERE id = 1")
    # The secondaries commit in the background: wait until the counts stop moving.
    stats = sql_server.running.engine.client.store.stats
    last: dict[str, int] = {}
    while stats.snapshot() != last:
        last = stats.snapshot()
        time.sleep(0.2)
    samples = scrape(metrics_url)
    exposed = {
        dict(labels)["operation"]: v
        for (name, labels), v in samples.items()
        if name == "percolator_store_round_trips_total"
    }
    assert exposed == last
    assert exposed["prewrite"] >= 2 and exposed["commit"] >= 2 and exposed["read"] >= 1


def test_oracle_metrics_of_the_in_process_coordinator(
    sql_server: SqlServer, metrics_url: str
) -> None:
    before = scrape(metrics_url)
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        for i in range(3):
            conn.execute(f"SELECT {i}")
    after = scrape(metrics_url)
    # One timestamp per read-only statement (its start_ts), handed out by this process's oracle.
    assert delta(before, after, "percolator_oracle_timestamps_total") >= 3
    assert value(after, "percolator_oracle_persist_seconds_count") >= 1  # the high-water mark
