"""What the SQL layer asks of the observers runtime outside a worker: registering watches,
removing a dropped observer's state, unparking, and the status behind ``percolator.observers``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from percolator.server.storage.cells import ObserverCounters, ParkedNotification, Watch
from percolator.server.txn.client import TransactionClient


async def add_watches(client: TransactionClient, watches: Iterable[Watch]) -> None:
    """Make commits to these cells notify their observers (one call per observer and table)."""
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for w in watches:
        grouped[(w.observer, w.table)].append(w.column)
    for (observer, table), columns in sorted(grouped.items()):
        await client.store.watch(observer, table, sorted(columns))


async def remove_watches(
    client: TransactionClient, removed: Iterable[Watch], live_observers: set[str]
) -> None:
    """Forget watches a committed DDL made useless: a dropped observer loses everything it had
    in the store (watches, notifications, counters); a live one only its watches of a table it
    no longer observes (its table's storage before a TRUNCATE)."""
    gone = {w.observer for w in removed if w.observer not in live_observers}
    stale = {(w.observer, w.table) for w in removed if w.observer in live_observers}
    for observer in sorted(gone):
        await client.store.unwatch(observer)
    for observer, table in sorted(stale):
        await client.store.unwatch(observer, table)


async def retry_parked(client: TransactionClient, observer: str) -> int:
    """Unpark the observer's parked changes; how many."""
    return await client.store.retry_parked(observer)


@dataclass(frozen=True)
class ObserverStatus:
    """What the store knows of one observer's work."""

    pending: int = 0
    parked: int = 0
    oldest_pending_ts: int | None = None
    counters: ObserverCounters | None = None


async def observer_status(client: TransactionClient) -> dict[str, ObserverStatus]:
    """Per observer key: its pending and parked notifications and its run counters (one round
    trip per shard for the notifications, one for the counters)."""
    summaries, counters = await asyncio.gather(
        client.store.notification_summary(), client.store.observer_counters()
    )
    by_key: dict[str, ObserverStatus] = {}
    for s in summaries:
        by_key[s.observer] = ObserverStatus(s.pending, s.parked, s.oldest_ts)
    for c in counters:
        base = by_key.get(c.observer, ObserverStatus())
        by_key[c.observer] = ObserverStatus(base.pending, base.parked, base.oldest_pending_ts, c)
    return by_key


async def parked_changes(client: TransactionClient, limit: int = 1000) -> list[ParkedNotification]:
    """The parked changes of every observer, oldest first."""
    return await client.store.parked_notifications(None, limit)


async def gc_safe_point(client: TransactionClient) -> int:
    """The GC safe point in force on the store: every running transaction started above it."""
    return await client.store.set_gc_safe_point(0)  # never lowers it: a read
