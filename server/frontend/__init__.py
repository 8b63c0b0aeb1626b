"""The Postgres v3 wire-protocol front end: sockets, TLS, authentication and the protocol state
machine, in front of an :class:`percolator.server.engine_api.Engine`.

Start it with :func:`percolator.server.frontend.listener.serve`.
"""
