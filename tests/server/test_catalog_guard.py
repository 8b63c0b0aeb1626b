"""Two processes on one store: a statement planned with a catalog older than its transaction's
snapshot (DDL committed through the other process since this one last polled, on a table it
uses) is refused; a statement that began its own transaction runs again with the reloaded
catalog, one inside a transaction block gets 40001. Without the guard, an INSERT after another
server's TRUNCATE went into the old storage and was lost."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from percolator.clients.database import Database
from percolator.server.engine import Engine, EngineConfig
from percolator.server.planner.row_codec import RowCodec
from percolator.server.session import internal_session, run_autocommit
from percolator.server.sql.catalog_store import VERSION_KEY
from percolator.server.sql.errors import SqlError
from percolator.server.storage.cells import Mutation, WriteKind


class OtherServer:
    """A second process's engine that never polls the catalog (a poll is due at most a
    second later; here it never comes, so the window stays open)."""

    def __init__(self, db: Database, engine: Engine) -> None:
        self.db = db
        self.engine = engine

    async def run(self, sql: str) -> Any:
        return await run_autocommit(self.engine, sql)


@pytest.fixture
async def other(api_db: Database) -> AsyncIterator[OtherServer]:
    # Its own catalog cache over the same transaction client: what another server process
    # sees of the catalog (one in-process timestamp oracle may own a store).
    engine = Engine(api_db.client, EngineConfig(catalog_poll_s=0))
    await engine.start()
    yield OtherServer(api_db, engine)
    await engine.close()


async def refused(other: OtherServer, sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        await other.run(sql)
    return info.value


async def test_an_insert_after_another_servers_truncate_goes_to_the_new_table(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    await api_db.execute("INSERT INTO t VALUES (1, 'old')")
    await other.engine.refresh_catalog()
    assert (await other.run("SELECT v FROM t WHERE id = 1")).rows == [("old",)]

    await api_db.execute("TRUNCATE t")
    # Refused by the guard (planned with the old storage), then run again with the reloaded
    # catalog: the statement began its own transaction and had done nothing.
    await other.run("INSERT INTO t VALUES (2, 'new')")
    await other.db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id, v FROM t") == [{"id": 2, "v": "new"}]


async def test_inside_a_transaction_block_the_statement_is_refused(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE b (id int PRIMARY KEY)")
    await other.engine.refresh_catalog()
    await api_db.execute("TRUNCATE b")
    txn = await other.db.client.begin()
    session = internal_session(other.engine, txn)
    with pytest.raises(SqlError) as info:
        await session.run_statement("INSERT INTO b VALUES (1)")
    await txn.rollback()
    assert info.value.sqlstate == "40001"
    assert "concurrent DDL" in info.value.message
    await other.run("INSERT INTO b VALUES (1)")  # the retry: the catalog was reloaded
    await other.db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id FROM b") == [{"id": 1}]


async def test_a_write_that_reads_nothing_is_checked_before_it_commits(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE h (v text)")  # no primary key: no existence read
    await other.engine.refresh_catalog()
    await other.run("INSERT INTO h VALUES ('before')")
    await api_db.execute("TRUNCATE h")
    # Checked at the end of the statement (autocommit: it runs again, into the new storage).
    await other.run("INSERT INTO h VALUES ('after')")
    await other.db.client.secondaries.drain()
    assert await api_db.fetch("SELECT v FROM h") == [{"v": "after"}]
    # Inside a transaction block, at COMMIT: the rows would go to the old storage.
    await api_db.execute("TRUNCATE h")
    txn = await other.db.client.begin()
    await internal_session(other.engine, txn).run_statement("INSERT INTO h VALUES ('lost')")
    with pytest.raises(SqlError) as info:
        await txn.commit()
    await txn.rollback()
    assert info.value.sqlstate == "40001"
    assert await api_db.fetch("SELECT v FROM h") == []


async def test_an_insert_into_a_table_dropped_through_another_server_is_42p01(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE d (id int PRIMARY KEY)")
    await other.engine.refresh_catalog()
    await api_db.execute("DROP TABLE d")
    assert (await refused(other, "INSERT INTO d VALUES (1)")).sqlstate == "42P01"


async def test_statements_with_a_current_catalog_pass_and_read_nothing_more(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE ok (id int PRIMARY KEY)")
    await other.engine.refresh_catalog()
    # A key on the catalog's shard: a guard read of its own would show as a second read.
    store = api_db.client.store
    codec = RowCodec((await api_db.catalog()).tables["ok"])
    catalog_shard = store.shard_of(VERSION_KEY.table, VERSION_KEY.row)
    key = next(
        i
        for i in range(1, 1000)
        if store.shard_of(codec.storage, codec.key_of_values((i,))) == catalog_shard
    )
    before = store.stats.round_trips["read"]
    await other.run(f"INSERT INTO ok VALUES ({key})")
    # The version cell rides along with the key's existence read.
    assert store.stats.round_trips["read"] - before == 1
    await api_db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id FROM ok") == [{"id": key}]


async def test_a_lock_on_the_catalog_version_does_not_hold_statements_back(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE held (id int PRIMARY KEY)")
    await other.engine.refresh_catalog()
    # A transaction holding the catalog's version cell locked, as a Spark overwrite's TRUNCATE
    # does until its whole job commits.
    store, clock = api_db.client.store, api_db.client.clock
    start_ts = await clock.get_timestamp()
    lock = Mutation(VERSION_KEY, WriteKind.PUT, b"999")
    assert await store.prewrite(start_ts, VERSION_KEY, 600_000, [lock]) == []
    try:
        started = time.monotonic()
        await other.run("INSERT INTO held VALUES (1)")
        assert time.monotonic() - started < 1.0  # not a lock wait
    finally:
        await store.rollback(start_ts, [VERSION_KEY], leave_marker=True)
    await api_db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id FROM held") == [{"id": 1}]


async def test_a_scan_after_another_servers_truncate_reads_the_new_table(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE s (id int PRIMARY KEY, v text)")
    await api_db.execute("INSERT INTO s VALUES (1, 'old'), (2, 'old')")
    await other.engine.refresh_catalog()
    assert (await other.run("SELECT count(*) FROM s")).rows == [(2,)]

    await api_db.execute("TRUNCATE s")
    await api_db.execute("INSERT INTO s VALUES (3, 'new')")
    await api_db.client.secondaries.drain()
    # Without the check, the scan read the old storage: two rows the snapshot has not got.
    # Refused before its first row, the query runs again with the reloaded catalog.
    assert (await other.run("SELECT id, v FROM s ORDER BY id")).rows == [(3, "new")]


async def test_a_scan_with_a_current_catalog_reads_the_version_alongside(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE c (id int PRIMARY KEY)")
    await api_db.execute("INSERT INTO c VALUES (1), (2)")
    await api_db.client.secondaries.drain()  # no lock for the scan to resolve
    await other.engine.refresh_catalog()
    store = api_db.client.store
    reads, scans = store.stats.round_trips["read"], store.stats.round_trips["scan"]
    assert (await other.run("SELECT id FROM c ORDER BY id")).rows == [(1,), (2,)]
    assert store.stats.round_trips["read"] - reads == 1  # the version cell, once
    assert store.stats.round_trips["scan"] > scans


async def test_ddl_on_another_table_does_not_refuse_statements(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE mine (id int PRIMARY KEY, v text)")
    await api_db.execute("INSERT INTO mine VALUES (1, 'a')")
    await api_db.client.secondaries.drain()
    await other.engine.refresh_catalog()
    await api_db.execute("CREATE TABLE theirs (id int PRIMARY KEY)")  # a newer catalog
    await other.run("INSERT INTO mine VALUES (2, 'b')")  # a point read: passes
    await api_db.execute("DROP TABLE theirs")
    assert (await other.run("SELECT id, v FROM mine ORDER BY id")).rows == [(1, "a"), (2, "b")]


async def test_a_write_planned_without_a_new_index_is_run_again_with_it(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE ix (id int PRIMARY KEY, v text)")
    await other.engine.refresh_catalog()
    await api_db.execute("CREATE UNIQUE INDEX ix_v ON ix (v)")
    # Planned without the index, the row would be missing from it (and its uniqueness
    # unchecked): refused, then run again with the index.
    await other.run("INSERT INTO ix VALUES (1, 'x')")
    await other.db.client.secondaries.drain()
    with pytest.raises(Exception, match="duplicate key"):
        await api_db.execute("INSERT INTO ix VALUES (2, 'x')")


async def test_a_table_created_through_another_server_is_found_at_once(
    api_db: Database, other: OtherServer
) -> None:
    await other.engine.refresh_catalog()
    await api_db.execute("CREATE TABLE fresh (id int PRIMARY KEY)")
    # The other server has not polled: its catalog is reloaded when a name is unknown.
    await other.run("INSERT INTO fresh VALUES (1)")
    await api_db.execute("ALTER TABLE fresh ADD COLUMN note text")
    await other.run("UPDATE fresh SET note = 'seen' WHERE id = 1")
    assert (await other.run("SELECT id, note FROM fresh")).rows == [(1, "seen")]
    error = await refused(other, "SELECT nope FROM fresh")  # still unknown after a reload
    assert error.sqlstate == "42703"


async def test_a_block_uses_a_table_created_through_another_server_after_its_first_statement(
    api_db: Database, other: OtherServer
) -> None:
    await other.engine.refresh_catalog()
    await api_db.execute("CREATE TABLE later (id int PRIMARY KEY)")
    txn = await other.db.client.begin()
    session = internal_session(other.engine, txn)
    # Planned with the catalog that does not know the table: nothing it planned uses it, so
    # the statement planned after the reload is not refused for it.
    await session.run_statement("SELECT 1")
    await session.run_statement("INSERT INTO later VALUES (1)")
    await txn.commit()
    await other.db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id FROM later") == [{"id": 1}]


async def test_a_constraint_of_a_dropped_table_does_not_fail_a_statement(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE again (id int PRIMARY KEY, v text NOT NULL)")
    await other.engine.refresh_catalog()
    await api_db.execute("DROP TABLE again")
    await api_db.execute("CREATE TABLE again (id int PRIMARY KEY, v text)")
    # Planned with the dropped table's NOT NULL: the guard, checked before the error is
    # believed, refuses the plan, and the statement runs again with the new table.
    await other.run("INSERT INTO again (id) VALUES (1)")
    await other.db.client.secondaries.drain()
    assert await api_db.fetch("SELECT id, v FROM again") == [{"id": 1, "v": None}]


async def test_the_first_statement_of_a_block_runs_again_with_the_new_catalog(
    api_db: Database, other: OtherServer
) -> None:
    await api_db.execute("CREATE TABLE twice (id int PRIMARY KEY)")
    await other.engine.refresh_catalog()
    await api_db.execute("DROP TABLE twice")
    await api_db.execute("CREATE TABLE twice (id int PRIMARY KEY, note text DEFAULT 'new')")
    session = internal_session(other.engine)
    await session.run_statement("BEGIN")
    # The block's first statement has done nothing yet: refused, it runs again, as alone.
    result = await session.run_statement("INSERT INTO twice (id) VALUES (1) RETURNING note")
    await session.run_statement("COMMIT")
    assert result.rows == [("new",)]
