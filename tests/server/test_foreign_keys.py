"""FOREIGN KEY constraints: DDL, checks and actions against real Postgres, and what snapshot
isolation needs on top (a concurrent delete of a parent and insert of a child: one fails)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer

Pair = tuple[psycopg.Connection, psycopg.Connection]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    return pg_pair


def test_references_are_checked(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE cust (id int PRIMARY KEY, name text UNIQUE)",
            "CREATE TABLE ord (id int PRIMARY KEY, cust int REFERENCES cust, note text)",
            "INSERT INTO cust VALUES (1, 'ann'), (2, 'bob')",
            "INSERT INTO ord VALUES (10, 1, 'a'), (11, NULL, 'no customer')",
            "INSERT INTO ord VALUES (12, 3, 'x')",
            "INSERT INTO ord VALUES (13, 2, 'ok'), (14, 9, 'bad')",
            "SELECT * FROM ord ORDER BY id",
            "UPDATE ord SET cust = 5 WHERE id = 10",
            "UPDATE ord SET cust = 2 WHERE id = 10",
            "UPDATE ord SET note = 'still fine' WHERE id = 10",
            "DELETE FROM cust WHERE id = 2",
            "UPDATE cust SET id = 20 WHERE id = 2",
            "UPDATE cust SET name = 'robert' WHERE id = 2",
            "DELETE FROM cust WHERE id = 1",
            "DELETE FROM ord WHERE cust = 2",
            "DELETE FROM cust WHERE id = 2",
            "INSERT INTO cust VALUES (3, 'cy')",
            "BEGIN",
            "INSERT INTO ord VALUES (20, 4, 'parent later in the transaction')",
            "ROLLBACK",
            "BEGIN",
            "INSERT INTO cust VALUES (4, 'dee')",
            "INSERT INTO ord VALUES (20, 4, 'parent earlier in the transaction')",
            "COMMIT",
            "SELECT o.id, c.name FROM ord o JOIN cust c ON c.id = o.cust ORDER BY o.id",
            "CREATE TABLE by_name (id int PRIMARY KEY, who text REFERENCES cust (name))",
            "INSERT INTO by_name VALUES (1, 'cy'), (2, NULL)",
            "INSERT INTO by_name VALUES (3, 'zed')",
            "UPDATE cust SET name = 'cyrus' WHERE id = 3",
            "DROP TABLE by_name",
        ],
    )


def test_actions(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE dept (id int PRIMARY KEY, code text UNIQUE NOT NULL)",
            "CREATE TABLE emp (id int PRIMARY KEY, dept int REFERENCES dept ON DELETE CASCADE"
            " ON UPDATE CASCADE, boss_code text REFERENCES dept (code) ON DELETE SET NULL"
            " ON UPDATE CASCADE)",
            "CREATE TABLE badge (emp int PRIMARY KEY REFERENCES emp ON DELETE CASCADE, n int)",
            "INSERT INTO dept VALUES (1, 'eng'), (2, 'ops'), (3, 'hr')",
            "INSERT INTO emp VALUES (10, 1, 'ops'), (11, 1, 'hr'), (12, 2, 'eng'), (13, 3, NULL)",
            "INSERT INTO badge VALUES (10, 100), (11, 110), (12, 120)",
            "UPDATE dept SET id = 7 WHERE id = 1",
            "SELECT * FROM emp ORDER BY id",
            "UPDATE dept SET code = 'people' WHERE code = 'hr'",
            "SELECT * FROM emp ORDER BY id",
            "DELETE FROM dept WHERE code = 'ops'",
            "SELECT * FROM emp ORDER BY id",
            "DELETE FROM dept WHERE id = 7",
            "SELECT * FROM emp ORDER BY id",
            "SELECT * FROM badge ORDER BY emp",
            "CREATE TABLE strict_child (id int PRIMARY KEY,"
            " d int REFERENCES dept ON DELETE RESTRICT)",
            "INSERT INTO strict_child VALUES (1, 3)",
            "DELETE FROM dept WHERE id = 3",
            "CREATE TABLE notnull_child (id int PRIMARY KEY, d int NOT NULL REFERENCES dept"
            " ON DELETE SET NULL)",
            "INSERT INTO notnull_child VALUES (1, 3)",
            "DELETE FROM strict_child",
            "DELETE FROM dept WHERE id = 3",
            "SELECT count(*) FROM dept",
        ],
    )


def test_self_reference_and_composite_keys(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE node (id int PRIMARY KEY, parent int REFERENCES node ON DELETE CASCADE)",
            "INSERT INTO node VALUES (2, 1), (1, NULL), (3, 2), (4, 2), (5, 1)",
            "INSERT INTO node VALUES (6, 60)",
            "DELETE FROM node WHERE id = 2",
            "SELECT * FROM node ORDER BY id",
            "CREATE TABLE tree (id int PRIMARY KEY, up int REFERENCES tree)",
            "INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2)",
            "DELETE FROM tree WHERE id = 2",
            "DELETE FROM tree",
            "CREATE TABLE orders (region text, num int, PRIMARY KEY (region, num))",
            "CREATE TABLE lines (region text, num int, line int, qty int,"
            " PRIMARY KEY (region, num, line),"
            " CONSTRAINT lines_order FOREIGN KEY (region, num) REFERENCES orders"
            " ON DELETE CASCADE)",
            "INSERT INTO orders VALUES ('eu', 1), ('us', 1)",
            "INSERT INTO lines VALUES ('eu', 1, 1, 5), ('eu', 1, 2, 6), ('us', 1, 1, 7)",
            "INSERT INTO lines VALUES ('eu', 2, 1, 5)",
            "INSERT INTO lines VALUES (NULL, 2, 1, 5)",
            "DELETE FROM orders WHERE region = 'eu'",
            "SELECT * FROM lines ORDER BY region, num, line",
        ],
    )


def test_ddl(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE p (id int PRIMARY KEY, u int UNIQUE, x int)",
            "CREATE TABLE c (id int PRIMARY KEY, pid int, px int)",
            "INSERT INTO p VALUES (1, 10, 100), (2, 20, 200)",
            "INSERT INTO c VALUES (1, 1, 100), (2, 3, 200)",
            "ALTER TABLE c ADD CONSTRAINT c_pid_fk FOREIGN KEY (pid) REFERENCES p",
            "DELETE FROM c WHERE id = 2",
            "ALTER TABLE c ADD CONSTRAINT c_pid_fk FOREIGN KEY (pid) REFERENCES p",
            "ALTER TABLE c ADD CONSTRAINT c_pid_fk FOREIGN KEY (pid) REFERENCES p",
            "ALTER TABLE c ADD FOREIGN KEY (px) REFERENCES p (x)",
            "ALTER TABLE c ADD FOREIGN KEY (px) REFERENCES p (u, id)",
            "ALTER TABLE c ADD FOREIGN KEY (px) REFERENCES nosuch",
            "CREATE TABLE c2 (id int PRIMARY KEY, t text REFERENCES p)",
            "CREATE TABLE c3 (id int PRIMARY KEY, b bigint REFERENCES p (u))",
            "INSERT INTO c3 VALUES (1, 10)",
            "INSERT INTO c3 VALUES (2, 11)",
            "DROP TABLE p",
            "TRUNCATE p",
            "ALTER TABLE p DROP COLUMN u",
            "ALTER TABLE c DROP CONSTRAINT c_pid_fk",
            "ALTER TABLE c DROP CONSTRAINT c_pid_fk",
            "ALTER TABLE c DROP CONSTRAINT IF EXISTS c_pid_fk",
            "INSERT INTO c VALUES (3, 99, 1)",
            "TRUNCATE p CASCADE",
            "SELECT count(*) FROM c3",
            "DROP TABLE p CASCADE",
            "INSERT INTO c3 VALUES (5, 55)",
            "DROP TABLE c, c3",
        ],
    )


@pytest.mark.parametrize(
    "clause",
    ["MATCH FULL", "ON DELETE SET DEFAULT"],
)
def test_unsupported_options_are_refused(sql_server: SqlServer, clause: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS opt_parent (id int PRIMARY KEY)")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute(f"CREATE TABLE opt_child (p int REFERENCES opt_parent {clause})")
        assert conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname = 'opt_child'"
        ).fetchone() == (0,)


def _setup_race(conn: psycopg.Connection, name: str, action: str = "") -> None:
    conn.execute(f"CREATE TABLE {name}_p (id int PRIMARY KEY)")
    conn.execute(f"CREATE TABLE {name}_c (id int PRIMARY KEY, p int REFERENCES {name}_p {action})")
    conn.execute(f"INSERT INTO {name}_p VALUES (1), (2)")


def _dangling(conn: psycopg.Connection, name: str) -> list[tuple[object, ...]]:
    return conn.execute(
        f"SELECT c.id, c.p FROM {name}_c c LEFT JOIN {name}_p p ON p.id = c.p"
        " WHERE c.p IS NOT NULL AND p.id IS NULL"
    ).fetchall()


ISOLATIONS = ["read committed", "repeatable read"]


def _session(server: SqlServer, isolation: str) -> psycopg.Connection:
    conn = psycopg.connect(server.conninfo())
    conn.execute(f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation}")
    conn.commit()
    return conn


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_child_insert_waits_for_a_parent_delete(sql_server: SqlServer, isolation: str) -> None:
    """As in Postgres: the insert's check locks the parent FOR KEY SHARE, so it waits for the
    uncommitted DELETE, then fails (READ COMMITTED: 23503 on the new snapshot; REPEATABLE
    READ: 40001), or goes on if the DELETE rolled back."""
    name = f"race1_{isolation[:4]}"
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        psycopg.connect(sql_server.conninfo()) as parent,
        _session(sql_server, isolation) as child,
        ThreadPoolExecutor(1) as pool,
    ):
        _setup_race(admin, name)
        for outcome in ("commit", "rollback"):
            key = 1 if outcome == "commit" else 2
            parent.execute(f"DELETE FROM {name}_p WHERE id = {key}")
            insert = pool.submit(child.execute, f"INSERT INTO {name}_c VALUES ({key}, {key})")
            with pytest.raises(FutureTimeout):
                insert.result(timeout=0.3)  # waits for the DELETE
            getattr(parent, outcome)()
            if outcome == "commit":
                expected = (
                    psycopg.errors.ForeignKeyViolation
                    if isolation == "read committed"
                    else psycopg.errors.SerializationFailure
                )
                with pytest.raises(expected):
                    insert.result(timeout=10)
                    child.commit()
                child.rollback()
            else:
                insert.result(timeout=10)
                child.commit()
        assert _dangling(admin, name) == []
        assert admin.execute(f"SELECT id, p FROM {name}_c").fetchall() == [(2, 2)]


@pytest.mark.parametrize("action", ["", "ON DELETE CASCADE", "ON DELETE SET NULL"])
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_parent_delete_waits_for_a_child_insert(
    sql_server: SqlServer, action: str, isolation: str
) -> None:
    """The DELETE waits for the uncommitted child, then (READ COMMITTED) runs again and sees
    it: 23503, or its action applies to it; under REPEATABLE READ it fails with 40001."""
    name = f"race2_{len(action)}_{isolation[:4]}"
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as admin,
        psycopg.connect(sql_server.conninfo()) as child,
        _session(sql_server, isolation) as parent,
        ThreadPoolExecutor(1) as pool,
    ):
        _setup_race(admin, name, action)
        child.execute(f"INSERT INTO {name}_c VALUES (1, 1)")
        delete = pool.submit(parent.execute, f"DELETE FROM {name}_p WHERE id = 1")
        with pytest.raises(FutureTimeout):
            delete.result(timeout=0.3)  # waits for the insert
        child.commit()
        if isolation == "repeatable read":
            with pytest.raises(psycopg.errors.SerializationFailure):
                delete.result(timeout=10)
                parent.commit()
            parent.rollback()
            expected: list[tuple[object, ...]] = [(1,)]
        elif not action:
            with pytest.raises(psycopg.errors.ForeignKeyViolation):
                delete.result(timeout=10)
            parent.rollback()
            expected = [(1,)]
        else:
            delete.result(timeout=10)
            parent.commit()
            expected = [] if "CASCADE" in action else [(None,)]
        assert _dangling(admin, name) == []
        assert admin.execute(f"SELECT p FROM {name}_c").fetchall() == expected


def test_racing_writers_leave_no_dangling_reference(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as admin:
        admin.execute("CREATE TABLE race3_p (id int PRIMARY KEY)")
        admin.execute("CREATE TABLE race3_c (id serial PRIMARY KEY, p int REFERENCES race3_p)")
    stop = threading.Event()
    errors: list[BaseException] = []
    inserted: list[int] = []

    def parents() -> None:
        with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    conn.execute("INSERT INTO race3_p VALUES (%s)", (n % 5,))
                except psycopg.errors.UniqueViolation:
                    pass
                except psycopg.errors.SerializationFailure:
                    pass
                try:
                    with conn.transaction():
                        conn.execute("DELETE FROM race3_p WHERE id = %s", ((n * 3) % 5,))
                        time.sleep(0.005)
                except (psycopg.errors.ForeignKeyViolation, psycopg.errors.SerializationFailure):
                    pass

    def children() -> None:
        with psycopg.connect(sql_server.conninfo()) as conn:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    conn.execute("INSERT INTO race3_c (p) VALUES (%s)", (n % 5,))
                    time.sleep(0.005)  # widen the window between the check and the commit
                    conn.commit()
                    inserted.append(n)
                except (psycopg.errors.ForeignKeyViolation, psycopg.errors.SerializationFailure):
                    conn.rollback()
                try:
                    conn.execute("DELETE FROM race3_c WHERE p = %s", ((n * 7) % 5,))
                    conn.commit()
                except psycopg.errors.SerializationFailure:
                    conn.rollback()

    def guarded(fn):  # type: ignore[no-untyped-def]
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(f)) for f in (parents, parents, children, children)]
    for t in threads:
        t.start()
    stop.wait(4.0)
    stop.set()
    for t in threads:
        t.join(30)
    assert errors == []
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as admin:
        assert _dangling(admin, "race3") == []
    assert inserted  # the race ran: some child inserts committed


def test_deferrable_constraints(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE dp (id int PRIMARY KEY)",
            "CREATE TABLE dc (id int PRIMARY KEY, p int REFERENCES dp DEFERRABLE INITIALLY"
            " DEFERRED, q int)",
            "ALTER TABLE dc ADD CONSTRAINT dc_q_fkey FOREIGN KEY (q) REFERENCES dp"
            " DEFERRABLE INITIALLY IMMEDIATE",
            "SELECT conname, condeferrable, condeferred, pg_get_constraintdef(oid) FROM"
            " pg_constraint WHERE conrelid = 'dc'::regclass AND contype = 'f' ORDER BY conname",
            "SELECT constraint_name, is_deferrable, initially_deferred FROM"
            " information_schema.table_constraints WHERE table_name = 'dc'"
            " AND constraint_type = 'FOREIGN KEY' ORDER BY constraint_name",
            "BEGIN",
            "INSERT INTO dc VALUES (1, 10, NULL)",
            "INSERT INTO dp VALUES (10)",
            "COMMIT",
            "BEGIN",
            "INSERT INTO dc VALUES (2, 20, NULL)",
            "COMMIT",
            "SELECT * FROM dc ORDER BY id",
            "INSERT INTO dc VALUES (3, 30, NULL)",
            "BEGIN",
            "INSERT INTO dc VALUES (4, NULL, 40)",
            "ROLLBACK",
            "BEGIN",
            "SET CONSTRAINTS dc_q_fkey DEFERRED",
            "INSERT INTO dc VALUES (4, NULL, 40)",
            "INSERT INTO dp VALUES (40)",
            "COMMIT",
            "BEGIN",
            "DELETE FROM dp WHERE id = 10",
            "INSERT INTO dp VALUES (10)",
            "COMMIT",
            "BEGIN",
            "DELETE FROM dp WHERE id = 10",
            "SET CONSTRAINTS ALL IMMEDIATE",
            "ROLLBACK",
            "BEGIN",
            "INSERT INTO dc VALUES (5, 50, NULL)",
            "SET CONSTRAINTS dc_p_fkey IMMEDIATE",
            "ROLLBACK",
            "SET CONSTRAINTS ALL DEFERRED",
            "BEGIN",
            "SET CONSTRAINTS nosuch DEFERRED",
            "ROLLBACK",
            "CREATE TABLE dimplied (p int REFERENCES dp INITIALLY DEFERRED)",
            "CREATE TABLE dbad (p int REFERENCES dp NOT DEFERRABLE INITIALLY DEFERRED)",
            "SELECT condeferrable, condeferred FROM pg_constraint"
            " WHERE conrelid = 'dimplied'::regclass",
            "SELECT * FROM dc ORDER BY id",
        ],
    )
