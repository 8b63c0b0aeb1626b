"""``percolator bench NAME ...``: benchmarks that print their figures beside a baseline.

Each benchmark is a module in ``percolator.bench`` with ``add_arguments(parser)`` and
``run(args) -> int``; add a :class:`Benchmark` entry below to expose a new one. An entry whose
module is absent is skipped, and one that fails to import reports why when run, so one broken
benchmark never breaks the rest of the CLI.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """One entry of ``percolator bench``."""

    name: str
    module: str
    help: str


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "tso",
        "percolator.bench.tso",
        "timestamps per second through the coordinator, for 1 to 10,000 concurrent requesters",
    ),
    Benchmark(
        "pgbench",
        "percolator.bench.pgbench",
        "pgbench (TPC-B-like and select-only) against the SQL server and the Postgres under it",
    ),
    Benchmark(
        "observers",
        "percolator.bench.observers",
        "latency from a change's commit to its observer's commit (1 and 4 workers), and the "
        "cost of finding dirty rows among 10k vs 1M clean ones",
    ),
    Benchmark(
        "spark",
        "percolator.bench.spark",
        "Spark connector reads and writes (rows/s) beside Spark's JDBC source on one Postgres",
    ),
    Benchmark(
        "webindex",
        "percolator.bench.webindex",
        "the paper's Figure 7: time from a re-crawl to an up-to-date web index, Spark batch "
        "recompute vs observers, for 0.1/1/10 %% re-crawls",
    ),
    Benchmark(
        "cluster",
        "percolator.bench.cluster",
        "throughput of a local cluster with 1/2 shards, 1/2 SQL servers and 1/4 observer "
        "workers: transfers per second and observer runs per second",
    ),
    Benchmark(
        "joins",
        "percolator.bench.joins",
        "an OLTP join (order lines to stock by primary key): lookup join vs hash join vs Postgres",
    ),
    Benchmark(
        "txn",
        "percolator.bench.txn",
        "transactions per second against raw Postgres (the paper's Figure 8), multi-cell commits",
    ),
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bench`` subcommand with one sub-subcommand per benchmark."""
    p = subparsers.add_parser(
        "bench", help="run a benchmark", description="Run a benchmark (each prints a baseline)."
    )
    names = p.add_subparsers(dest="benchmark", metavar="NAME")
    for bench in BENCHMARKS:
        try:
            module = importlib.import_module(bench.module)
        except ImportError as exc:
            if isinstance(exc, ModuleNotFoundError) and exc.name == bench.module:
                continue
            bp = names.add_parser(bench.name, help=f"{bench.help} (unavailable)")
            bp.set_defaults(run=_unavailable(bench, exc))
            continue
        bp = names.add_parser(bench.name, help=bench.help, description=bench.help)
        module.add_arguments(bp)
        bp.set_defaults(run=module.run)


def _unavailable(bench: Benchmark, error: ImportError) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(
            f"percolator bench {bench.name}: cannot load {bench.module}: {error}", file=sys.stderr
        )
        return 1

    return run
