"""Cluster status: what ``percolator status`` prints and the coordinator's ``/status`` page
shows (docs/status.md).

- :mod:`~percolator.server.status.model`: the dataclasses, and their JSON;
- :mod:`~percolator.server.status.gather`: collecting them, every part bounded by a timeout;
- :mod:`~percolator.server.status.remote`: the same from outside the coordinator (gRPC and
  shard probes, or the coordinator's ``/status.json``);
- :mod:`~percolator.server.status.service`: ``/status`` and ``/status.json`` on the
  coordinator's HTTP endpoint, with :mod:`~percolator.server.status.sampler`'s rolling history;
- :mod:`~percolator.server.status.page` and :mod:`~percolator.server.status.text`: rendering;
- :mod:`~percolator.server.status.announce`: how SQL servers join the ``servers`` group.
"""
