"""DISCARD ALL brings a session back to a new connection's state, as a connection pooler
(pgbouncer's server_reset_query) relies on; DISCARD TEMP and SEQUENCES do their part."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer


def test_discard_all_resets_the_session(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        conn.execute("CREATE TEMP TABLE discard_tmp (a int)")
        conn.execute("PREPARE discard_p AS SELECT 1")
        conn.execute("CREATE SEQUENCE discard_seq")
        conn.execute("SELECT nextval('discard_seq')")
        conn.execute("SELECT pg_advisory_lock(4242)")
        conn.execute("LISTEN discard_channel")
        conn.execute("BEGIN")
        with pytest.raises(errors.ActiveSqlTransaction):
            conn.execute("DISCARD ALL")
        conn.execute("ROLLBACK")
        assert conn.execute("DISCARD ALL").statusmessage == "DISCARD ALL"
        assert conn.execute("SHOW TimeZone").fetchone() != ("Asia/Tokyo",)
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT * FROM discard_tmp")
        with pytest.raises(errors.InvalidSqlStatementName):
            conn.execute("EXECUTE discard_p")
        with pytest.raises(errors.ObjectNotInPrerequisiteState):
            conn.execute("SELECT currval('discard_seq')")
        with psycopg.connect(sql_server.conninfo(), autocommit=True) as other:
            assert other.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)


def test_discard_temp_drops_the_temporary_tables(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE discard_tmp2 (a int)")
        conn.execute("INSERT INTO discard_tmp2 VALUES (1)")
        conn.execute("DISCARD TEMP")
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT * FROM discard_tmp2")
        conn.execute("CREATE TEMP TABLE discard_tmp2 (b text)")
        assert conn.execute("SELECT count(*) FROM discard_tmp2").fetchone() == (0,)
