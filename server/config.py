"""Settings of ``percolator serve``: defaults, a TOML config file, environment variables and
command-line flags, in increasing order of precedence.

====================  ===========================  ==========================================
setting               environment variable         default
====================  ===========================  ==========================================
listen                PERCOLATOR_LISTEN            127.0.0.1:5433
store                 PERCOLATOR_STORE             (an embedded Postgres in data_dir)
coordinator           PERCOLATOR_COORDINATOR       (run one in this process)
coordinator_listen    PERCOLATOR_COORDINATOR_LISTEN 127.0.0.1:7470
data_dir              PERCOLATOR_DATA_DIR          ./data
database              PERCOLATOR_DATABASE          postgres
user                  PERCOLATOR_USER              postgres
password              PERCOLATOR_PASSWORD          (none)
auth                  PERCOLATOR_AUTH              scram-sha-256 with a password, else trust
tls_cert, tls_key     PERCOLATOR_TLS_CERT/_KEY     (no TLS)
max_connections       PERCOLATOR_MAX_CONNECTIONS   100
statement_timeout     PERCOLATOR_STATEMENT_TIMEOUT 0 (off)
idle_in_transaction_session_timeout  PERCOLATOR_IDLE_IN_TRANSACTION_SESSION_TIMEOUT  0 (off)
locking               PERCOLATOR_LOCKING           pessimistic (row locks; or optimistic)
catalog_poll          PERCOLATOR_CATALOG_POLL      1 (seconds; 0: never look for others' DDL)
metrics_listen        PERCOLATOR_METRICS_LISTEN    (off; e.g. 127.0.0.1:9187, port 0 = any free)
processes             PERCOLATOR_PROCESSES         1 (SQL worker processes; see worker_pool.py)
====================  ===========================  ==========================================

The config file (``--config FILE``) holds the same keys at its top level, e.g.
``listen = "0.0.0.0:5433"``.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, fields, replace
from typing import Any

ENV_PREFIX = "PERCOLATOR_"


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``percolator serve`` needs to start."""

    listen: str = "127.0.0.1:5433"
    store: str | None = None
    coordinator: str | None = None
    coordinator_listen: str = "127.0.0.1:7470"
    data_dir: str = "data"
    database: str = "postgres"
    user: str = "postgres"
    password: str | None = None
    auth: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    max_connections: int = 100
    statement_timeout: str = "0"
    idle_in_transaction_session_timeout: str = "0"
    locking: str = "pessimistic"
    """Sessions' default ``percolator.locking``: row locks (pessimistic) or none (optimistic)."""
    catalog_poll: float = 1.0
    """Seconds between checks for DDL committed by other processes (0: never)."""
    gc_lifetime: float = 600.0
    gc_interval: float = 60.0
    shutdown_timeout: float = 30.0
    observer_workers: int = 1
    """Observer workers run in this process (0: none; run ``percolator worker`` instead)."""
    observer_concurrency: int = 64
    """Observer runs in flight at once per worker."""
    observer_max_failures: int = 5
    """Failed runs of one change before it is parked."""
    observer_retry_base: float = 0.5
    """Seconds before the first retry of a failed run (doubling, up to a minute)."""
    metrics_listen: str | None = None
    """``HOST:PORT`` of the Prometheus endpoint (``/metrics``); None or empty: none."""
    processes: int = 1
    """SQL worker processes (1: this process serves SQL itself; more: an acceptor process runs
    the coordinator and hands connections to that many workers, :mod:`..worker_pool`)."""

    def __post_init__(self) -> None:
        if self.locking not in ("pessimistic", "optimistic"):
            raise ValueError(f"locking must be pessimistic or optimistic, not {self.locking!r}")
        if not 1 <= self.processes <= 256:
            raise ValueError(f"processes must be between 1 and 256, not {self.processes}")

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host or "127.0.0.1", int(port)

    @property
    def auth_method(self) -> str:
        if self.auth:
            return self.auth
        return "scram-sha-256" if self.password else "trust"


def load(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """The configuration from defaults, ``args.config``, the environment, then flags."""
    env = os.environ if environ is None else environ
    config = ServerConfig()
    path = getattr(args, "config", None)
    if path:
        with open(path, "rb") as f:
            config = _apply(config, tomllib.load(f), f"config file {path}")
    from_env = {
        f.name: env[ENV_PREFIX + f.name.upper()]
        for f in fields(ServerConfig)
        if ENV_PREFIX + f.name.upper() in env
    }
    config = _apply(config, from_env, "environment")
    from_flags = {
        f.name: getattr(args, f.name)
        for f in fields(ServerConfig)
        if getattr(args, f.name, None) is not None
    }
    return _apply(config, from_flags, "command line")


def _apply(config: ServerConfig, values: dict[str, Any], source: str) -> ServerConfig:
    types = {f.name: f.type for f in fields(ServerConfig)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in types:
            raise ValueError(f"unknown setting {key!r} in {source}")
        kind = types[name]
        if kind in ("int", int):
            value = int(value)
        elif kind in ("float", float):
            value = float(value)
        elif value is not None:
            value = str(value)
        changes[name] = value
    return replace(config, **changes)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``percolator serve`` (each overrides the file and the environment)."""
    p.add_argument("--config", metavar="FILE", help="TOML file with the settings below")
    p.add_argument("--listen", metavar="HOST:PORT", help="SQL address (default 127.0.0.1:5433)")
    p.add_argument("--store", metavar="DSN[,DSN...]", help="Postgres shards (default: embedded)")
    p.add_argument("--coordinator", metavar="HOST:PORT", help="an external coordinator")
    p.add_argument(
        "--coordinator-listen", metavar="HOST:PORT", help="in-process coordinator's address"
    )
    p.add_argument(
        "--data-dir", metavar="DIR", help="embedded Postgres data directory (default ./data)"
    )
    p.add_argument("--database", help="database name clients connect to (default postgres)")
    p.add_argument("--user", help="bootstrap superuser (default postgres)")
    p.add_argument("--password", help="bootstrap superuser's password (or PERCOLATOR_PASSWORD)")
    p.add_argument("--auth", choices=["trust", "password", "md5", "scram-sha-256"])
    p.add_argument("--tls-cert", metavar="FILE")
    p.add_argument("--tls-key", metavar="FILE")
    p.add_argument("--max-connections", type=int)
    p.add_argument(
        "--processes",
        type=int,
        metavar="N",
        help="SQL worker processes, one core each (default 1: this process serves SQL)",
    )
    p.add_argument("--statement-timeout", metavar="DURATION")
    p.add_argument("--idle-in-transaction-session-timeout", metavar="DURATION")
    p.add_argument(
        "--locking",
        choices=["pessimistic", "optimistic"],
        help="sessions' default percolator.locking: writers wait for row locks (pessimistic, "
        "the default) or fail at commit on a conflict (optimistic)",
    )
    p.add_argument(
        "--catalog-poll",
        type=float,
        metavar="SECONDS",
        help="how often to look for other processes' DDL (default 1)",
    )
    p.add_argument("--gc-lifetime", type=float, metavar="SECONDS")
    p.add_argument("--gc-interval", type=float, metavar="SECONDS")
    p.add_argument(
        "--observer-workers",
        type=int,
        metavar="N",
        help="observer workers in this process (default 1; 0: none)",
    )
    p.add_argument(
        "--observer-concurrency",
        type=int,
        metavar="N",
        help="observer runs in flight at once per worker (default 64)",
    )
    p.add_argument(
        "--observer-max-failures",
        type=int,
        metavar="N",
        help="failed runs of one change before it is parked (default 5)",
    )
    p.add_argument(
        "--observer-retry-base",
        type=float,
        metavar="SECONDS",
        help="delay before the first retry of a failed run, doubling (default 0.5)",
    )
    add_metrics_argument(p)


def add_metrics_argument(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """``--metrics-listen``, shared by ``serve``, ``worker`` and ``coordinator``."""
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        default=default,
        help="serve Prometheus metrics on http://HOST:PORT/metrics, port 0 = any free port "
        "(or PERCOLATOR_METRICS_LISTEN; default: off)",
    )
