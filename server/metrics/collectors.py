"""Metrics read at scrape time from state a process already keeps.

These are attached to one endpoint (:class:`~percolator.server.metrics.http.MetricsServer`), not
to the process-wide registry: each endpoint reports the store of the process that started it,
and two servers in one interpreter (tests) do not collide.

- :class:`StoreRoundTrips` reads the store's own counters (``StoreStats.round_trips``): nothing
  is added to the storage layer's hot paths.
- :class:`ObserverBacklog` asks the store for the notifications' summary (one query per shard),
  at most once per ``min_interval_s`` and within ``timeout_s``, before the scrape renders. The
  numbers are deployment-wide (every process that exposes them shows the same ones): aggregate
  them with ``max``, not ``sum``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.cells import ts_physical_ms
from percolator.server.storage.store import CellStore

log = logging.getLogger(__name__)

DEFAULT_REFRESH_INTERVAL_S = 1.0
"""Scrapes closer together than this reuse the last observer summary."""
DEFAULT_REFRESH_TIMEOUT_S = 2.0
"""How long a scrape waits for the observer summary before leaving it out."""


class StoreRoundTrips(Collector):
    """``percolator_store_round_trips_total{operation}``: round trips to Postgres per store
    operation (one per shard batch), read from the store's :class:`StoreStats`."""

    def __init__(self, store: CellStore) -> None:
        self._stats = store.stats

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "percolator_store_round_trips",
            "Round trips to the Postgres shards, by store operation (each batch sent to one "
            "shard is one).",
            labels=["operation"],
        )
        # A copy first: the event loop may add an operation name while this runs.
        for operation, count in sorted(dict(self._stats.round_trips).items()):
            family.add_metric([operation], count)
        yield family


@dataclass(frozen=True, slots=True)
class _Backlog:
    pending: int
    parked: int
    oldest_ms: int | None
    """Wall-clock ms of the oldest pending change (None: nothing pending)."""


class ObserverBacklog(Collector):
    """Per observer: changes waiting to run, parked changes, and how old the oldest waiting
    change is (``percolator_observer_pending_changes``, ``..._parked_changes``,
    ``..._lag_seconds``), from the store's notification summary."""

    def __init__(
        self,
        store: CellStore,
        observers: Callable[[], Mapping[str, str]] = dict,
        *,
        min_interval_s: float = DEFAULT_REFRESH_INTERVAL_S,
        timeout_s: float = DEFAULT_REFRESH_TIMEOUT_S,
    ) -> None:
        """``observers()`` maps the keys of the observers that exist now to their names: the
        metrics are labelled by name, and an observer with nothing pending reports 0."""
        self._store = store
        self._observers = observers
        self._min_interval_s = min_interval_s
        self._timeout_s = timeout_s
        self._backlog: dict[str, _Backlog] | None = None
        self._refreshed_at: float | None = None
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """Read the summary unless a recent one is at hand; on failure or timeout the backlog
        is left out of the scrape (stale numbers would look like a healthy pipeline)."""
        async with self._lock:  # concurrent scrapes share one read
            now = time.monotonic()
            if self._refreshed_at is not None and now - self._refreshed_at < self._min_interval_s:
                return
            try:
                async with asyncio.timeout(self._timeout_s):
                    summaries = await self._store.notification_summary()
            except Exception as exc:
                metrics.REFRESH_ERRORS.labels("observer_summary").inc()
                log.warning("metrics: reading the observers' backlog failed: %r", exc)
                self._backlog, self._refreshed_at = None, None
                return
            names = self._observers()
            backlog = {name: _Backlog(0, 0, None) for name in names.values()}
            for s in summaries:
                # Label by name; two keys may share one (a dropped observer's leftovers).
                name = names.get(s.observer, s.observer)
                prev = backlog.get(name, _Backlog(0, 0, None))
                oldest = None if s.oldest_ts is None else ts_physical_ms(s.oldest_ts)
                if oldest is None or (prev.oldest_ms is not None and prev.oldest_ms < oldest):
                    oldest = prev.oldest_ms
                backlog[name] = _Backlog(prev.pending + s.pending, prev.parked + s.parked, oldest)
            self._backlog, self._refreshed_at = backlog, now

    def collect(self) -> Iterator[Metric]:
        backlog = self._backlog
        if backlog is None:
            return
        labels = ["observer"]
        pending = GaugeMetricFamily(
            "percolator_observer_pending_changes",
            "Changes waiting for their observer to run (deployment-wide; parked ones excluded).",
            labels=labels,
        )
        parked = GaugeMetricFamily(
            "percolator_observer_parked_changes",
            "Changes parked after too many failed runs (deployment-wide).",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "percolator_observer_lag_seconds",
            "Age of the oldest change waiting for its observer (0: nothing waits).",
            labels=labels,
        )
        now_ms = time.time() * 1000
        for name in sorted(backlog):
            b = backlog[name]
            pending.add_metric([name], b.pending)
            parked.add_metric([name], b.parked)
            lag.add_metric(
                [name], 0.0 if b.oldest_ms is None else max(0.0, now_ms - b.oldest_ms) / 1000
            )
        yield pending
        yield parked
        yield lag
