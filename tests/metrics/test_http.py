"""The HTTP endpoint itself: routes, errors, the exposition formats, closing, settings."""

from __future__ import annotations

import argparse
import asyncio
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from percolator.server import config as server_config
from percolator.server.metrics import definitions as metrics
from percolator.server.metrics.http import (
    HttpServer,
    MetricsServer,
    Request,
    Response,
    parse_listen,
    start_metrics_server,
)
from tests.metrics.conftest import scrape, value


def fetch(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request, error statuses included."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def get(url: str, **kwargs: object) -> tuple[int, dict[str, str], bytes]:
    """:func:`fetch` off the loop the server runs on."""
    return await asyncio.to_thread(fetch, url, **kwargs)  # type: ignore[arg-type]


async def test_routes_and_errors() -> None:
    server = HttpServer()
    seen: list[Request] = []

    async def status(request: Request) -> Response:
        seen.append(request)
        return Response(b"<h1>ok</h1>", content_type="text/html", headers=[("X-Test", "1")])

    async def broken(request: Request) -> Response:
        raise RuntimeError("boom")

    server.add_route("/status", status)
    await server.start("127.0.0.1:0")
    try:
        # Routes can be added to a running server.
        server.add_route("/broken", broken)
        assert server.routes == ["/broken", "/status"]
        assert server.port > 0

        code, headers, body = await get(server.url("/status?verbose=1"), headers={"X-A": "b"})
        assert (code, body, headers["Content-Type"], headers["X-Test"]) == (
            200,
            b"<h1>ok</h1>",
            "text/html",
            "1",
        )
        assert seen[0].path == "/status" and seen[0].query == {"verbose": ["1"]}
        assert seen[0].headers["x-a"] == "b"

        code, headers, body = await get(server.url("/status"), method="HEAD")
        assert (code, body, headers["Content-Length"]) == (200, b"", "11")

        code, _, body = await get(server.url("/nowhere"))
        assert code == 404 and b"/status" in body  # the 404 lists what is served
        code, headers, _ = await get(server.url("/status"), method="POST")
        assert code == 405 and headers["Allow"] == "GET, HEAD"
        code, _, _ = await get(server.url("/broken"))
        assert code == 500
    finally:
        await server.close()
    with pytest.raises(OSError):
        await asyncio.to_thread(fetch, server.url("/status"))


async def test_close_ends_idle_and_half_sent_requests() -> None:
    server = HttpServer()
    await server.start("127.0.0.1:0")
    # A client that connects and sends half a request head must not hold the close up.
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /metrics HTTP/1.1\r\n")
    await writer.drain()
    await asyncio.sleep(0.05)
    await asyncio.wait_for(server.close(), 5)
    writer.close()
    await server.close()  # twice is harmless


async def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:9187") == ("127.0.0.1", 9187)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("9187", ":9187", "host:", "host:port"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    first = await start_metrics_server("127.0.0.1:0")
    try:
        with pytest.raises(OSError, match="cannot serve HTTP"):
            await start_metrics_server(f"127.0.0.1:{first.port}")
    finally:
        await first.close()


class _Refreshed(Collector):
    """A local collector that reads its value asynchronously before each scrape."""

    def __init__(self) -> None:
        self.refreshes = 0

    async def refresh(self) -> None:
        await asyncio.sleep(0)
        self.refreshes += 1

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("test_local_refreshes", "Refreshes so far.", self.refreshes)


async def test_metrics_route_renders_registry_and_local_collectors() -> None:
    local = _Refreshed()
    server = MetricsServer([local])
    await server.start("127.0.0.1:0")
    try:
        metrics.TXN_STARTED.inc()
        samples = await asyncio.to_thread(scrape, server.url("/metrics"))
        assert value(samples, "test_local_refreshes") == 1
        assert value(samples, "percolator_txn_started_total") >= 1
        assert any(name == "percolator_build_info" for name, _ in samples)
        # Without *_created series (disable_created_metrics).
        assert not any(name.endswith("_created") for name, _ in samples)

        code, headers, body = await get(
            server.url("/metrics"), headers={"Accept": "application/openmetrics-text"}
        )
        assert code == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n")
    finally:
        await server.close()


def test_metrics_listen_setting(tmp_path: Path) -> None:
    """Flag, environment variable and TOML key, like every setting of ``serve``."""
    parser = argparse.ArgumentParser()
    server_config.add_arguments(parser)
    assert server_config.load(parser.parse_args([]), environ={}).metrics_listen is None
    env = {"PERCOLATOR_METRICS_LISTEN": "127.0.0.1:9187"}
    assert server_config.load(parser.parse_args([]), environ=env).metrics_listen == (
        "127.0.0.1:9187"
    )
    toml = tmp_path / "percolator.toml"
    toml.write_text('metrics_listen = "0.0.0.0:9100"\n')
    args = parser.parse_args(["--config", str(toml)])
    assert server_config.load(args, environ={}).metrics_listen == "0.0.0.0:9100"
    args = parser.parse_args(["--config", str(toml), "--metrics-listen", "127.0.0.1:0"])
    assert server_config.load(args, environ=env).metrics_listen == "127.0.0.1:0"
