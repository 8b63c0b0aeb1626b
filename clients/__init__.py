"""Python client API: ``connect`` (async) and ``connect_sync`` (blocking).

See :mod:`percolator.clients.database`.
"""

from percolator.clients.database import Database, connect, connect_sync, parse_dsns
from percolator.server.observer_api import Rows

__all__ = ["Database", "Rows", "connect", "connect_sync", "parse_dsns"]
