"""The web index's Spark batch job (the paper's MapReduce side): after a crawl, and again after
a re-crawl that changes, adds and deletes pages, the tables it writes equal the batch
computation over the same snapshot, row for row; and the observers can take over the index it
built."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from percolator.examples.webindex.batch import read_snapshot, verify
from percolator.examples.webindex.crawl import Crawl, CrawlConfig
from percolator.examples.webindex.demo import (
    delete_pages,
    load_pages,
    locks_checker,
    upsert_pages,
    wait_idle,
)
from percolator.examples.webindex.schema import OBSERVERS, TABLES
from percolator.examples.webindex.spark_batch import recompute

from .conftest import Deployment


@pytest.fixture(scope="module")
def conn(deployment: Deployment) -> Any:
    with psycopg.connect(deployment.server.conninfo(), autocommit=True) as c:
        for statement in TABLES:
            c.execute(statement)
        yield c


def _assert_verified(conn: psycopg.Connection, pages: int) -> None:
    # The overwrite gave each table new storage, which the SQL server learns of at its next
    # catalog poll (1 s; docs/spark.md): read through it after that.
    time.sleep(2.5)
    result = verify(conn)
    assert result.differences == []
    assert result.pages == pages
    assert result.rows["docs"] == pages


def test_batch_job_builds_and_rebuilds_the_index(
    spark: Any, deployment: Deployment, conn: psycopg.Connection
) -> None:
    crawl = Crawl(CrawlConfig(pages=300, seed=7))
    load_pages(conn, list(crawl.pages.values()))

    first = recompute(spark, deployment.options)
    assert first.pages == 300
    _assert_verified(conn, 300)
    _, index = read_snapshot(conn)
    assert first.rows == {name: len(getattr(index, name)) for name in first.rows}
    assert 0 < first.rows["canonical"] < 300  # the crawl has duplicate contents

    recrawl = crawl.recrawl(0.2)
    assert recrawl.deletes and recrawl.added
    upsert_pages(conn, recrawl.upserts)
    delete_pages(conn, recrawl.deletes)
    second = recompute(spark, deployment.options)
    _assert_verified(conn, len(crawl.pages))
    assert second.pages == len(crawl.pages)
    # The overwrite removed the rows of deleted pages, not just added the new ones.
    _, index = read_snapshot(conn)
    assert not any(url in index.docs for url in recrawl.deletes)

    # The observers take over the index the batch job built (as `percolator bench webindex`
    # has them do): deleting a page that was a duplicate must forward its anchors back to it,
    # which relies on the job setting docs.moves as the observers do.
    for statement in OBSERVERS:
        conn.execute(statement)
    again = crawl.recrawl(0.2)
    upsert_pages(conn, again.upserts)
    delete_pages(conn, again.deletes)
    # A change notifies its observers when its cells are committed: those committed in the
    # background after a commit point (the secondaries) notify later, so "nothing pending"
    # means idle only once no write lock is left (as `percolator bench webindex` settles).
    writes_pending = locks_checker(deployment.server.store_dsn.split(","))
    wait_idle(conn, timeout_s=300, writes_pending=writes_pending)
    result = verify(conn)
    assert result.differences == []
    assert result.pages == len(crawl.pages)
