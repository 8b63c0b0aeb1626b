"""``percolator bench cluster``: throughput of a local cluster by shape (shards, servers, workers).

For each shape (by default every combination of 1/2 shards, 1/2 SQL servers and 1/4 observer
workers) a fresh cluster is started with :meth:`Cluster.up` (every process its own OS process,
as ``percolator cluster up`` starts them) and measured in two phases:

1. **Transfers under observer load.** ``--clients`` asyncpg connections, spread round-robin over
   the SQL servers, run bank transfers for ``--duration`` seconds: one transaction updates two
   accounts and inserts a row into ``transfers``; an observer copies each new transfer into
   ``audit`` (one run per transfer), so the workers' runs compete with the transfers for the
   same cores and shards. Figures: committed ``transfers_per_s``, ``conflicts`` (40001, retried),
   ``observer_runs_per_s`` during the load, and ``drain_s``, how long the workers need after the
   load stops to catch up. The bank total is checked afterwards.
2. **Observer backlog.** With the observer paused, ``--backlog`` transfers are loaded by COPY;
   on RESUME the workers work them off: ``backlog_runs_per_s``. This is the figure the number
   of workers should move.

Beside them, the CPU cores each role kept busy during the transfers (shards with their
backends, coordinator, servers, workers, and ``client``, this benchmark's load generator):
where the time goes, and so what separate machines would relieve.

The baseline printed beside every figure is the first shape of the same run (1 shard, 1 server,
1 worker by default): each figure is also given as a ratio to it. Every process of every shape
shares this machine's cores with the load generator, so the ratios say what adding processes
costs or buys *on one machine*; see ``BENCHMARKS.md`` for what to expect when they get
machines of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import asyncpg
import psutil

from percolator.server.cluster import ClusterSpec
from percolator.server.cluster.state import Role
from percolator.server.cluster.supervisor import SQL_DATABASE, SQL_USER, Cluster

DEFAULT_SHAPES = "1,1,1 2,1,1 1,2,1 2,2,1 1,1,4 2,1,4 1,2,4 2,2,4"
INITIAL_BALANCE = 1000
CATALOG_POLL_S = 2.0
"""Long enough for every server's and worker's catalog poll to see a DDL or an ALTER OBSERVER."""
DRAIN_TIMEOUT_S = 600.0

SCHEMA = (
    "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)",
    "CREATE TABLE transfers (id bigint PRIMARY KEY, src int, dst int, amount int)",
    "CREATE TABLE audit (id bigint PRIMARY KEY, amount int)",
    "CREATE OBSERVER audit_transfers ON transfers (amount) AS $$"
    " INSERT INTO audit VALUES (NEW.id, NEW.amount) ON CONFLICT (id) DO NOTHING $$",
)


@dataclass(frozen=True)
class Shape:
    """How many of each process a measured cluster has."""

    shards: int
    servers: int
    workers: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        """``"shards,servers,workers"``, e.g. ``"2,1,4"``."""
        try:
            shards, servers, workers = (int(n) for n in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"a shape is shards,servers,workers (e.g. 2,1,4), not {text!r}"
            ) from None
        if shards < 1 or servers < 1 or workers < 1:
            raise argparse.ArgumentTypeError(f"a shape needs at least one of each: {text!r}")
        return cls(shards, servers, workers)

    @property
    def label(self) -> str:
        return f"{self.shards} shard, {self.servers} server, {self.workers} worker"


@dataclass
class ShapeResult:
    """The figures measured on one shape (see the module docstring)."""

    shards: int
    servers: int
    workers: int
    transfers_per_s: float
    conflicts: int
    errors: int
    observer_runs_per_s: float
    drain_s: float
    backlog_runs_per_s: float
    cores: dict[str, float]
    """CPU cores busy during the transfers, by role (``client`` is this benchmark's load
    generator): where the time goes, and what more machines would relieve."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--shapes",
        default=DEFAULT_SHAPES,
        help="space-separated shards,servers,workers triples; the first is the baseline "
        f"(default: {DEFAULT_SHAPES!r})",
    )
    p.add_argument("--duration", type=float, default=15.0, help="seconds of transfers per shape")
    p.add_argument("--clients", type=int, default=8, help="concurrent transfer clients")
    p.add_argument("--accounts", type=int, default=1000, help="accounts (fewer: more conflicts)")
    p.add_argument("--backlog", type=int, default=2000, help="transfers in the observer backlog")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    shapes = [Shape.parse(s) for s in args.shapes.split()]
    work = Path(tempfile.mkdtemp(prefix="percolator-bench-cluster-"))
    results: list[ShapeResult] = []
    try:
        for i, shape in enumerate(shapes):
            if not args.json:
                print(f"-- {shape.label} ...", flush=True)
            results.append(_measure(shape, args, work / f"shape-{i}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _report(results, args.json)
    return 0


def _measure(shape: Shape, args: argparse.Namespace, dir: Path) -> ShapeResult:
    spec = ClusterSpec(shards=shape.shards, servers=shape.servers, workers=shape.workers, dir=dir)
    cluster = Cluster.up(spec)
    try:
        return asyncio.run(_workload(cluster, shape, args))
    finally:
        cluster.down()


async def _workload(cluster: Cluster, shape: Shape, args: argparse.Namespace) -> ShapeResult:
    dsns = [
        f"postgresql://{SQL_USER}@{host}:{port}/{SQL_DATABASE}"
        for host, port in cluster.server_addresses
    ]
    admin = await asyncpg.connect(dsns[0])
    try:
        for statement in SCHEMA:
            await admin.execute(statement)
        await admin.copy_records_to_table(
            "accounts", records=[(i, INITIAL_BALANCE) for i in range(args.accounts)]
        )
        await asyncio.sleep(CATALOG_POLL_S)  # every server and worker knows the tables

        load = TransferLoad(dsns, args.clients, args.accounts)
        cpu_before, t0 = cpu_by_role(cluster), time.monotonic()
        await load.run(args.duration)
        cpu_after, elapsed = cpu_by_role(cluster), time.monotonic() - t0
        observed = await _count(admin, "audit")
        drain_s = await _wait_for_audit(admin, load.total)
        total = await admin.fetchval("SELECT sum(balance) FROM accounts")
        if total != args.accounts * INITIAL_BALANCE:
            raise RuntimeError(f"the bank total changed: {total}")

        backlog_runs_per_s = await _backlog(admin, load.total, args.backlog)
    finally:
        await admin.close()
    return ShapeResult(
        shards=shape.shards,
        servers=shape.servers,
        workers=shape.workers,
        transfers_per_s=round(load.committed / args.duration, 1),
        conflicts=load.conflicts,
        errors=load.errors,
        observer_runs_per_s=round(observed / args.duration, 1),
        drain_s=round(drain_s, 1),
        backlog_runs_per_s=round(backlog_runs_per_s, 1),
        cores={
            role: round((cpu_after[role] - cpu_before.get(role, 0.0)) / elapsed, 2)
            for role in cpu_after
        },
    )


def cpu_by_role(cluster: Cluster) -> dict[str, float]:
    """CPU seconds used so far by each role's processes (a shard with its backends), and by
    this process as ``client``."""
    totals = {role.value: 0.0 for role in Role}
    for record in cluster.state.processes:
        if record.pid is None:
            continue
        try:
            root = psutil.Process(record.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue  # a backend that ended meanwhile
            totals[record.role.value] += times.user + times.system
    own = psutil.Process().cpu_times()
    totals["client"] = own.user + own.system
    return totals


class TransferLoad:
    """Bank transfers from ``clients`` connections spread round-robin over the servers."""

    def __init__(self, dsns: list[str], clients: int, accounts: int) -> None:
        self.dsns = dsns
        self.clients = clients
        self.accounts = accounts
        self.committed = 0
        self.conflicts = 0
        self.errors = 0
        self.late = 0
        """Transfers that committed after the window closed: the observers still run them."""

    async def run(self, duration: float) -> None:
        """Transfer until ``duration`` seconds have passed; counts only what committed then."""
        connections = [
            await asyncpg.connect(dsn)
            for dsn in itertools.islice(itertools.cycle(self.dsns), self.clients)
        ]
        try:
            deadline = time.monotonic() + duration
            await asyncio.gather(*(self._client(c, i, deadline) for i, c in enumerate(connections)))
        finally:
            await asyncio.gather(*(c.close() for c in connections))

    async def _client(self, conn: asyncpg.Connection, client: int, deadline: float) -> None:
        rng = random.Random(client)
        ids = itertools.count(client << 32)
        while time.monotonic() < deadline:
            src, dst = rng.sample(range(self.accounts), 2)
            try:
                async with conn.transaction():
                    amount = rng.randint(1, 10)
                    await conn.execute(
                        "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, src
                    )
                    await conn.execute(
                        "UPDATE accounts SET balance = balance + $1 WHERE id = $2", amount, dst
                    )
                    await conn.execute(
                        "INSERT INTO transfers VALUES ($1, $2, $3, $4)", next(ids), src, dst, amount
                    )
            except asyncpg.SerializationError:
                self.conflicts += 1
                continue
            except asyncpg.PostgresError:
                self.errors += 1
                continue
            if time.monotonic() < deadline:
                self.committed += 1
            else:
                self.late += 1

    @property
    def total(self) -> int:
        """Every transfer that committed, in the window or just after it."""
        return self.committed + self.late


async def _count(conn: asyncpg.Connection, table: str) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))


async def _wait_for_audit(conn: asyncpg.Connection, expected: int) -> float:
    """Seconds until ``audit`` has ``expected`` rows (the observers caught up)."""
    t0 = time.monotonic()
    while await _count(conn, "audit") < expected:
        if time.monotonic() - t0 > DRAIN_TIMEOUT_S:
            raise RuntimeError(f"the observers did not catch up within {DRAIN_TIMEOUT_S:g} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0


async def _backlog(conn: asyncpg.Connection, done: int, n: int) -> float:
    """Observer runs per second working off ``n`` transfers loaded while the observer paused."""
    await conn.execute("ALTER OBSERVER audit_transfers PAUSE")
    await asyncio.sleep(CATALOG_POLL_S)  # every worker has seen the pause
    first = 1 << 62
    await conn.copy_records_to_table("transfers", records=[(first + i, 0, 1, 1) for i in range(n)])
    await conn.execute("ALTER OBSERVER audit_transfers RESUME")
    return n / await _wait_for_audit(conn, done + n)


def _report(results: list[ShapeResult], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"shapes": [asdict(r) for r in results]}, indent=2))
        return
    base = results[0]
    figures = ("transfers_per_s", "observer_runs_per_s", "backlog_runs_per_s")
    print(
        f"baseline: {base.shards} shard, {base.servers} server, {base.workers} worker "
        "(ratios are to it; same run)"
    )
    header = f"{'shards':>6} {'servers':>7} {'workers':>7}"
    for name in figures:
        header += f" {name:>20} {'ratio':>5}"
    print(header + f" {'conflicts':>9} {'errors':>6} {'drain_s':>7}")
    for r in results:
        line = f"{r.shards:>6} {r.servers:>7} {r.workers:>7}"
        for name in figures:
            value, baseline = getattr(r, name), getattr(base, name)
            ratio = value / baseline if baseline else float("nan")
            line += f" {value:>20.1f} {ratio:>5.2f}"
        print(line + f" {r.conflicts:>9} {r.errors:>6} {r.drain_s:>7.1f}")
    print("\nCPU cores busy during the transfers, by role:")
    roles = list(results[0].cores)
    print(f"{'shards':>6} {'servers':>7} {'workers':>7} " + " ".join(f"{n:>11}" for n in roles))
    for r in results:
        cores = " ".join(f"{r.cores.get(n, 0.0):>11.2f}" for n in roles)
        print(f"{r.shards:>6} {r.servers:>7} {r.workers:>7} {cores}")
