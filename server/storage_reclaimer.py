"""Frees the cells of tables that DROP TABLE, TRUNCATE and DROP INDEX left behind.

Those statements give the catalog a new state in which the old storage is named nowhere, and
record it as retired (:func:`catalog_store.retired_storages`). Its cells stay readable to
snapshots from before the DDL; this reclaimer purges them once the GC safe point has passed the
first snapshot in which it saw the storage retired
(:func:`percolator.server.txn.reclaim.purge_retired_table`), then forgets the storage.

The process that runs the coordinator runs one (``percolator coordinator``, or a ``percolator
serve`` that runs its own coordinator; see :func:`percolator.server.runtime.start_reclaimer`),
so a deployment has one. Were there two, they would do the same deletes (the second finds them
done) and forget the storage once.
"""

from __future__ import annotations

import asyncio
import logging

from percolator.server.metrics import definitions as metrics
from percolator.server.sql import catalog_store
from percolator.server.sql.catalog_store import RetiredStorage
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.reclaim import purge_retired_table
from percolator.server.txn.transaction import Transaction

log = logging.getLogger(__name__)


class StorageReclaimer:
    """Purges retired storages whose cells no snapshot can read any more."""

    def __init__(self, client: TransactionClient) -> None:
        self._client = client
        self._seen_at: dict[str, int] = {}
        """Retired storage -> read_ts of the first snapshot in which this process saw it."""

    async def run_once(self) -> list[RetiredStorage]:
        """One pass: purge what is safe to purge; the storages purged (one scan of the
        catalog's retired rows, then per storage two round trips per shard to decide)."""
        async with self._client.begin() as txn:
            retired = await catalog_store.retired_storages(txn)
            read_ts = txn.read_ts
        self._seen_at = {r.storage: self._seen_at.get(r.storage, read_ts) for r in retired}
        purged = []
        for r in retired:
            rows = await purge_retired_table(self._client, r.storage, self._seen_at[r.storage])
            if rows is None:
                continue
            await self._client.run_in_transaction(lambda txn, s=r.storage: _forget(txn, s))
            del self._seen_at[r.storage]
            log.info(
                "reclaimed %s (table %s, dropped or truncated): %d rows", r.storage, r.table, rows
            )
            purged.append(r)
            metrics.RETIRED_ROWS_PURGED.inc(rows)
        metrics.RETIRED_STORAGES_PENDING.set(len(retired) - len(purged))
        return purged

    async def run(self, interval_s: float) -> None:
        """A pass every ``interval_s`` until cancelled; a failed pass is logged and retried."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("reclaiming dropped tables failed; retrying later", exc_info=True)


async def _forget(txn: Transaction, storage: str) -> None:
    catalog_store.forget_retired(txn, storage)
