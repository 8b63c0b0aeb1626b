"""COMMENT ON: descriptions of tables, views, columns, indexes, sequences and constraints.

A comment is kept in the catalog on the definition of its object (``TableDef.comment``,
``ColumnDef.comment``, ...), so renaming the object keeps it and dropping the object, or the
column, drops it, with no bookkeeping of its own. The primary key's constraint and index are
implicit in the catalog, so their comments live on the table (``pk_comment``,
``pk_index_comment``); a UNIQUE constraint's on the index that implements it
(``constraint_comment``).

pg_description shows them computed from the catalog, under the OIDs pg_class and
pg_constraint show (so a column's ``objsubid`` is its current attnum), and
``obj_description`` / ``col_description`` read that.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from percolator.server.sql import schemas
from percolator.server.sql.catalog import (
    FIRST_USER_OID,
    PUBLIC_NAMESPACE_OID,
    Catalog,
    TableDef,
    ViewDef,
)
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_OBJECT,
    UNDEFINED_TABLE,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)

PG_CLASS = 1259
PG_CONSTRAINT = 2606
PG_NAMESPACE = 2615
PG_DATABASE = 1262

PUBLIC_SCHEMA_COMMENT = "standard public schema"
"""What initdb gives schema public (Postgres 15), as pg_description and ``\\dn+`` show."""

_KINDS = ("TABLE", "VIEW", "COLUMN", "INDEX", "SEQUENCE", "CONSTRAINT")

# Object kinds Postgres can comment on that are named by more than one keyword (for the 0A000
# message that names what is not supported).
_MULTI_WORD = (
    ("MATERIALIZED", "VIEW"),
    ("FOREIGN", "TABLE"),
    ("FOREIGN", "DATA", "WRAPPER"),
    ("EVENT", "TRIGGER"),
    ("ACCESS", "METHOD"),
    ("LARGE", "OBJECT"),
    ("OPERATOR", "CLASS"),
    ("OPERATOR", "FAMILY"),
    ("PROCEDURAL", "LANGUAGE"),
    ("TEXT", "SEARCH", "CONFIGURATION"),
    ("TEXT", "SEARCH", "DICTIONARY"),
    ("TEXT", "SEARCH", "PARSER"),
    ("TEXT", "SEARCH", "TEMPLATE"),
)


@dataclass(frozen=True)
class CommentOn:
    """``COMMENT ON kind name IS 'text' | NULL``; for CONSTRAINT, ``table`` is the table it is
    ON. Names are the dotted parts as written (case folded unless quoted)."""

    kind: str
    name: tuple[str, ...]
    text: str | None
    table: tuple[str, ...] = ()


# -- parsing (from server/sql/utility.py's reader) -------------------------------------------


def parse(r: Any) -> CommentOn:
    """Read a COMMENT ON statement; kinds other than :data:`_KINDS` are refused (0A000)."""
    r.expect("COMMENT")
    r.expect("ON")
    start = r.peek()
    if start is None:
        r.error("syntax error at end of input")
    kind = start.upper
    if kind not in _KINDS:
        for words in _MULTI_WORD:
            if r.at(*words):
                kind = " ".join(words)
                break
        raise unsupported(f"COMMENT ON {kind}")
    r.next()
    name = _qualified(r)
    table: tuple[str, ...] = ()
    if kind == "CONSTRAINT":
        if len(name) != 1:
            r.error(f'syntax error at or near "{r.peek().text if r.peek() else ""}"')
        r.expect("ON")
        if r.at("DOMAIN"):
            raise unsupported("COMMENT ON CONSTRAINT ... ON DOMAIN")
        table = _qualified(r)
    if not r.accept("IS"):
        t = r.peek()
        r.error(f'syntax error at or near "{t.text}"' if t else "syntax error at end of input")
    t = r.next()
    text: str | None
    if t.kind in ("str", "dollar"):
        text = t.value  # an E'...' string's escapes decoded by the tokenizer
    elif t.upper == "NULL":
        text = None
    else:
        r.error(f'syntax error at or near "{t.text}"', t)
    r.end()
    # Postgres stores no empty description: '' removes the comment, as NULL does.
    return CommentOn(kind, name, text or None, table)


def _qualified(r: Any) -> tuple[str, ...]:
    """A possibly dotted name: ``t``, ``public.t``, ``"T"."c"`` (the tokenizer reads
    ``public.t`` as one word and ``t."C"`` as the word ``t.`` and an identifier)."""
    parts: list[str] = []
    while True:
        t = r.next()
        if t.kind == "word":
            pieces = t.text.lower().split(".")
            parts.extend(p for p in pieces if p)
            if not t.text.endswith("."):
                if not r.accept("."):
                    break
        elif t.kind == "ident":
            parts.append(t.value)
            if not r.accept("."):
                break
        else:
            r.error(f'syntax error at or near "{t.text}"', t)
    return tuple(parts)


# -- applying it to the catalog ---------------------------------------------------------------


def apply(catalog: Catalog, stmt: CommentOn) -> Catalog:
    """The catalog with the comment set (or removed); 42P01 / 42703 / 42704 / 42809 as
    Postgres for an object that does not exist or is of another kind."""
    text = stmt.text
    if stmt.kind == "COLUMN":
        if len(stmt.name) < 2:
            raise SqlError(SYNTAX_ERROR, "column name must be qualified")
        relation = _relation_name(catalog, stmt.name[:-1])
        return _comment_column(catalog, relation, stmt.name[-1], text)
    if stmt.kind == "CONSTRAINT":
        return _comment_constraint(catalog, _relation_name(catalog, stmt.table), stmt.name[0], text)
    name = _relation_name(catalog, stmt.name)
    if stmt.kind == "TABLE":
        table = catalog.tables.get(name)
        if table is None:
            _not_found_or_wrong_kind(catalog, name, "a table")
        return catalog.with_table(table.replace(comment=text))  # type: ignore[union-attr]
    if stmt.kind == "VIEW":
        view = catalog.views.get(name)
        if view is None:
            _not_found_or_wrong_kind(catalog, name, "a view")
        return catalog.with_view(view.replace(comment=text))  # type: ignore[union-attr]
    if stmt.kind == "SEQUENCE":
        seq = catalog.sequences.get(name)
        if seq is None:
            _not_found_or_wrong_kind(catalog, name, "a sequence")
        return catalog.with_sequence(dataclasses.replace(seq, comment=text))  # type: ignore[type-var]
    return _comment_index(catalog, name, text)


def _relation_name(catalog: Catalog, parts: tuple[str, ...]) -> str:
    """The catalog key of the relation a (schema-qualified) name means (through the search
    path when unqualified: server/sql/schemas.py)."""
    if len(parts) == 1:
        return schemas.resolve(catalog, parts[0])
    if len(parts) == 2:
        if parts[0] in ("pg_catalog", "information_schema", "percolator"):
            raise unsupported("COMMENT ON system catalogs")
        if not schemas.exists(catalog, parts[0]):
            raise SqlError("3F000", f'schema "{parts[0]}" does not exist')
        return schemas.key(parts[0], parts[1])
    raise SqlError(
        FEATURE_NOT_SUPPORTED,
        f'cross-database references are not implemented: "{".".join(parts)}"',
    )


def _not_found_or_wrong_kind(catalog: Catalog, name: str, kind: str) -> None:
    """42809 when ``name`` is a relation of another kind, else 42P01 (Postgres's order)."""
    if catalog.relation_exists(name) or _pk_index_table(catalog, name) is not None:
        raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not {kind}')
    raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')


def _pk_index_table(catalog: Catalog, name: str) -> TableDef | None:
    """The table whose primary key's (implicit) index is named ``name``."""

    for t in catalog.tables.values():
        if t.primary_key and t.pk_constraint_name == name:
            return t
    return None


def _comment_index(catalog: Catalog, name: str, text: str | None) -> Catalog:
    found = catalog.index(name)
    if found is not None:
        table, ix = found
        indexes = tuple(
            dataclasses.replace(i, comment=text) if i.id == ix.id else i for i in table.indexes
        )
        return catalog.with_table(table.replace(indexes=indexes))
    table = _pk_index_table(catalog, name)
    if table is None:
        _not_found_or_wrong_kind(catalog, name, "an index")
    return catalog.with_table(table.replace(pk_index_comment=text))  # type: ignore[union-attr]


def _comment_column(catalog: Catalog, relation: str, column: str, text: str | None) -> Catalog:
    table = catalog.tables.get(relation)
    if table is not None:
        col = table.column(column)  # 42703 as Postgres words it
        columns = tuple(
            dataclasses.replace(c, comment=text) if c.id == col.id else c for c in table.columns
        )
        return catalog.with_table(table.replace(columns=columns))
    view = catalog.views.get(relation)
    if view is not None:
        return catalog.with_view(_view_column_comment(view, column, text))
    if catalog.relation_exists(relation) or _pk_index_table(catalog, relation) is not None:
        plural = "sequences" if relation in catalog.sequences else "indexes"
        raise SqlError(
            WRONG_OBJECT_TYPE,
            f'cannot set comment on relation "{relation}"',
            detail=f"This operation is not supported for {plural}.",
        )
    raise SqlError(UNDEFINED_TABLE, f'relation "{relation}" does not exist')


def _view_column_comment(view: ViewDef, column: str, text: str | None) -> ViewDef:
    for i, c in enumerate(view.columns):
        if c.name == column:
            columns = list(view.columns)
            columns[i] = dataclasses.replace(c, comment=text)
            return view.replace(columns=tuple(columns))
    raise SqlError(UNDEFINED_COLUMN, f'column "{column}" of relation "{view.name}" does not exist')


def _comment_constraint(catalog: Catalog, relation: str, name: str, text: str | None) -> Catalog:

    table = catalog.tables.get(relation)
    if table is None:
        if relation not in catalog.views:
            raise SqlError(UNDEFINED_TABLE, f'relation "{relation}" does not exist')
    else:
        if table.primary_key and table.pk_constraint_name == name:
            return catalog.with_table(table.replace(pk_comment=text))
        for ix in table.indexes:
            if ix.constraint and ix.name == name:
                indexes = tuple(
                    dataclasses.replace(i, constraint_comment=text) if i.id == ix.id else i
                    for i in table.indexes
                )
                return catalog.with_table(table.replace(indexes=indexes))
        for n, ck in enumerate(table.checks):
            if ck.name == name:
                checks = list(table.checks)
                checks[n] = dataclasses.replace(ck, comment=text)
                return catalog.with_table(table.replace(checks=tuple(checks)))
        for n, fk in enumerate(table.foreign_keys):
            if fk.name == name:
                fks = list(table.foreign_keys)
                fks[n] = dataclasses.replace(fk, comment=text)
                return catalog.with_table(table.replace(foreign_keys=tuple(fks)))
    raise SqlError(UNDEFINED_OBJECT, f'constraint "{name}" for table "{relation}" does not exist')


# -- pg_description and the *_description functions ------------------------------------------

Description = tuple[int, int, int, str]
"""A row of pg_description: (objoid, classoid, objsubid, description)."""


def descriptions(catalog: Catalog) -> list[Description]:
    """pg_description's rows: every comment in the catalog, and schema public's."""
    from percolator.server.sql import pg_catalog_tables as pgc

    out: list[Description] = [(PUBLIC_NAMESPACE_OID, PG_NAMESPACE, 0, PUBLIC_SCHEMA_COMMENT)]

    def add(oid: int, classoid: int, subid: int, text: str | None) -> None:
        if text is not None:
            out.append((oid, classoid, subid, text))

    for t in sorted(catalog.tables.values(), key=lambda t: t.id):
        add(t.oid, PG_CLASS, 0, t.comment)
        for i, c in enumerate(t.columns):
            add(t.oid, PG_CLASS, i + 1, c.comment)
        if t.primary_key:
            add(pgc.pk_index_oid(t), PG_CLASS, 0, t.pk_index_comment)
            add(pgc.PK_CONSTRAINT_OID_BASE + t.id, PG_CONSTRAINT, 0, t.pk_comment)
        for ix in t.indexes:
            add(ix.oid, PG_CLASS, 0, ix.comment)
            if ix.constraint:
                oid = pgc.UNIQUE_CONSTRAINT_OID_BASE + ix.oid - FIRST_USER_OID
                add(oid, PG_CONSTRAINT, 0, ix.constraint_comment)
        for n, ck in enumerate(t.checks):
            add(pgc.check_constraint_oid(t, n), PG_CONSTRAINT, 0, ck.comment)
        for n, fk in enumerate(t.foreign_keys):
            add(pgc.fk_constraint_oid(t, n), PG_CONSTRAINT, 0, fk.comment)
    for v in sorted(catalog.views.values(), key=lambda v: v.id):
        add(v.oid, PG_CLASS, 0, v.comment)
        for i, vc in enumerate(v.columns):
            add(v.oid, PG_CLASS, i + 1, vc.comment)
    for s in sorted(catalog.sequences.values(), key=lambda s: s.oid):
        add(s.oid, PG_CLASS, 0, s.comment)
    return out


_cache: tuple[Catalog, dict[tuple[int, int, int], str]] | None = None


def _by_key(catalog: Catalog) -> dict[tuple[int, int, int], str]:
    """pg_description keyed by (objoid, classoid, objsubid), for the last catalog asked
    (psql calls col_description once per column)."""
    global _cache
    if _cache is None or _cache[0] is not catalog:
        _cache = (catalog, {(o, c, s): d for o, c, s, d in descriptions(catalog)})
    return _cache[1]


def _catalog_oid(ctx: Any, name: str) -> int | None:
    """The OID of the system catalog ``name`` ('pg_class'), as obj_description looks it up."""
    from percolator.server.sql import pg_catalog_tables as pgc

    for r in pgc.relations(ctx.catalog):
        if r.system is not None and r.system.schema == "pg_catalog" and r.name == name:
            return r.oid
    return None


def obj_description(ctx: Any, oid: int | None, catalog_name: str | None = None) -> str | None:
    """obj_description(oid, 'pg_class'): the object's comment; with one argument, the first
    comment of any catalog's object with that OID (deprecated in Postgres, still there)."""
    if oid is None:
        return None
    found = _by_key(ctx.catalog)
    if catalog_name is None:
        for (o, _c, s), text in found.items():
            if o == oid and s == 0:
                return text
        return None
    classoid = _catalog_oid(ctx, catalog_name)
    return found.get((int(oid), classoid, 0)) if classoid is not None else None


def col_description(ctx: Any, table_oid: int | None, attnum: int | None) -> str | None:
    """col_description(table, attnum): a column's comment."""
    if table_oid is None or attnum is None:
        return None
    return _by_key(ctx.catalog).get((int(table_oid), PG_CLASS, int(attnum)))


def shobj_description(ctx: Any, oid: int | None, catalog_name: str | None) -> str | None:
    """shobj_description(oid, 'pg_database'): the comments on shared objects. Only the one
    initdb gives database postgres exists (COMMENT ON DATABASE / ROLE are not supported)."""
    from percolator.server.sql.pg_catalog_tables import DATABASE_OID

    if oid == DATABASE_OID and catalog_name == "pg_database" and ctx.database == "postgres":
        return "default administrative connection database"
    return None


__all__ = [
    "CommentOn",
    "apply",
    "col_description",
    "descriptions",
    "obj_description",
    "parse",
    "shobj_description",
]
