"""Reclaiming the cells of a store table that nothing reads or writes any more.

DROP TABLE and TRUNCATE retire a table's storage in the catalog; the cells stay, because
transactions that started before the DDL committed still read them. Once the GC safe point has
passed a timestamp at which the DDL was already visible, no running transaction started before
it (every running one started above the safe point), so no snapshot can read the old storage
and no transaction of the old catalog can still commit there. Before purging, a lock below that
timestamp anywhere means a transaction from before may still be unresolved, with its primary
perhaps in the retired table: GC resolves it first (a committed primary's record must not
vanish under secondaries still to be rolled forward).
"""

from __future__ import annotations

from percolator.server.txn.client import TransactionClient


async def purge_retired_table(client: TransactionClient, table: str, visible_at: int) -> int | None:
    """Remove every cell of ``table``, retired by DDL that a snapshot at ``visible_at``
    already saw, if that is safe now; how many rows went, or None when not yet safe.

    Two round trips per shard to decide (the safe point, old locks), then the purge's."""
    store = client.store
    if await store.set_gc_safe_point(0) <= visible_at:  # 0 never lowers it: a read
        return None
    if await store.scan_locks(visible_at + 1, limit=1):
        return None
    return await store.purge_table(table)
