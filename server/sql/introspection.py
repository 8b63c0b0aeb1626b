"""asyncpg's type-introspection query, answered from the builtin type table.

asyncpg has codecs for the scalar builtin types but, of the array types, only for ``oid[]`` and
``text[]``; for any other type it meets in a result (``int4[]`` from ``array_agg``, say) it
sends one fixed query, ``WITH RECURSIVE typeinfo_tree(...)``, walking pg_type, pg_range and
pg_attribute recursively. Every type we have is a builtin base type, a user-defined enum type
(kind ``e``, in schema public: asyncpg reads its values as text) or an array of one, so the
answer is: the requested types, and the element type of each array, one level deeper.
"""

from __future__ import annotations

from percolator.server.sql import types as T
from percolator.server.sql.catalog_functions import oid_to_reg
from percolator.server.sql.pg_catalog_tables import PG_TYPES, PgType, enum_pg_types
from percolator.server.sql.types import SqlType

PREFIX = "WITH RECURSIVE typeinfo_tree("

COLUMNS: tuple[tuple[str, SqlType], ...] = (
    ("oid", T.OID),
    ("ns", T.NAME),
    ("name", T.NAME),
    ("kind", T.CHAR),
    ("basetype", T.OID),
    ("elemtype", T.OID),
    ("elemdelim", T.CHAR),
    ("range_subtype", T.OID),
    ("attrtypoids", T.OID_ARRAY),
    ("attrnames", T.TEXT_ARRAY),
    ("depth", T.INT4),
    ("basetype_name", T.TEXT),
    ("elemtype_name", T.TEXT),
    ("range_subtype_name", T.TEXT),
)
PARAM_TYPES = [T.OID_ARRAY]


def is_introspection(sql: str) -> bool:
    """True for asyncpg's introspection statement (however it is spaced)."""
    return " ".join(sql.split()).startswith(PREFIX)


def rows(ctx: object, oids: list[int] | None) -> list[tuple[object, ...]]:
    """The query's result for the requested type OIDs, deepest first as it orders them."""
    out: list[tuple[object, ...]] = []
    seen: set[tuple[int, int]] = set()
    user: dict[int, PgType] = {
        p.oid: p
        for e in ctx.catalog.enums.values()  # type: ignore[attr-defined]
        for p in enum_pg_types(e)
    }

    def add(oid: int, depth: int) -> None:
        t = PG_TYPES.get(oid) or user.get(oid)
        if t is None or (oid, depth) in seen:
            return
        seen.add((oid, depth))
        is_array = t.typlen == -1 and t.typelem != 0
        elem_name = str(oid_to_reg(ctx, T.REGTYPE, t.typelem)) if t.typelem else "-"
        ns = "public" if oid in user else "pg_catalog"
        out.append(
            (oid, ns, t.typname, t.typtype, None, t.typelem,
             "," if is_array else None, None, None, None, depth, None, elem_name, None)
        )  # fmt: skip
        if is_array:
            add(t.typelem, depth + 1)

    for oid in oids or []:
        if oid is not None:
            add(int(oid), 0)
    return sorted(out, key=lambda r: -r[10])  # type: ignore[operator]
