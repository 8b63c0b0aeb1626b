"""Row triggers (CREATE TRIGGER ... FOR EACH ROW EXECUTE FUNCTION a PL/pgSQL function) against
real Postgres: what BEFORE triggers change or skip, what AFTER triggers see, on every write
path that fires them, and how psql and the catalogs show them."""

from __future__ import annotations

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer
from tests.server.test_client_psql import ok, psql, psql_dsn

Pair = tuple[psycopg.Connection, psycopg.Connection]

SETUP = [
    "CREATE TABLE tr_items (id int PRIMARY KEY, name text, price numeric, version int DEFAULT 0)",
    "CREATE TABLE tr_audit (n serial PRIMARY KEY, op text, item int, old_price numeric,"
    " new_price numeric, via text)",
    "CREATE FUNCTION tr_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " NEW.version := coalesce(OLD.version, 0) + 1; NEW.name := upper(NEW.name);"
    " RETURN NEW; END $$",
    "CREATE FUNCTION tr_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF TG_OP = 'DELETE' THEN"
    "  INSERT INTO tr_audit (op, item, old_price, via)"
    "  VALUES (TG_OP, OLD.id, OLD.price, TG_ARGV[0]);"
    "  RETURN OLD; END IF;"
    " INSERT INTO tr_audit (op, item, old_price, new_price, via)"
    "  VALUES (TG_OP, NEW.id, OLD.price, NEW.price, TG_ARGV[0]); RETURN NEW; END $$",
    "CREATE FUNCTION tr_no_cheap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF NEW.price < 1 THEN RETURN NULL; END IF; RETURN NEW; END $$",
    "CREATE FUNCTION tr_keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF OLD.name = 'KEEP' THEN RETURN NULL; END IF; RETURN OLD; END $$",
    "CREATE TRIGGER a_touch BEFORE INSERT OR UPDATE ON tr_items"
    " FOR EACH ROW EXECUTE FUNCTION tr_touch()",
    "CREATE TRIGGER b_cheap BEFORE INSERT ON tr_items FOR EACH ROW EXECUTE FUNCTION tr_no_cheap()",
    "CREATE TRIGGER c_keep BEFORE DELETE ON tr_items FOR EACH ROW EXECUTE FUNCTION tr_keep()",
    "CREATE TRIGGER z_log AFTER INSERT OR UPDATE OR DELETE ON tr_items"
    " FOR EACH ROW EXECUTE PROCEDURE tr_log('stmt')",
]


@pytest.fixture(scope="module")
def pair(pg_pair: Pair) -> Pair:
    for conn in pg_pair:
        for sql in SETUP:
            conn.execute(sql)
    return pg_pair


def test_before_and_after_row_triggers(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "INSERT INTO tr_items (id, name, price) VALUES (1, 'apple', 3), (2, 'pear', 0.5),"
            " (3, 'fig', 7), (4, 'keep', 2) RETURNING *",
            "UPDATE tr_items SET price = price * 2 WHERE id IN (1, 3) RETURNING id, name, version",
            "UPDATE tr_items SET name = 'kiwi' WHERE id = 1",
            "DELETE FROM tr_items WHERE id IN (3, 4) RETURNING id",
            "SELECT * FROM tr_items ORDER BY id",
            "INSERT INTO tr_items (id, name, price) VALUES (1, 'dup', 5)"
            " ON CONFLICT (id) DO UPDATE SET price = excluded.price",
            "INSERT INTO tr_items (id, name, price) VALUES (5, 'new', 0.1), (1, 'x', 0.2)"
            " ON CONFLICT (id) DO NOTHING",
            "SELECT * FROM tr_items ORDER BY id",
            "SELECT op, item, old_price, new_price, via FROM tr_audit ORDER BY n",
        ],
    )


def test_triggers_fire_on_merge_copy_and_cascades(pair: Pair) -> None:
    ours, ref = pair
    script = [
        "CREATE TABLE tr_parent (id int PRIMARY KEY)",
        "CREATE TABLE tr_child (id int PRIMARY KEY, parent int REFERENCES tr_parent"
        " ON DELETE CASCADE, note text)",
        "CREATE FUNCTION tr_child_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " INSERT INTO tr_audit (op, item, via) VALUES (TG_OP, OLD.id, TG_TABLE_NAME);"
        " RETURN OLD; END $$",
        "CREATE TRIGGER child_log AFTER DELETE ON tr_child FOR EACH ROW"
        " EXECUTE FUNCTION tr_child_log()",
        "INSERT INTO tr_parent VALUES (1), (2)",
        "INSERT INTO tr_child VALUES (10, 1, 'a'), (11, 1, 'b'), (12, 2, 'c')",
        "DELETE FROM tr_parent WHERE id = 1",
        "MERGE INTO tr_items t USING (VALUES (1, 50), (9, 90)) AS s(id, price) ON t.id = s.id"
        " WHEN MATCHED THEN UPDATE SET price = s.price"
        " WHEN NOT MATCHED THEN INSERT (id, name, price) VALUES (s.id, 'merged', s.price)",
        "SELECT * FROM tr_items ORDER BY id",
        "SELECT op, item, via FROM tr_audit WHERE n > 9 ORDER BY n",
    ]
    scripted.compare(ours, ref, script)
    for conn in pair:
        with conn.cursor().copy("COPY tr_items (id, name, price) FROM STDIN") as copy:
            copy.write_row((20, "copied", 4))
            copy.write_row((21, "cheap", 0))
    scripted.compare(ours, ref, ["SELECT * FROM tr_items WHERE id >= 20 ORDER BY id"])


def test_trigger_ddl_and_errors(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TRIGGER z_log AFTER INSERT ON tr_items FOR EACH ROW EXECUTE FUNCTION tr_log()",
            "CREATE OR REPLACE TRIGGER z_log AFTER DELETE ON tr_items"
            " FOR EACH ROW EXECUTE FUNCTION tr_log('replaced')",
            "CREATE TRIGGER t_bad BEFORE INSERT ON tr_items FOR EACH ROW EXECUTE FUNCTION nope()",
            "CREATE FUNCTION tr_plain() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE TRIGGER t_bad BEFORE INSERT ON tr_items FOR EACH ROW"
            " EXECUTE FUNCTION tr_plain()",
            "CREATE TRIGGER t_bad BEFORE INSERT ON tr_nope FOR EACH ROW EXECUTE FUNCTION tr_log()",
            "CREATE TRIGGER t_bad BEFORE UPDATE OF nope ON tr_items"
            " FOR EACH ROW EXECUTE FUNCTION tr_log()",
            "SELECT tr_touch()",
            "CREATE FUNCTION tr_args(a int) RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NEW; END $$",
            "CREATE FUNCTION tr_sql() RETURNS trigger LANGUAGE sql AS 'SELECT 1'",
            "DROP FUNCTION tr_log()",
            "DROP TRIGGER nope ON tr_items",
            "DROP TRIGGER IF EXISTS nope ON tr_items",
            "SELECT tgname, tgtype, tgenabled, tgnargs, tgargs, tgfoid::regproc FROM pg_trigger"
            " WHERE tgrelid = 'tr_items'::regclass ORDER BY 1",
            "SELECT pg_get_triggerdef(oid), pg_get_triggerdef(oid, true) FROM pg_trigger"
            " WHERE tgrelid = 'tr_items'::regclass ORDER BY tgname",
            "DROP TRIGGER z_log ON tr_items",
            "DROP FUNCTION tr_log() CASCADE",
        ],
    )


def test_a_failing_trigger_undoes_the_statement(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tr_strict (id int PRIMARY KEY, qty int)",
            "CREATE FUNCTION tr_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.qty < 0 THEN RAISE EXCEPTION 'negative qty for %', NEW.id"
            " USING ERRCODE = '23514'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON tr_strict"
            " FOR EACH ROW EXECUTE FUNCTION tr_refuse()",
            "INSERT INTO tr_strict VALUES (1, 5), (2, -1)",
            "SELECT count(*) FROM tr_strict",
            "INSERT INTO tr_strict VALUES (1, 5)",
            "UPDATE tr_strict SET qty = qty - 10",
            "SELECT * FROM tr_strict",
        ],
    )


def test_triggers_see_the_rows_written_before(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tr_seq (id int PRIMARY KEY, seq int, v int CHECK (v < 100))",
            "CREATE FUNCTION tr_next() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " NEW.seq := (SELECT coalesce(max(seq), 0) + 1 FROM tr_seq); RETURN NEW; END $$",
            "CREATE TRIGGER tr_next BEFORE INSERT ON tr_seq FOR EACH ROW"
            " EXECUTE FUNCTION tr_next()",
            "INSERT INTO tr_seq (id, v) VALUES (1, 1), (2, 2), (3, 3)",
            "CREATE FUNCTION tr_cap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.v >= 100 THEN NEW.v := 99; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER tr_cap BEFORE UPDATE ON tr_seq FOR EACH ROW EXECUTE FUNCTION tr_cap()",
            "INSERT INTO tr_seq (id, v) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET v = 700",
            "UPDATE tr_seq SET v = 500 WHERE id = 2",
            "SELECT * FROM tr_seq ORDER BY id",
        ],
    )


def test_update_of_follows_renames_and_drops(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tr_of (id int PRIMARY KEY, b int, d int)",
            "INSERT INTO tr_of VALUES (1, 1, 1)",
            "CREATE FUNCTION tr_of_f() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN NEW.d := NEW.d + 1000; RETURN NEW; END $$",
            "CREATE TRIGGER tr_of_t BEFORE UPDATE OF b ON tr_of FOR EACH ROW"
            " EXECUTE FUNCTION tr_of_f()",
            "ALTER TABLE tr_of RENAME COLUMN b TO bb",
            "UPDATE tr_of SET d = 7",
            "UPDATE tr_of SET bb = 2",
            "SELECT * FROM tr_of",
            "SELECT pg_get_triggerdef(oid, true) FROM pg_trigger WHERE tgname = 'tr_of_t'",
        ],
    )


def test_drop_schema_cascade_drops_the_triggers(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE SCHEMA tr_fs",
            "CREATE TABLE tr_t10 (id int PRIMARY KEY, v int)",
            "CREATE FUNCTION tr_fs.f() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN NEW.v := 1; RETURN NEW; END $$",
            "CREATE TRIGGER tr10 BEFORE INSERT ON tr_t10 FOR EACH ROW EXECUTE FUNCTION tr_fs.f()",
            "DROP SCHEMA tr_fs CASCADE",
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'tr10'",
            "INSERT INTO tr_t10 VALUES (1, 5)",
            "SELECT * FROM tr_t10",
        ],
    )


def test_when_conditions(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tr_w (id int PRIMARY KEY, price int, note text)",
            "CREATE TABLE tr_wlog (n serial PRIMARY KEY, msg text)",
            "CREATE FUNCTION tr_wlog_f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO tr_wlog (msg) VALUES (TG_NAME || ':' || coalesce(NEW.id, OLD.id));"
            " IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER w_changed AFTER UPDATE ON tr_w FOR EACH ROW"
            " WHEN (OLD.price IS DISTINCT FROM NEW.price) EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_big BEFORE INSERT ON tr_w FOR EACH ROW WHEN (NEW.price > 100)"
            " EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_bad BEFORE INSERT ON tr_w FOR EACH ROW WHEN (old.price > 1)"
            " EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_bad AFTER DELETE ON tr_w FOR EACH ROW WHEN (new.price > 1)"
            " EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_bad AFTER DELETE ON tr_w FOR EACH ROW WHEN ((SELECT true))"
            " EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_bad AFTER DELETE ON tr_w FOR EACH ROW WHEN (old.nope > 1)"
            " EXECUTE FUNCTION tr_wlog_f()",
            "CREATE TRIGGER w_bad AFTER DELETE ON tr_w FOR EACH ROW WHEN (old.price > $1)"
            " EXECUTE FUNCTION tr_wlog_f()",
            "INSERT INTO tr_w VALUES (1, 50, 'a'), (2, 500, 'b')",
            "UPDATE tr_w SET note = 'x'",
            "UPDATE tr_w SET price = price + 1 WHERE id = 1",
            "ALTER TABLE tr_w RENAME COLUMN price TO cost",
            "UPDATE tr_w SET cost = cost + 1 WHERE id = 2",
            "SELECT msg FROM tr_wlog ORDER BY n",
            "SELECT pg_get_triggerdef(oid, true) FROM pg_trigger"
            " WHERE tgrelid = 'tr_w'::regclass ORDER BY tgname",
            "ALTER TABLE tr_w DROP COLUMN note",
            "ALTER TABLE tr_w DROP COLUMN cost",
            "ALTER TABLE tr_w DROP COLUMN cost CASCADE",
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tr_w'::regclass",
        ],
    )


def test_statement_level_triggers(pair: Pair) -> None:
    ours, ref = pair
    script = [
        "CREATE TABLE tr_st (id int PRIMARY KEY, v int)",
        "CREATE TABLE tr_stlog (n serial PRIMARY KEY, msg text)",
        "CREATE FUNCTION tr_st_f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " INSERT INTO tr_stlog (msg) VALUES (TG_NAME || ' ' || TG_WHEN || ' ' || TG_LEVEL"
        " || ' ' || TG_OP); RETURN NULL; END $$",
        "CREATE TRIGGER s_b BEFORE INSERT OR UPDATE OR DELETE ON tr_st FOR EACH STATEMENT"
        " EXECUTE FUNCTION tr_st_f()",
        "CREATE TRIGGER s_a AFTER INSERT OR UPDATE OR DELETE ON tr_st EXECUTE FUNCTION tr_st_f()",
        "INSERT INTO tr_st VALUES (1, 1), (2, 2)",
        "UPDATE tr_st SET v = v + 1 WHERE id = 99",
        "DELETE FROM tr_st WHERE id = 1",
        "INSERT INTO tr_st VALUES (2, 5) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        "MERGE INTO tr_st t USING (VALUES (2, 9), (3, 3)) s(id, v) ON t.id = s.id"
        " WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
        "SELECT pg_get_triggerdef(oid, true), tgtype FROM pg_trigger"
        " WHERE tgrelid = 'tr_st'::regclass ORDER BY tgname",
    ]
    scripted.compare(ours, ref, script)
    for conn in pair:
        with conn.cursor().copy("COPY tr_st FROM STDIN") as copy:
            copy.write_row((10, 10))
    scripted.compare(ours, ref, ["SELECT msg FROM tr_stlog ORDER BY n"])


def test_enable_and_disable(pair: Pair) -> None:
    scripted.compare(
        *pair,
        [
            "CREATE TABLE tr_en (id int PRIMARY KEY, v int)",
            "CREATE FUNCTION tr_en_f() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN NEW.v := 99; RETURN NEW; END $$",
            "CREATE TRIGGER tr_en_t BEFORE INSERT ON tr_en FOR EACH ROW EXECUTE FUNCTION tr_en_f()",
            "ALTER TABLE tr_en DISABLE TRIGGER tr_en_t",
            "INSERT INTO tr_en VALUES (1, 1)",
            "ALTER TABLE tr_en ENABLE TRIGGER ALL",
            "INSERT INTO tr_en VALUES (2, 2)",
            "ALTER TABLE tr_en DISABLE TRIGGER USER",
            "INSERT INTO tr_en VALUES (3, 3)",
            "ALTER TABLE tr_en ENABLE TRIGGER nope",
            "ALTER TABLE IF EXISTS tr_nope DISABLE TRIGGER ALL",
            "SELECT * FROM tr_en ORDER BY 1",
            "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'tr_en'::regclass",
        ],
    )


def test_refused_trigger_kinds(pair: Pair) -> None:
    ours, _ = pair
    for sql in [
        "CREATE TRIGGER s AFTER UPDATE OF name ON tr_items FOR EACH STATEMENT"
        " EXECUTE FUNCTION tr_touch()",
        "CREATE TRIGGER s BEFORE TRUNCATE ON tr_items EXECUTE FUNCTION tr_touch()",
        "CREATE CONSTRAINT TRIGGER s AFTER INSERT ON tr_items FOR EACH ROW"
        " EXECUTE FUNCTION tr_touch()",
    ]:
        assert scripted.run(ours, sql) == ("error", "0A000"), sql


def test_psql_describes_triggers(pair: Pair, sql_server: SqlServer, reference_dsn: str) -> None:
    assert ok(psql(sql_server, "-c", r"\d tr_items")) == ok(
        psql_dsn(reference_dsn, "-c", r"\d tr_items")
    )
