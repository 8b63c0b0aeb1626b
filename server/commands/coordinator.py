"""``percolator coordinator``: the timestamp oracle, liveness registry and MVCC GC, over gRPC,
and the reclaimer of dropped and truncated tables' storage."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from percolator.server.config import add_metrics_argument
from percolator.server.metrics.http import MetricsServer
from percolator.server.runtime import start_process_metrics, start_reclaimer
from percolator.server.status.service import StatusService, start_status_page
from percolator.server.storage.dsn import parse_dsns
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.errors import StoreError
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn import eventloop
from percolator.server.txn.coordinator import (
    DEFAULT_COORDINATOR_ADDRESS,
    DEFAULT_GC_INTERVAL_S,
    start_coordinator,
)
from percolator.server.txn.liveness import DEFAULT_GC_LIFETIME_MS
from percolator.server.txn.timestamps import OracleError


def add_store_arguments(p: argparse.ArgumentParser) -> None:
    """``--store`` and ``--data-dir``, shared by every command that opens the store."""
    p.add_argument(
        "--store",
        metavar="DSN[,DSN...]",
        help="Postgres shard DSNs, comma-separated; the first also holds the timestamp "
        "high-water mark (default: an embedded Postgres in --data-dir)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        help="data directory of the embedded Postgres when --store is not given (default ./data)",
    )


def add_coordinator_arguments(p: argparse.ArgumentParser, listen_flag: str) -> None:
    """The coordinator's own options; ``listen_flag`` names the address option."""
    p.add_argument(
        listen_flag,
        dest="coordinator_listen",
        default=DEFAULT_COORDINATOR_ADDRESS,
        metavar="HOST:PORT",
        help=f"coordinator address, port 0 = any free port (default {DEFAULT_COORDINATOR_ADDRESS})",
    )
    p.add_argument(
        "--gc-lifetime",
        type=float,
        default=DEFAULT_GC_LIFETIME_MS / 1000,
        metavar="SECONDS",
        help="keep versions readable for at least this long (default 600)",
    )
    p.add_argument(
        "--gc-interval",
        type=float,
        default=DEFAULT_GC_INTERVAL_S,
        metavar="SECONDS",
        help=f"run MVCC GC this often (default {DEFAULT_GC_INTERVAL_S:.0f})",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``coordinator`` subcommand."""
    p = subparsers.add_parser(
        "coordinator",
        help="run the coordinator (timestamp oracle, liveness registry, GC)",
        description="Serve timestamps and the GC safe point over gRPC, and run MVCC GC, "
        "until SIGTERM or SIGINT.",
    )
    add_coordinator_arguments(p, "--listen")
    add_store_arguments(p)
    add_metrics_argument(p, os.environ.get("PERCOLATOR_METRICS_LISTEN"))
    p.set_defaults(run=run)


def resolve_store(args: argparse.Namespace) -> tuple[list[str], EmbeddedPostgres | None]:
    """The shard DSNs to use, starting the embedded Postgres when none are given."""
    if args.store:
        return parse_dsns(args.store), None
    embedded = EmbeddedPostgres(args.data_dir)
    return [embedded.start()], embedded


def run(args: argparse.Namespace, banner: str = "percolator coordinator listening on {}") -> int:
    """Run until SIGTERM or SIGINT."""
    dsns, embedded = resolve_store(args)
    try:
        return eventloop.run(serve_coordinator(args, dsns, banner))
    except (OracleError, StoreError, OSError, ValueError) as exc:
        print(f"percolator: {exc}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()


async def serve_coordinator(args: argparse.Namespace, dsns: list[str], banner: str) -> int:
    """Open the store, start the coordinator with GC, print ``banner`` (and the metrics URL
    with ``--metrics-listen``), wait for a signal."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    store = await PostgresCellStore.connect(dsns)
    try:
        handle = await start_coordinator(
            args.coordinator_listen,
            dsns[0],
            gc_lifetime_ms=int(args.gc_lifetime * 1000),
            gc_store=store,
            gc_interval_s=args.gc_interval,
        )
        stop_reclaimer = await start_reclaimer(store, handle, args.gc_interval)
        metrics: MetricsServer | None = None
        status: StatusService | None = None
        try:
            listen = getattr(args, "metrics_listen", None)
            if listen:
                metrics = await start_process_metrics(listen, store)
                # /status and /status.json on the same endpoint (docs/status.md).
                status = await start_status_page(
                    metrics, handle, dsns, store, gc_lifetime_ms=int(args.gc_lifetime * 1000)
                )
            print(banner.format(handle.address), flush=True)
            if metrics is not None:
                print(f"metrics: {metrics.url('/metrics')}", flush=True)
            await stop.wait()
        finally:
            if status is not None:
                await status.close()
            if metrics is not None:
                await metrics.close()
            await stop_reclaimer()
            await handle.stop()
    finally:
        await store.close()
    return 0
