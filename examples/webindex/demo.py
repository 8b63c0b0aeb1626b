"""``percolator demo webindex``: load a synthetic crawl through the SQL server, let the observers
build the index, re-crawl, and (``--verify``) compare with the batch computation.

The pipeline is timed from the first page sent to the moment the observers are idle: that is
``docs_per_s``. Idle means ``percolator.observers`` shows no pending notification on several
consecutive polls (a run's notification stays pending until it committed, and the notifications
its writes set are already there by then, except those of secondary cells whose commit finishes
just after; the repeated poll covers that).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from percolator.examples.webindex.batch import verify
from percolator.examples.webindex.crawl import Crawl, CrawlConfig, Page
from percolator.examples.webindex.schema import DERIVED_TABLES, create_schema
from percolator.server.config import ServerConfig
from percolator.server.runtime import RunningServer, ServerThread
from percolator.server.storage.cells import WriteKind
from percolator.server.storage.dsn import parse_dsns

LOAD_BATCH = 500
"""Pages per COPY (one transaction each)."""
UPSERT_BATCH = 200
"""Pages per INSERT ... ON CONFLICT of a re-crawl."""
MAX_DIFFERENCES_SHOWN = 20


@dataclass
class Phase:
    """One timed phase: the initial crawl or a re-crawl."""

    name: str
    pages_written: int
    pages_deleted: int
    load_s: float = 0.0
    settle_s: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    """Where the time went (see :class:`UsageProbe`), when measured."""

    @property
    def elapsed_s(self) -> float:
        return self.load_s + self.settle_s

    def report(self) -> dict[str, Any]:
        changes = self.pages_written + self.pages_deleted
        return {
            "name": self.name,
            "pages_written": self.pages_written,
            "pages_deleted": self.pages_deleted,
            "load_s": round(self.load_s, 3),
            "settle_s": round(self.settle_s, 3),
            "elapsed_s": round(self.elapsed_s, 3),
            "changes_per_s": round(changes / self.elapsed_s, 1) if self.elapsed_s else None,
            **({"usage": self.usage} if self.usage else {}),
        }


class UsageProbe:
    """Where a phase's time goes: CPU seconds of this process (the SQL server, its observer
    workers and the loader all run in it) and of the Postgres backends serving the store's
    database, and the store's round trips per operation (when the server runs in-process)."""

    def __init__(self, server: RunningServer | None, databases: Sequence[str] = ()) -> None:
        self._server = server
        self._databases = set(databases)
        self._backend_cpu: dict[int, float] = {}

    def sample(self) -> dict[str, Any]:
        """Cumulative counters now."""
        me = psutil.Process().cpu_times()
        trips = self._server.engine.client.store.stats.snapshot() if self._server else {}
        return {"python": me.user + me.system, "postgres": self._postgres_cpu(), "trips": trips}

    def usage(self, before: dict[str, Any], after: dict[str, Any], docs: int) -> dict[str, Any]:
        """The difference between two samples, with round trips per page."""
        trips = {
            op: round((n - before["trips"].get(op, 0)) / max(docs, 1), 2)
            for op, n in sorted(after["trips"].items())
            if n > before["trips"].get(op, 0)
        }
        return {
            "python_cpu_s": round(after["python"] - before["python"], 1),
            "postgres_cpu_s": round(after["postgres"] - before["postgres"], 1),
            "round_trips_per_doc": trips,
        }

    def _postgres_cpu(self) -> float:
        """CPU seconds of the backends connected to our databases (a backend that exited
        counts with its last reading)."""
        for p in psutil.process_iter(["name", "cmdline"]):
            words = p.info["cmdline"] or []
            if p.info["name"] != "postgres" or not self._databases.intersection(
                " ".join(words).split()
            ):
                continue
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            self._backend_cpu[p.pid] = t.user + t.system
        return sum(self._backend_cpu.values())


@dataclass
class DemoOptions:
    """What to run (the command's flags)."""

    docs: int = 2000
    recrawls: int = 2
    recrawl_fraction: float = 0.1
    seed: int = 0
    workers: int = 1
    concurrency: int = ServerConfig.observer_concurrency
    link_skew: float = 0.6
    duplicate_fraction: float = 0.1
    verify: bool = False
    idle_timeout_s: float = 600.0


@dataclass
class DemoResult:
    """What a run measured."""

    options: DemoOptions
    phases: list[Phase] = field(default_factory=list)
    observers: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    verified: bool | None = None
    differences: list[str] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """The JSON report (``docs_per_s`` is the initial crawl through the whole pipeline)."""
        first = self.phases[0]
        return {
            "docs": self.options.docs,
            "docs_per_s": round(self.options.docs / first.elapsed_s, 1),
            "elapsed_s": round(first.elapsed_s, 3),
            "load_s": round(first.load_s, 3),
            "settle_s": round(first.settle_s, 3),
            **({"usage": first.usage} if first.usage else {}),
            "recrawls": [p.report() for p in self.phases[1:]],
            "observers": self.observers,
            "rows": self.rows,
            "verify": self.verified,
            "differences": self.differences[:MAX_DIFFERENCES_SHOWN],
            "differences_total": len(self.differences),
            "options": asdict(self.options),
        }


# -- talking to the server ------------------------------------------------------------------


def load_pages(conn: psycopg.Connection, pages: Sequence[Page], batch: int = LOAD_BATCH) -> None:
    """Insert new pages with COPY, ``batch`` pages per transaction."""
    for i in range(0, len(pages), batch):
        with conn.cursor().copy("COPY pages (url, content, links) FROM STDIN") as copy:
            for p in pages[i : i + batch]:
                copy.write_row((p.url, p.content, Jsonb(p.links_json())))


def upsert_pages(
    conn: psycopg.Connection, pages: Sequence[Page], batch: int = UPSERT_BATCH
) -> None:
    """Write changed or new pages, ``batch`` per statement."""
    for i in range(0, len(pages), batch):
        chunk = pages[i : i + batch]
        values = ", ".join("(%s, %s, %s)" for _ in chunk)
        conn.execute(
            f"INSERT INTO pages (url, content, links) VALUES {values} ON CONFLICT (url) "
            "DO UPDATE SET content = excluded.content, links = excluded.links",
            [v for p in chunk for v in (p.url, p.content, Jsonb(p.links_json()))],
        )


def delete_pages(conn: psycopg.Connection, urls: Sequence[str], batch: int = UPSERT_BATCH) -> None:
    """Delete pages, ``batch`` per statement."""
    for i in range(0, len(urls), batch):
        chunk = urls[i : i + batch]
        conn.execute(
            f"DELETE FROM pages WHERE url IN ({', '.join('%s' for _ in chunk)})", list(chunk)
        )


OBSERVER_STATUS = (
    "SELECT name, pending, runs, commits, conflicts, failures, parked, last_error "
    "FROM percolator.observers"
)


def observer_status(conn: psycopg.Connection) -> dict[str, dict[str, Any]]:
    """Per observer: pending and parked changes, and its run counters."""
    cols = ("pending", "runs", "commits", "conflicts", "failures", "parked", "last_error")
    return {row[0]: dict(zip(cols, row[1:], strict=True)) for row in conn.execute(OBSERVER_STATUS)}


def wait_idle(
    conn: psycopg.Connection,
    *,
    timeout_s: float = 600.0,
    poll_s: float = 0.1,
    quiet_polls: int = 3,
    writes_pending: Callable[[], bool] | None = None,
) -> None:
    """Return once no observer has pending work on ``quiet_polls`` consecutive polls, ``poll_s``
    apart; raise TimeoutError after ``timeout_s``. While much work is pending the polls are
    further apart (up to a second): each one counts the whole notification table.

    ``writes_pending`` tells whether committed writes still hold locks (secondaries committed
    in the background): their notifications appear only when they are committed, so until
    then "no notification pending" does not mean idle."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while True:
        status = observer_status(conn)
        pending = sum(s["pending"] for s in status.values())
        if pending == 0 and writes_pending is not None and writes_pending():
            pending = 1
        quiet = quiet + 1 if pending == 0 else 0
        if quiet >= quiet_polls:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"observers still busy after {timeout_s:.0f} s: {status}")
        time.sleep(min(1.0, poll_s + pending / 5000))


# -- the run --------------------------------------------------------------------------------


def run_pipeline(
    conninfo: str,
    options: DemoOptions,
    probe: UsageProbe | None = None,
    writes_pending: Callable[[], bool] | None = None,
) -> DemoResult:
    """Create the schema, load the crawl, re-crawl, and measure (against a running server
    whose observers workers are running)."""
    result = DemoResult(options)
    crawl = Crawl(
        CrawlConfig(
            pages=options.docs,
            seed=options.seed,
            link_skew=options.link_skew,
            duplicate_fraction=options.duplicate_fraction,
        )
    )
    with (
        psycopg.connect(conninfo, autocommit=True) as conn,
        psycopg.connect(conninfo, autocommit=True) as monitor,
    ):
        create_schema(conn)
        initial = Phase("initial", len(crawl.pages), 0)
        with _measured(initial, probe):
            with _timed(initial, "load_s"):
                load_pages(conn, list(crawl.pages.values()))
            with _timed(initial, "settle_s"):
                wait_idle(monitor, timeout_s=options.idle_timeout_s, writes_pending=writes_pending)
        result.phases.append(initial)
        for i in range(options.recrawls):
            change = crawl.recrawl(options.recrawl_fraction)
            phase = Phase(f"recrawl {i + 1}", len(change.upserts), len(change.deletes))
            with _measured(phase, probe):
                with _timed(phase, "load_s"):
                    upsert_pages(conn, change.upserts)
                    delete_pages(conn, change.deletes)
                with _timed(phase, "settle_s"):
                    wait_idle(
                        monitor, timeout_s=options.idle_timeout_s, writes_pending=writes_pending
                    )
            result.phases.append(phase)
        if options.verify:
            outcome = verify(conn)
            result.verified = outcome.ok
            result.differences = outcome.differences
            result.rows = outcome.rows
        else:
            result.rows = {t: _count(conn, t) for t in DERIVED_TABLES}
        time.sleep(1.2)  # let the workers save their counters (once a second)
        result.observers = {
            name: {k: v for k, v in s.items() if k != "pending" and (k != "last_error" or v)}
            for name, s in observer_status(monitor).items()
        }
    return result


def _count(conn: psycopg.Connection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def _measured(phase: Phase, probe: UsageProbe | None) -> Iterator[None]:
    if probe is None:
        yield
        return
    before = probe.sample()
    yield
    changes = phase.pages_written + phase.pages_deleted
    phase.usage = probe.usage(before, probe.sample(), changes)


@contextlib.contextmanager
def _timed(phase: Phase, attribute: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        setattr(phase, attribute, getattr(phase, attribute) + time.perf_counter() - t0)


@contextlib.contextmanager
def fresh_store(store: str | None, data_dir: str, keep: bool) -> Iterator[str]:
    """The shard DSN to run on: ``store`` as given, or a new database in the embedded Postgres
    of ``data_dir`` (dropped afterwards unless ``keep``)."""
    if store:
        yield store
        return
    from percolator.server.storage.embedded import EmbeddedPostgres

    embedded = EmbeddedPostgres(Path(data_dir))
    base = embedded.start()
    name = f"webindex_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    head, _, query = base.partition("?")
    dsn = f"{head.rsplit('/', 1)[0]}/{name}?{query}"
    try:
        yield dsn
    finally:
        if not keep:
            with psycopg.connect(base, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        embedded.stop()


@contextlib.contextmanager
def running_server(dsn: str, options: DemoOptions) -> Iterator[tuple[str, RunningServer]]:
    """A SQL server in this process over ``dsn`` (one or more shards, comma-separated) with its
    observer workers; yields a libpq connection string and the server."""
    config = ServerConfig(
        listen="127.0.0.1:0",
        coordinator_listen="127.0.0.1:0",
        auth="trust",
        observer_workers=options.workers,
        observer_concurrency=options.concurrency,
    )
    thread = ServerThread(config, parse_dsns(dsn))
    server = thread.start()
    try:
        conninfo = f"host=127.0.0.1 port={server.port} user={config.user} dbname={config.database}"
        yield conninfo, server
    finally:
        thread.stop()


# -- the command ----------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``percolator demo webindex``."""
    d = DemoOptions()
    p.add_argument(
        "--docs", type=int, default=d.docs, help=f"pages in the crawl (default {d.docs})"
    )
    p.add_argument(
        "--recrawls", type=int, default=d.recrawls, help=f"re-crawls (default {d.recrawls})"
    )
    p.add_argument(
        "--recrawl-fraction",
        type=float,
        default=d.recrawl_fraction,
        help=f"share of pages each re-crawl changes or deletes (default {d.recrawl_fraction})",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="crawl generator seed (default 0)")
    p.add_argument("--workers", type=int, default=d.workers, help="observer workers (default 1)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=d.concurrency,
        help=f"observer runs in flight per worker (default {d.concurrency})",
    )
    p.add_argument(
        "--link-skew",
        type=float,
        default=d.link_skew,
        help=f"Zipf exponent of link targets (default {d.link_skew})",
    )
    p.add_argument(
        "--duplicate-fraction",
        type=float,
        default=d.duplicate_fraction,
        help=f"share of pages that copy another's content (default {d.duplicate_fraction})",
    )
    p.add_argument("--verify", action="store_true", help="compare with the batch computation")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--store", metavar="DSN", help="Postgres shard(s) (default: a fresh database "
                   "in the embedded Postgres)")  # fmt: skip
    p.add_argument(
        "--data-dir", default="data", help="embedded Postgres data directory (default ./data)"
    )
    p.add_argument("--keep", action="store_true", help="keep the embedded database afterwards")


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit status 1 when --verify finds differences."""
    options = DemoOptions(
        docs=args.docs,
        recrawls=args.recrawls,
        recrawl_fraction=args.recrawl_fraction,
        seed=args.seed,
        workers=args.workers,
        concurrency=args.concurrency,
        link_skew=args.link_skew,
        duplicate_fraction=args.duplicate_fraction,
        verify=args.verify,
    )
    with (
        fresh_store(args.store, args.data_dir, args.keep) as dsn,
        running_server(dsn, options) as (conninfo, server),
    ):
        databases = [conninfo_to_dict(d).get("dbname", "") for d in parse_dsns(dsn)]
        result = run_pipeline(
            conninfo, options, UsageProbe(server, databases), locks_checker(parse_dsns(dsn))
        )
    report = result.report()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return 1 if result.verified is False else 0


LOCK_KIND = int(WriteKind.LOCK)


def locks_checker(dsns: list[str]) -> Callable[[], bool]:
    """Whether any shard still holds a write lock (a commit's secondaries not yet committed):
    read straight from the shards' lock tables, as a monitor."""

    def pending() -> bool:
        for dsn in dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(  # LOCK-kind locks (FOR UPDATE) commit no change
                    f"SELECT EXISTS (SELECT 1 FROM percolator_lock WHERE kind <> {LOCK_KIND})"
                ).fetchone()
                if row and row[0]:
                    return True
        return False

    return pending


def _print_report(report: dict[str, Any]) -> None:
    print(
        f"web index: {report['docs']} pages in {report['elapsed_s']:.1f} s "
        f"(load {report['load_s']:.1f} s, settle {report['settle_s']:.1f} s): "
        f"{report['docs_per_s']:.0f} docs/s"
    )
    _print_usage(report.get("usage"))
    for r in report["recrawls"]:
        print(
            f"  {r['name']}: {r['pages_written']} written, {r['pages_deleted']} deleted "
            f"in {r['elapsed_s']:.1f} s"
        )
        _print_usage(r.get("usage"))
    for name, s in report["observers"].items():
        print(f"  observer {name}: " + ", ".join(f"{k} {v}" for k, v in s.items()))
    print("  rows: " + ", ".join(f"{k} {v}" for k, v in report["rows"].items()))
    if report["verify"] is not None:
        print(f"  verify: {'OK' if report['verify'] else 'FAILED'}")
        for line in report["differences"]:
            print(f"    {line}")
        if report["differences_total"] > len(report["differences"]):
            print(f"    ... {report['differences_total'] - len(report['differences'])} more")
    sys.stdout.flush()


def _print_usage(usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    trips = ", ".join(f"{op} {n}" for op, n in usage["round_trips_per_doc"].items())
    print(
        f"    cpu: this process {usage['python_cpu_s']} s, postgres {usage['postgres_cpu_s']} s;"
        f" store round trips per page: {trips}"
    )
