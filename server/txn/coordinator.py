"""The coordinator's gRPC service: the timestamp oracle, the liveness registry and group
membership.

One coordinator runs per deployment (the oracle's advisory lock enforces it). It is started by
``percolator coordinator``, by ``percolator serve`` when no coordinator is configured, and by tests
in-process through :func:`start_coordinator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from percolator.server.metrics import definitions as metrics
from percolator.server.storage.store import CellStore
from percolator.server.txn.gc import run_gc_loop
from percolator.server.txn.liveness import DEFAULT_GC_LIFETIME_MS, LivenessRegistry
from percolator.server.txn.lock_resolver import LockResolver
from percolator.server.txn.membership import GroupMember, GroupRegistry
from percolator.server.txn.proto import coordinator_pb2 as pb
from percolator.server.txn.proto import coordinator_pb2_grpc as pb_grpc
from percolator.server.txn.shared_timestamps import SharedRange, SharedTimestampOracle
from percolator.server.txn.timestamps import (
    DEFAULT_TABLE,
    DEFAULT_WINDOW_MS,
    OracleError,
    TimestampOracle,
)

log = logging.getLogger(__name__)

DEFAULT_COORDINATOR_ADDRESS = "127.0.0.1:7470"
DEFAULT_GC_INTERVAL_S = 60.0
MAX_TIMESTAMPS_PER_REQUEST = 1 << 28
"""About a second of timestamps (2**18 per ms): far more than any batch of waiting requests."""


class CoordinatorService(pb_grpc.CoordinatorServicer):
    """The RPC handlers; all state lives in the oracle and the registries."""

    def __init__(
        self,
        oracle: TimestampOracle,
        registry: LivenessRegistry,
        gc_lifetime_ms: int,
        groups: GroupRegistry | None = None,
    ) -> None:
        self._oracle = oracle
        self._registry = registry
        self._gc_lifetime_ms = gc_lifetime_ms
        self._groups = GroupRegistry() if groups is None else groups

    async def GetTimestamps(
        self, request: pb.GetTimestampsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetTimestampsResponse:
        return await self._timestamps(request.count, context)

    async def StreamTimestamps(
        self,
        request_iterator: AsyncIterator[pb.GetTimestampsRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[pb.GetTimestampsResponse]:
        # Each response is allocated only once its request has arrived, exactly as for the unary
        # call: the stream only saves the per-call overhead.
        async for request in request_iterator:
            yield await self._timestamps(request.count, context)

    async def _timestamps(
        self, count: int, context: grpc.aio.ServicerContext
    ) -> pb.GetTimestampsResponse:
        if not 1 <= count <= MAX_TIMESTAMPS_PER_REQUEST:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"count must be between 1 and {MAX_TIMESTAMPS_PER_REQUEST}, got {count}",
            )
        # The fast path does not wait; only a request that reaches the persisted mark does.
        started = time.monotonic()
        first = self._oracle.try_allocate(count)
        if first is None:
            first = await self._allocate(count, context)
        metrics.ORACLE_REQUEST_BATCH_SIZE.observe(count)
        metrics.ORACLE_REQUEST_SECONDS.observe(time.monotonic() - started)
        return pb.GetTimestampsResponse(first=first, count=count)

    async def _allocate(self, count: int, context: grpc.aio.ServicerContext) -> int:
        try:
            return await self._oracle.allocate(count)
        except OracleError as exc:
            log.error("timestamp oracle: %s", exc)
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise  # unreachable: abort raises

    async def KeepAlive(
        self, request: pb.KeepAliveRequest, context: grpc.aio.ServicerContext
    ) -> pb.KeepAliveResponse:
        try:
            self._registry.keep_alive(request.client_id, request.min_start_ts, request.lease_ms)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.KeepAliveResponse(ok=True)

    async def GetSafePoint(
        self, request: pb.GetSafePointRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetSafePointResponse:
        # A fresh timestamp, not the wall clock: it is above every start_ts handed out so far.
        now_ts = await self._allocate(1, context)
        return pb.GetSafePointResponse(
            safe_point=self._registry.safe_point(now_ts, self._gc_lifetime_ms)
        )

    async def JoinGroup(
        self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinGroupResponse:
        try:
            members = self._groups.join(
                request.group, request.member_id, request.lease_ms, request.info
            )
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # unreachable: abort raises
        return _members_response(members)

    async def ListGroup(
        self, request: pb.ListGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinGroupResponse:
        try:
            members = self._groups.members(request.group)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # unreachable: abort raises
        return _members_response(members)


def _members_response(members: list[GroupMember]) -> pb.JoinGroupResponse:
    return pb.JoinGroupResponse(
        members=[
            pb.GroupMember(
                member_id=m.member_id,
                info=m.info,
                lease_remaining_ms=m.lease_remaining_ms,
                joined_ms=m.joined_ms,
            )
            for m in members
        ]
    )


@dataclass
class CoordinatorHandle:
    """A running coordinator."""

    address: str
    """``host:port`` it listens on (the real port when 0 was asked)."""
    server: grpc.aio.Server
    oracle: TimestampOracle
    registry: LivenessRegistry
    groups: GroupRegistry = field(default_factory=GroupRegistry)
    """Group membership (observer workers); in memory, empty after a restart."""
    gc_task: asyncio.Task[None] | None = field(default=None)

    async def stop(self, grace_s: float = 1.0) -> None:
        """Stop GC and serving (in-flight RPCs get ``grace_s`` to finish), close the oracle."""
        if self.gc_task is not None:
            self.gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.gc_task
        await self.server.stop(grace_s)
        await self.oracle.close()

    async def wait_for_termination(self) -> None:
        """Wait until the server stops."""
        await self.server.wait_for_termination()


async def start_coordinator(
    listen: str,
    store_dsn: str,
    *,
    gc_lifetime_ms: int = DEFAULT_GC_LIFETIME_MS,
    window_ms: int = DEFAULT_WINDOW_MS,
    oracle_table: str = DEFAULT_TABLE,
    registry: LivenessRegistry | None = None,
    groups: GroupRegistry | None = None,
    gc_store: CellStore | None = None,
    gc_interval_s: float = DEFAULT_GC_INTERVAL_S,
    shared_timestamps: SharedRange | None = None,
) -> CoordinatorHandle:
    """Open the oracle on ``store_dsn`` and serve the coordinator on ``listen`` (``host:port``,
    port 0 = any free port). With ``gc_store``, also run MVCC GC on it every ``gc_interval_s``
    at the registry's safe point. ``registry`` and ``groups`` default to empty ones (tests pass
    theirs, e.g. with a fake clock). With ``shared_timestamps`` the oracle keeps its state there,
    for the worker processes of this machine to take timestamps from directly."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"listen address must be HOST:PORT, got {listen!r}")
    oracle = (
        await TimestampOracle.open(store_dsn, table=oracle_table, window_ms=window_ms)
        if shared_timestamps is None
        else await SharedTimestampOracle.open_shared(
            store_dsn, shared_timestamps, table=oracle_table, window_ms=window_ms
        )
    )
    registry = registry or LivenessRegistry()
    groups = GroupRegistry() if groups is None else groups
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_CoordinatorServicer_to_server(
        CoordinatorService(oracle, registry, gc_lifetime_ms, groups), server
    )
    try:
        bound = server.add_insecure_port(listen)
    except RuntimeError as exc:
        await oracle.close()
        raise OSError(f"coordinator cannot listen on {listen}: {exc}") from exc
    if bound == 0:
        await oracle.close()
        raise OSError(f"coordinator cannot listen on {listen}")
    await server.start()
    address = f"{host}:{bound}"
    log.info("coordinator listening on %s", address)
    handle = CoordinatorHandle(address, server, oracle, registry, groups)
    if gc_store is not None:
        handle.gc_task = asyncio.create_task(
            _gc(gc_store, oracle, handle.registry, gc_lifetime_ms, gc_interval_s)
        )
    return handle


async def _gc(
    store: CellStore,
    oracle: TimestampOracle,
    registry: LivenessRegistry,
    gc_lifetime_ms: int,
    interval_s: float,
) -> None:
    async def safe_point() -> int:
        return registry.safe_point(await oracle.get_timestamp(), gc_lifetime_ms)

    await run_gc_loop(store, LockResolver(store, oracle), safe_point, interval_s)
