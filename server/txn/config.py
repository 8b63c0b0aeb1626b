"""Tunables and limits of the transaction layer."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class TxnConfig:
    """Settings of a :class:`~percolator.server.txn.client.TransactionClient`."""

    lock_wait_timeout_s: float = 10.0
    """How long a read waits for a live transaction's lock before LockWaitTimeout."""
    base_lock_ttl_ms: int = 3000
    """TTL of a small transaction's locks; larger ones get more (see :meth:`lock_ttl_ms`)."""
    max_lock_ttl_ms: int = 120_000
    max_cells_per_txn: int = 1_000_000
    max_bytes_per_txn: int = 512 * 1024 * 1024
    secondary_queue_size: int = 256
    secondary_workers: int = 4

    def lock_ttl_ms(self, txn_bytes: int) -> int:
        """A TTL that grows with the square root of the transaction's size in MiB.

        A larger transaction takes longer to prewrite; heartbeats extend the TTL of a live
        committer anyway, so this only bounds how soon a crashed one's locks can be cleared.
        """
        mib = txn_bytes / (1024 * 1024)
        ttl = self.base_lock_ttl_ms * max(1.0, math.sqrt(mib))
        return int(min(ttl, self.max_lock_ttl_ms))


def retry_delay_s(attempt: int, backoff_s: float, max_backoff_s: float = 1.0) -> float:
    """How long to wait before retry number ``attempt`` (from 0) of a conflicted transaction:
    exponential, capped, with jitter so that the transactions that collided spread out."""
    return min(max_backoff_s, backoff_s * 2**attempt) * random.uniform(0.5, 1.5)
