"""The coordinator's rolling history for the status page's charts: every ``interval_s`` one
:class:`~percolator.server.status.model.Sample` of throughput and observer lag, the last
``capacity`` of them kept in a ring buffer (five minutes at the defaults).

Throughput is the rate of timestamps the oracle handed out, read from the oracle's own counter
(``percolator_oracle_timestamps``, counted in this process's registry): no round trip. Observer
lag costs one query per shard per sample (the store's notification summary); observer names come
from the catalog source, which reloads only when the catalog version moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable

from percolator.server.metrics import definitions as metrics
from percolator.server.status.gather import CatalogSource, bounded, describe
from percolator.server.status.model import Sample
from percolator.server.storage.cells import NotifySummary, ts_physical_ms
from percolator.server.storage.store import CellStore

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
DEFAULT_CAPACITY = 300


def oracle_timestamps_total() -> float | None:
    """Timestamps handed out by this process's oracle so far.

    Read through the counter's public ``collect()``: the same number ``/metrics`` shows."""
    for family in metrics.ORACLE_TIMESTAMPS.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                return float(sample.value)
    return None


class StatusSampler:
    """Samples throughput and observer lag in the background (:meth:`start`, :meth:`stop`)."""

    def __init__(
        self,
        store: CellStore | None,
        catalog: CatalogSource | None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        capacity: int = DEFAULT_CAPACITY,
        counter: Callable[[], float | None] = oracle_timestamps_total,
    ) -> None:
        """Without ``store`` and ``catalog`` only throughput is sampled."""
        self._store = store
        self._catalog = catalog
        self._interval_s = interval_s
        self._counter = counter
        self._samples: deque[Sample] = deque(maxlen=capacity)
        self._last: tuple[float, float] | None = None
        """(monotonic seconds, counter value) at the previous sample."""
        self._task: asyncio.Task[None] | None = None
        self.errors = 0

    @property
    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        return list(self._samples)

    def start(self) -> None:
        """Start sampling (the first sample is taken at once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                self._samples.append(await self.sample())
            except Exception:
                log.warning("status sampler failed", exc_info=True)
            # A fixed cadence: a slow lag query shortens the wait instead of stretching it.
            await asyncio.sleep(max(0.05, self._interval_s - (time.monotonic() - started)))

    async def sample(self) -> Sample:
        """Take one sample now (without storing it)."""
        now = time.monotonic()
        rate: float | None = None
        total = self._counter()
        if total is not None:
            if self._last is not None and now > self._last[0]:
                rate = max(0.0, (total - self._last[1]) / (now - self._last[0]))
            self._last = (now, total)
        lag, pending = await self._observers()
        return Sample(int(time.time() * 1000), rate, lag, pending)

    async def _observers(self) -> tuple[dict[str, int], dict[str, int]]:
        store, catalog_source = self._store, self._catalog
        if store is None or catalog_source is None:
            return {}, {}

        async def read() -> tuple[dict[str, str], list[NotifySummary]]:
            catalog, summaries = await asyncio.gather(
                catalog_source(), store.notification_summary()
            )
            return {o.key: o.name for o in catalog.observers.values()}, summaries

        # Within one interval: a stuck shard must not pile samples up behind it.
        result = await bounded(read(), max(0.5, self._interval_s))
        if isinstance(result, BaseException):
            self.errors += 1
            log.info("status sampler: observer lag not read: %s", describe(result))
            return {}, {}
        names, summaries = result
        now_ms = time.time() * 1000
        lag = {name: 0 for name in names.values()}
        pending = {name: 0 for name in names.values()}
        for s in summaries:
            name = names.get(s.observer)
            if name is None:
                continue  # a dropped observer's leftovers
            pending[name] += s.pending
            if s.oldest_ts is not None:
                age = int(max(0.0, now_ms - ts_physical_ms(s.oldest_ts)))
                lag[name] = max(lag[name], age)
        return lag, pending

    async def stop(self) -> None:
        """Stop sampling."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
