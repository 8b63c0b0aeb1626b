"""The web index as a Spark batch job: the paper's MapReduce side, beside the observers.

:func:`recompute` reads ``pages`` through the connector as one snapshot, derives ``docs``,
``canonical`` and ``anchors`` from those pages alone with the rules of ``rules.py`` (the same
ones the observers and ``batch.compute`` apply), and writes each derived table back with
``mode("overwrite")``: one atomic Percolator transaction per table, so a reader sees a table's
old rows or its new ones, never a mix. The three tables are three transactions: between them a
reader may see a new ``docs`` beside an old ``anchors`` (MapReduce's output appeared table by
table too). Every run rewrites every derived row, whatever fraction of the crawl changed: that
is the cost the paper's Figure 7 sets against the observers'.

The tables must exist (``schema.TABLES``) and no web-index observer may run on them meanwhile:
two writers of one index would each undo the other's work.

The job, step by step (Spark plans them; ``parsed`` is cached since four steps read it):

1. ``pages`` -> ``parsed``: per page its content hash and normalized links (a Python step over
   Arrow batches: ``rules.content_hash`` and ``rules.normalize_links`` are Python).
2. ``canonical``: pages grouped by hash; the smallest URL and the sorted members. Spark orders
   strings by their UTF-8 bytes, which is code point order, as Python's ``min`` and ``sorted``.
3. ``docs``: each page joined with its cluster's canonical URL; ``moves`` 1 where that is
   another page, else NULL.
4. ``anchors``: each page's links exploded, left-joined with ``docs`` on the target (a target
   that is not a crawled page is its own canonical URL).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from percolator.examples.webindex.rules import content_hash, normalize_links
from percolator.examples.webindex.schema import DERIVED_TABLES

PARSED_SCHEMA = (
    "url string, hash string, links string, targets array<struct<target:string,anchor:string>>"
)
"""A page as step 1 leaves it: ``links`` as the ``docs.links`` jsonb text, ``targets`` the same
links as rows for the anchors."""


@dataclass(frozen=True)
class BatchRun:
    """What one :func:`recompute` read, wrote and took."""

    pages: int
    rows: dict[str, int]
    """Rows written per derived table."""
    elapsed_s: float


def parse_pages(batches: Iterator[Any]) -> Iterator[Any]:
    """Step 1 over Arrow record batches of ``pages`` (``url``, ``content``, ``links`` text)."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("url", pa.string()),
            ("hash", pa.string()),
            ("links", pa.string()),
            (
                "targets",
                pa.list_(pa.struct([("target", pa.string()), ("anchor", pa.string())])),
            ),
        ]
    )
    for batch in batches:
        urls = batch.column("url").to_pylist()
        contents = batch.column("content").to_pylist()
        normalized = [normalize_links(json.loads(raw)) for raw in batch.column("links").to_pylist()]
        yield pa.RecordBatch.from_pydict(
            {
                "url": urls,
                "hash": [content_hash(c) for c in contents],
                "links": [json.dumps(links) for links in normalized],
                "targets": [
                    [{"target": t, "anchor": a} for t, a in links.items()] for links in normalized
                ],
            },
            schema=schema,
        )


def derive(pages: Any) -> dict[str, Any]:
    """Steps 1 to 4 as DataFrames (nothing runs yet): the derived tables by name, and
    ``parsed`` (cached; the caller unpersists it)."""
    from pyspark.sql import functions as F

    parsed = pages.select("url", "content", "links").mapInArrow(parse_pages, PARSED_SCHEMA)
    parsed = parsed.cache()
    canonical = parsed.groupBy("hash").agg(
        F.min("url").alias("url"),
        F.to_json(F.sort_array(F.collect_list("url"))).alias("members"),
    )
    docs = parsed.join(
        canonical.select("hash", F.col("url").alias("canonical_url")), "hash"
    ).select(
        "url",
        "hash",
        "links",
        "canonical_url",
        # What the observers keep true (schema.py): moves is set on every page whose canonical
        # URL is another page's, so that deleting the page notifies on_moved. An index built
        # here and then maintained by the observers relies on it.
        F.when(F.col("canonical_url") != F.col("url"), F.lit(1)).cast("int").alias("moves"),
    )
    anchors = (
        parsed.select(F.col("url").alias("source_url"), F.explode("targets").alias("link"))
        .select(
            F.col("link.target").alias("target_url"),
            "source_url",
            F.col("link.anchor").alias("anchor"),
        )
        .join(
            docs.select(F.col("url").alias("target_url"), F.col("canonical_url").alias("c")),
            "target_url",
            "left",
        )
        .select(
            "target_url",
            "source_url",
            F.coalesce("c", "target_url").alias("canonical_url"),
            "anchor",
        )
    )
    return {"parsed": parsed, "docs": docs, "canonical": canonical, "anchors": anchors}


def recompute(spark: Any, options: Mapping[str, str]) -> BatchRun:
    """Recompute the whole index from one snapshot of ``pages`` and overwrite the derived
    tables. ``options`` are the connector's connection options (``store``, ``coordinator``)."""
    started = time.perf_counter()
    pages = spark.read.format("percolator").options(**options).option("table", "pages").load()
    frames = derive(pages)
    parsed = frames["parsed"]
    try:
        rows: dict[str, int] = {}
        for table in DERIVED_TABLES:
            frame = frames[table].cache()
            try:
                rows[table] = frame.count()
                (
                    frame.write.format("percolator")
                    .options(**options)
                    .option("table", table)
                    .mode("overwrite")
                    .save()
                )
            finally:
                frame.unpersist()
        n_pages = parsed.count()
    finally:
        parsed.unpersist()
    return BatchRun(n_pages, rows, time.perf_counter() - started)
