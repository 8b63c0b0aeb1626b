"""A :class:`~percolator.server.status.model.ClusterStatus` as readable text tables (what
``percolator status`` prints without ``--json``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from percolator.server.status.model import ClusterStatus


def duration(ms: float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4.0 min``, ``2.5 h``; empty for None."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def size(n: int | None) -> str:
    """Bytes in binary units (``12.5 MB``)."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def clock(ms: int | None) -> str:
    """Wall-clock milliseconds as a UTC time of day."""
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S UTC")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ") -> str:
    """Rows under headers, columns padded to their widest value."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    lines = [indent + "  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in cells:
        lines.append(indent + "  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip())
    return "\n".join(lines)


def render_text(status: ClusterStatus) -> str:
    """The whole status as text: health first, then one table per part."""
    now = status.generated_ms
    out = [f"percolator status: {'OK' if status.ok else 'PROBLEMS'}"]
    out += [f"  ! {p}" for p in status.problems]

    c = status.coordinator
    out.append("")
    out.append(f"coordinator {c.address}: {'up' if c.reachable else 'DOWN: ' + str(c.error)}")
    if c.reachable:
        out.append(f"  latest timestamp   {c.latest_ts}  ({clock(c.latest_ts_ms)})")
        if c.gc_safe_point is not None:
            age = duration(now - c.gc_safe_point_ms) if c.gc_safe_point_ms else "no GC pass yet"
            out.append(f"  GC safe point      {c.gc_safe_point}  ({age})")
        if c.gc_next_safe_point is not None:
            out.append(f"  next safe point    {c.gc_next_safe_point}")
        if c.live_clients is not None:
            out.append(f"  live clients       {c.live_clients}")

    out.append("")
    out.append(f"shards ({len(status.shards)})")
    if status.shards:
        out.append(
            table(
                ["#", "dsn", "state", "schema", "locks", "safe point", "size", "probe"],
                [
                    [
                        s.index,
                        s.dsn,
                        ("up" if not s.error else s.error) if s.reachable else f"DOWN: {s.error}",
                        s.schema_version,
                        s.locks,
                        s.safe_point,
                        size(s.size_bytes),
                        duration(s.probe_ms),
                    ]
                    for s in status.shards
                ],
            )
        )
    else:
        out.append("  (not checked: give --store or --url)")

    out.append("")
    out.append(f"SQL servers ({len(status.servers)})")
    if status.servers:
        out.append(
            table(
                ["id", "sql", "metrics", "pid", "lease left"],
                [
                    [s.id, s.sql_address, s.metrics_url, s.pid, duration(s.lease_remaining_ms)]
                    for s in status.servers
                ],
            )
        )

    out.append("")
    out.append(f"observer workers ({len(status.workers)})")
    if status.workers:
        out.append(
            table(
                ["id", "slice", "lease left", "info"],
                [[w.id, w.slice, duration(w.lease_remaining_ms), w.info] for w in status.workers],
            )
        )

    out.append("")
    out.append(f"observers ({len(status.observers)})")
    if status.observers_error:
        out.append(f"  (cannot read: {status.observers_error})")
    if status.observers:
        out.append(
            table(
                ["name", "table", "state", "pending", "lag", "runs", "failures", "parked", "error"],
                [
                    [
                        o.name,
                        o.table,
                        "paused" if o.paused else "active",
                        o.pending,
                        duration(o.lag_ms) if o.lag_ms is not None else "-",
                        o.runs,
                        o.failures,
                        o.parked,
                        (o.last_error or "")[:60],
                    ]
                    for o in status.observers
                ],
            )
        )
    return "\n".join(out) + "\n"
