"""Timestamps shared through memory by the processes of one machine
(``percolator serve --processes N``): strictly increasing across processes, below a persisted
mark the owner keeps renewing, and refused once the owner closed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from percolator.server.txn.shared_timestamps import (
    SharedRange,
    SharedTimestampOracle,
    SharedTimestampSource,
)
from percolator.server.txn.timestamp_client import CoordinatorUnavailable
from tests.txn.test_timestamps import stored_mark


@pytest.fixture
async def dsn(fresh_dsns) -> str:
    return (await fresh_dsns(1))[0]


@pytest.fixture
def shared() -> Iterator[SharedRange]:
    created = SharedRange.create()
    yield created
    created.close(unlink=True)


async def test_source_and_owner_interleave_strictly_increasing(
    dsn: str, shared: SharedRange
) -> None:
    oracle = await SharedTimestampOracle.open_shared(dsn, shared)
    source = SharedTimestampSource(SharedRange.open(shared.path))
    try:
        handed: list[int] = []
        for i in range(500):
            if i % 3 == 0:
                first = await oracle.allocate(2)
                handed += [first, first + 1]
            else:
                handed.append(await source.get_timestamp())
        assert handed == sorted(set(handed))
        assert oracle.last == handed[-1]
        assert handed[-1] < oracle.persisted_mark <= await stored_mark(dsn)
    finally:
        await source.close()
        await oracle.close()


async def test_owner_renews_the_mark_for_other_processes(dsn: str, shared: SharedRange) -> None:
    # A short window: without the owner's timer the source would reach the mark within
    # a fraction of a second and wait for good.
    oracle = await SharedTimestampOracle.open_shared(dsn, shared, window_ms=300)
    source = SharedTimestampSource(SharedRange.open(shared.path), wait_s=2.0)
    try:
        first_mark = oracle.persisted_mark
        last = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.5
        while loop.time() < deadline:
            ts = await source.get_timestamp()
            assert ts > last
            last = ts
            await asyncio.sleep(0.01)
        assert oracle.persisted_mark > first_mark
        assert last < await stored_mark(dsn)
    finally:
        await source.close()
        await oracle.close()


async def test_a_closed_owner_refuses_its_sources(dsn: str, shared: SharedRange) -> None:
    oracle = await SharedTimestampOracle.open_shared(dsn, shared)
    source = SharedTimestampSource(SharedRange.open(shared.path))
    await source.get_timestamp()
    await oracle.close()
    with pytest.raises(CoordinatorUnavailable, match="closed"):
        await source.get_timestamp()
    await source.close()


async def test_a_restarted_owner_starts_above_everything_handed_out(
    dsn: str, shared: SharedRange
) -> None:
    oracle = await SharedTimestampOracle.open_shared(dsn, shared)
    source = SharedTimestampSource(SharedRange.open(shared.path))
    before = [await source.get_timestamp() for _ in range(10)]
    await source.close()
    await oracle.close()
    fresh = SharedRange.create()
    try:
        again = await SharedTimestampOracle.open_shared(dsn, fresh)
        try:
            assert await again.get_timestamp() > max(before)
        finally:
            await again.close()
    finally:
        fresh.close(unlink=True)


_TAKER = textwrap.dedent(
    """
    import sys
    from percolator.server.txn.shared_timestamps import SharedRange
    shared = SharedRange.open(sys.argv[1])
    taken = []
    while len(taken) < int(sys.argv[2]):
        ts = shared.take(1, 0)
        if ts is not None:
            taken.append(ts)
    print("\\n".join(map(str, taken)))
    """
)


async def test_processes_taking_at_once_get_disjoint_increasing_timestamps(
    dsn: str, shared: SharedRange
) -> None:
    oracle = await SharedTimestampOracle.open_shared(dsn, shared)
    try:
        count = 20_000
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _TAKER,
                str(shared.path),
                str(count),
                stdout=subprocess.PIPE,
            )
            for _ in range(3)
        ]
        mine = [await oracle.allocate(1) for _ in range(2_000)]
        outputs = [await p.communicate() for p in procs]
        assert all(p.returncode == 0 for p in procs)
        per_process = [[int(line) for line in out.split()] for out, _ in outputs]
        for taken in [*per_process, mine]:
            assert taken == sorted(taken) and len(set(taken)) == len(taken)
        everything = [ts for taken in per_process for ts in taken] + mine
        assert len(set(everything)) == 3 * count + len(mine)
        assert max(everything) == oracle.last
    finally:
        await oracle.close()
