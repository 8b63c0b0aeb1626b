"""The change stream: committed changes in commit order, each delivered once, also across a
restart from the checkpoint."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

from pyspark.errors import PySparkException

from tests.spark.conftest import Deployment


class Collector:
    """A foreachBatch sink keeping every row it is given, with its batch id."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        with self._lock:
            self.rows += [(batch_id, r) for r in rows]

    def changes(self) -> list[tuple[Any, ...]]:
        return [(r["id"], r["v"], r["_op"]) for _, r in self.rows]


def stream(spark: Any, deployment: Deployment, table: str, **options: str) -> Any:
    r = spark.readStream.format("percolator").option("table", table).option("changes", "true")
    for k, v in {**deployment.options, **options}.items():
        r = r.option(k, v)
    return r.load()


def start(df: Any, sink: Collector, checkpoint: Path) -> Any:
    return df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()


def test_changes_in_commit_order_exactly_once(
    spark: Any, deployment: Deployment, tmp_path: Path
) -> None:
    deployment.sql("CREATE TABLE events (id int PRIMARY KEY, v text)")
    deployment.sql("INSERT INTO events VALUES (0, 'before the stream')")
    df = stream(spark, deployment, "events", startingTs="latest")
    assert df.columns == ["id", "v", "_commit_ts", "_op"]
    sink = Collector()
    query = start(df, sink, tmp_path / "cp")
    try:
        query.processAllAvailable()
        deployment.sql("INSERT INTO events VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        deployment.sql("UPDATE events SET v = 'b2' WHERE id = 2")
        deployment.sql("DELETE FROM events WHERE id = 3")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.changes() == [
        (1, "a", "insert"),
        (2, "b", "insert"),
        (3, "c", "insert"),
        (2, "b2", "update"),
        (3, None, "delete"),
    ]
    stamps = [r["_commit_ts"] for _, r in sink.rows]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3

    # Changes made while no query runs, then a restart from the checkpoint: each change once.
    deployment.sql("INSERT INTO events VALUES (4, 'd')")
    deployment.sql("UPDATE events SET v = 'a2' WHERE id = 1")
    again = Collector()
    query = start(stream(spark, deployment, "events", startingTs="latest"), again, tmp_path / "cp")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert again.changes() == [(4, "d", "insert"), (1, "a2", "update")]


def test_max_rows_per_trigger_splits_batches_at_commits(
    spark: Any, deployment: Deployment, tmp_path: Path
) -> None:
    deployment.sql("CREATE TABLE ticks (id int PRIMARY KEY, v text)")
    start_ts = deployment.timestamp()
    for i in range(6):
        deployment.sql(f"INSERT INTO ticks VALUES ({2 * i}, 'x'), ({2 * i + 1}, 'y')")
    df = stream(spark, deployment, "ticks", startingTs=str(start_ts), maxRowsPerTrigger="3")
    sink = Collector()
    query = start(df, sink, tmp_path / "cp")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(r["id"] for _, r in sink.rows) == list(range(12))
    per_batch: dict[int, set[int]] = {}
    for batch, r in sink.rows:
        per_batch.setdefault(batch, set()).add(r["_commit_ts"])
    assert len(per_batch) >= 3  # whole commits of two rows: at most one per batch of 3 rows


def test_a_stream_needs_the_changes_option(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE plain (id int PRIMARY KEY)")
    r = spark.readStream.format("percolator").option("table", "plain")
    for k, v in deployment.options.items():
        r = r.option(k, v)
    with pytest.raises(PySparkException, match=r'changes", "true"'):
        r.load().writeStream.format("console").start().processAllAvailable()


def test_rows_split_across_pages_are_one_change(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a batch in pages of 3 cells (a row's cells then straddle pages) gives the same
    changes as one page: run in this process, without Spark."""
    from percolator.connectors.spark import stream as stream_module
    from percolator.connectors.spark.options import stream_options
    from percolator.connectors.spark.runtime import find_table, iterate, open_database, run

    deployment.sql("CREATE TABLE paged (id int PRIMARY KEY, a text, b text, c text)")
    before = deployment.timestamp()
    deployment.sql("INSERT INTO paged VALUES (1, 'a', 'b', 'c'), (2, 'a', 'b', 'c')")
    deployment.sql("UPDATE paged SET a = 'x', b = 'y' WHERE id = 1")
    deployment.sql("DELETE FROM paged WHERE id = 2")
    after = deployment.timestamp()
    options = stream_options({"table": "paged", "changes": "true", **deployment.options})

    async def table() -> Any:
        async with open_database(options.connection) as db:
            return find_table(await db.catalog(), "paged")

    t = run(table())
    reader = stream_module.ChangeStreamReader(options, t, stream_module.stream_schema(t))

    def changes() -> list[tuple[Any, ...]]:
        batches = list(iterate(lambda: reader._read(before, after)))
        rows = [r for b in batches for r in b.to_pylist()]
        return [(r["id"], r["a"], r["b"], r["c"], r["_op"]) for r in rows]

    whole = changes()
    assert whole == [
        (1, "a", "b", "c", "insert"),
        (2, "a", "b", "c", "insert"),
        (1, "x", "y", "c", "update"),
        (2, None, None, None, "delete"),
    ]
    monkeypatch.setattr(stream_module, "PAGE", 3)
    assert changes() == whole
