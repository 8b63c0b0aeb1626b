"""The web-index observers: ``CREATE OBSERVER ... EXECUTE
'percolator.examples.webindex.observers:on_page'`` (and ``on_moved``, ``on_links``).

``on_page`` runs for each changed row of ``pages``. It keeps in ``docs`` what it applied for
the page (content hash, links, canonical URL) and applies the difference, in one transaction:

1. dedup: moves the page between the clusters of ``canonical`` (hash -> members and canonical
   URL, the smallest member) and, when a cluster's canonical URL changes, sets it on every
   member's ``docs`` row and bumps their ``moves``;
2. link inversion: inserts, updates or deletes its rows of ``anchors`` (one per link target,
   with the anchor text and the canonical URL of the target as its snapshot shows it).

``on_moved`` runs when a page's canonical URL changed (``docs.moves``): it rewrites every anchor
pointing at the page with the current canonical URL. ``on_links`` (WEAK) runs after each change
of a page's links and checks, read-only unless something is stale, that the page's anchors carry
their targets' current canonical URLs.

Why the result is exact under snapshot isolation, with many runs in parallel on several workers
(docs/webindex.md has the long form):

- Clusters: every run that changes a cluster writes its ``canonical`` row, so runs changing one
  cluster are serialized and each sees its exact members; it sets the members' canonical URLs in
  the same transaction, and every run that changes a page's canonical URL writes that page's
  ``docs`` row.
- An anchor's canonical URL: let R be an anchor (t, s) and K the last change of t's canonical
  URL. The last ``on_moved`` run for t starts after K and rewrites every anchor of t it sees; a
  run that wrote R and commits after that run started either conflicts with it (R existed: both
  write R) or inserted R, and then ``on_links`` for s runs after that insert and fixes R. No
  anchor write therefore outlives a newer canonical URL. The rewrite is unconditional on purpose:
  skipping rows that already look right would let an older concurrent fix overwrite them.
- Pages never write rows of other pages' link targets, so pages linking to one popular URL do
  not conflict with each other (an inlink counter per target would make every such pair
  conflict; this is why there is none).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from percolator.examples.webindex.rules import Links, canonical_of, content_hash, normalize_links
from percolator.server.observer_api import ChangedRow, ObserverTransaction, Rows


@dataclass(frozen=True)
class PageState:
    """What ``on_page`` applies for a page, or applied last time (``hash`` None: no page)."""

    hash: str | None
    links: Links
    canonical_url: str | None = None
    moves: int | None = None


NO_PAGE = PageState(None, {})


async def on_page(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Bring the derived tables in line with one row of ``pages`` (inserted, changed or
    deleted)."""
    url: str = row.key["url"]
    new = _page_state(row.values)
    # What the statements below read, in one round trip: the page's own docs row, its
    # cluster, its link targets' canonical URLs (only those: their links are large) and its
    # anchors (for ON CONFLICT).
    targets = sorted(new.links)
    await txn.prefetch(
        [
            Rows("docs", [url]),
            Rows("docs", targets, ["canonical_url"]),
            Rows("canonical", [new.hash] if new.hash is not None else []),
            Rows("anchors", [(t, url) for t in targets]),
        ]
    )
    old = await _applied_state(txn, url)
    if (new.hash, new.links) == (old.hash, old.links):
        return  # several writes collapsed into no change
    canonical = await _recluster(txn, url, old.hash, new.hash)
    own = canonical.pop(url, old.canonical_url) if new.hash is not None else None
    await _move_siblings(txn, canonical)
    added, removed = _link_changes(old.links, new.links)
    # The new anchors' targets' canonical URLs: those this transaction sets, else as read.
    known = {**canonical, url: own or url}
    unknown = sorted(t for t in added if t not in known)
    if unknown:
        known.update(await _canonical_urls(txn, unknown))
    await _write_anchors(txn, url, added, removed, known)
    await _write_doc(txn, url, old, PageState(new.hash, new.links, own))


async def on_moved(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Rewrite every anchor of a page with its current canonical URL (itself once deleted)."""
    url: str = row.key["url"]
    canonical = url if row.values is None else row.values["canonical_url"]
    # Every row, not only those that differ: see the module docstring.
    await txn.execute("UPDATE anchors SET canonical_url = $1 WHERE target_url = $2", canonical, url)


async def on_links(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Fix the page's anchors whose canonical URL is not their target's current one (an anchor
    inserted with a canonical URL read before a concurrent change that ``on_moved`` could not
    see yet)."""
    if row.values is None:
        return
    source: str = row.key["url"]
    targets = sorted(_from_json(row.values["links"]))
    if not targets:
        return
    await txn.prefetch(
        {"docs": targets, "anchors": [(t, source) for t in targets]},
        columns={"docs": ["canonical_url"], "anchors": ["canonical_url"]},
    )
    current = await _canonical_urls(txn, targets)
    rows = await txn.fetch(
        "SELECT target_url, canonical_url FROM anchors "
        f"WHERE source_url = $1 AND target_url IN ({_params(2, len(targets))})",
        source,
        *targets,
    )
    for r in rows:
        t = r["target_url"]
        if r["canonical_url"] != current.get(t, t):
            await txn.execute(
                "UPDATE anchors SET canonical_url = $1 WHERE target_url = $2 AND source_url = $3",
                current.get(t, t),
                t,
                source,
            )


# -- the page ------------------------------------------------------------------------------


def _page_state(values: dict[str, Any] | None) -> PageState:
    if values is None:
        return NO_PAGE
    links = normalize_links(_from_json(values["links"]))
    return PageState(content_hash(values["content"]), links)


async def _applied_state(txn: ObserverTransaction, url: str) -> PageState:
    """The page's ``docs`` row: what the last committed run applied."""
    doc = await txn.fetchrow(
        "SELECT hash, links, canonical_url, moves FROM docs WHERE url = $1", url
    )
    if doc is None:
        return NO_PAGE
    return PageState(doc["hash"], _from_json(doc["links"]), doc["canonical_url"], doc["moves"])


async def _write_doc(txn: ObserverTransaction, url: str, old: PageState, new: PageState) -> None:
    """Write the page's ``docs`` row; bump ``moves`` when its effective canonical URL (itself
    when it is not a page) changes, so that ``on_moved`` forwards the anchors pointing at it.
    A deleted row notifies ``on_moved`` too when ``moves`` was ever set."""
    if new.hash is None:
        if old.hash is not None:
            await txn.execute("DELETE FROM docs WHERE url = $1", url)
        return
    moves = old.moves
    if (new.canonical_url or url) != (old.canonical_url or url):
        moves = (moves or 0) + 1
    await txn.execute(
        "INSERT INTO docs VALUES ($1, $2, $3, $4, $5) ON CONFLICT (url) DO UPDATE SET "
        "hash = excluded.hash, links = excluded.links, canonical_url = excluded.canonical_url, "
        "moves = excluded.moves",
        url,
        new.hash,
        _to_json(new.links),
        new.canonical_url,
        moves,
    )


# -- dedup ---------------------------------------------------------------------------------


async def _recluster(
    txn: ObserverTransaction, url: str, old_hash: str | None, new_hash: str | None
) -> dict[str, str]:
    """Move ``url`` from the cluster of ``old_hash`` to that of ``new_hash`` (either may be
    None). Returns the canonical URL of every page whose canonical URL may have changed: all
    members of a cluster whose canonical URL changed, and ``url`` itself if it is in one."""
    if old_hash == new_hash:
        return {}
    if old_hash is None and new_hash is not None:
        # A new page, most often with new content: try to start its cluster with one round
        # trip; DO NOTHING (no write) when the cluster exists, which the general case handles.
        tag = await txn.execute(
            "INSERT INTO canonical VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING",
            new_hash,
            url,
            _to_json([url]),
        )
        if tag == "INSERT 0 1":
            return {url: url}
    hashes = [h for h in (old_hash, new_hash) if h is not None]
    rows = await txn.fetch(
        f"SELECT hash, url, members FROM canonical WHERE hash IN ({_params(1, len(hashes))})",
        *hashes,
    )
    current = {r["hash"]: (r["url"], list(_from_json(r["members"]))) for r in rows}
    changed: dict[str, str] = {}
    upserts: list[tuple[str, str, list[str]]] = []
    deletes: list[str] = []
    if old_hash is not None:
        was, members = current.get(old_hash, (None, []))
        members = [m for m in members if m != url]
        if not members:
            deletes.append(old_hash)
        else:
            now = canonical_of(members)
            upserts.append((old_hash, now, members))
            if now != was:
                changed.update(dict.fromkeys(members, now))
    if new_hash is not None:
        was, members = current.get(new_hash, (None, []))
        members = sorted({*members, url})
        now = canonical_of(members)
        upserts.append((new_hash, now, members))
        changed.update(dict.fromkeys(members if now != was else [url], now))
    if deletes:
        await txn.execute(
            f"DELETE FROM canonical WHERE hash IN ({_params(1, len(deletes))})", *deletes
        )
    if upserts:
        await txn.execute(
            f"INSERT INTO canonical VALUES {_rows(len(upserts), 3)} "
            "ON CONFLICT (hash) DO UPDATE SET url = excluded.url, members = excluded.members",
            *[v for h, c, m in upserts for v in (h, c, _to_json(m))],
        )
    return changed


async def _move_siblings(txn: ObserverTransaction, canonical: dict[str, str]) -> None:
    """Set the new canonical URL of other pages of a cluster and bump their ``moves``."""
    by_canonical: dict[str, list[str]] = {}
    for member, c in canonical.items():
        by_canonical.setdefault(c, []).append(member)
    for c, members in sorted(by_canonical.items()):
        await txn.execute(
            "UPDATE docs SET canonical_url = $1, moves = COALESCE(moves, 0) + 1 "
            f"WHERE url IN ({_params(2, len(members))}) AND canonical_url <> $1",
            c,
            *sorted(members),
        )


# -- link inversion ------------------------------------------------------------------------


def _link_changes(old: Links, new: Links) -> tuple[dict[str, str], list[str]]:
    """The links to insert or update (target -> anchor) and the targets no longer linked."""
    added = {t: a for t, a in new.items() if old.get(t) != a}
    removed = sorted(t for t in old if t not in new)
    return added, removed


async def _canonical_urls(txn: ObserverTransaction, urls: list[str]) -> dict[str, str]:
    """The canonical URL of each of ``urls`` that is a page (the others are their own)."""
    rows = await txn.fetch(
        f"SELECT url, canonical_url FROM docs WHERE url IN ({_params(1, len(urls))})", *urls
    )
    return {r["url"]: r["canonical_url"] for r in rows}


async def _write_anchors(
    txn: ObserverTransaction,
    url: str,
    added: dict[str, str],
    removed: list[str],
    canonical: dict[str, str],
) -> None:
    """Apply the page's link changes to ``anchors``; ``canonical`` holds the canonical URL of
    each target that is a page (the others are their own)."""
    if removed:
        await txn.execute(
            "DELETE FROM anchors WHERE source_url = $1 "
            f"AND target_url IN ({_params(2, len(removed))})",
            url,
            *removed,
        )
    if added:
        targets = sorted(added)
        await txn.execute(
            f"INSERT INTO anchors VALUES {_rows(len(targets), 4)} "
            "ON CONFLICT (target_url, source_url) DO UPDATE SET "
            "canonical_url = excluded.canonical_url, anchor = excluded.anchor",
            *[v for t in targets for v in (t, url, canonical.get(t, t), added[t])],
        )


# -- SQL text and values ---------------------------------------------------------------------


def _params(first: int, n: int) -> str:
    """``$first, ..., $(first+n-1)``."""
    return ", ".join(f"${i}" for i in range(first, first + n))


def _rows(n: int, width: int) -> str:
    """``($1, ..., $width), ...`` for ``n`` rows."""
    return ", ".join(f"({_params(1 + i * width, width)})" for i in range(n))


def _to_json(value: Any) -> str:
    """A jsonb parameter: observers pass jsonb values as JSON text (as asyncpg does)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _from_json(value: Any) -> Any:
    """A jsonb result: JSON text, decoded (a value that is already decoded is kept)."""
    return json.loads(value) if isinstance(value, str) else value
