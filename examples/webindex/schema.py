"""The web index's tables and observers, created through any SQL connection to the server.

============  =============================================================================
table         one row per
============  =============================================================================
pages         crawled page (the input): url, content, links (jsonb list of {url, anchor})
docs          page, as ``on_page`` applied it: content hash, normalized links (jsonb object
              target -> anchor), canonical URL, and ``moves`` (bookkeeping: bumped when the
              canonical URL changes, so that the anchors pointing here are forwarded; never
              NULL while the canonical URL is another page's, so that deleting the page
              forwards them back: a NULL cell leaves no delete to notify)
canonical     content hash of at least one page: its members (jsonb list, sorted) and
              canonical URL (the smallest member)
anchors       link (target_url, source_url): anchor text and the target's canonical URL,
              indexed by canonical URL (the inbound anchor text of a canonical page)
============  =============================================================================

A URL that is not a crawled page is its own canonical URL and has no ``docs`` row.
"""

from __future__ import annotations

from typing import Protocol

OBSERVERS_MODULE = "percolator.examples.webindex.observers"

TABLES: tuple[str, ...] = (
    "CREATE TABLE pages (url text PRIMARY KEY, content text NOT NULL, links jsonb NOT NULL)",
    "CREATE TABLE docs (url text PRIMARY KEY, hash text NOT NULL, links jsonb NOT NULL, "
    "canonical_url text NOT NULL, moves integer)",
    "CREATE TABLE canonical (hash text PRIMARY KEY, url text NOT NULL, members jsonb NOT NULL)",
    "CREATE TABLE anchors (target_url text, source_url text, canonical_url text NOT NULL, "
    "anchor text NOT NULL, PRIMARY KEY (target_url, source_url))",
    "CREATE INDEX anchors_canonical_url ON anchors (canonical_url)",
)

OBSERVERS: tuple[str, ...] = (
    f"CREATE OBSERVER webindex_page ON pages (content, links) EXECUTE '{OBSERVERS_MODULE}:on_page'",
    f"CREATE OBSERVER webindex_forward ON docs (moves) EXECUTE '{OBSERVERS_MODULE}:on_moved'",
    f"CREATE OBSERVER webindex_links ON docs (links) WEAK EXECUTE '{OBSERVERS_MODULE}:on_links'",
)

DERIVED_TABLES: tuple[str, ...] = ("docs", "canonical", "anchors")


class Connection(Protocol):
    """What setup needs of a connection (a psycopg ``Connection`` in autocommit mode)."""

    def execute(self, query: str, /) -> object: ...


def create_schema(conn: Connection) -> None:
    """Create the tables, then the observers (which import ``observers.py`` in the server)."""
    for statement in (*TABLES, *OBSERVERS):
        conn.execute(statement)
