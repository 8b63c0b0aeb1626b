"""``percolator bench webindex``: the paper's Figure 7 at our scale, Spark batch vs observers.

Two Percolator deployments on one embedded Postgres, each a ``percolator serve`` process over a
database of its own, hold the same crawl (``--docs`` pages of the synthetic crawl generator):

- **observers**: the web-index observers keep the index up to date (``--workers`` observer
  workers in the server process);
- **batch**: no observers; the Spark batch job (``examples/webindex/spark_batch.py``) recomputes
  the whole index from a snapshot and overwrites it, as the paper's MapReduce did.

Both start from an index built by the batch job over the initial crawl (building it with the
observers, a page at a time, would take the observers' initial-load time, which is not what the
figure is about); the observers are created after it. Then, for each re-crawl fraction (default
0.1 %, 1 %, 10 % of the pages: changed contents and links, new pages, deleted pages), the same
re-crawl is written to both, and the time from its first write to an up-to-date index is
measured: for the observers, until ``percolator.observers`` shows nothing pending (and no commit
still holds locks); for the batch, until the job has overwritten the index. At the end both
indexes are checked against the batch computation over their own snapshot, row for row.

The crossover is the re-crawl fraction at which both take the same time: interpolated between
the measured fractions when the lines cross there, else extrapolated from the observers' cost
per changed page (a line through their points) and the batch's mean time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from percolator.bench.common import create_databases, sql_conninfo
from percolator.bench.spark import spark_session
from percolator.examples.webindex.batch import verify
from percolator.examples.webindex.crawl import Crawl, CrawlConfig, Recrawl
from percolator.examples.webindex.demo import (
    delete_pages,
    load_pages,
    locks_checker,
    upsert_pages,
    wait_idle,
)
from percolator.examples.webindex.schema import OBSERVERS, TABLES
from percolator.examples.webindex.spark_batch import recompute
from percolator.server.config import ServerConfig
from percolator.server.runtime import ServerProcess
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.txn import eventloop

DEFAULT_FRACTIONS = (0.001, 0.01, 0.1)
MAX_DIFFERENCES_SHOWN = 10
CATALOG_POLL_WAIT_S = 2.5
"""Longer than a SQL server's catalog poll (1 s by default) with room to spare."""


@dataclass
class Point:
    """One re-crawl, applied to both sides."""

    fraction: float
    pages_written: int
    pages_deleted: int
    observers_s: float
    batch_s: float
    observers_write_s: float
    """Of ``observers_s``: writing the re-crawl (the observers already run meanwhile)."""
    batch_write_s: float
    """Of ``batch_s``: writing the re-crawl, before the job starts."""


@dataclass
class Figure7:
    """The whole run."""

    docs: int
    partitions: int
    workers: int
    load_s: float
    """Writing the initial crawl (one side)."""
    initial_batch_s: float
    """The batch job over the initial crawl (the batch side's run)."""
    points: list[Point] = field(default_factory=list)
    verified: dict[str, bool] = field(default_factory=dict)
    crossover_fraction: float | None = None
    crossover: str = ""
    """How the crossover was found: ``measured`` (between two fractions) or ``extrapolated``."""


@dataclass
class Side:
    """One deployment: its server, a connection, and the Spark options to reach its store."""

    name: str
    server: ServerProcess
    conn: psycopg.Connection
    spark_options: dict[str, str]
    writes_pending: Callable[[], bool]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docs", type=int, default=200_000, help="pages in the crawl (200,000)")
    p.add_argument(
        "--recrawls",
        default=",".join(str(f) for f in DEFAULT_FRACTIONS),
        help="re-crawl fractions, in order (default 0.001,0.01,0.1)",
    )
    p.add_argument("--partitions", type=int, default=2, help="Spark cores (default 2)")
    p.add_argument("--workers", type=int, default=1, help="observer workers (default 1)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=ServerConfig.observer_concurrency,
        help=f"observer runs in flight per worker ({ServerConfig.observer_concurrency})",
    )
    p.add_argument("--seed", type=int, default=0, help="crawl seed (default 0)")
    p.add_argument(
        "--gc-lifetime",
        type=float,
        default=60.0,
        help="the servers' GC lifetime in seconds (default 60: every batch run overwrites the "
        "whole index, and the storage it replaces is freed only after this)",
    )
    p.add_argument("--chart", type=Path, help="write the figure as a PNG here (matplotlib)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        fractions = [float(f) for f in args.recrawls.split(",") if f.strip()]
    except ValueError:
        print(f"percolator bench webindex: bad --recrawls {args.recrawls!r}", file=sys.stderr)
        return 2
    if shutil.which("java") is None:
        print("percolator bench webindex: no java on PATH (Spark needs Java 17)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="percolator-bench-webindex-"))
    pg = EmbeddedPostgres(work / "pg")
    servers: list[ServerProcess] = []
    spark = None
    try:
        base = pg.start()
        inc_dsn, batch_dsn = eventloop.run(create_databases(base, "wi_observers", "wi_batch"))
        gc = ("--gc-lifetime", str(args.gc_lifetime))
        inc = ServerProcess(
            inc_dsn,
            "--observer-workers",
            str(args.workers),
            "--observer-concurrency",
            str(args.concurrency),
            *gc,
        )
        bat = ServerProcess(batch_dsn, "--observer-workers", "0", *gc)
        servers += [inc, bat]
        for s in servers:
            s.start()
        spark = spark_session(args.partitions, "percolator-bench-webindex")
        with _side("observers", inc) as observers, _side("batch", bat) as batch:
            result = _measure(spark, args, fractions, observers, batch)
        if args.chart:
            chart(result, args.chart)
        _report(result, args.json)
        return 0 if all(result.verified.values()) else 1
    finally:
        if spark is not None:
            spark.stop()
        for s in servers:
            s.stop()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _side(name: str, server: ServerProcess) -> Iterator[Side]:
    """A :class:`Side` over a started server (its connection is closed at the end)."""
    with psycopg.connect(sql_conninfo(server), autocommit=True) as conn:
        options = {"store": server.store_dsn, "coordinator": server.coordinator or ""}
        yield Side(name, server, conn, options, locks_checker([server.store_dsn]))


def _measure(
    spark: Any, args: argparse.Namespace, fractions: Sequence[float], inc: Side, bat: Side
) -> Figure7:
    crawl = Crawl(CrawlConfig(pages=args.docs, seed=args.seed))
    pages = list(crawl.pages.values())
    for side in (inc, bat):
        for statement in TABLES:
            side.conn.execute(statement)
    started = time.perf_counter()
    load_pages(bat.conn, pages)
    load_s = time.perf_counter() - started
    load_pages(inc.conn, pages)
    initial = recompute(spark, bat.spark_options).elapsed_s
    recompute(spark, inc.spark_options)
    for statement in OBSERVERS:
        inc.conn.execute(statement)
    result = Figure7(args.docs, args.partitions, args.workers, load_s, initial)
    _progress(f"initial: load {load_s:.1f} s, batch job {initial:.1f} s")
    for fraction in fractions:
        change = crawl.recrawl(fraction)
        inc_write, inc_total = _timed_recrawl(inc, change, lambda: _settle(inc))
        bat_write, bat_total = _timed_recrawl(
            bat, change, lambda: recompute(spark, bat.spark_options)
        )
        point = Point(
            fraction,
            len(change.upserts),
            len(change.deletes),
            inc_total,
            bat_total,
            inc_write,
            bat_write,
        )
        result.points.append(point)
        _progress(
            f"re-crawl {fraction:g}: {point.pages_written + point.pages_deleted} pages, "
            f"observers {inc_total:.1f} s, batch {bat_total:.1f} s"
        )
    # The batch job's overwrite gives each table new storage, which a SQL server learns of at
    # its next catalog poll (docs/spark.md): let it pass before reading through the server.
    time.sleep(CATALOG_POLL_WAIT_S)
    for side in (inc, bat):
        check = verify(side.conn)
        result.verified[side.name] = check.ok
        for line in check.differences[:MAX_DIFFERENCES_SHOWN]:
            _progress(f"{side.name}: {line}")
    result.crossover_fraction, result.crossover = crossover(result.points, args.docs)
    return result


def _settle(side: Side) -> None:
    wait_idle(side.conn, timeout_s=3600, writes_pending=side.writes_pending)


def _timed_recrawl(side: Side, change: Recrawl, then: Callable[[], object]) -> tuple[float, float]:
    """Write the re-crawl, then run ``then``; (seconds writing, seconds in all)."""
    started = time.perf_counter()
    upsert_pages(side.conn, change.upserts)
    delete_pages(side.conn, change.deletes)
    written = time.perf_counter() - started
    then()
    return written, time.perf_counter() - started


def crossover(points: Sequence[Point], docs: int) -> tuple[float | None, str]:
    """The re-crawl fraction where the observers take as long as the batch job."""
    ordered = sorted(points, key=lambda p: p.fraction)
    for a, b in itertools.pairwise(ordered):
        da, db = a.observers_s - a.batch_s, b.observers_s - b.batch_s
        if da <= 0 <= db:
            # Linear in the fraction between the two measured points.
            return a.fraction + (b.fraction - a.fraction) * (-da) / (db - da), "measured"
    if len(ordered) < 2:
        return None, ""
    # The observers' time as a line in the pages changed; the batch's as its mean.
    xs = [p.pages_written + p.pages_deleted for p in ordered]
    ys = [p.observers_s for p in ordered]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / max(
        1e-9, sum((x - mx) ** 2 for x in xs)
    )
    if slope <= 0:
        return None, ""
    batch = sum(p.batch_s for p in ordered) / len(ordered)
    fraction = (mx + (batch - my) / slope) / docs
    if not 0 < fraction <= 1:
        return None, "none: the observers are faster at any re-crawl up to 100 %"
    return fraction, "extrapolated"


def chart(result: Figure7, path: Path) -> None:
    """The figure: time to an up-to-date index against the re-crawl fraction, both sides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.fraction * 100 for p in result.points]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    ax.plot(xs, [p.batch_s for p in result.points], "s-", label="Spark batch (recompute)")
    ax.plot(xs, [p.observers_s for p in result.points], "o-", label="observers (incremental)")
    if result.crossover_fraction is not None:
        ax.axvline(
            result.crossover_fraction * 100,
            color="grey",
            linestyle=":",
            label=f"crossover ({result.crossover}) {result.crossover_fraction * 100:.2g} %",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("re-crawled pages (% of the repository)")
    ax.set_ylabel("seconds from crawl to an up-to-date index")
    ax.set_title(f"Web index, {result.docs:,} pages: batch vs incremental")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _report(result: Figure7, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(result), indent=2))
        return
    print(
        f"Web index, {result.docs:,} pages (Spark local[{result.partitions}], "
        f"{result.workers} observer worker(s)); initial load {result.load_s:.1f} s, "
        f"initial batch job {result.initial_batch_s:.1f} s"
    )
    print(f"{'re-crawl':>9}{'pages':>8}{'observers s':>13}{'batch s':>10}{'batch/observers':>17}")
    for p in result.points:
        ratio = p.batch_s / p.observers_s if p.observers_s else float("inf")
        print(
            f"{p.fraction * 100:>8.2g}%{p.pages_written + p.pages_deleted:>8}"
            f"{p.observers_s:>13.1f}{p.batch_s:>10.1f}{ratio:>17.1f}"
        )
    if result.crossover_fraction is not None:
        print(f"crossover ({result.crossover}): {result.crossover_fraction * 100:.2g} % re-crawled")
    elif result.crossover:
        print(f"crossover: {result.crossover}")
    checks = (f"{k} {'ok' if v else 'FAILED'}" for k, v in result.verified.items())
    print("verified: " + ", ".join(checks))
