"""An example Spark job for the cluster of docker/compose.yaml (mounted at /var/lib/spark/jobs).

It creates a table through the SQL load balancer, writes a DataFrame into it with the
Percolator connector (one transaction: every row appears at once), and reads it back (one
snapshot). The shards and the coordinator come from ``PERCOLATOR_STORE`` and
``PERCOLATOR_COORDINATOR``, which compose.yaml sets on the Spark master and workers::

    docker compose -f docker/compose.yaml exec spark-master \\
        spark-submit --master spark://spark-master:7077 \\
        /var/lib/spark/jobs/percolator_example.py --rows 10000
"""

from __future__ import annotations

import argparse
import asyncio
import os

import asyncpg
from pyspark.sql import SparkSession

from percolator.connectors.spark import register


async def create_table(sql_dsn: str, table: str) -> None:
    """``CREATE TABLE IF NOT EXISTS`` through the SQL servers (as ``PERCOLATOR_PASSWORD``)."""
    conn = await asyncpg.connect(
        sql_dsn, password=os.environ.get("PERCOLATOR_PASSWORD") or None, ssl=False
    )
    try:
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} "
            "(id bigint PRIMARY KEY, name text NOT NULL, score double precision)"
        )
    finally:
        await conn.close()


def main() -> None:
    """Create, write, read back, print what was read."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="spark_example")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument(
        "--sql",
        default="postgresql://postgres@lb:5433/postgres",
        help="the SQL servers, to create the table (default: the load balancer)",
    )
    args = parser.parse_args()

    asyncio.run(create_table(args.sql, args.table))
    spark = SparkSession.builder.appName("percolator-example").getOrCreate()
    register(spark)

    df = spark.range(args.rows).selectExpr(
        "id", "concat('row ', CAST(id AS STRING)) AS name", "id * 0.5 AS score"
    )
    # upsert: running the job again updates the rows instead of failing on their keys.
    (
        df.write.format("percolator")
        .option("table", args.table)
        .option("upsert", "true")
        .mode("append")
        .save()
    )

    back = spark.read.format("percolator").option("table", args.table).load()
    total = back.selectExpr("count(*) AS n", "sum(score) AS score").first()
    print(
        f"percolator_example: {args.table} holds {total['n']} rows, sum(score) = {total['score']}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
