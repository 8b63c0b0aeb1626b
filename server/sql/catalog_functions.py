"""Functions about the server and its catalog: version(), current_setting(), pg_backend_pid(),
the reg* lookups ('t'::regclass), format_type(), pg_get_userbyid(), and the other functions that
psql, SQLAlchemy and pgjdbc call in their catalog queries.

Functions that need the session or catalog take the execution context (``ctx``) first: it has
``catalog``, ``user``, ``database``, ``backend_pid``, ``settings`` and ``transaction_time``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from percolator.server.sql import comments, function_ddl, schemas, trigger_ddl
from percolator.server.sql import types as T
from percolator.server.sql.catalog import (
    INFORMATION_SCHEMA_NAMESPACE_OID,
    PG_CATALOG_NAMESPACE_OID,
    PUBLIC_NAMESPACE_OID,
    FkAction,
    FunctionDef,
)
from percolator.server.sql.errors import (
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    SqlError,
)
from percolator.server.sql.functions import FunctionImpl, define, register
from percolator.server.sql.types import SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.pg_catalog_tables import ForeignKeyInfo

BOOTSTRAP_ROLE_OID = 10
DATABASE_OWNER_ROLE_OID = 6171
"""pg_database_owner: the owner of the public schema since Postgres 15."""

SERVER_VERSION = "15.18"
SERVER_VERSION_NUM = 150018
PERCOLATOR_VERSION = "0.1.0"
VERSION_STRING = (
    f"PostgreSQL {SERVER_VERSION} (Percolator {PERCOLATOR_VERSION}) on x86_64-pc-linux-gnu, "
    "compiled by Python, 64-bit"
)

NAMESPACES = {
    "pg_catalog": PG_CATALOG_NAMESPACE_OID,
    "public": PUBLIC_NAMESPACE_OID,
    "information_schema": INFORMATION_SCHEMA_NAMESPACE_OID,
}


class OidName(int):
    """An OID that prints as a name (a value of type regclass, regtype, regnamespace)."""

    display: str

    def __new__(cls, oid: int, display: str) -> OidName:
        obj = super().__new__(cls, oid)
        obj.display = display
        return obj

    def __str__(self) -> str:
        return self.display


def reg_lookup(ctx: Any, t: SqlType, value: object) -> OidName:
    """'name'::regclass (and regtype, regnamespace, regproc): the OID of the named object.

    A number is an OID already, taken as it is (psql's ``\\d`` writes ``'16385'::regclass``)."""
    name = str(value).strip()
    if name.isdigit():
        return oid_to_reg(ctx, t, int(name))
    if t.id is TypeId.REGNAMESPACE:
        key = _unquote(name)
        found = _namespace_oid(ctx, key)
        if found < 0:
            raise SqlError("3F000", f'schema "{key}" does not exist')
        return OidName(found, key)
    if t.id is TypeId.REGTYPE:
        found = T.make_type(_unquote(name.removeprefix("pg_catalog.")))
        if found is None:
            found = _enum_type(ctx, _unquote(name.removeprefix("public.")))
        if found is None:
            raise SqlError(UNDEFINED_OBJECT, f'type "{name}" does not exist')
        return OidName(found.oid, found.format())
    if t.id is TypeId.REGPROC:
        return _user_proc(ctx, name) or proc_lookup(name)
    oid = relation_oid(ctx, name)
    if oid is None:
        raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
    return oid_to_reg(ctx, t, oid)


def relation_oid(ctx: Any, name: str) -> int | None:
    """The OID of a table, index, sequence or system table named ``[schema.]name``, or None.

    An unqualified name is looked up as the search_path does: pg_catalog, then public."""
    from percolator.server.sql import pg_catalog_tables as pgc

    schema, _, rel = name.rpartition(".")
    rel = _unquote(rel)
    if schema:
        namespaces = [_namespace_oid(ctx, _unquote(schema))]
    else:
        namespaces = [PG_CATALOG_NAMESPACE_OID] + [
            schemas.oid(ctx.catalog, s) or -1 for s in schemas.path(ctx.catalog)
        ]
    found = {r.namespace: r.oid for r in pgc.relations(ctx.catalog) if r.name == rel}
    for ns in namespaces:
        if ns in found:
            return found[ns]
    return None


def relation_name(ctx: Any, oid: int) -> str | None:
    """The name of the relation with this OID (as regclass prints it), or None."""
    from percolator.server.sql import pg_catalog_tables as pgc

    r = pgc.relation_by_oid(ctx.catalog, oid)
    if r is None:
        return None
    # Quoted as regclassout quotes (psql shows a referencing table "Fk Other" as ""Fk Other"").
    if r.namespace == INFORMATION_SCHEMA_NAMESPACE_OID:
        return f"information_schema.{quote_ident(r.name)}"
    schema = _user_schema(ctx, r.namespace)
    if schema is not None and not schemas.visible(ctx.catalog, schemas.key(schema, r.name)):
        return f"{quote_ident(schema)}.{quote_ident(r.name)}"
    return quote_ident(r.name)


def _user_schema(ctx: Any, namespace: int) -> str | None:
    """public or a schema made by CREATE SCHEMA (None for the system and temporary ones)."""
    if namespace == PUBLIC_NAMESPACE_OID:
        return "public"
    return schemas.name_of(ctx.catalog, namespace)


def _namespace_oid(ctx: Any, schema: str) -> int:
    """The OID of a schema by name (-1 if there is none)."""
    if schema in NAMESPACES:
        return NAMESPACES[schema]
    found = schemas.oid(ctx.catalog, schema)
    return found if found is not None else -1


@register("pg_typeof")
def _pg_typeof(args: Sequence[SqlType]) -> FunctionImpl | None:
    """pg_typeof(x): the regtype of its argument, known when the call is bound."""
    if len(args) != 1:
        return None
    t = args[0]
    name = OidName(t.oid, t.format())
    return FunctionImpl(lambda _v: name, T.REGTYPE, strict=False)


def oid_to_reg(ctx: Any, t: SqlType, oid: int) -> OidName:
    """An OID cast to regclass/regtype/regnamespace: prints as the name (or the number)."""
    if t.id is TypeId.REGCLASS:
        name = relation_name(ctx, oid)
        return OidName(oid, name if name is not None else str(oid))
    if t.id is TypeId.REGTYPE:
        found = _type_by_oid(ctx.catalog, oid)
        return OidName(oid, found.format() if found is not None else str(oid))
    if t.id is TypeId.REGNAMESPACE:
        for k, v in NAMESPACES.items():
            if v == oid:
                return OidName(oid, k)
        made = schemas.name_of(ctx.catalog, oid)
        if made is not None:
            return OidName(oid, made)
    if t.id is TypeId.REGPROC:
        fn = function_ddl.by_oid(ctx.catalog, oid)
        if fn is not None:
            return OidName(oid, schemas.split(fn.name)[1])
    return OidName(oid, str(oid))


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == '"' and name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


def _enum_type(ctx: Any, name: str) -> SqlType | None:
    """The user-defined enum type ``name`` (or ``name[]``), or None."""
    array = name.endswith("[]")
    found = ctx.catalog.enums.get(name.removesuffix("[]"))
    return None if found is None else SqlType(found, array=array)


def _type_by_oid(catalog: Any, oid: int) -> SqlType | None:
    """A built-in type, or one of the catalog's enum types (or their arrays), by OID."""
    found = T.type_by_oid(oid)
    if found is None:
        for e in catalog.enums.values():
            if oid in (e.oid, e.array_oid):
                return SqlType(e, array=oid == e.array_oid)
    return found


def format_type(oid: int, typmod: int | None, catalog: Any = None) -> str | None:
    """format_type(oid, typmod): the type's name as Postgres prints it (the catalog's enum
    types too when it is given)."""
    if oid is None:
        return None
    t = T.type_by_oid(oid) if catalog is None else _type_by_oid(catalog, oid)
    if t is None:
        return "???"
    out = SqlType(t.id, typmod if typmod is not None else -1, t.array).format()
    if catalog is not None and isinstance(t.id, T.EnumType) and "." in t.id.type_name:
        # A type of the search path prints bare, as Postgres's format_type does.
        bare = schemas.bare(t.id.type_name)
        if schemas.resolve_type(catalog, bare) == t.id.type_name:
            out = out.removeprefix(SqlType(t.id).format().split(".", 1)[0] + ".")
    return out


def current_setting(ctx: Any, name: str, missing_ok: bool = False) -> str | None:
    value = ctx.settings.get(name.lower())
    if value is None:
        if missing_ok:
            return None
        raise SqlError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"')
    return value


def set_config(ctx: Any, name: str, value: str, is_local: bool) -> str:
    """set_config(name, value, is_local): SET, or SET LOCAL when is_local."""
    ctx.set_setting(name.lower(), value, local=bool(is_local))
    return value


# -- object lookups and descriptions ----------------------------------------------------------


def _maybe(fn: Any) -> object:
    try:
        return fn()
    except SqlError:
        return None


def _user_proc(ctx: Any, name: str) -> OidName | None:
    """'f'::regproc for a function made by CREATE FUNCTION (42725 when f is overloaded)."""
    from percolator.server.sql import user_functions

    schema, _, bare = _unquote(name).rpartition(".")
    found = user_functions.candidates(ctx.catalog, bare, schema or None)
    if not found:
        return None
    if len(found) > 1:
        raise SqlError("42725", f'more than one function named "{name}"')
    return OidName(found[0].oid, bare)


def proc_lookup(name: str) -> OidName:
    """'name'::regproc: the OID of a function we know by name (the type I/O functions pg_type
    names); other names get OID 0, which no catalog row matches."""
    from percolator.server.sql import pg_catalog_tables as pgc

    key = _unquote(name.strip().removeprefix("pg_catalog."))
    if key == "-":
        return OidName(0, "-")
    return OidName(pgc.PROCS.get(key, 0), key)


def pg_get_userbyid(ctx: Any, oid: int) -> str:
    for r in ctx.catalog.roles.values():
        if r.oid == oid:
            return r.name
    if oid == BOOTSTRAP_ROLE_OID:
        return ctx.bootstrap_user
    if oid == DATABASE_OWNER_ROLE_OID:
        return "pg_database_owner"
    return f"unknown (OID={oid})"


# Keywords quote_ident() quotes (every category but unreserved), as of Postgres 15.
_KEYWORDS = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization between bigint binary
    bit boolean both case cast char character check coalesce collate collation column
    concurrently constraint create cross current_catalog current_date current_role
    current_schema current_time current_timestamp current_user dec decimal default deferrable
    desc distinct do else end except exists extract false fetch float for foreign freeze from
    full grant greatest group grouping having ilike in initially inner inout int integer
    intersect interval into is isnull join lateral leading least left like limit localtime
    localtimestamp national natural nchar none normalize not notnull null nullif numeric offset
    on only or order out outer overlaps overlay placing position precision primary real
    references returning right row select session_user setof similar smallint some substring
    symmetric table tablesample then time timestamp to trailing treat trim true union unique
    user using values varchar variadic verbose when where window with xmlattributes xmlconcat
    xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize
    xmltable""".split()
)


def quote_ident(name: str) -> str:
    """An identifier as Postgres's deparser writes it: quoted unless it is a plain lower-case
    name that is not a keyword."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def pg_get_expr(ctx: Any, expr: str | None, relid: int, pretty: bool = False) -> str | None:
    """pg_get_expr(pg_node_tree, relid[, pretty]): our node trees are the deparsed SQL text in
    the non-pretty form; the pretty form drops the redundant parentheses."""
    # Context functions are called with NULLs (they are not strict): a NULL tree (an index's
    # indpred when it has no WHERE) is NULL, as in Postgres.
    if expr is None or relid is None:
        return None
    if not pretty:
        return expr
    from percolator.server.sql import pg_catalog_tables as pgc

    table = ctx.catalog.table_by_oid(relid)
    return pgc.redeparse(expr, table, pretty=True)


def pg_get_indexdef(ctx: Any, oid: int, column: int = 0, pretty: bool = False) -> str | None:
    """``CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)``; with column > 0 that
    column's name ('' past the last one)."""
    from percolator.server.sql import pg_catalog_tables as pgc

    ix = pgc.index_by_oid(ctx.catalog, oid)
    if ix is None:
        return None
    names = ix.key_texts(pretty)
    if column:
        return names[column - 1] if 0 < column <= len(names) else ""
    opclasses = [ix.opclasses[i] if i < len(ix.opclasses) else None for i in range(len(names))]
    keys = ", ".join(
        n
        + (f" {opclasses[i]}" if opclasses[i] else "")
        + (" DESC" if i < len(ix.descending) and ix.descending[i] else "")
        for i, n in enumerate(names)
    )
    schema, bare = schemas.split(ix.table.name)
    table = quote_ident(bare)
    on = table if pretty else f"{quote_ident(schema)}.{table}"
    unique = "UNIQUE " if ix.unique else ""
    name = quote_ident(schemas.bare(ix.name))
    where = ix.predicate_text(pretty)
    where = "" if where is None else f" WHERE {where}"
    return f"CREATE {unique}INDEX {name} ON {on} USING btree ({keys}){where}"


def pg_get_constraintdef(ctx: Any, oid: int, pretty: bool = False) -> str | None:
    """``PRIMARY KEY (a, b)``, ``UNIQUE (e)``, ``CHECK ((a > 0))`` (pretty: ``CHECK (a > 0)``),
    ``FOREIGN KEY (p) REFERENCES parent(id) ON DELETE CASCADE``."""
    from percolator.server.sql import pg_catalog_tables as pgc

    con = pgc.constraint_by_oid(ctx.catalog, oid)
    if con is None:
        return None
    if con.contype == "c":
        text = con.expression if not pretty else pgc.redeparse(con.expression, con.table, True)
        return f"CHECK ({text})"
    cols = ", ".join(quote_ident(con.table.columns[n - 1].name) for n in con.attnums)
    if con.foreign is not None:
        return f"FOREIGN KEY ({cols}) REFERENCES {_references(ctx, con.foreign)}"
    return f"{'PRIMARY KEY' if con.contype == 'p' else 'UNIQUE'} ({cols})"


def _relation_text(ctx: Any, key: str) -> str:
    """A relation as ruleutils.c names it: bare when the search path finds it, else
    schema-qualified."""
    schema, bare = schemas.split(key)
    if schemas.visible(ctx.catalog, key):
        return quote_ident(bare)
    return f"{quote_ident(schema)}.{quote_ident(bare)}"


def _references(ctx: Any, fk: ForeignKeyInfo) -> str:
    """``parent(id) ON UPDATE CASCADE ON DELETE SET NULL`` as ruleutils.c writes it: the table
    unqualified when the search path finds it, MATCH SIMPLE and NO ACTION left unsaid."""
    ref = fk.ref_table
    ref_cols = ", ".join(quote_ident(ref.columns[n - 1].name) for n in fk.ref_attnums)
    text = f"{_relation_text(ctx, ref.name)}({ref_cols})"
    for word, action in (("UPDATE", fk.on_update), ("DELETE", fk.on_delete)):
        if action is not FkAction.NO_ACTION:
            text += f" ON {word} {action.sql}"
    if fk.deferrable:
        text += " DEFERRABLE"
    if fk.initially_deferred:
        text += " INITIALLY DEFERRED"
    return text


def pg_get_serial_sequence(ctx: Any, table: str, column: str) -> str | None:
    """'public.t_id_seq' for a serial column, NULL for other columns; 42P01/42703 if the
    table or column does not exist."""
    name = table.strip()
    t = ctx.catalog.tables.get(schemas.resolve_text(ctx.catalog, name))
    if t is None:
        raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
    col = t.column(column)
    if col.serial_sequence is None:
        return None
    schema, bare = schemas.split(col.serial_sequence)
    return f"{quote_ident(schema)}.{quote_ident(bare)}"


def pg_get_viewdef(ctx: Any, oid: int, pretty: object = False) -> str | None:
    """A view's query (`` SELECT ...;``), NULL for other relations (the system catalogs'
    views have no stored query here)."""
    from percolator.server.sql import pg_catalog_tables as pgc
    from percolator.server.sql import views

    r = pgc.relation_by_oid(ctx.catalog, oid)
    if r is None or r.view is None:
        return None
    laid_out = pgc.view_definition(r.view, ctx.catalog)
    return laid_out if laid_out is not None else views.definition(r.view)


def pg_size_pretty(size: object) -> str:
    """A byte count with a unit, rounded as Postgres does (``10 kB``, ``1234 MB``)."""
    n = int(size)  # type: ignore[call-overload]
    if abs(n) < 10 * 1024:
        return f"{n} bytes"
    n >>= 9  # keep one extra bit for rounding
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 20 * 1024 - 1 or unit == "PB":
            break
        n >>= 10
    return f"{int((n + (-1 if n < 0 else 1)) / 2)} {unit}"


def json_build_object(*args: object) -> str:
    """json_build_object(k1, v1, ...): SQLAlchemy's reflection builds identity and collation
    options with it. Formatted as Postgres does (``{"a" : 1, "b" : "x"}``)."""
    if len(args) % 2:
        raise SqlError(
            "22023", "argument list must have even number of elements",
            hint="The arguments of json_build_object() must consist of alternating keys "
            "and values.",
        )  # fmt: skip
    pairs = []
    for key, value in zip(args[::2], args[1::2], strict=True):
        if key is None:
            raise SqlError("22004", "null value not allowed for object key")
        pairs.append(f"{_json_value(str(key))} : {_json_value(value)}")
    return "{" + ", ".join(pairs) + "}"


def _json_value(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float | Decimal):
        return str(v)
    if isinstance(v, dt.date | dt.time):
        return json.dumps(v.isoformat())
    return json.dumps(str(v), ensure_ascii=False)


_POSTMASTER_START = dt.datetime.now(dt.UTC)


# -- registration ---------------------------------------------------------------------------

define("json_build_object", json_build_object, T.JSON, tuple(range(0, 101, 2)), strict=False)
define("pg_get_expr", pg_get_expr, T.TEXT, (2, 3), context=True)
define("pg_get_indexdef", pg_get_indexdef, T.TEXT, (1, 3), context=True)
define("pg_get_constraintdef", pg_get_constraintdef, T.TEXT, (1, 2), context=True)
define("pg_get_serial_sequence", pg_get_serial_sequence, T.TEXT, 2, context=True)
define(
    "pg_get_triggerdef",
    lambda ctx, oid, pretty=False: trigger_ddl.definition(ctx.catalog, oid, bool(pretty)),
    T.TEXT,
    (1, 2),
    context=True,
)
define("pg_get_ruledef", lambda *a: None, T.TEXT, (1, 2), strict=False)
define("pg_get_viewdef", pg_get_viewdef, T.TEXT, (1, 2), context=True)
define("pg_get_partkeydef", lambda oid: None, T.TEXT, 1, strict=False)
define("pg_get_statisticsobjdef_columns", lambda oid: None, T.TEXT, 1, strict=False)


def _function_text(show: Callable[[FunctionDef], str]) -> Callable[[Any, object], str | None]:
    """A pg_get_function_* function: NULL for a function not made by CREATE FUNCTION (the
    built-in ones are not in pg_proc)."""

    def text(ctx: Any, oid: object) -> str | None:
        fn = function_ddl.by_oid(ctx.catalog, oid)
        return show(fn) if fn is not None else None

    return text


define("pg_get_function_arguments", _function_text(function_ddl.arguments_text), T.TEXT, 1,
       context=True)  # fmt: skip
define(
    "pg_get_function_identity_arguments",
    _function_text(lambda fn: function_ddl.arguments_text(fn, defaults=False)),
    T.TEXT,
    1,
    context=True,
)
define("pg_get_function_result", _function_text(function_ddl.result_text), T.TEXT, 1,
       context=True)  # fmt: skip
define("pg_relation_is_publishable", lambda oid: False, T.BOOL, 1)
define(("pg_total_relation_size", "pg_table_size", "pg_indexes_size"), lambda oid: 0, T.INT8, 1)
define("pg_relation_size", lambda *a: 0, T.INT8, (1, 2))
define("pg_stat_get_numscans", lambda oid: 0, T.INT8, 1)
define("pg_size_pretty", pg_size_pretty, T.TEXT, 1)
define("pg_tablespace_location", lambda oid: "", T.TEXT, 1)
define("pg_postmaster_start_time", lambda: _POSTMASTER_START, T.TIMESTAMPTZ, 0)
define("pg_conf_load_time", lambda: _POSTMASTER_START, T.TIMESTAMPTZ, 0)
define(("inet_server_addr", "inet_client_addr"), lambda: None, T.TEXT, 0, strict=False)
define(("inet_server_port", "inet_client_port"), lambda: None, T.INT4, 0, strict=False)
define("pg_char_to_encoding", lambda s: 6 if s.upper() in ("UTF8", "UTF-8") else 0, T.INT4, 1)
define(
    (
        "has_column_privilege",
        "has_sequence_privilege",
        "has_function_privilege",
        "has_any_column_privilege",
        "has_tablespace_privilege",
    ),
    lambda *a: True,
    T.BOOL,
    (2, 3, 4),
)
define("pg_has_role", lambda *a: True, T.BOOL, (2, 3))
define("pg_is_other_temp_schema", lambda oid: False, T.BOOL, 1)
define("pg_my_temp_schema", lambda: 0, T.OID, 0)
define("pg_current_logfile", lambda *a: None, T.TEXT, (0, 1), strict=False)
define(
    "pg_opclass_is_visible",
    lambda oid: True,
    T.BOOL,
    1,
)
define("pg_ts_config_is_visible", lambda oid: True, T.BOOL, 1)
define(
    (
        "pg_opfamily_is_visible",
        "pg_operator_is_visible",
        "pg_conversion_is_visible",
        "pg_statistics_obj_is_visible",
        "pg_ts_parser_is_visible",
        "pg_ts_dict_is_visible",
        "pg_ts_template_is_visible",
    ),
    lambda oid: True,
    T.BOOL,
    1,
)
define("getdatabaseencoding", lambda: "UTF8", T.NAME, 0)
# Sizes are not tracked (pg_relation_size is 0 too): \l+ shows "0 bytes".
define("pg_database_size", lambda db: 0, T.INT8, 1)
define("pg_get_function_sqlbody", lambda oid: None, T.TEXT, 1, strict=False)


def _pg_get_functiondef(ctx: Any, oid: object) -> str:
    """\\sf's source, for a function made by CREATE FUNCTION (built-in functions have no
    definitions to show)."""
    fn = function_ddl.by_oid(ctx.catalog, oid)
    if fn is None:
        raise SqlError(
            "0A000", "pg_get_functiondef is not supported: built-in functions have no stored source"
        )
    return function_ddl.definition_text(fn)


define("pg_get_functiondef", _pg_get_functiondef, T.TEXT, 1, context=True)
define("version", lambda: VERSION_STRING, T.TEXT, 0)
define("pg_backend_pid", lambda ctx: ctx.backend_pid, T.INT4, 0, context=True)
define("current_setting", current_setting, T.TEXT, (1, 2), context=True, strict=True)
define("set_config", set_config, T.TEXT, 3, context=True, strict=False)
define("current_database", lambda ctx: ctx.database, T.NAME, 0, context=True)


def _current_schema(ctx: Any) -> str | None:
    found = schemas.path(ctx.catalog)
    return found[0] if found else None


define("current_schema", _current_schema, T.NAME, 0, context=True, strict=False)
define(
    "current_schemas",
    lambda ctx, include: schemas.current_schemas(ctx.catalog, bool(include)),
    SqlType(TypeId.NAME, array=True),
    1,
    context=True,
)
define("current_user", lambda ctx: ctx.user, T.NAME, 0, context=True)
define("session_user", lambda ctx: ctx.user, T.NAME, 0, context=True)
define("user", lambda ctx: ctx.user, T.NAME, 0, context=True)


def _format_type_sql(ctx: Any, oid: int, typmod: int | None) -> str | None:
    return format_type(oid, typmod, ctx.catalog)


define("format_type", _format_type_sql, T.TEXT, 2, strict=False, context=True)
define("pg_get_userbyid", pg_get_userbyid, T.NAME, 1, context=True)


def _table_is_visible(ctx: Any, oid: int) -> bool:
    """Whether the relation is what its bare name resolves to (psql's \\dt lists those)."""
    from percolator.server.sql import pg_catalog_tables as pgc

    r = pgc.relation_by_oid(ctx.catalog, int(oid))
    if r is None:
        return False
    schema = _user_schema(ctx, r.namespace)
    if schema is not None:
        return schemas.visible(ctx.catalog, schemas.key(schema, r.name))
    # pg_catalog and the session's temporary schema are on every search path; the other
    # system schemas (information_schema, percolator) are not.
    return r.namespace == PG_CATALOG_NAMESPACE_OID or r.system is None


define("pg_table_is_visible", _table_is_visible, T.BOOL, 1, context=True)
define("pg_type_is_visible", lambda oid: True, T.BOOL, 1)


def _function_is_visible(ctx: Any, oid: object) -> bool:
    fn = function_ddl.by_oid(ctx.catalog, oid)
    return fn is None or function_ddl.visible(ctx.catalog, fn)


define("pg_function_is_visible", _function_is_visible, T.BOOL, 1, context=True)
define("pg_collation_is_visible", lambda oid: True, T.BOOL, 1)
define("pg_encoding_to_char", lambda n: "UTF8" if n == 6 else "SQL_ASCII", T.NAME, 1)
define("obj_description", comments.obj_description, T.TEXT, (1, 2), context=True, strict=False)
define("col_description", comments.col_description, T.TEXT, 2, context=True, strict=False)
define("shobj_description", comments.shobj_description, T.TEXT, 2, context=True, strict=False)
define("has_table_privilege", lambda *a: True, T.BOOL, (2, 3))
define("has_schema_privilege", lambda *a: True, T.BOOL, (2, 3))
define("has_database_privilege", lambda *a: True, T.BOOL, (2, 3))
define("pg_advisory_unlock_all", lambda: None, T.VOID, 0, strict=False)
define("pg_is_in_recovery", lambda: False, T.BOOL, 0)
define(
    "to_regclass",
    lambda ctx, name: _maybe(lambda: reg_lookup(ctx, T.REGCLASS, name)),
    T.REGCLASS,
    1,
    context=True,
)
define(
    "to_regtype",
    lambda ctx, name: _maybe(lambda: reg_lookup(ctx, T.REGTYPE, name)),
    T.REGTYPE,
    1,
    context=True,
)
define("txid_current", lambda ctx: ctx.start_ts, T.INT8, 0, context=True)
define(
    "clock_timestamp", lambda ctx: ctx.clock_time(), T.TIMESTAMPTZ, 0, context=True, volatile=True
)
define("statement_timestamp", lambda ctx: ctx.statement_time, T.TIMESTAMPTZ, 0, context=True)
define("transaction_timestamp", lambda ctx: ctx.transaction_time, T.TIMESTAMPTZ, 0, context=True)
define("now", lambda ctx: ctx.transaction_time, T.TIMESTAMPTZ, 0, context=True)

# pg_cancel_backend and pg_terminate_backend (registered on import).
from percolator.server.sql import backends as _backends  # noqa: E402, F401
