"""``percolator serve``: the SQL server (Postgres wire protocol) and, unless told otherwise,
everything it needs in one process.

With no options: an embedded Postgres in ``./data``, the coordinator (oracle, liveness, GC) on
127.0.0.1:7470, and SQL on 127.0.0.1:5433. Settings come from flags, ``PERCOLATOR_*``
environment variables or a TOML file (see ``percolator.server.config``). SIGTERM or SIGINT
shuts down gracefully: no new connections, running statements get the shutdown timeout to
finish, open transactions roll back; nothing is left half-committed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from percolator.server import config as server_config
from percolator.server.runtime import RunningServer, resolve_dsns, start_server
from percolator.server.storage.errors import StoreError
from percolator.server.txn import eventloop
from percolator.server.txn.timestamps import OracleError
from percolator.server.worker_pool import RunningPool, start_pool

log = logging.getLogger("percolator.serve")

BANNER = """percolator is running
  SQL:          psql "host={host} port={port} user={user} dbname={database}"
  auth:         {auth}
  coordinator:  {coordinator}
  Python:       db = await percolator.clients.connect(coordinator="{coordinator}", store=...)
  metrics:      {metrics}"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` subcommand."""
    p = subparsers.add_parser(
        "serve",
        help="run the SQL server (embedded Postgres and coordinator by default)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    server_config.add_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = server_config.load(args)
    except (ValueError, OSError) as exc:
        print(f"percolator: {exc}", file=sys.stderr)
        return 2
    try:
        dsns, embedded = resolve_dsns(config)
    except (StoreError, OSError, RuntimeError) as exc:
        print(f"percolator: cannot start the embedded Postgres: {exc}", file=sys.stderr)
        return 1
    log_settings = (getattr(args, "log_level", "WARNING"), getattr(args, "log_format", "text"))
    try:
        return eventloop.run(_serve(config, dsns, log_settings))
    except (OracleError, StoreError, OSError, ValueError) as exc:
        print(f"percolator: {exc}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()


async def _serve(
    config: server_config.ServerConfig, dsns: list[str], log_settings: tuple[str, str]
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server: RunningServer | RunningPool = (
        await start_server(config, dsns)
        if config.processes == 1
        else await start_pool(config, dsns, log_settings)
    )
    host, _ = config.host_port
    if config.auth_method == "trust" and host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"percolator: WARNING: trust authentication on {host}: anyone who can reach this "
            "address can connect as any user; set --password (or PERCOLATOR_PASSWORD)",
            file=sys.stderr,
            flush=True,
        )
    print(
        BANNER.format(
            host=host,
            port=server.port,
            user=config.user,
            database=config.database,
            auth=config.auth_method,
            coordinator=server.coordinator_address,
            metrics=server.metrics_url or "off (--metrics-listen HOST:PORT)",
        ),
        flush=True,
    )
    log.info("listening on %s:%d", host, server.port)
    await stop.wait()
    log.info("shutting down")
    await server.close()
    return 0
