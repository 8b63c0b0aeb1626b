# One statement per line keeps the scripts greppable: long lines allowed.
# ruff: noqa: E501
"""Session time zones (SET TIME ZONE, the TimeZone startup parameter) against real Postgres,
and as psycopg sees them (ParameterStatus, timestamptz values as aware datetimes)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tests.server import scripted
from tests.server.conftest import SqlServer


@pytest.fixture(scope="module")
def pair(sql_server: SqlServer, reference_dsn: str) -> Iterator[tuple[psycopg.Connection, ...]]:
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as ours,
        psycopg.connect(reference_dsn, autocommit=True) as ref,
    ):
        for conn in (ours, ref):
            # Postgres folds a typed literal (timestamptz '...') into a prepared plan in the
            # zone of the moment it was prepared; Percolator reads it when the statement runs.
            # psycopg prepares a statement run five times: not here, so both read it now.
            conn.prepare_threshold = None
            conn.execute("SET TimeZone = 'UTC'")
            conn.execute(
                "CREATE TABLE tz (id int PRIMARY KEY, t timestamptz, ts timestamp, d date)"
            )
        yield ours, ref


# The same queries read the table in each zone.
_READS = [
    "SELECT id, t, ts, d FROM tz ORDER BY id",
    "SELECT id, t::timestamp, ts::timestamptz, d::timestamptz, t::date, t::time, t::text FROM tz ORDER BY id",
    "SELECT id, t AT TIME ZONE 'UTC', t AT TIME ZONE 'America/New_York', ts AT TIME ZONE 'Asia/Kolkata', t AT TIME ZONE INTERVAL '05:30', timezone('Europe/Berlin', t), timezone('UTC+3', ts) FROM tz ORDER BY id",
    "SELECT id, date_trunc('day', t), date_trunc('hour', t), date_trunc('month', t), date_trunc('week', t), date_trunc('day', t, 'America/New_York'), date_trunc('month', d) FROM tz ORDER BY id",
    "SELECT id, extract(hour FROM t), extract(day FROM t), extract(epoch FROM t), extract(timezone FROM t), extract(timezone_hour FROM t), extract(timezone_minute FROM t), date_part('dow', t) FROM tz ORDER BY id",
    "SELECT id, to_char(t, 'YYYY-MM-DD HH24:MI:SS TZ tz OF TZH:TZM'), to_char(d, 'YYYY-MM-DD HH24:MI OF') FROM tz ORDER BY id",
    "SELECT id, t + interval '1 day', t + interval '24 hours', t - interval '1 mon', t + interval '1 day 1 hour' FROM tz ORDER BY id",
    "SELECT id FROM tz WHERE t = ts ORDER BY id",
    "SELECT id, t < timestamp '2024-03-31 02:00' FROM tz ORDER BY id",
    "SELECT now() = current_timestamp, localtimestamp = now()::timestamp, current_date = now()::date, now() AT TIME ZONE 'UTC' = localtimestamp AT TIME ZONE current_setting('TimeZone')",
]


def test_berlin_across_dst(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "SET TIME ZONE 'Europe/Berlin'",
            "SHOW TimeZone",
            # Before, inside and after the spring gap; the autumn overlap; an explicit
            # offset; local mean time before 1893 (+00:53:28).
            "INSERT INTO tz VALUES (1, '2024-03-31 01:30', '2024-03-31 01:30', '2024-03-31'), (2, '2024-03-31 02:30', '2024-03-31 02:30', '2024-03-30'), (3, '2024-03-31 03:30', '2024-03-31 03:30', '2024-10-27')",
            "INSERT INTO tz VALUES (4, '2024-10-27 02:30', '2024-10-27 02:30', '2024-10-26'), (5, '2024-07-01 12:00+00', '2024-07-01 12:00', '2024-07-01'), (6, '1890-01-01 12:00', '1890-01-01 12:00', '1890-01-01')",
            "INSERT INTO tz VALUES (7, '2024-01-31 13:34:56.789 America/New_York', '2024-01-31 13:34:56', '2024-01-31'), (8, '2024-06-15 08:00 CEST', NULL, NULL), (9, NULL, NULL, NULL)",
            *_READS,
            "SELECT timestamptz '2024-03-30 12:00' + interval '1 day', timestamptz '2024-10-26 12:00' + interval '1 day', timestamptz '2024-03-31 12:00' - timestamptz '2024-03-30 12:00'",
            "SELECT timestamp '2024-03-31 02:30' AT TIME ZONE 'Europe/Berlin', timestamp '2024-10-27 02:30' AT TIME ZONE 'Europe/Berlin'",
            "SELECT '2024-03-31'::date::timestamptz, '2024-10-27 00:00'::timestamptz + interval '1 day'",
            "SELECT * FROM generate_series(timestamptz '2024-03-30 00:00', timestamptz '2024-04-01 00:00', interval '1 day')",
        ],
    )


@pytest.mark.parametrize(
    "zone",
    [
        "'America/St_Johns'",
        "'Asia/Kolkata'",
        "'UTC+3'",
        "INTERVAL '+05:30' HOUR TO MINUTE",
        "INTERVAL '-08:00' HOUR TO MINUTE",
        "-7",
        "5.5",
        "'america/new_york'",
        "'EST5EDT'",
        "'<+04>-04'",
    ],
)
def test_zones(pair: tuple[psycopg.Connection, ...], zone: str) -> None:
    scripted.compare(
        *pair,
        [
            f"SET TIME ZONE {zone}",
            "SHOW TIME ZONE",
            "SELECT current_setting('TimeZone')",
            "SELECT timestamptz '2024-01-31 13:34:56', timestamptz '2024-07-01 12:00:00.5', '2024-07-01 12:00+02'::timestamptz",
            *_READS,
        ],
    )


def test_setting_errors(pair: tuple[psycopg.Connection, ...]) -> None:
    scripted.compare(
        *pair,
        [
            "SET TIME ZONE 'Europe/Berlin'",
            "SET TIME ZONE 'Nowhere/City'",
            "SET TimeZone = 'Europe'",
            "SET TIME ZONE INTERVAL '1 day'",
            "SHOW TimeZone",
            "SELECT now() AT TIME ZONE 'Nowhere/City'",
            "SELECT extract(timezone FROM timestamp '2024-01-01 00:00')",
            "SET TimeZone TO 'Asia/Kolkata'",
            "SHOW timezone",
            "SET TimeZone = 'UTC'",
        ],
    )


def test_error_wording(sql_server: SqlServer) -> None:
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("SET TIME ZONE 'Nowhere/City'")
        assert err.value.sqlstate == "22023"
        assert str(err.value).strip() == 'invalid value for parameter "TimeZone": "Nowhere/City"'
        # LOCAL and DEFAULT go back to the server's default, UTC.
        conn.execute("SET TIME ZONE 'Asia/Kolkata'")
        conn.execute("SET TIME ZONE LOCAL")
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
        conn.execute("SET TIME ZONE 'Asia/Kolkata'")
        conn.execute("SET TimeZone TO DEFAULT")
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
        conn.execute("SET TIME ZONE 'Asia/Kolkata'")
        conn.execute("RESET TimeZone")
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)


def test_psycopg_sees_the_zone(sql_server: SqlServer) -> None:
    """ParameterStatus TimeZone reaches the client, which then builds aware datetimes in that
    zone from both text and binary results; the instants are the stored ones."""
    instant = dt.datetime(2024, 3, 31, 0, 30, tzinfo=dt.UTC)
    with psycopg.connect(sql_server.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS tz_client (id int PRIMARY KEY, t timestamptz)")
        conn.execute("INSERT INTO tz_client VALUES (1, %s)", (instant,))
        assert conn.info.timezone == dt.UTC or str(conn.info.timezone) == "UTC"
        conn.execute("SET TIME ZONE 'Europe/Berlin'")
        assert conn.info.timezone == ZoneInfo("Europe/Berlin")
        for binary in (False, True):
            (value,) = conn.cursor(binary=binary).execute("SELECT t FROM tz_client").fetchone()
            assert value == instant
            assert value.tzinfo == ZoneInfo("Europe/Berlin")
            assert value.utcoffset() == dt.timedelta(hours=1)
        (text,) = conn.execute("SELECT t::text FROM tz_client").fetchone()
        assert text == "2024-03-31 01:30:00+01"
        # A parameter without an offset is a wall-clock time of the session's zone.
        conn.execute("INSERT INTO tz_client VALUES (2, '2024-07-01 12:00')")
        (value,) = conn.execute("SELECT t FROM tz_client WHERE id = 2").fetchone()
        assert value == dt.datetime(2024, 7, 1, 10, 0, tzinfo=dt.UTC)
        conn.execute("DROP TABLE tz_client")
    # The startup parameter (pgjdbc sends the JVM's zone, libpq PGTZ or options).
    with psycopg.connect(sql_server.conninfo(options="'-c TimeZone=Asia/Kolkata'")) as conn:
        assert conn.info.timezone == ZoneInfo("Asia/Kolkata")
        assert conn.execute("SHOW TimeZone").fetchone() == ("Asia/Kolkata",)
        (value,) = conn.execute("SELECT timestamptz '2024-01-01 05:30'").fetchone()
        assert value == dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.UTC)


def test_plans_shared_between_zones(sql_server: SqlServer) -> None:
    """The same statement text (one cached plan) in sessions of different zones: each reads
    and shows values in its own zone."""
    sql = [
        "SELECT '2024-01-01 12:00'::timestamptz = '2024-01-01 11:00+00'",
        "SELECT timestamptz '2024-01-01 12:00' = '2024-01-01 11:00+00'",
        "SELECT (timestamp '2024-01-01 12:00')::timestamptz::text",
        "SELECT extract(hour FROM timestamptz '2024-01-01 11:00+00')",
        "SELECT date_trunc('day', timestamptz '2024-01-01 23:30+00')::text",
    ]
    berlin = ["t", "t", "2024-01-01 12:00:00+01", "12", "2024-01-02 00:00:00+01"]
    kolkata = ["f", "f", "2024-01-01 12:00:00+05:30", "16", "2024-01-02 00:00:00+05:30"]
    with (
        psycopg.connect(sql_server.conninfo(), autocommit=True) as a,
        psycopg.connect(sql_server.conninfo(), autocommit=True) as b,
    ):
        a.execute("SET TIME ZONE 'Europe/Berlin'")
        b.execute("SET TIME ZONE 'Asia/Kolkata'")
        for _ in range(2):
            for conn, want in ((a, berlin), (b, kolkata)):
                got = [scripted.run(conn, s)[2][0][0].decode() for s in sql]  # type: ignore[index]
                assert got == want
