"""Prometheus metrics of every Percolator process (docs/metrics.md).

- :mod:`~percolator.server.metrics.definitions`: every metric, counted where its event happens.
- :mod:`~percolator.server.metrics.collectors`: metrics read at scrape time (store round trips,
  the observers' backlog).
- :mod:`~percolator.server.metrics.http`: the HTTP endpoint (``/metrics``, and room for more
  routes).
"""
