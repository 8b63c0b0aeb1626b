"""Python observers used by the tests (imported by the server and by worker processes)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from percolator.server.observer_api import ChangedRow, ObserverTransaction


async def record(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Log each committed run: (id, value seen, run's start_ts)."""
    value = None if row.values is None else row.values["v"]
    await txn.execute(
        "INSERT INTO runs (id, seen, run_ts) VALUES ($1, $2, $3)",
        row.key["id"],
        value,
        txn.start_ts,
    )


async def fragile(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Fails for the value 'poison'; copies every other value to ``copies``."""
    if row.values is not None and row.values["v"] == "poison":
        raise ValueError(f"cannot digest row {row.key['id']}")
    await copy_value(txn, row)


async def copy_value(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Mirror ``v`` of the row into ``copies`` (deleting the copy with the row)."""
    if row.deleted:
        await txn.execute("DELETE FROM copies WHERE id = $1", row.key["id"])
        return
    await txn.execute(
        "INSERT INTO copies VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        row.key["id"],
        row.values["v"],  # type: ignore[index]
    )


async def slow_record(txn: ObserverTransaction, row: ChangedRow) -> None:
    """Touch the file $OBSERVER_MARK (the run has begun), wait, then log the run."""
    mark = os.environ.get("OBSERVER_MARK")
    if mark:
        await asyncio.to_thread(Path(mark).write_text, str(txn.start_ts))
    await asyncio.sleep(float(os.environ.get("OBSERVER_SLEEP", "0")))
    await record(txn, row)


def not_async(txn: ObserverTransaction, row: ChangedRow) -> None:
    """A plain function: refused by CREATE OBSERVER."""
