"""``percolator status`` and the coordinator's ``/status`` page against a real deployment:
``percolator coordinator`` (with its HTTP endpoint), ``percolator serve --coordinator`` and
``percolator worker`` as separate processes on a fresh database, driven with psycopg.

The tests share the deployment and run in file order; the last one kills the worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest

from percolator.server.runtime import ServerProcess
from percolator.server.storage.schema import SCHEMA_VERSION
from tests.conftest import PostgresServer, create_database

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
WORKER_LEASE_MS = 1500


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "percolator.server.cli", *args]


@dataclass
class Deployment:
    """The processes of one small deployment."""

    store: str
    coordinator: str
    http: str
    """The coordinator's HTTP endpoint, ``http://HOST:PORT``."""
    server: ServerProcess
    worker: subprocess.Popen[str]
    processes: list[subprocess.Popen[str]]

    def status(self, *extra: str, timeout: float = 60) -> tuple[int, str]:
        """Run ``percolator status`` against this deployment: (exit code, stdout)."""
        done = subprocess.run(
            _cli("status", "--coordinator", self.coordinator, "--store", self.store, *extra),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return done.returncode, done.stdout

    def status_json(self) -> tuple[int, dict[str, Any]]:
        code, out = self.status("--json")
        return code, json.loads(out)


def _start(cmd: list[str], ready: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start a process and read its banner up to the line starting with ``ready``."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline()]
    if not lines[0].startswith(ready):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{cmd[3]} did not start: {lines!r}")
    return proc, lines


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def deployment(embedded_pg: PostgresServer) -> Iterator[Deployment]:
    store = asyncio.run(create_database(embedded_pg.dsn, "status"))
    processes: list[subprocess.Popen[str]] = []
    server: ServerProcess | None = None
    try:
        # A GC lifetime of a second, every second: the safe point moves while the tests run.
        coordinator, banner = _start(
            _cli("coordinator", "--listen", "127.0.0.1:0", "--store", store,
                 "--metrics-listen", "127.0.0.1:0", "--gc-lifetime", "1", "--gc-interval", "1"),
            "percolator coordinator listening on",
        )  # fmt: skip
        processes.append(coordinator)
        address = banner[0].split()[-1]
        assert coordinator.stdout is not None
        metrics = coordinator.stdout.readline().strip()
        match = re.fullmatch(r"metrics: (http://[^/]+)/metrics", metrics)
        assert match, metrics
        server = ServerProcess(
            store, "--coordinator", address, "--observer-workers", "0", "--catalog-poll", "0.2"
        )
        server.start()
        worker, _ = _start(
            _cli("worker", "--store", store, "--coordinator", address,
                 "--lease-ms", str(WORKER_LEASE_MS), "--catalog-poll", "0.2"),
            "percolator worker running",
        )  # fmt: skip
        processes.append(worker)
        yield Deployment(store, address, match.group(1), server, worker, processes)
    finally:
        if server is not None:
            server.stop(30)
        for proc in reversed(processes):
            _stop(proc)


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return json.load(response)


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; the last result is in the error."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _settled(deployment: Deployment) -> dict[str, Any] | None:
    """The JSON status once the observer has run and every member has joined."""
    code, data = deployment.status_json()
    observers = {o["name"]: o for o in data["observers"]}
    rec = observers.get("copy_v")
    if code == 0 and data["servers"] and data["workers"] and rec and rec["runs"] >= 3:
        if rec["pending"] == 0 and data["coordinator"]["gc_safe_point"]:
            return data
    return None


@pytest.fixture(scope="module")
def settled(deployment: Deployment) -> dict[str, Any]:
    """Tables, an observer and rows written; the status once everything has caught up."""
    conninfo = f"host=127.0.0.1 port={deployment.server.port} user=postgres dbname=postgres"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE src (id int PRIMARY KEY, v int)")
        conn.execute("CREATE TABLE dst (id int PRIMARY KEY, v int)")
        conn.execute(
            "CREATE OBSERVER copy_v ON src (v) AS $$ INSERT INTO dst VALUES (NEW.id, NEW.v) "
            "ON CONFLICT (id) DO UPDATE SET v = excluded.v $$"
        )
        for i in range(3):
            conn.execute("INSERT INTO src VALUES (%s, %s)", (i, i * 10))
    return wait_for(lambda: _settled(deployment), what="the observer runs and a GC pass")


def test_json_lists_every_part(deployment: Deployment, settled: dict[str, Any]) -> None:
    data = settled
    assert data["ok"] is True and data["problems"] == []
    assert data["source"] == "cli"

    (shard,) = data["shards"]
    assert shard["reachable"] is True
    assert shard["schema_version"] == SCHEMA_VERSION
    assert shard["locks"] == 0
    assert shard["size_bytes"] > 0
    assert shard["dsn"].rsplit("/", 1)[-1] == deployment.store.rsplit("/", 1)[-1]

    c = data["coordinator"]
    assert c["reachable"] is True and c["address"] == deployment.coordinator
    assert c["latest_ts"] > 0
    assert abs(c["latest_ts_ms"] - time.time() * 1000) < 60_000
    # GC ran (lifetime 1 s): the safe point in force is recent and below the latest timestamp.
    assert 0 < c["gc_safe_point"] < c["latest_ts"]
    assert c["gc_next_safe_point"] >= c["gc_safe_point"]

    (server,) = data["servers"]
    assert server["sql_address"] == f"127.0.0.1:{deployment.server.port}"
    assert 0 < server["lease_remaining_ms"] <= 10_000
    assert server["pid"] is not None and server["pid"] != os.getpid()

    (worker,) = data["workers"]
    assert 0 < worker["lease_remaining_ms"] <= WORKER_LEASE_MS
    assert worker["slice"] == "1/1"
    assert worker["slice_range"] == [-(2**63), 2**63 - 1]
    assert f"pid {deployment.worker.pid}" in worker["info"]

    (obs,) = data["observers"]
    assert obs["name"] == "copy_v" and obs["table"] == "src" and obs["columns"] == "v"
    assert obs["paused"] is False
    # Three changes, each run at least once (a run may end in a conflict and be retried).
    assert obs["runs"] >= 3 and obs["commits"] >= 1 and obs["failures"] == 0
    assert obs["pending"] == 0 and obs["lag_ms"] is None and obs["parked"] == 0


def test_text_output(deployment: Deployment, settled: dict[str, Any]) -> None:
    code, out = deployment.status()
    assert code == 0, out
    assert out.startswith("percolator status: OK")
    assert f"coordinator {deployment.coordinator}: up" in out
    assert f"127.0.0.1:{deployment.server.port}" in out
    assert "observer workers (1)" in out and "1/1" in out
    assert re.search(r"copy_v\s+src\s+active\s+0\s+-\s+\d+", out), out
    assert "GC safe point" in out


def test_status_json_endpoint_and_url_mode(deployment: Deployment, settled: dict[str, Any]) -> None:
    data = _get_json(f"{deployment.http}/status.json")
    assert data["source"] == "coordinator" and data["ok"] is True
    assert data["coordinator"]["live_clients"] >= 2  # the server and the worker report
    assert [s["sql_address"] for s in data["servers"]] == [f"127.0.0.1:{deployment.server.port}"]
    assert [o["name"] for o in data["observers"]] == ["copy_v"]
    # The sampler's ring buffer: one sample a second, with a throughput once it has two.
    history = data["history"]
    assert len(history) >= 2
    assert any(h["timestamps_per_s"] is not None for h in history)
    assert "copy_v" in history[-1]["lag_ms"]
    # ?since=: only the newer samples (what the page asks for after its first load).
    since = history[-2]["t_ms"]
    newer = _get_json(f"{deployment.http}/status.json?since={since}")["history"]
    assert newer and all(h["t_ms"] > since for h in newer)
    assert len(newer) < len(_get_json(f"{deployment.http}/status.json")["history"])

    done = subprocess.run(
        _cli("status", "--url", deployment.http, "--json"),
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    fetched = json.loads(done.stdout)
    assert fetched["source"] == "coordinator" and fetched["history"] == []
    assert [w["id"] for w in fetched["workers"]] == [w["id"] for w in data["workers"]]


class _Dom(HTMLParser):
    """The parts of the dumped DOM the browser test checks."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.polylines: list[dict[str, str | None]] = []
        self.cells: dict[str, list[str]] = {}
        self._table: str | None = None
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.attrs[str(a["id"])] = a
        if tag == "body":
            self.attrs["body"] = a
        if tag == "table":
            self._table = a.get("id")
            self.cells.setdefault(str(self._table), [])
        if tag == "polyline":
            self.polylines.append(a)
        self._in_td = tag == "td"

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        if tag == "td":
            self._in_td = False

    def handle_data(self, data: str) -> None:
        if self._in_td and self._table is not None:
            self.cells[self._table].append(data)


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium (/usr/bin/chromium; .ci/run installs it as root)",
)
def test_page_in_headless_chromium(
    deployment: Deployment, settled: dict[str, Any], tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path}",
         "--virtual-time-budget=5000", "--dump-dom", f"{deployment.http}/status"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Dom()
    dom.feed(done.stdout)

    assert dom.attrs["health"]["class"] == "badge ok"
    # The page polled status.json at least once (virtual time ran past the poll interval).
    assert int(dom.attrs["body"]["data-polls"] or 0) >= 1, done.stdout[:2000]
    assert f"127.0.0.1:{deployment.server.port}" in dom.cells["servers"]
    assert dom.attrs["workers"]["data-rows"] == "1"
    assert any(f"pid {deployment.worker.pid}" in c for c in dom.cells["workers"])
    assert "copy_v" in dom.cells["observers"] and "src" in dom.cells["observers"]
    assert deployment.coordinator in dom.cells["coordinator"]
    assert dom.attrs["shards"]["data-rows"] == "1"
    # Both charts drew their series from the coordinator's samples.
    assert dom.attrs["chart-throughput"]["data-series"] == "1"
    assert dom.attrs["chart-lag"]["data-series"] == "1"
    by_name = {p["data-name"]: p for p in dom.polylines}
    assert set(by_name) == {"timestamps/s", "copy_v"}
    for line in by_name.values():
        assert int(line["data-points"] or 0) >= 2
        assert len((line["points"] or "").split()) == int(line["data-points"] or 0)


def test_unreachable_parts_exit_1(deployment: Deployment) -> None:
    dead = "postgresql://nobody:secret@127.0.0.1:1/nothing"
    done = subprocess.run(
        _cli("status", "--coordinator", "127.0.0.1:1", "--store", dead, "--timeout", "1",
             "--json"),
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is False
    assert data["coordinator"]["reachable"] is False
    (shard,) = data["shards"]
    assert shard["reachable"] is False and "secret" not in shard["dsn"]
    assert any("coordinator 127.0.0.1:1 does not answer" in p for p in data["problems"])
    assert any(p.startswith("shard 0 ") and "unreachable" in p for p in data["problems"])
    assert "secret" not in done.stdout

    # A dead shard next to a live coordinator: the rest is still reported.
    code, out = deployment.status("--timeout", "2")
    assert code == 0, out
    done = subprocess.run(
        _cli("status", "--coordinator", deployment.coordinator, "--store",
             f"{deployment.store},{dead}", "--timeout", "2"),
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "shard 1 (postgresql://nobody:***@127.0.0.1:1/nothing) is unreachable" in done.stdout
    assert f"127.0.0.1:{deployment.server.port}" in done.stdout


def test_bad_usage_exits_2() -> None:
    for args in (["--timeout", "0"], ["--no-such-flag"], ["--store", " , "]):
        done = subprocess.run(
            _cli("status", *args), cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (args, done.stdout, done.stderr)


def test_a_killed_worker_drops_out(deployment: Deployment, settled: dict[str, Any]) -> None:
    """Last: it kills the deployment's worker."""
    deployment.worker.send_signal(signal.SIGKILL)
    deployment.worker.wait()
    killed_at = time.monotonic()

    def gone() -> tuple[int, dict[str, Any]] | None:
        code, data = deployment.status_json()
        return (code, data) if not data["workers"] else None

    code, data = wait_for(gone, what="the worker's lease to end")
    # Dropped once its lease (WORKER_LEASE_MS) ended, not at some much later cleanup.
    assert time.monotonic() - killed_at < 30
    assert code == 1
    assert data["servers"], "the SQL server is still listed"
    assert any(p.startswith("no observer worker is running") for p in data["problems"])
    code, out = deployment.status()
    assert code == 1 and "! no observer worker is running" in out
