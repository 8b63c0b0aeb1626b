#!/usr/bin/env python3
"""Container health checks of a Percolator deployment (installed in the images as
``percolator-healthcheck``; used by docker/compose.yaml).

Each check asks the process itself, not just its port, and exits 0 when it answered:

- ``sql [HOST:PORT]``: log in to the SQL server (as ``PERCOLATOR_USER`` with
  ``PERCOLATOR_PASSWORD`` into ``PERCOLATOR_DATABASE``, the settings the server itself reads)
  and run ``SELECT 1``. Default address 127.0.0.1:5433.
- ``coordinator [HOST:PORT]``: ask the coordinator for the GC safe point (a read-only gRPC
  call). Default address 127.0.0.1:7470.
- ``worker [HOST:PORT]``: ask the coordinator (default ``PERCOLATOR_COORDINATOR``) whether an
  observer worker of this container (its member id starts with this host name) holds a lease
  in the ``workers`` group.
- ``spark-master [URL]``: the master's JSON status says ``ALIVE``. Default
  http://127.0.0.1:8080.
- ``spark-worker [URL]``: the master (default ``SPARK_MASTER_WEBUI``, else
  http://spark-master:8080) lists an ``ALIVE`` worker on this container's host name or address.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

TIMEOUT_S = 5.0
"""Each check gives up after this long (Compose's own ``timeout`` should be a bit longer)."""


async def _check_sql(address: str) -> str:
    import asyncpg

    host, port = _split(address, 5433)
    conn = await asyncpg.connect(
        host=host,
        port=port,
        user=os.environ.get("PERCOLATOR_USER", "postgres"),
        password=os.environ.get("PERCOLATOR_PASSWORD") or None,
        database=os.environ.get("PERCOLATOR_DATABASE", "postgres"),
        ssl=False,
        timeout=TIMEOUT_S,
    )
    try:
        value = await conn.fetchval("SELECT 1", timeout=TIMEOUT_S)
    finally:
        await conn.close(timeout=TIMEOUT_S)
    if value != 1:
        raise RuntimeError(f"SELECT 1 returned {value!r}")
    return f"SQL server at {host}:{port} answered SELECT 1"


async def _check_coordinator(address: str) -> str:
    from percolator.server.txn.timestamp_client import CoordinatorClient

    async with CoordinatorClient(address, timeout_s=TIMEOUT_S) as client:
        safe_point = await client.get_safe_point()
    return f"coordinator at {address} answered (safe point {safe_point})"


async def _check_worker(address: str) -> str:
    from percolator.server.txn.observers.slices import WORKERS_GROUP
    from percolator.server.txn.timestamp_client import CoordinatorClient

    prefix = socket.gethostname() + "-"
    async with CoordinatorClient(address, timeout_s=TIMEOUT_S) as client:
        members = await client.list_group(WORKERS_GROUP)
    mine = [m.member_id for m in members if m.member_id.startswith(prefix)]
    if not mine:
        raise RuntimeError(
            f"no member of group {WORKERS_GROUP!r} at {address} runs on host "
            f"{socket.gethostname()} ({len(members)} members)"
        )
    return f"observer worker {mine[0]} holds a lease at {address}"


def _fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url.rstrip("/") + "/json/", timeout=TIMEOUT_S) as response:
        return json.load(response)


def _check_spark_master(url: str) -> str:
    status = _fetch_json(url).get("status")
    if status != "ALIVE":
        raise RuntimeError(f"Spark master at {url} is {status}")
    return f"Spark master at {url} is ALIVE"


def _local_names() -> set[str]:
    """This container's host names and the addresses of its interfaces (Spark registers a
    worker under an address unless SPARK_LOCAL_HOSTNAME names it)."""
    import psutil

    names = {socket.gethostname(), socket.getfqdn()}
    if os.environ.get("SPARK_LOCAL_HOSTNAME"):
        names.add(os.environ["SPARK_LOCAL_HOSTNAME"])
    for addresses in psutil.net_if_addrs().values():
        names.update(a.address for a in addresses if a.family in (socket.AF_INET, socket.AF_INET6))
    try:
        names.update(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None))
    except OSError:
        pass
    return names


def _check_spark_worker(url: str) -> str:
    workers = _fetch_json(url).get("workers", [])
    names = _local_names()
    for worker in workers:
        if worker.get("state") == "ALIVE" and worker.get("host") in names:
            return f"Spark worker {worker.get('id')} is ALIVE at {url}"
    raise RuntimeError(f"the Spark master at {url} lists no ALIVE worker on {sorted(names)}")


def _split(address: str, default_port: int) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host:
        return address or "127.0.0.1", default_port
    return host, int(port)


CHECKS: dict[str, tuple[Callable[[str], Any], Callable[[], str]]] = {
    "sql": (_check_sql, lambda: "127.0.0.1:5433"),
    "coordinator": (_check_coordinator, lambda: "127.0.0.1:7470"),
    "worker": (
        _check_worker,
        lambda: os.environ.get("PERCOLATOR_COORDINATOR", "127.0.0.1:7470"),
    ),
    "spark-master": (_check_spark_master, lambda: "http://127.0.0.1:8080"),
    "spark-worker": (
        _check_spark_worker,
        lambda: os.environ.get("SPARK_MASTER_WEBUI", "http://spark-master:8080"),
    ),
}
"""Check name -> (the check, its default target)."""


def build_parser() -> argparse.ArgumentParser:
    """The command line: a check name and an optional target."""
    parser = argparse.ArgumentParser(
        prog="percolator-healthcheck",
        description="Exit 0 when a Percolator (or Spark) process of this container answers.",
    )
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("target", nargs="?", help="HOST:PORT or URL (see the module docstring)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one check; print one line saying what answered, or why not."""
    args = build_parser().parse_args(argv)
    check, default_target = CHECKS[args.check]
    target = args.target or default_target()
    try:
        result = check(target)
        if asyncio.iscoroutine(result):
            result = asyncio.run(asyncio.wait_for(result, TIMEOUT_S * 2))
    except Exception as exc:
        print(f"unhealthy: {args.check} {target}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
