"""Fast checks, without a cluster, of what the fault tests rely on: the SQLSTATE a client gets
when a shard or the coordinator is unreachable, and the spec's extra command-line flags."""

from __future__ import annotations

from pathlib import Path

import grpc

from percolator.server.cluster import ClusterSpec
from percolator.server.cluster.supervisor import _plan
from percolator.server.sql.errors import from_exception
from percolator.server.storage.errors import StoreUnavailable
from percolator.server.txn.timestamp_client import CoordinatorUnavailable, _translate


def test_an_unreachable_shard_is_a_connection_failure_naming_it() -> None:
    error = from_exception(
        StoreUnavailable("postgresql://u:secret@10.0.0.7:5432/db", "ConnectionRefusedError: no")
    )
    assert error.sqlstate == "08006"
    assert error.message == (
        "cannot reach Postgres shard postgresql://u:***@10.0.0.7:5432/db: "
        "ConnectionRefusedError: no"
    )


def test_an_unreachable_coordinator_is_a_connection_failure_naming_it() -> None:
    error = from_exception(CoordinatorUnavailable("10.0.0.8:7470", "no answer within 5s"))
    assert error.sqlstate == "08006"
    assert "coordinator at 10.0.0.8:7470 is unavailable" in error.message


def test_a_stream_cut_by_a_killed_coordinator_is_a_connection_failure() -> None:
    """grpc core reports a connection reset mid-stream as INTERNAL; users see 08006."""
    cut = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        "Internal error from Core",
    )
    error = _translate("10.0.0.8:7470", 5.0, cut)
    assert isinstance(error, CoordinatorUnavailable)
    assert from_exception(error).sqlstate == "08006"
    assert "10.0.0.8:7470" in str(error) and "Internal error" not in str(error)


def test_spec_appends_extra_flags_per_role(tmp_path: Path) -> None:
    spec = ClusterSpec(
        workers=1,
        dir=tmp_path,
        coordinator_args=["--gc-interval", "5"],  # type: ignore[arg-type]  # a list is accepted
        server_args=("--catalog-poll", "0.2"),
        worker_args=("--lease-ms", "1500"),
    )
    assert spec.coordinator_args == ("--gc-interval", "5")
    state = _plan(spec)
    assert state.process("coordinator").command[-2:] == ["--gc-interval", "5"]
    assert state.process("server-0").command[-2:] == ["--catalog-poll", "0.2"]
    assert state.process("worker-0").command[-2:] == ["--lease-ms", "1500"]
