"""A private Postgres in a data directory, for running with no DSN configured.

The binaries come from the ``pgserver`` wheel (a relocatable Postgres build), so a machine needs
nothing but ``pip install``. Postgres refuses to run as root; as root the server runs as the
system user ``pgserver`` (created on first use, as pgserver itself does).

Lifecycle: :meth:`EmbeddedPostgres.start` initialises the cluster if needed and starts it unless
it is already running (a restart reuses the data). :meth:`stop` stops it only if this process
started it, so several processes may share one data directory.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

SYSTEM_USER_WHEN_ROOT = "pgserver"
SUPERUSER = "postgres"
# Unix socket paths are limited to 107 bytes; leave room for "/.s.PGSQL.NNNNN".
_MAX_SOCKET_DIR_LEN = 80

# Settings the store relies on: per-row advisory locks need a larger lock table than the default,
# and many concurrent clients need connections. Durability settings are left at their defaults.
_SHARED_MEMORY_BUSY = "pre-existing shared memory block"
_SHARED_MEMORY_WAIT_S = 20.0

SERVER_SETTINGS: dict[str, str] = {
    "max_connections": "300",
    "max_locks_per_transaction": "1024",
    "shared_buffers": "256MB",
    "listen_addresses": "",
}


def _binaries() -> Path:
    # Imported lazily (only the embedded mode needs it); its import warns about an unset
    # XDG_RUNTIME_DIR through platformdirs, which does not concern us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _run_as_user() -> str | None:
    """The system user to run Postgres as: ourselves, or a dedicated user when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER_WHEN_ROOT)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "-s",
                "/usr/sbin/nologin",
                SYSTEM_USER_WHEN_ROOT,
            ],
            check=True,
            capture_output=True,
        )
    return SYSTEM_USER_WHEN_ROOT


def _make_traversable(path: Path) -> None:
    """Let another user traverse every parent folder of ``path`` (needed when we are root)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        parent.chmod(mode | stat.S_IXOTH | stat.S_IXGRP)


def _grant_binaries(bin_dir: Path) -> None:
    for folder in (bin_dir, bin_dir.parent / "lib", bin_dir.parent / "share"):
        if not folder.exists():
            continue
        _make_traversable(folder)
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                p = Path(root, name)
                p.chmod(
                    p.stat().st_mode
                    | stat.S_IROTH
                    | stat.S_IRGRP
                    | (stat.S_IXOTH | stat.S_IXGRP if p.is_dir() or os.access(p, os.X_OK) else 0)
                )


@dataclass
class EmbeddedPostgres:
    """A Postgres cluster living in ``data_dir``; ``port`` set means it also listens on TCP."""

    data_dir: Path
    port: int | None = None
    log_file: Path | None = None
    """Where Postgres writes its log (default ``<data_dir>/pg/server.log``)."""
    _started_here: bool = field(default=False, init=False)
    _user: str | None = field(default=None, init=False)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.log_file if self.log_file is not None else self.pgdata / "server.log"

    @property
    def pid(self) -> int | None:
        """The postmaster's process id while the cluster runs (from ``postmaster.pid``)."""
        try:
            first = (self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0]
        except OSError:
            return None
        return int(first) if first.strip().isdigit() else None

    @property
    def socket_dir(self) -> Path:
        candidate = self.data_dir.resolve() / "run"
        if len(str(candidate)) <= _MAX_SOCKET_DIR_LEN:
            return candidate
        digest = hashlib.sha1(str(candidate).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"percolator-pg-{digest}"

    @property
    def socket_port(self) -> int:
        return self.port or 5432

    @property
    def dsn(self) -> str:
        """An asyncpg/libpq DSN that reaches this server over its Unix socket."""
        return f"postgresql://{SUPERUSER}@/postgres?host={self.socket_dir}&port={self.socket_port}"

    def _pg(self, exe: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(_binaries() / exe), *args],
            user=self._user,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self) -> str:
        """Initialise if needed, start unless running, and return the DSN."""
        self._user = _run_as_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            _grant_binaries(_binaries())
            _make_traversable(self.data_dir.resolve())
            entry = pwd.getpwnam(self._user)
            for p in (self.data_dir, self.socket_dir):
                os.chown(p, entry.pw_uid, entry.pw_gid)
            if self.pgdata.exists():
                shutil.chown(self.pgdata, self._user, self._user)
            if self.log_file is not None:
                # pg_ctl opens the log as the Postgres user, who cannot create files in a
                # folder of ours: hand it the file.
                _make_traversable(self.log_file.parent.resolve())
                self.log_file.touch()
                os.chown(self.log_file, entry.pw_uid, entry.pw_gid)
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        if not self.is_running():
            self._start_server()
            self._started_here = True
            atexit.register(self.stop)
        return self.dsn

    def detach(self) -> None:
        """Leave the server running when this interpreter exits (a cluster's shards outlive
        the command that started them); :meth:`stop` then needs ``force``."""
        atexit.unregister(self.stop)
        self._started_here = False

    def _initdb(self) -> None:
        result = self._pg(
            "initdb",
            "-D",
            str(self.pgdata),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed in {self.pgdata}:\n{result.stderr}")

    def _start_server(self) -> None:
        """pg_ctl start. Right after a crash of the previous server, its backends may hold the
        shared memory block a few moments more (Postgres then refuses to start): that case
        is tried again for up to ``_SHARED_MEMORY_WAIT_S``."""
        deadline = time.monotonic() + _SHARED_MEMORY_WAIT_S
        while True:
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._pg_ctl_start()
                return
            except RuntimeError:
                # Only this attempt's lines: the log keeps those of earlier failures.
                busy = self._log_since(log_start).find(_SHARED_MEMORY_BUSY.encode()) >= 0
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def _log_since(self, offset: int) -> bytes:
        if not self.log_path.exists():
            return b""
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read()

    def _pg_ctl_start(self) -> None:
        settings = dict(SERVER_SETTINGS)
        settings["unix_socket_directories"] = str(self.socket_dir)
        settings["port"] = str(self.socket_port)
        if self.port is not None:
            settings["listen_addresses"] = "127.0.0.1"
        options = " ".join(f"-c {k}='{v}'" for k, v in settings.items())
        result = self._pg(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-w",
            "-t",
            "60",
            "-l",
            str(self.log_path),
            "-o",
            options,
            "start",
        )
        if result.returncode != 0:
            log_text = self.log_path.read_text(errors="replace")[-4000:]
            raise RuntimeError(
                f"embedded Postgres failed to start in {self.pgdata}:\n{result.stderr}\n{log_text}"
            )

    def is_running(self) -> bool:
        if not (self.pgdata / "postmaster.pid").exists():
            return False
        return self._pg("pg_ctl", "-D", str(self.pgdata), "status").returncode == 0

    def stop(self, *, force: bool = False) -> None:
        """Stop the server if this process started it (or always, with ``force``)."""
        if not (self._started_here or force):
            return
        if self._user is None:
            self._user = _run_as_user()
        if self.is_running():
            self._pg("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", "fast", "stop")
        self._started_here = False
