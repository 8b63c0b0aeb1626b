"""A PySpark data source for Percolator tables (PySpark's Python Data Source API).

Register it once per Spark session, then read, write and stream tables::

    from percolator.connectors.spark import register

    register(spark)
    df = (
        spark.read.format("percolator")
        .option("table", "accounts")
        .option("store", "postgresql://localhost/shard0")
        .option("coordinator", "localhost:7470")
        .load()
    )
    df.write.format("percolator").option("table", "copy").options(...).mode("append").save()

Reads see one snapshot in every partition; writes are one transaction by default. Options,
semantics and limits: docs/spark.md.
"""

from __future__ import annotations

from typing import Any

FORMAT = "percolator"
"""The name to pass to ``spark.read.format``."""


def register(spark: Any) -> None:
    """Register the ``percolator`` data source in a Spark session (``spark.dataSource``)."""
    from percolator.connectors.spark.source import PercolatorDataSource

    spark.dataSource.register(PercolatorDataSource)


__all__ = ["FORMAT", "register"]
