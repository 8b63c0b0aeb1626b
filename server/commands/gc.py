"""``percolator gc``: one MVCC GC pass at the coordinator's safe point."""

from __future__ import annotations

import argparse
import sys

from percolator.server.commands.coordinator import add_store_arguments, resolve_store
from percolator.server.storage.errors import StoreError
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn import eventloop
from percolator.server.txn.coordinator import DEFAULT_COORDINATOR_ADDRESS
from percolator.server.txn.gc import collect_garbage
from percolator.server.txn.lock_resolver import LockResolver
from percolator.server.txn.timestamp_client import (
    CoordinatorClient,
    CoordinatorError,
    GrpcTimestampSource,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``gc`` subcommand."""
    p = subparsers.add_parser(
        "gc",
        help="run one MVCC GC pass now",
        description="Resolve locks below the coordinator's safe point and remove versions no "
        "snapshot can read any more. The coordinator also does this periodically.",
    )
    p.add_argument(
        "--coordinator",
        default=DEFAULT_COORDINATOR_ADDRESS,
        metavar="HOST:PORT",
        help=f"the coordinator (default {DEFAULT_COORDINATOR_ADDRESS})",
    )
    add_store_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    dsns, embedded = resolve_store(args)
    try:
        eventloop.run(_gc(dsns, args.coordinator))
    except (CoordinatorError, StoreError, OSError) as exc:
        print(f"percolator gc: {exc}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


async def _gc(dsns: list[str], coordinator: str) -> None:
    store = await PostgresCellStore.connect(dsns)
    async with CoordinatorClient(coordinator) as control, GrpcTimestampSource(coordinator) as clock:
        try:
            report = await collect_garbage(
                store, LockResolver(store, clock), await control.get_safe_point()
            )
        finally:
            await store.close()
    print(
        f"safe point {report.safe_point}: removed {report.removed.versions_removed} versions "
        f"and {report.removed.rollback_records_removed} rollback records; resolved "
        f"{report.locks_resolved} locks, {report.locks_left} left to their live owners"
    )
