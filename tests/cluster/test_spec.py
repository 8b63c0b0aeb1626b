"""The cluster's plan and state file, without starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from percolator.server.cluster import ClusterError, ClusterSpec, ClusterState, Role
from percolator.server.cluster.supervisor import _plan


def test_spec_rejects_impossible_shapes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        ClusterSpec(shards=0, dir=tmp_path)
    with pytest.raises(ValueError, match="negative"):
        ClusterSpec(workers=-1, dir=tmp_path)
    with pytest.raises(ValueError, match="between 0 and 65535"):
        ClusterSpec(coordinator_port=70000, dir=tmp_path)
    assert ClusterSpec(dir=Path("relative")).dir.is_absolute()


def test_plan_names_ports_and_command_lines(tmp_path: Path) -> None:
    spec = ClusterSpec(
        shards=2,
        servers=2,
        workers=3,
        dir=tmp_path,
        shard_base_port=20000,
        coordinator_port=20100,
        server_base_port=20200,
    )
    state = _plan(spec)
    assert [r.name for r in state.processes] == [
        "shard-0", "shard-1", "coordinator", "server-0", "server-1",
        "worker-0", "worker-1", "worker-2",
    ]  # fmt: skip
    assert [r.port for r in state.of_role(Role.SHARD)] == [20000, 20001]
    assert [r.port for r in state.of_role(Role.SERVER)] == [20200, 20201]
    store = "postgresql://postgres@127.0.0.1:20000/postgres,postgresql://postgres@127.0.0.1:20001/postgres"
    server = state.process("server-1").command
    assert server[server.index("serve") :] == [
        "serve", "--store", store, "--coordinator", "127.0.0.1:20100",
        "--observer-workers", "0", "--auth", "trust", "--listen", "127.0.0.1:20201",
    ]  # fmt: skip
    worker = state.process("worker-2").command
    assert worker[worker.index("worker") :] == [
        "worker", "--store", store, "--coordinator", "127.0.0.1:20100",
    ]  # fmt: skip
    coordinator = state.process("coordinator").command
    assert coordinator[coordinator.index("coordinator") :] == [
        "coordinator", "--store", store, "--listen", "127.0.0.1:20100",
    ]  # fmt: skip
    for record in state.processes:
        assert record.log == str(tmp_path / "logs" / f"{record.name}.log")


def test_plan_picks_distinct_free_ports(tmp_path: Path) -> None:
    state = _plan(ClusterSpec(shards=3, servers=3, dir=tmp_path))
    ports = [r.port for r in state.processes if r.port is not None]
    assert len(ports) == 7 and len(set(ports)) == 7 and all(ports)


def test_plan_refuses_overlapping_ports(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="share a port"):
        _plan(ClusterSpec(shards=2, dir=tmp_path, shard_base_port=20000, coordinator_port=20001))


def test_state_file_round_trip(tmp_path: Path) -> None:
    state = _plan(ClusterSpec(shards=1, servers=1, workers=1, dir=tmp_path))
    state.processes[0].pid = 1234
    state.save()
    loaded = ClusterState.load(tmp_path)
    assert loaded == state
    assert loaded.process("coordinator").role is Role.COORDINATOR
    with pytest.raises(KeyError, match="server-7"):
        loaded.process("server-7")
