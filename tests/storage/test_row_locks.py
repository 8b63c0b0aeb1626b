"""Pessimistic row locks (storage/row_locks.py) on every store: waits, NOWAIT, SKIP LOCKED,
timeouts, deadlocks, and the rows' state read after the lock."""

from __future__ import annotations

import asyncio

import pytest

from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.storage.row_locks import (
    HOLDS,
    LockWait,
    RowLockDeadlock,
    RowLockMode,
    RowLocks,
    RowLockUnavailable,
)
from percolator.server.storage.store import CellStore

UPDATE = HOLDS[RowLockMode.UPDATE]
SHARE = HOLDS[RowLockMode.SHARE]
A = CellKey("t", b"a", "_")
B = CellKey("t", b"b", "_")


async def test_a_second_locker_waits_until_release(store: CellStore) -> None:
    first, second = store.row_locks(), store.row_locks()
    assert [s.taken for s in await first.lock([A], LockWait.WAIT, 5, UPDATE)] == [True]
    waiting = asyncio.create_task(second.lock([A], LockWait.WAIT, 5, UPDATE))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await first.release()
    (state,) = await asyncio.wait_for(waiting, 5)
    assert state.taken
    await second.release()


async def test_nowait_skip_locked_and_timeout(store: CellStore) -> None:
    first, second = store.row_locks(), store.row_locks()
    await first.lock([A], LockWait.WAIT, 5, UPDATE)
    with pytest.raises(RowLockUnavailable):
        await second.lock([A], LockWait.NOWAIT, 5, UPDATE)
    states = await second.lock([A, B], LockWait.SKIP_LOCKED, 5, UPDATE)
    assert [s.taken for s in states] == [False, True]
    with pytest.raises(RowLockUnavailable, match="lock timeout"):
        await second.lock([A], LockWait.WAIT, 0.2, UPDATE)
    # The same holder takes its own lock again at once.
    assert [s.taken for s in await first.lock([A], LockWait.NOWAIT, 5, UPDATE)] == [True]
    await first.release()
    await second.release()


async def test_shared_locks_wait_only_for_exclusive_ones(store: CellStore) -> None:
    first, second, writer = store.row_locks(), store.row_locks(), store.row_locks()
    assert [s.taken for s in await first.lock([A], LockWait.WAIT, 5, SHARE)] == [True]
    assert [s.taken for s in await second.lock([A], LockWait.NOWAIT, 5, SHARE)] == [True]
    with pytest.raises(RowLockUnavailable):
        await writer.lock([A], LockWait.NOWAIT, 5, UPDATE)
    assert [s.taken for s in await writer.lock([A], LockWait.SKIP_LOCKED, 5, UPDATE)] == [False]
    waiting = asyncio.create_task(writer.lock([A], LockWait.WAIT, 5, UPDATE))
    await first.release()
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the other sharer still holds it
    await second.release()
    (state,) = await asyncio.wait_for(waiting, 5)
    assert state.taken
    # Now held exclusively: a sharer waits in its turn.
    with pytest.raises(RowLockUnavailable):
        await first.lock([A], LockWait.NOWAIT, 5, SHARE)
    await writer.release()


async def test_two_sharers_that_both_upgrade_deadlock(store: CellStore) -> None:
    """As in Postgres: two FOR SHARE holders that both go on to update the row wait for each
    other; one is told so (40P01) and the other gets the row once it lets go."""
    first, second = store.row_locks(), store.row_locks()
    await first.lock([A], LockWait.WAIT, 10, SHARE)
    await second.lock([A], LockWait.WAIT, 10, SHARE)
    # A sharer alone upgrades at once: its own shared lock does not stand in its way.
    loner = store.row_locks()
    await loner.lock([B], LockWait.WAIT, 10, SHARE)
    assert [s.taken for s in await loner.lock([B], LockWait.NOWAIT, 10, UPDATE)] == [True]
    await loner.release()

    async def upgrade(holder: RowLocks) -> str:
        try:
            await holder.lock([A], LockWait.WAIT, 10, UPDATE)
        except RowLockDeadlock:
            await holder.release()
            return "deadlock"
        return "locked"

    outcomes = await asyncio.wait_for(asyncio.gather(upgrade(first), upgrade(second)), 15)
    assert sorted(outcomes) == ["deadlock", "locked"]
    await first.release()
    await second.release()


async def test_unlock_gives_up_single_holds(store: CellStore) -> None:
    """ROLLBACK TO SAVEPOINT's unlock: a row taken since is free again; a shared row upgraded
    since goes back to shared; other rows stay held."""
    holder, other = store.row_locks(), store.row_locks()
    await holder.lock([A], LockWait.WAIT, 5, UPDATE)
    await holder.lock([B], LockWait.WAIT, 5, SHARE)
    await holder.lock([B], LockWait.WAIT, 5, UPDATE)
    await holder.unlock([(A, UPDATE), (B, UPDATE)])
    assert [s.taken for s in await other.lock([A], LockWait.NOWAIT, 5, UPDATE)] == [True]
    assert [s.taken for s in await other.lock([B], LockWait.NOWAIT, 5, SHARE)] == [True]
    with pytest.raises(RowLockUnavailable):
        await other.lock([B], LockWait.NOWAIT, 5, UPDATE)
    await other.release()
    with pytest.raises(RowLockUnavailable):
        await other.lock([B], LockWait.NOWAIT, 5, UPDATE)  # still shared by the holder
    await holder.release()
    assert [s.taken for s in await other.lock([B], LockWait.NOWAIT, 5, UPDATE)] == [True]
    await other.release()


async def test_unlock_gives_up_a_row_taken_twice(store: CellStore) -> None:
    """A row asked for again by its holder (after settling a Percolator lock on it) is held
    twice in Postgres; one unlock of the mode frees it."""
    holder, other = store.row_locks(), store.row_locks()
    await holder.lock([A], LockWait.WAIT, 5, UPDATE)
    await holder.lock([A], LockWait.WAIT, 5, UPDATE)
    await holder.unlock([(A, UPDATE)])
    assert [s.taken for s in await other.lock([A], LockWait.NOWAIT, 5, UPDATE)] == [True]
    await other.release()
    await holder.release()


async def test_a_cycle_of_waits_is_a_deadlock(store: CellStore) -> None:
    if store.shard_of(A.table, A.row) != store.shard_of(B.table, B.row):
        pytest.skip("a cycle across shards ends by lock timeout (documented)")
    first, second = store.row_locks(), store.row_locks()
    await first.lock([A], LockWait.WAIT, 10, UPDATE)
    await second.lock([B], LockWait.WAIT, 10, UPDATE)

    async def take(holder: RowLocks, key: CellKey) -> str:
        try:
            await holder.lock([key], LockWait.WAIT, 10, UPDATE)
        except RowLockDeadlock:
            await holder.release()  # as the victim's transaction ends
            return "deadlock"
        return "taken"

    one = asyncio.create_task(take(first, B))
    await asyncio.sleep(0.2)
    two = asyncio.create_task(take(second, A))
    outcomes = await asyncio.wait_for(asyncio.gather(one, two), 8)
    assert sorted(outcomes) == ["deadlock", "taken"]
    await first.release()
    await second.release()


async def test_the_state_tells_the_newest_commit_and_a_lock(store: CellStore) -> None:
    holder = store.row_locks()
    (fresh,) = await holder.lock([A], LockWait.WAIT, 5, UPDATE)
    assert (fresh.newest_commit_ts, fresh.lock_start_ts) == (None, None)
    assert not await store.prewrite(100, A, 3000, [Mutation(A, WriteKind.PUT, b"x")])
    assert not await store.commit(100, 110, [A])
    assert not await store.prewrite(120, B, 3000, [Mutation(B, WriteKind.PUT, b"y")])
    a, b = await holder.lock([A, B], LockWait.WAIT, 5, UPDATE)
    assert (a.newest_commit_ts, a.lock_start_ts) == (110, None)
    assert (b.newest_commit_ts, b.lock_start_ts) == (None, 120)
    # A rolled-back transaction's marker is no change of the row.
    await store.rollback(120, [B], leave_marker=True)
    (b,) = await holder.lock([B], LockWait.WAIT, 5, UPDATE)
    assert (b.newest_commit_ts, b.lock_start_ts) == (None, None)
    await holder.release()


async def test_beyond_its_connections_a_shard_locks_nothing(store: CellStore) -> None:
    """With every lock connection of a shard in use, a transaction goes without row locks
    there (as under optimistic locking) instead of waiting or failing."""
    from percolator.server.storage.postgres_store import PostgresCellStore

    if not isinstance(store, PostgresCellStore):
        pytest.skip("the memory store needs no connections")
    for shard in store._lock_conns:
        shard.limit = 1
    first, second = store.row_locks(), store.row_locks()
    keys = [CellKey("t", bytes([i]), "_") for i in range(8)]
    assert all(s.taken for s in await first.lock(keys, LockWait.WAIT, 5, UPDATE))
    # Every shard's one connection is first's: second's rows go unlocked, at once.
    states = await asyncio.wait_for(second.lock(keys, LockWait.NOWAIT, 5, UPDATE), 2)
    assert all(s.taken and s.newest_commit_ts is None for s in states)
    await first.release()
    await second.release()
    # Released, and room for two: transactions get connections and real locks again.
    for shard in store._lock_conns:
        shard.limit = 2
    third = store.row_locks()
    await third.lock(keys[:1], LockWait.WAIT, 5, UPDATE)
    with pytest.raises(RowLockUnavailable):
        await first.lock(keys[:1], LockWait.NOWAIT, 5, UPDATE)
    await third.release()
    await first.release()


@pytest.mark.parametrize(
    ("held", "asked", "waits"),
    [
        (RowLockMode.KEY_SHARE, RowLockMode.KEY_SHARE, False),
        (RowLockMode.KEY_SHARE, RowLockMode.SHARE, False),
        (RowLockMode.KEY_SHARE, RowLockMode.NO_KEY_UPDATE, False),
        (RowLockMode.KEY_SHARE, RowLockMode.UPDATE, True),
        (RowLockMode.SHARE, RowLockMode.SHARE, False),
        (RowLockMode.SHARE, RowLockMode.NO_KEY_UPDATE, True),
        (RowLockMode.SHARE, RowLockMode.UPDATE, True),
        (RowLockMode.NO_KEY_UPDATE, RowLockMode.KEY_SHARE, False),
        (RowLockMode.NO_KEY_UPDATE, RowLockMode.SHARE, True),
        (RowLockMode.NO_KEY_UPDATE, RowLockMode.NO_KEY_UPDATE, True),
        (RowLockMode.NO_KEY_UPDATE, RowLockMode.UPDATE, True),
        (RowLockMode.UPDATE, RowLockMode.KEY_SHARE, True),
    ],
)
async def test_the_four_strengths_conflict_as_in_postgres(
    store: CellStore, held: RowLockMode, asked: RowLockMode, waits: bool
) -> None:
    """Postgres's table of conflicting row-lock modes (explicit-locking.html, table 13.3)."""
    holder, other, third = store.row_locks(), store.row_locks(), store.row_locks()
    await holder.lock([A], LockWait.WAIT, 5, HOLDS[held])
    if waits:
        with pytest.raises(RowLockUnavailable):
            await other.lock([A], LockWait.NOWAIT, 5, HOLDS[asked])
        assert [s.taken for s in await other.lock([A], LockWait.SKIP_LOCKED, 5, HOLDS[asked])] == [
            False
        ]
        # Nothing of the row stays with the one that passed it by (not even the part of a
        # two-part strength it got before meeting the holder's): once the holder lets go,
        # a third takes the row whole while that one is still open.
        await holder.release()
        assert [s.taken for s in await third.lock([A], LockWait.NOWAIT, 5, UPDATE)] == [True]
    else:
        assert [s.taken for s in await other.lock([A], LockWait.NOWAIT, 5, HOLDS[asked])] == [True]
        await holder.release()
    for locks in (other, third):
        await locks.release()


async def test_a_key_share_holder_waits_only_for_a_key_update(store: CellStore) -> None:
    """A foreign key's check (KEY SHARE) and an UPDATE of the row's other columns (NO KEY
    UPDATE) pass each other; the holder of both upgrades to UPDATE once the other ends."""
    child, parent = store.row_locks(), store.row_locks()
    await child.lock([A], LockWait.WAIT, 5, HOLDS[RowLockMode.KEY_SHARE])
    await parent.lock([A], LockWait.NOWAIT, 5, HOLDS[RowLockMode.NO_KEY_UPDATE])
    deleting = asyncio.create_task(parent.lock([A], LockWait.WAIT, 5, UPDATE))
    await asyncio.sleep(0.3)
    assert not deleting.done()
    await child.release()
    (state,) = await asyncio.wait_for(deleting, 5)
    assert state.taken and state.waited
    await parent.release()


def test_a_holder_of_a_strength_has_every_weaker_one() -> None:
    """As in Postgres, a transaction holding a strength needs no weaker one on the row (a
    foreign key's KEY SHARE check of a row it updated takes no lock), though the parts of
    NO KEY UPDATE (the rest of the row) do not include KEY SHARE's (the key)."""
    from percolator.server.storage.row_locks import covers

    order = list(RowLockMode)
    for i, held in enumerate(order):
        for j, asked in enumerate(order):
            assert covers(HOLDS[held], HOLDS[asked]) == (j <= i), (held, asked)
    assert not covers(0, HOLDS[RowLockMode.KEY_SHARE])
    # FOR SHARE then FOR NO KEY UPDATE: not UPDATE, which a KEY SHARE asker must wait for.
    both = HOLDS[RowLockMode.SHARE] | HOLDS[RowLockMode.NO_KEY_UPDATE]
    assert covers(both, HOLDS[RowLockMode.NO_KEY_UPDATE])
    assert not covers(both, UPDATE)
