"""The coordinator's status endpoint: ``/status`` (the HTML page) and ``/status.json``, served
on its HTTP endpoint (the one ``--metrics-listen`` opens), plus the sampler behind the charts.

A status is gathered at most once per ``cache_s`` whatever the number of pages polling it:
concurrent requests share one gather.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from percolator.server.metrics.http import HttpServer, Request, Response
from percolator.server.sql.catalog import Catalog
from percolator.server.status.gather import (
    DEFAULT_TIMEOUT_S,
    CatalogSource,
    CoordinatorView,
    LocalCoordinator,
    ObserverReader,
    ShardProbe,
    StoreCatalog,
    gather_status,
)
from percolator.server.status.model import ClusterStatus
from percolator.server.status.page import render_page
from percolator.server.status.sampler import DEFAULT_INTERVAL_S, StatusSampler
from percolator.server.storage.store import CellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.coordinator import CoordinatorHandle

if TYPE_CHECKING:
    from percolator.server.engine import Engine

DEFAULT_CACHE_S = 1.0
_NO_STORE = (("Cache-Control", "no-store"),)


class StatusService:
    """Gathers statuses for the page and the JSON route, and owns the sampler."""

    def __init__(
        self,
        coordinator: CoordinatorView,
        shards: ShardProbe,
        observers: ObserverReader | None,
        sampler: StatusSampler,
        *,
        client: TransactionClient | None = None,
        cache_s: float = DEFAULT_CACHE_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._coordinator = coordinator
        self._shards = shards
        self._observers = observers
        self.sampler = sampler
        self._client = client
        self._cache_s = cache_s
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._cached: tuple[float, ClusterStatus] | None = None

    async def status(self) -> ClusterStatus:
        """A status at most ``cache_s`` old, with the sampler's history."""
        async with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self._cache_s:
                return self._cached[1]
            status = await gather_status(
                self._coordinator,
                self._shards,
                self._observers,
                source="coordinator",
                timeout_s=self._timeout_s,
                history=self.sampler.samples,
            )
            self._cached = (time.monotonic(), status)
            return status

    def attach(self, http: HttpServer) -> None:
        """Serve ``/status`` and ``/status.json`` on ``http``."""
        http.add_route("/status", self._page)
        http.add_route("/status.json", self._json)

    async def _json(self, request: Request) -> Response:
        data = (await self.status()).to_json()
        # ?history=0: the command line does not need the charts' samples; ?since=T_MS: the page
        # already has the samples up to T_MS and only needs the newer ones.
        if request.query.get("history", ["1"])[-1] in ("0", "false", "no"):
            data["history"] = []
        since = request.query.get("since", [""])[-1]
        if since.isdigit():
            data["history"] = [h for h in data["history"] if h["t_ms"] > int(since)]
        return Response(
            json.dumps(data, separators=(",", ":")).encode(),
            content_type="application/json",
            headers=_NO_STORE,
        )

    async def _page(self, request: Request) -> Response:
        page = render_page((await self.status()).to_json())
        return Response(page.encode(), content_type="text/html; charset=utf-8", headers=_NO_STORE)

    async def close(self) -> None:
        """Stop the sampler and close the shard connections."""
        await self.sampler.stop()
        await self._shards.close()
        if self._client is not None:
            await self._client.close()


async def start_status_page(
    http: HttpServer,
    handle: CoordinatorHandle,
    dsns: Sequence[str],
    store: CellStore,
    *,
    engine: Engine | None = None,
    gc_lifetime_ms: int | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> StatusService:
    """Serve the status page of the coordinator ``handle`` on ``http`` and start its sampler.

    ``store`` is the coordinator's store (observers' backlog and counters); with ``engine``
    (an in-process coordinator next to a SQL engine) observer names come from the engine's
    catalog, else from the store. ``await service.close()`` before closing the store."""
    client = TransactionClient(store, handle.oracle)
    catalog: CatalogSource
    if engine is not None:

        async def engine_catalog() -> Catalog:
            return engine.catalog

        catalog = engine_catalog
    else:
        oracle = handle.oracle
        catalog = StoreCatalog(client, snapshot_ts=lambda: oracle.last)
    sampler = StatusSampler(store, catalog, interval_s=interval_s)
    service = StatusService(
        LocalCoordinator(handle, gc_lifetime_ms),
        ShardProbe(dsns, keep_connections=True),
        ObserverReader(client, catalog),
        sampler,
        client=client,
    )
    service.attach(http)
    sampler.start()
    return service
