"""Python client API: ``connect`` (async) and ``connect_sync`` (blocking).

See :mod:`percolator.clients.database`.
"""

from percolator.clients.database import Database, connect, connect_sync, parse_dsns

__all__ = ["Database", "connect", "connect_sync", "parse_dsns"]
