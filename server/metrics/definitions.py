"""Every metric of a Percolator process, in one place (docs/metrics.md lists them).

The metrics live in prometheus_client's default registry, which is process-wide: a test that
runs several servers in one interpreter sees their sums and must compare deltas. Each metric is
counted in the layer that knows the event (transactions in ``server/txn``, connections in
``server/frontend``, statements in the session), with a plain ``inc``/``observe`` call on an
object created here once. Labelled metrics are used through children bound once (module
constants, or cached per observer), so no hot path looks a label up.

Metrics read from state at scrape time (Postgres round trips per store operation, the
observers' backlog) are collectors attached to an endpoint instead: see
:mod:`percolator.server.metrics.collectors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from prometheus_client import Counter, Gauge, Histogram, Info, disable_created_metrics

# No ``*_created`` series: they double the output, and rate() and increase() do without.
disable_created_metrics()

# Seconds: from a fast local call (sub-millisecond) to a stalled Postgres (seconds).
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# Timestamps per oracle request: powers of two up to a busy server's batches.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)

# -- process -----------------------------------------------------------------------------------

BUILD_INFO = Info("percolator_build", "The Percolator version this process runs.")
try:
    BUILD_INFO.info({"version": metadata.version("percolator")})
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    BUILD_INFO.info({"version": "unknown"})

REFRESH_ERRORS = Counter(
    "percolator_metrics_refresh_errors",
    "Scrape-time reads that failed or timed out (their metrics were left out of that scrape).",
    ["source"],
)

# -- transactions (server/txn) -----------------------------------------------------------------

TXN_STARTED = Counter(
    "percolator_txn_started",
    "Transactions begun by this process (SQL sessions, observers, the Python API, catalog "
    "polls), snapshot reads and parts of distributed transactions included.",
)
TXN_COMMITTED = Counter(
    "percolator_txn_committed",
    "Transactions committed (read-only ones included: they commit without a round trip).",
)
TXN_ROLLED_BACK = Counter(
    "percolator_txn_rolled_back",
    "Transactions rolled back: by the client, or because their commit failed (conflicts included).",
)
TXN_CONFLICTS = Counter(
    "percolator_txn_conflicts",
    "Commits that failed with a write conflict (SQLSTATE 40001: another transaction wrote "
    "the same cell since this one started, or holds its lock).",
)
TXN_COMMIT_SECONDS = Histogram(
    "percolator_txn_commit_seconds",
    "Latency of successful two-phase commits: prewrite, commit_ts, primary commit (the "
    "secondaries finish in the background, after this).",
    buckets=LATENCY_BUCKETS,
)
LOCK_WAIT_SECONDS = Histogram(
    "percolator_lock_wait_seconds",
    "Time a read waited for locks of live transactions (one observation per read that "
    "waited; _count is the number of lock waits).",
    buckets=LATENCY_BUCKETS,
)
LOCK_WAIT_TIMEOUTS = Counter(
    "percolator_lock_wait_timeouts",
    "Reads that gave up waiting for a lock (lock wait timeout).",
)
LOCK_RESOLUTIONS = Counter(
    "percolator_lock_resolutions",
    "Locks of other transactions met by reads, prewrites and GC, by what resolving them did: "
    "roll_forward (the primary had committed), roll_back (its owner died or was rolled back), "
    "held (the owner is alive: the lock stays).",
    ["outcome"],
)
LOCKS_ROLLED_FORWARD = LOCK_RESOLUTIONS.labels("roll_forward")
LOCKS_ROLLED_BACK = LOCK_RESOLUTIONS.labels("roll_back")
LOCKS_HELD = LOCK_RESOLUTIONS.labels("held")

# -- timestamps --------------------------------------------------------------------------------

TS_CLIENT_BATCH_SIZE = Histogram(
    "percolator_timestamp_client_batch_size",
    "Timestamps asked for per request to the coordinator (requesters sharing one RPC).",
    buckets=BATCH_BUCKETS,
)
TS_CLIENT_RPC_SECONDS = Histogram(
    "percolator_timestamp_client_rpc_seconds",
    "Latency of timestamp requests to the coordinator, as the client sees it.",
    buckets=LATENCY_BUCKETS,
)
TS_CLIENT_RPC_ERRORS = Counter(
    "percolator_timestamp_client_rpc_errors",
    "Timestamp requests to the coordinator that failed (unreachable, timed out, refused).",
)
ORACLE_TIMESTAMPS = Counter(
    "percolator_oracle_timestamps",
    "Timestamps handed out by the oracle of this process (its coordinator).",
)
ORACLE_REQUEST_BATCH_SIZE = Histogram(
    "percolator_oracle_request_batch_size",
    "Timestamps per request the coordinator served over gRPC.",
    buckets=BATCH_BUCKETS,
)
ORACLE_REQUEST_SECONDS = Histogram(
    "percolator_oracle_request_seconds",
    "Time the coordinator took to allocate a gRPC request's timestamps (only a request that "
    "reaches the persisted high-water mark waits, for a Postgres write).",
    buckets=LATENCY_BUCKETS,
)
ORACLE_PERSIST_SECONDS = Histogram(
    "percolator_oracle_persist_seconds",
    "Latency of writes of the oracle's high-water mark to Postgres (one per window, usually "
    "in the background).",
    buckets=LATENCY_BUCKETS,
)
ORACLE_PERSIST_WAITS = Counter(
    "percolator_oracle_persist_waits",
    "Allocations that had to wait for the high-water mark to be written (a burst outran the "
    "window).",
)

# -- GC ----------------------------------------------------------------------------------------

GC_PASSES = Counter("percolator_gc_passes", "MVCC GC passes, by result.", ["result"])
GC_PASSES_OK = GC_PASSES.labels("ok")
GC_PASSES_FAILED = GC_PASSES.labels("failed")
GC_SAFE_POINT_SECONDS = Gauge(
    "percolator_gc_safe_point_seconds",
    "Wall-clock time (Unix seconds) of the last GC pass's safe point: versions older than "
    "this may be gone (time() minus this is how far back snapshots can read).",
)
GC_VERSIONS_REMOVED = Counter(
    "percolator_gc_versions_removed", "Old versions removed by GC (write records and data)."
)
GC_ROLLBACK_RECORDS_REMOVED = Counter(
    "percolator_gc_rollback_records_removed", "Rollback records removed by GC."
)
GC_LOCKS_RESOLVED = Counter(
    "percolator_gc_locks_resolved", "Locks below the safe point that GC rolled forward or back."
)

RETIRED_STORAGES_PENDING = Gauge(
    "percolator_retired_storages_pending",
    "Storages of dropped or truncated tables (and dropped indexes) not purged yet, as the "
    "reclaimer's last pass found them (it waits for the GC safe point to pass their DDL).",
)
RETIRED_ROWS_PURGED = Counter(
    "percolator_retired_rows_purged",
    "Rows (write records, locks, notifications) the reclaimer deleted from retired storages.",
)

# -- SQL front end -----------------------------------------------------------------------------

CONNECTIONS_OPEN = Gauge("percolator_connections_open", "Client connections open now.")
CONNECTIONS_ACCEPTED = Counter(
    "percolator_connections_accepted", "Client connections accepted (TCP or TLS)."
)
CONNECTIONS_REJECTED = Counter(
    "percolator_connections_rejected",
    "Client connections refused because max_connections were open (SQLSTATE 53300).",
)
STATEMENTS = Counter(
    "percolator_statements",
    "SQL statements executed, by type: select, insert, update, delete, ddl, other (BEGIN, "
    "COMMIT, SET, SHOW, COPY, EXPLAIN, observer and role statements, ...). Observer bodies "
    "and the Python API's SQL count too.",
    ["type"],
)
_STATEMENT_OTHER = STATEMENTS.labels("other")
# Plan kinds of the session (server/session.py Plan.kind) to statement types.
_STATEMENT_BY_KIND = {
    "query": STATEMENTS.labels("select"),
    "introspection": STATEMENTS.labels("select"),
    "insert": STATEMENTS.labels("insert"),
    "update": STATEMENTS.labels("update"),
    "delete": STATEMENTS.labels("delete"),
    "ddl": STATEMENTS.labels("ddl"),
}
STATEMENT_ERRORS = Counter(
    "percolator_statement_errors",
    "Errors sent to clients, by SQLSTATE (40001: write conflict, retry; 23505: unique "
    "violation; 57014: cancelled or timed out; ...).",
    ["sqlstate"],
)


def count_statement(kind: str) -> None:
    """Count one executed statement of plan kind ``kind``."""
    _STATEMENT_BY_KIND.get(kind, _STATEMENT_OTHER).inc()


# -- observers ---------------------------------------------------------------------------------

_OBSERVER_LABELS = ["observer"]
OBSERVER_RUNS = Counter(
    "percolator_observer_runs",
    "Observer runs started by this process's workers (a run that conflicts and runs again "
    "counts twice).",
    _OBSERVER_LABELS,
)
OBSERVER_COMMITS = Counter(
    "percolator_observer_commits", "Observer runs that committed.", _OBSERVER_LABELS
)
OBSERVER_CONFLICTS = Counter(
    "percolator_observer_conflicts",
    "Observer runs that hit a write conflict (another run of the same change, or a "
    "concurrent writer) and were retried.",
    _OBSERVER_LABELS,
)
OBSERVER_FAILURES = Counter(
    "percolator_observer_failures",
    "Observer runs that raised (rolled back, retried later with backoff).",
    _OBSERVER_LABELS,
)
OBSERVER_PARKED = Counter(
    "percolator_observer_parked",
    "Changes parked by this process's workers after too many failed runs (until ALTER "
    "OBSERVER ... RETRY PARKED or a new write).",
    _OBSERVER_LABELS,
)


@dataclass(frozen=True, slots=True)
class ObserverMetrics:
    """The counters of one observer, bound to its label (see :func:`observer_metrics`)."""

    runs: Counter
    commits: Counter
    conflicts: Counter
    failures: Counter
    parked: Counter


def observer_metrics(name: str) -> ObserverMetrics:
    """The counters of observer ``name``; callers cache the result per observer."""
    return ObserverMetrics(
        OBSERVER_RUNS.labels(name),
        OBSERVER_COMMITS.labels(name),
        OBSERVER_CONFLICTS.labels(name),
        OBSERVER_FAILURES.labels(name),
        OBSERVER_PARKED.labels(name),
    )
