"""DDL-time checks of the expressions a statement stores: CHECK constraints, DEFAULTs,
generation expressions and index expressions.

They are stored as SQL text and bound when a row is written, so without this a CHECK naming
a missing column, or ``DEFAULT 'x'`` on an integer column, would be accepted and fail every
later INSERT. Postgres refuses them at CREATE / ALTER TABLE; :func:`validate` binds what the
statement added or changed against the new catalog and raises the same errors.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from percolator.server.sql import generated_columns, index_expressions
from percolator.server.sql.binder import Binder
from percolator.server.sql.bound import BExpr
from percolator.server.sql.catalog import Catalog, ColumnDef, TableDef
from percolator.server.sql.errors import UNDEFINED_COLUMN, SqlError
from percolator.server.sql.expr_binder import Params
from percolator.server.sql.row_expressions import row_scope


def validate(before: Catalog, after: Catalog) -> None:
    """Bind the CHECK constraints, column defaults and generation expressions that ``after``
    has and ``before`` did not (by table id), raising the binder's error for an invalid one."""
    old = {t.id: t for t in before.tables.values()}
    binder = Binder(after, Params())
    for table in after.tables.values():
        previous = old.get(table.id)
        if previous is table:
            continue
        known_checks = {(c.name, c.expression) for c in previous.checks} if previous else set()
        for ck in table.checks:
            if (ck.name, ck.expression) not in known_checks:
                _bind_check(binder, table, ck.expression)
        known_defaults = {(c.id, c.default) for c in previous.columns} if previous else set()
        known_generated = {(c.id, c.generated) for c in previous.columns} if previous else set()
        for col in table.columns:
            if col.default is not None and (col.id, col.default) not in known_defaults:
                _bind_default(binder, table, col)
            if col.generated is not None and (col.id, col.generated) not in known_generated:
                generated_columns.validate(binder, table, col)
        known_indexes = (
            {(ix.id, ix.expressions, ix.predicate) for ix in previous.indexes}
            if previous
            else set()
        )
        for ix in table.indexes:
            stored = index_expressions.has_expressions(ix) or ix.predicate is not None
            if stored and (ix.id, ix.expressions, ix.predicate) not in known_indexes:
                index_expressions.validate(binder, table, ix)


def _bind_check(binder: Binder, table: TableDef, sql: str) -> None:
    if sqlglot.parse_one(sql, read="postgres").find(exp.Select) is not None:
        raise SqlError("0A000", "cannot use subquery in check constraint")
    bind_table_expr(binder, table, sql)


def bind_table_expr(binder: Binder, table: TableDef, sql: str) -> BExpr:
    """A boolean expression (CHECK constraint) bound over a row of ``table``."""
    node = sqlglot.parse_one(sql, read="postgres")
    return binder.exprs.bind_condition(node, row_scope(table), "CHECK")


def _bind_default(binder: Binder, table: TableDef, col: ColumnDef) -> None:
    node = sqlglot.parse_one(col.default or "NULL", read="postgres")
    if node.find(exp.Select) is not None:
        raise SqlError("0A000", "cannot use subquery in DEFAULT expression")
    try:
        binder.default_expr(table, col)
    except SqlError as err:
        if err.sqlstate == UNDEFINED_COLUMN and node.find(exp.Column) is not None:
            raise SqlError("0A000", "cannot use column reference in DEFAULT expression") from None
        raise
