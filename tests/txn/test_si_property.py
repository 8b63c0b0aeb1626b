"""Property: any interleaving of transactions yields a history that snapshot isolation allows.

Hypothesis draws a few transactions over a small key space and a schedule that interleaves their
reads, writes and commits (some commits race each other). The real transaction layer runs it;
the checker then replays the history against a model of snapshot isolation using the real
start_ts and commit_ts:

- a committed or running transaction read, for each key, its own last write or else the value of
  the committed transaction with the largest commit_ts below its start_ts;
- no two committed transactions that overlap in time wrote the same key (first committer wins);
- every transaction that aborted with a write conflict had a concurrent writer of one of its keys;
- the final state equals the last committed write of each key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from percolator.server.storage.memory_store import MemoryCellStore
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.errors import Retryable
from percolator.server.txn.transaction import Transaction

from .conftest import FAST_CONFIG, WallClock

KEYS = [b"k0", b"k1", b"k2"]


@dataclass
class TxnRecord:
    start_ts: int = 0
    commit_ts: int | None = None
    aborted: bool = False
    reads: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    writes: dict[bytes, bytes] = field(default_factory=dict)
    read_own: list[bool] = field(default_factory=list)


# One step: (txn index, op) with op = ("r", key) | ("w", key) | ("c",) | ("cc", other txn).
step = st.tuples(
    st.integers(0, 3),
    st.one_of(
        st.tuples(st.just("r"), st.sampled_from(KEYS)),
        st.tuples(st.just("w"), st.sampled_from(KEYS)),
        st.tuples(st.just("c")),
        st.tuples(st.just("cc"), st.integers(0, 3)),
    ),
)
history = st.lists(step, min_size=4, max_size=24)


async def run_history(store: CellStore, steps: list[tuple[int, tuple]]) -> list[TxnRecord]:
    client = TransactionClient(store, WallClock(), FAST_CONFIG)
    txns: dict[int, Transaction] = {}
    records: list[TxnRecord] = []
    current: dict[int, TxnRecord] = {}
    counter = 0

    async def ensure(i: int) -> tuple[Transaction, TxnRecord] | None:
        if i not in txns:
            txns[i] = await client.begin()
            current[i] = TxnRecord(start_ts=txns[i].start_ts)
            records.append(current[i])
        return txns[i], current[i]

    async def commit(i: int) -> None:
        txn, rec = txns.pop(i), current.pop(i)
        try:
            rec.commit_ts = await txn.commit()
        except Retryable:
            rec.aborted = True

    for i, op in steps:
        txn, rec = await ensure(i)  # type: ignore[misc]
        if op[0] == "r":
            rec.read_own.append(op[1] in rec.writes)
            rec.reads.append((op[1], await txn.get("t", op[1], "c")))
        elif op[0] == "w":
            counter += 1
            value = f"{rec.start_ts}:{counter}".encode()
            txn.set("t", op[1], "c", value)
            rec.writes[op[1]] = value
        elif op[0] == "c":
            await commit(i)
        else:
            other = op[1]
            if other != i and other in txns:
                await asyncio.gather(commit(i), commit(other))
            else:
                await commit(i)
    for i in list(txns):
        await commit(i)
    await client.secondaries.drain()
    final = await client.begin()
    final_state = {key: await final.get("t", key, "c") for key in KEYS}
    await final.rollback()
    await client.close()
    records.append(
        TxnRecord(
            start_ts=final.start_ts, reads=list(final_state.items()), read_own=[False] * len(KEYS)
        )
    )
    return records


def check_snapshot_isolation(records: list[TxnRecord]) -> None:
    committed = sorted(
        (r for r in records if r.commit_ts is not None and r.writes), key=lambda r: r.commit_ts or 0
    )
    for rec in records:
        for (key, seen), read_own in zip(rec.reads, rec.read_own, strict=True):
            if read_own:
                continue  # reading your own write: checked by the protocol tests
            expected = None
            for other in committed:
                if (
                    other.commit_ts is not None
                    and other.commit_ts < rec.start_ts
                    and key in other.writes
                ):
                    expected = other.writes[key]
            assert seen == expected, (
                f"txn {rec.start_ts} read {key!r}={seen!r}, snapshot has {expected!r}"
            )
    for a in committed:
        for b in committed:
            if a is b or not (a.start_ts < b.start_ts < (a.commit_ts or 0)):
                continue
            overlap = set(a.writes) & set(b.writes)
            assert not overlap, (
                f"concurrent txns {a.start_ts} and {b.start_ts} both wrote {overlap}"
            )
    for rec in records:
        if rec.aborted:
            rivals = [
                o
                for o in records
                if o is not rec
                and set(o.writes) & set(rec.writes)
                and o.start_ts < (rec.commit_ts or 2**63)
            ]
            assert rivals, f"txn {rec.start_ts} aborted without any rival writer"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history)
def test_histories_on_memory_store_are_snapshot_isolated(steps: list[tuple[int, tuple]]) -> None:
    records = asyncio.run(run_history(MemoryCellStore(shards=2), steps))
    check_snapshot_isolation(records)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=history)
def test_histories_on_postgres_are_snapshot_isolated(
    steps: list[tuple[int, tuple]], embedded_pg: object
) -> None:
    from tests.conftest import create_database

    async def go() -> list[TxnRecord]:
        from percolator.server.storage.postgres_store import PostgresCellStore

        dsns = [await create_database(embedded_pg.dsn) for _ in range(2)]  # type: ignore[attr-defined]
        store = await PostgresCellStore.connect(dsns)
        try:
            return await run_history(store, steps)
        finally:
            await store.close()

    check_snapshot_isolation(asyncio.run(go()))
