"""Batch writes: one transaction for the whole DataFrame (all or nothing, no lock left, retries
that do not duplicate), per-partition mode, constraints, upsert, overwrite, observers, and clear
errors before any data is written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from tests.spark.conftest import Deployment


def writer(df: Any, deployment: Deployment, table: str, **options: str) -> Any:
    w = df.write.format("percolator").option("table", table)
    for k, v in {**deployment.options, **options}.items():
        w = w.option(k, v)
    return w


def numbers(spark: Any, n: int, partitions: int = 4) -> Any:
    return spark.range(1, n + 1, numPartitions=partitions).select(
        F.col("id"), F.concat(F.lit("n"), F.col("id").cast("string")).alias("name")
    )


def fail_in(partition: int, *, after_rows: int, attempts: tuple[int, ...] = (0, 1)) -> Any:
    """A mapInArrow function passing rows through, but failing in ``partition`` (on the listed
    attempts) once ``after_rows`` rows have gone by."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        failing = ctx.partitionId() == partition and ctx.attemptNumber() in attempts
        seen = 0
        for batch in batches:
            for i in range(0, batch.num_rows, 50):
                part = batch.slice(i, 50)
                yield part
                seen += part.num_rows
                if failing and seen >= after_rows:
                    raise RuntimeError(f"injected failure after {seen} rows")

    return run


def test_atomic_append(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL)")
    writer(numbers(spark, 1000), deployment, "items").mode("append").save()
    assert deployment.sql("SELECT count(*), sum(id) FROM items") == [(1000, 500500)]
    assert deployment.sql("SELECT name FROM items WHERE id = 77") == [("n77",)]
    assert deployment.locks("items") == []


def test_atomic_write_is_all_or_nothing(spark: Any, deployment: Deployment) -> None:
    """A partition fails (on every attempt) after the others wrote: nothing is visible and no
    lock is left."""
    deployment.sql("CREATE TABLE doomed (id bigint PRIMARY KEY, name text)")
    deployment.sql("INSERT INTO doomed VALUES (-1, 'before')")
    df = numbers(spark, 2000).mapInArrow(fail_in(3, after_rows=300), "id long, name string")
    with pytest.raises(PySparkException, match="injected failure"):
        writer(df, deployment, "doomed", batchSize="100").mode("append").save()
    assert deployment.sql("SELECT id, name FROM doomed") == [(-1, "before")]
    assert deployment.locks("doomed") == []
    # The table is usable: the same keys can be written afterwards.
    writer(numbers(spark, 10), deployment, "doomed").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM doomed") == [(11,)]


@pytest.mark.parametrize("mode", ["atomic", "partition"])
def test_a_retried_task_does_not_duplicate_rows(
    spark: Any, deployment: Deployment, mode: str
) -> None:
    """Attempt 0 of a partition fails after writing some batches; attempt 1 succeeds. A table
    without a primary key would show duplicates if the retry wrote new rows."""
    table = f"retried_{mode}"
    deployment.sql(f"CREATE TABLE {table} (id bigint, name text)")
    df = numbers(spark, 2000).mapInArrow(
        fail_in(1, after_rows=400, attempts=(0,)), "id long, name string"
    )
    writer(df, deployment, table, batchSize="100", writeMode=mode).mode("append").save()
    assert deployment.sql(f"SELECT count(*), count(DISTINCT id) FROM {table}") == [(2000, 2000)]
    assert deployment.locks(table) == []


def test_per_partition_mode_is_not_atomic(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE partial (id bigint PRIMARY KEY, name text)")
    writer(numbers(spark, 500), deployment, "partial", writeMode="partition").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM partial") == [(500,)]
    # The last partition fails: with local[2] it starts only once an earlier task has finished
    # and committed its batches, however slow the machine (a failing first partition could
    # abort the job before any other task had committed a batch).
    df = numbers(spark, 2000).mapInArrow(fail_in(3, after_rows=200), "id long, name string")
    df = df.withColumn("id", F.col("id") + 1000)
    with pytest.raises(PySparkException, match="injected failure"):
        writer(df, deployment, "partial", writeMode="partition", batchSize="100").mode(
            "append"
        ).save()
    # The batches that committed stay (documented): more rows than before, fewer than all.
    (count,) = deployment.sql("SELECT count(*) FROM partial")[0]
    assert 500 < count < 2500
    locks = deployment.locks("partial")
    if locks:
        # The other task, killed by Spark when this one failed, may have left its open batch's
        # locks (a killed worker runs no rollback): they outlive no TTL, and the next reader
        # resolves them (rolls them back, or forward if the batch had reached its commit).
        time.sleep(max(lock.ttl_ms for lock in locks) / 1000 + 0.5)
        deployment.sql("SELECT count(*) FROM partial")
    assert deployment.locks("partial") == []


def test_unique_constraints_and_indexes(spark: Any, deployment: Deployment) -> None:
    deployment.sql(
        "CREATE TABLE users (id bigint PRIMARY KEY, email text UNIQUE, name text, age int)"
    )
    deployment.sql("CREATE INDEX users_age ON users (age)")
    deployment.sql("INSERT INTO users VALUES (0, 'taken@x', 'zero', 1)")
    df = spark.range(1, 401, numPartitions=4).select(
        F.col("id"),
        F.concat(F.lit("u"), F.col("id").cast("string"), F.lit("@x")).alias("email"),
        F.lit("name").alias("name"),
        (F.col("id") % 7).cast("int").alias("age"),
    )
    writer(df, deployment, "users").mode("append").save()
    assert deployment.sql("SELECT id FROM users WHERE email = 'u123@x'") == [(123,)]
    assert deployment.sql("SELECT count(*) FROM users WHERE age = 3") == [(57,)]
    # A unique value already in the table.
    clash = spark.createDataFrame(
        [(1000, "taken@x", "n", 1)], "id long, email string, name string, age int"
    )
    with pytest.raises(PySparkException, match=r"23505.*users_email_key"):
        writer(clash, deployment, "users").mode("append").save()
    # The same unique value in two partitions of one DataFrame.
    twice = spark.createDataFrame(
        [(2000, "dup@x", "a", 1), (2001, "dup@x", "b", 2)],
        "id long, email string, name string, age int",
    ).repartition(2)
    with pytest.raises(PySparkException, match="23505"):
        writer(twice, deployment, "users").mode("append").save()
    # The same primary key twice.
    same_key = spark.createDataFrame(
        [(5, "a@x", "a", 1)], "id long, email string, name string, age int"
    )
    with pytest.raises(PySparkException, match=r"23505.*users_pkey"):
        writer(same_key, deployment, "users").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM users") == [(401,)]
    assert deployment.locks("users") == []


def test_upsert(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE prices (sku int PRIMARY KEY, price numeric(8,2), note text)")
    deployment.sql("INSERT INTO prices VALUES (1, 1.00, 'keep'), (2, 2.00, 'keep')")
    df = spark.createDataFrame([(2, 20.5), (3, 30.25)], "sku int, price double")
    writer(df, deployment, "prices", upsert="true").mode("append").save()
    rows = deployment.sql("SELECT sku, price::text, note FROM prices ORDER BY sku")
    assert rows == [(1, "1.00", "keep"), (2, "20.50", "keep"), (3, "30.25", None)]


def test_generated_columns_are_computed_and_never_given(spark: Any, deployment: Deployment) -> None:
    """A stored generated column is computed for every row written (insert and upsert,
    indexed, checked); a DataFrame that has the column is refused before anything is written,
    as Postgres refuses a value for it (428C9)."""
    deployment.sql(
        "CREATE TABLE gen_items (id bigint PRIMARY KEY, price numeric(8,2), qty int, "
        "total numeric GENERATED ALWAYS AS (price * qty) STORED CHECK (total < 1000), "
        "tag text GENERATED ALWAYS AS ('t' || id) STORED UNIQUE)"
    )
    deployment.sql("CREATE INDEX gen_items_total ON gen_items (total)")
    df = spark.createDataFrame([(1, 2.5, 2), (2, 1.0, 3)], "id long, price double, qty int")
    writer(df, deployment, "gen_items").mode("append").save()
    assert deployment.sql("SELECT id, total::text, tag FROM gen_items ORDER BY id") == [
        (1, "5.00", "t1"),
        (2, "3.00", "t2"),
    ]
    assert deployment.sql("SELECT id FROM gen_items WHERE total = 5") == [(1,)]
    changed = spark.createDataFrame([(2, 4)], "id long, qty int")
    writer(changed, deployment, "gen_items", upsert="true").mode("append").save()
    assert deployment.sql("SELECT total::text FROM gen_items WHERE id = 2") == [("4.00",)]
    assert deployment.sql("SELECT id FROM gen_items WHERE total = 4") == [(2,)]
    assert deployment.sql("SELECT id FROM gen_items WHERE total = 3") == []
    given = spark.createDataFrame(
        [(3, 1.0, 1, 9.0)], "id long, price double, qty int, total double"
    )
    with pytest.raises(PySparkException, match=r'428C9.*column "total".*generated column'):
        writer(given, deployment, "gen_items").mode("append").save()
    too_big = spark.createDataFrame([(4, 500.0, 3)], "id long, price double, qty int")
    with pytest.raises(PySparkException, match=r"23514.*gen_items_total_check"):
        writer(too_big, deployment, "gen_items").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM gen_items") == [(2,)]


def test_expression_index_entries_are_written(spark: Any, deployment: Deployment) -> None:
    """The writer computes an index's key expressions from each row (insert and upsert), and
    a unique one refuses a value taken (23505, Postgres's Key (lower(email)) detail)."""
    deployment.sql("CREATE TABLE xi_accounts (id bigint PRIMARY KEY, email text)")
    deployment.sql("CREATE UNIQUE INDEX xi_accounts_email ON xi_accounts (lower(email))")
    df = spark.createDataFrame([(1, "Ann@X.org"), (2, "bob@x.org")], "id long, email string")
    writer(df, deployment, "xi_accounts").mode("append").save()
    assert deployment.sql("SELECT id FROM xi_accounts WHERE lower(email) = 'ann@x.org'") == [(1,)]
    changed = spark.createDataFrame([(2, "Bobby@x.org")], "id long, email string")
    writer(changed, deployment, "xi_accounts", upsert="true").mode("append").save()
    assert deployment.sql("SELECT id FROM xi_accounts WHERE lower(email) = 'bobby@x.org'") == [(2,)]
    assert deployment.sql("SELECT id FROM xi_accounts WHERE lower(email) = 'bob@x.org'") == []
    taken = spark.createDataFrame([(3, "ANN@x.org")], "id long, email string")
    with pytest.raises(PySparkException, match=r"23505.*Key \(lower\(email\)\)=\(ann@x.org\)"):
        writer(taken, deployment, "xi_accounts").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM xi_accounts") == [(2,)]


def test_partial_index_entries_are_written(spark: Any, deployment: Deployment) -> None:
    """The writer gives a row entries in a partial index only while its predicate holds: a
    unique one binds only those rows (insert and upsert)."""
    deployment.sql("CREATE TABLE pi_items (id bigint PRIMARY KEY, sku text, live boolean)")
    deployment.sql("CREATE UNIQUE INDEX pi_items_live_sku ON pi_items (sku) WHERE live")
    df = spark.createDataFrame(
        [(1, "a", True), (2, "a", False), (3, "a", False)], "id long, sku string, live boolean"
    )
    writer(df, deployment, "pi_items").mode("append").save()
    assert deployment.sql("SELECT id FROM pi_items WHERE sku = 'a' AND live") == [(1,)]
    retired = spark.createDataFrame([(1, "a", False)], "id long, sku string, live boolean")
    writer(retired, deployment, "pi_items", upsert="true").mode("append").save()
    assert deployment.sql("SELECT id FROM pi_items WHERE sku = 'a' AND live") == []
    live = spark.createDataFrame([(4, "a", True)], "id long, sku string, live boolean")
    writer(live, deployment, "pi_items").mode("append").save()
    taken = spark.createDataFrame([(5, "a", True)], "id long, sku string, live boolean")
    with pytest.raises(PySparkException, match=r"23505.*Key \(sku\)=\(a\)"):
        writer(taken, deployment, "pi_items").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM pi_items") == [(4,)]


def test_overwrite_replaces_the_table_atomically(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE snapshot_t (id bigint PRIMARY KEY, name text UNIQUE)")
    deployment.sql("INSERT INTO snapshot_t VALUES (1, 'n1'), (99, 'old')")
    writer(numbers(spark, 50), deployment, "snapshot_t").mode("overwrite").save()
    # The overwrite is a TRUNCATE in the job's transaction, committed by another process: the
    # SQL server's first statement on the table is refused by the catalog guard before it
    # reads the old storage, and runs again with the reloaded catalog.
    wait_for(deployment, "SELECT count(*), max(id) FROM snapshot_t", [(50, 50)])
    assert deployment.sql("SELECT id FROM snapshot_t WHERE name = 'n7'") == [(7,)]
    # A failed overwrite keeps the old rows.
    df = numbers(spark, 500).mapInArrow(fail_in(2, after_rows=10), "id long, name string")
    with pytest.raises(PySparkException, match="injected failure"):
        writer(df, deployment, "snapshot_t").mode("overwrite").save()
    assert deployment.sql("SELECT count(*), max(id) FROM snapshot_t") == [(50, 50)]


def test_observers_fire_for_spark_written_rows(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE src (id bigint PRIMARY KEY, name text)")
    deployment.sql("CREATE TABLE dst (id bigint PRIMARY KEY, name text)")
    deployment.sql(
        "CREATE OBSERVER copy_src ON src (name) AS $$ INSERT INTO dst VALUES (NEW.id, NEW.name) "
        "ON CONFLICT (id) DO UPDATE SET name = excluded.name $$"
    )
    writer(numbers(spark, 200), deployment, "src").mode("append").save()
    deadline = time.monotonic() + 90
    while deployment.sql("SELECT count(*) FROM dst") != [(200,)]:
        assert time.monotonic() < deadline, deployment.sql("SELECT count(*) FROM dst")
        time.sleep(0.5)
    assert deployment.sql("SELECT name FROM dst WHERE id = 150") == [("n150",)]


def wait_for(deployment: Deployment, query: str, expected: Any, timeout_s: float = 10) -> None:
    """Run ``query`` until it returns ``expected``, retrying serialization failures."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = deployment.sql(query)
        except psycopg.errors.SerializationFailure as exc:
            got = exc
        if got == expected:
            return
        assert time.monotonic() < deadline, got
        time.sleep(0.2)


def test_bad_input_fails_before_anything_is_written(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE strict (id bigint PRIMARY KEY, n int NOT NULL, s text)")
    ok = spark.createDataFrame([(1, 2, "x")], "id long, n int, s string")
    with pytest.raises(PySparkException, match=r"42P01.*no_such"):
        writer(ok, deployment, "no_such").mode("append").save()
    extra = spark.createDataFrame([(1, 2, "x", 3)], "id long, n int, s string, extra int")
    with pytest.raises(PySparkException, match=r'42703.*column "extra"'):
        writer(extra, deployment, "strict").mode("append").save()
    mismatch = spark.createDataFrame([(1, "two", "x")], "id long, n string, s string")
    with pytest.raises(PySparkException, match=r'42804.*column "n"'):
        writer(mismatch, deployment, "strict").mode("append").save()
    missing = spark.createDataFrame([(1, "x")], "id long, s string")
    with pytest.raises(PySparkException, match=r'23502.*column "n"'):
        writer(missing, deployment, "strict").mode("append").save()
    with pytest.raises(PySparkException, match=r"08006"):
        writer(ok, deployment, "strict", store="postgresql://postgres@127.0.0.1:1/x").mode(
            "append"
        ).save()
    with pytest.raises(PySparkException, match=r"22023.*writeMode"):
        writer(ok, deployment, "strict", writeMode="sometimes").mode("append").save()
    # A value that breaks a constraint fails the job: nothing is written.
    nulls = spark.createDataFrame([(1, 1, "a"), (2, None, "b")], "id long, n int, s string")
    with pytest.raises(PySparkException, match=r"23502"):
        writer(nulls, deployment, "strict").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM strict") == [(0,)]
    assert deployment.locks("strict") == []
    # Foreign keys are not checked by Spark writes: refused before anything is written.
    deployment.sql("CREATE TABLE strict_child (id bigint PRIMARY KEY, n int REFERENCES strict)")
    child = spark.createDataFrame([(1, 5)], "id long, n int")
    with pytest.raises(PySparkException, match=r"0A000.*foreign keys"):
        writer(child, deployment, "strict_child").mode("append").save()
    assert deployment.sql("SELECT count(*) FROM strict_child") == [(0,)]
