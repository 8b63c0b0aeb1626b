"""A small HTTP server on the process's event loop: ``/metrics`` now, more routes later.

It speaks just enough HTTP/1.1 for Prometheus, curl and a browser: GET and HEAD, one request
per connection (``Connection: close``), bounded request heads and read timeouts. Handlers are
coroutines on the same loop as the rest of the process, so they may read its state (and await
the store) without locks or threads::

    server = MetricsServer(collectors=[StoreRoundTrips(store)])
    server.add_route("/status", status_page)      # async def status_page(request) -> Response
    await server.start("127.0.0.1:9187")
    ...
    await server.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from percolator.server.metrics import definitions as metrics

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
"""A client that sends no complete request head within this long is dropped."""
REFRESH_GUARD_S = 5.0
"""Upper bound on the scrape-time refreshes, whatever their own timeouts."""


@dataclass(frozen=True)
class Request:
    """An HTTP request as a handler sees it."""

    method: str
    """``GET`` or ``HEAD`` (others are answered 405 before any handler runs)."""
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Header names in lower case."""


@dataclass(frozen=True)
class Response:
    """What a handler returns."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/plain; charset=utf-8"
    headers: Sequence[tuple[str, str]] = ()


Handler = Callable[[Request], Awaitable[Response]]
"""A route's coroutine."""


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); port 0 = any free port."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"metrics address must be HOST:PORT, got {listen!r}")
    return host, int(port)


class HttpServer:
    """Routes exact paths to handlers; see the module docstring."""

    def __init__(self) -> None:
        self._routes: dict[str, Handler] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.host = ""
        self.port = 0

    def add_route(self, path: str, handler: Handler) -> None:
        """Serve ``path`` (exact match, e.g. ``/status``) with ``handler``; before or after
        :meth:`start`. A second handler for the same path replaces the first."""
        if not path.startswith("/"):
            raise ValueError(f"a route is a path starting with '/', got {path!r}")
        self._routes[path] = handler

    @property
    def routes(self) -> list[str]:
        """The paths served."""
        return sorted(self._routes)

    async def start(self, listen: str) -> None:
        """Listen on ``HOST:PORT`` (port 0: any free port; :attr:`port` tells which)."""
        host, port = parse_listen(listen)
        try:
            self._server = await asyncio.start_server(
                self._serve, host, port, limit=MAX_REQUEST_HEAD_BYTES, reuse_address=True
            )
        except OSError as exc:
            raise OSError(f"cannot serve HTTP on {listen}: {exc.strerror or exc}") from exc
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HTTP endpoint on %s", self.url())

    def url(self, path: str = "/") -> str:
        """The URL of ``path`` on this server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    async def close(self) -> None:
        """Stop listening and end the requests in flight."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=READ_TIMEOUT_S)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), READ_TIMEOUT_S)

    # -- one connection ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            request = await self._read_request(reader)
            response = await self._respond(request) if isinstance(request, Request) else request
            head_only = isinstance(request, Request) and request.method == "HEAD"
            writer.write(_encode(response, head_only))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass  # the client went away or never sent a request: nothing to answer
        except asyncio.CancelledError:
            pass  # closing
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            self._connections.discard(task)

    async def _read_request(self, reader: asyncio.StreamReader) -> Request | Response:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return _error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _error(HTTPStatus.BAD_REQUEST)
        method, target, _ = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        return Request(method, url.path or "/", parse_qs(url.query), headers)

    async def _respond(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _error(HTTPStatus.METHOD_NOT_ALLOWED, headers=[("Allow", "GET, HEAD")])
        handler = self._routes.get(request.path)
        if handler is None:
            listing = "".join(f"{path}\n" for path in self.routes)
            return Response(f"not found; served here:\n{listing}".encode(), status=404)
        try:
            return await handler(request)
        except Exception:
            log.exception("HTTP handler for %s failed", request.path)
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR)


def _error(status: HTTPStatus, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(f"{status.value} {status.phrase}\n".encode(), status.value, headers=headers)


def _encode(response: Response, head_only: bool) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:  # a status http.HTTPStatus does not name
        reason = ""
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in response.headers),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


# -- /metrics ----------------------------------------------------------------------------------


class _Exposition(Collector):
    """The process-wide registry followed by one endpoint's own collectors."""

    def __init__(self, registry: Collector, local: list[Collector]) -> None:
        self.registry = registry
        self.local = local

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()
        for collector in self.local:
            yield from collector.collect()


class MetricsServer(HttpServer):
    """An :class:`HttpServer` serving ``/metrics``: the process-wide registry (every metric of
    :mod:`~percolator.server.metrics.definitions`, plus the process's CPU, memory and file
    descriptors) and this endpoint's own collectors.

    A collector with an ``async def refresh()`` is refreshed before each scrape renders (the
    observers' backlog reads the store); everything else renders synchronously on the loop.
    """

    def __init__(
        self, collectors: Iterable[Collector] = (), *, registry: Collector = REGISTRY
    ) -> None:
        super().__init__()
        self._exposition = _Exposition(registry, list(collectors))
        self.add_route("/metrics", self._metrics)

    def add_collector(self, collector: Collector) -> None:
        """Expose ``collector``'s metrics on this endpoint only (their names must not clash
        with the registry's)."""
        self._exposition.local.append(collector)

    async def _metrics(self, request: Request) -> Response:
        refreshes = [
            refresh()
            for c in self._exposition.local
            if (refresh := getattr(c, "refresh", None)) is not None
        ]
        if refreshes:
            started = time.monotonic()
            try:
                async with asyncio.timeout(REFRESH_GUARD_S):
                    await asyncio.gather(*refreshes, return_exceptions=True)
            except TimeoutError:
                metrics.REFRESH_ERRORS.labels("guard").inc()
                log.warning("metrics: refreshes took over %.1fs", time.monotonic() - started)
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(self._exposition), content_type=content_type)


async def start_metrics_server(listen: str, collectors: Iterable[Collector] = ()) -> MetricsServer:
    """A :class:`MetricsServer` listening on ``listen`` (``HOST:PORT``, port 0 = any)."""
    server = MetricsServer(collectors)
    await server.start(listen)
    return server
