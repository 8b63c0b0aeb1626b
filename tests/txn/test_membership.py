"""Group membership: the registry's leases, the hash-space split, and the RPCs end to end."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from percolator.server.storage.sharding import row_hash
from percolator.server.txn.coordinator import CoordinatorHandle, start_coordinator
from percolator.server.txn.liveness import MAX_LEASE_MS
from percolator.server.txn.membership import (
    HASH_MAX,
    HASH_MIN,
    MAX_ID_LENGTH,
    MAX_INFO_LENGTH,
    GroupMember,
    GroupRegistry,
    hash_slice,
)
from percolator.server.txn.timestamp_client import (
    CoordinatorClient,
    CoordinatorError,
    CoordinatorUnavailable,
)

WALL_S = 1_700_000_000.0


class FakeClock:
    """Monotonic seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry(clock: FakeClock) -> GroupRegistry:
    return GroupRegistry(clock=clock, wall_clock=lambda: WALL_S + clock.now)


def ids(members: list[GroupMember]) -> list[str]:
    return [m.member_id for m in members]


def test_join_returns_live_members_sorted_with_the_caller(
    registry: GroupRegistry, clock: FakeClock
) -> None:
    assert registry.join("workers", "w-b", 1000, "host-b") == [
        GroupMember("w-b", "host-b", 1000, int((WALL_S + 100) * 1000))
    ]
    clock.now += 0.25
    members = registry.join("workers", "w-a", 2000, "host-a")
    assert ids(members) == ["w-a", "w-b"]
    assert [m.lease_remaining_ms for m in members] == [2000, 750]
    assert [m.info for m in members] == ["host-a", "host-b"]
    assert registry.members("workers") == members
    # Groups are separate.
    assert ids(registry.join("other", "w-c", 1000)) == ["w-c"]
    assert ids(registry.members("workers")) == ["w-a", "w-b"]
    assert registry.members("nobody-here") == []


def test_renewal_extends_the_lease_and_keeps_joined_ms(
    registry: GroupRegistry, clock: FakeClock
) -> None:
    (first,) = registry.join("workers", "w-a", 1000, "v1")
    clock.now += 0.9
    (renewed,) = registry.join("workers", "w-a", 1000, "v2")
    assert renewed.lease_remaining_ms == 1000
    assert renewed.joined_ms == first.joined_ms  # not the wall clock of the renewal
    assert renewed.info == "v2"
    clock.now += 0.9  # past the first lease, within the renewed one
    assert ids(registry.members("workers")) == ["w-a"]


def test_leave_removes_only_the_caller(registry: GroupRegistry) -> None:
    registry.join("workers", "w-a", 1000)
    registry.join("workers", "w-b", 1000)
    assert ids(registry.join("workers", "w-a", 0)) == ["w-b"]
    assert ids(registry.members("workers")) == ["w-b"]
    # Leaving twice, or a group one never joined, is harmless.
    assert ids(registry.join("workers", "w-a", 0)) == ["w-b"]
    assert registry.join("elsewhere", "w-a", 0) == []


def test_expired_members_drop_out(registry: GroupRegistry, clock: FakeClock) -> None:
    registry.join("workers", "w-a", 500)
    registry.join("workers", "w-b", 2000)
    clock.now += 0.25
    assert [m.lease_remaining_ms for m in registry.members("workers")] == [250, 1750]
    clock.now += 0.25  # w-a's lease ends exactly now
    assert ids(registry.members("workers")) == ["w-b"]
    # A member that rejoins after expiring is a new member: a new joined_ms.
    (old_b,) = registry.members("workers")
    clock.now += 5
    assert registry.members("workers") == []
    (new_b,) = registry.join("workers", "w-b", 1000)
    assert new_b.joined_ms == old_b.joined_ms + 5000 + 500


def test_a_listed_member_always_has_some_lease_left(
    registry: GroupRegistry, clock: FakeClock
) -> None:
    registry.join("workers", "w-a", 500)
    clock.now += 0.4999  # 0.1 ms left: rounds to 0, reported as 1
    assert [m.lease_remaining_ms for m in registry.members("workers")] == [1]


def test_lease_is_capped(registry: GroupRegistry, clock: FakeClock) -> None:
    (member,) = registry.join("workers", "w-a", 2**32 - 1)  # the largest uint32
    assert member.lease_remaining_ms == MAX_LEASE_MS
    clock.now += MAX_LEASE_MS / 1000
    assert registry.members("workers") == []


@pytest.mark.parametrize(
    ("group", "member_id", "lease_ms", "info", "message"),
    [
        ("", "w-a", 1000, "", "group must not be empty"),
        ("workers", "", 1000, "", "member_id must not be empty"),
        ("workers", "", 0, "", "member_id must not be empty"),
        ("workers", "w-a", -1, "", "lease_ms must not be negative"),
        ("g" * (MAX_ID_LENGTH + 1), "w-a", 1000, "", "group must be at most"),
        ("workers", "w" * (MAX_ID_LENGTH + 1), 1000, "", "member_id must be at most"),
        ("workers", "w-a", 1000, "i" * (MAX_INFO_LENGTH + 1), "info must be at most"),
    ],
)
def test_invalid_input_is_refused(
    registry: GroupRegistry, group: str, member_id: str, lease_ms: int, info: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        registry.join(group, member_id, lease_ms, info)
    assert registry.members("workers") == []


def test_empty_group_name_cannot_be_listed(registry: GroupRegistry) -> None:
    with pytest.raises(ValueError, match="group must not be empty"):
        registry.members("")


@pytest.mark.parametrize("count", range(1, 8))
def test_hash_slices_are_contiguous_disjoint_and_cover_the_space(count: int) -> None:
    slices = [hash_slice(i, count) for i in range(count)]
    assert slices[0][0] == HASH_MIN == -(2**63)
    assert slices[-1][1] == HASH_MAX == 2**63 - 1
    for lo, hi in slices:
        assert lo <= hi
    for (_, hi), (next_lo, _) in itertools.pairwise(slices):
        assert next_lo == hi + 1  # no gap, no overlap
    sizes = [hi - lo + 1 for lo, hi in slices]
    assert sum(sizes) == 2**64
    assert max(sizes) - min(sizes) <= 1  # an even split
    # Every row hash falls in exactly one slice.
    for row in range(200):
        h = row_hash("t", row.to_bytes(4, "big"))
        assert sum(lo <= h <= hi for lo, hi in slices) == 1


def test_hash_slice_of_one_member_is_everything() -> None:
    assert hash_slice(0, 1) == (-(2**63), 2**63 - 1)
    assert hash_slice(0, 2) == (-(2**63), -1)
    assert hash_slice(1, 2) == (0, 2**63 - 1)


@pytest.mark.parametrize(("index", "count"), [(0, 0), (-1, 3), (3, 3), (0, -1)])
def test_hash_slice_refuses_an_index_out_of_range(index: int, count: int) -> None:
    with pytest.raises(ValueError):
        hash_slice(index, count)


@pytest.fixture
async def coordinator(fresh_dsns) -> AsyncIterator[CoordinatorHandle]:
    (dsn,) = await fresh_dsns(1)
    handle = await start_coordinator("127.0.0.1:0", dsn)
    yield handle
    await handle.stop()


async def test_members_see_each_other_and_leave(coordinator: CoordinatorHandle) -> None:
    async with (
        CoordinatorClient(coordinator.address) as one,
        CoordinatorClient(coordinator.address) as two,
    ):
        first = await one.join_group("workers", "w-1", 10_000, "host-1:101")
        assert ids(first) == ["w-1"]
        members = await two.join_group("workers", "w-2", 10_000, "host-2:202")
        assert ids(members) == ["w-1", "w-2"]
        assert [m.info for m in members] == ["host-1:101", "host-2:202"]
        assert all(0 < m.lease_remaining_ms <= 10_000 for m in members)
        assert members[0].joined_ms == first[0].joined_ms > 0
        # The first one sees the second at its next renewal; so does a status tool.
        assert ids(await one.join_group("workers", "w-1", 10_000, "host-1:101")) == ["w-1", "w-2"]
        listed = await two.list_group("workers")
        assert [(m.member_id, m.info, m.joined_ms) for m in listed] == [
            (m.member_id, m.info, m.joined_ms) for m in members
        ]
        # The handle exposes the registry the service uses.
        assert ids(coordinator.groups.members("workers")) == ["w-1", "w-2"]

        assert ids(await one.join_group("workers", "w-1", 0)) == ["w-2"]
        assert ids(await two.list_group("workers")) == ["w-2"]
        assert await two.list_group("nobody") == []


async def test_member_that_stops_renewing_expires(coordinator: CoordinatorHandle) -> None:
    async with (
        CoordinatorClient(coordinator.address) as alive,
        CoordinatorClient(coordinator.address) as dying,
    ):
        await alive.join_group("workers", "w-alive", 5_000)
        assert ids(await dying.join_group("workers", "w-dying", 300)) == ["w-alive", "w-dying"]
        # w-dying never renews: its slice passes to the survivor once its lease ends.
        await asyncio.sleep(0.5)
        members = await alive.join_group("workers", "w-alive", 5_000)
        assert ids(members) == ["w-alive"]
        assert hash_slice(0, len(members)) == (HASH_MIN, HASH_MAX)


async def test_invalid_argument_is_a_clear_client_error(coordinator: CoordinatorHandle) -> None:
    async with CoordinatorClient(coordinator.address) as client:
        with pytest.raises(CoordinatorError, match="INVALID_ARGUMENT: member_id must not be empty"):
            await client.join_group("workers", "", 1000)
        with pytest.raises(CoordinatorError, match="INVALID_ARGUMENT: group must not be empty"):
            await client.list_group("")
        # A refused call is not mistaken for an unreachable coordinator.
        with pytest.raises(CoordinatorError) as refused:
            await client.join_group("", "w-1", 1000)
        assert not isinstance(refused.value, CoordinatorUnavailable)
        assert await client.list_group("workers") == []
