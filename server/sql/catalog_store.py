"""Where the catalog lives: the store table ``__catalog``, read and written in transactions.

Layout (one row per object, JSON documents in the ``d`` column):

- ``meta``: ``version`` (bumped by every DDL transaction) and ``next_id`` (object ids);
- ``t/<name>``: a table with its columns, indexes and checks;
- ``r/<name>``: a role;
- ``o/<name>``: an observer;
- ``v/<name>``: a view;
- ``f/<name>(<argument types>)``: a function made by CREATE FUNCTION;
- ``n/<name>``: a schema made by CREATE SCHEMA (objects of schema s are named ``s.<name>``;
  a catalog stored before schemas existed has none: everything in it is in public);
- ``e/<name>``: an enum type (CREATE TYPE ... AS ENUM), its labels and their sort orders;
- ``s/<name>``: a sequence definition; its counter lives in ``__sequences`` (see
  :mod:`percolator.server.sequences`);
- ``g/<storage>``: a store table that DROP or TRUNCATE left behind (a table's or an index's
  storage), written by the same transaction; its cells are reclaimed once no snapshot can read
  them (:mod:`percolator.server.storage_reclaimer`), then the row is deleted. Not part of the
  :class:`Catalog`.

Every DDL transaction reads and rewrites ``meta.version``, so two concurrent DDL transactions
conflict (one gets 40001) and a process sees another's DDL by polling one cell.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from percolator.server.sql.catalog import (
    Catalog,
    enum_from_json,
    enum_to_json,
    function_from_json,
    function_to_json,
    link_enums,
    observer_from_json,
    observer_to_json,
    role_from_json,
    role_to_json,
    schema_from_json,
    schema_to_json,
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


@dataclass(frozen=True)
class _Kind:
    """One kind of catalog object: its row prefix, its Catalog field, its JSON forms."""

    prefix: bytes
    field: str
    dump: Callable[[Any], dict[str, object]]
    load: Callable[[dict[str, Any]], Any]
    key: str = "name"
    """The attribute naming an object (its key in the Catalog field)."""


_KINDS = (
    _Kind(b"t/", "tables", table_to_json, table_from_json),
    _Kind(b"r/", "roles", role_to_json, role_from_json),
    _Kind(b"s/", "sequences", sequence_to_json, sequence_from_json),
    _Kind(b"o/", "observers", observer_to_json, observer_from_json),
    _Kind(b"v/", "views", view_to_json, view_from_json),
    _Kind(b"e/", "enums", enum_to_json, enum_from_json, key="type_name"),
    _Kind(b"n/", "schemas", schema_to_json, schema_from_json),
    _Kind(b"f/", "functions", function_to_json, function_from_json, key="signature"),
)
_BY_PREFIX = {k.prefix: k for k in _KINDS}


async def load(txn: Transaction) -> Catalog:
    """The whole catalog as of the transaction's snapshot (one scan)."""
    version = 0
    next_id = 1
    objects: dict[str, dict[str, Any]] = {k.field: {} for k in _KINDS}
    async for row, cols in txn.scan(CATALOG_TABLE):
        if row == META_ROW:
            version = int(cols.get(VERSION, b"0"))
            next_id = int(cols.get(NEXT_ID, b"1"))
            continue
        kind = _BY_PREFIX.get(row[:2])
        if kind is None:  # a retired storage (g/), not part of the Catalog
            continue
        obj = kind.load(json.loads(cols[DOC]))
        objects[kind.field][getattr(obj, kind.key)] = obj
    return link_enums(Catalog(version, next_id, **objects))


def write_changes(txn: Transaction, before: Catalog, after: Catalog) -> None:
    """Buffer the writes that turn ``before`` into ``after`` in the store, and bump the
    version (the caller read ``before`` in this same transaction)."""
    for kind in _KINDS:
        old, new = getattr(before, kind.field), getattr(after, kind.field)
        for name, obj in new.items():
            if old.get(name) != obj:
                txn.set(CATALOG_TABLE, kind.prefix + name.encode(), DOC, _dump(kind.dump(obj)))
        for name in old.keys() - new.keys():
            txn.delete(CATALOG_TABLE, kind.prefix + name.encode(), DOC)
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
