"""PostgreSQL v3 wire protocol message layer: message dataclasses and a sans-IO codec.

No sockets and no SQL live here: ``messages`` defines every frontend and backend message the
server handles, ``codec`` turns backend messages into bytes and incoming bytes into frontend
messages (incrementally, whatever the fragmentation).
"""
