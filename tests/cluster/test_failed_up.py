"""A cluster that cannot start: ``up`` names the process, shows its log, stops the rest."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import psutil

from percolator.server.cluster import Cluster


def test_failed_up_names_the_process_and_stops_what_it_started(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable, "-m", "percolator.server.cli", "cluster", "up",
                "--dir", str(folder), "--workers", "0", "--server-base-port", str(port),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
    try:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "server-0" in result.stderr
        assert "address already in use" in result.stderr  # the tail of its log
        cluster = Cluster.load(folder)
        started = [r for r in cluster.state.processes if r.pid is not None]
        assert {r.name for r in started} == {"shard-0", "coordinator", "server-0"}
        for record in started:
            assert not psutil.pid_exists(record.pid) or (
                psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
            ), record.name
        assert not any(s.alive for s in cluster.status())
    finally:
        if (folder / "cluster.json").exists():
            Cluster.load(folder).down(timeout=20)
