"""``percolator coordinator``: the timestamp oracle and liveness registry, over gRPC."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.txn import eventloop
from percolator.server.txn.coordinator import DEFAULT_COORDINATOR_ADDRESS, start_coordinator
from percolator.server.txn.liveness import DEFAULT_GC_LIFETIME_MS
from percolator.server.txn.timestamps import OracleError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``coordinator`` subcommand."""
    p = subparsers.add_parser(
        "coordinator",
        help="run the coordinator (timestamp oracle, liveness registry)",
        description="Serve timestamps and the GC safe point over gRPC until SIGTERM or SIGINT.",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_COORDINATOR_ADDRESS,
        metavar="HOST:PORT",
        help=f"address to serve on, port 0 = any free port (default {DEFAULT_COORDINATOR_ADDRESS})",
    )
    p.add_argument(
        "--store",
        metavar="DSN",
        help="Postgres DSN holding the timestamp high-water mark "
        "(default: an embedded Postgres in --data-dir)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        help="data directory of the embedded Postgres when --store is not given (default ./data)",
    )
    p.add_argument(
        "--gc-lifetime",
        type=float,
        default=DEFAULT_GC_LIFETIME_MS / 1000,
        metavar="SECONDS",
        help="keep versions readable for at least this long (default 600)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT."""
    embedded = None
    dsn = args.store
    if dsn is None:
        embedded = EmbeddedPostgres(args.data_dir)
        dsn = embedded.start()
    try:
        return eventloop.run(_serve(args.listen, dsn, int(args.gc_lifetime * 1000)))
    except (OracleError, OSError, ValueError) as exc:
        print(f"percolator coordinator: {exc}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()


async def _serve(listen: str, dsn: str, gc_lifetime_ms: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    handle = await start_coordinator(listen, dsn, gc_lifetime_ms=gc_lifetime_ms)
    print(f"percolator coordinator listening on {handle.address}", flush=True)
    try:
        await stop.wait()
    finally:
        await handle.stop()
    return 0
