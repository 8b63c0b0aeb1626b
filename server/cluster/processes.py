"""Operating-system plumbing for cluster processes: ports, launching, readiness, signals.

Nothing here knows about roles: the supervisor decides what to start and in which order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from percolator.server.cluster.errors import ClusterError

_POLL_S = 0.1
LOG_TAIL_LINES = 25


def free_ports(n: int, host: str, taken: Iterable[int] = ()) -> list[int]:
    """``n`` distinct ports free on ``host`` right now (not in ``taken``).

    The kernel hands them out; another program could still take one before our process binds
    it, which a failed start then reports (the log says "address already in use").
    """
    ports: list[int] = []
    excluded = set(taken)
    while len(ports) < n:
        with socket.socket() as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in excluded:
            excluded.add(port)
            ports.append(port)
    return ports


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def reap(pid: int) -> None:
    """Collect the exit status of ``pid`` if it is our child, so it does not stay a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def creation_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), None if there is none."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def process_alive(pid: int | None, started_at: float | None = None) -> bool:
    """True when ``pid`` runs and is the process that started at ``started_at``.

    A zombie counts as dead: a process killed after its parent exited may linger as one
    under an init that does not reap. The start time guards against a recycled pid.
    """
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        if started_at is not None and abs(proc.create_time() - started_at) > 1.0:
            return False  # another process got the pid: not ours to reap
        if proc.status() == psutil.STATUS_ZOMBIE:
            reap(pid)
            return False
    except psutil.Error:
        return False
    return True


def send_signal(pid: int, sig: signal.Signals) -> None:
    """Signal ``pid`` and, when it leads its own process group, everything in the group.

    Each process ``launch`` starts leads a group (``start_new_session``), so whatever it may
    have started goes with it.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def signal_tree(pid: int, sig: signal.Signals) -> list[tuple[int, float]]:
    """Signal a process and all its descendants; returns their (pid, creation time).

    For a shard: Postgres backends call setsid themselves, so the postmaster's process group
    does not hold them; a SIGKILL of the server as a whole (a crash) must name each one, or
    the orphans keep the shared memory that a restart then refuses to reuse.
    """
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    found = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            found.append((proc.pid, proc.create_time()))
            proc.send_signal(sig)
    return found


def wait_dead(pid: int, started_at: float | None, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the process to end; True if it did."""
    deadline = time.monotonic() + timeout
    while process_alive(pid, started_at):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, start: int = 0) -> str:
    """The last ``lines`` lines of a log file, from byte offset ``start`` on."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    tail = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(tail) if tail else "(the log is empty)"


@dataclass
class Launched:
    """A process just started, and where its output for this run begins in its log."""

    proc: subprocess.Popen[bytes]
    log: Path
    log_offset: int


def launch(command: list[str], log: Path, cwd: str) -> Launched:
    """Start ``command`` in a session of its own (so it outlives the command that started it
    and a Ctrl-C at that terminal does not reach it), stdout and stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        out.flush()
        offset = out.tell()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )
    return Launched(proc, log, offset)


def wait_ready(
    name: str,
    launched: Launched,
    banner: str,
    timeout: float,
    address: tuple[str, int] | None = None,
) -> None:
    """Wait until ``banner`` shows in this run's log and, given an address, it answers TCP.

    ClusterError naming the process, with the tail of its log, if it exits or times out.
    """
    deadline = time.monotonic() + timeout
    seen_banner = False
    while True:
        if not seen_banner:
            try:
                with open(launched.log, "rb") as f:
                    f.seek(launched.log_offset)
                    seen_banner = banner.encode() in f.read()
            except OSError:
                pass
        if seen_banner and (address is None or port_open(*address)):
            return
        code = launched.proc.poll()
        if code is not None:
            raise ClusterError(
                f"{name} exited with status {code} while starting; the end of "
                f"{launched.log}:\n{log_tail(launched.log, start=launched.log_offset)}"
            )
        if time.monotonic() >= deadline:
            waiting_for = (
                f"its banner {banner!r}" if not seen_banner else f"port {address[1]}"  # type: ignore[index]
            )
            raise ClusterError(
                f"{name} was not ready after {timeout:.0f} s (waiting for {waiting_for}); "
                f"the end of {launched.log}:\n{log_tail(launched.log, start=launched.log_offset)}"
            )
        time.sleep(_POLL_S)
