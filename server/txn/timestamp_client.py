"""Clients of the coordinator: a batching timestamp source and the liveness/GC calls.

Batching rule (DESIGN.md §5). Requests that arrive while an RPC is in flight wait for the *next*
RPC, and each RPC asks for exactly as many timestamps as there were requesters waiting when it was
sent, so one response is shared only among requests that were already waiting when it was sent.
The client never keeps timestamps for later requests: a range kept for later could hand a new
transaction a start_ts below a commit_ts that another client obtained meanwhile, and that reader
would miss a committed write (a snapshot-isolation violation). One request is in flight per
source at a time, so a busy source sends back-to-back requests, each carrying everyone who queued
during the previous one.

On the wire, :class:`GrpcTimestampSource` sends its requests as messages of one long-lived
``StreamTimestamps`` stream rather than as unary calls: the semantics are the same (the server
allocates a response only when its request arrives) and a stream message costs about a third of a
unary call in grpc.aio.

All requesters of one RPC await one shared future and add their index in the batch to the first
timestamp: one future and one ``set_result`` per RPC rather than per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

import grpc

from percolator.server.metrics import definitions as metrics
from percolator.server.txn.errors import TxnError
from percolator.server.txn.membership import GroupMember
from percolator.server.txn.proto import coordinator_pb2 as pb
from percolator.server.txn.proto import coordinator_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT_S = 5.0
"""How long one RPC may take, including waiting for the connection (a coordinator restart)."""

_UNREACHABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        # grpc core reports a stream cut by a dying peer (a SIGKILLed coordinator resets the
        # connection mid-stream) as INTERNAL "Internal error from Core"; our own handlers
        # never answer INTERNAL (an unexpected exception there becomes UNKNOWN).
        grpc.StatusCode.INTERNAL,
    }
)


class CoordinatorError(TxnError):
    """The coordinator answered with an error."""

    sqlstate = "XX000"


class CoordinatorUnavailable(CoordinatorError):
    """The coordinator could not be reached, or did not answer, within the timeout."""

    sqlstate = "08006"

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(f"coordinator at {target} is unavailable: {reason}")
        self.target = target


def _translate(target: str, timeout_s: float, exc: grpc.aio.AioRpcError) -> CoordinatorError:
    code = exc.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return CoordinatorUnavailable(target, f"no answer within {timeout_s:g}s")
    if code == grpc.StatusCode.INTERNAL:
        return CoordinatorUnavailable(target, "the connection was cut")
    if code in _UNREACHABLE:
        return CoordinatorUnavailable(target, f"{code.name}: {exc.details()}")
    return CoordinatorError(f"coordinator at {target} failed: {code.name}: {exc.details()}")


class _Channel:
    """A lazily opened channel (grpc.aio objects must be created inside the running loop)."""

    def __init__(self, target: str, channel: grpc.aio.Channel | None) -> None:
        self.target = target
        self._channel = channel
        self._owned = channel is None
        self._stub: pb_grpc.CoordinatorStub | None = None

    @property
    def stub(self) -> pb_grpc.CoordinatorStub:
        if self._stub is None:
            if self._channel is None:
                self._channel = grpc.aio.insecure_channel(self.target)
            self._stub = pb_grpc.CoordinatorStub(self._channel)
        return self._stub

    async def close(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None and self._owned:
            await channel.close()


class _Batch:
    """The requesters that share one RPC."""

    __slots__ = ("count", "error", "fallback", "first", "future")

    def __init__(self, future: asyncio.Future[int]) -> None:
        self.future = future
        self.count = 0
        self.first: int | None = None
        self.error: BaseException | None = None
        self.fallback: asyncio.Future[int] | None = None
        """A second future for when a cancelled requester took ``future`` down with it."""

    def _futures(self) -> list[asyncio.Future[int]]:
        return [f for f in (self.future, self.fallback) if f is not None and not f.done()]

    def resolve(self, first: int) -> None:
        self.first = first
        for fut in self._futures():
            fut.set_result(first)

    def fail(self, error: BaseException) -> None:
        self.error = error
        for fut in self._futures():
            fut.set_exception(error)
            fut.exception()  # retrieved: waiters that were cancelled meanwhile do not log it


class BatchingTimestampSource:
    """A :class:`~percolator.server.txn.timestamps.TimestampSource` that batches requests into
    calls of ``fetch(count) -> first`` (one call in flight at a time; see the module docstring).

    ``fetch`` is the RPC for :class:`GrpcTimestampSource`; an in-process oracle's ``allocate``
    gives the same batching without a network (the benchmark's baseline).
    """

    def __init__(self, fetch: Callable[[int], Awaitable[int]], name: str) -> None:
        self.name = name
        self._fetch = fetch
        self._waiting: _Batch | None = None
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self.rpc_count = 0
        """Calls of ``fetch`` so far (for tests and metrics)."""

    async def get_timestamp(self) -> int:
        """A timestamp greater than every timestamp the oracle handed out before this call."""
        batch = self._waiting
        if batch is None:
            if self._closed:
                raise CoordinatorError(f"timestamp source for {self.name} is closed")
            batch = self._waiting = _Batch(asyncio.get_running_loop().create_future())
            if self._sender is None:
                self._sender = asyncio.get_running_loop().create_task(self._send_loop())
        index = batch.count
        batch.count = index + 1
        try:
            return await batch.future + index
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # this requester was cancelled: its timestamp is simply never used
            # Another requester of this batch was cancelled and the shared future with it.
            return await self._await_fallback(batch) + index

    async def _await_fallback(self, batch: _Batch) -> int:
        while True:
            if batch.first is not None:
                return batch.first
            if batch.error is not None:
                raise batch.error
            if batch.fallback is None or batch.fallback.cancelled():
                batch.fallback = asyncio.get_running_loop().create_future()
            try:
                return await batch.fallback
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise

    async def _send_loop(self) -> None:
        try:
            while (batch := self._waiting) is not None:
                # From here on, new requesters start the next batch: they were not waiting when
                # this call was sent, so they must not share its response.
                self._waiting = None
                await self._send(batch)
        except BaseException as exc:
            # Closing, or a bug: nobody may be left waiting forever.
            waiting, self._waiting = self._waiting, None
            if waiting is not None:
                waiting.fail(CoordinatorError(f"timestamp source for {self.name} stopped: {exc!r}"))
            raise
        finally:
            self._sender = None

    async def _send(self, batch: _Batch) -> None:
        count = batch.count
        self.rpc_count += 1
        metrics.TS_CLIENT_BATCH_SIZE.observe(count)
        started = time.monotonic()
        try:
            first = await self._fetch(count)
        except Exception as exc:
            metrics.TS_CLIENT_RPC_ERRORS.inc()
            batch.fail(exc)
            return
        except BaseException as exc:
            batch.fail(CoordinatorError(f"timestamp request to {self.name} failed: {exc!r}"))
            raise
        metrics.TS_CLIENT_RPC_SECONDS.observe(time.monotonic() - started)
        batch.resolve(first)

    async def close(self) -> None:
        """Fail waiting requests and stop."""
        self._closed = True
        sender = self._sender
        if sender is not None:
            sender.cancel()
            try:
                await sender
            except asyncio.CancelledError:
                pass


class GrpcTimestampSource(BatchingTimestampSource):
    """Timestamps from the coordinator at ``target``, batched.

    ``get_timestamp`` raises :class:`CoordinatorUnavailable` when no answer comes within about
    ``timeout_s`` (at most twice that when a failing RPC was already in flight).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        super().__init__(self._rpc, target)
        self.target = target
        self._timeout_s = timeout_s
        self._channel = _Channel(target, channel)
        self._stream: grpc.aio.StreamStreamCall | None = None

    async def _rpc(self, count: int) -> int:
        # One stream, one request outstanding (the batching guarantees it): a stream message
        # costs about a third of a unary call. A stream that failed is dropped and reopened.
        stream = self._stream
        try:
            async with asyncio.timeout(self._timeout_s):
                if stream is None:
                    stream = self._stream = self._channel.stub.StreamTimestamps(wait_for_ready=True)
                await stream.write(pb.GetTimestampsRequest(count=count))
                response = await stream.read()
        except TimeoutError:
            self._drop_stream()
            raise CoordinatorUnavailable(
                self.target, f"no answer within {self._timeout_s:g}s"
            ) from None
        except grpc.aio.AioRpcError as exc:
            self._drop_stream()
            raise _translate(self.target, self._timeout_s, exc) from exc
        except Exception as exc:  # e.g. writing to a stream the server has just ended
            self._drop_stream()
            raise CoordinatorUnavailable(self.target, repr(exc)) from exc
        except BaseException:
            self._drop_stream()
            raise
        if response is grpc.aio.EOF:
            self._drop_stream()
            raise CoordinatorUnavailable(self.target, "the coordinator closed the stream")
        if response.count != count or response.first <= 0:
            self._drop_stream()
            raise CoordinatorError(
                f"coordinator at {self.target} answered {response.count} timestamps "
                f"from {response.first} to a request for {count}"
            )
        return response.first

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()

    async def close(self) -> None:
        """Fail waiting requests and close the channel (if this source opened it)."""
        await super().close()
        self._drop_stream()
        await self._channel.close()

    async def __aenter__(self) -> GrpcTimestampSource:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class CoordinatorClient:
    """The coordinator's other calls: ranges of timestamps, liveness reports, the safe point,
    group membership."""

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.target = target
        self._timeout_s = timeout_s
        self._channel = _Channel(target, channel)

    async def _call(self, method: str, request: object) -> object:
        try:
            return await getattr(self._channel.stub, method)(
                request, timeout=self._timeout_s, wait_for_ready=True
            )
        except grpc.aio.AioRpcError as exc:
            raise _translate(self.target, self._timeout_s, exc) from exc

    async def get_timestamps(self, count: int) -> int:
        """Reserve ``count`` timestamps; returns the first of ``[first, first + count)``."""
        response = await self._call("GetTimestamps", pb.GetTimestampsRequest(count=count))
        assert isinstance(response, pb.GetTimestampsResponse)
        return response.first

    async def keep_alive(self, client_id: str, min_start_ts: int, lease_ms: int) -> bool:
        """Report this client alive for ``lease_ms`` with its oldest running start_ts (0 = none
        running); ``lease_ms == 0`` leaves the registry."""
        response = await self._call(
            "KeepAlive",
            pb.KeepAliveRequest(client_id=client_id, min_start_ts=min_start_ts, lease_ms=lease_ms),
        )
        assert isinstance(response, pb.KeepAliveResponse)
        return response.ok

    async def get_safe_point(self) -> int:
        """The GC safe point: below every running transaction's start_ts."""
        response = await self._call("GetSafePoint", pb.GetSafePointRequest())
        assert isinstance(response, pb.GetSafePointResponse)
        return response.safe_point

    async def join_group(
        self, group: str, member_id: str, lease_ms: int, info: str = ""
    ) -> list[GroupMember]:
        """Join ``group`` as ``member_id`` for ``lease_ms``, or renew the lease (and replace
        ``info``); ``lease_ms == 0`` leaves the group. Returns the live members sorted by id,
        this one included unless it left. An invalid argument (e.g. an empty id) raises
        :class:`CoordinatorError` with the coordinator's reason."""
        response = await self._call(
            "JoinGroup",
            pb.JoinGroupRequest(group=group, member_id=member_id, lease_ms=lease_ms, info=info),
        )
        assert isinstance(response, pb.JoinGroupResponse)
        return _group_members(response)

    async def list_group(self, group: str) -> list[GroupMember]:
        """The live members of ``group`` sorted by id, without joining it."""
        response = await self._call("ListGroup", pb.ListGroupRequest(group=group))
        assert isinstance(response, pb.JoinGroupResponse)
        return _group_members(response)

    async def close(self) -> None:
        """Close the channel (if this client opened it)."""
        await self._channel.close()

    async def __aenter__(self) -> CoordinatorClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _group_members(response: pb.JoinGroupResponse) -> list[GroupMember]:
    return [
        GroupMember(m.member_id, m.info, m.lease_remaining_ms, m.joined_ms)
        for m in response.members
    ]
