"""pg_stat_activity and the backend signals across the workers of ``percolator serve
--processes N``.

Each worker writes its sessions' pg_stat_activity rows to a file of its own in the pool's
shared directory every :data:`PUBLISH_INTERVAL_S` (when they changed), and lists the other
workers' files beside its own sessions; so another worker's rows are at most that old, as
Postgres's own statistics lag a little. pg_cancel_backend / pg_terminate_backend of another
worker's session go to that worker through the acceptor (the pid names the worker) and return
true when the session is listed. pg_blocking_pids (and the isolation tester's
pg_isolation_test_session_is_blocked) sees across workers too: each session's published row
says what lock it waits for, and each worker publishes which of its own sessions hold what the
waiting sessions of all workers wait for (only a session's own process knows what it holds).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from percolator.server.sql.backends import BackendActivity, Backends, LockWait

log = logging.getLogger(__name__)

PUBLISH_INTERVAL_S = 0.1
_TIMES = ("backend_start", "xact_start", "query_start")


def _wait_to_json(wait: LockWait | None) -> dict[str, object] | None:
    if wait is None:
        return None
    return {
        "rows": [[t, row.hex(), c] for t, row, c in wait.rows],
        "holds": wait.holds,
        "advisory": None if wait.advisory is None else [list(wait.advisory[0]), wait.advisory[1]],
    }


def _wait_from_json(data: Any) -> LockWait | None:
    if data is None:
        return None
    advisory = data["advisory"]
    return LockWait(
        tuple((t, bytes.fromhex(row), c) for t, row, c in data["rows"]),
        int(data["holds"]),
        None if advisory is None else ((int(advisory[0][0]), int(advisory[0][1])), advisory[1]),
    )


def _to_json(row: BackendActivity) -> dict[str, object]:
    out: dict[str, object] = {
        f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name != "wait"
    }
    for name in _TIMES:
        value = out[name]
        out[name] = value.isoformat() if isinstance(value, dt.datetime) else None
    out["wait"] = _wait_to_json(row.wait)
    return out


def _from_json(data: dict[str, Any]) -> BackendActivity:
    for name in _TIMES:
        value = data[name]
        data[name] = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    data["wait"] = _wait_from_json(data.get("wait"))
    return BackendActivity(**data)


def activity_file(directory: Path, index: int) -> Path:
    """Where worker ``index`` publishes its sessions."""
    return directory / f"activity-{index}.json"


@dataclass(frozen=True)
class Published:
    """What one worker published: its sessions, and which of them hold a lock that a session
    (of any worker) waits for, by the waiting session's pid."""

    sessions: list[BackendActivity]
    blockers: dict[int, list[int]]


class ActivityBoard:
    """The workers' activity files in the pool directory."""

    def __init__(self, directory: Path, index: int, count: int) -> None:
        self._directory = directory
        self._index = index
        self._count = count
        self._last: bytes | None = None

    def _path(self, index: int) -> Path:
        return activity_file(self._directory, index)

    def publish(self, published: Published) -> None:
        """Replace this worker's file (atomically: readers never see half of it)."""
        data = json.dumps(
            {
                "sessions": [_to_json(r) for r in published.sessions],
                "blockers": {str(k): v for k, v in published.blockers.items()},
            }
        ).encode()
        if data == self._last:
            return
        path = self._path(self._index)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        self._last = data

    def others(self) -> list[Published]:
        """What the other workers last published (a worker being restarted has nothing)."""
        out: list[Published] = []
        for index in range(self._count):
            if index == self._index:
                continue
            try:
                data = json.loads(self._path(index).read_bytes())
                out.append(
                    Published(
                        [_from_json(d) for d in data["sessions"]],
                        {int(k): v for k, v in data["blockers"].items()},
                    )
                )
            except (OSError, ValueError, TypeError, KeyError):
                continue
        return out

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
        others = [b for p in self._board.others() for b in p.sessions]
        return sorted([*self.local.activity(), *others], key=lambda b: b.pid)

    def blocking_pids(self, pid: int) -> list[int] | None:
        others = self._board.others()
        mine = self.local.blocking_pids(pid)
        if mine is None:
            waiter = next((b for p in others for b in p.sessions if b.pid == pid), None)
        else:
            waiter = next((b for b in self.local.activity() if b.pid == pid), None)
        if waiter is None:
            return None
        if waiter.wait is None:
            # Not waiting (as this worker knows now, or as its own worker last said): the
            # holders other workers published a moment ago are for a wait that has ended.
            return mine or []
        if mine is None:
            mine = self.local.holders_of(waiter.wait)
        theirs = [h for p in others for h in p.blockers.get(pid, ())]
        return sorted({*mine, *theirs})

    def holders_of(self, wait: LockWait) -> list[int]:
        return self.local.holders_of(wait)

    def signal(self, pid: int, *, terminate: bool) -> bool:
        if pid % self._count == self._index:
            return self.local.signal(pid, terminate=terminate)
        if not any(b.pid == pid for p in self._board.others() for b in p.sessions):
            return False
        self._forward(pid, terminate)
        return True

    def start(self) -> None:
        """Start publishing this worker's sessions."""
        self._task = asyncio.get_running_loop().create_task(self._publish())

    async def _publish(self) -> None:
        while True:
            try:
                self._board.publish(self._snapshot())
            except OSError:
                log.warning("cannot publish this worker's sessions", exc_info=True)
            await asyncio.sleep(PUBLISH_INTERVAL_S)

    def _snapshot(self) -> Published:
        """This worker's sessions, and which of them hold what the waiting sessions of every
        worker wait for."""
        sessions = self.local.activity()
        waiting = [b for b in sessions if b.wait is not None]
        waiting += [b for p in self._board.others() for b in p.sessions if b.wait is not None]
        blockers: dict[int, list[int]] = {}
        for b in waiting:
            assert b.wait is not None
            holders = [h for h in self.local.holders_of(b.wait) if h != b.pid]
            if holders:
                blockers[b.pid] = holders
        return Published(sessions, blockers)

    async def stop(self) -> None:
        """Stop publishing and remove this worker's file."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._board.forget()
