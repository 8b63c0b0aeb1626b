"""The primary-key check of a bulk INSERT: when nothing is stored between the smallest and the
largest new key, one scan page answers for all the rows (``dml._no_row_between``); otherwise
each key is read. A collision is found either way."""

from __future__ import annotations

import pytest

from percolator.clients.database import Database
from percolator.server.planner import dml
from percolator.server.sql.errors import SqlError


def trips(db: Database, op: str) -> int:
    return db.client.store.stats.round_trips[op]


@pytest.fixture
async def db(api_db: Database) -> Database:
    await api_db.execute("CREATE TABLE bulk (id int PRIMARY KEY, v text)")
    await api_db.execute("INSERT INTO bulk SELECT g, 'old' FROM generate_series(1, 100) g")
    await api_db.client.secondaries.drain()
    return api_db


async def reads_of_insert(db: Database, sql: str) -> int:
    before = trips(db, "read")
    await db.execute(sql)
    return trips(db, "read") - before


async def test_a_new_key_range_is_checked_without_reading_each_key(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed = await reads_of_insert(
        db, "INSERT INTO bulk SELECT g, 'new' FROM generate_series(1001, 1200) g"
    )
    monkeypatch.setattr(dml, "RANGE_PROBE_ROWS", 1 << 30)
    each = await reads_of_insert(
        db, "INSERT INTO bulk SELECT g, 'new' FROM generate_series(2001, 2200) g"
    )
    assert probed < each
    rows = await db.fetch("SELECT count(*) AS n FROM bulk WHERE v = 'new'")
    assert rows == [{"n": 400}]


async def test_a_collision_inside_the_range_is_found(db: Database) -> None:
    with pytest.raises(SqlError) as err:
        await db.execute("INSERT INTO bulk SELECT g, 'new' FROM generate_series(50, 149) g")
    assert err.value.sqlstate == "23505"
    tag = await db.execute(
        "INSERT INTO bulk SELECT g, 'new' FROM generate_series(50, 149) g ON CONFLICT DO NOTHING"
    )
    assert tag == "INSERT 0 49"


async def test_keys_of_deleted_rows_are_read_one_by_one_and_can_be_inserted_again(
    db: Database,
) -> None:
    await db.execute("DELETE FROM bulk WHERE id <= 100")
    fresh = await reads_of_insert(
        db, "INSERT INTO bulk SELECT g, 'new' FROM generate_series(1001, 1100) g"
    )
    again = await reads_of_insert(
        db, "INSERT INTO bulk SELECT g, 'again' FROM generate_series(1, 100) g"
    )
    assert again > fresh  # the deleted rows' records: the range is not empty
    assert await db.fetch("SELECT count(*) AS n FROM bulk WHERE v = 'again'") == [{"n": 100}]


async def test_rows_the_transaction_wrote_itself_collide(db: Database) -> None:
    with pytest.raises(SqlError) as err:
        async with db.begin() as txn:
            sql = await db.sql(txn)
            await sql.execute("INSERT INTO bulk SELECT g, 'a' FROM generate_series(501, 600) g")
            await sql.execute("INSERT INTO bulk SELECT g, 'b' FROM generate_series(550, 649) g")
    assert err.value.sqlstate == "23505"
    assert await db.fetch("SELECT count(*) AS n FROM bulk WHERE id > 500") == [{"n": 0}]
