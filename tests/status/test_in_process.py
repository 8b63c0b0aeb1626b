"""``percolator serve`` with its in-process coordinator and ``--metrics-listen`` serves the
status page too, and lists itself and its in-process worker."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from percolator.server.runtime import ServerProcess
from tests.conftest import PostgresServer, create_database


def test_in_process_coordinator_serves_status(embedded_pg: PostgresServer) -> None:
    store = asyncio.run(create_database(embedded_pg.dsn, "status"))
    server = ServerProcess(store, "--metrics-listen", "127.0.0.1:0")
    server.start()
    try:
        assert server.metrics_url is not None
        base = server.metrics_url.removesuffix("/metrics")
        with urllib.request.urlopen(f"{base}/status.json", timeout=30) as response:
            data = json.load(response)
        assert data["ok"] is True, data["problems"]
        assert data["coordinator"]["address"] == server.coordinator
        (listed,) = data["servers"]
        assert listed["sql_address"] == f"127.0.0.1:{server.port}"
        assert listed["metrics_url"] == server.metrics_url
        assert len(data["workers"]) == 1
        assert data["shards"][0]["reachable"] is True
        with urllib.request.urlopen(f"{base}/status", timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            page = response.read().decode()
        assert f"127.0.0.1:{server.port}" in page
    finally:
        server.stop(30)
