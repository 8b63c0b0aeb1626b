"""CREATE TABLE ... AS and SELECT ... INTO, compared with Postgres statement by statement:
the new table's columns (names and types, as information_schema shows them), its rows, the
command tags, IF NOT EXISTS, WITH NO DATA, a column list, a temporary table, a rollback."""

from __future__ import annotations

import psycopg

from tests.server.scripted import compare

COLUMNS = (
    "SELECT column_name, data_type, character_maximum_length, numeric_precision,"
    " numeric_scale FROM information_schema.columns WHERE table_name = '{}'"
    " ORDER BY ordinal_position"
)

SCRIPT = [
    "CREATE TABLE ctas_src (id int PRIMARY KEY, name varchar(10), amt numeric(8,2), ts timestamp)",
    "INSERT INTO ctas_src VALUES (1, 'a', 1.5, '2024-01-01'), (2, 'b', NULL, NULL)",
    "CREATE TABLE ctas_copy AS SELECT * FROM ctas_src WHERE id > 0",
    "SELECT * FROM ctas_copy ORDER BY id",
    COLUMNS.format("ctas_copy"),
    "CREATE TABLE IF NOT EXISTS ctas_copy AS SELECT 1",
    "CREATE TABLE ctas_empty (x, y) AS SELECT id, name || '!' FROM ctas_src WITH NO DATA",
    "SELECT count(*) FROM ctas_empty",
    COLUMNS.format("ctas_empty"),
    "SELECT count(*) AS n, max(name) INTO ctas_into FROM ctas_src",
    "SELECT * FROM ctas_into",
    COLUMNS.format("ctas_into"),
    "BEGIN",
    "CREATE TABLE ctas_gone AS SELECT 'lit' AS l, 1 + 1 AS two",
    "SELECT * FROM ctas_gone",
    "ROLLBACK",
    "SELECT * FROM ctas_gone",
    "CREATE TEMP TABLE ctas_temp AS SELECT id FROM ctas_src",
    "SELECT * FROM ctas_temp ORDER BY 1",
    "SELECT id INTO TEMP ctas_temp_into FROM ctas_src WHERE id = 2",
    "SELECT * FROM ctas_temp_into",
    "CREATE TABLE ctas_bad (a, b, c) AS SELECT 1, 2",
    "INSERT INTO ctas_copy VALUES (1, 'dup', 0, NULL)",
    "SELECT count(*) FROM ctas_copy",
]


def test_create_table_as_and_select_into(
    pg_pair: tuple[psycopg.Connection, psycopg.Connection],
) -> None:
    ours, ref = pg_pair
    compare(ours, ref, SCRIPT)
