"""Starting, watching and stopping a local cluster: the public :class:`Cluster`.

``Cluster.up`` starts the shards, then the coordinator, then the SQL servers and observer
workers (each needs the ones before it), waiting for each to be ready; ``down`` stops them in
the reverse order. Every process is an OS process of its own that outlives the Python process
that started it; ``<dir>/cluster.json`` (see :mod:`.state`) is how later commands find them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from percolator.server.cluster.errors import ClusterError
from percolator.server.cluster.processes import (
    Launched,
    creation_time,
    free_ports,
    launch,
    port_open,
    process_alive,
    send_signal,
    signal_tree,
    wait_dead,
    wait_ready,
)
from percolator.server.cluster.shards import shard_command, shard_dsn, start_shard, stop_shard
from percolator.server.cluster.spec import LOOPBACK, ClusterSpec
from percolator.server.cluster.state import ClusterState, ProcessRecord, Role, state_path

SQL_USER = "postgres"
SQL_DATABASE = "postgres"
"""The servers' bootstrap user and database (``percolator serve``'s defaults)."""

STOP_TIMEOUT_S = 45.0
"""How long a process gets to stop after SIGTERM before SIGKILL: more than a server's
default 30 s shutdown timeout for running statements."""

BANNERS: dict[Role, str] = {
    Role.COORDINATOR: "percolator coordinator listening on",
    Role.SERVER: "percolator is running",
    Role.WORKER: "percolator worker running",
}
"""What each command prints once it is ready (see ``server/commands``)."""

_LOCK_FILE = ".cluster.lock"


@dataclass(frozen=True)
class ProcessStatus:
    """What ``status`` found about one process."""

    name: str
    role: Role
    pid: int | None
    address: str | None
    pid_alive: bool
    port_open: bool | None
    """Whether its port answers; None for processes that do not listen (workers)."""
    log: str

    @property
    def alive(self) -> bool:
        """Running, and answering on its port if it has one."""
        return self.pid_alive and self.port_open is not False

    @property
    def detail(self) -> str:
        """Why a process counts as dead, for people."""
        if self.alive:
            return ""
        if self.pid is None:
            return "never started"
        if not self.pid_alive:
            return "process gone"
        return "port not answering"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role.value,
            "pid": self.pid,
            "address": self.address,
            "alive": self.alive,
            "pid_alive": self.pid_alive,
            "port_open": self.port_open,
            "log": self.log,
        }


class Cluster:
    """A local cluster: shards, a coordinator, SQL servers and observer workers, each its own
    OS process, described by ``<dir>/cluster.json``.

    Get one with :meth:`up` (start a new one) or :meth:`load` (one started earlier, possibly
    by another process). Methods that change processes hold a lock file in the cluster's
    folder, so two commands do not start or stop the same cluster at once.
    """

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # Processes this interpreter started, so that they are reaped when they end (a
        # process killed by its own parent would otherwise stay a zombie).
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # -- finding and starting -------------------------------------------------------------

    @classmethod
    def load(cls, dir: Path | str) -> Cluster:
        """The cluster whose state is in ``dir``; ClusterError if there is none."""
        try:
            return cls(ClusterState.load(Path(dir).resolve()))
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {Path(dir).resolve()} (no {state_path(dir).name})"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"cannot read {state_path(dir)}: {exc}") from exc

    @classmethod
    def up(cls, spec: ClusterSpec) -> Cluster:
        """Start a cluster as ``spec`` says and wait until every process is ready.

        A folder holding a stopped cluster is started again with its data (same number of
        shards). ClusterError if one of its processes still runs, or if a process does not
        start (what was started is stopped again; the message names the process and shows
        the end of its log).
        """
        spec.dir.mkdir(parents=True, exist_ok=True)
        with _locked(spec.dir):
            _check_startable(spec)
            cluster = cls(_plan(spec))
            cluster.state.save()
            try:
                cluster._start_all(spec.ready_timeout)
            except BaseException:
                cluster._down()
                raise
        return cluster

    def _start_all(self, timeout: float) -> None:
        for record in self.state.of_role(Role.SHARD):
            self._start(record, timeout)
        for record in self.state.of_role(Role.COORDINATOR):
            self._start(record, timeout)
        # One server first: it creates the catalog's bootstrap rows, which the others then
        # find instead of racing to write them. The rest start side by side.
        servers = self.state.of_role(Role.SERVER)
        if servers:
            self._start(servers[0], timeout)
        rest = servers[1:] + self.state.of_role(Role.WORKER)
        launched = [(record, self._launch(record)) for record in rest]
        for record, run in launched:
            self._wait(record, run, timeout)

    def _start(self, record: ProcessRecord, timeout: float) -> None:
        if record.role is Role.SHARD:
            start_shard(record)
            self.state.save()
        else:
            self._wait(record, self._launch(record), timeout)

    def _launch(self, record: ProcessRecord) -> Launched:
        cwd = self.state.cwd if Path(self.state.cwd).is_dir() else str(self.state.dir)
        run = launch(record.command, Path(record.log), cwd)
        self._children[record.name] = run.proc
        record.pid = run.proc.pid
        record.started_at = creation_time(run.proc.pid)
        # Saved before waiting: if this command dies meanwhile, `down` still finds it.
        self.state.save()
        return run

    def _wait(self, record: ProcessRecord, run: Launched, timeout: float) -> None:
        address = (record.host, record.port) if record.host and record.port else None
        wait_ready(record.name, run, BANNERS[record.role], timeout, address)

    # -- what is there --------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self.state.dir

    @property
    def dsns(self) -> list[str]:
        """The shards' DSNs, in shard order (what ``--store`` takes, comma-separated)."""
        return [shard_dsn(r.host, r.port) for r in self.state.of_role(Role.SHARD)]  # type: ignore[arg-type]

    @property
    def store(self) -> str:
        """The shards' DSNs as one ``--store`` value."""
        return ",".join(self.dsns)

    @property
    def coordinator_address(self) -> str:
        """The coordinator's ``host:port``."""
        address = self.state.process("coordinator").address
        assert address is not None
        return address

    @property
    def server_addresses(self) -> list[tuple[str, int]]:
        """Each SQL server's (host, port), in order."""
        return [(r.host, r.port) for r in self.state.of_role(Role.SERVER)]  # type: ignore[misc]

    def server_conninfo(self, index: int) -> str:
        """A libpq connection string for SQL server ``index``."""
        host, port = self.server_addresses[index]
        return f"host={host} port={port} user={SQL_USER} dbname={SQL_DATABASE}"

    @property
    def conninfo(self) -> str:
        """One libpq connection string naming every SQL server: libpq (psql, psycopg) tries
        them in order until one answers."""
        addresses = self.server_addresses
        hosts = ",".join(h for h, _ in addresses)
        ports = ",".join(str(p) for _, p in addresses)
        return f"host={hosts} port={ports} user={SQL_USER} dbname={SQL_DATABASE}"

    def status(self) -> list[ProcessStatus]:
        """Every process, in start order, with whether it runs and answers."""
        found = []
        for r in self.state.processes:
            child = self._children.get(r.name)
            if child is not None:
                child.poll()  # reap our own children that ended
            found.append(
                ProcessStatus(
                    name=r.name,
                    role=r.role,
                    pid=r.pid,
                    address=r.address,
                    pid_alive=process_alive(r.pid, r.started_at),
                    port_open=port_open(r.host, r.port) if r.host and r.port else None,
                    log=r.log,
                )
            )
        return found

    def process_status(self, name: str) -> ProcessStatus:
        """The status of one process."""
        self.state.process(name)  # KeyError for an unknown name
        return next(s for s in self.status() if s.name == name)

    # -- faults and repairs ---------------------------------------------------------------

    def kill(
        self,
        name: str,
        sig: signal.Signals = signal.SIGKILL,
        *,
        wait: bool = True,
        timeout: float = 30.0,
    ) -> None:
        """Send ``sig`` to one process (for a shard and SIGKILL: its backends too).

        With ``wait``, return once it has ended (pass ``wait=False`` for signals that do not
        end a process, such as SIGSTOP). ClusterError if it is not running or outlives
        ``timeout``.
        """
        record = self._record(name)
        if not process_alive(record.pid, record.started_at):
            raise ClusterError(f"{name} is not running")
        assert record.pid is not None
        if record.role is Role.SHARD and sig == signal.SIGKILL:
            # A crash of the whole server: the postmaster and every backend.
            backends = signal_tree(record.pid, sig)[1:]
            if wait:
                for pid, started_at in backends:
                    wait_dead(pid, started_at, timeout)
        else:
            # Other signals to a shard go to the postmaster only, which passes them on as
            # Postgres means them (TERM: smart shutdown, INT: fast, QUIT: immediate).
            send_signal(record.pid, sig)
        if wait:
            self._reap_when_dead(record, timeout)

    def stop(self, name: str, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop one process cleanly (SIGTERM; a shard: ``pg_ctl stop -m fast``), SIGKILL if
        it takes longer than ``timeout``. Nothing happens if it is not running."""
        record = self._record(name)
        with _locked(self.dir):
            self._stop_records([record], timeout)

    def restart(self, name: str, timeout: float = 120.0) -> ProcessStatus:
        """Start one process again with the same command line and ports, stopping it first if
        it runs, and wait until it is ready; the state file gets its new pid."""
        record = self._record(name)
        with _locked(self.dir):
            self._stop_records([record], STOP_TIMEOUT_S)
            self._start(record, timeout)
        return self.process_status(name)

    def down(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """Stop every process: workers, servers and the coordinator with SIGTERM (SIGKILL
        after ``timeout``), then the shards with ``pg_ctl stop -m fast``. Returns the names of
        the processes that were running. Harmless on a stopped cluster."""
        with _locked(self.dir):
            return self._down(timeout)

    def _down(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        running = [r.name for r in self.state.processes if process_alive(r.pid, r.started_at)]
        for role in reversed(Role):
            self._stop_records(self.state.of_role(role), timeout)
        return running

    def _stop_records(self, records: list[ProcessRecord], timeout: float) -> None:
        """Stop processes of one tier together: all get SIGTERM, then all get ``timeout``."""
        shards = [r for r in records if r.role is Role.SHARD]
        others = [r for r in records if r.role is not Role.SHARD]
        running = [r for r in others if process_alive(r.pid, r.started_at)]
        for r in running:
            send_signal(r.pid, signal.SIGTERM)  # type: ignore[arg-type]
        deadline = time.monotonic() + timeout
        for r in running:
            assert r.pid is not None
            if not wait_dead(r.pid, r.started_at, max(0.0, deadline - time.monotonic())):
                send_signal(r.pid, signal.SIGKILL)
            self._reap_when_dead(r, timeout)
        # Always asked, even when the recorded pid is gone: pg_ctl knows best whether a
        # postmaster runs in the folder.
        for r in shards:
            stop_shard(r, timeout)

    def _reap_when_dead(self, record: ProcessRecord, timeout: float) -> None:
        assert record.pid is not None
        if not wait_dead(record.pid, record.started_at, timeout):
            raise ClusterError(f"{record.name} (pid {record.pid}) did not end in {timeout:.0f} s")
        child = self._children.pop(record.name, None)
        if child is not None:
            child.wait()

    def _record(self, name: str) -> ProcessRecord:
        try:
            return self.state.process(name)
        except KeyError as exc:
            raise ClusterError(exc.args[0]) from None


def _plan(spec: ClusterSpec) -> ClusterState:
    """The records of a new cluster: names, ports, command lines and logs."""
    host = LOOPBACK
    logs = spec.dir / "logs"
    fixed = [
        *(spec.shard_base_port + i for i in range(spec.shards) if spec.shard_base_port),
        *([spec.coordinator_port] if spec.coordinator_port else []),
        *(spec.server_base_port + i for i in range(spec.servers) if spec.server_base_port),
    ]
    if len(set(fixed)) != len(fixed) or any(p > 65535 for p in fixed):
        raise ClusterError(
            f"the ports given make two processes share a port, or run past 65535: {sorted(fixed)}"
        )
    wanted = spec.shards + 1 + spec.servers - len(fixed)
    free = iter(free_ports(wanted, host, taken=fixed))

    def ports(base: int, n: int) -> list[int]:
        return [base + i for i in range(n)] if base else [next(free) for _ in range(n)]

    shard_ports = ports(spec.shard_base_port, spec.shards)
    coordinator_port = ports(spec.coordinator_port, 1)[0]
    server_ports = ports(spec.server_base_port, spec.servers)

    store = ",".join(shard_dsn(host, p) for p in shard_ports)
    coordinator = f"{host}:{coordinator_port}"

    def cli(*args: str) -> list[str]:
        return [sys.executable, "-m", "percolator.server.cli", "--log-level", spec.log_level, *args]

    # Observers run in the workers only; the servers are plain SQL front ends.
    server_args = ["--store", store, "--coordinator", coordinator, "--observer-workers", "0"]
    server_args += ["--auth", "trust"]
    records: list[ProcessRecord] = []
    for i, port in enumerate(shard_ports):
        data_dir = spec.dir / f"shard-{i}"
        log = logs / f"shard-{i}.log"
        records.append(
            ProcessRecord(
                name=f"shard-{i}",
                role=Role.SHARD,
                command=shard_command(data_dir, log),
                log=str(log),
                host=host,
                port=port,
                data_dir=str(data_dir),
            )
        )
    records.append(
        ProcessRecord(
            name="coordinator",
            role=Role.COORDINATOR,
            command=cli(
                "coordinator", "--store", store, "--listen", coordinator, *spec.coordinator_args
            ),
            log=str(logs / "coordinator.log"),
            host=host,
            port=coordinator_port,
        )
    )
    for i, port in enumerate(server_ports):
        records.append(
            ProcessRecord(
                name=f"server-{i}",
                role=Role.SERVER,
                command=cli("serve", *server_args, "--listen", f"{host}:{port}", *spec.server_args),
                log=str(logs / f"server-{i}.log"),
                host=host,
                port=port,
            )
        )
    for i in range(spec.workers):
        records.append(
            ProcessRecord(
                name=f"worker-{i}",
                role=Role.WORKER,
                command=cli(
                    "worker", "--store", store, "--coordinator", coordinator, *spec.worker_args
                ),
                log=str(logs / f"worker-{i}.log"),
            )
        )
    return ClusterState(dir=spec.dir, cwd=os.getcwd(), processes=records)


def _check_startable(spec: ClusterSpec) -> None:
    """Refuse a folder whose cluster still runs, or whose data has another number of shards
    (rows are placed by shard, so the data would be unreadable)."""
    try:
        previous: ClusterState | None = ClusterState.load(spec.dir)
    except FileNotFoundError:
        previous = None
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"cannot read {state_path(spec.dir)}: {exc}") from exc
    if previous is not None:
        running = [r.name for r in previous.processes if process_alive(r.pid, r.started_at)]
        if running:
            raise ClusterError(
                f"a cluster is already running in {spec.dir} ({', '.join(running)}); "
                f"see `percolator cluster status --dir {spec.dir}`, or stop it with "
                f"`percolator cluster down --dir {spec.dir}`"
            )
    existing = 0
    while (spec.dir / f"shard-{existing}" / "pg" / "PG_VERSION").exists():
        existing += 1
    if existing and existing != spec.shards:
        raise ClusterError(
            f"{spec.dir} holds the data of a cluster of {existing} shard(s), not {spec.shards}: "
            f"use --shards {existing}, or another --dir"
        )


@contextlib.contextmanager
def _locked(dir: Path) -> Iterator[None]:
    """Hold ``<dir>/.cluster.lock`` exclusively (waits for another command holding it)."""
    with open(dir / _LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
