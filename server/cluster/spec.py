"""What a local cluster is made of: how many of each process, where it lives, which ports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DIR = Path("cluster")
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ClusterSpec:
    """The shape of a local cluster.

    A port of 0 means "any free port" (chosen when the cluster starts); otherwise shard ``i``
    listens on ``shard_base_port + i`` and server ``i`` on ``server_base_port + i``.
    """

    shards: int = 1
    servers: int = 1
    workers: int = 1
    dir: Path = field(default=DEFAULT_DIR)
    shard_base_port: int = 0
    coordinator_port: int = 0
    server_base_port: int = 0
    log_level: str = "WARNING"
    """The ``--log-level`` of the coordinator, servers and workers."""
    ready_timeout: float = 120.0
    """Seconds each process gets to become ready before ``up`` gives up."""
    coordinator_args: tuple[str, ...] = ()
    """Extra flags appended to each ``percolator coordinator`` command line."""
    server_args: tuple[str, ...] = ()
    """Extra flags appended to each ``percolator serve`` command line (e.g. ``--catalog-poll``)."""
    worker_args: tuple[str, ...] = ()
    """Extra flags appended to each ``percolator worker`` command line (e.g. ``--lease-ms``):
    fault tests shorten leases and polls this way."""

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ValueError("a cluster needs at least one shard")
        if self.servers < 0 or self.workers < 0:
            raise ValueError("the number of servers and workers cannot be negative")
        for name in ("shard_base_port", "coordinator_port", "server_base_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ValueError(f"{name} must be between 0 and 65535, not {port}")
        # Resolve now: processes are started with other working directories and the state
        # file must name the same place whoever reads it.
        object.__setattr__(self, "dir", Path(self.dir).resolve())
        for name in ("coordinator_args", "server_args", "worker_args"):
            # A list passed by a caller would make the frozen spec mutable after all.
            object.__setattr__(self, name, tuple(getattr(self, name)))
