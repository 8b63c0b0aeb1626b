"""``percolator.observers`` and ``percolator.parked_changes``: the observers' state, read from
the catalog and the store when queried.

``percolator.observers`` has one row per observer: its definition, the notifications waiting
(``pending``) and the age of the oldest (``lag_ms``), the runs, commits, conflicts and failures
counted by every worker (saved once a second), the parked changes and the last error.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

from percolator.server.sql import system_tables
from percolator.server.sql import types as T
from percolator.server.sql.keycodec import decode_key
from percolator.server.sql.system_tables import SystemTable
from percolator.server.sql.types import key_type
from percolator.server.storage.cells import ts_physical_ms
from percolator.server.txn.observers import admin

_OBSERVER_COLUMNS = (
    ("name", T.TEXT),
    ("table_name", T.TEXT),
    ("columns", T.TEXT),
    ("kind", T.TEXT),
    ("mode", T.TEXT),
    ("paused", T.BOOL),
    ("pending", T.INT8),
    ("lag_ms", T.INT8),
    ("runs", T.INT8),
    ("commits", T.INT8),
    ("conflicts", T.INT8),
    ("failures", T.INT8),
    ("parked", T.INT8),
    ("last_error", T.TEXT),
    ("last_error_at", T.TIMESTAMPTZ),
    ("definition", T.TEXT),
)


async def _observers(ctx: Any) -> AsyncIterator[tuple[object, ...]]:
    catalog = ctx.catalog
    if not catalog.observers:
        return
    status = await admin.observer_status(ctx.client)
    now_ms = int(time.time() * 1000)
    for name in sorted(catalog.observers):
        o = catalog.observers[name]
        table = catalog.table_by_id(o.table_id)
        columns = ", ".join(table.column_by_id(c).name for c in o.column_ids) if table else ""
        s = status.get(o.key, admin.ObserverStatus())
        c = s.counters
        lag = None
        if s.oldest_pending_ts is not None:
            lag = max(0, now_ms - ts_physical_ms(s.oldest_pending_ts))
        error_at = None
        if c is not None and c.last_error_ms is not None:
            error_at = dt.datetime.fromtimestamp(c.last_error_ms / 1000, dt.UTC)
        yield (
            o.name,
            table.name if table else None,
            columns,
            o.kind,
            "weak" if o.weak else "strong",
            o.paused,
            s.pending,
            lag,
            c.runs if c else 0,
            c.commits if c else 0,
            c.conflicts if c else 0,
            c.failures if c else 0,
            s.parked,
            c.last_error if c else None,
            error_at,
            o.body if o.body is not None else o.target,
        )


_PARKED_COLUMNS = (
    ("observer", T.TEXT),
    ("table_name", T.TEXT),
    ("row_key", T.TEXT),
    ("attempts", T.INT4),
    ("last_error", T.TEXT),
)


async def _parked(ctx: Any) -> AsyncIterator[tuple[object, ...]]:
    catalog = ctx.catalog
    if not catalog.observers:
        return
    by_key = {o.key: o for o in catalog.observers.values()}
    for p in await admin.parked_changes(ctx.client):
        o = by_key.get(p.observer)
        if o is None:
            continue
        table = catalog.table_by_id(o.table_id)
        yield (
            o.name,
            table.name if table else None,
            _describe_key(table, p.row) if table else p.row.hex(),
            p.attempts,
            p.last_error,
        )


def _describe_key(table: Any, row: bytes) -> str:
    """The primary key values of a row key, as text: ``(42, 'abc')``."""
    if not table.primary_key:
        return "\\x" + row.hex()
    types = [key_type(table.column_by_id(cid).type) for cid in table.primary_key]
    try:
        values = decode_key(types, row)
    except Exception:
        return "\\x" + row.hex()
    return "(" + ", ".join(repr(v) for v in values) + ")"


OBSERVERS_OID = 13101
PARKED_CHANGES_OID = 13102

system_tables.register(
    SystemTable("percolator", "observers", _OBSERVER_COLUMNS, _observers, OBSERVERS_OID)
)
system_tables.register(
    SystemTable("percolator", "parked_changes", _PARKED_COLUMNS, _parked, PARKED_CHANGES_OID)
)
