"""The Postgres system catalogs clients query (pg_catalog, information_schema), computed from
the catalog.

psql's ``\\d``, SQLAlchemy's reflection, pgjdbc's DatabaseMetaData and asyncpg's type
introspection read these tables (the queries are in docs/reference's client query corpus). Each
table has the real Postgres column list (names, order and types of Postgres 16, a superset of
15's), so ``SELECT *`` and RowDescription look as clients expect; tables we have nothing for
are empty. Types Percolator lacks are stood in for: ``aclitem[]`` by ``text[]``,
``pg_node_tree`` (stored expressions) by their SQL text, ``xid`` by ``oid``.

Object ids: tables and secondary indexes use ``FIRST_USER_OID + id`` (as the catalog assigns
them); the objects Percolator keeps implicit get OIDs derived from their table or index in
ranges of their own (primary key index, each kind of constraint, column defaults), so they are
stable across catalog versions and unique. ``catalog_functions`` (pg_get_indexdef,
pg_get_constraintdef, regclass) resolves the same OIDs through :func:`relations`,
:func:`index_by_oid` and :func:`constraint_by_oid`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlglot
from sqlglot import exp

from percolator.server.sql import schemas, system_tables, temp_tables, views
from percolator.server.sql import types as T
from percolator.server.sql.backends import is_superuser
from percolator.server.sql.catalog import (
    FIRST_USER_OID,
    INFORMATION_SCHEMA_NAMESPACE_OID,
    PERCOLATOR_NAMESPACE_OID,
    PG_CATALOG_NAMESPACE_OID,
    PUBLIC_NAMESPACE_OID,
    Catalog,
    ColumnDef,
    FkAction,
    ForeignKeyDef,
    IndexDef,
    SequenceDef,
    TableDef,
    TriggerDef,
    ViewDef,
)
from percolator.server.sql.catalog_functions import (
    BOOTSTRAP_ROLE_OID,
    DATABASE_OWNER_ROLE_OID,
    OidName,
    quote_ident,
)
from percolator.server.sql.system_tables import SystemTable
from percolator.server.sql.types import SqlType, TypeId

# -- fixed OIDs (as in Postgres) --------------------------------------------------------------

DATABASE_OID = 5
"""The current database (Postgres's ``postgres`` database has OID 5)."""
HEAP_AM_OID = 2
BTREE_AM_OID = 403
DEFAULT_TABLESPACE_OID = 1663
GLOBAL_TABLESPACE_OID = 1664
DEFAULT_COLLATION_OID = 100
C_COLLATION_OID = 950
POSIX_COLLATION_OID = 951
TOAST_NAMESPACE_OID = 99
PG_CLASS_OID = 1259
PG_CONSTRAINT_OID = 2606
PG_NAMESPACE_OID = 2615

# -- derived OIDs for objects the catalog keeps implicit ---------------------------------------
# Below 2**31, so drivers that send OIDs as int4 parameters (psycopg by magnitude) keep working.

PK_INDEX_OID_BASE = 1_000_000_000
PK_CONSTRAINT_OID_BASE = 1_100_000_000
UNIQUE_CONSTRAINT_OID_BASE = 1_200_000_000
CHECK_CONSTRAINT_OID_BASE = 1_300_000_000
CHECKS_PER_TABLE = 100
FK_CONSTRAINT_OID_BASE = 1_400_000_000
FKS_PER_TABLE = 100
ATTRDEF_OID_BASE = 1_500_000_000
COLUMNS_PER_TABLE = 1600  # Postgres's limit


def pk_index_oid(table: TableDef) -> int:
    return PK_INDEX_OID_BASE + table.id


def check_constraint_oid(table: TableDef, position: int) -> int:
    return CHECK_CONSTRAINT_OID_BASE + table.id * CHECKS_PER_TABLE + position


def fk_constraint_oid(table: TableDef, position: int) -> int:
    """The OID of the table's foreign key at ``position`` in ``TableDef.foreign_keys``."""
    return FK_CONSTRAINT_OID_BASE + table.id * FKS_PER_TABLE + position


def attrdef_oid(table: TableDef, attnum: int) -> int:
    return ATTRDEF_OID_BASE + table.id * COLUMNS_PER_TABLE + attnum


# -- builtin types: pg_type's rows for every TypeId and its array (from Postgres 16) -----------

# One line a base type; each array type's row is derived from its element's (array_in, ...).
# oid typname typlen typbyval typtype typcategory typispreferred typsubscript typelem typarray
# io-stem io-separator has-typmod typalign typstorage typcollation: the I/O functions are
# <stem>[_]in, <stem>[_]out, <stem>[_]recv, <stem>[_]send and <stem>typmodin/typmodout.
_TYPE_DATA = """
16 bool 1 t b B t - 0 1000 bool - n c p 0
17 bytea -1 f b U f - 0 1001 bytea - n i x 0
18 char 1 t b Z f - 0 1002 char - n c p 0
19 name 64 f b S f raw_array_subscript_handler 18 1003 name - n c p 950
20 int8 8 t b N f - 0 1016 int8 - n d p 0
21 int2 2 t b N f - 0 1005 int2 - n s p 0
22 int2vector -1 f b A f array_subscript_handler 21 1006 int2vector - n i p 0
23 int4 4 t b N f - 0 1007 int4 - n i p 0
24 regproc 4 t b N f - 0 1008 regproc - n i p 0
25 text -1 f b S t - 0 1009 text - n i x 100
26 oid 4 t b N t - 0 1028 oid - n i p 0
30 oidvector -1 f b A f array_subscript_handler 26 1013 oidvector - n i p 0
114 json -1 f b U f - 0 199 json _ n i x 0
700 float4 4 t b N f - 0 1021 float4 - n i p 0
701 float8 8 t b N t - 0 1022 float8 - n d p 0
705 unknown -2 f p X f - 0 0 unknown - n c p 0
1042 bpchar -1 f b S f - 0 1014 bpchar - y i x 100
1043 varchar -1 f b S f - 0 1015 varchar - y i x 100
1082 date 4 t b D f - 0 1182 date _ n i p 0
1083 time 8 t b D f - 0 1183 time _ y d p 0
1114 timestamp 8 t b D f - 0 1115 timestamp _ y d p 0
1184 timestamptz 8 t b D t - 0 1185 timestamptz _ y d p 0
1186 interval 16 f b T t - 0 1187 interval _ y d p 0
1700 numeric -1 f b N f - 0 1231 numeric _ y i m 0
2205 regclass 4 t b N f - 0 2210 regclass - n i p 0
2206 regtype 4 t b N f - 0 2211 regtype - n i p 0
2249 record -1 f p P f - 0 2287 record _ n d x 0
2278 void 4 t p P f - 0 0 void _ n i p 0
2950 uuid 16 f b U f - 0 2951 uuid _ n c p 0
3802 jsonb -1 f b U f jsonb_subscript_handler 0 3807 jsonb _ n i x 0
4089 regnamespace 4 t b N f - 0 4090 regnamespace - n i p 0
"""

# The functions those columns name (regproc values): name -> OID.
_PROC_DATA = """
heap_tableam_handler:3 byteaout:31 charout:33 namein:34 nameout:35 int2in:38 int2out:39
int2vectorin:40 int2vectorout:41 int4in:42 int4out:43 regprocin:44 regprocout:45 textin:46
textout:47 oidvectorin:54 oidvectorout:55 unknownin:109 unknownout:110 float4in:200
float4out:201 float8in:214 float8out:215 json_in:321 json_out:322 json_recv:323 json_send:324
bthandler:330 int8in:460 int8out:461 array_in:750 array_out:751 bpcharin:1044 bpcharout:1045
varcharin:1046 varcharout:1047 date_in:1084 date_out:1085 time_in:1143 time_out:1144
timestamptz_in:1150 timestamptz_out:1151 interval_in:1160 interval_out:1161 boolin:1242
boolout:1243 byteain:1244 charin:1245 timestamp_in:1312 timestamp_out:1313 numeric_in:1701
numeric_out:1702 oidin:1798 oidout:1799 regclassin:2218 regclassout:2219 regtypein:2220
regtypeout:2221 record_in:2290 record_out:2291 void_in:2298 void_out:2299 array_recv:2400
array_send:2401 record_recv:2402 record_send:2403 int2recv:2404 int2send:2405 int4recv:2406
int4send:2407 int8recv:2408 int8send:2409 int2vectorrecv:2410 int2vectorsend:2411
bytearecv:2412 byteasend:2413 textrecv:2414 textsend:2415 unknownrecv:2416 unknownsend:2417
oidrecv:2418 oidsend:2419 oidvectorrecv:2420 oidvectorsend:2421 namerecv:2422 namesend:2423
float4recv:2424 float4send:2425 float8recv:2426 float8send:2427 bpcharrecv:2430
bpcharsend:2431 varcharrecv:2432 varcharsend:2433 charrecv:2434 charsend:2435 boolrecv:2436
boolsend:2437 regprocrecv:2444 regprocsend:2445 regclassrecv:2452 regclasssend:2453
regtyperecv:2454 regtypesend:2455 numeric_recv:2460 numeric_send:2461 date_recv:2468
date_send:2469 time_recv:2470 time_send:2471 timestamp_recv:2474 timestamp_send:2475
timestamptz_recv:2476 timestamptz_send:2477 interval_recv:2478 interval_send:2479
intervaltypmodin:2903 intervaltypmodout:2904 timestamptypmodin:2905 timestamptypmodout:2906
timestamptztypmodin:2907 timestamptztypmodout:2908 timetypmodin:2909 timetypmodout:2910
bpchartypmodin:2913 bpchartypmodout:2914 varchartypmodin:2915 varchartypmodout:2916
numerictypmodin:2917 numerictypmodout:2918 uuid_in:2952 uuid_out:2953 uuid_recv:2961
uuid_send:2962 void_recv:3120 void_send:3121 jsonb_send:3803 jsonb_out:3804 jsonb_recv:3805
jsonb_in:3806 array_typanalyze:3816 regnamespacein:4084 regnamespaceout:4085
regnamespacerecv:4087 regnamespacesend:4088 jsonb_subscript_handler:6098
array_subscript_handler:6179 raw_array_subscript_handler:6180 enum_in:3504 enum_out:3505
enum_recv:3532 enum_send:3533"""

PROCS: dict[str, int] = {
    name: int(oid) for name, _, oid in (tok.partition(":") for tok in _PROC_DATA.split())
}


def _regproc(name: str) -> OidName:
    """A regproc value: the OID, printed as the name ('-' for none)."""
    return OidName(0, "-") if name == "-" else OidName(PROCS[name], name)


class PgType(NamedTuple):
    oid: int
    typname: str
    typlen: int
    typbyval: bool
    typtype: str
    typcategory: str
    typispreferred: bool
    typsubscript: str
    typelem: int
    typarray: int
    typinput: str
    typoutput: str
    typreceive: str
    typsend: str
    typmodin: str
    typmodout: str
    typanalyze: str
    typalign: str
    typstorage: str
    typcollation: int


def _parse_types() -> dict[int, PgType]:
    out: dict[int, PgType] = {}
    for line in _TYPE_DATA.strip().splitlines():
        f = line.split()
        io = f[10] + ("_" if f[11] == "_" else "")
        modin, modout = (f[10] + "typmodin", f[10] + "typmodout") if f[12] == "y" else ("-", "-")
        base = PgType(
            int(f[0]),
            f[1],
            int(f[2]),
            f[3] == "t",
            f[4],
            f[5],
            f[6] == "t",
            f[7],
            int(f[8]),
            int(f[9]),
            io + "in",
            io + "out",
            io + "recv",
            io + "send",
            modin,
            modout,
            "-",
            f[13],
            f[14],
            int(f[15]),
        )
        out[base.oid] = base
        if base.typarray:
            pseudo = base.typtype == "p"
            out[base.typarray] = PgType(
                base.typarray,
                "_" + base.typname,
                -1,
                False,
                base.typtype if pseudo else "b",
                "P" if pseudo else "A",
                False,
                "array_subscript_handler",
                base.oid,
                0,
                "array_in",
                "array_out",
                "array_recv",
                "array_send",
                modin,
                modout,
                "array_typanalyze",
                "d" if base.typalign == "d" else "i",
                "x",
                base.typcollation,
            )
    return dict(sorted(out.items()))


PG_TYPES: dict[int, PgType] = _parse_types()


def pg_type_of(t: SqlType) -> PgType:
    """The pg_type row of a column type (its array type for arrays)."""
    if isinstance(t.id, T.EnumType):
        base, array = enum_pg_types(t.id)
        return array if t.array else base
    return PG_TYPES[t.oid]


def enum_pg_types(e: T.EnumType) -> tuple[PgType, PgType]:
    """The pg_type rows of a user-defined enum type and of its array type."""
    base = PgType(
        e.oid, schemas.bare(e.type_name), 4, True, "e", "E", False, "-", 0, e.array_oid, "enum_in",
        "enum_out", "enum_recv", "enum_send", "-", "-", "-", "i", "p", 0,
    )  # fmt: skip
    array = PgType(
        e.array_oid, "_" + schemas.bare(e.type_name), -1, False, "b", "A", False,
        "array_subscript_handler",
        e.oid, 0, "array_in", "array_out", "array_recv", "array_send", "-", "-",
        "array_typanalyze", "i", "x", 0,
    )  # fmt: skip
    return base, array


def type_collation(t: SqlType) -> int:
    """The collation a column of this type gets (100 for text types, 950 for name, else 0)."""
    return pg_type_of(t).typcollation


# -- relations: every row of pg_class ----------------------------------------------------------


@dataclass(frozen=True)
class IndexInfo:
    """An index as pg_index shows it: a secondary index or the primary key's implicit one."""

    oid: int
    name: str
    table: TableDef
    column_ids: tuple[int, ...]
    unique: bool
    primary: bool
    constraint: bool
    descending: tuple[bool, ...] = ()
    expressions: tuple[str | None, ...] = ()
    """Per key column: its expression's SQL (IndexDef.expressions), None for a column."""
    predicate: str | None = None
    """A partial index's WHERE (IndexDef.predicate)."""
    opclasses: tuple[str | None, ...] = ()
    """Per key column: its operator class if not the default (IndexDef.opclasses)."""

    @property
    def attnums(self) -> list[int]:
        """The table's attnums of the index columns (pg_index.indkey: 0 for an expression)."""
        return [self.table.position(c) + 1 if c else 0 for c in self.column_ids]

    def expressions_tree(self) -> str | None:
        """pg_index.indexprs: the expressions, as pg_get_expr shows them, None without."""
        exprs = [redeparse(e, self.table, False) for e in self.expressions if e is not None]
        return ", ".join(exprs) if exprs else None

    def predicate_text(self, pretty: bool) -> str | None:
        """pg_index.indpred (non-pretty, ``(a > 0)``) and pg_get_indexdef's WHERE."""
        return None if self.predicate is None else redeparse(self.predicate, self.table, pretty)

    def attribute_names(self) -> list[str]:
        """The index's pg_attribute names: a column's, else Postgres's word for the
        expression (``lower``, ``expr``), numbered when taken (``expr1``)."""
        from percolator.server.sql.index_expressions import KeyItem, column_names

        items = [
            KeyItem(c, self.expressions[i] if i < len(self.expressions) else None, False)
            for i, c in enumerate(self.column_ids)
        ]
        return column_names(self.table, items)

    def key_texts(self, pretty: bool) -> list[str]:
        """The key columns as pg_get_indexdef lists them: quoted names and expressions."""
        return [
            quote_ident(self.table.column_by_id(c).name)
            if i >= len(self.expressions) or self.expressions[i] is None
            else index_expression_text(self.table, self.expressions[i] or "", pretty)
            for i, c in enumerate(self.column_ids)
        ]


@dataclass(frozen=True)
class ForeignKeyInfo:
    """What a foreign key references, as pg_constraint's conf* columns show it."""

    ref_table: TableDef
    ref_attnums: tuple[int, ...]
    """The referenced columns' attnums in the constraint's order (confkey)."""
    on_update: FkAction
    on_delete: FkAction
    ref_index: IndexInfo | None
    """The referenced table's unique index whose columns the key matches (conindid)."""
    deferrable: bool = False
    initially_deferred: bool = False


@dataclass(frozen=True)
class ConstraintInfo:
    """A row of pg_constraint: primary key 'p', unique 'u', check 'c' or foreign key 'f'."""

    oid: int
    name: str
    table: TableDef
    contype: str
    attnums: tuple[int, ...]
    index: IndexInfo | None = None
    """For primary keys and unique constraints: the index that implements them."""
    expression: str | None = None
    """For checks: the expression as Postgres's non-pretty deparser writes it."""
    foreign: ForeignKeyInfo | None = None
    """For foreign keys: what they reference."""

    @property
    def conindid(self) -> int:
        """pg_constraint.conindid: the constraint's own index, or for a foreign key the
        referenced one (0 for none)."""
        if self.index is not None:
            return self.index.oid
        if self.foreign is not None and self.foreign.ref_index is not None:
            return self.foreign.ref_index.oid
        return 0


@dataclass(frozen=True)
class Relation:
    """A row of pg_class."""

    oid: int
    name: str
    namespace: int
    kind: str
    table: TableDef | None = None
    index: IndexInfo | None = None
    sequence: SequenceDef | None = None
    system: SystemTable | None = None
    view: ViewDef | None = None


# pg_catalog relations that are views in Postgres (relkind 'v'); the rest are tables.
_VIEWS = frozenset(
    {
        "pg_roles", "pg_user", "pg_settings", "pg_tables", "pg_views", "pg_indexes",
        "pg_sequences", "pg_stat_activity", "pg_locks", "pg_available_extensions",
    }
)  # fmt: skip
# Shared catalogs (one per cluster): relisshared.
_SHARED = frozenset({"pg_database", "pg_authid", "pg_tablespace"})


def _index_info(table: TableDef, ix: IndexDef) -> IndexInfo:
    return IndexInfo(
        ix.oid,
        ix.name,
        table,
        ix.column_ids,
        ix.unique,
        False,
        ix.constraint,
        ix.descending,
        ix.expressions,
        ix.predicate,
        ix.opclasses,
    )


# fmt: off
def indexes_of(table: TableDef) -> list[IndexInfo]:
    """The table's indexes: the primary key's first, then the secondary ones."""
    out = []
    if table.primary_key:
        out.append(
            IndexInfo(
                pk_index_oid(table), table.pk_constraint_name, table, table.primary_key,
                unique=True, primary=True, constraint=True,
            )
        )
    out.extend(_index_info(table, ix) for ix in table.indexes)
    return out
# fmt: on


# fmt: off
def constraints_of(table: TableDef, catalog: Catalog | None = None) -> list[ConstraintInfo]:
    """The table's constraints: primary key, unique constraints, checks, then foreign keys
    (those need ``catalog`` to resolve the tables they reference; without it they are left
    out)."""
    out = []
    for ix in indexes_of(table):
        if ix.primary:
            oid = PK_CONSTRAINT_OID_BASE + table.id
            out.append(ConstraintInfo(oid, ix.name, table, "p", tuple(ix.attnums), ix))
        elif ix.constraint:
            oid = UNIQUE_CONSTRAINT_OID_BASE + ix.oid - FIRST_USER_OID
            out.append(ConstraintInfo(oid, ix.name, table, "u", tuple(ix.attnums), ix))
    for n, ck in enumerate(table.checks):
        text = check_text(table, ck.expression)
        out.append(
            ConstraintInfo(
                check_constraint_oid(table, n), ck.name, table, "c",
                _referenced_attnums(table, ck.expression), expression=text,
            )
        )
    if catalog is not None:
        for n, fk in enumerate(table.foreign_keys):
            info = _foreign_key_info(catalog, fk)
            if info is not None:
                attnums = tuple(table.position(c) + 1 for c in fk.column_ids)
                out.append(
                    ConstraintInfo(
                        fk_constraint_oid(table, n), fk.name, table, "f", attnums,
                        foreign=info,
                    )
                )
    return out
# fmt: on


def _foreign_key_info(catalog: Catalog, fk: ForeignKeyDef) -> ForeignKeyInfo | None:
    ref = catalog.table_by_id(fk.ref_table_id)
    if ref is None:  # not in this snapshot (a dropped table's keys go with it)
        return None
    ref_attnums = tuple(ref.position(c) + 1 for c in fk.ref_column_ids)
    return ForeignKeyInfo(
        ref,
        ref_attnums,
        fk.on_update,
        fk.on_delete,
        referenced_index(ref, fk.ref_column_ids),
        fk.deferrable,
        fk.initially_deferred,
    )


def referenced_index(table: TableDef, column_ids: tuple[int, ...]) -> IndexInfo | None:
    """The unique index a foreign key on ``column_ids`` of ``table`` depends on, as Postgres
    picks it (transformFkeyCheckAttrs): the first unique index, in creation order, whose
    columns are the same set in any order; the primary key's was created with the table."""
    wanted = set(column_ids)
    for ix in indexes_of(table):
        if ix.unique and len(ix.column_ids) == len(column_ids) and set(ix.column_ids) == wanted:
            return ix
    return None


def unique_constraint_of(catalog: Catalog, index: IndexInfo | None) -> ConstraintInfo | None:
    """The primary key or unique constraint an index implements (None for a plain unique
    index, which a foreign key may reference too)."""
    if index is None:
        return None
    for c in constraints_of(index.table):
        if c.index is not None and c.index.oid == index.oid:
            return c
    return None


_cache: dict[str, tuple[object, object]] = {}


def _memo(key: str, catalog: Catalog, build: Callable[[], Any]) -> Any:
    """One cached value per key for the last catalog seen (catalogs are immutable values)."""
    token = (catalog, len(system_tables.all_tables()))
    hit = _cache.get(key)
    if hit is not None and hit[0][0] is token[0] and hit[0][1] == token[1]:  # type: ignore[index]
        return hit[1]
    value = build()
    _cache[key] = (token, value)
    return value


def relations(catalog: Catalog) -> list[Relation]:
    """Every relation: user tables with their indexes, sequences, then the system tables."""
    return _memo("relations", catalog, lambda: _build_relations(catalog))


def _build_relations(catalog: Catalog) -> list[Relation]:
    out = []
    for t in sorted(catalog.tables.values(), key=lambda t: t.id):
        # A session's temporary tables (and their indexes) are in its pg_temp_N schema.
        # (an index is in its table's schema: its own key may be bare, see schemas.py).
        ns = (
            temp_tables.namespace_oid(t.id)
            if temp_tables.is_temp(t)
            else namespace_of(catalog, t.name)
        )
        out.append(Relation(t.oid, schemas.bare(t.name), ns, "r", table=t))
        for ix in indexes_of(t):
            out.append(Relation(ix.oid, schemas.bare(ix.name), ns, "i", index=ix))
    for s in catalog.sequences.values():
        temp = s.oid >= temp_tables.TEMP_ID_BASE
        ns = temp_tables.namespace_oid(s.oid) if temp else namespace_of(catalog, s.name)
        out.append(Relation(s.oid, schemas.bare(s.name), ns, "S", sequence=s))
    for v in sorted(catalog.views.values(), key=lambda v: v.id):
        out.append(
            Relation(v.oid, schemas.bare(v.name), namespace_of(catalog, v.name), "v", view=v)
        )
    for st in system_tables.all_tables():
        if st.schema == "pg_catalog":
            kind = "v" if st.name in _VIEWS else "r"
            out.append(Relation(st.oid, st.name, PG_CATALOG_NAMESPACE_OID, kind, system=st))
        else:
            namespace = (
                PERCOLATOR_NAMESPACE_OID
                if st.schema == "percolator"
                else INFORMATION_SCHEMA_NAMESPACE_OID
            )
            out.append(Relation(st.oid, st.name, namespace, "v", system=st))
    return out


def namespace_of(catalog: Catalog, key: str) -> int:
    """The OID of the schema of the object keyed ``key`` (server/sql/schemas.py)."""
    found = schemas.oid(catalog, schemas.schema_of(key))
    return found if found is not None else PUBLIC_NAMESPACE_OID


def relation_by_oid(catalog: Catalog, oid: int) -> Relation | None:
    by_oid = _memo("relations_by_oid", catalog, lambda: {r.oid: r for r in relations(catalog)})
    return by_oid.get(oid)


def index_by_oid(catalog: Catalog, oid: int) -> IndexInfo | None:
    r = relation_by_oid(catalog, oid)
    return r.index if r is not None else None


# fmt: off
def all_constraints(catalog: Catalog) -> list[ConstraintInfo]:
    return _memo(
        "constraints",
        catalog,
        lambda: [c for t in sorted(catalog.tables.values(), key=lambda t: t.id)
                 for c in constraints_of(t, catalog)],
    )
# fmt: on


def constraint_by_oid(catalog: Catalog, oid: int) -> ConstraintInfo | None:
    """A constraint by its OID; an index's OID also finds the constraint it implements."""
    by_oid = _memo(
        "constraints_by_oid",
        catalog,
        lambda: {
            **{c.index.oid: c for c in all_constraints(catalog) if c.index is not None},
            **{c.oid: c for c in all_constraints(catalog)},
        },
    )
    return by_oid.get(oid)


# -- expressions as Postgres's deparser writes them (pg_get_expr, pg_get_constraintdef) --------
# Stored defaults and checks are SQL text; Postgres shows them re-printed from the parsed tree:
# lower-case function names, string constants with their type (``'x'::text``), and, unless
# pretty-printing, every operator expression in parentheses (``((a > 0) AND (b IS NOT NULL))``).

_COMPARISONS: dict[type[exp.Expression], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.Like: "~~", exp.ILike: "~~*",
    exp.ArrayContainsAll: "@>", exp.ArrayContainedBy: "<@", exp.ArrayOverlaps: "&&",
}  # fmt: skip
_ARITHMETIC: dict[type[exp.Expression], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.DPipe: "||",
}  # fmt: skip
_KEYWORD_FUNCTIONS: dict[type[exp.Expression], str] = {
    exp.CurrentTimestamp: "CURRENT_TIMESTAMP", exp.CurrentDate: "CURRENT_DATE",
    exp.CurrentTime: "CURRENT_TIME", exp.CurrentUser: "CURRENT_USER",
}  # fmt: skip
_FUNCTION_NAMES: dict[type[exp.Expression], str] = {
    exp.Uuid: "gen_random_uuid", exp.Coalesce: "COALESCE", exp.ArrayConcat: "array_cat",
}  # fmt: skip
_STRING_TYPES = (TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NAME)


def _type_label(t: SqlType) -> str:
    """A type as a cast in deparsed text shows it: without modifier, ``bpchar`` for char."""
    if t.id is TypeId.BPCHAR and not t.array:
        return "bpchar"
    return SqlType(t.id, -1, t.array).format()


# Where a node sits, for pretty-printing's parenthesis rules (ruleutils.c's isSimpleNode):
# ("op", symbol, "left" | "right"), ("bool", "and" | "or" | "not"), ("cast",), or None (the top,
# or a function argument, which has its own parentheses).
_Parent = tuple[str, ...] | None
_LOW_OPS, _HIGH_OPS = ("+", "-"), ("*", "/", "%")


_INTEGERS = (TypeId.INT2, TypeId.INT4, TypeId.INT8)


class _Deparser:
    def __init__(self, columns: dict[str, SqlType], pretty: bool) -> None:
        self.columns = columns
        self.pretty = pretty

    def column_text(self, col: exp.Column) -> str:
        """A column reference as printed (a table's own expressions: the bare name)."""
        return quote_ident(col.name)

    def column_type(self, col: exp.Column) -> SqlType | None:
        """The type of a referenced column, None if unknown (then no casts are added)."""
        return self.columns.get(col.name)

    def top(self, e: exp.Expression, target: SqlType | None = None) -> str:
        """The whole expression; ``target`` types a bare literal (a column default)."""
        e = _strip_parens(e)
        if target is not None and _is_string(e):
            return _quote(e.name) + "::" + _type_label(target)
        return self.expr(e, None)

    def expr(self, e: exp.Expression, parent: _Parent) -> str:
        text, node = self._render(_strip_parens(e))
        if node is None:
            return text
        if not self.pretty or _needs_parens(node, parent):
            return f"({text})"
        return text

    def _render(self, e: exp.Expression) -> tuple[str, tuple[str, ...] | None]:
        """The node's text without its own parentheses, and its kind (None: never wrapped)."""
        kind = type(e)
        if kind in _COMPARISONS or kind in _ARITHMETIC:
            return self._binary(e)
        if kind in (exp.And, exp.Or):
            word = "and" if kind is exp.And else "or"
            parts = [self.expr(x, ("bool", word)) for x in _flatten(e, kind)]
            return f" {word.upper()} ".join(parts), ("bool", word)
        if isinstance(e, exp.Not):
            inner = _strip_parens(e.this)
            if isinstance(inner, exp.Is):
                return self._is(inner, True)
            # sqlglot writes `a NOT IN (...)` as `NOT a IN (...)`; `NOT (a IN (...))` keeps its
            # parentheses, and Postgres keeps that one a NOT over `= ANY`.
            if isinstance(inner, exp.In) and not isinstance(e.this, exp.Paren):
                return self._in(inner, True)
            return "NOT " + self.expr(inner, ("bool", "not")), ("bool", "not")
        if isinstance(e, exp.Is):
            return self._is(e, bool(e.args.get("negate")))
        if isinstance(e, exp.In):
            return self._in(e, False)
        if isinstance(e, exp.Between):
            low = exp.GTE(this=e.this, expression=e.args["low"])
            high = exp.LTE(this=e.this, expression=e.args["high"])
            return self._render(exp.And(this=low, expression=high))
        if isinstance(e, exp.Neg):
            inner = _strip_parens(e.this)
            if isinstance(inner, exp.Literal) and not inner.is_string:
                # Postgres folds -1 into a constant and prints negative constants quoted.
                return f"'-{inner.name}'::{_number_label(inner.name)}", None
            return "- " + self.expr(inner, ("op", "neg", "right")), ("op", "neg")
        if isinstance(e, exp.Cast):
            return self._cast(e), None
        if isinstance(e, (exp.Any, exp.All)):
            word = "ANY" if isinstance(e, exp.Any) else "ALL"
            return f"{word} ({self.expr(e.this, None)})", None
        if isinstance(e, exp.Array):
            return f"ARRAY[{', '.join(self.expr(x, None) for x in e.expressions)}]", None
        if isinstance(e, exp.Column):
            return self.column_text(e), None
        if isinstance(e, exp.Literal):
            return (_quote(e.name) + "::text" if e.is_string else e.name), None
        if isinstance(e, exp.Boolean):
            return ("true" if e.this else "false"), None
        if isinstance(e, exp.Null):
            return "NULL", None
        if kind is exp.CurrentTimestamp and "start" in e.meta:
            return "now()", None  # written as now(), which sqlglot reads as CURRENT_TIMESTAMP
        if kind in _KEYWORD_FUNCTIONS:
            return _KEYWORD_FUNCTIONS[kind], None
        if isinstance(e, exp.Func):
            return self._call(e), None
        return e.sql(dialect="postgres"), None

    def _binary(self, e: exp.Expression) -> tuple[str, tuple[str, ...]]:
        op = _COMPARISONS.get(type(e)) or _ARITHMETIC[type(e)]
        left, right = _strip_parens(e.this), _strip_parens(e.expression)
        ltext, rtext = self._typed_pair(left, right, op)
        if ltext is None:
            ltext = self.expr(left, ("op", op, "left"))
        if rtext is None:
            rtext = self.expr(right, ("op", op, "right"))
        if isinstance(right, (exp.Any, exp.All)):
            return f"{ltext} {op} {rtext}", ("array-op",)  # x = ANY (...), re-read
        return f"{ltext} {op} {rtext}", ("op", op)

    def _typed_pair(
        self, left: exp.Expression, right: exp.Expression, op: str
    ) -> tuple[str | None, str | None]:
        """A column compared with a literal, or with a column of another numeric type: the
        casts Postgres's operator resolution adds."""
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            return self._column_pair(left, right)
        for col, lit, col_first in ((left, right, True), (right, left, False)):
            t = self.column_type(col) if isinstance(col, exp.Column) else None
            if t is None:
                continue
            if op == "||" and not t.array and t.id is not TypeId.VARCHAR:
                # text || anynonarray: the literal is text whatever the column's type.
                return None, None
            coltext, littext = self._coerce(self.column_text(col), t, lit)
            if littext is None:
                return None, None
            return (coltext, littext) if col_first else (littext, coltext)
        return None, None

    def _column_pair(self, left: exp.Column, right: exp.Column) -> tuple[str | None, str | None]:
        """An integer column beside a numeric one is cast to numeric (there is no operator
        taking both, as there are for two integer types)."""
        lt, rt = self.column_type(left), self.column_type(right)
        if lt is None or rt is None or lt.array or rt.array:
            return None, None
        ltext, rtext = self.column_text(left), self.column_text(right)
        if lt.id in _INTEGERS and rt.id is TypeId.NUMERIC:
            return self._cast_text(ltext, "numeric"), rtext
        if rt.id in _INTEGERS and lt.id is TypeId.NUMERIC:
            return ltext, self._cast_text(rtext, "numeric")
        return None, None

    def _coerce(self, coltext: str, t: SqlType, lit: exp.Expression) -> tuple[str, str | None]:
        if _is_string(lit):
            if t.id is TypeId.VARCHAR and not t.array:
                return self._cast_text(coltext, "text"), _quote(lit.name) + "::text"
            return coltext, _quote(lit.name) + "::" + _type_label(t)
        if isinstance(lit, exp.Literal) and not lit.is_string and not t.array:
            if t.id is TypeId.NUMERIC and "." not in lit.name:
                return coltext, self._cast_text(lit.name, "numeric")
            if t.id in (TypeId.FLOAT4, TypeId.FLOAT8):
                return coltext, self._cast_text(lit.name, _type_label(SqlType(t.id)))
        return coltext, None

    def _cast_text(self, operand: str, type_label: str) -> str:
        return f"{operand}::{type_label}" if self.pretty else f"({operand})::{type_label}"

    def _is(self, e: exp.Is, negate: bool) -> tuple[str, tuple[str, ...]]:
        target = _strip_parens(e.expression)
        word = "NULL" if isinstance(target, exp.Null) else self.expr(target, None).upper()
        operand = self.expr(e.this, ("test",))
        return f"{operand} IS {'NOT ' if negate else ''}{word}", ("test",)

    def _in(self, e: exp.In, negate: bool) -> tuple[str, tuple[str, ...]]:
        """x IN (1, 2) as Postgres stores it: x = ANY (ARRAY[1, 2])."""
        col = _strip_parens(e.this)
        t = self.column_type(col) if isinstance(col, exp.Column) else None
        items = []
        for item in e.expressions:
            item = _strip_parens(item)
            if t is not None and _is_string(item):
                items.append(_quote(item.name) + "::" + _type_label(t))
            else:
                items.append(self.expr(item, None))
        if len(items) == 1:
            # Postgres turns a one-element list into a plain comparison (x <> 'q'::text).
            op = "<>" if negate else "="
            return f"{self.expr(col, ('op', op, 'left'))} {op} {items[0]}", ("op", op)
        op = "<> ALL" if negate else "= ANY"
        left, array = self.expr(col, ("test",)), f"ARRAY[{', '.join(items)}]"
        if t is not None and t.id is TypeId.VARCHAR and not t.array and isinstance(col, exp.Column):
            # varchar has no = of its own: Postgres compares as text, casting both sides.
            left, array = self._cast_text(left, "text"), self._cast_text(array, "text[]")
        # ruleutils.c's isSimpleNode: a ScalarArrayOpExpr is parenthesised under any parent.
        return f"{left} {op} ({array})", ("array-op",)

    def _cast(self, e: exp.Cast) -> str:
        to = e.args["to"].sql(dialect="postgres").lower()
        base = to.removesuffix("[]")
        made = T.make_type(base, array=base != to) if "(" not in to else None
        label = _type_label(made) if made is not None else to
        inner = _strip_parens(e.this)
        if _is_string(inner):
            return f"{_quote(inner.name)}::{label}"
        text, node = self._render(inner)
        if not self.pretty or node is not None:
            text = f"({text})"
        return f"{text}::{label}"

    def _call(self, e: exp.Func) -> str:
        if isinstance(e, exp.Anonymous):
            name = str(e.this)
            args = list(e.expressions)
        else:
            name = _FUNCTION_NAMES.get(type(e)) or e.sql_name().lower()
            args = [v for k in e.arg_types for v in _as_list(e.args.get(k))]
            if isinstance(e, exp.ArrayPrepend):
                args.reverse()  # sqlglot holds the array first; array_prepend takes it last
        name = name if name.isupper() else quote_ident(name.lower())
        return f"{name}({', '.join(self._argument(a) for a in args)})"

    def _argument(self, a: exp.Expression) -> str:
        a = _strip_parens(a)
        # String functions take text: a varchar column is passed through a cast.
        t = self.column_type(a) if isinstance(a, exp.Column) else None
        if t is not None and t.id is TypeId.VARCHAR and not t.array:
            return self._cast_text(self.column_text(a), "text")
        return self.expr(a, None)


def _needs_parens(node: tuple[str, ...], parent: _Parent) -> bool:
    """Pretty-printing: whether a node needs parentheses under its parent."""
    if parent is None:
        return False
    if parent[0] == "cast":
        return True
    if node[0] == "op":
        if parent[0] != "op":
            return parent[0] == "test"
        op, parent_op = node[1], parent[1]
        if op in _HIGH_OPS and parent_op in _LOW_OPS:
            return False
        if op in _LOW_OPS + _HIGH_OPS and parent_op in _LOW_OPS + _HIGH_OPS:
            same = (op in _LOW_OPS) == (parent_op in _LOW_OPS)
            # Same priority: (a - b) - c needs none, a - (b - c) does.
            return not (same and parent[2] == "left")
        return True
    if node[0] == "test":
        return parent[0] != "bool"
    if node[0] == "array-op":
        return True
    # Boolean operators: NOT and AND sit inside AND/OR bare, OR only inside OR.
    if parent[0] != "bool" or parent[1] == "not":
        return True
    return not (node[1] in ("not", "and") or (node[1] == "or" and parent[1] == "or"))


def _as_list(v: object) -> list[exp.Expression]:
    if v is None:
        return []
    if isinstance(v, list):
        return v
    return [v] if isinstance(v, exp.Expression) else []


def _flatten(e: exp.Expression, kind: type[exp.Expression]) -> Iterator[exp.Expression]:
    """a AND b AND c as one list (Postgres keeps boolean chains flat)."""
    for side in (e.this, e.expression):
        side = _strip_parens(side)
        if type(side) is kind:
            yield from _flatten(side, kind)
        else:
            yield side


def _strip_parens(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def _is_string(e: exp.Expression) -> bool:
    return isinstance(e, exp.Literal) and e.is_string


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _number_label(text: str) -> str:
    if any(ch in text for ch in ".eE"):
        return "numeric"
    return "integer" if int(text) < 2**31 else "bigint" if int(text) < 2**63 else "numeric"


def _columns(table: TableDef | None) -> dict[str, SqlType]:
    return {c.name: c.type for c in table.columns} if table is not None else {}


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(text, read="postgres")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None


def redeparse(text: str, table: TableDef | None, pretty: bool) -> str:
    """Deparsed expression text re-printed (pretty: without redundant parentheses)."""
    tree = _parse(text)
    if tree is None:
        return text
    try:
        return _Deparser(_columns(table), pretty).top(tree)
    except (KeyError, ValueError, AttributeError):
        return text


def index_key_types(catalog: Catalog, ix: IndexInfo) -> list[SqlType]:
    """The types of an index's key columns: a column's, an expression's result type."""
    if not any(e is not None for e in ix.expressions):
        return [ix.table.column_by_id(c).type for c in ix.column_ids]
    from percolator.server.sql import index_expressions
    from percolator.server.sql.binder import Binder
    from percolator.server.sql.expr_binder import Params

    binder = Binder(catalog, Params())
    return [
        ix.table.column_by_id(c).type
        if i >= len(ix.expressions) or ix.expressions[i] is None
        else index_expressions.bind(binder, ix.table, ix.expressions[i] or "").type
        for i, c in enumerate(ix.column_ids)
    ]


def index_expression_text(table: TableDef, sql: str, pretty: bool) -> str:
    """An index's key expression as pg_get_indexdef prints it: deparsed, parenthesized
    unless it is a function call: ``lower(email)``, ``((a + b))`` (``(a + b)`` pretty)."""
    from percolator.server.sql.index_expressions import looks_like_function

    text = redeparse(sql, table, pretty)
    return text if looks_like_function(sql) else f"({text})"


# -- pg_get_viewdef(view, true): Postgres 15's layout --------------------------------------
# ruleutils.c's pretty form: " SELECT a,\n    b\n   FROM t\n  WHERE ..." (each clause keyword
# at its own indent, one target per line), columns qualified as the stored query has them
# (Postgres 15 qualifies them: its views' range tables hold OLD and NEW as well).


class _ViewDeparser(_Deparser):
    """The deparser over a view's relations: qualified columns, typed through their tables."""

    def __init__(self, relations: dict[str, dict[str, SqlType]]) -> None:
        merged: dict[str, SqlType] = {}
        for columns in relations.values():
            for name, t in columns.items():
                merged.setdefault(name, t)
        super().__init__(merged, pretty=True)
        self.relations = relations

    def column_text(self, col: exp.Column) -> str:
        if col.table:
            return quote_ident(col.table) + "." + quote_ident(col.name)
        return quote_ident(col.name)

    def column_type(self, col: exp.Column) -> SqlType | None:
        if col.table:
            return self.relations.get(col.table, {}).get(col.name)
        return self.columns.get(col.name)


_VIEW_UNSUPPORTED = ("with", "windows", "qualify", "locks", "into", "sample", "laterals")
_JOIN_WORDS = {"LEFT": "LEFT JOIN", "RIGHT": "RIGHT JOIN", "FULL": "FULL JOIN"}


def view_definition(view: ViewDef, catalog: Catalog) -> str | None:
    """A view's query as Postgres 15's ``pg_get_viewdef(view, true)`` lays it out (psql's
    ``\\d+`` and ``\\sv``); None for a query this does not lay out (set operations, CTEs,
    subqueries in FROM), which the caller prints another way."""
    tree = _parse(view.query)
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in _VIEW_UNSUPPORTED):
        return None
    try:
        return _layout_view(view, catalog, tree)
    except (KeyError, ValueError, AttributeError, IndexError):
        return None


def _layout_view(view: ViewDef, catalog: Catalog, tree: exp.Select) -> str | None:
    relations: dict[str, dict[str, SqlType]] = {}

    def relation(node: exp.Expression) -> str | None:
        if not isinstance(node, exp.Table) or not node.name:
            return None
        key = schemas.key(node.db, node.name) if node.db else node.name
        table, target = catalog.tables.get(key), catalog.views.get(key)
        if table is not None:
            relations_columns = {c.name: c.type for c in table.columns}
        elif target is not None:
            relations_columns = {c.name: c.type for c in target.columns}
        else:
            return None
        schema, bare = schemas.split(key)
        shown = quote_ident(bare)
        if not schemas.visible(catalog, key):
            shown = quote_ident(schema) + "." + shown
        alias = node.alias
        relations[alias or bare] = relations_columns
        return shown + (" " + quote_ident(alias) if alias and alias != bare else "")

    source = tree.args.get("from_") or tree.args.get("from")  # "from_" since sqlglot 28
    first = relation(source.this) if source is not None else None
    if source is not None and first is None:
        return None
    from_parts = [first] if first else []
    for join in tree.args.get("joins") or []:
        rel = relation(join.this)
        if rel is None or join.args.get("using"):
            return None
        side, kind, on = join.side.upper(), join.kind.upper(), join.args.get("on")
        if on is None and not side and not kind:
            from_parts.append(",\n    " + rel)  # FROM a, b
            continue
        word = _JOIN_WORDS.get(side) or ("CROSS JOIN" if kind == "CROSS" else "JOIN")
        from_parts.append(f"\n     {word} {rel}")
        if on is not None:
            from_parts[-1] += " ON " + _ViewDeparser(relations).top(on)
    dp = _ViewDeparser(relations)

    names = [c.name for c in view.columns]
    targets: list[exp.Expression] = []
    lines = []
    for i, item in enumerate(tree.expressions):
        inner = item.this if isinstance(item, exp.Alias) else item
        targets.append(inner)
        name = names[i] if i < len(names) else item.alias_or_name
        text = dp.top(inner)
        if not (isinstance(_strip_parens(inner), exp.Column) and inner.name == name):
            text += " AS " + quote_ident(name)
        lines.append(text)
    distinct = tree.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        return None
    out = " SELECT " + ("DISTINCT " if distinct is not None else "") + ",\n    ".join(lines)
    if from_parts:
        out += "\n   FROM " + "".join(from_parts)

    def sort_key(e: exp.Expression) -> str:
        # An output name or position stands for its expression; anything but a column is
        # printed in parentheses (ruleutils.c's get_rule_sortgroupclause, pretty).
        e = _strip_parens(e)
        if isinstance(e, exp.Literal) and not e.is_string and e.name.isdigit():
            e = _strip_parens(targets[int(e.name) - 1])
        elif isinstance(e, exp.Column) and not e.table and e.name in names:
            e = _strip_parens(targets[names.index(e.name)])
        text = dp.top(e)
        return text if isinstance(e, exp.Column) else f"({text})"

    where = tree.args.get("where")
    if where is not None:
        out += "\n  WHERE " + dp.top(where.this)
    group = tree.args.get("group")
    if group is not None:
        if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup")):
            return None
        out += "\n  GROUP BY " + ", ".join(sort_key(e) for e in group.expressions)
    having = tree.args.get("having")
    if having is not None:
        out += "\n HAVING " + dp.top(having.this)
    order = tree.args.get("order")
    if order is not None:
        keys = []
        for o in order.expressions:
            text = sort_key(o.this)
            desc, nulls_first = bool(o.args.get("desc")), o.args.get("nulls_first")
            if desc:
                text += " DESC"
            if nulls_first is not None and bool(nulls_first) != desc:
                text += " NULLS FIRST" if nulls_first else " NULLS LAST"
            keys.append(text)
        out += "\n  ORDER BY " + ", ".join(keys)
    offset, limit = tree.args.get("offset"), tree.args.get("limit")
    if offset is not None:
        out += "\n OFFSET " + dp.top(offset.expression)
    if limit is not None:
        out += "\n LIMIT " + dp.top(limit.expression)
    return out + ";"


def check_text(table: TableDef, expression: str) -> str:
    """A CHECK expression as pg_constraint.conbin holds it (non-pretty: ``(a > 0)``)."""
    return redeparse(expression, table, pretty=False)


def default_text(column: ColumnDef) -> str | None:
    """A column default as pg_attrdef.adbin holds it (``'x'::text``, ``nextval(...)``); None
    for no default (``DEFAULT NULL`` stores none)."""
    if column.default is None:
        return None
    tree = _parse(column.default)
    if tree is None:
        return column.default
    if isinstance(_strip_parens(tree), exp.Null):
        return None
    try:
        return _Deparser({}, pretty=False).top(tree, column.type)
    except (KeyError, ValueError, AttributeError):
        return column.default


def generation_text(table: TableDef, column: ColumnDef) -> str | None:
    """A generated column's expression as pg_attrdef.adbin holds it (``(a * 2)``), None for
    another column."""
    if column.generated is None:
        return None
    return redeparse(column.generated, table, pretty=False)


def _referenced_attnums(table: TableDef, expression: str) -> tuple[int, ...]:
    tree = _parse(expression)
    if tree is None:
        return ()
    names = {c.name for c in tree.find_all(exp.Column)}
    return tuple(i + 1 for i, c in enumerate(table.columns) if c.name in names)


# -- column lists ------------------------------------------------------------------------------

# Real Postgres type (format_type) -> the type we declare.
_SPEC_TYPES: dict[str, SqlType] = {
    "oid": T.OID, "name": T.NAME, '"char"': T.CHAR, "smallint": T.INT2, "integer": T.INT4,
    "bigint": T.INT8, "real": T.FLOAT4, "boolean": T.BOOL, "text": T.TEXT,
    "text[]": T.TEXT_ARRAY, "oid[]": T.OID_ARRAY, "smallint[]": T.INT2_ARRAY,
    '"char"[]': T.CHAR.array_of(), "int2vector": T.INT2VECTOR, "oidvector": T.OIDVECTOR,
    "regproc": T.REGPROC, "regtype": T.REGTYPE, "bytea": T.BYTEA,
    "timestamp with time zone": T.TIMESTAMPTZ, "timestamp(2) with time zone": T.TIMESTAMPTZ,
    "character varying": T.VARCHAR, "character varying(3)": T.varchar(3),
    # Types Percolator does not have:
    "aclitem[]": T.TEXT_ARRAY, "pg_node_tree": T.TEXT, "xid": T.OID, "anyarray": T.TEXT,
    "inet": T.TEXT, "pg_lsn": T.TEXT,
}  # fmt: skip

SPECS: dict[tuple[str, str], list[tuple[str, str]]] = {}
"""(schema, table) -> [(column, its real Postgres type)], for the drift test."""


def _table(
    schema: str, name: str, oid: int, spec: str
) -> Callable[[Callable[[Any], Iterable[tuple[object, ...]]]], SystemTable]:
    """Decorator: register a system table whose rows the decorated function yields.

    ``spec`` lists ``column type`` pairs separated by ``;``, types spelled as format_type()."""
    cols = [part.split(None, 1) for part in " ".join(spec.split()).split(";") if part.strip()]
    SPECS[(schema, name)] = [(c, ty) for c, ty in cols]

    def add(rows: Callable[[Any], Iterable[tuple[object, ...]]]) -> SystemTable:
        columns = tuple((c, _SPEC_TYPES[ty]) for c, ty in cols)
        return system_tables.register(SystemTable(schema, name, columns, rows, oid))

    return add


def _empty(schema: str, name: str, oid: int, spec: str) -> SystemTable:
    return _table(schema, name, oid, spec)(lambda ctx: ())


def _pg(name: str, oid: int, spec: str) -> Callable[..., SystemTable]:
    return _table("pg_catalog", name, oid, spec)


def _user_tables(catalog: Catalog) -> list[TableDef]:
    return sorted(catalog.tables.values(), key=lambda t: t.id)


def _roles(ctx: Any) -> list[tuple[int, str, bool, bool, str | None]]:
    """(oid, name, superuser, can login, password verifier) of every role, the bootstrap
    superuser (OID 10) included."""
    out = [
        (r.oid, r.name, r.superuser, r.login, r.scram_verifier or r.md5_hash)
        for r in sorted(ctx.catalog.roles.values(), key=lambda r: r.oid)
    ]
    if not any(oid == BOOTSTRAP_ROLE_OID or name == ctx.bootstrap_user for oid, name, *_ in out):
        out.insert(0, (BOOTSTRAP_ROLE_OID, ctx.bootstrap_user, True, True, None))
    return out


def _role_oid(ctx: Any, name: str) -> int:
    for oid, rname, *_ in _roles(ctx):
        if rname == name:
            return oid
    return BOOTSTRAP_ROLE_OID


# -- pg_namespace, pg_class, pg_attribute, pg_attrdef -----------------------------------------

_NAMESPACES = (
    (PG_CATALOG_NAMESPACE_OID, "pg_catalog", BOOTSTRAP_ROLE_OID),
    (PUBLIC_NAMESPACE_OID, "public", DATABASE_OWNER_ROLE_OID),
    (INFORMATION_SCHEMA_NAMESPACE_OID, "information_schema", BOOTSTRAP_ROLE_OID),
    (TOAST_NAMESPACE_OID, "pg_toast", BOOTSTRAP_ROLE_OID),
    (PERCOLATOR_NAMESPACE_OID, "percolator", BOOTSTRAP_ROLE_OID),
)


@_pg("pg_namespace", PG_NAMESPACE_OID, "oid oid; nspname name; nspowner oid; nspacl aclitem[]")
def _pg_namespace(ctx: Any) -> Iterable[tuple[object, ...]]:
    temp = {
        temp_tables.namespace_oid(t.id)
        for t in ctx.catalog.tables.values()
        if temp_tables.is_temp(t)
    }
    made = [
        (s.oid, s.name, _role_oid(ctx, s.owner), None)
        for s in sorted(ctx.catalog.schemas.values(), key=lambda s: s.oid)
    ]
    # public's ACL as Postgres 15 grants it (\dn+ prints it): all to its owner, USAGE to all.
    public_acl = ["pg_database_owner=UC/pg_database_owner", "=U/pg_database_owner"]
    return (
        [
            (oid, name, owner, public_acl if oid == PUBLIC_NAMESPACE_OID else None)
            for oid, name, owner in _NAMESPACES
        ]
        + made
        + [(oid, temp_tables.namespace_name(oid), BOOTSTRAP_ROLE_OID, None) for oid in sorted(temp)]
    )


@_pg(
    "pg_class",
    PG_CLASS_OID,
    """oid oid; relname name; relnamespace oid; reltype oid; reloftype oid; relowner oid;
    relam oid; relfilenode oid; reltablespace oid; relpages integer; reltuples real;
    relallvisible integer; reltoastrelid oid; relhasindex boolean; relisshared boolean;
    relpersistence "char"; relkind "char"; relnatts smallint; relchecks smallint;
    relhasrules boolean; relhastriggers boolean; relhassubclass boolean;
    relrowsecurity boolean; relforcerowsecurity boolean; relispopulated boolean;
    relreplident "char"; relispartition boolean; relrewrite oid; relfrozenxid xid;
    relminmxid xid; relacl aclitem[]; reloptions text[]; relpartbound pg_node_tree""",
)
def _pg_class(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _memo("pg_class", ctx.catalog, lambda: _class_rows(ctx.catalog))


def _class_rows(catalog: Catalog) -> list[tuple[object, ...]]:
    # Postgres enforces foreign keys with triggers on both tables, so relhastriggers is set
    # on each (psql only looks for foreign keys and references when it is).
    triggered: set[int] = set()
    for t in catalog.tables.values():
        for fk in t.foreign_keys:
            triggered |= {t.id, fk.ref_table_id}
        if t.triggers:
            triggered.add(t.id)
    return [
        _class_row(r, r.table is not None and r.table.id in triggered) for r in relations(catalog)
    ]


# fmt: off
def _class_row(r: Relation, has_triggers: bool = False) -> tuple[object, ...]:
    hasindex = False
    checks = 0
    am = 0
    replident = "n"
    rules = False
    if r.view is not None:
        # A view's query is its _RETURN rule in Postgres: relhasrules.
        natts, tuples, rules = len(r.view.columns), -1.0, True
    elif r.table is not None:
        natts = len(r.table.columns)
        hasindex = bool(r.table.primary_key or r.table.indexes)
        checks = len(r.table.checks)
        am, replident, tuples = HEAP_AM_OID, "d", -1.0
    elif r.index is not None:
        natts, am, tuples = len(r.index.column_ids), BTREE_AM_OID, 0.0
    elif r.sequence is not None:
        natts, tuples = 3, 1.0
    else:
        assert r.system is not None
        natts, tuples = len(r.system.columns), -1.0
        if r.kind == "r":
            am, replident = HEAP_AM_OID, "n"
    shared = r.system is not None and r.name in _SHARED
    return (
        r.oid, r.name, r.namespace, 0, 0, BOOTSTRAP_ROLE_OID, am, r.oid if r.kind != "v" else 0,
        GLOBAL_TABLESPACE_OID if shared else 0, 0, tuples, 0, 0, hasindex, shared,
        "t" if temp_tables.namespace_name(r.namespace) else "p", r.kind,
        natts, checks, rules, has_triggers, False, False, False, True, replident, False, 0, 0, 0,
        None, None, None,
    )
# fmt: on


_ATTRIBUTE_SPEC = """attrelid oid; attname name; atttypid oid; attlen smallint;
    attnum smallint; attcacheoff integer; atttypmod integer; attndims smallint;
    attbyval boolean; attalign "char"; attstorage "char"; attcompression "char";
    attnotnull boolean; atthasdef boolean; atthasmissing boolean; attidentity "char";
    attgenerated "char"; attisdropped boolean; attislocal boolean; attinhcount smallint;
    attstattarget smallint; attcollation oid; attacl aclitem[]; attoptions text[];
    attfdwoptions text[]; attmissingval anyarray"""


@_pg("pg_attribute", 1249, _ATTRIBUTE_SPEC)
def _pg_attribute(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _memo("pg_attribute", ctx.catalog, lambda: list(_attribute_rows(ctx.catalog)))


def _attribute_rows(catalog: Catalog) -> Iterator[tuple[object, ...]]:
    for r in relations(catalog):
        if r.table is not None:
            for i, c in enumerate(r.table.columns):
                yield _attribute_row(
                    r.oid,
                    c.name,
                    c.type,
                    i + 1,
                    c.not_null,
                    _column_expression(r.table, c) is not None,
                    c.identity or "",
                    "s" if c.generated is not None else "",
                )
        elif r.index is not None:
            types = index_key_types(catalog, r.index)
            for i, name in enumerate(r.index.attribute_names()):
                yield _attribute_row(r.oid, name, types[i], i + 1, False, False)
        elif r.view is not None:
            for i, vc in enumerate(r.view.columns):
                yield _attribute_row(r.oid, vc.name, vc.type, i + 1, False, False)
        elif r.system is not None:
            for i, (name, t) in enumerate(r.system.columns):
                yield _attribute_row(r.oid, name, t, i + 1, False, False)


# fmt: off
def _attribute_row(
    relid: int, name: str, t: SqlType, attnum: int, not_null: bool, has_default: bool,
    identity: str = "", generated: str = "",
) -> tuple[object, ...]:
    pt = pg_type_of(t)
    return (
        relid, name, t.oid, pt.typlen, attnum, -1, t.typmod, 1 if t.array else 0, pt.typbyval,
        pt.typalign, pt.typstorage, "", not_null, has_default, False, identity, generated, False,
        True, 0,
        -1, pt.typcollation, None, None, None, None,
    )
# fmt: on


@_pg("pg_attrdef", 2604, "oid oid; adrelid oid; adnum smallint; adbin pg_node_tree")
def _pg_attrdef(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _memo("pg_attrdef", ctx.catalog, lambda: list(_attrdef_rows(ctx.catalog)))


def _attrdef_rows(catalog: Catalog) -> Iterator[tuple[object, ...]]:
    for t in _user_tables(catalog):
        for i, c in enumerate(t.columns):
            text = _column_expression(t, c)
            if text is not None:
                yield (attrdef_oid(t, i + 1), t.oid, i + 1, text)


def _column_expression(table: TableDef, column: ColumnDef) -> str | None:
    """pg_attrdef.adbin of a column: its generation expression (Postgres keeps it there,
    pg_attribute.attgenerated telling it apart), else its default."""
    if column.generated is not None:
        return generation_text(table, column)
    return default_text(column)


# -- pg_index, pg_constraint --------------------------------------------------------------------

_OPCLASSES: dict[int, int] = {
    16: 10003, 17: 10006, 18: 10007, 19: 10028, 20: 3124, 21: 1979, 23: 1978, 25: 3126,
    26: 1981, 700: 10012, 701: 3123, 1042: 10004, 1043: 3126, 1082: 3122, 1083: 10038,
    1114: 3128, 1184: 3127, 1186: 10022, 1700: 3125, 2950: 10065, 3802: 10088,
}  # fmt: skip
"""Type OID -> its default btree operator class (varchar uses text_ops)."""


def _opclass_oid(ix: IndexInfo, i: int, t: SqlType) -> int:
    """pg_index.indclass of key column ``i``: the named operator class, else the default."""
    from percolator.server.sql.index_expressions import OPERATOR_CLASSES

    named = ix.opclasses[i] if i < len(ix.opclasses) else None
    return OPERATOR_CLASSES[named][0] if named in OPERATOR_CLASSES else _OPCLASSES.get(t.oid, 0)


@_pg(
    "pg_index",
    2610,
    """indexrelid oid; indrelid oid; indnatts smallint; indnkeyatts smallint;
    indisunique boolean; indnullsnotdistinct boolean; indisprimary boolean;
    indisexclusion boolean; indimmediate boolean; indisclustered boolean; indisvalid boolean;
    indcheckxmin boolean; indisready boolean; indislive boolean; indisreplident boolean;
    indkey int2vector; indcollation oidvector; indclass oidvector; indoption int2vector;
    indexprs pg_node_tree; indpred pg_node_tree""",
)
def _pg_index(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _memo("pg_index", ctx.catalog, lambda: list(_index_rows(ctx.catalog)))


# fmt: off
def _index_rows(catalog: Catalog) -> Iterator[tuple[object, ...]]:
    for t in _user_tables(catalog):
        for ix in indexes_of(t):
            types = index_key_types(catalog, ix)
            n = len(types)
            # DESC implies NULLS FIRST: indoption bits INDOPTION_DESC | INDOPTION_NULLS_FIRST.
            options = [3 if i < len(ix.descending) and ix.descending[i] else 0 for i in range(n)]
            yield (
                ix.oid, t.oid, n, n, ix.unique, False, ix.primary, False, True, False, True,
                False, True, True, False, ix.attnums, [type_collation(ty) for ty in types],
                [_opclass_oid(ix, i, ty) for i, ty in enumerate(types)], options,
                ix.expressions_tree(), ix.predicate_text(False),
            )
# fmt: on


# fmt: off
@_pg(
    "pg_constraint",
    PG_CONSTRAINT_OID,
    """oid oid; conname name; connamespace oid; contype "char"; condeferrable boolean;
    condeferred boolean; convalidated boolean; conrelid oid; contypid oid; conindid oid;
    conparentid oid; confrelid oid; confupdtype "char"; confdeltype "char";
    confmatchtype "char"; conislocal boolean; coninhcount smallint; connoinherit boolean;
    conkey smallint[]; confkey smallint[]; conpfeqop oid[]; conppeqop oid[]; conffeqop oid[];
    confdelsetcols smallint[]; conexclop oid[]; conbin pg_node_tree""",
)
def _pg_constraint(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _memo("pg_constraint", ctx.catalog, lambda: _constraint_rows(ctx.catalog))


def _constraint_rows(catalog: Catalog) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for c in all_constraints(catalog):
        # Foreign keys: MATCH SIMPLE ('s'), the equality operators left NULL (no client reads
        # conpfeqop/conppeqop/conffeqop; Postgres has the btree '=' of each column pair there).
        f = c.foreign
        confrelid, confkey = (f.ref_table.oid, list(f.ref_attnums)) if f else (0, None)
        updtype, deltype, matchtype = (
            (f.on_update.value, f.on_delete.value, "s") if f else (" ", " ", " ")
        )
        out.append(
            (
                c.oid, schemas.bare(c.name), namespace_of(catalog, c.table.name), c.contype,
                bool(f and f.deferrable),
                bool(f and f.initially_deferred), True, c.table.oid,
                0, c.conindid, 0, confrelid, updtype, deltype, matchtype, True, 0,
                c.contype != "c", list(c.attnums), confkey, None, None, None, None, None,
                c.expression,
            )
        )
    return out
# fmt: on


# -- pg_type, pg_am, pg_collation, pg_tablespace, pg_opclass, pg_database -------------------


@_pg(
    "pg_type",
    1247,
    """oid oid; typname name; typnamespace oid; typowner oid; typlen smallint;
    typbyval boolean; typtype "char"; typcategory "char"; typispreferred boolean;
    typisdefined boolean; typdelim "char"; typrelid oid; typsubscript regproc; typelem oid;
    typarray oid; typinput regproc; typoutput regproc; typreceive regproc; typsend regproc;
    typmodin regproc; typmodout regproc; typanalyze regproc; typalign "char";
    typstorage "char"; typnotnull boolean; typbasetype oid; typtypmod integer;
    typndims integer; typcollation oid; typdefaultbin pg_node_tree; typdefault text;
    typacl aclitem[]""",
)
def _pg_type(ctx: Any) -> Iterable[tuple[object, ...]]:
    catalog = getattr(ctx, "catalog", None)
    if catalog is None or not catalog.enums:
        return _TYPE_ROWS
    enum_rows = [
        _type_row(p, namespace_of(catalog, e.type_name))
        for e in sorted(catalog.enums.values(), key=lambda e: e.oid)
        for p in enum_pg_types(e)
    ]
    return _TYPE_ROWS + enum_rows


# fmt: off
def _type_row(p: PgType, namespace: int) -> tuple[object, ...]:
    return (
        p.oid, p.typname, namespace, BOOTSTRAP_ROLE_OID, p.typlen, p.typbyval,
        p.typtype, p.typcategory, p.typispreferred, True, ",", 0, _regproc(p.typsubscript),
        p.typelem, p.typarray, _regproc(p.typinput), _regproc(p.typoutput),
        _regproc(p.typreceive), _regproc(p.typsend), _regproc(p.typmodin),
        _regproc(p.typmodout), _regproc(p.typanalyze), p.typalign, p.typstorage, False, 0, -1,
        0, p.typcollation, None, None, None,
    )
# fmt: on


_TYPE_ROWS = [_type_row(p, PG_CATALOG_NAMESPACE_OID) for p in PG_TYPES.values()]


@_pg("pg_enum", 3501, "oid oid; enumtypid oid; enumsortorder real; enumlabel name")
def _pg_enum(ctx: Any) -> Iterable[tuple[object, ...]]:
    # A label's own OID is not kept (nothing refers to it): derived from the type's OID and
    # the label's sort order, unique within the database's enum labels.
    return [
        (e.oid * 1000 + i, e.oid, order, label)
        for e in sorted(ctx.catalog.enums.values(), key=lambda e: e.oid)
        for i, (label, order) in enumerate(zip(e.labels, e.sort_orders, strict=True))
    ]


@_pg("pg_am", 2601, 'oid oid; amname name; amhandler regproc; amtype "char"')
def _pg_am(ctx: Any) -> Iterable[tuple[object, ...]]:
    return [
        (HEAP_AM_OID, "heap", _regproc("heap_tableam_handler"), "t"),
        (BTREE_AM_OID, "btree", _regproc("bthandler"), "i"),
    ]


# fmt: off
@_pg(
    "pg_collation",
    3456,
    """oid oid; collname name; collnamespace oid; collowner oid; collprovider "char";
    collisdeterministic boolean; collencoding integer; collcollate text; collctype text;
    colliculocale text; collicurules text; collversion text""",
)
def _pg_collation(ctx: Any) -> Iterable[tuple[object, ...]]:
    ns, owner, posix = PG_CATALOG_NAMESPACE_OID, BOOTSTRAP_ROLE_OID, "POSIX"
    return [
        (DEFAULT_COLLATION_OID, "default", ns, owner, "d", True, -1, None, None, None, None, None),
        (C_COLLATION_OID, "C", ns, owner, "c", True, -1, "C", "C", None, None, None),
        (POSIX_COLLATION_OID, "POSIX", ns, owner, "c", True, -1, posix, posix, None, None, None),
    ]
# fmt: on


@_pg(
    "pg_tablespace",
    1213,
    "oid oid; spcname name; spcowner oid; spcacl aclitem[]; spcoptions text[]",
)
def _pg_tablespace(ctx: Any) -> Iterable[tuple[object, ...]]:
    return [
        (DEFAULT_TABLESPACE_OID, "pg_default", BOOTSTRAP_ROLE_OID, None, None),
        (GLOBAL_TABLESPACE_OID, "pg_global", BOOTSTRAP_ROLE_OID, None, None),
    ]


@_pg(
    "pg_opclass",
    2616,
    """oid oid; opcmethod oid; opcname name; opcnamespace oid; opcowner oid; opcfamily oid;
    opcintype oid; opcdefault boolean; opckeytype oid""",
)
def _pg_opclass(ctx: Any) -> Iterable[tuple[object, ...]]:
    return _OPCLASS_ROWS


# (oid, name, family, input type, key type) of the default btree classes of our types.
_OPCLASS_ROWS = [
    (oid, BTREE_AM_OID, name, PG_CATALOG_NAMESPACE_OID, BOOTSTRAP_ROLE_OID, fam, typ, True, key)
    for oid, name, fam, typ, key in (
        (10003, "bool_ops", 424, 16, 0), (10006, "bytea_ops", 428, 17, 0),
        (10007, "char_ops", 429, 18, 0), (10028, "name_ops", 1994, 19, 2275),
        (3124, "int8_ops", 1976, 20, 0), (1979, "int2_ops", 1976, 21, 0),
        (1978, "int4_ops", 1976, 23, 0), (3126, "text_ops", 1994, 25, 0),
        (1981, "oid_ops", 1989, 26, 0), (10012, "float4_ops", 1970, 700, 0),
        (3123, "float8_ops", 1970, 701, 0), (10004, "bpchar_ops", 426, 1042, 0),
        (3122, "date_ops", 434, 1082, 0), (10038, "time_ops", 1996, 1083, 0),
        (3128, "timestamp_ops", 434, 1114, 0), (3127, "timestamptz_ops", 434, 1184, 0),
        (10022, "interval_ops", 1982, 1186, 0), (3125, "numeric_ops", 1988, 1700, 0),
        (10065, "uuid_ops", 2968, 2950, 0), (10088, "jsonb_ops", 4033, 3802, 0),
    )
]  # fmt: skip


# fmt: off
@_pg(
    "pg_database",
    1262,
    """oid oid; datname name; datdba oid; encoding integer; datlocprovider "char";
    datistemplate boolean; datallowconn boolean; datconnlimit integer; datfrozenxid xid;
    datminmxid xid; dattablespace oid; datcollate text; datctype text; daticulocale text;
    daticurules text; datcollversion text; datacl aclitem[]""",
)
def _pg_database(ctx: Any) -> Iterable[tuple[object, ...]]:
    return [
        (
            DATABASE_OID, ctx.database, BOOTSTRAP_ROLE_OID, 6, "c", False, True, -1, 0, 1,
            DEFAULT_TABLESPACE_OID, "C", "C", None, None, None, None,
        )
    ]
# fmt: on


# -- roles ------------------------------------------------------------------------------------

_ROLE_SPEC = """rolname name; rolsuper boolean; rolinherit boolean; rolcreaterole boolean;
    rolcreatedb boolean; rolcanlogin boolean; rolreplication boolean; rolconnlimit integer;
    rolpassword text; rolvaliduntil timestamp with time zone; rolbypassrls boolean;
    rolconfig text[]; oid oid"""


@_pg("pg_roles", 12000, _ROLE_SPEC)
def _pg_roles(ctx: Any) -> Iterable[tuple[object, ...]]:
    # The verifier is never shown here (pg_roles is readable by everyone).
    return [
        (name, sup, True, sup, sup, login, sup, -1, "********", None, sup, None, oid)
        for oid, name, sup, login, _ in _roles(ctx)
    ]


@_pg(
    "pg_authid",
    1260,
    """oid oid; rolname name; rolsuper boolean; rolinherit boolean; rolcreaterole boolean;
    rolcreatedb boolean; rolcanlogin boolean; rolreplication boolean; rolbypassrls boolean;
    rolconnlimit integer; rolpassword text; rolvaliduntil timestamp with time zone""",
)
def _pg_authid(ctx: Any) -> Iterable[tuple[object, ...]]:
    return [
        (oid, name, sup, True, sup, sup, login, sup, sup, -1, verifier, None)
        for oid, name, sup, login, verifier in _roles(ctx)
    ]


@_pg(
    "pg_user",
    12014,
    """usename name; usesysid oid; usecreatedb boolean; usesuper boolean; userepl boolean;
    usebypassrls boolean; passwd text; valuntil timestamp with time zone; useconfig text[]""",
)
def _pg_user(ctx: Any) -> Iterable[tuple[object, ...]]:
    return [
        (name, oid, sup, sup, sup, sup, "********", None, None)
        for oid, name, sup, login, _ in _roles(ctx)
        if login
    ]


# -- pg_settings --------------------------------------------------------------------------------

_STATEMENT = "Client Connection Defaults / Statement Behavior"
_LOCALE = "Client Connection Defaults / Locale and Formatting"
_PRESET = "Preset Options"

# name -> (unit, category, vartype, context); the rest are inferred from the value.
_SETTING_INFO: dict[str, tuple[str | None, str, str, str]] = {
    "statement_timeout": ("ms", _STATEMENT, "integer", "user"),
    "lock_timeout": ("ms", _STATEMENT, "integer", "user"),
    "idle_in_transaction_session_timeout": ("ms", _STATEMENT, "integer", "user"),
    "work_mem": ("kB", "Resource Usage / Memory", "integer", "user"),
    "max_connections": (
        None,
        "Connections and Authentication / Connection Settings",
        "integer",
        "postmaster",
    ),
    "server_version": (None, _PRESET, "string", "internal"),
    "server_version_num": (None, _PRESET, "integer", "internal"),
    "server_encoding": (None, _PRESET, "string", "internal"),
    "integer_datetimes": (None, _PRESET, "bool", "internal"),
    "max_identifier_length": (None, _PRESET, "integer", "internal"),
    "max_index_keys": (None, _PRESET, "integer", "internal"),
    "in_hot_standby": (None, _PRESET, "bool", "internal"),
    "is_superuser": (None, _PRESET, "bool", "internal"),
    "session_authorization": (None, _PRESET, "string", "internal"),
    "client_encoding": (None, _LOCALE, "string", "user"),
    "datestyle": (None, _LOCALE, "string", "user"),
    "intervalstyle": (None, _LOCALE, "enum", "user"),
    "timezone": (None, _LOCALE, "string", "user"),
    "extra_float_digits": (None, _LOCALE, "integer", "user"),
    "search_path": (None, _STATEMENT, "string", "user"),
    "default_transaction_isolation": (None, _STATEMENT, "enum", "user"),
    "transaction_isolation": (None, _STATEMENT, "string", "user"),
    "client_min_messages": (None, _STATEMENT, "enum", "user"),
    "bytea_output": (None, _STATEMENT, "enum", "user"),
    "synchronous_commit": (None, "Write-Ahead Log / Settings", "enum", "user"),
    "password_encryption": (
        None,
        "Connections and Authentication / Authentication",
        "enum",
        "user",
    ),
}


# fmt: off
@_pg(
    "pg_settings",
    12104,
    """name text; setting text; unit text; category text; short_desc text; extra_desc text;
    context text; vartype text; source text; min_val text; max_val text; enumvals text[];
    boot_val text; reset_val text; sourcefile text; sourceline integer;
    pending_restart boolean""",
)
def _pg_settings(ctx: Any) -> Iterable[tuple[object, ...]]:
    from percolator.server.settings import DEFAULTS

    rows = []
    for name in sorted(ctx.settings):
        value = ctx.settings[name]
        unit, category, vartype, context = _SETTING_INFO.get(
            name, (None, "Customized Options", _vartype(value), "user")
        )
        boot = DEFAULTS.get(name, value)
        source = "default" if value == boot else "session"
        rows.append(
            (
                name, value, unit, category, "", None, context, vartype, source, None, None,
                None, boot, boot, None, None, False,
            )
        )
    return rows
# fmt: on


def _vartype(value: str) -> str:
    if value in ("on", "off", "true", "false"):
        return "bool"
    if re.fullmatch(r"-?\d+", value):
        return "integer"
    if re.fullmatch(r"-?\d+\.\d*", value):
        return "real"
    return "string"


# -- views: pg_tables, pg_views, pg_indexes, pg_sequences, pg_sequence ----------------------


@_pg("pg_views", 12028, "schemaname name; viewname name; viewowner name; definition text")
def _pg_views(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The user's views (the system catalogs' own views are not listed)."""
    return [
        (schemas.schema_of(v.name), schemas.bare(v.name), ctx.bootstrap_user, views.definition(v))
        for v in sorted(ctx.catalog.views.values(), key=lambda v: v.id)
    ]


@_pg(
    "pg_tables",
    12033,
    """schemaname name; tablename name; tableowner name; tablespace name;
    hasindexes boolean; hasrules boolean; hastriggers boolean; rowsecurity boolean""",
)
def _pg_tables(ctx: Any) -> Iterable[tuple[object, ...]]:
    owner = ctx.bootstrap_user
    rows: list[tuple[object, ...]] = [
        (
            *schemas.split(t.name),
            owner,
            None,
            bool(t.primary_key or t.indexes),
            False,
            False,
            False,
        )
        for t in _user_tables(ctx.catalog)
    ]
    rows.extend(
        ("pg_catalog", st.name, owner, None, False, False, False, False)
        for st in system_tables.all_tables()
        if st.schema == "pg_catalog" and st.name not in _VIEWS
    )
    return rows


@_pg(
    "pg_indexes",
    12043,
    """schemaname name; tablename name; indexname name; tablespace name; indexdef text""",
)
def _pg_indexes(ctx: Any) -> Iterable[tuple[object, ...]]:
    from percolator.server.sql.catalog_functions import pg_get_indexdef

    return [
        (*schemas.split(t.name), schemas.bare(ix.name), None, pg_get_indexdef(ctx, ix.oid))
        for t in _user_tables(ctx.catalog)
        for ix in indexes_of(t)
    ]


def _sequence_type(catalog: Catalog, seq: SequenceDef) -> SqlType:
    """The type of the serial column a sequence feeds (integer, bigint or smallint)."""
    table = catalog.tables.get(seq.table)
    if table is not None:
        for c in table.columns:
            if c.serial_sequence == seq.name:
                return c.type
    return T.INT8


_SEQUENCE_MAX = {TypeId.INT2: 2**15 - 1, TypeId.INT4: 2**31 - 1, TypeId.INT8: 2**63 - 1}


@_pg(
    "pg_sequence",
    2224,
    """seqrelid oid; seqtypid oid; seqstart bigint; seqincrement bigint; seqmax bigint;
    seqmin bigint; seqcache bigint; seqcycle boolean""",
)
def _pg_sequence(ctx: Any) -> Iterable[tuple[object, ...]]:
    rows = []
    for s in ctx.catalog.sequences.values():
        t = _sequence_type(ctx.catalog, s)
        low, high = _sequence_bounds(s, t)
        rows.append((s.oid, t.oid, s.start, s.increment, high, low, 1, False))
    return rows


def _sequence_bounds(s: SequenceDef, t: SqlType) -> tuple[int, int]:
    """A sequence's MINVALUE and MAXVALUE: a serial column's sequence is made with the bigint
    default maximum, which Postgres caps at its type's (integer's for serial)."""
    top = _SEQUENCE_MAX.get(t.id, 2**63 - 1)
    return max(s.minimum, -top - 1), min(s.maximum, top)


@_pg(
    "pg_sequences",
    12048,
    """schemaname name; sequencename name; sequenceowner name; data_type regtype;
    start_value bigint; min_value bigint; max_value bigint; increment_by bigint;
    cycle boolean; cache_size bigint; last_value bigint""",
)
def _pg_sequences(ctx: Any) -> Iterable[tuple[object, ...]]:
    rows = []
    for s in ctx.catalog.sequences.values():
        t = _sequence_type(ctx.catalog, s)
        low, high = _sequence_bounds(s, t)
        regtype = OidName(t.oid, t.format())
        rows.append(
            (*schemas.split(s.name), ctx.bootstrap_user, regtype, s.start, low, high,
             s.increment, False, 1, None)
        )  # fmt: skip
    return rows


@_pg(
    "pg_depend",
    2608,
    """classid oid; objid oid; objsubid integer; refclassid oid; refobjid oid;
    refobjsubid integer; deptype "char"
    """,
)
def _pg_depend(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The dependencies tools look for: a serial column owns its sequence ('a'), an identity
    column's is internal to it ('i': psql's \\d says "Sequence for identity column")."""
    rows = []
    for s in ctx.catalog.sequences.values():
        table = ctx.catalog.tables.get(s.table)
        if table is None:
            continue
        for i, c in enumerate(table.columns):
            if c.serial_sequence == s.name:
                kind = "i" if c.identity else "a"
                rows.append((PG_CLASS_OID, s.oid, 0, PG_CLASS_OID, table.oid, i + 1, kind))
    return rows


# fmt: off
@_pg(
    "pg_stat_activity",
    12222,
    """datid oid; datname name; pid integer; leader_pid integer; usesysid oid;
    usename name; application_name text; client_addr inet; client_hostname text;
    client_port integer; backend_start timestamp with time zone;
    xact_start timestamp with time zone; query_start timestamp with time zone;
    state_change timestamp with time zone; wait_event_type text; wait_event text;
    state text; backend_xid xid; backend_xmin xid; query_id bigint; query text;
    backend_type text""",
)
def _pg_stat_activity(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The sessions of this server process (server/sql/backends.py); without them (a context
    of no server), the current session."""
    backends = getattr(ctx, "backends", None)
    if backends is None:
        start = getattr(ctx, "transaction_time", None)
        stmt = getattr(ctx, "statement_time", start)
        return [
            (
                DATABASE_OID, ctx.database, ctx.backend_pid, None, _role_oid(ctx, ctx.user),
                ctx.user, ctx.settings.get("application_name", ""), None, None, -1, start,
                start, stmt, stmt, None, None, "active", None, None, None, "", "client backend",
            )
        ]
    rows: list[tuple[object, ...]] = []
    superuser = is_superuser(ctx)
    for b in backends.activity():
        if b.user != ctx.user and not superuser:
            # Another role's session: as Postgres shows it (its statements may hold secrets).
            rows.append((
                DATABASE_OID, ctx.database, b.pid, None, _role_oid(ctx, b.user), b.user,
                b.application_name, None, None, None, None, None, None, None, None, None,
                None, None, None, None, "<insufficient privilege>", "client backend",
            ))
            continue
        rows.append((
            DATABASE_OID, ctx.database, b.pid, None, _role_oid(ctx, b.user), b.user,
            b.application_name, None, None, -1, b.backend_start, b.xact_start, b.query_start,
            b.query_start, "Lock" if b.lock_wait else None, b.lock_wait, b.state, None, None,
            None, b.query,
            "client backend",
        ))
    return rows
# fmt: on


@_pg(
    "pg_cursors",
    12069,
    """name text; statement text; is_holdable boolean; is_binary boolean;
    is_scrollable boolean; creation_time timestamp with time zone""",
)
def _pg_cursors(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The session's open SQL cursors (DECLARE)."""
    return [
        (c.name, c.statement, c.hold, c.binary, c.scroll, c.created)
        for c in getattr(ctx, "cursors", ())
    ]


@_pg("pg_description", 2609, "objoid oid; classoid oid; objsubid integer; description text")
def _pg_description(ctx: Any) -> Iterable[tuple[object, ...]]:
    from percolator.server.sql import comments  # it reads this module's OIDs

    return comments.descriptions(ctx.catalog)


SQL_LANGUAGE_OID = 14
TRIGGER_TYPE_OID = 2279
PLPGSQL_LANGUAGE_OID = 12760
_LANGUAGE_OIDS = {"sql": SQL_LANGUAGE_OID, "plpgsql": PLPGSQL_LANGUAGE_OID}


@_pg(
    "pg_proc",
    1255,
    """oid oid; proname name; pronamespace oid; proowner oid; prolang oid; procost real;
    prorows real; provariadic oid; prosupport regproc; prokind "char"; prosecdef boolean;
    proleakproof boolean; proisstrict boolean; proretset boolean; provolatile "char";
    proparallel "char"; pronargs smallint; pronargdefaults smallint; prorettype oid;
    proargtypes oidvector; proallargtypes oid[]; proargmodes "char"[]; proargnames text[];
    proargdefaults pg_node_tree; protrftypes oid[]; prosrc text; probin text;
    prosqlbody pg_node_tree; proconfig text[]; proacl aclitem[]""",
)
def _pg_proc(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The functions made by CREATE FUNCTION (Postgres's built-in ones are not listed)."""
    rows = []
    for fn in sorted(ctx.catalog.functions.values(), key=lambda f: f.id):
        schema, bare = schemas.split(fn.name)
        arg_types = [a.type.oid for a in fn.args]
        table = fn.columns if fn.row_of is None else ()  # RETURNS TABLE's output columns
        names = [a.name for a in fn.args] + [c.name for c in table]
        modes = ["i"] * len(fn.args) + ["t"] * len(table) if table else None
        all_types = arg_types + [c.type.oid for c in table] if table else None
        rows.append((
            fn.oid, bare, schemas.oid(ctx.catalog, schema), BOOTSTRAP_ROLE_OID,
            _LANGUAGE_OIDS[fn.language], 100.0, 1000.0 if fn.returns_set else 0.0, 0,
            _regproc("-"), "p" if fn.procedure else "f", False, False, fn.strict,
            fn.returns_set, fn.volatility, "u", len(fn.args),
            sum(a.default is not None for a in fn.args),
            TRIGGER_TYPE_OID if fn.trigger else fn.returns.oid, arg_types, all_types,
            modes, names if any(names) else None, None, None, fn.body, None, None, None, None,
        ))  # fmt: skip
    return rows


@_pg(
    "pg_trigger",
    2620,
    """oid oid; tgrelid oid; tgparentid oid; tgname name; tgfoid oid; tgtype smallint;
    tgenabled "char"; tgisinternal boolean; tgconstrrelid oid; tgconstrindid oid;
    tgconstraint oid; tgdeferrable boolean; tginitdeferred boolean; tgnargs smallint;
    tgattr int2vector; tgargs bytea; tgqual pg_node_tree; tgoldtable name;
    tgnewtable name""",
)
def _pg_trigger(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The triggers made by CREATE TRIGGER (the foreign keys' internal triggers, which
    Postgres lists too, are not)."""
    rows = []
    for table in _user_tables(ctx.catalog):
        for t in table.triggers:
            fn = ctx.catalog.functions.get(t.function)
            attnums = [table.position(c) + 1 for c in t.update_column_ids]
            args = b"".join(a.encode() + b"\x00" for a in t.args)
            rows.append((
                t.oid, table.oid, 0, t.name, fn.oid if fn is not None else 0, trigger_type(t),
                "O" if t.enabled else "D", False, 0, 0, 0, False, False, len(t.args), attnums,
                args, None, None, None,
            ))  # fmt: skip
    return rows


def trigger_type(t: TriggerDef) -> int:
    """pg_trigger.tgtype: ROW 1, BEFORE 2, INSERT 4, DELETE 8, UPDATE 16."""
    bits = {"insert": 4, "delete": 8, "update": 16}
    return int(t.row_level) | (2 if t.before else 0) | sum(bits[e] for e in t.events)


# -- catalogs of features Percolator does not have: the right columns, no rows -------------

_EMPTY_PG: tuple[tuple[str, int, str], ...] = (
    (
        "pg_inherits",
        2611,
        "inhrelid oid; inhparent oid; inhseqno integer; inhdetachpending boolean",
    ),
    (
        "pg_policy",
        3256,
        """oid oid; polname name; polrelid oid; polcmd "char"; polpermissive boolean;
        polroles oid[]; polqual pg_node_tree; polwithcheck pg_node_tree""",
    ),
    (
        "pg_statistic_ext",
        3381,
        """oid oid; stxrelid oid; stxname name; stxnamespace oid; stxowner oid;
        stxstattarget integer; stxkeys int2vector; stxkind "char"[]; stxexprs pg_node_tree""",
    ),
    (
        "pg_publication",
        6104,
        """oid oid; pubname name; pubowner oid; puballtables boolean; pubinsert boolean;
        pubupdate boolean; pubdelete boolean; pubtruncate boolean; pubviaroot boolean""",
    ),
    (
        "pg_publication_rel",
        6106,
        "oid oid; prpubid oid; prrelid oid; prqual pg_node_tree; prattrs int2vector",
    ),
    ("pg_publication_namespace", 6237, "oid oid; pnpubid oid; pnnspid oid"),
    (
        "pg_rewrite",
        2618,
        """oid oid; rulename name; ev_class oid; ev_type "char"; ev_enabled "char";
        is_instead boolean; ev_qual pg_node_tree; ev_action pg_node_tree""",
    ),
    (
        "pg_partitioned_table",
        3350,
        """partrelid oid; partstrat "char"; partnatts smallint; partdefid oid;
        partattrs int2vector; partclass oidvector; partcollation oidvector;
        partexprs pg_node_tree""",
    ),
    (
        "pg_range",
        3541,
        """rngtypid oid; rngsubtype oid; rngmultitypid oid; rngcollation oid; rngsubopc oid;
        rngcanonical regproc; rngsubdiff regproc""",
    ),
    (
        "pg_extension",
        3079,
        """oid oid; extname name; extowner oid; extnamespace oid; extrelocatable boolean;
        extversion text; extconfig oid[]; extcondition text[]""",
    ),
    (
        "pg_event_trigger",
        3466,
        """oid oid; evtname name; evtevent name; evtowner oid; evtfoid oid;
        evtenabled "char"; evttags text[]""",
    ),
    ("pg_foreign_table", 3118, "ftrelid oid; ftserver oid; ftoptions text[]"),
    (
        "pg_auth_members",
        1261,
        """oid oid; roleid oid; member oid; grantor oid; admin_option boolean;
        inherit_option boolean; set_option boolean""",
    ),
    (
        "pg_locks",
        12073,
        """locktype text; database oid; relation oid; page integer; tuple smallint;
        virtualxid text; transactionid xid; classid oid; objid oid; objsubid smallint;
        virtualtransaction text; pid integer; mode text; granted boolean; fastpath boolean;
        waitstart timestamp with time zone""",
    ),
    (
        "pg_available_extensions",
        12081,
        "name name; default_version text; installed_version text; comment text",
    ),
    # Catalogs of objects we have none of, which psql's \dd, \do, \dc, \des, \dew,
    # \drds, \dl and \dRs read: empty, so those list nothing instead of failing.
    ("pg_opfamily", 2753, "oid oid; opfmethod oid; opfname name; opfnamespace oid; opfowner oid"),
    (
        "pg_operator",
        2617,
        """oid oid; oprname name; oprnamespace oid; oprowner oid; oprkind "char";
        oprcanmerge boolean; oprcanhash boolean; oprleft oid; oprright oid; oprresult oid;
        oprcom oid; oprnegate oid; oprcode regproc; oprrest regproc; oprjoin regproc""",
    ),
    (
        "pg_conversion",
        2607,
        """oid oid; conname name; connamespace oid; conowner oid; conforencoding integer;
        contoencoding integer; conproc regproc; condefault boolean""",
    ),
    (
        "pg_foreign_data_wrapper",
        2328,
        """oid oid; fdwname name; fdwowner oid; fdwhandler oid; fdwvalidator oid;
        fdwacl aclitem[]; fdwoptions text[]""",
    ),
    (
        "pg_foreign_server",
        1417,
        """oid oid; srvname name; srvowner oid; srvfdw oid; srvtype text; srvversion text;
        srvacl aclitem[]; srvoptions text[]""",
    ),
    ("pg_db_role_setting", 2964, "setdatabase oid; setrole oid; setconfig text[]"),
    ("pg_largeobject_metadata", 2995, "oid oid; lomowner oid; lomacl aclitem[]"),
    (
        "pg_subscription",
        6100,
        """oid oid; subdbid oid; subskiplsn pg_lsn; subname name; subowner oid;
        subenabled boolean; subbinary boolean; substream "char"; subtwophasestate "char";
        subdisableonerr boolean; subpasswordrequired boolean; subrunasowner boolean;
        subconninfo text; subslotname name; subsynccommit text; subpublications text[];
        suborigin text""",
    ),
)

for _name, _oid, _spec in _EMPTY_PG:
    _empty("pg_catalog", _name, _oid, _spec)


@_pg(
    "pg_language",
    2612,
    """oid oid; lanname name; lanowner oid; lanispl boolean; lanpltrusted boolean;
    lanplcallfoid oid; laninline oid; lanvalidator oid; lanacl aclitem[]""",
)
def _pg_language(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The languages (\\df+ joins them): the built-in ones and PL/pgSQL, with the OIDs
    Postgres 15 gives them."""
    return [
        (12, "internal", BOOTSTRAP_ROLE_OID, False, False, 0, 0, 2246, None),
        (13, "c", BOOTSTRAP_ROLE_OID, False, False, 0, 0, 2247, None),
        (SQL_LANGUAGE_OID, "sql", BOOTSTRAP_ROLE_OID, False, True, 0, 0, 2248, None),
        (PLPGSQL_LANGUAGE_OID, "plpgsql", BOOTSTRAP_ROLE_OID, True, True, 12757, 12758, 12759,
         None),
    ]  # fmt: skip


# -- information_schema ----------------------------------------------------------------------
# Its views use domains (sql_identifier, character_data, cardinal_number, yes_or_no); the
# columns here have the domains' base types, which is what clients decode.


def _info(name: str, oid: int, spec: str) -> Callable[..., SystemTable]:
    return _table("information_schema", name, oid, spec)


def _yes(flag: bool) -> str:
    return "YES" if flag else "NO"


@_info(
    "schemata",
    12579,
    """catalog_name name; schema_name name; schema_owner name;
    default_character_set_catalog name; default_character_set_schema name;
    default_character_set_name name; sql_path character varying""",
)
def _schemata(ctx: Any) -> Iterable[tuple[object, ...]]:
    from percolator.server.sql.catalog_functions import pg_get_userbyid

    return [
        (ctx.database, name, pg_get_userbyid(ctx, owner), None, None, None, None)
        for _, name, owner in _NAMESPACES
    ] + [
        (ctx.database, s.name, s.owner, None, None, None, None)
        for s in sorted(ctx.catalog.schemas.values(), key=lambda s: s.oid)
    ]


# fmt: off
@_info(
    "tables",
    12622,
    """table_catalog name; table_schema name; table_name name; table_type character varying;
    self_referencing_column_name name; reference_generation character varying;
    user_defined_type_catalog name; user_defined_type_schema name;
    user_defined_type_name name; is_insertable_into character varying(3);
    is_typed character varying(3); commit_action character varying""",
)
def _tables(ctx: Any) -> Iterable[tuple[object, ...]]:
    out = []
    for r in relations(ctx.catalog):
        if r.kind not in ("r", "v"):
            continue
        schema = _schema_name(r.namespace, ctx.catalog)
        kind = "BASE TABLE" if r.kind == "r" else "VIEW"
        if temp_tables.namespace_name(r.namespace) is not None:
            kind = "LOCAL TEMPORARY"
        insertable = _yes(r.kind == "r")
        out.append(
            (ctx.database, schema, r.name, kind, None, None, None, None, None, insertable, "NO",
             None)
        )
    return out
# fmt: on


def _schema_name(namespace: int, catalog: Catalog) -> str:
    for oid, name, _ in _NAMESPACES:
        if oid == namespace:
            return name
    made = schemas.name_of(catalog, namespace)
    if made is not None:
        return made
    return temp_tables.namespace_name(namespace) or "public"


_COLUMNS_SPEC = """table_catalog name; table_schema name; table_name name; column_name name;
    ordinal_position integer; column_default character varying;
    is_nullable character varying(3); data_type character varying;
    character_maximum_length integer; character_octet_length integer;
    numeric_precision integer; numeric_precision_radix integer; numeric_scale integer;
    datetime_precision integer; interval_type character varying; interval_precision integer;
    character_set_catalog name; character_set_schema name; character_set_name name;
    collation_catalog name; collation_schema name; collation_name name; domain_catalog name;
    domain_schema name; domain_name name; udt_catalog name; udt_schema name; udt_name name;
    scope_catalog name; scope_schema name; scope_name name; maximum_cardinality integer;
    dtd_identifier name; is_self_referencing character varying(3);
    is_identity character varying(3); identity_generation character varying;
    identity_start character varying; identity_increment character varying;
    identity_maximum character varying; identity_minimum character varying;
    identity_cycle character varying(3); is_generated character varying;
    generation_expression character varying; is_updatable character varying(3)"""

_BINARY_PRECISION = {
    TypeId.INT2: 16, TypeId.INT4: 32, TypeId.INT8: 64, TypeId.FLOAT4: 24, TypeId.FLOAT8: 53,
}  # fmt: skip
_DATETIME = (TypeId.DATE, TypeId.TIME, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.INTERVAL)
_MAX_OCTETS = 1073741824


def data_type_name(t: SqlType) -> str:
    """information_schema's data_type: 'ARRAY' for arrays, else the type's SQL name."""
    if t.array or t.id in (TypeId.INT2VECTOR, TypeId.OIDVECTOR):
        return "ARRAY"
    if isinstance(t.id, T.EnumType):
        return "USER-DEFINED"
    return t.id.pg_name


def _numeric_facts(t: SqlType) -> tuple[int | None, int | None, int | None]:
    """(numeric_precision, numeric_precision_radix, numeric_scale)."""
    if t.array:
        return None, None, None
    if t.id in _BINARY_PRECISION:
        scale = 0 if t.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8) else None
        return _BINARY_PRECISION[t.id], 2, scale
    if t.id is TypeId.NUMERIC:
        ps = t.precision_scale
        return (ps[0], 10, ps[1]) if ps is not None else (None, 10, None)
    return None, None, None


def _character_facts(t: SqlType) -> tuple[int | None, int | None]:
    """(character_maximum_length, character_octet_length)."""
    if t.array or t.id not in (TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR):
        return None, None
    n = t.length
    if n is None:
        return None, _MAX_OCTETS
    return n, n * 4  # UTF8: at most 4 bytes a character


def _datetime_precision(t: SqlType) -> int | None:
    """information_schema's datetime_precision: p of timestamp(p), else 0 for date, 6."""
    if t.array or t.id not in _DATETIME:
        return None
    if t.id is TypeId.DATE:
        return 0
    p = t.fractional_digits
    return 6 if p is None else p


# fmt: off
@_info("columns", 12492, _COLUMNS_SPEC)
def _info_columns(ctx: Any) -> Iterable[tuple[object, ...]]:
    db = ctx.database
    out = []
    for r in relations(ctx.catalog):
        if r.table is not None:
            cols = [(c.name, c.type, c.not_null, default_text(c)) for c in r.table.columns]
            updatable = "YES"
        elif r.view is not None:
            cols = [(c.name, c.type, False, None) for c in r.view.columns]
            updatable = "NO"
        elif r.system is not None:
            cols = [(n, t, False, None) for n, t in r.system.columns]
            updatable = "NO"
        else:
            continue
        schema = _schema_name(r.namespace, ctx.catalog)
        for i, (name, t, not_null, default) in enumerate(cols):
            precision, radix, scale = _numeric_facts(t)
            max_len, octets = _character_facts(t)
            dt_precision = _datetime_precision(t)
            out.append(
                (
                    db, schema, r.name, name, i + 1, default, _yes(not not_null),
                    data_type_name(t), max_len, octets, precision, radix, scale,
                    None if t.array else dt_precision, None, None, None, None, None, None,
                    None, None, None, None, None, db,
                    schemas.schema_of(t.id.type_name) if isinstance(t.id, T.EnumType)
                    else "pg_catalog",
                    pg_type_of(t).typname,
                    None, None, None, None, str(i + 1), "NO",
                    *_identity_facts(
                        r.table.columns[i] if r.table is not None else None, ctx.catalog
                    ),
                    *_generation_facts(r.table, i), updatable,
                )
            )
    return out
# fmt: on


def _generation_facts(table: TableDef | None, position: int) -> tuple[object, ...]:
    """information_schema.columns' is_generated and generation_expression."""
    if table is None or table.columns[position].generated is None:
        return ("NEVER", None)
    return ("ALWAYS", generation_text(table, table.columns[position]))


def _identity_facts(col: ColumnDef | None, catalog: Any) -> tuple[object, ...]:
    """information_schema.columns' is_identity .. identity_cycle (from its sequence)."""
    if col is None or col.identity is None:
        return ("NO", None, None, None, None, None, "NO")
    generation = "ALWAYS" if col.identity == "a" else "BY DEFAULT"
    seq = catalog.sequences.get(col.serial_sequence or "")
    if seq is None:
        return ("YES", generation, "1", "1", str(_SEQUENCE_MAX[col.type.id]), "1", "NO")
    low, high = _sequence_bounds(seq, col.type)
    return ("YES", generation, str(seq.start), str(seq.increment), str(high), str(low), "NO")


def _is_identity_sequence(catalog: Any, s: SequenceDef) -> bool:
    """Whether ``s`` is an identity column's (internal to it: information_schema.sequences
    leaves it out, as Postgres's does)."""
    table = catalog.tables.get(s.table)
    return table is not None and any(
        c.serial_sequence == s.name and c.identity is not None for c in table.columns
    )


_CONSTRAINT_TYPES = {"p": "PRIMARY KEY", "u": "UNIQUE", "c": "CHECK", "f": "FOREIGN KEY"}


@_info(
    "table_constraints",
    12608,
    """constraint_catalog name; constraint_schema name; constraint_name name;
    table_catalog name; table_schema name; table_name name;
    constraint_type character varying; is_deferrable character varying(3);
    initially_deferred character varying(3); enforced character varying(3);
    nulls_distinct character varying(3)""",
)
def _table_constraints(ctx: Any) -> Iterable[tuple[object, ...]]:
    db = ctx.database
    out: list[tuple[object, ...]] = []
    for c in all_constraints(ctx.catalog):
        nulls = "YES" if c.contype == "u" else None
        kind = _CONSTRAINT_TYPES[c.contype]
        f = c.foreign
        deferrable = _yes(bool(f and f.deferrable))
        deferred = _yes(bool(f and f.initially_deferred))
        out.append(
            (
                db,
                schemas.schema_of(c.table.name),
                schemas.bare(c.name),
                db,
                *schemas.split(c.table.name),
                kind,
                deferrable,
                deferred,
                "YES",
                nulls,
            )
        )
    # Postgres also lists each NOT NULL column as a CHECK constraint with a synthetic name.
    for t in _user_tables(ctx.catalog):
        for i, col in enumerate(t.columns):
            if col.not_null:
                name = f"{namespace_of(ctx.catalog, t.name)}_{t.oid}_{i + 1}_not_null"
                schema, bare = schemas.split(t.name)
                out.append((db, schema, name, db, schema, bare, "CHECK", "NO", "NO", "YES", None))
    return out


@_info(
    "key_column_usage",
    12526,
    """constraint_catalog name; constraint_schema name; constraint_name name;
    table_catalog name; table_schema name; table_name name; column_name name;
    ordinal_position integer; position_in_unique_constraint integer""",
)
def _key_column_usage(ctx: Any) -> Iterable[tuple[object, ...]]:
    db = ctx.database
    out: list[tuple[object, ...]] = []
    for c in all_constraints(ctx.catalog):
        if c.contype not in ("p", "u", "f"):
            continue
        for k, n in enumerate(c.attnums):
            column = c.table.columns[n - 1].name
            position = _position_in_unique(c.foreign, k) if c.foreign is not None else None
            schema, bare = schemas.split(c.table.name)
            out.append(
                (db, schema, schemas.bare(c.name), db, schema, bare, column, k + 1, position)
            )
    return out


def _position_in_unique(fk: ForeignKeyInfo, k: int) -> int | None:
    """Where the k-th referenced column sits in the referenced index (Postgres's
    _pg_index_position(conindid, confkey[k]))."""
    if fk.ref_index is None:
        return None
    attnums = fk.ref_index.attnums
    n = fk.ref_attnums[k]
    return attnums.index(n) + 1 if n in attnums else None


_MATCH_OPTIONS = {"f": "FULL", "p": "PARTIAL", "s": "NONE"}


@_info(
    "referential_constraints",
    12536,
    """constraint_catalog name; constraint_schema name; constraint_name name;
    unique_constraint_catalog name; unique_constraint_schema name;
    unique_constraint_name name; match_option character varying;
    update_rule character varying; delete_rule character varying""",
)
def _referential_constraints(ctx: Any) -> Iterable[tuple[object, ...]]:
    """Foreign keys with the primary key or unique constraint they reference (none for a
    plain unique index) and their actions spelled out ('NO ACTION', 'SET NULL', ...)."""
    db = ctx.database
    out: list[tuple[object, ...]] = []
    for c in all_constraints(ctx.catalog):
        if c.foreign is None:
            continue
        unique = unique_constraint_of(ctx.catalog, c.foreign.ref_index)
        where = (
            (db, schemas.schema_of(unique.table.name), schemas.bare(unique.name))
            if unique is not None
            else (None, None, None)
        )
        out.append(
            (
                db, schemas.schema_of(c.table.name), schemas.bare(c.name), *where,
                _MATCH_OPTIONS["s"], c.foreign.on_update.sql, c.foreign.on_delete.sql,
            )
        )  # fmt: skip
    return out


@_info(
    "constraint_column_usage",
    12497,
    """table_catalog name; table_schema name; table_name name; column_name name;
    constraint_catalog name; constraint_schema name; constraint_name name""",
)
def _constraint_column_usage(ctx: Any) -> Iterable[tuple[object, ...]]:
    """The columns each constraint uses: a check's own columns, a key's columns, and for a
    foreign key the columns it references (in the referenced table)."""
    db = ctx.database
    out: list[tuple[object, ...]] = []
    for c in all_constraints(ctx.catalog):
        table, attnums = c.table, c.attnums
        if c.foreign is not None:
            table, attnums = c.foreign.ref_table, c.foreign.ref_attnums
        # Postgres joins pg_attribute, so columns come in table order, each once.
        for n in sorted(set(attnums)):
            out.append(
                (
                    db, *schemas.split(table.name), table.columns[n - 1].name, db,
                    schemas.schema_of(c.table.name), schemas.bare(c.name),
                )
            )  # fmt: skip
    return out


# fmt: off
@_info(
    "sequences",
    12583,
    """sequence_catalog name; sequence_schema name; sequence_name name;
    data_type character varying; numeric_precision integer; numeric_precision_radix integer;
    numeric_scale integer; start_value character varying; minimum_value character varying;
    maximum_value character varying; increment character varying;
    cycle_option character varying(3)""",
)
def _info_sequences(ctx: Any) -> Iterable[tuple[object, ...]]:
    out = []
    for s in ctx.catalog.sequences.values():
        if _is_identity_sequence(ctx.catalog, s):
            continue
        t = _sequence_type(ctx.catalog, s)
        low, high = _sequence_bounds(s, t)
        out.append(
            (ctx.database, *schemas.split(s.name), t.id.pg_name,
             _BINARY_PRECISION.get(t.id, 64), 2, 0, str(s.start), str(low), str(high),
             str(s.increment), "NO")
        )
    return out
# fmt: on


_info(
    "views",
    12680,
    """table_catalog name; table_schema name; table_name name;
    view_definition character varying; check_option character varying;
    is_updatable character varying(3); is_insertable_into character varying(3);
    is_trigger_updatable character varying(3); is_trigger_deletable character varying(3);
    is_trigger_insertable_into character varying(3)""",
)(
    lambda ctx: [
        (ctx.database, *schemas.split(v.name), views.definition(v), "NONE", "NO", "NO", "NO", "NO",
         "NO")
        for v in sorted(ctx.catalog.views.values(), key=lambda v: v.id)
    ]
)  # fmt: skip


_empty(
    "information_schema",
    "routines",
    12574,
    """specific_catalog name; specific_schema name; specific_name name; routine_catalog name;
    routine_schema name; routine_name name; routine_type character varying; module_catalog
    name; module_schema name; module_name name; udt_catalog name; udt_schema name; udt_name
    name; data_type character varying; character_maximum_length integer;
    character_octet_length integer; character_set_catalog name; character_set_schema name;
    character_set_name name; collation_catalog name; collation_schema name; collation_name
    name; numeric_precision integer; numeric_precision_radix integer; numeric_scale integer;
    datetime_precision integer; interval_type character varying; interval_precision integer;
    type_udt_catalog name; type_udt_schema name; type_udt_name name; scope_catalog name;
    scope_schema name; scope_name name; maximum_cardinality integer; dtd_identifier name;
    routine_body character varying; routine_definition character varying; external_name
    character varying; external_language character varying; parameter_style character
    varying; is_deterministic character varying(3); sql_data_access character varying;
    is_null_call character varying(3); sql_path character varying; schema_level_routine
    character varying(3); max_dynamic_result_sets integer; is_user_defined_cast character
    varying(3); is_implicitly_invocable character varying(3); security_type character
    varying; to_sql_specific_catalog name; to_sql_specific_schema name; to_sql_specific_name
    name; as_locator character varying(3); created timestamp(2) with time zone; last_altered
    timestamp(2) with time zone; new_savepoint_level character varying(3); is_udt_dependent
    character varying(3); result_cast_from_data_type character varying;
    result_cast_as_locator character varying(3); result_cast_char_max_length integer;
    result_cast_char_octet_length integer; result_cast_char_set_catalog name;
    result_cast_char_set_schema name; result_cast_char_set_name name;
    result_cast_collation_catalog name; result_cast_collation_schema name;
    result_cast_collation_name name; result_cast_numeric_precision integer;
    result_cast_numeric_precision_radix integer; result_cast_numeric_scale integer;
    result_cast_datetime_precision integer; result_cast_interval_type character varying;
    result_cast_interval_precision integer; result_cast_type_udt_catalog name;
    result_cast_type_udt_schema name; result_cast_type_udt_name name;
    result_cast_scope_catalog name; result_cast_scope_schema name; result_cast_scope_name
    name; result_cast_maximum_cardinality integer; result_cast_dtd_identifier name""",
)
