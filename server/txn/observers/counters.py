"""Per-observer run counts kept in memory by a worker and added to the store's totals
periodically (one round trip per flush, whatever the number of runs). The same events also
move the process's Prometheus counters (``percolator_observer_*_total``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from percolator.server.metrics import definitions as metrics
from percolator.server.metrics.definitions import ObserverMetrics
from percolator.server.storage.cells import ObserverCounters
from percolator.server.storage.store import CellStore

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000


@dataclass
class _Delta:
    runs: int = 0
    commits: int = 0
    conflicts: int = 0
    failures: int = 0
    last_error: str | None = None
    last_error_ms: int | None = None


class RunCounters:
    """Counts since the last flush, per observer key."""

    def __init__(self, label: Callable[[str], str] = str) -> None:
        """``label(key)`` names an observer in the metrics (its name rather than its key)."""
        self._deltas: dict[str, _Delta] = {}
        self._label = label
        # The metrics' children per key, bound once: runs are per changed row.
        self._metrics: dict[str, ObserverMetrics] = {}

    def metrics_of(self, key: str) -> ObserverMetrics:
        """The Prometheus counters of the observer with this key."""
        m = self._metrics.get(key)
        if m is None:
            m = self._metrics[key] = metrics.observer_metrics(self._label(key))
        return m

    def _delta(self, key: str) -> _Delta:
        d = self._deltas.get(key)
        if d is None:
            d = self._deltas[key] = _Delta()
        return d

    def run(self, key: str) -> None:
        self._delta(key).runs += 1
        self.metrics_of(key).runs.inc()

    def commit(self, key: str) -> None:
        self._delta(key).commits += 1
        self.metrics_of(key).commits.inc()

    def conflict(self, key: str) -> None:
        self._delta(key).conflicts += 1
        self.metrics_of(key).conflicts.inc()

    def parked(self, key: str) -> None:
        """A change was parked (a metric only: the store counts parked changes itself)."""
        self.metrics_of(key).parked.inc()

    def failure(self, key: str, error: str) -> None:
        self.metrics_of(key).failures.inc()
        d = self._delta(key)
        d.failures += 1
        d.last_error = error[:MAX_ERROR_CHARS]
        d.last_error_ms = int(time.time() * 1000)

    async def flush(self, store: CellStore) -> None:
        """Add what was counted to the store's totals. On failure the counts are kept for the
        next flush (counters are statistics: a crash loses at most one interval)."""
        if not self._deltas:
            return
        deltas, self._deltas = self._deltas, {}
        try:
            await store.add_observer_counters(
                [ObserverCounters(key, **vars(d)) for key, d in deltas.items()]
            )
        except Exception as exc:
            log.warning("observer counters not saved, will retry: %s", exc)
            for key, d in deltas.items():
                mine = self._delta(key)
                mine.runs += d.runs
                mine.commits += d.commits
                mine.conflicts += d.conflicts
                mine.failures += d.failures
                if mine.last_error is None and d.last_error is not None:
                    mine.last_error, mine.last_error_ms = d.last_error, d.last_error_ms
