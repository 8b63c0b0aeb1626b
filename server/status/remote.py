"""Status from outside the coordinator process (``percolator status``), two ways:

- :func:`gather_remote`: ask the coordinator over gRPC (four calls) and probe the shards
  directly (one query each on a connection of its own); with every shard up and at this
  Percolator's schema version, also read the observers (catalog plus one round trip per shard
  and one to the first shard) through a store opened for the purpose;
- :func:`fetch_status`: GET the coordinator's ``/status.json`` (one HTTP request; it needs the
  coordinator's HTTP endpoint, ``--metrics-listen``, and no shard credentials).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Sequence

from percolator.server.status.gather import (
    DEFAULT_TIMEOUT_S,
    ObserverReader,
    RemoteCoordinator,
    ShardProbe,
    StoreCatalog,
    assemble,
    bounded,
    describe,
    find_problems,
    read_coordinator,
    read_observers,
)
from percolator.server.status.model import ClusterStatus, CoordinatorStatus, ObserverStatus
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.storage.schema import SCHEMA_VERSION
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.timestamp_client import CoordinatorClient


class _ClientClock:
    """Timestamps from a CoordinatorClient, one unary call each: a status reads the catalog
    once, so the batching source's stream would only cost a connection."""

    def __init__(self, client: CoordinatorClient) -> None:
        self._client = client

    async def get_timestamp(self) -> int:
        return await self._client.get_timestamps(1)


async def _store_observers(
    control: CoordinatorClient, dsns: Sequence[str], timeout_s: float
) -> tuple[list[ObserverStatus], str | None]:
    opened = await bounded(
        PostgresCellStore.connect(dsns, pool_size=2, connect_timeout=timeout_s), timeout_s
    )
    if isinstance(opened, BaseException):
        return [], f"cannot open the store: {describe(opened)}"
    client = TransactionClient(opened, _ClientClock(control))
    try:
        return await read_observers(ObserverReader(client, StoreCatalog(client)), timeout_s)
    finally:
        await client.close()
        await opened.close()


async def gather_remote(
    coordinator: str, dsns: Sequence[str] | None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> ClusterStatus:
    """The status as seen from here; without ``dsns`` shards and observers are left out."""
    control = CoordinatorClient(coordinator, timeout_s=timeout_s)
    probe = ShardProbe(dsns) if dsns else None
    try:
        coord, shards = await asyncio.gather(
            read_coordinator(RemoteCoordinator(control), timeout_s),
            probe.probe(timeout_s) if probe is not None else _nothing(),
        )
        observers: list[ObserverStatus] = []
        error: str | None = None
        if dsns:
            healthy = all(s.reachable and s.schema_version == SCHEMA_VERSION for s in shards)
            if healthy and coord.status.reachable:
                # Only now: opening a store on a shard that is down would only time out, and
                # on a shard without the current schema it would migrate it.
                observers, error = await _store_observers(control, dsns, timeout_s)
            else:
                error = "not read while a shard or the coordinator is down"
        return assemble(coord, shards, observers, error, source="cli")
    finally:
        if probe is not None:
            await probe.close()
        await control.close()


async def _nothing() -> list[object]:
    return []


def status_url(url: str) -> str:
    """The ``/status.json`` URL (without history) of a coordinator's HTTP endpoint, given
    as ``HOST:PORT``, its base URL, or any of its URLs (``.../status``, ``.../metrics``)."""
    if "://" not in url:
        url = f"http://{url}"
    base = url.split("?", 1)[0].rstrip("/")
    for suffix in ("/status.json", "/status", "/metrics"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return f"{base}/status.json?history=0"


def fetch_status(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> ClusterStatus:
    """GET the coordinator's ``/status.json`` (blocking); a failure is reported as an
    unreachable coordinator, not raised."""
    target = status_url(url)
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as response:
            data = json.load(response)
        return ClusterStatus.from_json(data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        coordinator = CoordinatorStatus(target, reachable=False, error=describe(exc))
        status = ClusterStatus(int(time.time() * 1000), "cli", coordinator)
        status.problems = find_problems(status)
        return status
