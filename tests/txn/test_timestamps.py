"""The timestamp oracle: ordering, the hybrid clock, and the persisted high-water mark."""

from __future__ import annotations

import asyncio
import itertools
import random

import asyncpg
import pytest

from percolator.server.storage.cells import TS_LOGICAL_BITS, ts_from_physical_ms, ts_physical_ms
from percolator.server.txn.timestamps import (
    DEFAULT_TABLE,
    LocalTimestampSource,
    OracleError,
    TimestampOracle,
    TimestampSource,
)

T0_MS = 1_700_000_000_000


class FakeClock:
    """A wall clock the test moves by hand (it may go backwards)."""

    def __init__(self, ms: int = T0_MS) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


async def stored_mark(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(f"SELECT high_water FROM {DEFAULT_TABLE} WHERE id = 1")
    finally:
        await conn.close()


@pytest.fixture
async def dsn(fresh_dsns) -> str:
    return (await fresh_dsns(1))[0]


async def test_concurrent_allocations_are_disjoint_and_increasing(dsn: str) -> None:
    oracle = await TimestampOracle.open(dsn)
    handed_out: list[tuple[int, int]] = []  # in the order allocate returned

    async def requester(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(200):
            count = rng.randint(1, 5)
            first = await oracle.allocate(count)
            handed_out.append((first, count))
            if rng.random() < 0.3:
                await asyncio.sleep(0)

    try:
        await asyncio.gather(*(requester(i) for i in range(50)))
    finally:
        await oracle.close()
    assert len(handed_out) == 50 * 200
    # Returned in allocation order, each range starts above the end of the one before.
    for (prev_first, prev_count), (first, _) in itertools.pairwise(handed_out):
        assert first >= prev_first + prev_count


async def test_physical_part_follows_clock_and_never_goes_back(dsn: str) -> None:
    clock = FakeClock()
    oracle = await TimestampOracle.open(dsn, clock_ms=clock)
    try:
        a = await oracle.allocate(1)
        assert ts_physical_ms(a) == T0_MS
        clock.ms += 5
        b = await oracle.allocate(1)
        assert b == ts_from_physical_ms(T0_MS + 5)  # logical part restarts at 0
        clock.ms -= 1000  # the wall clock jumps back
        c = await oracle.allocate(1)
        assert c == b + 1
    finally:
        await oracle.close()


async def test_logical_overflow_moves_to_next_millisecond(dsn: str) -> None:
    clock = FakeClock()
    oracle = await TimestampOracle.open(dsn, clock_ms=clock)
    per_ms = 1 << TS_LOGICAL_BITS
    try:
        first = await oracle.allocate(per_ms - 1)
        assert first == ts_from_physical_ms(T0_MS)
        last_of_ms = await oracle.allocate(1)
        assert ts_physical_ms(last_of_ms) == T0_MS
        assert last_of_ms & (per_ms - 1) == per_ms - 1
        nxt = await oracle.allocate(1)  # the clock has not moved
        assert nxt == ts_from_physical_ms(T0_MS + 1)
    finally:
        await oracle.close()


async def test_never_hands_out_at_or_above_the_persisted_mark(dsn: str) -> None:
    clock = FakeClock()
    oracle = await TimestampOracle.open(dsn, clock_ms=clock, window_ms=3000)
    per_ms = 1 << TS_LOGICAL_BITS
    try:
        for count in [1, 7, per_ms * 100, 1, per_ms * 5000, 3, per_ms * 2500, 1]:
            first = await oracle.allocate(count)
            last = first + count - 1
            mark = await stored_mark(dsn)
            assert last < mark
            assert oracle.persisted_mark == mark
            clock.ms += 700
    finally:
        await oracle.close()


async def test_restart_starts_above_the_persisted_mark(dsn: str) -> None:
    clock = FakeClock()
    oracle = await TimestampOracle.open(dsn, clock_ms=clock)
    highest = 0
    for _ in range(100):
        highest = await oracle.allocate(3) + 2
    mark = await stored_mark(dsn)
    await oracle.close()
    # Restart with a clock an hour behind: only the mark can keep us above what was handed out.
    clock.ms -= 3_600_000
    restarted = await TimestampOracle.open(dsn, clock_ms=clock)
    try:
        first = await restarted.allocate(1)
        assert first > mark > highest
    finally:
        await restarted.close()


async def test_mark_is_renewed_ahead_of_time_off_the_hot_path(dsn: str) -> None:
    clock = FakeClock()
    oracle = await TimestampOracle.open(dsn, clock_ms=clock, window_ms=3000)
    try:
        await oracle.allocate(1)
        assert oracle.persist_count == 1
        first_mark = oracle.persisted_mark
        assert first_mark == ts_from_physical_ms(T0_MS + 3000) + 1
        # Thousands of requests within the window write nothing.
        for _ in range(5000):
            assert oracle.try_allocate(1) is not None
        assert oracle.persist_count == 1
        # Less than a third of the window left: the fast path still answers and renews behind.
        clock.ms += 2100
        assert oracle.try_allocate(1) is not None
        for _ in range(100):
            if oracle.persist_count == 2:
                break
            await asyncio.sleep(0.01)
        assert oracle.persist_count == 2
        assert oracle.persisted_mark > first_mark
        clock.ms += 1500  # past the first mark: served without waiting thanks to the renewal
        assert oracle.try_allocate(1) is not None
    finally:
        await oracle.close()


async def test_many_allocations_write_the_mark_rarely(dsn: str) -> None:
    oracle = await TimestampOracle.open(dsn)
    try:
        for _ in range(20_000):
            await oracle.allocate(1)
        assert oracle.persist_count <= 3
    finally:
        await oracle.close()


async def test_second_oracle_on_the_same_store_is_refused(dsn: str) -> None:
    oracle = await TimestampOracle.open(dsn)
    try:
        with pytest.raises(OracleError, match="another timestamp oracle"):
            await TimestampOracle.open(dsn, lock_wait_s=0.3)
    finally:
        await oracle.close()
    # Released on close: a successor may start.
    successor = await TimestampOracle.open(dsn, lock_wait_s=0.3)
    await successor.close()


async def test_unreachable_store_is_a_clear_error() -> None:
    with pytest.raises(OracleError, match="cannot reach"):
        await TimestampOracle.open("postgresql://nobody@127.0.0.1:1/none")


async def test_local_source(dsn: str) -> None:
    oracle = await TimestampOracle.open(dsn)
    try:
        source = LocalTimestampSource(oracle)
        assert isinstance(source, TimestampSource)
        values = [await source.get_timestamp() for _ in range(100)]
        assert values == sorted(set(values))
    finally:
        await oracle.close()
