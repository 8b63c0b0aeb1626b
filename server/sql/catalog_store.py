"""Where the catalog lives: the store table ``__catalog``, read and written in transactions.

Layout (one row per object, JSON documents in the ``d`` column):

- ``meta``: ``version`` (bumped by every DDL transaction) and ``next_id`` (object ids);
- ``t/<name>``: a table with its columns, indexes and checks;
- ``r/<name>``: a role;
- ``o/<name>``: an observer;
- ``v/<name>``: a view;
- ``e/<name>``: an enum type (CREATE TYPE ... AS ENUM), its labels and their sort orders;
- ``s/<name>``: a sequence definition; its counter lives in ``__sequences`` (see
  :mod:`percolator.server.sql.sequences`);
- ``g/<storage>``: a store table that DROP or TRUNCATE left behind (a table's or an index's
  storage), written by the same transaction; its cells are reclaimed once no snapshot can read
  them (:mod:`percolator.server.storage_reclaimer`), then the row is deleted. Not part of the
  :class:`Catalog`.

Every DDL transaction reads and rewrites ``meta.version``, so two concurrent DDL transactions
conflict (one gets 40001) and a process sees another's DDL by polling one cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from percolator.server.sql.catalog import (
    Catalog,
    enum_from_json,
    enum_to_json,
    link_enums,
    observer_from_json,
    observer_to_json,
    role_from_json,
    role_to_json,
    sequence_from_json,
    sequence_to_json,
    table_from_json,
    table_to_json,
    view_from_json,
    view_to_json,
)
from percolator.server.storage.cells import CellKey
from percolator.server.txn.transaction import Transaction

CATALOG_TABLE = "__catalog"
META_ROW = b"meta"
DOC = "d"
VERSION = "version"
NEXT_ID = "next_id"
VERSION_KEY = CellKey(CATALOG_TABLE, META_ROW, VERSION)
"""The catalog's version cell: every DDL transaction rewrites it."""
RETIRED = b"g/"
RETIRED_END = b"g0"  # the first key after every ``g/`` key ('0' follows '/')


async def read_version(txn: Transaction) -> int:
    """The catalog version in the transaction's snapshot (one round trip)."""
    (raw,) = await txn.get_many([VERSION_KEY])
    return int(raw) if raw is not None else 0


async def load(txn: Transaction) -> Catalog:
    """The whole catalog as of the transaction's snapshot (one scan)."""
    version = 0
    next_id = 1
    tables = {}
    roles = {}
    sequences = {}
    observers = {}
    views = {}
    enums = {}
    async for row, cols in txn.scan(CATALOG_TABLE):
        if row == META_ROW:
            version = int(cols.get(VERSION, b"0"))
            next_id = int(cols.get(NEXT_ID, b"1"))
            continue
        kind = row[:2]
        if kind == RETIRED:
            continue
        doc = json.loads(cols[DOC])
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
        elif kind == b"v/":
            v = view_from_json(doc)
            views[v.name] = v
        elif kind == b"e/":
            e = enum_from_json(doc)
            enums[e.type_name] = e
    catalog = Catalog(version, next_id, tables, roles, sequences, observers, views, enums)
    return link_enums(catalog)


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
    for name, v in after.views.items():
        if before.views.get(name) != v:
            txn.set(CATALOG_TABLE, b"v/" + name.encode(), DOC, _dump(view_to_json(v)))
    for name in before.views.keys() - after.views.keys():
        txn.delete(CATALOG_TABLE, b"v/" + name.encode(), DOC)
    for name, e in after.enums.items():
        if before.enums.get(name) != e:
            txn.set(CATALOG_TABLE, b"e/" + name.encode(), DOC, _dump(enum_to_json(e)))
    for name in before.enums.keys() - after.enums.keys():
        txn.delete(CATALOG_TABLE, b"e/" + name.encode(), DOC)
    kept = _storages(after)
    for storage, table in sorted(_storages(before).items()):
        if storage in kept:
            continue
        doc = {"storage": storage, "table": table}
        txn.set(CATALOG_TABLE, RETIRED + storage.encode(), DOC, _dump(doc))
    txn.set(CATALOG_TABLE, META_ROW, VERSION, str(before.version + 1).encode())
    txn.set(CATALOG_TABLE, META_ROW, NEXT_ID, str(after.next_id).encode())


@dataclass(frozen=True)
class RetiredStorage:
    """A store table no catalog after its DDL names: its cells are garbage once no snapshot
    from before that DDL is left."""

    storage: str
    table: str
    """The SQL table it belonged to (for logs)."""


async def retired_storages(txn: Transaction) -> list[RetiredStorage]:
    """The storages DDL retired, as of the transaction's snapshot (one scan)."""
    out = []
    async for _row, cols in txn.scan(CATALOG_TABLE, RETIRED, RETIRED_END):
        doc = json.loads(cols[DOC])
        out.append(RetiredStorage(str(doc["storage"]), str(doc["table"])))
    return out


def retire_storage(txn: Transaction, storage: str, table: str) -> None:
    """Buffer the record of a retired storage outside DDL on the shared catalog: a session's
    temporary table's (server/session_temp_tables.py), which that catalog never named."""
    doc = {"storage": storage, "table": table}
    txn.set(CATALOG_TABLE, RETIRED + storage.encode(), DOC, _dump(doc))


def forget_retired(txn: Transaction, storage: str) -> None:
    """Buffer the removal of a retired storage's row (its cells are gone)."""
    txn.delete(CATALOG_TABLE, RETIRED + storage.encode(), DOC)


def _storages(catalog: Catalog) -> dict[str, str]:
    """Every store table the catalog's tables and indexes use, with the SQL table's name."""
    out = {}
    for t in catalog.tables.values():
        out[t.storage] = t.name
        for ix in t.indexes:
            out[ix.storage] = t.name
    return out


def _dump(doc: dict[str, object]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
