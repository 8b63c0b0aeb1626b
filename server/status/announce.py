"""Membership of the ``servers`` group with an ``info`` string: how each ``percolator serve``
tells the coordinator its SQL address, so that ``percolator status`` and the status page can
list the SQL servers.

The membership is a :class:`~percolator.server.txn.membership.GroupLease`, like the observer
workers' (:class:`~percolator.server.txn.observers.slices.GroupSlices`): renewed every third of
its length; a process that dies stops renewing and drops out of the group when its lease ends.
A failed renewal is logged and retried at the next tick: being listed is for operators, never a
reason to stop serving SQL.
"""

from __future__ import annotations

import json
import os
import socket
import uuid

from percolator.server.status.gather import SERVERS_GROUP
from percolator.server.txn.membership import GroupLease, MembershipService

DEFAULT_SERVER_LEASE_MS = 10_000


async def announce_server(
    membership: MembershipService,
    sql_address: str,
    metrics_url: str | None = None,
    *,
    lease_ms: int = DEFAULT_SERVER_LEASE_MS,
) -> GroupLease:
    """Join the ``servers`` group with this process's SQL address (and metrics URL) as JSON
    ``info``, and keep renewing; ``await lease.stop()`` at shutdown."""
    host = socket.gethostname()
    info = json.dumps(
        {"sql": sql_address, "metrics": metrics_url, "host": host, "pid": os.getpid()},
        separators=(",", ":"),
    )
    member_id = f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    lease = GroupLease(membership, SERVERS_GROUP, member_id, info, lease_ms=lease_ms)
    await lease.start()
    return lease
