"""pg_stat_activity and the backend signals across the workers of ``percolator serve
--processes N``.

Each worker writes its sessions' pg_stat_activity rows to a file of its own in the pool's
shared directory every :data:`PUBLISH_INTERVAL_S` (when they changed), and lists the other
workers' files beside its own sessions; so another worker's rows are at most that old, as
Postgres's own statistics lag a little. pg_cancel_backend / pg_terminate_backend of another
worker's session go to that worker through the acceptor (the pid names the worker) and return
true when the session is listed. pg_blocking_pids knows the lock waits of the worker's own
sessions only (which rows a session holds is kept in its process).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from percolator.server.sql.backends import BackendActivity, Backends

log = logging.getLogger(__name__)

PUBLISH_INTERVAL_S = 0.1
_TIMES = ("backend_start", "xact_start", "query_start")


def _to_json(row: BackendActivity) -> dict[str, object]:
    out = dataclasses.asdict(row)
    for name in _TIMES:
        value = out[name]
        out[name] = value.isoformat() if value is not None else None
    return out


def _from_json(data: dict[str, object]) -> BackendActivity:
    for name in _TIMES:
        value = data[name]
        data[name] = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    return BackendActivity(**data)  # type: ignore[arg-type]


def activity_file(directory: Path, index: int) -> Path:
    """Where worker ``index`` publishes its sessions."""
    return directory / f"activity-{index}.json"


class ActivityBoard:
    """The workers' activity files in the pool directory."""

    def __init__(self, directory: Path, index: int, count: int) -> None:
        self._directory = directory
        self._index = index
        self._count = count
        self._last: bytes | None = None

    def _path(self, index: int) -> Path:
        return activity_file(self._directory, index)

    def publish(self, rows: list[BackendActivity]) -> None:
        """Replace this worker's file (atomically: readers never see half of it)."""
        data = json.dumps([_to_json(r) for r in rows]).encode()
        if data == self._last:
            return
        path = self._path(self._index)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        self._last = data

    def others(self) -> list[BackendActivity]:
        """The other workers' sessions as last published (a worker being restarted has none)."""
        rows: list[BackendActivity] = []
        for index in range(self._count):
            if index == self._index:
                continue
            try:
                rows += [_from_json(d) for d in json.loads(self._path(index).read_bytes())]
            except (OSError, ValueError, TypeError):
                continue
        return rows

    def forget(self) -> None:
        """Remove this worker's file (it stops)."""
        with contextlib.suppress(OSError):
            self._path(self._index).unlink()


class PoolBackends(Backends):
    """A worker's :class:`~percolator.server.sql.backends.Backends`: its own sessions, the
    other workers' as published, and signals to them forwarded through the acceptor."""

    def __init__(
        self,
        local: Backends,
        board: ActivityBoard,
        forward_signal: Callable[[int, bool], None],
        index: int,
        count: int,
    ) -> None:
        self.local = local
        self._board = board
        self._forward = forward_signal
        self._index = index
        self._count = count
        self._task: asyncio.Task[None] | None = None

    def activity(self) -> list[BackendActivity]:
        return sorted([*self.local.activity(), *self._board.others()], key=lambda b: b.pid)

    def blocking_pids(self, pid: int) -> list[int] | None:
        return self.local.blocking_pids(pid)

    def signal(self, pid: int, *, terminate: bool) -> bool:
        if pid % self._count == self._index:
            return self.local.signal(pid, terminate=terminate)
        if not any(b.pid == pid for b in self._board.others()):
            return False
        self._forward(pid, terminate)
        return True

    def start(self) -> None:
        """Start publishing this worker's sessions."""
        self._task = asyncio.get_running_loop().create_task(self._publish())

    async def _publish(self) -> None:
        while True:
            try:
                self._board.publish(self.local.activity())
            except OSError:
                log.warning("cannot publish this worker's sessions", exc_info=True)
            await asyncio.sleep(PUBLISH_INTERVAL_S)

    async def stop(self) -> None:
        """Stop publishing and remove this worker's file."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._board.forget()
