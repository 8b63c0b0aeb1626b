"""Temporary tables: how they are named, numbered and told apart from regular tables.

A temporary table lives only in its session's overlay catalog
(:mod:`percolator.server.session_temp_tables`), never in the shared one. Its object ids come
from a range of its own, one slice per session, far above what the shared counter reaches;
so a :class:`TableDef` tells by its id alone that it is temporary and which session's
``pg_temp_N`` schema holds it (what pg_class and information_schema show), without the
system catalogs needing the session. Its storages get globally unique names with a prefix
of their own, so two sessions' temporary tables never share cells and the catalog guard can
skip them (no other session's DDL can change them).
"""

from __future__ import annotations

import re

from percolator.server.sql.catalog import TableDef

TEMP_ID_BASE = 1_000_000_000
"""The first object id of temporary objects (OID ``FIRST_USER_OID + id``, still below 2^31)."""
IDS_PER_SESSION = 1_000_000
"""Each session's slice of the temporary id range: slice N is schema ``pg_temp_N``."""
TEMP_NAMESPACE_OID_BASE = 14000
"""``pg_temp_N``'s OID is this plus N (below FIRST_USER_OID for any N a server reaches)."""
MAX_SCHEMAS = 2000
"""How many ``pg_temp_N`` schema OIDs there are room for below the user OIDs."""
STORAGE_PREFIX = "tmp_"
"""Temporary tables' and their indexes' storages (regular ones are ``t<id>`` / ``i<id>``)."""

_TEMP_SCHEMA = re.compile(r"pg_temp(_\d+)?")
_CREATE_TEMP = re.compile(r"\s*CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?TEMP(?:ORARY)?\s+TABLE\b", re.I)
_ON_COMMIT_DROP = re.compile(r"\bON\s+COMMIT\s+DROP\b", re.I)


def is_temp(table: TableDef) -> bool:
    """Whether ``table`` is a temporary table (of the session whose catalog holds it)."""
    return table.id >= TEMP_ID_BASE


def first_id(number: int) -> int:
    """The first object id of the session whose schema is ``pg_temp_<number>``."""
    return TEMP_ID_BASE + number * IDS_PER_SESSION


def schema_number(object_id: int) -> int:
    """N of the ``pg_temp_N`` schema that holds the temporary object ``object_id``."""
    return (object_id - TEMP_ID_BASE) // IDS_PER_SESSION


def namespace_oid(object_id: int) -> int:
    """The OID of the ``pg_temp_N`` schema holding the temporary object ``object_id``."""
    return TEMP_NAMESPACE_OID_BASE + schema_number(object_id)


def namespace_name(namespace: int) -> str | None:
    """``pg_temp_N`` for a temporary schema's OID, else None."""
    number = namespace - TEMP_NAMESPACE_OID_BASE
    if 0 <= number < MAX_SCHEMAS:
        return f"pg_temp_{number}"
    return None


def is_temp_schema(schema: str | None) -> bool:
    """Whether a qualifier names the session's temporary schema (``pg_temp`` or
    ``pg_temp_N``; every session sees only its own, as its search path's first)."""
    return schema is not None and _TEMP_SCHEMA.fullmatch(schema) is not None


def visible(table: TableDef | None, schema: str | None) -> TableDef | None:
    """``table`` (found by name in a catalog where a temporary table shadows a regular one of
    the same name) if a reference qualified by ``schema`` may name it."""
    if table is None or schema is None:
        return table
    if is_temp_schema(schema):
        return table if is_temp(table) else None
    return None if is_temp(table) else table


def is_temp_storage(storage: str) -> bool:
    """Whether a store table holds a temporary table's rows or index entries."""
    return storage.startswith(STORAGE_PREFIX)


def take_on_commit_drop(text: str) -> tuple[str, bool]:
    """``CREATE TEMP TABLE ... ON COMMIT DROP`` with that clause blanked out (sqlglot does not
    parse it; blanks keep error positions), and whether it was there."""
    if _CREATE_TEMP.match(text) is None:
        return text, False
    found = list(_ON_COMMIT_DROP.finditer(text))
    if not found:
        return text, False
    m = found[-1]  # the last one: the clause follows the column list
    return text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :], True
