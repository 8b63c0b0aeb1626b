"""``percolator bench observers``: how fast a change reaches its observer, and what finding
changes costs.

1. **Latency and throughput**, with 1 and 4 worker processes: a writer commits single-row
   INSERTs at a steady rate through the Python API; a SQL observer copies each row to another
   table. The latency of
   a change is the commit timestamp of the observer's write minus the commit timestamp of the
   change (both from the oracle, so one clock; millisecond resolution). The baseline beside it
   is the writer's own latency for the same single-row transaction. Then the throughput of the
   hash split: with the observer paused, a backlog of changes is loaded; the time from RESUME
   until every change has run gives changes per second (1 worker is the baseline of 4).
2. **Notify scan cost**: the time for a scan of the notifications to find 1,000 dirty rows in a
   table of 10,000 clean rows and in one of 1,000,000. Notifications live apart from the data,
   so the second must not cost more than the first.

Everything runs on a temporary embedded Postgres: a ``percolator serve`` process (coordinator,
no worker of its own) and ``percolator worker`` processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

import percolator.clients as percolator
from percolator.bench.common import create_databases, sql_conninfo, wait_for_secondaries
from percolator.server.planner.row_codec import RowCodec
from percolator.server.runtime import ServerProcess
from percolator.server.storage.cells import CellKey, ts_physical_ms
from percolator.server.storage.embedded import EmbeddedPostgres
from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn.membership import HASH_MAX, HASH_MIN

OBSERVER = """CREATE OBSERVER copy_v ON src (v) AS $$
    INSERT INTO dst VALUES (NEW.id, NEW.v) ON CONFLICT (id) DO UPDATE SET v = excluded.v
$$"""


@dataclass
class LatencyResult:
    """One latency run."""

    workers: int
    changes: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    write_p50_ms: float
    """Baseline: the writer's own single-row transaction, as the client sees it."""
    write_p99_ms: float
    backlog: int = 0
    backlog_changes_per_s: float = 0.0
    """Observer runs committed per second while working off the backlog."""


@dataclass
class ScanResult:
    """Finding the dirty rows among clean ones."""

    clean_rows: int
    dirty_rows: int
    scan_ms: float
    """Median over repeated scans of all notifications (pages of 256, one round trip each)."""
    load_s: float


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", default="1,4", help="worker counts to run (default 1,4)")
    p.add_argument("--rate", type=float, default=50.0, help="changes per second (default 50)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of writes (default 10)")
    p.add_argument(
        "--clean-rows",
        default="10000,1000000",
        help="clean table sizes for the scan cost (default 10000,1000000)",
    )
    p.add_argument("--dirty-rows", type=int, default=1000, help="dirty rows (default 1000)")
    p.add_argument(
        "--backlog", type=int, default=2000, help="changes for the throughput run (default 2000)"
    )
    p.add_argument("--skip-scan", action="store_true", help="only measure latency")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="percolator-bench-observers-"))
    pg = EmbeddedPostgres(work / "pg")
    try:
        base = pg.start()
        latency = [
            _latency_run(base, int(w), args.rate, args.duration, args.backlog, work)
            for w in args.workers.split(",")
        ]
        scans = []
        if not args.skip_scan:
            scans = [
                _scan_run(base, int(n), args.dirty_rows, work) for n in args.clean_rows.split(",")
            ]
        _report(latency, scans, args.json)
        return 0
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


# -- latency ---------------------------------------------------------------------------------


def _latency_run(
    base: str, workers: int, rate: float, duration: float, backlog: int, work: Path
) -> LatencyResult:
    store_dsn = asyncio.run(create_databases(base, "obs"))[0]
    with _deployment(store_dsn, work) as server, _workers(server, workers, work):
        _sql(server, "CREATE TABLE src (id int PRIMARY KEY, v int)")
        _sql(server, "CREATE TABLE dst (id int PRIMARY KEY, v int)")
        _sql(server, OBSERVER)
        time.sleep(1.5)  # the workers' catalog poll picks the observer up
        result = asyncio.run(_measure_latency(server, workers, rate, duration))
        if backlog:
            result.backlog = backlog
            result.backlog_changes_per_s = _measure_backlog(server, backlog, int(rate * duration))
        return result


def _measure_backlog(server: ServerProcess, n: int, first_id: int) -> float:
    """Changes per second through the observer, from RESUME until the backlog is gone."""
    _sql(server, "ALTER OBSERVER copy_v PAUSE")
    time.sleep(1.5)  # every worker has seen the pause
    with psycopg.connect(sql_conninfo(server), autocommit=True) as conn:
        rows = "".join(f"{i}\t{i}\n" for i in range(first_id, first_id + n))
        with conn.cursor().copy("COPY src FROM STDIN") as copy:
            copy.write(rows)
        asyncio.run(wait_for_secondaries(server.store_dsn))
        expected = first_id + n
        conn.execute("ALTER OBSERVER copy_v RESUME")
        t0 = time.monotonic()
        while conn.execute("SELECT count(*) FROM dst").fetchone()[0] < expected:  # type: ignore[index]
            if time.monotonic() - t0 > 600:
                raise RuntimeError("the backlog was not worked off within 10 minutes")
            time.sleep(0.05)
        return round(n / (time.monotonic() - t0), 1)


async def _measure_latency(
    server: ServerProcess, workers: int, rate: float, duration: float
) -> LatencyResult:
    db = await percolator.connect(server.store_dsn, coordinator=server.coordinator)
    try:
        count = int(rate * duration)
        write_ms = []
        started = time.monotonic()
        for i in range(count):
            due = started + i / rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            t0 = time.perf_counter()
            await db.execute("INSERT INTO src VALUES ($1, $2)", i, i)
            write_ms.append((time.perf_counter() - t0) * 1000)
        deadline = time.monotonic() + 120
        while (await db.fetch("SELECT count(*) AS n FROM dst"))[0]["n"] < count:
            if time.monotonic() > deadline:
                raise RuntimeError("the observer did not catch up within 2 minutes")
            await asyncio.sleep(0.2)
        lat = await _latencies(db, count)
    finally:
        await db.close()
    return LatencyResult(
        workers,
        count,
        _percentile(lat, 50),
        _percentile(lat, 99),
        max(lat),
        _percentile(write_ms, 50),
        _percentile(write_ms, 99),
    )


async def _latencies(db: percolator.Database, count: int) -> list[float]:
    """Per change: commit time of the observer's copy minus commit time of the change."""
    catalog = await db.catalog()
    src, dst = catalog.table("src"), catalog.table("dst")
    src_codec, dst_codec = RowCodec(src), RowCodec(dst)
    src_v, dst_v = str(src.column("v").id), str(dst.column("v").id)
    now = await db.client.clock.get_timestamp()
    keys = [src_codec.key_of_values([i]) for i in range(count)]
    src_cells = await db.store.read(now, [CellKey(src.storage, k, src_v) for k in keys])
    keys = [dst_codec.key_of_values([i]) for i in range(count)]
    dst_cells = await db.store.read(now, [CellKey(dst.storage, k, dst_v) for k in keys])
    out = []
    for a, b in zip(src_cells, dst_cells, strict=True):
        assert a.commit_ts is not None and b.commit_ts is not None
        out.append(float(ts_physical_ms(b.commit_ts) - ts_physical_ms(a.commit_ts)))
    return out


# -- scan cost -------------------------------------------------------------------------------


def _scan_run(base: str, clean: int, dirty: int, work: Path) -> ScanResult:
    store_dsn = asyncio.run(create_databases(base, "obs"))[0]
    with _deployment(store_dsn, work) as server:
        _sql(server, "CREATE TABLE src (id int PRIMARY KEY, v int)")
        _sql(server, "CREATE TABLE dst (id int PRIMARY KEY, v int)")
        t0 = time.monotonic()
        _copy_rows(server, clean)
        asyncio.run(wait_for_secondaries(store_dsn))
        load_s = time.monotonic() - t0
        _sql(server, OBSERVER)
        _sql(server, "ALTER OBSERVER copy_v PAUSE")  # nothing runs: the notifications stay
        step = max(1, clean // dirty)
        _sql(server, f"UPDATE src SET v = v + 1 WHERE id % {step} = 0 AND id < {step * dirty}")
        asyncio.run(wait_for_secondaries(store_dsn))  # each sets its row's notification
        scan_ms = asyncio.run(_time_scans(store_dsn, dirty))
    return ScanResult(clean, dirty, scan_ms, load_s)


def _copy_rows(server: ServerProcess, n: int) -> None:
    chunk = 100_000
    with psycopg.connect(sql_conninfo(server), autocommit=True) as conn:
        for start in range(0, n, chunk):
            data = io.StringIO()
            for i in range(start, min(n, start + chunk)):
                data.write(f"{i}\t{i}\n")
            with conn.cursor().copy("COPY src FROM STDIN") as copy:
                copy.write(data.getvalue())


async def _time_scans(store_dsn: str, expected: int, repeats: int = 7) -> float:
    store = await PostgresCellStore.connect([store_dsn])
    try:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = await _scan_all(store)
            times.append((time.perf_counter() - t0) * 1000)
            if found != expected:
                raise RuntimeError(f"found {found} notifications, expected {expected}")
        return statistics.median(times)
    finally:
        await store.close()


async def _scan_all(store: PostgresCellStore) -> int:
    """What a lone worker's sweep reads: every notification, in pages of 256."""
    from percolator.server.storage.cells import NotifyCursor

    found = 0
    cursor = None
    now_ms = int(time.time() * 1000)
    while True:
        page = await store.find_notifications(
            HASH_MIN, HASH_MAX, now_ms=now_ms, limit=256, after=cursor
        )
        found += len(page)
        if len(page) < 256:
            return found
        last = page[-1]
        cursor = NotifyCursor(last.hash, last.observer, last.table, last.row)


# -- plumbing --------------------------------------------------------------------------------


@contextlib.contextmanager
def _deployment(store_dsn: str, work: Path) -> Iterator[ServerProcess]:
    log = open(work / "server.log", "a")
    server = ServerProcess(
        store_dsn, "--observer-workers", "0", "--gc-interval", "3600", stderr=log
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
        log.close()


@contextlib.contextmanager
def _workers(server: ServerProcess, n: int, work: Path) -> Iterator[None]:
    assert server.coordinator is not None
    log = open(work / "workers.log", "a")
    procs = []
    try:
        for _ in range(n):
            p = subprocess.Popen(
                [sys.executable, "-m", "percolator.server.cli", "worker",
                 "--store", server.store_dsn, "--coordinator", server.coordinator],
                stdout=subprocess.PIPE, stderr=log, text=True,
            )  # fmt: skip
            procs.append(p)
            assert p.stdout is not None
            if not p.stdout.readline().startswith("percolator worker running"):
                raise RuntimeError("a worker did not start (see workers.log)")
        time.sleep(1.0)  # every worker renews once and sees all the others
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        log.close()


def _sql(server: ServerProcess, sql: str) -> None:
    with psycopg.connect(sql_conninfo(server), autocommit=True) as conn:
        conn.execute(sql)


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return round(ordered[index], 1)


def _report(latency: list[LatencyResult], scans: list[ScanResult], as_json: bool) -> None:
    first = latency[0] if latency else None
    summary: dict[str, object] = {
        "latency_p50_ms": first.latency_p50_ms if first else None,
        "latency_p99_ms": first.latency_p99_ms if first else None,
        "latency": [asdict(r) for r in latency],
        "scan": [asdict(s) for s in scans],
    }
    if len(scans) >= 2:
        summary["scan_ratio"] = round(scans[-1].scan_ms / scans[0].scan_ms, 2)
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print("change -> observer commit latency (baseline: the writer's own transaction)")
    for r in latency:
        print(
            f"  {r.workers} worker(s), {r.changes} changes: p50 {r.latency_p50_ms} ms, "
            f"p99 {r.latency_p99_ms} ms, max {r.latency_max_ms} ms   "
            f"| write p50 {r.write_p50_ms:.1f} ms, p99 {r.write_p99_ms:.1f} ms"
        )
    if any(r.backlog for r in latency):
        print("backlog throughput (hash split over the workers; baseline: 1 worker)")
        for r in latency:
            print(f"  {r.workers} worker(s): {r.backlog_changes_per_s} changes/s")
    if scans:
        print("notify scan: all dirty rows found by one sweep (median)")
        for s in scans:
            print(f"  {s.dirty_rows} dirty among {s.clean_rows} clean rows: {s.scan_ms:.2f} ms")
        if "scan_ratio" in summary:
            print(f"  ratio largest/smallest: {summary['scan_ratio']}")
