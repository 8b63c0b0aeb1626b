"""``percolator status``: shards, coordinator, SQL servers, observer workers (with their leases),
observers (with their backlog and lag) and the GC safe point, as text tables or JSON.

By default it asks the coordinator over gRPC and probes the shards given with ``--store``
itself (the observers are read through the store too). With ``--url`` it fetches the
coordinator's ``/status.json`` instead (the coordinator must serve HTTP: ``--metrics-listen``),
which needs no shard credentials here.

Exit status: 0 when everything answers, 1 when something is down or stuck (each problem is
printed first), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from percolator.server.status.gather import DEFAULT_TIMEOUT_S
from percolator.server.status.model import ClusterStatus
from percolator.server.status.remote import fetch_status, gather_remote
from percolator.server.status.text import render_text
from percolator.server.storage.dsn import parse_dsns
from percolator.server.txn import eventloop
from percolator.server.txn.coordinator import DEFAULT_COORDINATOR_ADDRESS


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` subcommand."""
    p = subparsers.add_parser(
        "status",
        help="show the deployment's health: shards, coordinator, servers, workers, observers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=os.environ.get("PERCOLATOR_COORDINATOR", DEFAULT_COORDINATOR_ADDRESS),
        help=f"the coordinator (or PERCOLATOR_COORDINATOR; default {DEFAULT_COORDINATOR_ADDRESS})",
    )
    p.add_argument(
        "--store",
        metavar="DSN[,DSN...]",
        default=os.environ.get("PERCOLATOR_STORE"),
        help="the Postgres shards to probe (or PERCOLATOR_STORE; without: shards and observers "
        "are not shown)",
    )
    p.add_argument(
        "--url",
        metavar="URL",
        help="fetch the coordinator's /status.json from its HTTP endpoint instead "
        "(e.g. http://127.0.0.1:9187)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long each part may take to answer (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        print("percolator status: --timeout must be positive", file=sys.stderr)
        return 2
    status: ClusterStatus
    if args.url:
        status = fetch_status(args.url, args.timeout)
    else:
        try:
            dsns = parse_dsns(args.store) if args.store else None
        except ValueError as exc:
            print(f"percolator status: --store: {exc}", file=sys.stderr)
            return 2
        status = eventloop.run(gather_remote(args.coordinator, dsns, args.timeout))
    if args.json:
        print(json.dumps(status.to_json(), indent=2))
    else:
        sys.stdout.write(render_text(status))
    sys.stdout.flush()
    return 0 if status.ok else 1
