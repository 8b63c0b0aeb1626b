"""``percolator bench spark``: the Spark connector beside Spark's JDBC source on the same Postgres.

One Postgres (embedded, listening on loopback TCP so that pgjdbc can reach it) holds two
databases: the Percolator store (served by a ``percolator serve`` process) and a plain one. The
same generated DataFrame (``id bigint``, ``name text``, ``value double precision``) is

- written with Spark's JDBC writer into a plain table (``batchsize=10000``,
  ``reWriteBatchedInserts=true``) and with the connector into a Percolator table (atomic mode:
  the whole DataFrame as one transaction);
- read back with Spark's JDBC source (``numPartitions`` ranges of ``id``, ``fetchsize=10000``)
  and with the connector (``partitions`` key ranges, one snapshot), each materialised with
  Spark's ``noop`` sink so that every column is read.

Rows per second of each, and the ratios ``write_ratio`` / ``read_ratio`` (connector / JDBC;
the target is 0.5) are printed, as JSON with ``--json``. Spark runs ``local[N]`` with N =
``--partitions``; each read is the best of ``--rounds``. The JDBC driver is Debian's
``libpostgresql-jdbc-java`` (``/usr/share/java/postgresql.jar``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import asyncpg

from percolator.bench.common import create_databases
from percolator.server.cluster.processes import free_ports
from percolator.server.runtime import ServerProcess
from percolator.server.storage.embedded import EmbeddedPostgres

JDBC_JAR = Path("/usr/share/java/postgresql.jar")
TABLE = "bench"
COLUMNS = "id bigint PRIMARY KEY, name text, value double precision"
TARGET_RATIO = 0.5


@dataclass
class Result:
    """One run's figures."""

    rows: int
    partitions: int
    jdbc_write_rows_s: float
    percolator_write_rows_s: float
    write_ratio: float
    jdbc_read_rows_s: float
    percolator_read_rows_s: float
    read_ratio: float
    jdbc_write_s: float
    percolator_write_s: float
    jdbc_read_s: float
    percolator_read_s: float
    target_ratio: float = TARGET_RATIO


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="rows (default 1,000,000)")
    p.add_argument(
        "--partitions", type=int, default=2, help="Spark partitions and cores (default 2)"
    )
    p.add_argument("--rounds", type=int, default=2, help="reads per side, best kept (default 2)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    if not JDBC_JAR.exists():
        print(
            f"percolator bench spark: {JDBC_JAR} is missing "
            "(apt-get install libpostgresql-jdbc-java)",
            file=sys.stderr,
        )
        return 1
    if shutil.which("java") is None:
        print("percolator bench spark: no java on PATH (Spark needs Java 17)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="percolator-bench-spark-"))
    pg = EmbeddedPostgres(work / "pg", port=free_ports(1, "127.0.0.1")[0])
    server: ServerProcess | None = None
    spark = None
    try:
        base = pg.start()
        store_dsn, plain_dsn = asyncio.run(create_databases(base, "spark_store", "spark_plain"))
        server = ServerProcess(store_dsn)
        sql_port = server.start()
        asyncio.run(_create_tables(sql_port, plain_dsn))
        spark = spark_session(args.partitions, "percolator-bench-spark", (JDBC_JAR,))
        database = urlparse(plain_dsn).path.lstrip("/")
        jdbc_url = f"jdbc:postgresql://127.0.0.1:{pg.port}/{database}"
        result = _measure(spark, args, jdbc_url, store_dsn, server.coordinator or "")
        _report(result, args.json)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if server is not None:
            server.stop()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


async def _create_tables(sql_port: int, plain_dsn: str) -> None:
    conn = await asyncpg.connect(host="127.0.0.1", port=sql_port, user="postgres")
    try:
        await conn.execute(f"CREATE TABLE {TABLE} ({COLUMNS})")
    finally:
        await conn.close()
    conn = await asyncpg.connect(plain_dsn)
    try:
        await conn.execute(f"CREATE TABLE {TABLE} ({COLUMNS})")
    finally:
        await conn.close()


def spark_session(partitions: int, app: str, jars: tuple[Path, ...] = ()) -> Any:
    """A local Spark session with ``partitions`` cores and the percolator source registered.
    Its Python workers run this interpreter (which has percolator and pyarrow)."""
    # PySpark 4.3 warns that it does not fully support pandas 3; nothing here uses pandas.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    from percolator.connectors.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(f"local[{partitions}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _frame(spark: Any, rows: int, partitions: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, rows, numPartitions=partitions).select(
        F.col("id"),
        F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
        (F.col("id") * F.lit(0.5)).cast("double").alias("value"),
    )


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _measure(spark: Any, args: argparse.Namespace, jdbc_url: str, store: str, coord: str) -> Result:
    rows, parts = args.rows, args.partitions
    jdbc_props = {"user": "postgres", "driver": "org.postgresql.Driver"}
    percolator = {"table": TABLE, "store": store, "coordinator": coord}
    # Warm up the JVM and the Python workers on both paths (a few rows, not measured).
    _frame(spark, 100, parts).write.format("noop").mode("overwrite").save()

    df = _frame(spark, rows, parts)
    jdbc_write = _timed(
        lambda: (
            df.write.format("jdbc")
            .option("url", jdbc_url)
            .option("dbtable", TABLE)
            .option("batchsize", "10000")
            .option("reWriteBatchedInserts", "true")
            .options(**jdbc_props)
            .mode("append")
            .save()
        )
    )
    perc_write = _timed(
        lambda: df.write.format("percolator").options(**percolator).mode("append").save()
    )

    def jdbc_read() -> None:
        (
            spark.read.format("jdbc")
            .option("url", jdbc_url)
            .option("dbtable", TABLE)
            .option("partitionColumn", "id")
            .option("lowerBound", "0")
            .option("upperBound", str(rows))
            .option("numPartitions", str(parts))
            .option("fetchsize", "10000")
            .options(**jdbc_props)
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        )

    def perc_read() -> None:
        (
            spark.read.format("percolator")
            .options(**percolator)
            .option("partitions", str(parts))
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        )

    jdbc_reads, perc_reads = [], []
    for _ in range(max(1, args.rounds)):
        jdbc_reads.append(_timed(jdbc_read))
        perc_reads.append(_timed(perc_read))
    counted = spark.read.format("percolator").options(**percolator).load().count()
    if counted != rows:
        raise RuntimeError(f"the connector read {counted} rows, not {rows}")
    jdbc_read_s, perc_read_s = min(jdbc_reads), min(perc_reads)
    return Result(
        rows=rows,
        partitions=parts,
        jdbc_write_rows_s=rows / jdbc_write,
        percolator_write_rows_s=rows / perc_write,
        write_ratio=jdbc_write / perc_write,
        jdbc_read_rows_s=rows / jdbc_read_s,
        percolator_read_rows_s=rows / perc_read_s,
        read_ratio=jdbc_read_s / perc_read_s,
        jdbc_write_s=jdbc_write,
        percolator_write_s=perc_write,
        jdbc_read_s=jdbc_read_s,
        percolator_read_s=perc_read_s,
    )


def _report(result: Result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(result), indent=2))
        return
    r = result
    print(f"Spark connector vs JDBC, {r.rows:,} rows, local[{r.partitions}]")
    print(
        f"{'':8}{'JDBC rows/s':>14}{'percolator rows/s':>20}{'ratio':>8}  (target {r.target_ratio})"
    )
    print(
        f"{'write':8}{r.jdbc_write_rows_s:>14,.0f}{r.percolator_write_rows_s:>20,.0f}{r.write_ratio:>8.3f}"
    )
    print(
        f"{'read':8}{r.jdbc_read_rows_s:>14,.0f}{r.percolator_read_rows_s:>20,.0f}{r.read_ratio:>8.3f}"
    )
