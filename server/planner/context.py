"""What an executing statement can reach: its transaction, parameters, session facts, and
the values of its subqueries for the current row."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from percolator.server.planner.row_locking import RowLocking
from percolator.server.sql.catalog import Catalog
from percolator.server.txn.transaction import Transaction


@dataclass
class ExecContext:
    """Per-statement execution state (one per Execute)."""

    txn: Transaction
    catalog: Catalog
    params: list[object]
    user: str
    database: str
    backend_pid: int
    settings: dict[str, str]
    transaction_time: dt.datetime
    statement_time: dt.datetime
    bootstrap_user: str = "postgres"
    set_setting: Callable[..., None] = lambda name, value, local=False: None
    """``set_setting(name, value, local=False)``: SET, or SET LOCAL (set_config's is_local)."""
    client: Any = None
    """The process's TransactionClient (system tables that read the store use it)."""
    cursors: Iterable[Any] = ()
    """The session's open SQL cursors (``pg_cursors``)."""
    deferred_constraints: Any = None
    sequences: Any = None
    """The session's sequence functions (server/sequences.SessionSequences)."""
    advisory: Any = None
    notifications: Any = None
    """The session's LISTEN / NOTIFY state (server/notifications.SessionNotifications)."""
    row_locking: RowLocking | None = None
    """How the statement takes pessimistic row locks (None: it takes none)."""
    backends: Any = None
    """This server's sessions (server/sql/backends.Backends): pg_stat_activity, signals."""
    functions: Any = None
    """The session's PL/pgSQL function calls (server/session_functions.py)."""
    subquery_values: dict[int, object] = field(default_factory=dict)
    outer_rows: list[tuple[object, ...]] = field(default_factory=list)

    @property
    def start_ts(self) -> int:
        return self.txn.start_ts

    def clock_time(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)
