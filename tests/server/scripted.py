"""Run the same statements on our server and on real Postgres, one by one, and compare each
outcome: the command tag and rows, or the SQLSTATE."""

from __future__ import annotations

import psycopg

Outcome = tuple[object, ...]


def run(conn: psycopg.Connection, sql: str) -> Outcome:
    """("error", sqlstate) or ("ok", tag, rows as text)."""
    try:
        cur = conn.execute(sql)
    except psycopg.Error as e:
        return ("error", e.sqlstate)
    res = cur.pgresult
    assert res is not None
    rows = [tuple(res.get_value(r, c) for c in range(res.nfields)) for r in range(res.ntuples)]
    return ("ok", cur.statusmessage, rows)


def compare(ours: psycopg.Connection, ref: psycopg.Connection, script: list[str]) -> None:
    """Run ``script`` on both autocommit connections; every outcome must agree."""
    for sql in script:
        mine, theirs = run(ours, sql), run(ref, sql)
        assert mine == theirs, f"\n{sql}\nours: {mine}\nref:  {theirs}"
