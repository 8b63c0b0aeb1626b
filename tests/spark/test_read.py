"""Batch reads: partitions, primary-key pushdown, one snapshot per DataFrame while transfers run,
asOf, and clear errors for bad input."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[dev]')")

import random
import threading
import time
from typing import Any

import psycopg
import pytest
from pyspark.sql import functions as F

from tests.spark.conftest import Deployment

ACCOUNTS = 50
BALANCE = 1000


def reader(spark: Any, deployment: Deployment, table: str, **options: str) -> Any:
    r = spark.read.format("percolator").option("table", table)
    for k, v in {**deployment.options, **options}.items():
        r = r.option(k, v)
    return r


@pytest.fixture(scope="module")
def numbers(deployment: Deployment) -> str:
    deployment.sql("CREATE TABLE numbers (id bigint PRIMARY KEY, name text, v double precision)")
    deployment.sql(
        "INSERT INTO numbers SELECT g, 'n' || g, g * 0.5 FROM generate_series(1, 2000) g"
    )
    return "numbers"


def test_partitions_cover_the_table_once(spark: Any, deployment: Deployment, numbers: str) -> None:
    df = reader(spark, deployment, numbers, partitions="4").load()
    assert df.rdd.getNumPartitions() == 4
    ids = [r.id for r in df.select("id").collect()]
    assert sorted(ids) == list(range(1, 2001))
    sizes = df.rdd.glom().map(len).collect()
    assert min(sizes) > 200, sizes  # split points balance the partitions


def test_primary_key_filters_are_pushed_down(
    spark: Any, deployment: Deployment, numbers: str
) -> None:
    df = reader(spark, deployment, numbers, partitions="4").load()
    one = df.filter(F.col("id") == 1234)
    assert [tuple(r) for r in one.collect()] == [(1234, "n1234", 617.0)]
    assert one.rdd.getNumPartitions() == 1
    between = df.filter((F.col("id") > 10) & (F.col("id") <= 20) & (F.col("name") != "n15"))
    assert sorted(r.id for r in between.collect()) == [i for i in range(11, 21) if i != 15]
    listed = df.filter(F.col("id").isin(7, 1999, 5000))
    assert sorted(r.id for r in listed.collect()) == [7, 1999]
    assert df.filter(F.col("id") < 0).count() == 0


def test_without_pushdown_enabled_reads_still_work(
    spark: Any, deployment: Deployment, numbers: str
) -> None:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = reader(spark, deployment, numbers).load()
        assert df.filter(F.col("id") == 3).collect()[0].name == "n3"
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_as_of_reads_an_older_snapshot(spark: Any, deployment: Deployment) -> None:
    deployment.sql("CREATE TABLE history (id int PRIMARY KEY, v text)")
    deployment.sql("INSERT INTO history VALUES (1, 'old'), (2, 'old')")
    before = deployment.timestamp()
    deployment.sql("UPDATE history SET v = 'new' WHERE id = 1")
    deployment.sql("DELETE FROM history WHERE id = 2")
    deployment.sql("INSERT INTO history VALUES (3, 'new')")
    old = reader(spark, deployment, "history", asOf=str(before)).load()
    assert sorted(tuple(r) for r in old.collect()) == [(1, "old"), (2, "old")]
    new = reader(spark, deployment, "history").load()
    assert sorted(tuple(r) for r in new.collect()) == [(1, "new"), (3, "new")]


def test_a_dataframe_is_one_snapshot(spark: Any, deployment: Deployment) -> None:
    """Concurrent transfers never change a read's total, within one action or across actions
    on one DataFrame (it was loaded at one snapshot)."""
    deployment.sql("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
    deployment.sql(
        f"INSERT INTO accounts SELECT g, {BALANCE} FROM generate_series(1, {ACCOUNTS}) g"
    )
    stop = threading.Event()
    done = [0]

    def transfers() -> None:
        rng = random.Random(7)
        with psycopg.connect(deployment.server.conninfo()) as conn:
            while not stop.is_set():
                a, b = rng.sample(range(1, ACCOUNTS + 1), 2)
                amount = rng.randint(1, 50)
                try:
                    with conn.transaction():
                        conn.execute(
                            "UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, a)
                        )
                        conn.execute(
                            "UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, b)
                        )
                    done[0] += 1
                except psycopg.errors.SerializationFailure:
                    continue

    worker = threading.Thread(target=transfers, daemon=True)
    worker.start()
    try:
        while done[0] < 5:
            time.sleep(0.05)
        for _ in range(3):
            df = reader(spark, deployment, "accounts", partitions="3").load()
            first = df.agg(F.sum("balance")).collect()[0][0]
            time.sleep(0.2)
            rows = df.collect()  # a second action on the same DataFrame
            assert first == ACCOUNTS * BALANCE
            assert sum(r.balance for r in rows) == ACCOUNTS * BALANCE
            assert len(rows) == ACCOUNTS
    finally:
        stop.set()
        worker.join(30)
    assert done[0] > 5


def test_bad_input_fails_on_the_driver(spark: Any, deployment: Deployment, numbers: str) -> None:
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException, match=r"42P01.*no_such_table"):
        reader(spark, deployment, "no_such_table").load()
    with pytest.raises(PySparkException, match=r'22023.*option "table" is required'):
        spark.read.format("percolator").options(**deployment.options).load()
    with pytest.raises(PySparkException, match=r"22023.*unknown option.*partiton"):
        reader(spark, deployment, numbers, partiton="3").load()
    with pytest.raises(PySparkException, match=r"22023.*partitions must be"):
        reader(spark, deployment, numbers, partitions="0").load().collect()
    bad_store = "postgresql://postgres@127.0.0.1:1/nothing"
    with pytest.raises(PySparkException, match=r"08006.*cannot connect to the store"):
        reader(spark, deployment, numbers, store=bad_store).load()
