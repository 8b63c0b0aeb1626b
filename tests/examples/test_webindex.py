"""The web-index example: the batch computation on hand-made crawls with known answers, the
crawl generator, and the observers end to end through a real server (whose result must equal
the batch computation over the same snapshot)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from percolator.examples.webindex.batch import WebIndex, compare, compute, verify
from percolator.examples.webindex.crawl import Crawl, CrawlConfig
from percolator.examples.webindex.demo import (
    DemoOptions,
    delete_pages,
    load_pages,
    run_pipeline,
    upsert_pages,
    wait_idle,
)
from percolator.examples.webindex.rules import content_hash, normalize_links
from percolator.examples.webindex.schema import create_schema
from tests.conftest import PostgresServer, create_database
from tests.server.conftest import SqlServer, start_sql_server

A, B, C, D = (f"http://{x}.example/" for x in "abcd")
S, T, Z = "http://s.example/", "http://t.example/", "http://z.example/"


def page(content: str, *links: tuple[str, str]) -> tuple[str, list[dict[str, str]]]:
    """A ``pages`` row's (content, links) as stored."""
    return content, [{"url": u, "anchor": a} for u, a in links]


def canonical_urls(index: WebIndex) -> dict[str, str]:
    return {url: doc[2] for url, doc in index.docs.items()}


# -- the batch computation ---------------------------------------------------------------------


def test_identical_contents_share_the_smallest_url() -> None:
    index = compute({B: page("same"), A: page("same"), C: page("same"), D: page("other")})
    assert index.canonical == {
        content_hash("same"): (A, (A, B, C)),
        content_hash("other"): (D, (D,)),
    }
    assert canonical_urls(index) == {A: A, B: A, C: A, D: D}


def test_anchors_to_duplicates_are_forwarded_to_the_canonical_page() -> None:
    index = compute(
        {
            A: page("same"),
            B: page("same"),
            S: page("source", (B, "to b"), (Z, "to z"), (S, "to self"), (A, "to a")),
        }
    )
    assert index.anchors == {
        (B, S): (A, "to b"),
        (Z, S): (Z, "to z"),  # not crawled: its own canonical URL
        (S, S): (S, "to self"),
        (A, S): (A, "to a"),
    }


def test_first_anchor_wins_and_malformed_links_are_skipped() -> None:
    raw: Any = [
        {"url": T, "anchor": "first"},
        {"url": T, "anchor": "second"},
        {"anchor": "no url"},
        {"url": ""},
        {"url": 7},
        "not an object",
        {"url": Z},
        {"url": A, "anchor": None},
    ]
    assert normalize_links(raw) == {T: "first", Z: "", A: ""}
    assert normalize_links({"url": T}) == {}
    index = compute({S: ("x", raw)})
    assert index.anchors == {(T, S): (T, "first"), (Z, S): (Z, ""), (A, S): (A, "")}


def test_deleting_the_canonical_page_hands_the_cluster_to_the_next_url() -> None:
    before = {A: page("same"), B: page("same"), C: page("same"), S: page("s", (B, "b"), (A, "a"))}
    after = {k: v for k, v in before.items() if k != A}
    index = compute(after)
    assert index.canonical[content_hash("same")] == (B, (B, C))
    assert canonical_urls(index)[C] == B
    # A is no longer a page: the link to it stays, with A as its own canonical URL.
    assert index.anchors == {(B, S): (B, "b"), (A, S): (A, "a")}


def test_changed_links_replace_the_anchors_of_the_page() -> None:
    before = compute({S: page("s", (A, "a"), (B, "b")), A: page("a")})
    after = compute({S: page("s", (B, "new b"), (C, "c")), A: page("a")})
    assert set(before.anchors) == {(A, S), (B, S)}
    assert after.anchors == {(B, S): (B, "new b"), (C, S): (C, "c")}


def test_compare_names_every_difference() -> None:
    expected = compute({A: page("same"), B: page("same"), S: page("s", (B, "b"))})
    actual = compute({A: page("same"), B: page("same"), S: page("s", (B, "b"))})
    assert compare(expected, actual) == []
    actual.anchors[(B, S)] = (B, "b")  # not forwarded
    del actual.docs[A]
    actual.canonical["extra"] = (Z, (Z,))
    diffs = compare(expected, actual)
    assert len(diffs) == 3
    assert any(d.startswith("docs ") and "missing" in d for d in diffs)
    assert any(d.startswith("canonical 'extra'") and "unexpected" in d for d in diffs)
    assert any(d.startswith("anchors ") and "expected" in d and "found" in d for d in diffs)


# -- the crawl generator ---------------------------------------------------------------------


def pages_of(crawl: Crawl) -> dict[str, tuple[str, Any]]:
    return {u: (p.content, p.links_json()) for u, p in crawl.pages.items()}


def test_crawl_is_deterministic_for_a_seed() -> None:
    a, b = Crawl(CrawlConfig(pages=300, seed=7)), Crawl(CrawlConfig(pages=300, seed=7))
    assert a.pages == b.pages
    assert a.recrawl(0.2) == b.recrawl(0.2)
    assert a.recrawl(0.3) == b.recrawl(0.3)
    assert a.pages == b.pages
    assert Crawl(CrawlConfig(pages=300, seed=8)).pages != Crawl(CrawlConfig(pages=300)).pages


def test_crawl_has_clusters_skewed_links_and_churn() -> None:
    crawl = Crawl(CrawlConfig(pages=1000, seed=1))
    index = compute(pages_of(crawl))
    assert len(index.docs) == 1000
    assert sum(len(m) for _, m in index.canonical.values() if len(m) > 1) >= 100
    inlinks = Counter(t for t, _ in index.anchors)
    assert max(inlinks.values()) > 10 * (sum(inlinks.values()) / len(inlinks))
    assert any(t not in crawl.pages for t in inlinks)  # links to URLs not crawled
    assert len(set(index.anchors.values())) > 100

    before = dict(crawl.pages)
    change = crawl.recrawl(0.2)
    assert change.deletes and change.added
    assert all(u not in crawl.pages for u in change.deletes)
    changed = [p for p in change.upserts if p.url in before]
    assert any(p.content != before[p.url].content for p in changed)
    assert any(p.links != before[p.url].links for p in changed)
    # Re-crawls move pages between clusters: some canonical URL changes.
    after = compute(pages_of(crawl))
    old = canonical_urls(index)
    assert any(old[u] != c for u, c in canonical_urls(after).items() if u in old)


# -- end to end through a server --------------------------------------------------------------


@pytest.fixture(params=[2])
def webindex_server(
    embedded_pg: PostgresServer, request: pytest.FixtureRequest
) -> Iterator[SqlServer]:
    """A server with several observer workers (they split the notifications) on a fresh
    store."""
    store = asyncio.run(create_database(embedded_pg.dsn, "webindex"))
    thread, server = start_sql_server(store, observer_workers=request.param, observer_concurrency=8)
    try:
        yield server
    finally:
        thread.stop()


def write_pages(conn: psycopg.Connection, pages: dict[str, tuple[str, Any]]) -> None:
    for url, (content, links) in pages.items():
        conn.execute(
            "INSERT INTO pages VALUES (%s, %s, %s) ON CONFLICT (url) DO UPDATE "
            "SET content = excluded.content, links = excluded.links",
            (url, content, Jsonb(links)),
        )


def assert_verified(conn: psycopg.Connection) -> None:
    outcome = verify(conn)
    assert outcome.ok, "\n".join(outcome.differences[:20])


def test_observers_follow_hand_made_changes(webindex_server: SqlServer) -> None:
    with psycopg.connect(webindex_server.conninfo(), autocommit=True) as conn:
        create_schema(conn)
        write_pages(conn, {S: page("s", (C, "to c"), (Z, "to z")), C: page("same")})
        wait_idle(conn, timeout_s=60)
        assert_verified(conn)
        # B joins C's cluster and sorts first: the anchor to C is forwarded to B.
        write_pages(conn, {B: page("same")})
        wait_idle(conn, timeout_s=60)
        rows = conn.execute("SELECT target_url, canonical_url, anchor FROM anchors").fetchall()
        assert sorted(rows) == [(C, B, "to c"), (Z, Z, "to z")]
        assert_verified(conn)
        # A joins too and S drops its link to Z and links to A and B: all forwarded to A.
        write_pages(conn, {A: page("same"), S: page("s", (C, "c again"), (A, "a"), (B, "b"))})
        wait_idle(conn, timeout_s=60)
        rows = conn.execute("SELECT target_url, canonical_url, anchor FROM anchors").fetchall()
        assert sorted(rows) == [(A, A, "a"), (B, A, "b"), (C, A, "c again")]
        # B is deleted: the link to it stays, and points at B itself again.
        conn.execute("DELETE FROM pages WHERE url = %s", (B,))
        wait_idle(conn, timeout_s=60)
        rows = conn.execute("SELECT target_url, canonical_url, anchor FROM anchors").fetchall()
        assert sorted(rows) == [(A, A, "a"), (B, B, "b"), (C, A, "c again")]
        canonical = conn.execute("SELECT url, members FROM canonical").fetchall()
        assert sorted(canonical) == [(A, [A, C]), (S, [S])]
        assert_verified(conn)
        # A's content changes: C is alone again, and its own canonical URL.
        write_pages(conn, {A: page("different")})
        conn.execute("DELETE FROM pages WHERE url = %s", (S,))
        wait_idle(conn, timeout_s=60)
        assert conn.execute("SELECT count(*) FROM anchors").fetchone() == (0,)
        assert_verified(conn)
        assert conn.execute("SELECT url, canonical_url FROM docs ORDER BY url").fetchall() == [
            (A, A),
            (C, C),
        ]


def test_random_crawl_with_updates_and_deletes_verifies(webindex_server: SqlServer) -> None:
    options = DemoOptions(
        docs=400, recrawls=2, recrawl_fraction=0.25, seed=3, verify=True, idle_timeout_s=120
    )
    result = run_pipeline(webindex_server.conninfo(), options)
    assert result.verified, "\n".join(result.differences[:20])
    assert all(p.pages_deleted > 0 for p in result.phases[1:])
    assert sum(s["failures"] for s in result.observers.values()) == 0
    assert result.observers["webindex_forward"]["commits"] > 0  # canonical URLs did change
    assert result.rows["anchors"] > 1000


@pytest.mark.parametrize("webindex_server", [3], indirect=True)
def test_recrawls_written_while_observers_run_verify(webindex_server: SqlServer) -> None:
    """Changes keep arriving while runs are in flight: many duplicates (canonical URLs change
    often), very popular targets, small transactions, no waiting between re-crawls."""
    crawl = Crawl(
        CrawlConfig(
            pages=250, seed=11, duplicate_fraction=0.4, link_skew=1.0, uncrawled_fraction=0.5
        )
    )
    with psycopg.connect(webindex_server.conninfo(), autocommit=True) as conn:
        create_schema(conn)
        load_pages(conn, list(crawl.pages.values()), batch=25)
        for _ in range(5):
            change = crawl.recrawl(0.3)
            upsert_pages(conn, change.upserts, batch=10)
            delete_pages(conn, change.deletes, batch=10)
        wait_idle(conn, timeout_s=120)
        assert_verified(conn)
