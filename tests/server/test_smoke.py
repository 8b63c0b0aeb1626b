"""The SQL server answers a real client: tables, DML, queries and errors through psycopg."""

from __future__ import annotations

import psycopg
import pytest

from tests.server.conftest import SqlServer


def test_round_trip_through_psycopg(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE smoke (id int PRIMARY KEY, name text NOT NULL, v numeric(6,2))")
        conn.execute("INSERT INTO smoke VALUES (1, 'a', 1.5), (2, 'b', NULL)")
        rows = conn.execute("SELECT id, name, v FROM smoke ORDER BY id").fetchall()
        assert rows[0][0] == 1 and rows[0][1] == "a" and str(rows[0][2]) == "1.50"
        assert rows[1] == (2, "b", None)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO smoke VALUES (1, 'again', 0)")
        assert conn.execute("SELECT count(*) FROM smoke").fetchone() == (2,)
