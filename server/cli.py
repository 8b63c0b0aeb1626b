"""The `percolator` command line: one subcommand per module in ``percolator.server.commands``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Before gRPC loads: the processes this CLI forks (serve --processes' workers, embedded Postgres)
# exec at once, so gRPC's fork handlers have nothing to protect, and they log a line at each
# fork while gRPC threads run.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from percolator.server import logs, python_gc

# Each module registers its subcommand; a module that is absent is skipped, so the CLI still
# works while a command is being built.
COMMAND_MODULES = ("serve", "worker", "coordinator", "gc", "bench", "demo", "cluster", "status")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="percolator",
        description="Percolator: SQL with snapshot-isolated transactions over Postgres shards.",
    )
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="log lines as text or as one JSON object each (default text)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"percolator.server.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"percolator.server.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    python_gc.tune_for_serving()
    if not getattr(args, "run", None):
        parser.print_help()
        sys.exit(0 if args.command is None else 2)
    sys.exit(args.run(args) or 0)


if __name__ == "__main__":
    main()
