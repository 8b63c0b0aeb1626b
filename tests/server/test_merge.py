"""MERGE (Postgres 15) against real Postgres: upserts, conditional WHEN clauses, DELETE, DO
NOTHING, sources that are tables, subqueries and VALUES, and the errors (21000, 23505, 23502,
23514, 23503, 42601) with their SQLSTATEs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import psycopg
import pytest

from tests.server import scripted

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_upsert_and_conditions(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL, note text)",
            "INSERT INTO stock VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')",
            "CREATE TABLE delta (id int, qty int)",
            "INSERT INTO delta VALUES (1, 5), (2, -20), (4, 7), (5, 0)",
            # upsert: update the matched rows, insert the others
            "MERGE INTO stock s USING delta d ON s.id = d.id"
            " WHEN MATCHED THEN UPDATE SET qty = s.qty + d.qty"
            " WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (d.id, d.qty)",
            "SELECT * FROM stock ORDER BY id",
            # conditional clauses, tried in order; DELETE and DO NOTHING
            "MERGE INTO stock AS s USING delta AS d ON s.id = d.id"
            " WHEN MATCHED AND s.qty = 0 THEN DELETE"
            " WHEN MATCHED AND d.qty > 5 THEN UPDATE SET note = 'big'"
            " WHEN MATCHED THEN DO NOTHING"
            " WHEN NOT MATCHED AND d.qty > 100 THEN INSERT VALUES (d.id, d.qty)",
            "SELECT * FROM stock ORDER BY id",
            # no clause applies to some rows: they count for nothing
            "MERGE INTO stock s USING delta d ON s.id = d.id"
            " WHEN MATCHED AND d.qty > 1000 THEN DELETE",
            # a subquery source, INSERT with every column and DEFAULT
            "MERGE INTO stock s USING (SELECT id + 10 AS id, qty * 2 AS q FROM delta"
            " WHERE qty <> 0) AS x ON s.id = x.id"
            " WHEN NOT MATCHED THEN INSERT VALUES (x.id, x.q, DEFAULT)",
            "SELECT * FROM stock ORDER BY id",
            # a VALUES source, with column aliases
            "MERGE INTO stock USING (VALUES (1, 100), (99, 9)) AS v(id, q) ON stock.id = v.id"
            " WHEN MATCHED THEN UPDATE SET qty = v.q, note = 'from values'"
            " WHEN NOT MATCHED THEN INSERT (qty, id) VALUES (v.q, v.id)",
            "SELECT * FROM stock ORDER BY id",
            # a condition other than a key equality; source reading a table again
            "MERGE INTO stock s USING (SELECT 5 AS lim) l ON s.qty < l.lim"
            " WHEN MATCHED THEN UPDATE SET note = 'low'",
            "SELECT * FROM stock ORDER BY id",
            # an empty source, and a source no row of which matches
            "MERGE INTO stock s USING (SELECT * FROM delta WHERE false) d ON s.id = d.id"
            " WHEN MATCHED THEN DELETE",
            "MERGE INTO stock s USING delta d ON s.id = d.id + 1000"
            " WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN DO NOTHING",
            # SET col = DEFAULT, and reading the target in SET
            "MERGE INTO stock s USING delta d ON s.id = d.id"
            " WHEN MATCHED THEN UPDATE SET note = DEFAULT, qty = s.qty * 2",
            "SELECT * FROM stock ORDER BY id",
            # every row deleted, with the tag counting them
            "MERGE INTO stock s USING stock t ON s.id = t.id WHEN MATCHED THEN DELETE",
            "SELECT count(*) FROM stock",
        ],
    )


def test_errors(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE m (id int PRIMARY KEY, v int NOT NULL CHECK (v >= 0), u text UNIQUE)",
            "INSERT INTO m VALUES (1, 1, 'x'), (2, 2, 'y')",
            "CREATE TABLE dup (id int, v int)",
            "INSERT INTO dup VALUES (1, 10), (1, 20)",
            # one target row matched by two source rows
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN UPDATE SET v = d.v",
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN DELETE",
            # ... allowed when the clauses leave it alone
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN DO NOTHING",
            "MERGE INTO m USING dup d ON m.id = d.id"
            " WHEN MATCHED AND d.v = 20 THEN UPDATE SET v = d.v",
            "SELECT * FROM m ORDER BY id",
            # constraints
            "MERGE INTO m USING (VALUES (3, 3, 'x')) s(id, v, u) ON m.id = s.id"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, s.u)",
            "MERGE INTO m USING (VALUES (2, 3)) s(id, v) ON m.id = s.id"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
            "MERGE INTO m USING (VALUES (3, 1), (3, 2)) s(id, v) ON m.id = s.id"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
            "MERGE INTO m USING (VALUES (4)) s(id) ON m.id = s.id"
            " WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)",
            "MERGE INTO m USING (VALUES (1)) s(id) ON m.id = s.id"
            " WHEN MATCHED THEN UPDATE SET v = NULL",
            "MERGE INTO m USING (VALUES (1)) s(id) ON m.id = s.id"
            " WHEN MATCHED THEN UPDATE SET v = -1",
            "MERGE INTO m USING (VALUES (1)) s(id) ON m.id = s.id"
            " WHEN MATCHED THEN UPDATE SET u = 'y'",
            "MERGE INTO m USING (VALUES (1)) s(id) ON m.id = s.id"
            " WHEN MATCHED THEN UPDATE SET id = 2",
            "SELECT * FROM m ORDER BY id",
            # what Postgres 15's grammar refuses
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN DELETE RETURNING *",
            "MERGE INTO m USING dup d ON m.id = d.id WHEN NOT MATCHED THEN DELETE",
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN INSERT VALUES (1, 1)",
            # names
            "MERGE INTO nosuch USING dup d ON true WHEN MATCHED THEN DELETE",
            "MERGE INTO m USING dup d ON m.id = d.nosuch WHEN MATCHED THEN DELETE",
            "MERGE INTO m USING dup d ON m.id = d.id WHEN MATCHED THEN UPDATE SET nosuch = 1",
            "MERGE INTO m USING dup d ON m.id = d.id WHEN NOT MATCHED THEN INSERT VALUES (m.id, 1)",
            "MERGE INTO m USING dup d ON m.id = d.id"
            " WHEN NOT MATCHED THEN INSERT (id, v, u, id) VALUES (1, 1, 'a', 1)",
            "MERGE INTO m USING dup d ON m.id = d.id"
            " WHEN NOT MATCHED THEN INSERT (id, v) VALUES (d.id)",
            "SELECT * FROM m ORDER BY id",
        ],
    )


def test_transaction_rollback(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE acc (id int PRIMARY KEY, bal int)",
            "INSERT INTO acc VALUES (1, 100), (2, 200)",
            "BEGIN",
            "INSERT INTO acc VALUES (3, 300)",
            "MERGE INTO acc a USING (VALUES (3, 1), (4, 4)) s(id, d) ON a.id = s.id"
            " WHEN MATCHED THEN UPDATE SET bal = a.bal + s.d"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.d)",
            "SELECT * FROM acc ORDER BY id",
            "ROLLBACK",
            "SELECT * FROM acc ORDER BY id",
            "BEGIN",
            "MERGE INTO acc a USING (VALUES (1)) s(id) ON a.id = s.id WHEN MATCHED THEN DELETE",
            "COMMIT",
            "SELECT * FROM acc ORDER BY id",
            # a failed MERGE in a block leaves it failed
            "BEGIN",
            "MERGE INTO acc a USING (VALUES (2, NULL::int)) s(id, b) ON a.id = s.id"
            " WHEN MATCHED THEN UPDATE SET id = s.b",
            "SELECT 1",
            "ROLLBACK",
            "SELECT * FROM acc ORDER BY id",
        ],
    )


def test_serial_and_foreign_key(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE parent (id int PRIMARY KEY, name text)",
            "INSERT INTO parent VALUES (1, 'one'), (2, 'two')",
            "CREATE TABLE child (id serial PRIMARY KEY, parent_id int REFERENCES parent,"
            " tag text UNIQUE, made int DEFAULT 7)",
            "MERGE INTO child c USING (VALUES (1, 'a'), (2, 'b')) s(p, t) ON c.tag = s.t"
            " WHEN NOT MATCHED THEN INSERT (parent_id, tag) VALUES (s.p, s.t)",
            "SELECT * FROM child ORDER BY id",
            "MERGE INTO child c USING (VALUES (1, 'a'), (9, 'z')) s(p, t) ON c.tag = s.t"
            " WHEN NOT MATCHED THEN INSERT (parent_id, tag) VALUES (s.p, s.t)",
            "MERGE INTO child c USING (VALUES (9, 'a')) s(p, t) ON c.tag = s.t"
            " WHEN MATCHED THEN UPDATE SET parent_id = s.p",
            "MERGE INTO child c USING (VALUES (2, 'a'), (1, 'c')) s(p, t) ON c.tag = s.t"
            " WHEN MATCHED THEN UPDATE SET parent_id = s.p"
            " WHEN NOT MATCHED THEN INSERT VALUES (DEFAULT, s.p, s.t)",
            "SELECT parent_id, tag, made FROM child ORDER BY tag",
            "MERGE INTO child c USING (VALUES ('d')) s(t) ON c.tag = s.t"
            " WHEN NOT MATCHED THEN INSERT DEFAULT VALUES",
            "SELECT parent_id, tag, made FROM child ORDER BY tag",
            # deleting a referenced parent
            "MERGE INTO parent p USING (VALUES (2)) s(id) ON p.id = s.id WHEN MATCHED THEN DELETE",
            "SELECT * FROM parent ORDER BY id",
        ],
    )


def test_table_without_primary_key(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE log (k int, v text)",
            "INSERT INTO log VALUES (1, 'a'), (1, 'b'), (2, 'c')",
            "MERGE INTO log l USING (VALUES (1, 'x'), (3, 'y')) s(k, v) ON l.k = s.k"
            " WHEN MATCHED THEN UPDATE SET v = l.v || s.v"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v)",
            "SELECT * FROM log ORDER BY k, v",
            "MERGE INTO log l USING (VALUES (1)) s(k) ON l.k = s.k WHEN MATCHED THEN DELETE",
            "SELECT * FROM log ORDER BY k, v",
            # names both sides have: ambiguous where both are visible, the source's in INSERT
            "CREATE TABLE src (k int, v text, active boolean)",
            "INSERT INTO src VALUES (2, 'n', true), (4, 'm', false), (5, 'o', true)",
            "MERGE INTO log l USING src ON l.k = src.k WHEN MATCHED THEN UPDATE SET v = v",
            "MERGE INTO log l USING src ON l.k = src.k AND src.active"
            " WHEN MATCHED THEN UPDATE SET v = src.v"
            " WHEN NOT MATCHED AND active THEN INSERT VALUES (k, v || '!')",
            "SELECT * FROM log ORDER BY k, v",
            "MERGE INTO log l USING src ON l.k = src.k AND l.v = 'n'"
            " WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (k) VALUES (k + 100)",
            "SELECT * FROM log ORDER BY k, v",
        ],
    )


def test_explain(pair: Pair) -> None:
    ours, _ = pair
    ours.execute("CREATE TABLE ex (id int PRIMARY KEY, v int)")
    lines = [
        r[0]
        for r in ours.execute(
            "EXPLAIN MERGE INTO ex USING (VALUES (1, 2)) s(id, v) ON ex.id = s.id"
            " WHEN MATCHED THEN UPDATE SET v = s.v"
        ).fetchall()
    ]
    assert lines[0] == "Merge on ex"
    assert any("ex" in line and "Point Get" in line for line in lines), lines


def test_identity_views_and_expressions(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE idt (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text UNIQUE)",
            "MERGE INTO idt USING (VALUES ('a'), ('b')) s(k) ON idt.k = s.k"
            " WHEN NOT MATCHED THEN INSERT (k) VALUES (s.k)",
            "MERGE INTO idt USING (VALUES ('c')) s(k) ON idt.k = s.k"
            " WHEN NOT MATCHED THEN INSERT VALUES (DEFAULT, s.k)",
            "MERGE INTO idt USING (VALUES ('d')) s(k) ON idt.k = s.k"
            " WHEN NOT MATCHED THEN INSERT VALUES (100, s.k)",
            "MERGE INTO idt USING (VALUES ('d')) s(k) ON idt.k = s.k"
            " WHEN NOT MATCHED THEN INSERT (id, k) OVERRIDING SYSTEM VALUE VALUES (100, s.k)",
            "MERGE INTO idt USING (VALUES ('a')) s(k) ON idt.k = s.k"
            " WHEN MATCHED THEN UPDATE SET id = 5",
            "SELECT * FROM idt ORDER BY id",
            "CREATE VIEW idv AS SELECT * FROM idt",
            "MERGE INTO idv USING (VALUES ('a')) s(k) ON idv.k = s.k WHEN MATCHED THEN DELETE",
            "CREATE SEQUENCE mseq",
            "CREATE TABLE ex2 (id int PRIMARY KEY, n bigint, flag boolean)",
            "INSERT INTO ex2 VALUES (1, 1, true), (2, 2, false)",
            # subqueries in WHEN conditions and in values, nextval in INSERT
            "MERGE INTO ex2 e USING (VALUES (1), (2), (3), (4)) s(id) ON e.id = s.id"
            " WHEN MATCHED AND EXISTS (SELECT 1 FROM idt WHERE idt.id = s.id) THEN DELETE"
            " WHEN MATCHED AND e.flag THEN UPDATE SET n = (SELECT max(id) FROM idt)"
            " WHEN NOT MATCHED AND s.id < 4 THEN INSERT VALUES (s.id, nextval('mseq'), NULL)"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, (SELECT count(*) FROM idt), true)",
            "SELECT * FROM ex2 ORDER BY id",
            "MERGE INTO ex2 e USING (VALUES (1)) s(id) ON e.id = s.id"
            " WHEN MATCHED AND e.n THEN DELETE",
            "MERGE INTO ex2 e USING (VALUES (1)) s(id) ON e.id = s.id"
            " WHEN NOT MATCHED THEN INSERT VALUES ('x')",
            "MERGE INTO ex2 e USING ex2 ON e.id = ex2.id WHEN MATCHED THEN DELETE",
            "MERGE INTO ex2 USING ex2 ON true WHEN MATCHED THEN DELETE",
            # a source row matching several target rows updates each of them
            "MERGE INTO ex2 e USING (VALUES (1)) s(x) ON e.id > s.x"
            " WHEN MATCHED THEN UPDATE SET n = -e.n",
            "SELECT * FROM ex2 ORDER BY id",
            "PREPARE pm (int, bigint) AS MERGE INTO ex2 e USING (VALUES ($1, $2)) s(id, n)"
            " ON e.id = s.id WHEN MATCHED THEN UPDATE SET n = s.n"
            " WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.n)",
            "EXECUTE pm (2, 20)",
            "EXECUTE pm (7, 70)",
            "SELECT * FROM ex2 ORDER BY id",
        ],
    )


def test_parameters_and_with(pair: Pair) -> None:
    for conn in pair:
        conn.execute("CREATE TABLE pt (id int PRIMARY KEY, v text)")
        for args in ((1, "a"), (1, "b"), (2, "c")):
            cur = conn.execute(
                "MERGE INTO pt USING (SELECT %s::int AS id, %s::text AS v) s ON pt.id = s.id"
                " WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES"
                " (s.id, s.v)",
                args,
            )
            assert cur.statusmessage == "MERGE 1"
        assert conn.execute("SELECT * FROM pt ORDER BY id").fetchall() == [(1, "b"), (2, "c")]
    ours, _ = pair
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        ours.execute(
            "WITH x AS (SELECT 1 AS id) MERGE INTO pt USING x ON pt.id = x.id"
            " WHEN MATCHED THEN DELETE"
        )


def test_concurrent_update_conflicts(sql_server: Any) -> None:
    """Two transactions merging into the same row: the second waits for the first's row lock
    and, once the first has committed, fails with 40001 (REPEATABLE READ, as in Postgres)."""
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as b,
        ThreadPoolExecutor(1) as pool,
    ):
        a.execute("CREATE TABLE cc (id int PRIMARY KEY, n int)")
        a.execute("INSERT INTO cc VALUES (1, 0)")
        merge = (
            "MERGE INTO cc USING (VALUES (1)) s(id) ON cc.id = s.id"
            " WHEN MATCHED THEN UPDATE SET n = cc.n + 1"
        )
        a.execute("BEGIN")
        b.execute("BEGIN")
        a.execute(merge)
        second = pool.submit(b.execute, merge)
        with pytest.raises(FutureTimeout):
            second.result(timeout=0.5)
        a.execute("COMMIT")
        with pytest.raises(psycopg.errors.SerializationFailure):
            second.result(timeout=10)
        b.execute("ROLLBACK")
        assert a.execute("SELECT n FROM cc").fetchone() == (1,)
