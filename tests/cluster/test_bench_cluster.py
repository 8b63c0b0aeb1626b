"""``percolator bench cluster`` on one small shape: it starts a real cluster, drives transfers
and the observer, and reports figures that agree with each other."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_cluster_reports_one_shape() -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "percolator.server.cli", "bench", "cluster",
            "--shapes", "2,1,1", "--duration", "2", "--clients", "2", "--backlog", "50",
            "--json",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (shape,) = json.loads(result.stdout)["shapes"]
    assert (shape["shards"], shape["servers"], shape["workers"]) == (2, 1, 1)
    assert shape["transfers_per_s"] > 0 and shape["errors"] == 0
    assert 0 < shape["observer_runs_per_s"] <= shape["transfers_per_s"] * 1.5
    assert shape["backlog_runs_per_s"] > 0
    # Every role was measured, and the processes did use CPU.
    assert set(shape["cores"]) == {"shard", "coordinator", "server", "worker", "client"}
    assert shape["cores"]["shard"] > 0 and shape["cores"]["server"] > 0
