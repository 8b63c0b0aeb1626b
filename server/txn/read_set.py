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
scan the range from where it began up to the last row it fetched (a reverse scan: from that row
up to the range's end; all of it once it ran to its other end), so a scan a LIMIT stopped early
claims no more than it read. Whole rows are claimed, whatever columns were
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
    """A scan of the rows [start, end) and the part of it read so far: from the end the scan
    starts at (``start`` ascending, ``end`` with ``reverse``) up to the farthest row fetched,
    or all of it once the scan ran to its other end."""

    start: bytes
    end: bytes | None
    reverse: bool = False
    frontier: bytes | None = None
    """Where the part read ends: ascending, the first row key after the last row fetched;
    descending, the last (lowest) row fetched. None: no row fetched yet."""
    done: bool = False
    """The scan ran to its end: it read the whole range."""

    def reached(self, row: bytes) -> None:
        """The scan fetched ``row``."""
        if self.reverse:
            if self.frontier is None or row < self.frontier:
                self.frontier = row
        else:
            after = _after(row)
            if self.frontier is None or after > self.frontier:
                self.frontier = after

    def reached_page(self, rows: Iterable[bytes]) -> None:
        """The scan fetched a page of rows (in key order within a shard, not across)."""
        farthest = min(rows, default=None) if self.reverse else max(rows, default=None)
        if farthest is not None:
            self.reached(farthest)

    def finished(self) -> None:
        """The scan ran to its end: it read the whole range."""
        self.done = True

    def claimed(self) -> RowRange | None:
        """The rows read so far (None: none)."""
        if self.done:
            return RowRange(self.start, self.end)
        if self.frontier is None:
            return None
        if self.reverse:
            return RowRange(self.frontier, self.end)
        return RowRange(self.start, self.frontier)


@dataclass
class ReadSet:
    """Per store table, the rows and ranges a transaction read."""

    rows: dict[str, set[bytes]] = field(default_factory=dict)
    scans: dict[str, list[ScanClaim]] = field(default_factory=dict)

    def add_rows(self, table: str, rows: Iterable[bytes]) -> None:
        self.rows.setdefault(table, set()).update(rows)

    def add_scan(
        self, table: str, start: bytes | None, end: bytes | None, *, reverse: bool = False
    ) -> ScanClaim:
        """A scan of [start, end) begins (from ``end`` down with ``reverse``): it claims
        nothing until it fetches rows."""
        claim = ScanClaim(start or b"", end, reverse)
        self.scans.setdefault(table, []).append(claim)
        return claim

    def add_range(self, table: str, start: bytes | None, end: bytes | None) -> None:
        """The whole range [start, end) was read (a check that it is empty)."""
        self.scans.setdefault(table, []).append(ScanClaim(start or b"", end, done=True))

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
        claimed = (c.claimed() for c in self.scans.get(table, ()))
        out += [r for r in claimed if r is not None and (r.end is None or r.end > r.start)]
        return out

    def __bool__(self) -> bool:
        return bool(self.rows) or bool(self.scans)
