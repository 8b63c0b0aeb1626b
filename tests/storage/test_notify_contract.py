"""The notification part of the cell-store contract (observers), run against every store: in
memory, Postgres, Postgres on 2 shards (the ``store`` fixture of ``conftest.py``)."""

from __future__ import annotations

import asyncio

from percolator.server.storage.cells import (
    CellKey,
    ClearNotification,
    DeferNotification,
    Mutation,
    Notification,
    NotifyCursor,
    NotifySummary,
    ObserverCounters,
    ParkedNotification,
    TxnState,
    Watch,
    WriteKind,
)
from percolator.server.storage.sharding import row_hash
from percolator.server.storage.store import CellStore

from .test_contract import key, put, ts, write

ALL = (-(2**63), 2**63 - 1)
"""The whole hash range."""
NOW_MS = 10**15
"""A wall clock past every retry time used here."""


async def pending(store: CellStore, now_ms: int = NOW_MS) -> list[Notification]:
    """Every runnable notification."""
    return await store.find_notifications(*ALL, now_ms=now_ms, limit=10_000)


def note(k: CellKey, at: int, observer: str = "obs", attempts: int = 0) -> Notification:
    """The notification a committed write of ``k`` at ``at`` should leave."""
    return Notification(observer, k.table, k.row, at, row_hash(k.table, k.row), attempts)


def clear(k: CellKey, below_ts: int, observer: str = "obs") -> ClearNotification:
    return ClearNotification(observer, k.table, k.row, below_ts)


def defer(
    k: CellKey, at: int, retry_at_ms: int, *, park: bool = False, error: str = "boom"
) -> DeferNotification:
    return DeferNotification("obs", k.table, k.row, at, retry_at_ms, error, park)


async def test_watches_are_listed_and_idempotent(store: CellStore) -> None:
    await store.watch("obs", "t", ["c", "d"])
    await store.watch("obs", "t", ["c"])
    await store.watch("other", "u", ["c"])
    assert await store.list_watches() == [
        Watch("t", "c", "obs"),
        Watch("t", "d", "obs"),
        Watch("u", "c", "other"),
    ]


async def test_commit_of_a_watched_put_or_delete_notifies(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a, b = key("a"), key("b")
    await write(store, a, b"v", ts(1), ts(2))
    await write(store, b, None, ts(3), ts(4))
    assert sorted(await pending(store), key=lambda n: n.row) == [note(a, ts(2)), note(b, ts(4))]


async def test_every_watching_observer_is_notified(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    await store.watch("second", "t", ["c"])
    a = key("a")
    await write(store, a, b"v", ts(1), ts(2))
    # Same row, same hash: ordered by observer.
    assert await pending(store) == [note(a, ts(2)), note(a, ts(2), "second")]


async def test_lock_kind_and_unwatched_cells_do_not_notify(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a = key("a")
    assert await store.prewrite(ts(1), a, 3000, [Mutation(a, WriteKind.LOCK)]) == []
    assert await store.commit(ts(1), ts(2), [a]) == []
    await write(store, key("a", "other-column"), b"v", ts(3), ts(4))
    await write(store, key("a", table="other-table"), b"v", ts(5), ts(6))
    assert await pending(store) == []


async def test_rollback_does_not_notify(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a, b = key("a"), key("b")
    assert await store.prewrite(ts(1), a, 3000, [put(a, b"x"), put(b, b"y")]) == []
    assert await store.rollback(ts(1), [a, b], leave_marker=True) == []
    # An expired primary rolled back by a reader.
    p = key("p")
    assert await store.prewrite(ts(10), p, 10, [put(p, b"x")]) == []
    status = await store.check_txn_status(p, ts(10), ts(5000), rollback_if_missing=False)
    assert status.state == TxnState.ROLLED_BACK
    assert await pending(store) == []


async def test_writes_collapse_into_one_notification_with_the_newest_ts(store: CellStore) -> None:
    await store.watch("obs", "t", ["c", "d"])
    c, d = key("a", "c"), key("a", "d")
    await write(store, c, b"1", ts(1), ts(2))
    await write(store, c, b"2", ts(3), ts(4))
    assert await pending(store) == [note(c, ts(4))]
    # An older transaction's secondary committed late does not lower the ts.
    assert await store.prewrite(ts(5), d, 3000, [put(d, b"old")]) == []
    await write(store, c, b"3", ts(8), ts(9))
    assert await store.commit(ts(5), ts(6), [d]) == []
    assert await pending(store) == [note(c, ts(9))]


async def test_a_secondary_committed_later_or_rolled_forward_notifies(store: CellStore) -> None:
    await store.watch("obs", "t", ["w"])
    primary = key("p", "unwatched")
    s1, s2 = key("s1", "w"), key("s2", "w")
    muts = [put(primary, b"p"), put(s1, b"1"), put(s2, b"2")]
    assert await store.prewrite(ts(1), primary, 3000, muts) == []
    assert await store.commit(ts(1), ts(2), [primary]) == []
    assert await pending(store) == []  # the secondaries are still locks
    assert await store.commit(ts(1), ts(2), [s1]) == []
    assert await pending(store) == [note(s1, ts(2))]
    # A reader meets s2's lock, finds the primary committed and rolls s2 forward.
    status = await store.check_txn_status(primary, ts(1), ts(3), rollback_if_missing=True)
    assert status.state == TxnState.COMMITTED and status.commit_ts == ts(2)
    assert await store.commit(ts(1), status.commit_ts, [s2]) == []
    assert {n.row for n in await pending(store)} == {b"s1", b"s2"}
    # Committing again (idempotent) writes nothing, so it does not notify again.
    await store.clear_notifications([clear(s1, ts(3)), clear(s2, ts(3))])
    assert await store.commit(ts(1), ts(2), [s1, s2]) == []
    assert await pending(store) == []


async def test_clear_removes_only_notifications_older_than_the_run(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a, b = key("a"), key("b")
    await write(store, a, b"1", ts(1), ts(2))
    await write(store, b, b"1", ts(1, 1), ts(2, 1))
    # A run at ts(2) does not see a write committed at ts(2) (ts not below it).
    await store.clear_notifications([clear(a, ts(2))])
    assert [n.row for n in await pending(store)] == sorted(
        [b"a", b"b"], key=lambda r: row_hash("t", r)
    )
    # A run started at ts(5); meanwhile a newer write at ts(7) of b: b's notification survives.
    await write(store, b, b"2", ts(6), ts(7))
    await store.clear_notifications([clear(a, ts(5)), clear(b, ts(5)), clear(key("none"), ts(5))])
    assert await pending(store) == [note(b, ts(7))]
    await store.clear_notifications([clear(b, ts(5), observer="someone-else")])
    assert await pending(store) == [note(b, ts(7))]
    await store.clear_notifications([clear(b, ts(8))])
    assert await pending(store) == []
    await store.clear_notifications([])


async def test_defer_counts_attempts_and_hides_until_retry(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a = key("a")
    await write(store, a, b"1", ts(1), ts(2))
    await store.defer_notifications([defer(a, ts(2), retry_at_ms=1000)])
    assert await pending(store, now_ms=999) == []
    assert await pending(store, now_ms=1000) == [note(a, ts(2), attempts=1)]
    await store.defer_notifications([defer(a, ts(2), retry_at_ms=2000)])
    assert await pending(store, now_ms=1500) == []
    assert await pending(store, now_ms=2000) == [note(a, ts(2), attempts=2)]
    # A deferral of an older change than the notification's is stale: ignored.
    await store.defer_notifications([defer(a, ts(1), retry_at_ms=9000, park=True)])
    assert await pending(store, now_ms=2000) == [note(a, ts(2), attempts=2)]
    summary = await store.notification_summary()
    assert summary == [NotifySummary("obs", pending=1, parked=0, oldest_ts=ts(2))]
    await store.defer_notifications([])


async def test_parking_hides_lists_and_counts(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a, b, c = key("a"), key("b"), key("c")
    await write(store, a, b"1", ts(1), ts(2))
    await write(store, b, b"1", ts(3), ts(4))
    await write(store, c, b"1", ts(5), ts(6))
    await store.defer_notifications([defer(b, ts(4), 0, park=True, error="bad b")])
    await store.defer_notifications([defer(a, ts(2), 0, park=True, error="bad a")])
    assert await pending(store) == [note(c, ts(6))]
    assert await store.parked_notifications() == [
        ParkedNotification("obs", "t", b"a", ts(2), 1, "bad a"),
        ParkedNotification("obs", "t", b"b", ts(4), 1, "bad b"),
    ]
    assert [p.row for p in await store.parked_notifications("obs", limit=1)] == [b"a"]
    assert await store.parked_notifications("nobody") == []
    assert await store.notification_summary() == [
        NotifySummary("obs", pending=1, parked=2, oldest_ts=ts(6))
    ]


async def test_a_new_write_unparks_with_fresh_attempts(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    a = key("a")
    await write(store, a, b"1", ts(1), ts(2))
    await store.defer_notifications([defer(a, ts(2), 0)])
    await store.defer_notifications([defer(a, ts(2), 0, park=True)])
    assert await pending(store) == []
    await write(store, a, b"2", ts(3), ts(4))
    assert await pending(store) == [note(a, ts(4))]
    assert await store.parked_notifications() == []


async def test_retry_parked_unparks_one_observer(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    await store.watch("other", "t", ["c"])
    keys = [key("a"), key("b"), key("c")]
    for i, k in enumerate(keys):
        await write(store, k, b"1", ts(10 * i + 1), ts(10 * i + 2))
    await store.defer_notifications([defer(k, ts(100), 0, park=True) for k in keys[:2]])
    await store.defer_notifications(
        [DeferNotification("other", keys[2].table, keys[2].row, ts(100), 0, "x", True)]
    )
    assert await store.retry_parked("obs") == 2
    assert await store.retry_parked("obs") == 0
    assert [(p.observer, p.row) for p in await store.parked_notifications()] == [("other", b"c")]
    runnable = {(n.observer, n.row): n.attempts for n in await pending(store)}
    expected = {(o, k.row): 0 for o in ("obs", "other") for k in keys}
    del expected[("other", b"c")]
    assert runnable == expected


async def test_find_respects_hash_range_limit_and_cursor(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    await store.watch("second", "t", ["c"])
    keys = [key(f"r{i:03d}") for i in range(40)]
    if store.shard_count > 1:
        assert len({store.shard_of(k.table, k.row) for k in keys}) == store.shard_count
    assert await store.prewrite(ts(1), keys[0], 3000, [put(k, b"v") for k in keys]) == []
    assert await store.commit(ts(1), ts(2), keys) == []
    everything = sorted(
        (note(k, ts(2), o) for k in keys for o in ("obs", "second")),
        key=lambda n: (n.hash, n.observer, n.table, n.row),
    )
    assert await pending(store) == everything
    assert await store.find_notifications(*ALL, now_ms=NOW_MS, limit=5) == everything[:5]
    assert await store.find_notifications(*ALL, now_ms=NOW_MS, limit=0) == []

    # A hash range: inclusive at both ends.
    lo, hi = everything[10].hash, everything[30].hash
    in_range = [n for n in everything if lo <= n.hash <= hi]
    assert await store.find_notifications(lo, hi, now_ms=NOW_MS, limit=1000) == in_range
    assert await store.find_notifications(hi, lo, now_ms=NOW_MS, limit=1000) == (
        [] if lo != hi else in_range
    )

    # Pages of 7 with the cursor after the last one, including one that splits the two
    # observers of one row, cover everything exactly once.
    pages: list[Notification] = []
    after: NotifyCursor | None = None
    while True:
        page = await store.find_notifications(*ALL, now_ms=NOW_MS, limit=7, after=after)
        if not page:
            break
        pages += page
        last = page[-1]
        after = NotifyCursor(last.hash, last.observer, last.table, last.row)
    assert pages == everything
    first = everything[0]
    split = NotifyCursor(first.hash, first.observer, first.table, first.row)
    assert (await store.find_notifications(*ALL, now_ms=NOW_MS, limit=1, after=split)) == [
        everything[1]
    ]


async def test_unwatch_of_an_observer_removes_everything_of_it(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    await store.watch("obs", "u", ["c"])
    await store.watch("keep", "t", ["c"])
    keys = [key(f"r{i}") for i in range(10)]
    assert await store.prewrite(ts(1), keys[0], 3000, [put(k, b"v") for k in keys]) == []
    assert await store.commit(ts(1), ts(2), keys) == []
    await store.defer_notifications([defer(keys[0], ts(2), 0, park=True)])
    await store.add_observer_counters(
        [ObserverCounters("obs", runs=3), ObserverCounters("keep", runs=1)]
    )
    await store.unwatch("obs")
    assert await store.list_watches() == [Watch("t", "c", "keep")]
    assert {n.observer for n in await pending(store)} == {"keep"}
    assert await store.parked_notifications() == []
    assert [s.observer for s in await store.notification_summary()] == ["keep"]
    assert [c.observer for c in await store.observer_counters()] == ["keep"]
    # Commits no longer notify it.
    await write(store, keys[0], b"w", ts(3), ts(4))
    assert {n.observer for n in await pending(store)} == {"keep"}


async def test_unwatch_of_a_table_removes_only_its_watches(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    await store.watch("obs", "u", ["c"])
    await write(store, key("a"), b"v", ts(1), ts(2))
    await store.add_observer_counters([ObserverCounters("obs", runs=1)])
    await store.unwatch("obs", "t")
    assert await store.list_watches() == [Watch("u", "c", "obs")]
    # Its notifications and counters stay.
    assert await pending(store) == [note(key("a"), ts(2))]
    assert await store.observer_counters() == [ObserverCounters("obs", runs=1)]
    await write(store, key("b"), b"v", ts(3), ts(4))
    await write(store, key("b", table="u"), b"v", ts(5), ts(6))
    assert {(n.table, n.row) for n in await pending(store)} == {("t", b"a"), ("u", b"b")}


async def test_counters_add_up_and_the_later_error_wins(store: CellStore) -> None:
    assert await store.observer_counters() == []
    await store.add_observer_counters([])
    await store.add_observer_counters(
        [
            ObserverCounters("b", runs=1, commits=1),
            ObserverCounters("a", runs=2, failures=1, last_error="first", last_error_ms=100),
            # The same observer twice in one batch.
            ObserverCounters("a", runs=1, conflicts=1, last_error="second", last_error_ms=300),
        ]
    )
    await store.add_observer_counters(
        [
            # An older error than the one kept: counts add, the error does not replace it.
            ObserverCounters("a", runs=1, failures=1, last_error="stale", last_error_ms=200),
            ObserverCounters("b", runs=5, commits=4, failures=1, last_error="b", last_error_ms=1),
        ]
    )
    assert await store.observer_counters() == [
        ObserverCounters("a", 4, 0, 1, 2, "second", 300),
        ObserverCounters("b", 6, 5, 0, 1, "b", 1),
    ]
    await store.add_observer_counters(
        [ObserverCounters("a", runs=1, failures=1, last_error="latest", last_error_ms=301)]
    )
    (a, _) = await store.observer_counters()
    assert (a.runs, a.failures, a.last_error, a.last_error_ms) == (5, 3, "latest", 301)


async def test_wait_for_notifications(store: CellStore) -> None:
    await store.watch("obs", "t", ["c"])
    started = asyncio.get_running_loop().time()
    assert not await store.wait_for_notifications(0.2)  # also subscribes (Postgres)
    assert asyncio.get_running_loop().time() - started >= 0.19
    # An unwatched commit does not wake anyone.
    await write(store, key("a", "unwatched"), b"v", ts(1), ts(2))
    assert not await store.wait_for_notifications(0.2)

    # Woken while waiting.
    waiter = asyncio.create_task(store.wait_for_notifications(10))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    started = asyncio.get_running_loop().time()
    await write(store, key("a"), b"v", ts(3), ts(4))
    assert await waiter
    assert asyncio.get_running_loop().time() - started < 5
    # A notification set while nobody waited is not lost; once taken, waiting times out again.
    await write(store, key("b"), b"v", ts(5), ts(6))
    assert await store.wait_for_notifications(10)
    assert not await store.wait_for_notifications(0.1)
