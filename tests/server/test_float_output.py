"""Float text output under the session's ``extra_float_digits``, compared with real Postgres.

With extra_float_digits above zero (the default, 1, and what drivers set) Postgres prints the
shortest digits that read back exactly; at zero or below, ``%g`` with 15 (real: 6) plus
extra_float_digits significant digits. The setting is per session, so both connections set it.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

QUERY = (
    "SELECT 1 / 3::float8, (1 / 3::float4)::float4, pi(), 1e100::float8, 0.1::float4,"
    " 123456789.123::float4, -0::float8 * 1, 'nan'::float8, '-inf'::float4,"
    " (1 / 3::float8)::text, ARRAY[1 / 3::float8, 2]"
)


def _text_rows(conn: psycopg.Connection, sql: str) -> list[tuple[str | None, ...]]:
    """Rows as the server's text output (no Python conversion of floats)."""
    with conn.cursor(binary=False) as cur:
        cur.execute(sql)
        assert cur.pgresult is not None
        result = cur.pgresult
        return [
            tuple(
                None if (v := result.get_value(r, c)) is None else v.decode()
                for c in range(result.nfields)
            )
            for r in range(result.ntuples)
        ]


@pytest.fixture
def pair(
    pg_pair: tuple[psycopg.Connection, psycopg.Connection],
) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    yield pg_pair
    for conn in pg_pair:
        conn.execute("RESET extra_float_digits")


@pytest.mark.parametrize("digits", ["3", "1", "0", "-3", "-15"])
def test_extra_float_digits(
    pair: tuple[psycopg.Connection, psycopg.Connection], digits: str
) -> None:
    ours, ref = pair
    for conn in pair:
        conn.execute(f"SET extra_float_digits = {digits}")
    assert _text_rows(ours, QUERY) == _text_rows(ref, QUERY)
    assert _text_rows(ours, "SHOW extra_float_digits") == [(digits,)]


def test_reset_restores_shortest(pair: tuple[psycopg.Connection, psycopg.Connection]) -> None:
    ours, ref = pair
    for conn in pair:
        conn.execute("SET extra_float_digits = 0")
        conn.execute("RESET extra_float_digits")
    assert _text_rows(ours, QUERY) == _text_rows(ref, QUERY)


@pytest.mark.parametrize("value", ["4", "-16", "'x'"])
def test_out_of_range(pair: tuple[psycopg.Connection, psycopg.Connection], value: str) -> None:
    errors = []
    for conn in pair:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(f"SET extra_float_digits = {value}")
        errors.append((info.value.sqlstate, info.value.diag.message_primary))
    assert errors[0] == errors[1]


def test_a_prepared_statement_follows_the_setting(
    pair: tuple[psycopg.Connection, psycopg.Connection],
) -> None:
    # Its result encoders are kept between executions: they must change with the setting.
    outputs = []
    for conn in pair:
        seen = []
        with conn.cursor(binary=False) as cur:
            for digits in ("1", "0", "1"):
                conn.execute(f"SET extra_float_digits = {digits}")
                cur.execute("SELECT %s::float8 / 3", (1,), prepare=True)
                assert cur.pgresult is not None
                seen.append(cur.pgresult.get_value(0, 0))
        outputs.append(seen)
    assert outputs[0] == outputs[1]
    assert outputs[0][0] != outputs[0][1]
