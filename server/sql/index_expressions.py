"""Indexes on expressions: ``CREATE [UNIQUE] INDEX i ON t (lower(email))``, ``((a + b))``,
``(lower(name), id)``, as Postgres has them.

An expression key column keeps its expression as SQL text in :attr:`IndexDef.expressions`
and 0 in ``column_ids`` (pg_index.indkey's 0). The table's writer computes the key from the
row (:func:`bind_all`, compiled by the index's codec) on every path that writes index
entries; the planner matches a WHERE conjunct's side against the bound expression
(:func:`bind_all` again, attached to the table's scan by the binder). What lives here:
reading the CREATE INDEX key list, checking an expression when the DDL runs, binding it,
naming and printing it as Postgres does, and following renames and drops of the columns read.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from percolator.server.sql.bound import BExpr, walk
from percolator.server.sql.catalog import IndexDef, TableDef
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    INVALID_OBJECT_DEFINITION,
    UNDEFINED_OBJECT,
    SqlError,
)
from percolator.server.sql.row_expressions import (
    expression_reads,
    not_immutable,
    refuse_outside_row,
    rename_reads,
    row_scope,
)
from percolator.server.sql.types import SqlType, TypeId, key_type

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder


@dataclasses.dataclass(frozen=True)
class KeyItem:
    """One key column of CREATE INDEX: a column id, or an expression (id 0)."""

    column_id: int
    expression: str | None
    descending: bool
    opclass: str | None = None
    """The operator class named after it (``email varchar_pattern_ops``), None for the
    default."""


OPERATOR_CLASSES: dict[str, tuple[int, frozenset[TypeId]]] = {
    "text_ops": (3126, frozenset({TypeId.TEXT, TypeId.VARCHAR})),
    "varchar_ops": (10044, frozenset({TypeId.TEXT, TypeId.VARCHAR})),
    "text_pattern_ops": (4217, frozenset({TypeId.TEXT, TypeId.VARCHAR})),
    "varchar_pattern_ops": (4218, frozenset({TypeId.TEXT, TypeId.VARCHAR})),
    "bpchar_ops": (10004, frozenset({TypeId.BPCHAR})),
    "bpchar_pattern_ops": (4219, frozenset({TypeId.BPCHAR})),
}
"""The btree operator classes an index key may name (Django's ``*_like`` indexes use the
pattern ones): pg_opclass oid and the types they accept. Keys are stored in byte order, which
is the C collation's order that the pattern classes define, so each orders as its default."""


def check_opclass(opclass: str, t: SqlType) -> None:
    """Refuse ``opclass`` for a key of type ``t``, as Postgres does: 42704 for a class that
    does not exist, 42804 for one of another type."""
    found = OPERATOR_CLASSES.get(opclass)
    if found is None:
        raise SqlError(
            UNDEFINED_OBJECT, f'operator class "{opclass}" does not exist for access method "btree"'
        )
    if t.array or t.id not in found[1]:
        raise SqlError(
            DATATYPE_MISMATCH, f'operator class "{opclass}" does not accept data type {t}'
        )


def key_item(table: TableDef, node: exp.Expression) -> KeyItem:
    """The key column ``node`` of CREATE INDEX's list (``email``, ``lower(email)``,
    ``(a + b) DESC``) over ``table``."""
    desc = bool(isinstance(node, exp.Ordered) and node.args.get("desc"))
    e = node.this if isinstance(node, exp.Ordered) else node
    opclass = None
    if isinstance(e, exp.Opclass):
        opclass = e.expression.name.lower()
        e = e.this
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column) and not e.table:
        column = table.column(e.name)
        if opclass is not None:
            check_opclass(opclass, column.type)
        return KeyItem(column.id, None, desc, _named(opclass))
    return KeyItem(0, e.sql(dialect="postgres"), desc, _named(opclass))


def _named(opclass: str | None) -> str | None:
    """The class to record: None for one that is the default of every type it accepts, as
    Postgres's pg_get_indexdef leaves those out. (An expression's type is checked against
    the recorded class only, in :func:`validate`: ``((n + 1) text_ops)`` passes, where
    Postgres says 42804.)"""
    return None if opclass in _DEFAULT_CLASSES else opclass


_DEFAULT_CLASSES = frozenset({"text_ops", "bpchar_ops"})


def name_part(table: TableDef, item: KeyItem) -> str:
    """The word a key column gives the index's default name, as Postgres's FigureColname:
    the column's name, a function's name, a cast's operand's, else ``expr``."""
    if item.expression is None:
        return table.column_by_id(item.column_id).name
    node = sqlglot.parse_one(item.expression, read="postgres")
    while isinstance(node, exp.Cast):
        node = node.this
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
        return node.sql_name().lower()
    return "expr"


def column_names(table: TableDef, items: list[KeyItem]) -> list[str]:
    """The index's column names (pg_attribute, and the words of its default name), as
    Postgres's ChooseIndexColumnNames: :func:`name_part` of each, numbered when an earlier
    one took it (``expr``, ``expr1``)."""
    names: list[str] = []
    for item in items:
        base = name = name_part(table, item)
        n = 0
        while name in names:
            n += 1
            name = f"{base}{n}"
        names.append(name)
    return names


def _parse(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="postgres")


def bind(binder: Binder, table: TableDef, sql: str) -> BExpr:
    """The expression ``sql`` bound over a row of ``table``."""
    return binder.exprs.bind(_parse(sql), row_scope(table))


def bind_all(binder: Binder, table: TableDef) -> dict[int, list[BExpr | None]]:
    """Per index of ``table`` that has expressions (by index id): each key column's bound
    expression, None for a plain column."""
    return {
        ix.id: [None if s is None else bind(binder, table, s) for s in ix.expressions]
        for ix in table.indexes
        if has_expressions(ix)
    }


def bind_predicates(binder: Binder, table: TableDef) -> dict[int, BExpr]:
    """Per partial index of ``table`` (by index id): its WHERE bound over the row."""
    return {
        # As a condition: an untyped literal (``WHERE 'true'``) reads as a boolean.
        ix.id: binder.exprs.bind_condition(_parse(ix.predicate), row_scope(table), "WHERE")
        for ix in table.indexes
        if ix.predicate is not None
    }


def has_expressions(index: IndexDef) -> bool:
    """Whether some key column of ``index`` is an expression."""
    return any(s is not None for s in index.expressions)


def validate(binder: Binder, table: TableDef, index: IndexDef) -> None:
    """Refuse, as Postgres does at CREATE INDEX, an expression that is not an immutable
    function of the row: a subquery (0A000), an aggregate (42803), a window function (42P20),
    a volatile or stable function (42P17), or a type btree cannot order (42704); and a
    partial index's predicate that is not such a function (the same errors) or not boolean
    (42804)."""
    if index.predicate is not None:
        _validate_predicate(binder, table, index.predicate)
    for i, sql in enumerate(index.expressions):
        if sql is None:
            continue
        refuse_outside_row(binder, _parse(sql), "index expression")
        e = bind(binder, table, sql)
        opclass = index.opclass(i)
        if opclass is not None:
            check_opclass(opclass, e.type)
        if any(not_immutable(n) for n in walk(e)):
            raise SqlError(
                INVALID_OBJECT_DEFINITION, "functions in index expression must be marked IMMUTABLE"
            )
        if key_type(e.type) is None:
            raise SqlError(
                UNDEFINED_OBJECT,
                f'data type {e.type} has no default operator class for access method "btree"',
            )


def _validate_predicate(binder: Binder, table: TableDef, sql: str) -> None:
    refuse_outside_row(binder, _parse(sql), "index predicate")
    e = binder.exprs.bind_condition(_parse(sql), row_scope(table), "WHERE")
    if any(not_immutable(n) for n in walk(e)):
        raise SqlError(
            INVALID_OBJECT_DEFINITION, "functions in index predicate must be marked IMMUTABLE"
        )


def reads(index: IndexDef, names: set[str]) -> bool:
    """Whether an expression or the predicate of ``index`` reads a column named in
    ``names``."""
    texts = (*index.expressions, index.predicate)
    return any(s is not None and expression_reads(s, names) for s in texts)


def rename_column(table: TableDef, old: str, new: str) -> TableDef:
    """After column ``old`` became ``new``: the index expressions that read it say so."""

    def renamed(ix: IndexDef) -> IndexDef:
        if not reads(ix, {old}):
            return ix
        exprs = tuple(None if s is None else rename_reads(s, old, new) for s in ix.expressions)
        predicate = None if ix.predicate is None else rename_reads(ix.predicate, old, new)
        return dataclasses.replace(ix, expressions=exprs, predicate=predicate)

    return table.replace(indexes=tuple(renamed(ix) for ix in table.indexes))


def looks_like_function(sql: str) -> bool:
    """Whether Postgres prints the expression bare in an index's key list (a function call)
    rather than in parentheses (``((a + b))``, ``((a)::text)``)."""
    node = _parse(sql)
    return isinstance(node, exp.Func) and not isinstance(node, exp.Cast | exp.Binary)


__all__ = [
    "KeyItem",
    "bind",
    "bind_all",
    "bind_predicates",
    "check_opclass",
    "column_names",
    "has_expressions",
    "key_item",
    "looks_like_function",
    "name_part",
    "reads",
    "rename_column",
    "validate",
]
