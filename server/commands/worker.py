"""``percolator worker``: an observer worker process; run as many as the work needs.

It joins the ``workers`` group at the coordinator under a lease and scans its slice of the
notifications (the slices are re-split whenever a worker joins or its lease ends), running the
observers of the catalog it reads from the store. SIGTERM or SIGINT: runs in flight finish,
the worker leaves the group, and the others take over its slice at once. With
``--metrics-listen`` it serves Prometheus metrics (docs/metrics.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from percolator.server.config import add_metrics_argument
from percolator.server.engine import Engine, EngineConfig
from percolator.server.metrics.http import MetricsServer
from percolator.server.runtime import start_observer_worker, start_process_metrics
from percolator.server.storage.dsn import parse_dsns
from percolator.server.storage.errors import StoreError
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn import eventloop
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.coordinator import DEFAULT_COORDINATOR_ADDRESS
from percolator.server.txn.liveness import LivenessReporter
from percolator.server.txn.observers.slices import DEFAULT_WORKER_LEASE_MS
from percolator.server.txn.observers.worker import WorkerConfig
from percolator.server.txn.timestamp_client import CoordinatorClient, GrpcTimestampSource


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``worker`` subcommand."""
    p = subparsers.add_parser(
        "worker",
        help="run an observer worker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--store",
        metavar="DSN[,DSN...]",
        default=os.environ.get("PERCOLATOR_STORE"),
        help="Postgres shards (or PERCOLATOR_STORE)",
    )
    p.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=os.environ.get("PERCOLATOR_COORDINATOR", DEFAULT_COORDINATOR_ADDRESS),
        help=f"the coordinator (or PERCOLATOR_COORDINATOR; default {DEFAULT_COORDINATOR_ADDRESS})",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=WorkerConfig.concurrency,
        help=f"observer runs in flight (default {WorkerConfig.concurrency})",
    )
    p.add_argument(
        "--lease-ms",
        type=int,
        default=DEFAULT_WORKER_LEASE_MS,
        help="membership lease: how soon others take over if this worker dies "
        f"(default {DEFAULT_WORKER_LEASE_MS})",
    )
    p.add_argument(
        "--catalog-poll",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often to look for new, changed or dropped observers (default 1)",
    )
    add_metrics_argument(p, os.environ.get("PERCOLATOR_METRICS_LISTEN"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.store:
        print("percolator worker: --store (or PERCOLATOR_STORE) is required", file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("percolator worker: --concurrency must be at least 1", file=sys.stderr)
        return 2
    try:
        return eventloop.run(_work(args))
    except (StoreError, OSError, ValueError) as exc:
        print(f"percolator worker: {exc}", file=sys.stderr)
        return 1


async def _work(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    store = await PostgresCellStore.connect(parse_dsns(args.store))
    clock = GrpcTimestampSource(args.coordinator)
    control = CoordinatorClient(args.coordinator)
    client = TransactionClient(store, clock)
    reporter = LivenessReporter(control, client.min_running_start_ts)
    engine = Engine(client, EngineConfig(catalog_poll_s=args.catalog_poll))
    metrics: MetricsServer | None = None
    try:
        reporter.start()
        await engine.start()
        if args.metrics_listen:
            metrics = await start_process_metrics(args.metrics_listen, store, engine)
        worker = await start_observer_worker(
            client,
            engine,
            control,
            config=WorkerConfig(concurrency=args.concurrency),
            lease_ms=args.lease_ms,
        )
        print(f"percolator worker running ({worker.name})", flush=True)
        if metrics is not None:
            print(f"metrics: {metrics.url('/metrics')}", flush=True)
        await stop.wait()
        await worker.stop()
    finally:
        if metrics is not None:
            await metrics.close()
        await engine.close()
        await client.close()
        await reporter.stop()
        await control.close()
        await clock.close()
        await store.close()
    return 0
