"""The observers runtime on its own (no SQL): acks, racing workers, collapsing, failures,
WEAK, pause, and the hash split among workers — on the in-memory store and on 2 Postgres
shards."""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field

from percolator.server.storage.cells import CellKey, Notification
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.membership import HASH_MAX, HASH_MIN, GroupRegistry
from percolator.server.txn.observers.slices import GroupSlices
from percolator.server.txn.observers.worker import ObserverWorker, RunOutcome, WorkerConfig
from percolator.server.txn.transaction import Transaction

DATA = "data"
LOG = "log"
FAST = WorkerConfig(
    poll_interval_s=0.05, retry_base_s=0.02, retry_max_s=0.1, max_failures=3, counters_flush_s=0.1
)


@dataclass
class Program:
    """A test observer: logs each run into the LOG table in its own transaction."""

    key: str = "obs-1"
    name: str = "obs"
    weak: bool = False
    paused: bool = False
    delay_s: float = 0.0
    fail_on: set[bytes] = field(default_factory=set)
    attempts: int = 0

    def row_cells(self, table: str, row: bytes) -> list[CellKey]:
        return [CellKey(table, row, "v")]

    async def run(self, txn: Transaction, table: str, row: bytes) -> None:
        self.attempts += 1
        value = await txn.get(table, row, "v")
        if self.delay_s:
            await asyncio.sleep(self.delay_s * random.random())
        if row in self.fail_on:
            raise RuntimeError(f"bad row {row!r}")
        txn.set(LOG, row + b"@" + str(txn.start_ts).encode(), "seen", value or b"<none>")


class Source:
    def __init__(self, *programs: Program) -> None:
        self.programs = {p.key: p for p in programs}

    def program(self, key: str) -> Program | None:
        return self.programs.get(key)

    async def orphans(self, keys: set[str]) -> set[str]:
        return {k for k in keys if k.startswith("gone")}


async def write(client: TransactionClient, rows: list[bytes], value: bytes) -> int:
    async with client.begin() as txn:
        for r in rows:
            txn.set(DATA, r, "v", value)
    assert txn.commit_ts is not None
    return txn.commit_ts


async def log_entries(client: TransactionClient) -> list[tuple[bytes, bytes]]:
    async with client.begin() as txn:
        return [(key.split(b"@")[0], cols["seen"]) async for key, cols in txn.scan(LOG)]


async def notifications(store: CellStore) -> list[Notification]:
    """Every notification in the store, retry delays ignored."""
    return await store.find_notifications(HASH_MIN, HASH_MAX, now_ms=2**62, limit=10)


async def wait_idle(store: CellStore, limit_s: float = 20.0) -> None:
    async def pending() -> int:
        return sum(s.pending for s in await store.notification_summary())

    deadline = asyncio.get_running_loop().time() + limit_s
    while await pending():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("notifications still pending")
        await asyncio.sleep(0.05)


async def test_each_change_commits_exactly_one_run_with_racing_workers(
    client: TransactionClient, store: CellStore
) -> None:
    program = Program(delay_s=0.02)
    await store.watch(program.key, DATA, ["v"])
    # Every worker scans the whole space, so all of them race for every notification.
    workers = [ObserverWorker(client, Source(program), config=FAST, name=f"w{i}") for i in range(4)]
    for w in workers:
        await w.start()
    rows = [b"r%03d" % i for i in range(40)]
    try:
        await write(client, rows, b"one")
        await wait_idle(store)
        await write(client, rows[:10], b"two")
        await wait_idle(store)
    finally:
        for w in workers:
            await w.stop()
    entries = await log_entries(client)
    per_row: dict[bytes, list[bytes]] = {}
    for row, seen in entries:
        per_row.setdefault(row, []).append(seen)
    assert sorted(per_row) == rows
    for r in rows:
        assert sorted(per_row[r]) == (sorted([b"one", b"two"]) if r in rows[:10] else [b"one"])
    totals = {c.observer: c for c in await store.observer_counters()}
    assert totals[program.key].commits == 50
    assert totals[program.key].runs >= 50


async def test_quick_changes_collapse_into_one_run(
    client: TransactionClient, store: CellStore
) -> None:
    program = Program()
    await store.watch(program.key, DATA, ["v"])
    for value in (b"a", b"b", b"c"):
        await write(client, [b"x"], value)
    worker = ObserverWorker(client, Source(program), config=FAST)
    assert await worker.sweep() == 1
    await worker.stop()
    assert await log_entries(client) == [(b"x", b"c")]
    assert await store.notification_summary() == []


async def test_a_run_already_acked_is_not_repeated(
    client: TransactionClient, store: CellStore
) -> None:
    program = Program()
    await store.watch(program.key, DATA, ["v"])
    await write(client, [b"x"], b"a")
    worker = ObserverWorker(client, Source(program), config=FAST)
    (n,) = await notifications(store)
    assert await worker.process(program, n) == RunOutcome.COMMITTED
    # The same notification again (a second worker holding a stale copy): the ack stops it.
    assert await worker.process(program, n) == RunOutcome.ALREADY_ACKED
    assert program.attempts == 1
    assert len(await log_entries(client)) == 1


async def test_a_write_during_a_run_keeps_the_notification(
    client: TransactionClient, store: CellStore
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    class Slow(Program):
        async def run(self, txn: Transaction, table: str, row: bytes) -> None:
            started.set()
            await release.wait()
            await super().run(txn, table, row)

    program = Slow()
    await store.watch(program.key, DATA, ["v"])
    await write(client, [b"x"], b"first")
    worker = ObserverWorker(client, Source(program), config=FAST)
    (n,) = await notifications(store)
    run = asyncio.create_task(worker.process(program, n))
    await started.wait()
    await write(client, [b"x"], b"second")  # commits after the run's snapshot
    release.set()
    assert await run == RunOutcome.COMMITTED
    (again,) = await notifications(store)
    assert again.ts > n.ts
    assert await worker.process(program, again) == RunOutcome.COMMITTED
    assert sorted(seen for _, seen in await log_entries(client)) == [b"first", b"second"]


async def test_failures_back_off_then_park_and_do_not_stall_others(
    client: TransactionClient, store: CellStore
) -> None:
    program = Program(fail_on={b"bad"})
    await store.watch(program.key, DATA, ["v"])
    await write(client, [b"bad", b"good1", b"good2"], b"v")
    worker = ObserverWorker(client, Source(program), config=FAST)
    await worker.start()
    try:

        async def parked() -> list:
            return await store.parked_notifications(program.key)

        for _ in range(200):
            if await parked():
                break
            await asyncio.sleep(0.05)
        (p,) = await parked()
        assert p.row == b"bad" and p.attempts == FAST.max_failures
        assert "bad row" in (p.last_error or "")
        assert sorted(r for r, _ in await log_entries(client)) == [b"good1", b"good2"]
        # Replay: the program is fixed, the parked change runs.
        program.fail_on.clear()
        assert await store.retry_parked(program.key) == 1
        worker.wake()
        await wait_idle(store)
    finally:
        await worker.stop()
    assert sorted(r for r, _ in await log_entries(client)) == [b"bad", b"good1", b"good2"]
    (totals,) = await store.observer_counters()
    assert totals.failures == FAST.max_failures and totals.commits == 3


async def test_weak_observer_writes_no_ack(client: TransactionClient, store: CellStore) -> None:
    program = Program(weak=True)
    await store.watch(program.key, DATA, ["v"])
    await write(client, [b"x"], b"a")
    worker = ObserverWorker(client, Source(program), config=FAST)
    (n,) = await notifications(store)
    assert await worker.process(program, n) == RunOutcome.COMMITTED
    # No ack: processing the same (stale) notification again runs again (at-least-once).
    assert await worker.process(program, n) == RunOutcome.COMMITTED
    assert len(await log_entries(client)) == 2
    async with client.begin() as txn:
        assert [r async for r in txn.scan(f"__ack/{program.key}")] == []


async def test_paused_and_unknown_observers_leave_notifications_pending(
    client: TransactionClient, store: CellStore
) -> None:
    paused = Program(key="p", paused=True)
    await store.watch("p", DATA, ["v"])
    await store.watch("unknown", DATA, ["v"])
    await write(client, [b"x"], b"a")
    worker = ObserverWorker(client, Source(paused), config=FAST)
    assert await worker.sweep() == 0
    summary = {s.observer: s.pending for s in await store.notification_summary()}
    assert summary == {"p": 1, "unknown": 1}


async def test_group_slices_split_the_work_without_overlap(
    client: TransactionClient, store: CellStore
) -> None:
    program = Program()
    await store.watch(program.key, DATA, ["v"])
    registry = GroupRegistry()

    class Target:
        async def join_group(self, group: str, member: str, lease_ms: int, info: str = ""):
            return registry.join(group, member, lease_ms, info)

    memberships = [GroupSlices(Target(), f"m{i}") for i in range(3)]
    workers = [ObserverWorker(client, Source(program), slices=m, config=FAST) for m in memberships]
    for w in workers:
        await w.start()
    for m in memberships:
        await m.renew()  # once more: everyone sees all three members
    slices = sorted(m.slice() for m in memberships)  # type: ignore[type-var]
    assert slices[0][0] == -(2**63) and slices[-1][1] == 2**63 - 1
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(slices))
    rows = [b"k%02d" % i for i in range(30)]
    await write(client, rows, b"v")
    await wait_idle(store)
    for w in workers:
        await w.stop()
    assert sorted(r for r, _ in await log_entries(client)) == rows
    assert registry.members("workers") == []


async def test_orphaned_observers_lose_their_watches_and_notifications(
    client: TransactionClient, store: CellStore
) -> None:
    await store.watch("gone-1", DATA, ["v"])
    await store.watch("pending-create", DATA, ["v"])
    await write(client, [b"x"], b"a")
    worker = ObserverWorker(client, Source(), config=FAST)
    assert await worker.sweep() == 0
    assert await worker.reap_orphans() == {"gone-1"}
    assert [w.observer for w in await store.list_watches()] == ["pending-create"]
    assert [s.observer for s in await store.notification_summary()] == ["pending-create"]
