"""Views: CREATE / DROP / ALTER VIEW, the expansion of a view where a query names it, and the
dependencies between views and the relations they read.

A view is stored as query text (:class:`~percolator.server.sql.catalog.ViewDef`) and expanded
at query time as a subquery in FROM, bound against the catalog of that query, as Postgres's
rewriter does. So that later DDL does not change what a view means, the text stored is the
query with its stars expanded and every column reference qualified by its relation
(sqlglot's ``qualify`` with the catalog as schema): a column added to a table does not appear
in a ``SELECT *`` view, and renaming a column or a table rewrites the references in the views
that use it (Postgres keeps views working across renames because it stores the parsed tree).
When qualifying fails or changes what the query binds to, the query is stored as written
(those views do not follow renames: the rename is refused).

Dependencies: each view records the tables and views it reads directly; DROP TABLE / DROP
VIEW refuse (2BP01) while a view depends on the relation, or drop the views too with
CASCADE. ALTER TABLE ... DROP COLUMN binds the dependent views against the new catalog and
refuses (2BP01) when one no longer binds.

Views are read-only (55000 "cannot insert into view", as Postgres says of a view it cannot
update): Postgres's automatically updatable
views are not implemented.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from percolator.server.sql import modifying_ctes, relation_kinds, schemas
from percolator.server.sql.bound import BColumn, OutCol, ProjectRel, Rel
from percolator.server.sql.catalog import Catalog, TableDef, ViewColumn, ViewDef
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_COLUMN,
    DUPLICATE_TABLE,
    INVALID_TABLE_DEFINITION,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    SYNTAX_ERROR,
    UNDEFINED_TABLE,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder

INFINITE_RECURSION = "42P17"
_CASCADE_HINT = "Use DROP ... CASCADE to drop the dependent objects too."


@dataclass
class Dependencies:
    """What a binder read: the relations named directly (a view's dependencies), and every
    view expanded on the way (a plan's, for the catalog guard)."""

    tables: set[int] = field(default_factory=set)
    views: set[int] = field(default_factory=set)
    expanded: dict[str, ViewDef] = field(default_factory=dict)
    """Every view expanded, transitively, by name."""
    stack: tuple[str, ...] = ()
    """The views being expanded around this binder (a view reached again is a cycle)."""


# -- expansion ----------------------------------------------------------------------------------


def expand(binder: Binder, view: ViewDef, alias: str, col_aliases: list[str]) -> Rel:
    """The rows of ``view`` as a relation named ``alias``: its query bound against the
    binder's catalog (in a binder of its own: the view does not see the query's CTEs or
    outer columns), its columns named as the view names them."""
    outer = binder.dependencies
    if view.name in outer.stack:
        raise SqlError(
            INFINITE_RECURSION, f'infinite recursion detected in rules for relation "{view.name}"'
        )
    outer.views.add(view.id)
    outer.expanded[view.name] = view
    child = type(binder)(binder.catalog, binder.params)
    child.dependencies = Dependencies(expanded=outer.expanded, stack=(*outer.stack, view.name))
    # One statement's subqueries share one numbering: the view's go on from the query's.
    child.exprs.subquery_slots = binder.exprs.subquery_slots
    rel = child.bind_statement(_parse(view.query).copy()).rel  # type: ignore[union-attr]
    binder.exprs.subquery_slots = child.exprs.subquery_slots
    if len(rel.columns) < len(view.columns):
        raise SqlError("XX000", f'view "{view.name}" no longer matches its definition')
    cols = [
        OutCol(
            col_aliases[i] if i < len(col_aliases) else c.name,
            rel.columns[i].type,
            view.oid,
            i + 1,
            alias,
        )
        for i, c in enumerate(view.columns)
    ]
    return ProjectRel(cols, rel, [BColumn(c.type, i) for i, c in enumerate(cols)])


@functools.lru_cache(maxsize=512)
def _parse(text: str) -> exp.Expression:
    """A stored view query's parse (callers copy it: binding must not share nodes)."""
    return sqlglot.parse_one(text, read="postgres")


def refuse_write(node: exp.Expression, catalog: Catalog) -> None:
    """0A000 when ``node`` (the target of an INSERT, UPDATE or DELETE) names a view."""
    if not isinstance(node, exp.Table) or node.db not in ("", "public"):
        return
    if node.name not in catalog.views:
        return
    statement = node.find_ancestor(exp.Insert, exp.Update, exp.Delete)
    verb = {exp.Insert: "insert into", exp.Update: "update", exp.Delete: "delete from"}.get(
        type(statement), "write to"
    )
    # 55000, as Postgres reports a view it cannot update.
    raise SqlError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        f'cannot {verb} view "{node.name}"',
        detail="Percolator does not implement automatically updatable views.",
    )


# -- CREATE VIEW --------------------------------------------------------------------------------


def create_view(catalog: Catalog, node: exp.Create) -> Catalog:
    """``CREATE [OR REPLACE] VIEW name [(columns)] AS query``: the catalog with the view."""
    target = node.this
    names: list[str] = []
    if isinstance(target, exp.Schema):
        names = [e.name for e in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        raise SqlError(SYNTAX_ERROR, "CREATE VIEW needs a name")
    name = _relation_name(target)
    props = node.args.get("properties")
    if props is not None and any(isinstance(p, exp.TemporaryProperty) for p in props.expressions):
        raise unsupported("temporary views")
    query = node.args.get("expression")
    if not isinstance(query, exp.Query | exp.Values):
        raise SqlError(SYNTAX_ERROR, "CREATE VIEW needs AS followed by a query")
    if isinstance(query, exp.Select) and query.args.get("locks"):
        raise unsupported("FOR UPDATE in a view")
    existing = catalog.views.get(name)
    if existing is None and catalog.relation_exists(name):
        if node.args.get("replace") and name in catalog.tables:
            raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not a view')
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    if existing is not None and not node.args.get("replace"):
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    deps, rel = _bind(catalog, query)
    if len(names) > len(rel.columns):
        raise SqlError(SYNTAX_ERROR, "CREATE VIEW specifies more column names than columns")
    columns = tuple(
        ViewColumn(names[i] if i < len(names) else c.name, c.type)
        for i, c in enumerate(rel.columns)
    )
    seen: set[str] = set()
    for c in columns:
        if c.name in seen:
            raise SqlError(DUPLICATE_COLUMN, f'column "{c.name}" specified more than once')
        seen.add(c.name)
    text = _stored_text(catalog, query, [c.type for c in columns])
    if existing is not None:
        _check_replacement(existing, columns)
        # The columns kept are the same pg_attribute rows in Postgres: their comments stay.
        kept = tuple(
            dataclasses.replace(c, comment=old.comment)
            for c, old in zip(columns, existing.columns, strict=False)
        )
        view = existing.replace(query=text, columns=kept + columns[len(kept) :])
    else:
        view_id, catalog = catalog.allocate_id()
        view = ViewDef(view_id, name, text, columns)
    view = view.replace(table_ids=tuple(sorted(deps.tables)), view_ids=tuple(sorted(deps.views)))
    return catalog.with_view(view)


def _relation_name(table: exp.Table) -> str:
    if table.db and table.db != "public":
        raise SqlError("3F000", f'schema "{table.db}" does not exist')
    return table.name


def _bind(catalog: Catalog, query: exp.Expression) -> tuple[Dependencies, Rel]:
    """Bind a view's query against ``catalog``: what it depends on, and its relation."""
    from percolator.server.sql.binder import Binder  # the binder expands views: no cycle
    from percolator.server.sql.expr_binder import Params

    binder = Binder(catalog, Params())
    rel = binder.bind_statement(query.copy()).rel  # type: ignore[union-attr]
    if binder.modifying_ctes:
        raise modifying_ctes.in_view()
    return binder.dependencies, rel


def _check_replacement(old: ViewDef, new: tuple[ViewColumn, ...]) -> None:
    """CREATE OR REPLACE VIEW may add columns at the end, not drop, rename or retype any."""
    if len(new) < len(old.columns):
        raise SqlError(INVALID_TABLE_DEFINITION, "cannot drop columns from view")
    for o, n in zip(old.columns, new, strict=False):
        if o.name != n.name:
            raise SqlError(
                INVALID_TABLE_DEFINITION,
                f'cannot change name of view column "{o.name}" to "{n.name}"',
                hint="Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead.",
            )
        if o.type != n.type:
            raise SqlError(
                INVALID_TABLE_DEFINITION,
                f'cannot change data type of view column "{o.name}" from {o.type} to {n.type}',
            )


def _schema(catalog: Catalog) -> MappingSchema:
    """The catalog's relations for sqlglot's qualifier (only the column names matter)."""
    mapping: dict[str, dict[str, str]] = {}
    for t in catalog.tables.values():
        mapping[t.name] = {c.name: "int" for c in t.columns}
    for v in catalog.views.values():
        mapping[v.name] = {c.name: "int" for c in v.columns}
    return MappingSchema(mapping, dialect="postgres", normalize=False)


def _stored_text(catalog: Catalog, query: exp.Expression, types: list[Any]) -> str:
    """The text to store: the query qualified (stars expanded, columns qualified) when that
    binds to the same column types, else the query as written."""
    written = query.sql(dialect="postgres")
    try:
        qualified = qualify(
            query.copy(),
            schema=_schema(catalog),
            dialect="postgres",
            quote_identifiers=False,
            identify=False,
        )
        text = qualified.sql(dialect="postgres", identify=True)
        _, rel = _bind(catalog, _parse(text).copy())
    except Exception:  # any failure (sqlglot cannot qualify it): keep the query as written
        return written
    if [c.type for c in rel.columns] != types:
        return written
    return text


# -- DROP VIEW ----------------------------------------------------------------------------------


def drop_views(catalog: Catalog, node: exp.Drop, notices: list[str]) -> Catalog:
    """``DROP VIEW [IF EXISTS] name [, ...] [CASCADE]``."""
    targets = [_relation_name(t) for t in node.expressions or node.args.get("tables") or []]
    cascade = bool(node.args.get("cascade"))
    for name in targets:
        view = catalog.views.get(name)
        if view is None:
            relation_kinds.check_kind(catalog, name, "view")
            if node.args.get("exists"):
                notices.append(f'view "{schemas.bare(name)}" does not exist, skipping')
                continue
            raise SqlError(UNDEFINED_TABLE, f'view "{name}" does not exist')
        catalog = drop_dependents(
            catalog, f"view {name}", set(), {view.id}, targets, cascade, notices
        )
        catalog = catalog.without_view(name)
    return catalog


def dependents(catalog: Catalog, table_ids: set[int], view_ids: set[int]) -> list[ViewDef]:
    """The views that read one of the tables or views directly."""
    return [
        v
        for v in sorted(catalog.views.values(), key=lambda v: v.id)
        if table_ids.intersection(v.table_ids) or view_ids.intersection(v.view_ids)
    ]


def _closure(catalog: Catalog, first: Iterable[ViewDef]) -> list[ViewDef]:
    """``first`` and every view that depends on one of them, transitively."""
    out: list[ViewDef] = []
    todo = list(first)
    while todo:
        v = todo.pop(0)
        if any(o.id == v.id for o in out):
            continue
        out.append(v)
        todo.extend(dependents(catalog, set(), {v.id}))
    return out


def drop_dependents(
    catalog: Catalog,
    what: str,
    table_ids: set[int],
    view_ids: set[int],
    leaving: Iterable[str],
    cascade: bool,
    notices: list[str],
    *,
    column: str | None = None,
    views: list[ViewDef] | None = None,
) -> Catalog:
    """Before ``what`` (``table t``, ``view v``) is dropped: 2BP01 if views outside
    ``leaving`` depend on it, or with CASCADE those views dropped (and theirs)."""
    leaving = set(leaving)
    direct = views if views is not None else dependents(catalog, table_ids, view_ids)
    direct = [v for v in direct if v.name not in leaving]
    if not direct:
        return catalog
    subject = f"column {column} of {what}" if column else what
    if not cascade:
        raise SqlError(
            DEPENDENT_OBJECTS_STILL_EXIST,
            f"cannot drop {subject} because other objects depend on it",
            detail="\n".join(f"view {v.name} depends on {subject}" for v in direct),
            hint=_CASCADE_HINT,
        )
    doomed = [v for v in _closure(catalog, direct) if v.name not in leaving]
    if len(doomed) == 1:
        notices.append(f"drop cascades to view {doomed[0].name}")
    else:
        notices.append(f"drop cascades to {len(doomed)} other objects")
    for v in doomed:
        catalog = catalog.without_view(v.name)
    return catalog


# -- ALTER --------------------------------------------------------------------------------------


def alter_view(catalog: Catalog, node: exp.Alter, notices: list[str]) -> Catalog:
    """``ALTER VIEW [IF EXISTS] name RENAME TO new`` (other ALTER VIEW forms: 0A000)."""
    name = _relation_name(node.this)
    view = catalog.views.get(name)
    if view is None:
        if name in catalog.tables:
            raise SqlError(WRONG_OBJECT_TYPE, f'"{name}" is not a view')
        if node.args.get("exists"):
            notices.append(f'relation "{name}" does not exist, skipping')
            return catalog
        raise SqlError(UNDEFINED_TABLE, f'relation "{name}" does not exist')
    actions = node.args.get("actions") or []
    if len(actions) != 1 or not isinstance(actions[0], exp.AlterRename):
        raise unsupported("ALTER VIEW other than RENAME TO")
    new = _relation_name(actions[0].this)
    if catalog.relation_exists(new):
        raise SqlError(DUPLICATE_TABLE, f'relation "{new}" already exists')
    catalog = catalog.without_view(name).with_view(view.replace(name=new))
    return rename_relation(catalog, name, new, set(), {view.id})


def rename_relation(
    catalog: Catalog, old: str, new: str, table_ids: set[int], view_ids: set[int]
) -> Catalog:
    """After a table or view was renamed: the views that read it name it ``new``."""

    def rewrite(scope: Any) -> bool:
        changed = False
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and source.name == old and not source.db:
                if not source.alias:
                    # References qualified by the old name keep resolving through the alias.
                    source.set("alias", exp.TableAlias(this=exp.to_identifier(old)))
                source.set("this", exp.to_identifier(new))
                changed = True
        return changed

    return _rewrite_dependents(catalog, table_ids, view_ids, rewrite, f'relation "{old}"')


def rename_column(catalog: Catalog, table: TableDef, old: str, new: str) -> Catalog:
    """After a column of ``table`` was renamed: the views that read it name it ``new``."""

    def rewrite(scope: Any) -> bool:
        changed = False
        for col in scope.columns:
            source = scope.sources.get(col.table)
            if isinstance(source, exp.Table) and source.name == table.name and col.name == old:
                col.set("this", exp.to_identifier(new))
                changed = True
        return changed

    return _rewrite_dependents(
        catalog, {table.id}, set(), rewrite, f'column "{old}" of relation "{table.name}"'
    )


def _rewrite_dependents(
    catalog: Catalog, table_ids: set[int], view_ids: set[int], rewrite: Any, what: str
) -> Catalog:
    """Apply ``rewrite`` to every scope of the direct dependents' stored queries, then check
    that each still binds (a view stored as written may not have qualified references)."""
    for view in dependents(catalog, table_ids, view_ids):
        tree = _parse(view.query).copy()
        changed = False
        for scope in traverse_scope(tree):
            changed = rewrite(scope) or changed
        updated = view.replace(query=tree.sql(dialect="postgres", identify=True))
        if changed:
            catalog = catalog.with_view(updated)
        try:
            _, rel = _bind(catalog, _parse(updated.query).copy())
        except SqlError:
            rel = None
        if rel is None or [c.type for c in rel.columns[: len(view.columns)]] != [
            c.type for c in view.columns
        ]:
            raise unsupported(
                f'renaming {what}, which view "{view.name}" uses in a way that cannot be rewritten'
            )
    return catalog


def check_column_drop(
    before: Catalog,
    after: Catalog,
    table: TableDef,
    column: str,
    cascade: bool,
    notices: list[str],
) -> Catalog:
    """After dropping ``column`` from ``table``: 2BP01 when a view that reads the table no
    longer binds (it used the column), or with CASCADE those views dropped."""
    broken = []
    for view in dependents(before, {table.id}, set()):
        try:
            _bind(after, _parse(view.query).copy())
        except SqlError:
            broken.append(view)
    if not broken:
        return after
    return drop_dependents(
        after,
        f"table {table.name}",
        set(),
        set(),
        (),
        cascade,
        notices,
        column=column,
        views=broken,
    )


def column_users(catalog: Catalog, table: TableDef, column: str) -> list[ViewDef]:
    """The views that read ``column`` of ``table``: those that no longer bind without it
    (ALTER COLUMN ... TYPE refuses to change what they were created with)."""
    without = table.replace(columns=tuple(c for c in table.columns if c.name != column))
    after = catalog.with_table(without)
    users = []
    for view in dependents(catalog, {table.id}, set()):
        try:
            _bind(after, _parse(view.query).copy())
        except SqlError:
            users.append(view)
    return users


# -- pg_get_viewdef -----------------------------------------------------------------------------

_SAFE_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_$]*")


def definition(view: ViewDef) -> str:
    """The view's query as pg_get_viewdef shows it (a leading space, a closing semicolon;
    identifiers quoted only where needed, aliases that repeat a name left out)."""
    tree = _parse(view.query).copy()
    for alias in list(tree.find_all(exp.Alias)):
        inner = alias.this
        if isinstance(inner, exp.Column) and inner.name == alias.alias:
            alias.replace(inner)
    for table in tree.find_all(exp.Table):
        if "." in table.name and not table.db:
            # A table of another schema is stored by its key (server/sql/schemas.py).
            schema, bare = schemas.split(table.name)
            table.set("this", exp.to_identifier(bare))
            table.set("db", exp.to_identifier(schema))
        a = table.args.get("alias")
        if a is not None and not a.columns and a.name == table.name:
            table.set("alias", None)
    for ident in tree.find_all(exp.Identifier):
        ident.set("quoted", _needs_quotes(ident.name))
    return " " + tree.sql(dialect="postgres", pretty=True) + ";"


def _needs_quotes(name: str) -> bool:
    return _SAFE_IDENTIFIER.fullmatch(name) is None or name.upper() in Postgres.Tokenizer.KEYWORDS


__all__ = [
    "Dependencies",
    "alter_view",
    "check_column_drop",
    "create_view",
    "definition",
    "dependents",
    "drop_dependents",
    "drop_views",
    "expand",
    "refuse_write",
    "rename_column",
    "rename_relation",
]
