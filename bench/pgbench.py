"""`percolator bench pgbench`: pgbench itself against the SQL server and, in the same run,
against the Postgres underneath it.

One embedded Postgres holds two databases: ``ref`` with ordinary pgbench tables, and ``store``,
the Percolator store of a ``percolator serve`` started as its own process. Both get the same
data (scale ``--scale``: 100,000 accounts, 10 tellers and 1 branch per unit, with primary keys),
loaded with COPY. Then pgbench runs two custom scripts for ``-M simple`` and ``-M prepared``
at ``-c`` clients, alternating Postgres and Percolator rounds so machine noise hits both:

- ``tpcb``: the TPC-B-like transaction (update an account, read it back, update its teller and
  branch, insert a history row) in BEGIN ... END;
- ``select``: pgbench's select-only transaction (one primary-key read);
- ``update`` (not run by default): one autocommit primary-key UPDATE, also against the same
  server with row locks off (``percolator.locking = optimistic``), to show what they cost.

Conflicting transactions: under snapshot isolation two transactions that update the same row
cannot both commit; the second gets SQLSTATE 40001 and pgbench retries it (``--max-tries``),
as a client of an optimistic database must. Postgres, at its default READ COMMITTED, queues
them on row locks instead. With 8 clients and few branches the branch row is a hotspot, so
failures and retries are reported beside tps.

Prints tps, mean and p99 latency (from pgbench's per-transaction log) and ``tps_ratio`` =
Percolator tps / Postgres tps for each (script, mode). ``--processes N`` runs the server with N
SQL worker processes (``percolator serve --processes``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from percolator.bench.common import create_databases, wait_for_secondaries
from percolator.server.runtime import ServerProcess
from percolator.server.storage.embedded import EmbeddedPostgres

TPCB = """\\set aid random(1, 100000 * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
    VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""

RR_OPTIONS = "-c default_transaction_isolation=repeatable\\ read"
RC_OPTIONS = "-c default_transaction_isolation=read\\ committed"
OPTIMISTIC_OPTIONS = "-c percolator.locking=optimistic"

UPDATE_ONE = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""

SELECT_ONLY = """\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
"""

SCHEMA = [
    "CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88))",
    "CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84))",
    "CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84))",
    "CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, "
    "filler char(22))",
]


@dataclass
class Result:
    target: str
    script: str
    mode: str
    tps: float
    latency_mean_ms: float
    latency_p99_ms: float
    transactions: int
    failures: int
    retries: int
    """Transactions that needed a retry (pgbench's "transactions retried")."""
    tries_repeated: int = 0
    """Retries in all (from the per-transaction log): a transaction may retry many times."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", type=int, default=1, help="pgbench scale factor (default 1)")
    p.add_argument("--clients", "-c", type=int, default=8, help="pgbench -c (default 8)")
    p.add_argument("--duration", type=int, default=15, help="seconds per round (default 15)")
    p.add_argument("--rounds", type=int, default=1, help="rounds per (script, mode, target)")
    p.add_argument("--max-tries", type=int, default=1000, help="pgbench --max-tries for 40001")
    p.add_argument("--scripts", default="tpcb,select", help="comma-separated: tpcb,select,update")
    p.add_argument("--modes", default="simple,prepared", help="comma-separated: simple,prepared")
    p.add_argument(
        "--no-postgres-rr",
        dest="postgres_rr",
        action="store_false",
        help="skip the TPC-B baseline of Postgres at REPEATABLE READ",
    )
    p.add_argument(
        "--no-percolator-rc",
        dest="percolator_rc",
        action="store_false",
        help="skip the TPC-B round of Percolator at READ COMMITTED (Postgres's default)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        help="run the server under cProfile and write its statistics to FILE (read them with "
        "python -m pstats FILE); figures measured this way are slower than without",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="the server's SQL worker processes (percolator serve --processes; default 1)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")


def run(args: argparse.Namespace) -> int:
    if shutil.which("pgbench") is None:
        print(
            "percolator bench pgbench: pgbench is not installed (Debian: postgresql-client)",
            file=sys.stderr,
        )
        return 1
    work = Path(tempfile.mkdtemp(prefix="percolator-pgbench-"))
    pg = EmbeddedPostgres(work / "pg")
    server: ServerProcess | None = None
    log = open(work / "server.log", "w")
    try:
        base = pg.start()
        ref_dsn, store_dsn = asyncio.run(create_databases(base, "ref", "store"))
        # GC deferred: a pass scans the whole shard (docs/storage.md), and with millions of
        # cells it would compete with the measured rounds.
        profile = ["-m", "cProfile", "-o", str(args.profile)] if args.profile else []
        server = ServerProcess(
            store_dsn,
            "--gc-interval",
            "3600",
            "--processes",
            str(args.processes),
            stderr=log,
            python_args=profile,
        )
        port = server.start()
        ours = {
            "PGHOST": "127.0.0.1",
            "PGPORT": str(port),
            "PGUSER": "postgres",
            "PGDATABASE": "postgres",
        }
        theirs = _libpq_env(ref_dsn)
        for env in (theirs, ours):
            _load(env, args.scale)
        asyncio.run(wait_for_secondaries(store_dsn))
        results = []
        for script_name in args.scripts.split(","):
            script = work / f"{script_name}.sql"
            script.write_text(
                {"tpcb": TPCB, "select": SELECT_ONLY, "update": UPDATE_ONE}[script_name]
            )
            for mode in args.modes.split(","):
                for _ in range(args.rounds):
                    targets = [("postgres", theirs), ("percolator", ours)]
                    if script_name == "tpcb" and args.postgres_rr:
                        # The same isolation as ours: Postgres's REPEATABLE READ is snapshot
                        # isolation, where a concurrent update of the same row also fails.
                        rr = {**theirs, "PGOPTIONS": RR_OPTIONS}
                        # After ours: its update churn (and the retried conflicts' dead rows)
                        # must not leave checkpoint and vacuum work in the middle of our round.
                        targets.append(("postgres_rr", rr))
                    if script_name == "update":
                        # What row locks cost an uncontended autocommit UPDATE: the same
                        # server with them off.
                        optimistic = {**ours, "PGOPTIONS": OPTIMISTIC_OPTIONS}
                        targets.append(("percolator_optimistic", optimistic))
                    if script_name == "tpcb" and args.percolator_rc:
                        # Postgres's own isolation, on ours: a waiting UPDATE of a hot row
                        # runs again on its newest version instead of failing (row locks).
                        targets.append(("percolator_rc", {**ours, "PGOPTIONS": RC_OPTIONS}))
                    for target, env in targets:
                        results.append(_pgbench(target, env, script, script_name, mode, args, work))
        summary = _summarize(results)
        if args.json:
            print(
                json.dumps({"results": [asdict(r) for r in results], "summary": summary}, indent=2)
            )
        else:
            _print(results, summary)
        return 0
    finally:
        if server is not None:
            server.stop()
        log.close()
        pg.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _libpq_env(dsn: str) -> dict[str, str]:
    """PG* variables for a ``postgresql://user@/db?host=/socket&port=N`` DSN."""
    from urllib.parse import parse_qs, urlparse

    u = urlparse(dsn)
    q = {k: v[0] for k, v in parse_qs(u.query).items()}
    env = {"PGUSER": u.username or "postgres", "PGDATABASE": u.path.lstrip("/")}
    if "host" in q:
        env["PGHOST"] = q["host"]
    if "port" in q:
        env["PGPORT"] = q["port"]
    return env


def _psql(env: dict[str, str], sql: str, stdin: str | None = None) -> None:
    out = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
        env={**os.environ, **env},
        input=stdin,
        text=True,
        capture_output=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"psql failed on {sql[:60]!r}: {out.stderr.strip()}")


def _load(env: dict[str, str], scale: int) -> None:
    for ddl in SCHEMA:
        _psql(env, ddl)
    _psql(
        env,
        "INSERT INTO pgbench_branches (bid, bbalance) SELECT g, 0 FROM "
        f"generate_series(1, {scale}) g",
    )
    _psql(
        env,
        "INSERT INTO pgbench_tellers (tid, bid, tbalance) SELECT g, (g - 1) / 10 + 1, 0 "
        f"FROM generate_series(1, {10 * scale}) g",
    )
    # One COPY per 100,000 accounts: a transaction writes at most 1,000,000 cells.
    for branch in range(scale):
        first = branch * 100000 + 1
        rows = "".join(f"{a}\t{branch + 1}\t0\t\n" for a in range(first, first + 100000))
        _psql(env, "COPY pgbench_accounts (aid, bid, abalance, filler) FROM STDIN", stdin=rows)


def _pgbench(
    target: str,
    env: dict[str, str],
    script: Path,
    name: str,
    mode: str,
    args: argparse.Namespace,
    work: Path,
) -> Result:
    logdir = work / f"log-{target}-{name}-{mode}-{time.monotonic_ns()}"
    logdir.mkdir()
    cmd = [
        "pgbench",
        "-n",
        "-f",
        str(script),
        "-M",
        mode,
        "-c",
        str(args.clients),
        "-j",
        str(min(args.clients, 2)),
        "-T",
        str(args.duration),
        "-s",
        str(args.scale),
        "--max-tries",
        str(args.max_tries),
        "-l",
        "--log-prefix",
        str(logdir / "tx"),
    ]
    out = subprocess.run(
        cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=args.duration + 120
    )
    if out.returncode not in (0, 2):
        raise RuntimeError(f"pgbench failed on {target}: {out.stderr[-2000:]}")
    text = out.stdout
    latencies = []
    repeated = 0
    for f in logdir.iterdir():
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2].isdigit():
                latencies.append(int(parts[2]) / 1000)
            if len(parts) >= 7 and parts[6].isdigit():  # with --max-tries: the retries
                repeated += int(parts[6])
    return Result(
        target=target,
        script=name,
        mode=mode,
        tps=_field(text, "tps = ", " "),
        latency_mean_ms=_field(text, "latency average = ", " "),
        latency_p99_ms=_p99(latencies),
        transactions=int(_field(text, "number of transactions actually processed: ", "\n")),
        failures=int(_field(text, "number of failed transactions: ", " ", 0)),
        retries=int(_field(text, "number of transactions retried: ", " ", 0)),
        tries_repeated=repeated,
    )


def _field(text: str, prefix: str, end: str, default: float | None = None) -> float:
    i = text.find(prefix)
    if i < 0:
        if default is not None:
            return default
        raise RuntimeError(f"pgbench output lacks {prefix!r}:\n{text}")
    rest = text[i + len(prefix) :]
    j = rest.find(end)
    token = rest[:j] if j >= 0 else rest
    return float(token.split("/")[0].strip())


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    if len(values) < 100:
        return max(values)
    return statistics.quantiles(values, n=100)[98]


def _summarize(results: list[Result]) -> dict[str, dict[str, float]]:
    def best(script: str, mode: str, target: str) -> float | None:
        tps = [r.tps for r in results if (r.script, r.mode, r.target) == (script, mode, target)]
        return max(tps) if tps else None

    out: dict[str, dict[str, float]] = {}
    for script in sorted({r.script for r in results}):
        for mode in sorted({r.mode for r in results}):
            ours = best(script, mode, "percolator")
            theirs = best(script, mode, "postgres")
            if ours is None or theirs is None:
                continue
            entry = {
                "percolator_tps": ours,
                "postgres_tps": theirs,
                "tps_ratio": round(ours / theirs, 3),
            }
            rr = best(script, mode, "postgres_rr")
            if rr:
                entry["postgres_rr_tps"] = rr
                entry["tps_ratio_same_isolation"] = round(ours / rr, 3)
            optimistic = best(script, mode, "percolator_optimistic")
            if optimistic:
                entry["percolator_optimistic_tps"] = optimistic
                entry["with_row_locks_vs_without"] = round(ours / optimistic, 3)
            rc = best(script, mode, "percolator_rc")
            if rc:
                entry["percolator_rc_tps"] = rc
                entry["tps_ratio_read_committed"] = round(rc / theirs, 3)
            out[f"{script}/{mode}"] = entry
    return out


def _print(results: list[Result], summary: dict[str, dict[str, float]]) -> None:
    print(
        f"{'script':8} {'mode':9} {'target':13} {'tps':>9} {'mean ms':>8} {'p99 ms':>8} "
        f"{'txns':>7} {'failed':>6} {'retried':>7} {'retries':>7}"
    )
    for r in results:
        print(
            f"{r.script:8} {r.mode:9} {r.target:13} {r.tps:9.1f} {r.latency_mean_ms:8.2f} "
            f"{r.latency_p99_ms:8.2f} {r.transactions:7d} {r.failures:6d} {r.retries:7d} "
            f"{r.tries_repeated:7d}"
        )
    print()
    for key, s in summary.items():
        same = ""
        if "tps_ratio_same_isolation" in s:
            same = (
                f"; vs Postgres at REPEATABLE READ {s['tps_ratio_same_isolation']:.3f} "
                f"({s['postgres_rr_tps']:.0f} tps)"
            )
        if "with_row_locks_vs_without" in s:
            same += (
                f"; without row locks {s['percolator_optimistic_tps']:.0f} tps "
                f"(with / without {s['with_row_locks_vs_without']:.3f})"
            )
        if "tps_ratio_read_committed" in s:
            same += (
                f"; both at READ COMMITTED {s['tps_ratio_read_committed']:.3f} "
                f"({s['percolator_rc_tps']:.0f} tps)"
            )
        print(
            f"{key:20} tps_ratio = {s['tps_ratio']:.3f}  "
            f"({s['percolator_tps']:.0f} / {s['postgres_tps']:.0f} tps){same}"
        )
