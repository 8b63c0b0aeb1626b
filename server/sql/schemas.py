"""Schemas: CREATE / DROP / ALTER SCHEMA, the search path, and resolving names through it.

Naming. An object of schema public is keyed (in the :class:`Catalog` dicts) and named (in
its definition) by its bare name, as before schemas existed, so a catalog stored then loads
unchanged; an object of any other schema ``s`` is keyed and named ``s.name``. A key has a dot
exactly when it is in another schema than public (names with a dot are refused), so
:func:`split` tells the schema from the key alone, and what derives names from a table's name
(``t_id_seq``, ``t_pkey``, ``t_a_idx``) puts them in the table's schema by itself. The system
catalogs show the bare name and the schema's OID.

Resolution. Before a statement is bound (or its DDL run), :func:`qualify` rewrites its table
references to keys: ``s.t`` becomes ``"s.t" AS t``; an unqualified ``t`` becomes the key of
the first schema of the search path that has it (temporary tables still come first); what a
CREATE makes goes to the first existing schema of the path. The binder and the DDL code then
look keys up as they always did. Names in strings (``nextval('s.seq')``, ``'s.t'::regclass``,
utility statements' names) go through :func:`resolve_text` / :func:`creation_name`.

The session's search path is a task-local variable (like the time zone), set by the session
before it prepares or runs a statement.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from percolator.server.sql import temp_tables
from percolator.server.sql.catalog import (
    FIRST_USER_OID,
    PUBLIC_NAMESPACE_OID,
    Catalog,
    SchemaDef,
)
from percolator.server.sql.errors import SqlError, unsupported

PUBLIC = "public"
SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "percolator", "pg_toast"})
"""Schemas whose tables the system catalogs provide (never rewritten to keys)."""
DUPLICATE_SCHEMA = "42P06"
INVALID_SCHEMA_NAME = "3F000"
RESERVED_NAME = "42939"
DEPENDENT_OBJECTS_STILL_EXIST = "2BP01"

_search_path: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "search_path", default=("$user", PUBLIC)
)
_user: contextvars.ContextVar[str] = contextvars.ContextVar("search_path_user", default="")


# -- keys ------------------------------------------------------------------------------------


def key(schema: str, name: str) -> str:
    """The catalog key of object ``name`` of ``schema``."""
    return name if schema == PUBLIC else f"{schema}.{name}"


def split(name: str) -> tuple[str, str]:
    """(schema, bare name) of a catalog key."""
    schema, dot, bare = name.partition(".")
    return (schema, bare) if dot else (PUBLIC, name)


def bare(name: str) -> str:
    """The name a key shows in the system catalogs and in messages about its schema."""
    return split(name)[1]


def schema_of(name: str) -> str:
    return split(name)[0]


def exists(catalog: Catalog, schema: str) -> bool:
    return schema == PUBLIC or schema in catalog.schemas


def oid(catalog: Catalog, schema: str) -> int | None:
    """The OID of a user schema (public's is fixed), or None."""
    if schema == PUBLIC:
        return PUBLIC_NAMESPACE_OID
    found = catalog.schemas.get(schema)
    return found.oid if found is not None else None


def name_of(catalog: Catalog, namespace: int) -> str | None:
    for s in catalog.schemas.values():
        if s.oid == namespace:
            return s.name
    return None


# -- the search path -------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)  # read before every statement a session runs
def parse_path(setting: str) -> tuple[str, ...]:
    """The entries of a search_path setting (quotes removed, unquoted names lower-cased)."""
    out = []
    for raw in setting.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith('"') and item.endswith('"') and len(item) >= 2:
            out.append(item[1:-1].replace('""', '"'))
        else:
            out.append(item.lower())
    return tuple(out)


def use_search_path(setting: str, user: str) -> None:
    """Set the current task's search path (the session calls it before each statement)."""
    _search_path.set(parse_path(setting))
    _user.set(user)


def path(catalog: Catalog) -> list[str]:
    """The existing schemas of the search path, in order (``$user`` is the session's user;
    pg_catalog and pg_temp, which the system catalogs and temporary tables handle, left out)."""
    out: list[str] = []
    for item in _search_path.get():
        name = _user.get() if item == "$user" else item
        if name and name not in out and exists(catalog, name):
            out.append(name)
    return out


def is_default_path(catalog: Catalog) -> bool:
    """Whether unqualified names resolve as they did before schemas: in public only (plans
    resolved so may be shared by every session)."""
    return path(catalog) == [PUBLIC]


def creation_schema(catalog: Catalog) -> str:
    """Where an unqualified CREATE puts its object: the first existing schema of the path."""
    found = path(catalog)
    if not found:
        raise SqlError(INVALID_SCHEMA_NAME, "no schema has been selected to create in")
    return found[0]


def current_schemas(catalog: Catalog, implicit: bool) -> list[str]:
    """current_schemas(implicit): the path's existing schemas (pg_catalog first if asked)."""
    return (["pg_catalog"] if implicit else []) + path(catalog)


def visible(catalog: Catalog, name: str) -> bool:
    """Whether the key ``name`` is what its bare name resolves to (regclass prints it bare
    then, qualified otherwise)."""
    schema, rel = split(name)
    for s in path(catalog):
        k = key(s, rel)
        if _relation(catalog, k):
            return s == schema
    return False


# -- resolving names -------------------------------------------------------------------------


def _relation(catalog: Catalog, k: str) -> bool:
    return catalog.relation_exists(k)


def resolve(catalog: Catalog, name: str, table_like: bool = True) -> str:
    """The key an unqualified relation name resolves to (``name`` itself if no schema of the
    path has it: the caller reports it missing). A temporary table comes first."""
    found = catalog.tables.get(name)
    if found is not None and temp_tables.is_temp(found):
        return name
    for s in path(catalog):
        k = key(s, name)
        if _relation(catalog, k):
            return k
    return name


def resolve_type(catalog: Catalog, name: str) -> str:
    """The key an (unqualified) enum type name resolves to through the search path (a key
    already qualified stays)."""
    if "." in name:
        return name
    for s in path(catalog):
        k = key(s, name)
        if k in catalog.enums:
            return k
    return name


def resolve_text(catalog: Catalog, text: str) -> str:
    """The key of a relation named in a string (``'s.t'``, ``'"S".t'``, ``'t'``)."""
    parts = split_text(text)
    if len(parts) == 1:
        return resolve(catalog, parts[0])
    schema, rel = parts[-2], parts[-1]
    if schema in SYSTEM_SCHEMAS or temp_tables.is_temp_schema(schema):
        return rel
    return key(schema, rel)


def creation_name(catalog: Catalog, name: str) -> str:
    """The key a CREATE makes of a name a utility statement read (a key if it was qualified,
    see ``public_name`` in server/sql/utility.py; else in the creation schema)."""
    if "." in name:
        schema, rel = split(name)
        return qualified_creation(catalog, schema, rel)
    return _checked(key(creation_schema(catalog), name), name)


def qualified_creation(catalog: Catalog, schema: str, name: str) -> str:
    """The key of ``schema.name`` made by a CREATE (3F000 if the schema is missing)."""
    if not exists(catalog, schema):
        raise SqlError(INVALID_SCHEMA_NAME, f'schema "{schema}" does not exist')
    return _checked(key(schema, name), name)


def _checked(k: str, name: str) -> str:
    if "." in name:
        raise unsupported(f'a name with a dot ("{name}"): it would read as schema.name')
    return k


def split_text(text: str) -> list[str]:
    """The parts of a name in a string (``a.b``, ``"A".b``): split at unquoted dots, the
    unquoted parts lower-cased."""
    parts: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    was_quoted = False
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"':
                if text[i + 1 : i + 2] == '"':
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(ch)
        elif ch == '"':
            quoted = was_quoted = True
        elif ch == ".":
            part = "".join(cur)
            parts.append(part if was_quoted else part.strip().lower())
            cur, was_quoted = [], False
        else:
            cur.append(ch)
        i += 1
    part = "".join(cur)
    parts.append(part if was_quoted else part.strip().lower())
    return parts


# -- rewriting a statement's names -----------------------------------------------------------


_READ_PARENTS = (exp.From, exp.Join, exp.Update, exp.Delete, exp.Merge)


def qualify(node: exp.Expression, catalog: Catalog) -> exp.Expression:
    """``node`` with its table references rewritten to catalog keys (a copy if anything
    changes: parsed trees are shared by the parse cache)."""
    if not _needs(node, catalog):
        return node
    node = node.copy()
    ctes = {c.alias for c in node.find_all(exp.CTE)}
    create_target = _create_target(node)
    temp_create = isinstance(node, exp.Create) and _is_temp_create(node)
    for table in list(node.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or table.args.get("catalog"):
            continue
        if isinstance(table.parent, exp.AlterRename):
            continue  # done with its statement's target below
        db = table.db
        name = table.name
        if db and (db in SYSTEM_SCHEMAS or temp_tables.is_temp_schema(db)):
            continue
        if table is create_target:
            if temp_create:
                continue
            new = (
                qualified_creation(catalog, db, name)
                if db
                else _checked(key(creation_schema(catalog), name), name)
            )
        elif db:
            shadowed = catalog.tables.get(name)
            if db == PUBLIC and shadowed is not None and temp_tables.is_temp(shadowed):
                continue  # the binder refuses it (42P01): see docs/sql.md, temporary tables
            new = key(db, name)
        else:
            if name in ctes:
                continue
            new = resolve(catalog, name)
        _set_key(table, new, name)
    for column in node.find_all(exp.Column):
        db = column.args.get("db")
        if db is not None and column.args.get("table") is not None:
            if db.name not in SYSTEM_SCHEMAS:
                column.set("db", None)
    _qualify_renames(node)
    _qualify_index_name(node, catalog)
    return node


def _set_key(table: exp.Table, new: str, name: str) -> None:
    if new == name and not table.db:
        return
    table.set("db", None)
    table.set("this", exp.to_identifier(new, quoted=True) if new != name else table.this)
    if new != name and table.alias == "" and _reads(table):
        # ``FROM s.t`` is referred to as ``t`` (and ``s.t``, which loses its schema above)
        table.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))


def _reads(table: exp.Table) -> bool:
    parent = table.parent
    if isinstance(parent, exp.Schema) and isinstance(parent.parent, exp.Insert):
        return True  # INSERT INTO s.t (columns) ... ON CONFLICT ... t.column
    return isinstance(parent, _READ_PARENTS) or (
        isinstance(parent, exp.Insert) and parent.this is table
    )


def _needs(node: exp.Expression, catalog: Catalog) -> bool:
    """Whether anything may be rewritten (the common case, public only, costs a scan)."""
    if not is_default_path(catalog):
        return True
    for table in node.find_all(exp.Table):
        db = table.db
        if db and db not in SYSTEM_SCHEMAS and not temp_tables.is_temp_schema(db):
            return True
        if "." in table.name:  # a quoted name with a dot: refused if it is created
            return True
    for column in node.find_all(exp.Column):
        if column.args.get("db") is not None:
            return True
    return False


def _create_target(node: exp.Expression) -> exp.Table | None:
    if not isinstance(node, exp.Create):
        return None
    target = node.this
    if isinstance(target, exp.Schema):
        target = target.this
    return target if isinstance(target, exp.Table) else None


def _is_temp_create(node: exp.Create) -> bool:
    props = node.args.get("properties")
    if props is None:
        return False
    return any(isinstance(p, exp.TemporaryProperty) for p in props.expressions)


def _qualify_renames(node: exp.Expression) -> None:
    """``ALTER TABLE s.t RENAME TO u`` / ``ALTER INDEX s.i RENAME TO j``: the new name is
    in the schema of the renamed object."""
    if not isinstance(node, exp.Alter) or not isinstance(node.this, exp.Table):
        return
    schema = schema_of(node.this.name)
    for action in node.args.get("actions") or ():
        if isinstance(action, exp.AlterRename) and isinstance(action.this, exp.Table):
            target = action.this
            if target.db and target.db != schema:
                raise SqlError("0A000", "cannot move an object to another schema by RENAME")
            new = _checked(key(schema, target.name), target.name)
            target.set("db", None)
            target.set("this", exp.to_identifier(new, quoted=True))


def _qualify_index_name(node: exp.Expression, catalog: Catalog) -> None:
    """``CREATE INDEX i ON s.t``: the index lives in its table's schema."""
    if not isinstance(node, exp.Create) or not isinstance(node.this, exp.Index):
        return
    index = node.this
    table = index.args.get("table")
    ident = index.this
    if not isinstance(table, exp.Table) or not isinstance(ident, exp.Identifier):
        return
    found = catalog.tables.get(table.name)
    if found is not None and temp_tables.is_temp(found):
        return
    schema = schema_of(table.name)
    if schema != PUBLIC:
        index.set("this", exp.to_identifier(key(schema, ident.name), quoted=True))


# -- CREATE / DROP / ALTER SCHEMA --------------------------------------------------------------


@dataclass(frozen=True)
class CreateSchema:
    """CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role]."""

    name: str
    if_not_exists: bool
    owner: str | None


@dataclass(frozen=True)
class DropSchema:
    """DROP SCHEMA [IF EXISTS] name [, ...] [CASCADE | RESTRICT]."""

    names: tuple[str, ...]
    if_exists: bool
    cascade: bool


@dataclass(frozen=True)
class RenameSchema:
    """ALTER SCHEMA name RENAME TO new."""

    name: str
    new_name: str


def parse_create(r: Any) -> CreateSchema:
    """``CREATE SCHEMA ...`` from the utility reader (server/sql/utility.py)."""
    r.expect("CREATE", "SCHEMA")
    if_not_exists = r.accept("IF", "NOT", "EXISTS")
    name: str | None = None
    owner = None
    if not r.at("AUTHORIZATION"):
        name = r.name()
    if r.accept("AUTHORIZATION"):
        owner = r.name()
    if not r.done():
        raise unsupported("CREATE SCHEMA with schema elements")
    if name is None:
        name = owner
    assert name is not None
    return CreateSchema(name, if_not_exists, owner)


def parse_drop(r: Any) -> DropSchema:
    """``DROP SCHEMA ...`` from the utility reader."""
    r.expect("DROP", "SCHEMA")
    names, if_exists, cascade = r.drop_list(r.name)
    return DropSchema(tuple(names), if_exists, cascade)


def parse_alter(r: Any) -> RenameSchema:
    """``ALTER SCHEMA name RENAME TO new`` from the utility reader (0A000 for other forms)."""
    r.expect("ALTER", "SCHEMA")
    name = r.name()
    if r.accept("RENAME", "TO"):
        new = r.name()
        r.end()
        return RenameSchema(name, new)
    raise unsupported("ALTER SCHEMA other than RENAME TO")


def _check_new_name(name: str) -> None:
    if name.startswith("pg_"):
        raise SqlError(
            RESERVED_NAME,
            f'unacceptable schema name "{name}"',
            detail='The prefix "pg_" is reserved for system schemas.',
        )
    if "." in name:
        raise unsupported(f'a schema name with a dot ("{name}")')


def create(catalog: Catalog, stmt: CreateSchema, user: str) -> tuple[Catalog, list[str]]:
    """The catalog with the schema made, and the notices to send."""
    _check_new_name(stmt.name)
    if stmt.name in SYSTEM_SCHEMAS or exists(catalog, stmt.name):
        if stmt.if_not_exists:
            return catalog, [f'schema "{stmt.name}" already exists, skipping']
        raise SqlError(DUPLICATE_SCHEMA, f'schema "{stmt.name}" already exists')
    owner = stmt.owner or user
    if owner not in catalog.roles and owner != user:
        raise SqlError("42704", f'role "{owner}" does not exist')
    new_id, catalog = catalog.allocate_id()
    return catalog.with_schema(SchemaDef(stmt.name, FIRST_USER_OID + new_id, owner)), []


def objects_in(catalog: Catalog, schema: str) -> list[tuple[str, str]]:
    """(kind, key) of the objects of ``schema``: what DROP SCHEMA CASCADE drops, in an order
    it can drop them in (views first, then tables with their sequences, then the rest)."""
    out: list[tuple[str, str]] = []
    out += [("view", k) for k in catalog.views if schema_of(k) == schema]
    out += [
        ("table", k)
        for k, t in catalog.tables.items()
        if schema_of(k) == schema and not temp_tables.is_temp(t)
    ]
    owned = {k for k, s in catalog.sequences.items() if s.table}
    out += [("sequence", k) for k in catalog.sequences if schema_of(k) == schema and k not in owned]
    out += [("type", k) for k in catalog.enums if schema_of(k) == schema]
    out += [
        ("function", f.signature) for f in catalog.functions.values() if schema_of(f.name) == schema
    ]
    return out


def drop(catalog: Catalog, stmt: DropSchema) -> tuple[Catalog, list[str]]:
    """The catalog without the schemas (and, with CASCADE, their objects); notices."""
    notices: list[str] = []
    doomed: list[str] = []
    objects: list[tuple[str, str]] = []
    for name in stmt.names:
        if name == PUBLIC or name in SYSTEM_SCHEMAS:
            raise unsupported(f'dropping schema "{name}"')
        if name not in catalog.schemas:
            if stmt.if_exists:
                notices.append(f'schema "{name}" does not exist, skipping')
                continue
            raise SqlError(INVALID_SCHEMA_NAME, f'schema "{name}" does not exist')
        held = objects_in(catalog, name)
        if held and not stmt.cascade:
            raise SqlError(
                DEPENDENT_OBJECTS_STILL_EXIST,
                f"cannot drop schema {name} because other objects depend on it",
                detail="\n".join(f"{kind} {k} depends on schema {name}" for kind, k in held),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        doomed.append(name)
        objects += held
    # All the schemas' objects at once: what references one of them from another of the
    # dropped schemas goes with its own schema, not as a cascaded constraint.
    catalog, cascaded = _drop_objects(catalog, objects)
    for name in doomed:
        catalog = catalog.without_schema(name)
    if len(cascaded) == 1:
        notices.append(f"drop cascades to {cascaded[0]}")
    elif cascaded:
        # Postgres lists them in the notice's DETAIL, which our notices do not carry.
        notices.append(f"drop cascades to {len(cascaded)} other objects")
    return catalog, notices


def _drop_objects(catalog: Catalog, objects: list[tuple[str, str]]) -> tuple[Catalog, list[str]]:
    """``catalog`` without ``objects``, the views of other schemas that read them, and the
    foreign keys of other schemas' tables that reference them (as CASCADE does); and what
    was dropped, as the notice names it."""
    doomed_tables = {catalog.tables[k].id for kind, k in objects if kind == "table"}
    doomed_views = {catalog.views[k].id for kind, k in objects if kind == "view"}
    dropped: list[str] = []
    extra_views: list[str] = []
    changed = True
    while changed:  # views over views: until no more depend on what goes
        changed = False
        for v in catalog.views.values():
            if v.id in doomed_views:
                continue
            if set(v.table_ids) & doomed_tables or set(v.view_ids) & doomed_views:
                doomed_views.add(v.id)
                extra_views.append(v.name)
                changed = True
    doomed_keys = {k for kind, k in objects if kind == "table"}
    for kind, k in objects:
        if kind != "type":
            continue
        from percolator.server.sql.enums import dependents  # enums needs this module

        for table, column in dependents(catalog, catalog.enums[k]):
            if table not in doomed_keys:
                # Postgres drops the column; dropping columns is ALTER TABLE's work.
                raise unsupported(
                    f"DROP SCHEMA CASCADE of type {_shown(k)} while column {column} of "
                    f"table {_shown(table)} uses it (drop the column first)"
                )
    for k in extra_views:
        dropped.append(f"view {_shown(k)}")
        catalog = catalog.without_view(k)
    for t in list(catalog.tables.values()):
        if t.id in doomed_tables:
            continue
        kept = tuple(fk for fk in t.foreign_keys if fk.ref_table_id not in doomed_tables)
        if kept != t.foreign_keys:
            for fk in t.foreign_keys:
                if fk not in kept:
                    dropped.append(f"constraint {fk.name} on table {_shown(t.name)}")
            catalog = catalog.with_table(t.replace(foreign_keys=kept))
    for kind, k in objects:
        dropped.append(f"{kind} {_shown(k)}")
        if kind == "view":
            catalog = catalog.without_view(k)
        elif kind == "table":
            catalog = catalog.without_table(k)
        elif kind == "sequence":
            sequences = {n: s for n, s in catalog.sequences.items() if n != k}
            catalog = _replace(catalog, sequences=sequences)
        elif kind == "type":
            catalog = catalog.without_enum(k)
        elif kind == "function":
            for t in list(catalog.tables.values()):  # its triggers go with it
                kept = tuple(tr for tr in t.triggers if tr.function != k)
                if kept != t.triggers:
                    dropped += [
                        f"trigger {tr.name} on table {_shown(t.name)}"
                        for tr in t.triggers
                        if tr not in kept
                    ]
                    catalog = catalog.with_table(t.replace(triggers=kept))
            catalog = catalog.without_function(k)
    return catalog, dropped


def _shown(k: str) -> str:
    """An object as DROP ... CASCADE's notice names it: always schema-qualified."""
    schema, name = split(k)
    return f"{schema}.{name}"


def _replace(catalog: Catalog, **changes: object) -> Catalog:
    return dataclasses.replace(catalog, **changes)  # type: ignore[arg-type]


def rename(catalog: Catalog, stmt: RenameSchema) -> Catalog:
    """ALTER SCHEMA RENAME TO, of a schema that holds nothing yet (0A000 otherwise)."""
    if stmt.name not in catalog.schemas:
        raise SqlError(INVALID_SCHEMA_NAME, f'schema "{stmt.name}" does not exist')
    _check_new_name(stmt.new_name)
    if exists(catalog, stmt.new_name) or stmt.new_name in SYSTEM_SCHEMAS:
        raise SqlError(DUPLICATE_SCHEMA, f'schema "{stmt.new_name}" already exists')
    if objects_in(catalog, stmt.name) or any(
        schema_of(ix.name) == stmt.name for _, ix in catalog.all_indexes()
    ):
        # Keys embed the schema's name; moving every object (and the view texts that name
        # them) is not done.
        raise unsupported("ALTER SCHEMA RENAME of a schema that holds objects")
    old = catalog.schemas[stmt.name]
    catalog = catalog.without_schema(stmt.name)
    return catalog.with_schema(SchemaDef(stmt.new_name, old.oid, old.owner, old.comment))


SchemaStatement = CreateSchema | DropSchema | RenameSchema


def apply(catalog: Catalog, stmt: SchemaStatement, user: str) -> tuple[Catalog, list[str], str]:
    """Run a schema statement: the new catalog, its notices and its command tag."""
    if isinstance(stmt, CreateSchema):
        after, notices = create(catalog, stmt, user)
        return after, notices, "CREATE SCHEMA"
    if isinstance(stmt, DropSchema):
        after, notices = drop(catalog, stmt)
        return after, notices, "DROP SCHEMA"
    return rename(catalog, stmt), [], "ALTER SCHEMA"
