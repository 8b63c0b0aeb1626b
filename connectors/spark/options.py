"""The data source's options, parsed and checked once, on the driver side, with clear errors.

Spark hands options over as a case-insensitive map of strings. Each kind of job has its own
frozen (and so picklable) dataclass; an unknown option is an error, so that a misspelt one
(``partiton``) is not silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from percolator.connectors.spark.errors import invalid_option
from percolator.server.storage.dsn import parse_dsns

STORE_ENV = "PERCOLATOR_STORE"
COORDINATOR_ENV = "PERCOLATOR_COORDINATOR"

DEFAULT_PARTITIONS = 4
DEFAULT_BATCH_ROWS = 10_000
DEFAULT_GC_BARRIER_TTL_S = 600.0
DEFAULT_LOCK_TTL_S = 600.0
MAX_PARTITIONS = 10_000

_CONNECT = frozenset({"table", "store", "coordinator"})
_READ = _CONNECT | {"partitions", "asof", "batchsize", "gcbarrierttl"}
_WRITE = _CONNECT | {"upsert", "writemode", "batchsize", "lockttl"}
_STREAM = _CONNECT | {"changes", "startingts", "maxrowspertrigger", "batchsize"}
_IGNORED = frozenset({"path"})
"""Options Spark itself may add."""

WRITE_MODES = ("atomic", "partition")


@dataclass(frozen=True)
class Connection:
    """Where the deployment is: its shards' DSNs and the coordinator's address."""

    store: tuple[str, ...]
    coordinator: str


@dataclass(frozen=True)
class ReadOptions:
    """``spark.read.format("percolator")``."""

    connection: Connection
    table: str
    partitions: int
    as_of: int | None
    batch_rows: int
    gc_barrier_ttl_s: float


@dataclass(frozen=True)
class WriteOptions:
    """``df.write.format("percolator")``."""

    connection: Connection
    table: str
    upsert: bool
    atomic: bool
    batch_rows: int
    lock_ttl_s: float


@dataclass(frozen=True)
class StreamOptions:
    """``spark.readStream.format("percolator")``."""

    connection: Connection
    table: str
    starting: str | int
    """``"earliest"``, ``"latest"`` or a timestamp (changes committed after it)."""
    max_rows_per_trigger: int | None
    batch_rows: int


@dataclass(frozen=True)
class TableOptions:
    """Where the table is (what every kind of job needs first)."""

    connection: Connection
    table: str
    changes: bool
    """``changes=true``: the schema of the change stream (Spark asks for a schema before it
    says whether a read or a stream follows)."""


def table_options(options: Mapping[str, str]) -> TableOptions:
    """The table and connection, accepting the options of any kind of job (Spark asks for the
    schema before it is known whether a read or a stream follows)."""
    o = _Options(options, _READ | _WRITE | _STREAM, "job")
    return TableOptions(o.connection(), o.table(), o.boolean("changes", False))


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """Parse the options of a batch read."""
    o = _Options(options, _READ, "read")
    as_of = o.optional_integer("asOf", minimum=1)
    return ReadOptions(
        connection=o.connection(),
        table=o.table(),
        partitions=o.integer("partitions", DEFAULT_PARTITIONS, minimum=1, maximum=MAX_PARTITIONS),
        as_of=as_of,
        batch_rows=o.integer("batchSize", DEFAULT_BATCH_ROWS, minimum=1),
        gc_barrier_ttl_s=o.seconds("gcBarrierTtl", DEFAULT_GC_BARRIER_TTL_S),
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Parse the options of a batch write."""
    o = _Options(options, _WRITE, "write")
    mode = o.text("writeMode", "atomic").lower()
    if mode not in WRITE_MODES:
        raise invalid_option(
            f'invalid writeMode "{mode}"',
            hint="atomic (the whole DataFrame is one transaction) or partition (one "
            "transaction per batch of each partition; not atomic)",
        )
    return WriteOptions(
        connection=o.connection(),
        table=o.table(),
        upsert=o.boolean("upsert", False),
        atomic=mode == "atomic",
        batch_rows=o.integer("batchSize", DEFAULT_BATCH_ROWS, minimum=1),
        lock_ttl_s=o.seconds("lockTtl", DEFAULT_LOCK_TTL_S),
    )


def stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Parse the options of a change stream."""
    o = _Options(options, _STREAM, "stream")
    if not o.boolean("changes", False):
        raise invalid_option(
            'a change stream needs .option("changes", "true")',
            hint="Spark asks a data source for its schema before it says whether it reads a "
            "stream, and a stream's rows have the columns _commit_ts and _op besides the table's",
        )
    raw = o.text("startingTs", "earliest").lower()
    starting: str | int
    if raw in ("earliest", "latest"):
        starting = raw
    else:
        starting = o.integer("startingTs", 0, minimum=0)
    return StreamOptions(
        connection=o.connection(),
        table=o.table(),
        starting=starting,
        max_rows_per_trigger=o.optional_integer("maxRowsPerTrigger", minimum=1),
        batch_rows=o.integer("batchSize", DEFAULT_BATCH_ROWS, minimum=1),
    )


class _Options:
    """Typed access to Spark's string options, with errors that name the option."""

    def __init__(self, options: Mapping[str, str], known: frozenset[str], what: str) -> None:
        self._values = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(self._values) - known - _IGNORED)
        if unknown:
            names = ", ".join(unknown)
            raise invalid_option(
                f"unknown option{'s' if len(unknown) > 1 else ''} for a percolator {what}: {names}",
                hint="known options: " + ", ".join(sorted(known)),
            )

    def get(self, name: str) -> str | None:
        return self._values.get(name.lower())

    def text(self, name: str, default: str) -> str:
        value = self.get(name)
        return default if value is None else value.strip()

    def integer(self, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
        value = self.optional_integer(name, minimum=minimum, maximum=maximum)
        return default if value is None else value

    def optional_integer(
        self, name: str, *, minimum: int, maximum: int | None = None
    ) -> int | None:
        raw = self.get(name)
        if raw is None:
            return None
        try:
            value = int(raw.strip())
        except ValueError:
            raise invalid_option(f'option {name} must be an integer, not "{raw}"') from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise invalid_option(f"option {name} must be {bound}, not {value}")
        return value

    def seconds(self, name: str, default: float) -> float:
        raw = self.get(name)
        if raw is None:
            return default
        text = raw.strip().lower()
        scale = 1.0
        for suffix, factor in (("ms", 0.001), ("s", 1.0), ("min", 60.0), ("h", 3600.0)):
            if text.endswith(suffix):
                text, scale = text[: -len(suffix)].strip(), factor
                break
        try:
            value = float(text) * scale
        except ValueError:
            raise invalid_option(
                f'option {name} must be a duration (seconds, or with ms/s/min/h), not "{raw}"'
            ) from None
        if value <= 0:
            raise invalid_option(f"option {name} must be positive, not {raw}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise invalid_option(f'option {name} must be true or false, not "{raw}"')

    def table(self) -> str:
        name = (self.get("table") or "").strip()
        if not name:
            raise invalid_option(
                'option "table" is required', hint='.option("table", "name_of_the_table")'
            )
        return name

    def connection(self) -> Connection:
        store = self.get("store") or os.environ.get(STORE_ENV)
        if not store:
            raise invalid_option(
                'option "store" is required: the shards\' Postgres DSNs, comma-separated',
                hint=f"or set {STORE_ENV} in the environment of the driver and executors",
            )
        coordinator = self.get("coordinator") or os.environ.get(COORDINATOR_ENV)
        if not coordinator:
            raise invalid_option(
                'option "coordinator" is required: the coordinator\'s host:port (Spark runs '
                "many processes, and only the coordinator may hand out timestamps to them)",
                hint=f"or set {COORDINATOR_ENV} in the environment of the driver and executors",
            )
        try:
            dsns = parse_dsns(store)
        except ValueError as exc:
            raise invalid_option(f"option store: {exc}") from None
        return Connection(tuple(dsns), coordinator.strip())
