"""``percolator cluster up|status|down|kill|restart``: a local cluster of separate processes.

``up`` starts N embedded Postgres shards, one coordinator, M SQL servers and K observer
workers, each its own OS process that keeps running after the command returns, and prints
how to connect. Everything lives in one folder (default ./cluster): the shards' data, a log
per process in logs/, and cluster.json, which the other subcommands read.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from percolator.server.cluster import DEFAULT_DIR, Cluster, ClusterError, ClusterSpec, Role
from percolator.server.status.text import table


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``cluster`` subcommand and its own subcommands."""
    p = subparsers.add_parser(
        "cluster",
        help="run a local cluster: shards, coordinator, SQL servers, workers as processes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start a cluster and print how to connect")
    _add_dir(up)
    up.add_argument("--shards", type=int, default=1, help="Postgres shards (default 1)")
    up.add_argument("--servers", type=int, default=1, help="SQL servers (default 1)")
    up.add_argument("--workers", type=int, default=1, help="observer workers (default 1)")
    up.add_argument(
        "--shard-base-port",
        type=int,
        default=0,
        metavar="PORT",
        help="shard i listens on PORT+i (default: free ports)",
    )
    up.add_argument(
        "--coordinator-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the coordinator's port (default: a free port)",
    )
    up.add_argument(
        "--server-base-port",
        type=int,
        default=0,
        metavar="PORT",
        help="SQL server i listens on PORT+i (default: free ports)",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long each process may take to be ready (default 120)",
    )
    up.set_defaults(run=_up)

    status = sub.add_parser(
        "status", help="each process: role, pid, address, alive or dead (exit 1 if any dead)"
    )
    _add_dir(status)
    status.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    status.set_defaults(run=_status)

    down = sub.add_parser("down", help="stop every process of the cluster (its data stays)")
    _add_dir(down)
    down.add_argument(
        "--timeout",
        type=float,
        default=45.0,
        metavar="SECONDS",
        help="grace period after SIGTERM before SIGKILL (default 45)",
    )
    down.set_defaults(run=_down)

    kill = sub.add_parser("kill", help="send a signal (default SIGKILL) to one process")
    _add_dir(kill)
    kill.add_argument("name", help="shard-0, coordinator, server-1, worker-0, ...")
    kill.add_argument(
        "--signal",
        default="KILL",
        help="signal name or number (default KILL); after KILL, TERM, INT or QUIT the "
        "command waits for the process to end",
    )
    kill.set_defaults(run=_kill)

    restart = sub.add_parser("restart", help="start one process again, same ports and flags")
    _add_dir(restart)
    restart.add_argument("name", help="shard-0, coordinator, server-1, worker-0, ...")
    restart.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")
    restart.set_defaults(run=_restart)


def _add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"the cluster's folder (default ./{DEFAULT_DIR})",
    )


def _fail(exc: Exception) -> int:
    print(f"percolator cluster: {exc}", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    try:
        spec = ClusterSpec(
            shards=args.shards,
            servers=args.servers,
            workers=args.workers,
            dir=args.dir,
            shard_base_port=args.shard_base_port,
            coordinator_port=args.coordinator_port,
            server_base_port=args.server_base_port,
            log_level=args.log_level,
            ready_timeout=args.timeout,
        )
    except ValueError as exc:
        print(f"percolator cluster: {exc}", file=sys.stderr)
        return 2
    try:
        cluster = Cluster.up(spec)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    print(describe(cluster), flush=True)
    return 0


def describe(cluster: Cluster) -> str:
    """What ``up`` prints: where the cluster is and how to connect to it."""
    state = cluster.state
    counts = (
        f"{len(state.of_role(Role.SHARD))} shard(s), {len(state.of_role(Role.SERVER))} "
        f"server(s), {len(state.of_role(Role.WORKER))} worker(s)"
    )
    lines = [f"percolator cluster is running in {cluster.dir} ({counts})"]
    for i, server in enumerate(state.of_role(Role.SERVER)):
        lines.append(f'  {server.name + ":":<13} psql "{cluster.server_conninfo(i)}"')
    if len(state.of_role(Role.SERVER)) > 1:
        lines.append(f'  {"any server:":<13} psql "{cluster.conninfo}"')
    lines += [
        f"  {'coordinator:':<13} {cluster.coordinator_address}",
        f"  {'shards:':<13} {cluster.store}",
        f"  {'Python:':<13} db = await percolator.clients.connect("
        f'coordinator="{cluster.coordinator_address}", store="{cluster.store}")',
        f"  {'logs:':<13} {cluster.dir / 'logs'}",
        f"  {'status:':<13} percolator cluster status --dir {cluster.dir}",
        f"  {'stop:':<13} percolator cluster down --dir {cluster.dir}",
    ]
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    try:
        cluster = Cluster.load(args.dir)
    except ClusterError as exc:
        return _fail(exc)
    found = cluster.status()
    if args.json:
        servers = cluster.state.of_role(Role.SERVER)
        print(
            json.dumps(
                {
                    "dir": str(cluster.dir),
                    "coordinator": cluster.coordinator_address,
                    "store": cluster.store,
                    "conninfo": cluster.conninfo if servers else None,
                    "processes": [s.to_json() for s in found],
                },
                indent=2,
            )
        )
    else:
        rows = []
        for s in found:
            state = "alive" if s.alive else f"dead ({s.detail})"
            rows.append((s.name, s.role.value, s.pid or "-", s.address or "-", state))
        print(table(("NAME", "ROLE", "PID", "ADDRESS", "STATE"), rows, indent=""))
    return 0 if all(s.alive for s in found) else 1


def _down(args: argparse.Namespace) -> int:
    try:
        cluster = Cluster.load(args.dir)
    except ClusterError as exc:
        # Nothing to stop is what `down` is for: say so, and succeed.
        print(f"percolator cluster: {exc}; nothing to stop")
        return 0
    try:
        stopped = cluster.down(timeout=args.timeout)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    if stopped:
        print(f"stopped {len(stopped)} process(es) of the cluster in {cluster.dir}")
    else:
        print(f"the cluster in {cluster.dir} was not running")
    return 0


# Signals after which `kill` waits for the process to end (the others, like STOP, do not end it).
_ENDING_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def _parse_signal(text: str) -> signal.Signals:
    if text.isdigit():
        return signal.Signals(int(text))
    name = text.upper()
    return signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]


def _kill(args: argparse.Namespace) -> int:
    try:
        sig = _parse_signal(args.signal)
    except (KeyError, ValueError):
        print(f"percolator cluster: unknown signal {args.signal!r}", file=sys.stderr)
        return 2
    try:
        Cluster.load(args.dir).kill(args.name, sig, wait=sig in _ENDING_SIGNALS)
    except ClusterError as exc:
        return _fail(exc)
    print(f"sent {sig.name} to {args.name}")
    return 0


def _restart(args: argparse.Namespace) -> int:
    try:
        status = Cluster.load(args.dir).restart(args.name, timeout=args.timeout)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    print(f"{status.name} is running again (pid {status.pid})")
    return 0
