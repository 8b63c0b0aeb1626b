"""What a SERIALIZABLE transaction read, so that its commit can check nothing of it changed.

Snapshot isolation alone allows write skew: two transactions each read what the other then
writes, and both commit. SERIALIZABLE here is snapshot isolation plus a check at commit
(Yabandeh and Ferro's write-snapshot isolation): after its prewrite and with its commit_ts,
a transaction that writes makes sure that no other transaction changed a row it read, or a
gap of a range it scanned, between its snapshot and commit_ts, and that none holds a write
lock there. Then each writer reads, in effect, at its commit_ts, and the writers are
serialized in commit_ts order; a read-only transaction is serialized at its snapshot and is
never checked (nor aborted).

The read set is kept per store table as row-key ranges: a point read adds the row itself, a
scan the range up to the last row it fetched (all of it once it ran to the end), so a scan a
LIMIT stopped early claims no more than it read. Whole rows are claimed, whatever columns were
read: a little more than needed, never less.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from percolator.server.storage.store import RowRange

MAX_POINTS = 10_000
"""Point reads per table kept apart in the commit's check (see :meth:`ReadSet.ranges`)."""


def _after(row: bytes) -> bytes:
    """The first row key after ``row`` (the end of the range holding ``row`` alone)."""
    return row + b"\x00"


@dataclass
class ScanClaim:
    """The part of a scan read so far: [start, end), end growing as pages arrive."""

    start: bytes
    end: bytes | None

    def reached(self, row: bytes) -> None:
        """The scan fetched ``row`` (rows come in key order within a shard, not across)."""
        after = _after(row)
        if self.end is not None and after > self.end:
            self.end = after

    def finished(self, end: bytes | None) -> None:
        """The scan ran to its end: it read the whole range."""
        self.end = end


@dataclass
class ReadSet:
    """Per store table, the rows and ranges a transaction read."""

    rows: dict[str, set[bytes]] = field(default_factory=dict)
    scans: dict[str, list[ScanClaim]] = field(default_factory=dict)

    def add_rows(self, table: str, rows: Iterable[bytes]) -> None:
        self.rows.setdefault(table, set()).update(rows)

    def add_scan(self, table: str, start: bytes | None) -> ScanClaim:
        """A scan from ``start`` begins: it claims nothing until it fetches rows."""
        first = start or b""
        claim = ScanClaim(first, first)
        self.scans.setdefault(table, []).append(claim)
        return claim

    def add_range(self, table: str, start: bytes | None, end: bytes | None) -> None:
        """The whole range [start, end) was read (a check that it is empty)."""
        self.scans.setdefault(table, []).append(ScanClaim(start or b"", end))

    def tables(self) -> list[str]:
        return sorted(set(self.rows) | set(self.scans))

    def ranges(self, table: str) -> list[RowRange]:
        """The table's claimed ranges, point rows included, empty ones left out. Beyond
        ``MAX_POINTS`` rows, the points become the one range that spans them (claiming more,
        to keep the commit's check one modest statement)."""
        rows = sorted(self.rows.get(table, ()))
        if len(rows) > MAX_POINTS:
            out = [RowRange(rows[0], _after(rows[-1]))]
        else:
            out = [RowRange(row, _after(row)) for row in rows]
        out += [
            RowRange(c.start, c.end)
            for c in self.scans.get(table, ())
            if c.end is None or c.end > c.start
        ]
        return out

    def __bool__(self) -> bool:
        return bool(self.rows) or bool(self.scans)
