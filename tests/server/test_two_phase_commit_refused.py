"""Two-phase commit from the client (PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED)
is refused with 0A000. A refused PREPARE TRANSACTION ends the transaction block, rolled back,
as a failed prepare does in Postgres: the session is idle again, not left in a failed block
(Postgres's isolation tester, which reuses its connections, relies on that)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from tests.server.conftest import SqlServer


def test_prepare_transaction_is_refused_and_ends_the_block(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS two_phase")
        conn.execute("CREATE TABLE two_phase (id int PRIMARY KEY)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO two_phase VALUES (1)")
        with pytest.raises(errors.FeatureNotSupported, match="PREPARE TRANSACTION"):
            conn.execute("PREPARE TRANSACTION 'tx1'")
        # Idle again: the next statement runs in a transaction of its own, and the insert
        # was rolled back with the block.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM two_phase").fetchone() == (0,)


def test_prepare_transaction_ends_a_failed_block_too(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("BEGIN")
        with pytest.raises(errors.DivisionByZero):
            conn.execute("SELECT 1/0")
        with pytest.raises(errors.FeatureNotSupported):
            conn.execute("PREPARE TRANSACTION 'tx2'")
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("statement", ["COMMIT PREPARED 'tx3'", "ROLLBACK PREPARED 'tx3'"])
def test_commit_and_rollback_prepared_are_refused(sql_server: SqlServer, statement: str) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        with pytest.raises(errors.FeatureNotSupported, match=statement.split(" '")[0]):
            conn.execute(statement)
        assert conn.execute("SELECT 1").fetchone() == (1,)
