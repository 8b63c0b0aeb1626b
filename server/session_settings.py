"""SET inside transactions, as Postgres's GUC stack has it: a SET made in a transaction is
undone when the transaction rolls back (or by ROLLBACK TO a savepoint taken before it), and
SET LOCAL lasts until the transaction ends, whichever way it ends.

The settings of a session are a small dict of strings, so the transaction keeps whole copies:
the values before its first SET (what a rollback restores) and the values a commit keeps
(those SET LOCAL did not change), and each savepoint a copy of both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Mark:
    current: dict[str, str]
    kept: dict[str, str]
    read_only: bool
    """The transaction's READ ONLY when the savepoint was taken (SET TRANSACTION READ ONLY
    after it is undone by ROLLBACK TO, and by RELEASE too, as in Postgres)."""


class TransactionSettings:
    """The transaction side of a session's settings (``values``, which the session owns)."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values
        self._before: dict[str, str] | None = None
        """The values before the transaction's first SET (None: no SET in it yet)."""
        self._kept: dict[str, str] = {}
        """The values a commit keeps: SET LOCAL changes the current ones only."""
        self._marks: list[_Mark] = []

    def set(self, key: str, value: str, *, in_transaction: bool, local: bool) -> None:
        """Record ``key = value`` (the caller has validated it and applies its effects)."""
        if in_transaction and self._before is None:
            self._before = dict(self._values)
            self._kept = dict(self._values)
        self._values[key] = value
        if in_transaction and not local:
            self._kept[key] = value

    def savepoint(self, read_only: bool) -> None:
        kept = self._kept if self._before is not None else self._values
        self._marks.append(_Mark(dict(self._values), dict(kept), read_only))

    def rollback_to(self, depth: int) -> tuple[dict[str, str], bool]:
        """ROLLBACK TO the savepoint ``depth`` (0-based; it stays): the values to restore and
        the transaction's READ ONLY."""
        del self._marks[depth + 1 :]
        mark = self._marks[depth]
        if self._before is not None:
            self._kept = dict(mark.kept)
        return dict(mark.current), mark.read_only

    def release(self, depth: int) -> bool:
        """RELEASE the savepoint ``depth`` and those after it (their SETs stay): the
        transaction's READ ONLY to restore."""
        read_only = self._marks[depth].read_only
        del self._marks[depth:]
        return read_only

    def end(self, committed: bool) -> dict[str, str] | None:
        """The transaction ended: the values to restore (None: nothing changed)."""
        before, kept = self._before, self._kept
        self._before, self._kept, self._marks = None, {}, []
        if before is None:
            return None
        return kept if committed else before
