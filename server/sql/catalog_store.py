"""Where the catalog lives: the store table ``__catalog``, read and written in transactions.

Layout (one row per object, JSON documents in the ``d`` column):

- ``meta``: ``version`` (bumped by every DDL transaction) and ``next_id`` (object ids);
- ``t/<name>``: a table with its columns, indexes and checks;
- ``r/<name>``: a role;
- ``o/<name>``: an observer;
- ``s/<name>``: a sequence definition; its counter lives in ``__sequences`` (see
  :mod:`percolator.server.sql.sequences`).

Every DDL transaction reads and rewrites ``meta.version``, so two concurrent DDL transactions
conflict (one gets 40001) and a process sees another's DDL by polling one cell.
"""

from __future__ import annotations

import json

from percolator.server.sql.catalog import (
    Catalog,
    observer_from_json,
    observer_to_json,
    role_from_json,
    role_to_json,
    sequence_from_json,
    sequence_to_json,
    table_from_json,
    table_to_json,
)
from percolator.server.txn.transaction import Transaction

CATALOG_TABLE = "__catalog"
META_ROW = b"meta"
DOC = "d"
VERSION = "version"
NEXT_ID = "next_id"


async def read_version(txn: Transaction) -> int:
    """The catalog version in the transaction's snapshot (one round trip)."""
    raw = await txn.get(CATALOG_TABLE, META_ROW, VERSION)
    return int(raw) if raw is not None else 0


async def load(txn: Transaction) -> Catalog:
    """The whole catalog as of the transaction's snapshot (one scan)."""
    version = 0
    next_id = 1
    tables = {}
    roles = {}
    sequences = {}
    observers = {}
    async for row, cols in txn.scan(CATALOG_TABLE):
        if row == META_ROW:
            version = int(cols.get(VERSION, b"0"))
            next_id = int(cols.get(NEXT_ID, b"1"))
            continue
        doc = json.loads(cols[DOC])
        kind = row[:2]
        if kind == b"t/":
            t = table_from_json(doc)
            tables[t.name] = t
        elif kind == b"r/":
            r = role_from_json(doc)
            roles[r.name] = r
        elif kind == b"s/":
            s = sequence_from_json(doc)
            sequences[s.name] = s
        elif kind == b"o/":
            o = observer_from_json(doc)
            observers[o.name] = o
    return Catalog(version, next_id, tables, roles, sequences, observers)


def write_changes(txn: Transaction, before: Catalog, after: Catalog) -> None:
    """Buffer the writes that turn ``before`` into ``after`` in the store, and bump the
    version (the caller read ``before`` in this same transaction)."""
    for name, t in after.tables.items():
        if before.tables.get(name) != t:
            txn.set(CATALOG_TABLE, b"t/" + name.encode(), DOC, _dump(table_to_json(t)))
    for name in before.tables.keys() - after.tables.keys():
        txn.delete(CATALOG_TABLE, b"t/" + name.encode(), DOC)
    for name, r in after.roles.items():
        if before.roles.get(name) != r:
            txn.set(CATALOG_TABLE, b"r/" + name.encode(), DOC, _dump(role_to_json(r)))
    for name in before.roles.keys() - after.roles.keys():
        txn.delete(CATALOG_TABLE, b"r/" + name.encode(), DOC)
    for name, s in after.sequences.items():
        if before.sequences.get(name) != s:
            txn.set(CATALOG_TABLE, b"s/" + name.encode(), DOC, _dump(sequence_to_json(s)))
    for name in before.sequences.keys() - after.sequences.keys():
        txn.delete(CATALOG_TABLE, b"s/" + name.encode(), DOC)
    for name, o in after.observers.items():
        if before.observers.get(name) != o:
            txn.set(CATALOG_TABLE, b"o/" + name.encode(), DOC, _dump(observer_to_json(o)))
    for name in before.observers.keys() - after.observers.keys():
        txn.delete(CATALOG_TABLE, b"o/" + name.encode(), DOC)
    txn.set(CATALOG_TABLE, META_ROW, VERSION, str(before.version + 1).encode())
    txn.set(CATALOG_TABLE, META_ROW, NEXT_ID, str(after.next_id).encode())


def _dump(doc: dict[str, object]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
