"""The one error the cluster tooling raises for things an operator has to act on."""

from __future__ import annotations


class ClusterError(Exception):
    """A cluster could not be started, found or changed; the message says what to do."""
