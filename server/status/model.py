"""What ``percolator status`` and the coordinator's status page show, as plain dataclasses.

A :class:`ClusterStatus` is gathered by :mod:`~percolator.server.status.gather`, rendered as
text by :mod:`~percolator.server.status.text`, as HTML by :mod:`~percolator.server.status.page`
and as JSON (``/status.json``, ``percolator status --json``) by :meth:`ClusterStatus.to_json`.
:meth:`ClusterStatus.from_json` reads that JSON back (``percolator status --url``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

SCHEMA = 1
"""Version of the JSON layout; bumped when a field changes meaning or disappears."""


@dataclass
class ShardStatus:
    """One Postgres shard, as one probe query saw it."""

    index: int
    dsn: str
    """The shard's DSN with any password removed."""
    reachable: bool
    schema_version: int | None = None
    """``percolator_meta.schema_version``; None when the shard was never initialised."""
    safe_point: int | None = None
    """The GC safe point in force on this shard (prewrites at or below it fail)."""
    locks: int | None = None
    """Percolator locks present now (transactions in flight, or left by crashed ones)."""
    size_bytes: int | None = None
    """``pg_database_size`` of the shard's database."""
    postgres_version: str | None = None
    probe_ms: float | None = None
    """How long the probe took (connection included when a new one had to be opened)."""
    error: str | None = None


@dataclass
class CoordinatorStatus:
    """The coordinator: timestamp oracle, liveness registry, groups."""

    address: str
    reachable: bool
    latest_ts: int | None = None
    """The latest timestamp handed out (in-process) or a fresh one (over gRPC)."""
    latest_ts_ms: int | None = None
    """The wall-clock milliseconds encoded in ``latest_ts``."""
    gc_safe_point: int | None = None
    """The GC safe point in force: the lowest among the shards' (GC never goes below it)."""
    gc_safe_point_ms: int | None = None
    """The wall-clock milliseconds encoded in ``gc_safe_point`` (0 until the first GC pass)."""
    gc_next_safe_point: int | None = None
    """Where the next GC pass would go now: the liveness registry's safe point, never below
    the point in force (GC does not lower it)."""
    live_clients: int | None = None
    """Processes reporting their oldest running transaction (only known in-process)."""
    error: str | None = None


@dataclass
class ServerStatus:
    """A ``percolator serve`` process, from its membership of the ``servers`` group."""

    id: str
    sql_address: str | None
    metrics_url: str | None = None
    host: str | None = None
    pid: int | None = None
    lease_remaining_ms: int = 0
    joined_ms: int = 0


@dataclass
class WorkerStatus:
    """An observer worker, from its membership of the ``workers`` group."""

    id: str
    info: str
    lease_remaining_ms: int
    slice: str
    """``i/n``: the worker scans the i-th of n slices of the notification hash space."""
    slice_range: list[int]
    """The inclusive [lo, hi] range of signed 64-bit hashes of that slice."""
    joined_ms: int = 0


@dataclass
class ObserverStatus:
    """One observer: its definition, its backlog and its run counters."""

    name: str
    table: str | None
    columns: str = ""
    kind: str = ""
    paused: bool = False
    pending: int = 0
    """Changes waiting for a run (parked ones excluded)."""
    lag_ms: int | None = None
    """Age of the oldest waiting change; None when nothing waits."""
    runs: int = 0
    commits: int = 0
    conflicts: int = 0
    failures: int = 0
    parked: int = 0
    last_error: str | None = None


@dataclass
class Sample:
    """One point of the coordinator's rolling history (the page's charts)."""

    t_ms: int
    """Wall-clock milliseconds when it was taken."""
    timestamps_per_s: float | None
    """Timestamps the oracle handed out per second since the previous sample (every
    transaction takes one to start and, if it writes, one to commit)."""
    lag_ms: dict[str, int] = field(default_factory=dict)
    """Per observer name: age of its oldest waiting change (0: nothing waits)."""
    pending: dict[str, int] = field(default_factory=dict)


@dataclass
class ClusterStatus:
    """Everything ``percolator status`` reports; ``problems`` is empty when all is well."""

    generated_ms: int
    source: str
    """Who gathered it: ``coordinator`` (in the coordinator process) or ``cli``."""
    coordinator: CoordinatorStatus
    shards: list[ShardStatus] = field(default_factory=list)
    servers: list[ServerStatus] = field(default_factory=list)
    workers: list[WorkerStatus] = field(default_factory=list)
    observers: list[ObserverStatus] = field(default_factory=list)
    observers_error: str | None = None
    """Why the observers could not be read (None: they were, or no store was given)."""
    problems: list[str] = field(default_factory=list)
    """What is down or stuck, one sentence each."""
    history: list[Sample] = field(default_factory=list)
    """The coordinator's samples, oldest first (empty unless gathered by the coordinator)."""
    schema: int = SCHEMA

    @property
    def ok(self) -> bool:
        """Whether everything answered and nothing is stuck."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``json.dumps`` it)."""
        return {"ok": self.ok, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterStatus:
        """The inverse of :meth:`to_json`; unknown keys are ignored (a newer coordinator)."""
        return _load(cls, data)


T = TypeVar("T")


def _load(cls: type[T], data: dict[str, Any]) -> T:
    """Build dataclass ``cls`` from ``data``, recursing into dataclass and list fields."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


def _convert(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if value is None:
        return None
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, v) for v in value]
    if dataclasses.is_dataclass(hint):
        return _load(hint, value)  # type: ignore[arg-type]
    return value
