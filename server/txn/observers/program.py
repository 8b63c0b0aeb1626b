"""What the runtime needs to know about an observer, and where it gets it from.

The transaction layer never sees SQL: an observer reaches the runtime as an
:class:`ObserverProgram`, a named coroutine run inside a transaction for one changed row. The
SQL layer builds programs from its catalog (SQL bodies and Python targets) and hands the worker
an :class:`ObserverSource`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import Transaction

ACK_COLUMN = "ts"


def ack_table(observer_key: str) -> str:
    """The store table of an observer's acknowledgments: one cell per row it has run for,
    holding the start_ts of its last committed run there (Percolator's ``ack`` column, kept
    apart from the data so that scans of the observed table never meet it)."""
    return f"__ack/{observer_key}"


class ObserverProgram(Protocol):
    """One observer, as the runtime runs it."""

    @property
    def key(self) -> str:
        """The observer's identity in the store (watches, notifications, acks, counters)."""

    @property
    def name(self) -> str:
        """Its name, for logs."""

    @property
    def weak(self) -> bool:
        """True: at-least-once, without an ack cell (no conflicts between runs)."""

    @property
    def paused(self) -> bool:
        """True: its notifications stay pending and nothing runs."""

    def row_cells(self, table: str, row: bytes) -> Sequence[CellKey]:
        """The cells ``run`` reads first (the changed row): the runtime reads them in the same
        round trip as the ack cell, and the transaction serves run's read from that."""

    async def run(self, txn: Transaction, table: str, row: bytes) -> None:
        """Do the observer's work for ``row`` of store table ``table`` inside ``txn``; the
        runtime commits. Raising rolls the transaction back (and counts a failure)."""


class ObserverSource(Protocol):
    """The observers that exist now (the SQL layer's catalog)."""

    def program(self, key: str) -> ObserverProgram | None:
        """The observer with this key, or None when the catalog does not know it (not yet
        committed, or dropped): its notifications are left alone."""

    async def orphans(self, keys: set[str]) -> set[str]:
        """Which of these unknown keys will never be known: their creation rolled back, or
        they were dropped. The worker then removes their watches and notifications."""
