"""The observers runtime: finding notifications, running observers in transactions with their
acknowledgment, retries and parking, and spreading the work over workers.

See :mod:`percolator.server.txn.observers.worker` and ``docs/observers.md``.
"""
