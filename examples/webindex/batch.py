"""The web index computed from scratch, and the check that the observers' incremental result
equals it.

:func:`compute` derives every table from the ``pages`` rows alone, in plain Python, with the
rules of ``rules.py``. :func:`verify` reads ``pages`` and the derived tables in one read-only
transaction (one snapshot), computes the batch result from those pages and compares the two row
for row. ``docs.moves`` is left out: it counts canonical URL changes, which depend on the order
changes happened in, not on the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol

from percolator.examples.webindex.rules import Links, canonical_of, content_hash, normalize_links


@dataclass
class WebIndex:
    """The derived tables, keyed by primary key."""

    docs: dict[str, tuple[str, Links, str]]
    """url -> (content hash, normalized links, canonical URL)"""
    canonical: dict[str, tuple[str, tuple[str, ...]]]
    """content hash -> (canonical URL, members in order)"""
    anchors: dict[tuple[str, str], tuple[str, str]]
    """(target_url, source_url) -> (canonical URL of the target, anchor text)"""


def compute(pages: Mapping[str, tuple[str, Any]]) -> WebIndex:
    """Every derived table from ``pages`` (url -> (content, links as stored))."""
    parsed = {
        url: (content_hash(content), normalize_links(links))
        for url, (content, links) in pages.items()
    }
    clusters: dict[str, list[str]] = defaultdict(list)
    for url, (h, _) in parsed.items():
        clusters[h].append(url)
    canonical = {h: (canonical_of(m), tuple(sorted(m))) for h, m in clusters.items()}
    docs = {url: (h, links, canonical[h][0]) for url, (h, links) in parsed.items()}

    def canonical_url(url: str) -> str:
        return docs[url][2] if url in docs else url

    anchors = {
        (target, source): (canonical_url(target), anchor)
        for source, (_, links) in parsed.items()
        for target, anchor in links.items()
    }
    return WebIndex(docs, canonical, anchors)


def compare(expected: WebIndex, actual: WebIndex) -> list[str]:
    """Every difference, one line each: ``table key: expected X, found Y`` (``missing`` or
    ``unexpected`` for rows on one side only)."""
    out: list[str] = []
    for f in fields(WebIndex):
        out.extend(_compare_table(f.name, getattr(expected, f.name), getattr(actual, f.name)))
    return out


def _compare_table(name: str, expected: Mapping[Any, Any], actual: Mapping[Any, Any]) -> list[str]:
    out = []
    for key in sorted(expected.keys() | actual.keys(), key=repr):
        if key not in actual:
            out.append(f"{name} {key!r}: missing (expected {expected[key]!r})")
        elif key not in expected:
            out.append(f"{name} {key!r}: unexpected row {actual[key]!r}")
        elif expected[key] != actual[key]:
            out.append(f"{name} {key!r}: expected {expected[key]!r}, found {actual[key]!r}")
    return out


# -- reading the server's tables ---------------------------------------------------------------


class Cursor(Protocol):
    def fetchall(self) -> list[tuple[Any, ...]]: ...


class Connection(Protocol):
    """A psycopg connection in autocommit mode (blocks are opened with BEGIN)."""

    def execute(self, query: str, /) -> Cursor: ...


def read_snapshot(conn: Connection) -> tuple[dict[str, tuple[str, Any]], WebIndex]:
    """``pages`` and the derived tables, all read in one read-only snapshot."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        pages = {
            u: (c, links) for u, c, links in _rows(conn, "SELECT url, content, links FROM pages")
        }
        index = WebIndex(
            docs={
                u: (h, dict(links), c)
                for u, h, links, c in _rows(
                    conn, "SELECT url, hash, links, canonical_url FROM docs"
                )
            },
            canonical={
                h: (u, tuple(m))
                for h, u, m in _rows(conn, "SELECT hash, url, members FROM canonical")
            },
            anchors={
                (t, s): (c, a)
                for t, s, c, a in _rows(
                    conn, "SELECT target_url, source_url, canonical_url, anchor FROM anchors"
                )
            },
        )
    finally:
        conn.execute("COMMIT")
    return pages, index


def _rows(conn: Connection, query: str) -> Iterable[tuple[Any, ...]]:
    return conn.execute(query).fetchall()


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`."""

    pages: int
    rows: dict[str, int]
    """Rows per derived table, as found."""
    differences: list[str]

    @property
    def ok(self) -> bool:
        return not self.differences


def verify(conn: Connection) -> Verification:
    """Compare the incremental index with the batch computation over the same snapshot."""
    pages, actual = read_snapshot(conn)
    expected = compute(pages)
    rows = {f.name: len(getattr(actual, f.name)) for f in fields(WebIndex)}
    return Verification(len(pages), rows, compare(expected, actual))
