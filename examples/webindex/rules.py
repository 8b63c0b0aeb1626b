"""The definitions both the observers and the batch computation apply, so that the two can only
disagree about *when* something is computed, never about *what*.

- A page's content hash: BLAKE2b-128 of its UTF-8 content, in hex.
- A page's links: the ``links`` jsonb list of ``{"url": ..., "anchor": ...}`` objects, reduced to
  one anchor per target URL. Duplicate links from one page to one target keep the anchor of the
  first occurrence in the list (the order the crawler saw them in). Entries without a non-empty
  string ``url`` are ignored; a missing or non-string ``anchor`` counts as ``""``. A link to the
  page itself is kept like any other.
- The canonical URL of a cluster of identical contents: the smallest URL (Python string order,
  i.e. code point order), the deterministic form of the paper's Figure 2 rule.
- The canonical URL of any URL: its cluster's canonical URL if it is a crawled page, else itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

Links = dict[str, str]
"""A page's normalized links: target URL -> anchor text."""


def content_hash(content: str) -> str:
    """The hash that puts pages with identical contents in one cluster."""
    return hashlib.blake2b(content.encode("utf-8"), digest_size=16).hexdigest()


def normalize_links(raw: Any) -> Links:
    """One anchor per target (the first occurrence wins); malformed entries are skipped."""
    links: Links = {}
    if not isinstance(raw, list):
        return links
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        url = entry.get("url")
        if not isinstance(url, str) or not url or url in links:
            continue
        anchor = entry.get("anchor")
        links[url] = anchor if isinstance(anchor, str) else ""
    return links


def canonical_of(members: Iterable[str]) -> str:
    """The canonical URL of a non-empty cluster."""
    return min(members)
