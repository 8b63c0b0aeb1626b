"""The cluster's Postgres shards: each an embedded Postgres cluster of its own on a TCP port.

They are started through :class:`EmbeddedPostgres` (``pg_ctl start``), detached from the
interpreter that started them so that they outlive ``percolator cluster up``, and stopped with
``pg_ctl stop -m fast``.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from percolator.server.cluster.errors import ClusterError
from percolator.server.cluster.processes import (
    creation_time,
    log_tail,
    port_open,
    process_alive,
    signal_tree,
    wait_dead,
)
from percolator.server.cluster.state import ProcessRecord
from percolator.server.storage.embedded import SUPERUSER, EmbeddedPostgres


def shard_dsn(host: str, port: int) -> str:
    """The DSN the other processes reach a shard by (TCP, trust authentication)."""
    return f"postgresql://{SUPERUSER}@{host}:{port}/postgres"


def shard_postgres(record: ProcessRecord) -> EmbeddedPostgres:
    """The embedded Postgres behind a shard's record."""
    assert record.data_dir is not None and record.port is not None
    return EmbeddedPostgres(Path(record.data_dir), port=record.port, log_file=Path(record.log))


def shard_command(data_dir: Path, log: Path) -> list[str]:
    """The ``pg_ctl`` call that starts a shard, as shown in the state file."""
    return ["pg_ctl", "-D", str(data_dir / "pg"), "-l", str(log), "start"]


def start_shard(record: ProcessRecord) -> None:
    """Initialise (first time) and start a shard, and fill in its pid; it keeps running after
    this interpreter exits. ClusterError with the tail of its log if it does not come up."""
    assert record.host is not None and record.port is not None
    pg = shard_postgres(record)
    try:
        pg.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(f"{record.name} (Postgres in {pg.pgdata}) did not start: {exc}") from exc
    pg.detach()
    if not port_open(record.host, record.port):
        # start() leaves a server it finds running alone: one started on another port (a
        # state file lost or edited) would be taken for ours.
        raise ClusterError(
            f"{record.name}: a Postgres runs in {pg.pgdata} but does not answer on port "
            f"{record.port}; stop it with `pg_ctl -D {pg.pgdata} stop`. The end of "
            f"{record.log}:\n{log_tail(Path(record.log))}"
        )
    record.pid = pg.pid
    record.started_at = creation_time(record.pid) if record.pid is not None else None


def stop_shard(record: ProcessRecord, timeout: float = 60.0) -> None:
    """``pg_ctl stop -m fast`` (rolls back open transactions, then a clean shutdown); SIGKILL
    the postmaster's process group if it is still there afterwards."""
    pg = shard_postgres(record)
    try:
        pg.stop(force=True)
    except (OSError, subprocess.SubprocessError):
        pass  # the SIGKILL below is the fallback
    if record.pid is not None and process_alive(record.pid, record.started_at):
        for pid, started_at in signal_tree(record.pid, signal.SIGKILL):
            wait_dead(pid, started_at, timeout)
