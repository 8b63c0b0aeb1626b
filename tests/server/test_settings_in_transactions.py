"""SET inside transactions, compared with Postgres statement by statement: a SET is undone by
ROLLBACK and by ROLLBACK TO a savepoint before it, kept by COMMIT and RELEASE; SET LOCAL lasts
until the transaction ends (and so does set_config(name, value, true)); SET TRANSACTION
refuses what Postgres refuses (25001)."""

from __future__ import annotations

import psycopg
import pytest

from tests.server.scripted import compare

SCRIPTS = {
    "rollback undoes SET": [
        "SET TimeZone = 'UTC'",
        "BEGIN",
        "SET TimeZone = 'Asia/Tokyo'",
        "SHOW TimeZone",
        "ROLLBACK",
        "SHOW TimeZone",
    ],
    "SET LOCAL ends with the transaction": [
        "SET TimeZone = 'UTC'",
        "BEGIN",
        "SET LOCAL TimeZone = 'Asia/Tokyo'",
        "SELECT '2024-01-01 00:00:00+00'::timestamptz::text",
        "COMMIT",
        "SHOW TimeZone",
        "BEGIN",
        "SET TimeZone = 'Europe/Paris'",
        "SET LOCAL TimeZone = 'Asia/Tokyo'",
        "COMMIT",
        "SHOW TimeZone",
        "SET LOCAL TimeZone = 'Asia/Tokyo'",
        "SHOW TimeZone",
        "SET statement_timeout = 0",
        "BEGIN",
        "SET LOCAL statement_timeout = '5s'",
        "SHOW statement_timeout",
        "COMMIT",
        "SHOW statement_timeout",
    ],
    "set_config with is_local is SET LOCAL": [
        "SELECT set_config('application_name', 'a1', true)",
        "SHOW application_name",
        "BEGIN",
        "SELECT set_config('application_name', 'a2', true)",
        "SHOW application_name",
        "COMMIT",
        "SHOW application_name",
        "BEGIN",
        "SELECT set_config('application_name', 'a3', false)",
        "SELECT set_config('myapp.user', '42', true), current_setting('myapp.user')",
        "COMMIT",
        "SHOW application_name",
        "SELECT current_setting('myapp.user', true)",
        "BEGIN",
        "SELECT set_config('myapp.user', '43', true)",
        "SELECT current_setting('myapp.user')",
        "ROLLBACK",
        "SELECT current_setting('myapp.user', true)",
    ],
    "DEFERRABLE and SERIALIZABLE": [
        "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE",
        "SHOW transaction_isolation",
        "SHOW transaction_deferrable",
        "COMMIT",
        "SHOW transaction_deferrable",
        "BEGIN",
        "SET TRANSACTION DEFERRABLE",
        "SHOW transaction_deferrable",
        "COMMIT",
        "SET default_transaction_deferrable = true",
        "SHOW default_transaction_deferrable",
        "BEGIN",
        "SHOW transaction_deferrable",
        "COMMIT",
        "SET SESSION CHARACTERISTICS AS TRANSACTION NOT DEFERRABLE, ISOLATION LEVEL SERIALIZABLE",
        "SHOW default_transaction_deferrable",
        "SHOW transaction_isolation",
        "RESET default_transaction_isolation",
    ],
    "savepoints": [
        "SET TimeZone = 'UTC'",
        "BEGIN",
        "SAVEPOINT a",
        "SET TimeZone = 'Asia/Tokyo'",
        "ROLLBACK TO a",
        "SHOW TimeZone",
        "SET TimeZone = 'Europe/Paris'",
        "SAVEPOINT b",
        "SET TimeZone = 'Asia/Tokyo'",
        "RELEASE b",
        "SHOW TimeZone",
        "ROLLBACK",
        "SHOW TimeZone",
        "BEGIN",
        "SAVEPOINT a",
        "SET TRANSACTION READ ONLY",
        "ROLLBACK TO a",
        "SHOW transaction_read_only",
        "SAVEPOINT b",
        "SET TRANSACTION READ ONLY",
        "RELEASE b",
        "SHOW transaction_read_only",
        "COMMIT",
    ],
    "a custom setting set in a rolled-back transaction": [
        "BEGIN",
        "SET myapp.tenant = '42'",
        "SHOW myapp.tenant",
        "ROLLBACK",
        "SHOW myapp.tenant",
        "SELECT current_setting('myapp.tenant')",
    ],
    "a failed transaction undoes SET": [
        "SET TimeZone = 'UTC'",
        "BEGIN",
        "SET TimeZone = 'Asia/Tokyo'",
        "SELECT 1/0",
        "ROLLBACK",
        "SHOW TimeZone",
    ],
    "SET TRANSACTION after a query": [
        "BEGIN READ ONLY",
        "SELECT 1",
        "SET TRANSACTION READ WRITE",
        "ROLLBACK",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "SELECT 1",
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "ROLLBACK",
        "BEGIN",
        "SET TRANSACTION READ ONLY",
        "SET TRANSACTION READ WRITE",
        "SHOW transaction_read_only",
        "SAVEPOINT s",
        "SET TRANSACTION READ ONLY",
        "SELECT 1",
        "SET TRANSACTION READ WRITE",
        "ROLLBACK",
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_settings_follow_the_transaction(
    pg_pair: tuple[psycopg.Connection, psycopg.Connection], name: str
) -> None:
    ours, ref = pg_pair
    compare(ours, ref, SCRIPTS[name])
