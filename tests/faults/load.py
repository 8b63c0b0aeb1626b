"""A steady load for fault tests: bank transfers from several psycopg clients in threads.

Every transfer is one transaction: take its start timestamp (``txid_current()``), move an
amount between two accounts and insert a row into ``transfers``. An observer on ``transfers``
copies each new row into ``audit`` (the observer work: one run per transfer, exactly once).

Each client keeps what the checks need afterwards:

- the transfers whose ``COMMIT`` was acknowledged (must all be visible at the end), those whose
  outcome is unknown (the connection or the commit failed in a way that does not say), and
  those that certainly did not commit (must never appear);
- every error, with its time, SQLSTATE and message, so a test can say which errors a fault may
  cause and which it may not;
- the start timestamps of its transactions in order: a client's transactions run one after
  another, so these must strictly increase, across coordinator restarts too.

Clients retry 40001 and every other error after a short pause, reconnecting (to any server in
their connection string) when the connection broke: the load goes on through every fault.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

ACCOUNTS = 20
INITIAL_BALANCE = 1000
TOTAL = ACCOUNTS * INITIAL_BALANCE

SCHEMA = [
    "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)",
    "CREATE TABLE transfers (id bigint PRIMARY KEY, src int, dst int, amount int, client text)",
    "CREATE TABLE audit (id bigint, amount int, run_ts bigint, PRIMARY KEY (id, run_ts))",
    # The observer work: every committed transfer gets one audit row per committed run, so a
    # change processed twice shows as two rows, and one never processed as none.
    "CREATE OBSERVER audit_transfers ON transfers (amount) AS $$"
    " INSERT INTO audit VALUES (NEW.id, NEW.amount, txid_current()) $$",
]

CONNECT_TIMEOUT_S = 5
PAUSE_AFTER_ERROR_S = 0.2
"""How long a client waits after an error before it tries again (no busy loop while a
process is down)."""


@dataclass(frozen=True)
class ClientError:
    """One error a client got."""

    at: float
    """``time.monotonic()`` when it happened."""
    client: str
    sqlstate: str | None
    """None when the connection itself failed (no ErrorResponse)."""
    message: str
    step: str
    """``connect``, ``statement`` or ``commit``."""
    port: int | None
    """The server port the client was connected to, if any."""


@dataclass
class ClientStats:
    """What one client did."""

    acked: list[int] = field(default_factory=list)
    """Transfer ids whose COMMIT returned success."""
    unknown: list[int] = field(default_factory=list)
    """Transfer ids whose COMMIT failed without saying whether it happened."""
    aborted: list[int] = field(default_factory=list)
    """Transfer ids that certainly did not commit (40001, or an error before COMMIT)."""
    start_ts: list[int] = field(default_factory=list)
    """Each transaction's ``txid_current()`` (its start timestamp), in order."""
    commit_times: list[float] = field(default_factory=list)
    """``time.monotonic()`` of each acknowledged commit."""
    commit_ports: list[int] = field(default_factory=list)
    """The server port of each acknowledged commit."""
    errors: list[ClientError] = field(default_factory=list)


class BankClient(threading.Thread):
    """One client thread running transfers until told to stop."""

    def __init__(self, load: BankLoad, name: str, conninfo: str) -> None:
        super().__init__(name=f"bank-{name}", daemon=True)
        self.load = load
        self.client = name
        self.conninfo = conninfo
        self.stats = ClientStats()
        self.reconnect_requested = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._rng = random.Random(name)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.load.stopping.is_set():
                if self.reconnect_requested.is_set():
                    self.reconnect_requested.clear()
                    self._drop()
                self._one_transfer()
        finally:
            self._drop()

    def _one_transfer(self) -> None:
        try:
            conn = self._connection()
        except psycopg.Error as exc:
            self._record(exc, "connect")
            self._pause()
            return
        src, dst = self._rng.sample(range(ACCOUNTS), 2)
        amount = self._rng.randint(1, 50)
        tid = next(self.load.ids)
        step = "statement"
        try:
            conn.execute("BEGIN")
            ts = conn.execute("SELECT txid_current()").fetchone()
            assert ts is not None
            self._note_start_ts(int(ts[0]))
            conn.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, src))
            conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, dst))
            conn.execute(
                "INSERT INTO transfers VALUES (%s, %s, %s, %s, %s)",
                (tid, src, dst, amount, self.client),
            )
            step = "commit"
            status = conn.execute("COMMIT").statusmessage
        except psycopg.Error as exc:
            self._record(exc, step)
            with self.load.lock:
                if step == "commit" and getattr(exc, "sqlstate", None) != "40001":
                    # The commit was sent: it may have happened (08007, a lost connection,
                    # the coordinator gone between prewrite and commit_ts, ...).
                    self.stats.unknown.append(tid)
                else:
                    self.stats.aborted.append(tid)
            self._after_error(conn)
            return
        with self.load.lock:
            if status == "COMMIT":
                self.stats.acked.append(tid)
                self.stats.commit_times.append(time.monotonic())
                self.stats.commit_ports.append(conn.info.port)
            else:  # "ROLLBACK": an error inside the transaction we did not see (never expected)
                self.stats.aborted.append(tid)
        if self.load.pause_s:
            time.sleep(self.load.pause_s)

    def _note_start_ts(self, ts: int) -> None:
        with self.load.lock:
            self.stats.start_ts.append(ts)

    # -- connections and errors ------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
        return self._conn

    def _after_error(self, conn: psycopg.Connection[Any]) -> None:
        """Leave the failed transaction (the connection stays usable) or drop a broken
        connection, then pause."""
        if conn.closed or conn.broken:
            self._drop()
        else:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                self._record(exc, "rollback")
                self._drop()
        self._pause()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def _record(self, exc: psycopg.Error, step: str) -> None:
        port = None
        if self._conn is not None and not self._conn.closed:
            port = self._conn.info.port
        error = ClientError(
            time.monotonic(), self.client, getattr(exc, "sqlstate", None), str(exc), step, port
        )
        with self.load.lock:
            self.stats.errors.append(error)

    def _pause(self) -> None:
        self.load.stopping.wait(PAUSE_AFTER_ERROR_S)


class BankLoad:
    """Several :class:`BankClient` threads and what they recorded."""

    def __init__(self, clients: dict[str, str], pause_s: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.ids = itertools.count(1)  # thread-safe enough: next() on a count is atomic
        self.pause_s = pause_s
        self.clients = {name: BankClient(self, name, info) for name, info in clients.items()}

    def start(self) -> None:
        for client in self.clients.values():
            client.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every client and wait for it (a statement in flight finishes first)."""
        self.stopping.set()
        for client in self.clients.values():
            client.join(timeout)
        stuck = [c.client for c in self.clients.values() if c.is_alive()]
        assert not stuck, f"clients did not stop within {timeout} s: {stuck}"

    # -- what happened ---------------------------------------------------------------------

    def stats(self, name: str) -> ClientStats:
        return self.clients[name].stats

    def acked(self) -> set[int]:
        with self.lock:
            return {t for c in self.clients.values() for t in c.stats.acked}

    def unknown(self) -> set[int]:
        with self.lock:
            return {t for c in self.clients.values() for t in c.stats.unknown}

    def aborted(self) -> set[int]:
        with self.lock:
            return {t for c in self.clients.values() for t in c.stats.aborted}

    def commits(self, names: Iterable[str] | None = None, since: float = 0.0) -> int:
        """Acknowledged commits of the clients named (all by default) after ``since``."""
        chosen = self.clients if names is None else {n: self.clients[n] for n in names}
        with self.lock:
            return sum(1 for c in chosen.values() for t in c.stats.commit_times if t >= since)

    def errors(
        self, names: Iterable[str] | None = None, since: float = 0.0, until: float = float("inf")
    ) -> list[ClientError]:
        chosen = self.clients if names is None else {n: self.clients[n] for n in names}
        with self.lock:
            return [e for c in chosen.values() for e in c.stats.errors if since <= e.at <= until]

    def max_start_ts(self) -> int:
        with self.lock:
            return max((max(c.stats.start_ts, default=0) for c in self.clients.values()), default=0)

    def wait_for_commits(
        self, n: int, names: Iterable[str] | None = None, since: float = 0.0, timeout: float = 60.0
    ) -> None:
        """Wait until the clients named have ``n`` acknowledged commits after ``since``."""
        names = list(names) if names is not None else None
        wait_until(
            lambda: self.commits(names, since) >= n,
            timeout,
            f"{n} commits by {names or 'all clients'} (errors: {self.errors(names, since)[-5:]})",
        )

    def reconnect(self, names: Iterable[str]) -> None:
        """Make the clients named open a new connection before their next transfer."""
        for name in names:
            self.clients[name].reconnect_requested.set()


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except (psycopg.Error, OSError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} ({last!r})")
        time.sleep(every)
