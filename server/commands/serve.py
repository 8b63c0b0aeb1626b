"""``percolator serve``: run the system on one machine.

With no options: an embedded Postgres in ``./data``, the coordinator (oracle, liveness, GC) on
127.0.0.1:7470. The SQL front end (Postgres wire protocol on port 5433) is not built yet; until
it is, applications use the Python client API against this process.
"""

from __future__ import annotations

import argparse

from percolator.server.commands import coordinator

BANNER = """percolator is running: coordinator on {0}
  Python:  db = await percolator.clients.connect(coordinator="{0}", data_dir=...)
  (the SQL front end on port 5433 is not implemented yet)"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` subcommand."""
    p = subparsers.add_parser(
        "serve",
        help="run the system (embedded Postgres and coordinator by default)",
        description=__doc__,
    )
    coordinator.add_coordinator_arguments(p, "--coordinator-listen")
    coordinator.add_store_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return coordinator.run(args, BANNER)
