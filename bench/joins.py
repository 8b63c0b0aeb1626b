"""``percolator bench joins``: an OLTP join (TPC-C's stock level: a range of order lines joined
to stock by its primary key) with the planner's lookup join, beside the same query with the
lookup join turned off (a hash join over all of stock) and beside Postgres itself, in the same
run on the same data.

One embedded Postgres holds ``ref`` (plain tables, the same rows) and ``store`` (the server's);
the SQL server runs in this process so that the planner's switch can be flipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from percolator.bench.common import create_databases
from percolator.server.config import ServerConfig
from percolator.server.planner import planner
from percolator.server.runtime import ServerThread
from percolator.server.storage.embedded import EmbeddedPostgres

SCHEMA = [
    "CREATE TABLE stock (s_w_id int, s_i_id int, s_quantity int, s_data text,"
    " PRIMARY KEY (s_w_id, s_i_id))",
    "CREATE TABLE order_line (ol_w_id int, ol_o_id int, ol_number int, ol_i_id int,"
    " ol_quantity int, PRIMARY KEY (ol_w_id, ol_o_id, ol_number))",
]
QUERY = (
    "SELECT ol.ol_o_id, ol.ol_number, s.s_quantity FROM order_line ol JOIN stock s"
    " ON s.s_w_id = ol.ol_w_id AND s.s_i_id = ol.ol_i_id"
    " WHERE ol.ol_w_id = 1 AND ol.ol_o_id BETWEEN 10 AND 20"
)


@dataclass
class Result:
    stock_rows: int
    rows_returned: int
    lookup_join_ms: float
    hash_join_ms: float
    postgres_ms: float
    lookup_vs_hash: float
    postgres_vs_lookup: float


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stock", type=int, default=100_000, help="stock rows (default 100,000)")
    p.add_argument("--runs", type=int, default=20, help="runs of the query per plan")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="percolator-joins-"))
    pg = EmbeddedPostgres(work / "pg")
    try:
        base = pg.start()
        ref_dsn, store_dsn = asyncio.run(create_databases(base, "ref", "store"))
        result = _measure(args, ref_dsn, store_dsn)
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        for name, value in asdict(result).items():
            print(f"{name:20} {value}")
    return 0


def _measure(args: argparse.Namespace, ref_dsn: str, store_dsn: str) -> Result:
    config = ServerConfig(listen="127.0.0.1:0", coordinator_listen="127.0.0.1:0", auth="trust")
    thread = ServerThread(config, [store_dsn])
    running = thread.start()
    ours_dsn = f"host=127.0.0.1 port={running.port} user={config.user} dbname=postgres"
    saved = planner.LOOKUP_JOINS
    try:
        with (
            psycopg.connect(ours_dsn, autocommit=True) as ours,
            psycopg.connect(ref_dsn, autocommit=True) as ref,
        ):
            for conn in (ours, ref):
                _load(conn, args.stock)
            ref.execute("ANALYZE")
            planner.LOOKUP_JOINS = True
            lookup, rows = _median(ours, QUERY, args.runs)
            planner.LOOKUP_JOINS = False
            # A different text: the plan cache keeps the lookup join's plan for QUERY.
            hashed, _ = _median(ours, QUERY + " AND true", max(3, args.runs // 4))
            postgres, _ = _median(ref, QUERY, args.runs)
    finally:
        planner.LOOKUP_JOINS = saved
        thread.stop()
    return Result(
        args.stock,
        rows,
        round(lookup * 1000, 2),
        round(hashed * 1000, 2),
        round(postgres * 1000, 2),
        round(hashed / lookup, 1),
        round(postgres / lookup, 3),
    )


def _load(conn: psycopg.Connection, stock: int) -> None:
    for sql in SCHEMA:
        conn.execute(sql)
    for lo in range(1, stock + 1, 10_000):
        hi = min(lo + 9_999, stock)
        conn.execute(
            f"INSERT INTO stock SELECT 1, g, g % 100, 'data' FROM generate_series({lo}, {hi}) g"
        )
    conn.execute(
        "INSERT INTO order_line SELECT 1, o, n, (o * 7919 + n * 104729) %% %s + 1, 5"
        " FROM generate_series(1, 100) o, generate_series(1, 10) n",
        (stock,),
    )


def _median(conn: psycopg.Connection, sql: str, runs: int) -> tuple[float, int]:
    rows = len(conn.execute(sql).fetchall())  # warm: parse, plan, catalog
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times), rows
