"""A local multi-process cluster without Docker: ``percolator cluster up|status|down``.

``Cluster.up(ClusterSpec(shards=2, servers=2, workers=1, dir=...))`` starts N embedded
Postgres shards, one coordinator, M SQL servers and K observer workers, each an OS process of
its own that outlives the caller; ``Cluster.load(dir)`` finds it again from
``<dir>/cluster.json``. ``status``, ``kill``, ``restart`` and ``down`` drive it, for operators
and for fault tests. See docs/operations.md.
"""

from __future__ import annotations

from percolator.server.cluster.errors import ClusterError
from percolator.server.cluster.spec import DEFAULT_DIR, ClusterSpec
from percolator.server.cluster.state import ClusterState, ProcessRecord, Role
from percolator.server.cluster.supervisor import Cluster, ProcessStatus

__all__ = [
    "DEFAULT_DIR",
    "Cluster",
    "ClusterError",
    "ClusterSpec",
    "ClusterState",
    "ProcessRecord",
    "ProcessStatus",
    "Role",
]
