"""The state file ``<dir>/cluster.json``: every process of a cluster and how to start it again.

It is the only link between ``percolator cluster up`` and the later ``status``, ``down`` or
fault-test commands, which run in other processes: it holds each process's role, pid, address,
command line and log file. It is rewritten whole (write-then-rename) after every change, so a
reader never sees half of it.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
STATE_VERSION = 1


class Role(enum.StrEnum):
    """What a process of the cluster does; also the start order (and reverse stop order)."""

    SHARD = "shard"
    COORDINATOR = "coordinator"
    SERVER = "server"
    WORKER = "worker"

    @property
    def rank(self) -> int:
        """Position in the start order."""
        return list(Role).index(self)


@dataclass
class ProcessRecord:
    """One process of the cluster as the state file remembers it."""

    name: str
    """``shard-0``, ``coordinator``, ``server-1``, ``worker-0``, ..."""
    role: Role
    command: list[str]
    """The command line that starts it (for a shard: the ``pg_ctl`` call, informational)."""
    log: str
    """Its log file (stdout and stderr)."""
    host: str | None = None
    port: int | None = None
    pid: int | None = None
    started_at: float | None = None
    """The process's creation time, to tell it from a later process that reuses its pid."""
    data_dir: str | None = None
    """A shard's data folder (the Postgres cluster is in its ``pg`` subfolder)."""

    @property
    def address(self) -> str | None:
        """``host:port``, for processes that listen."""
        return f"{self.host}:{self.port}" if self.host and self.port else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["role"] = self.role.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(**{**data, "role": Role(data["role"])})


@dataclass
class ClusterState:
    """Everything ``<dir>/cluster.json`` holds."""

    dir: Path
    cwd: str
    """The working directory processes run in (``up``'s own: Python observers import from it)."""
    processes: list[ProcessRecord] = field(default_factory=list)
    version: int = STATE_VERSION

    @property
    def path(self) -> Path:
        return state_path(self.dir)

    def process(self, name: str) -> ProcessRecord:
        """The process called ``name``; KeyError naming the known ones if there is none."""
        for record in self.processes:
            if record.name == name:
                return record
        known = ", ".join(r.name for r in self.processes)
        raise KeyError(f"no process {name!r} in the cluster at {self.dir} (it has: {known})")

    def of_role(self, role: Role) -> list[ProcessRecord]:
        return [r for r in self.processes if r.role is role]

    def save(self) -> None:
        """Write the file atomically."""
        data = {
            "version": self.version,
            "dir": str(self.dir),
            "cwd": self.cwd,
            "processes": [r.to_json() for r in self.processes],
        }
        tmp = self.path.with_suffix(f".json.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, dir: Path) -> ClusterState:
        """Read ``<dir>/cluster.json``; FileNotFoundError when there is no cluster there."""
        path = state_path(dir)
        data = json.loads(path.read_text())
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"{path}: unknown state file version {data.get('version')!r}")
        return cls(
            dir=Path(data["dir"]),
            cwd=data["cwd"],
            processes=[ProcessRecord.from_json(p) for p in data["processes"]],
        )


def state_path(dir: Path) -> Path:
    """Where the state file of the cluster in ``dir`` lives."""
    return Path(dir) / STATE_FILE
