"""Expressions stored as SQL text over one row of a table: generation expressions
(:mod:`generated_columns`) and index expressions (:mod:`index_expressions`).

Both are bound over the table's row, must be pure functions of it (immutable), and must
follow the columns they read when those are renamed or dropped; what they share lives here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from percolator.server.sql.bound import BAsyncCall, BCall, BContextCall, BExpr, OutCol
from percolator.server.sql.catalog import TableDef
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    GROUPING_ERROR,
    WINDOWING_ERROR,
    SqlError,
)
from percolator.server.sql.scope import Scope
from percolator.server.sql.types import TypeId

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder


def row_scope(table: TableDef) -> Scope:
    """The scope of one row of ``table``: its columns at their positions."""
    cols = [
        OutCol(c.name, c.type, table.oid, i + 1, table.name) for i, c in enumerate(table.columns)
    ]
    return Scope(cols, None, {table.name})


def refuse_outside_row(binder: Binder, node: exp.Expression, what: str) -> None:
    """Refuse, as Postgres does, what no single row can compute in an expression stored with
    a table (``what``: "column generation expression", "index expression"): a subquery
    (0A000), an aggregate (42803), a window function (42P20)."""
    if node.find(exp.Select) is not None:
        raise SqlError(FEATURE_NOT_SUPPORTED, f"cannot use subquery in {what}")
    if binder.exprs.contains_aggregate(node):
        raise SqlError(GROUPING_ERROR, f"aggregate functions are not allowed in {what}s")
    if node.find(exp.Window) is not None:
        raise SqlError(WINDOWING_ERROR, f"window functions are not allowed in {what}s")
    parameter = node.find(exp.Parameter, exp.Placeholder)
    if parameter is not None:  # nothing would give it a value when a row is written
        raise SqlError("42P02", f"there is no parameter ${parameter.name}")


def not_immutable(e: BExpr) -> bool:
    """Whether a node may give another value for the same row: a volatile function, one that
    reads the session or the clock (now(), current_user, date_trunc of a timestamptz), one
    awaited (nextval), or one Postgres marks stable (below)."""
    if isinstance(e, BContextCall | BAsyncCall):
        return True
    return isinstance(e, BCall) and (e.volatile or _stable(e))


_TEXTUAL = frozenset({TypeId.TEXT, TypeId.VARCHAR, TypeId.BPCHAR})
_DATETIME = frozenset(
    {TypeId.DATE, TypeId.TIME, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.INTERVAL}
)
_STABLE_FUNCTIONS = frozenset({"to_char", "to_date", "to_timestamp", "to_number", "age"})
"""Functions all of whose forms Postgres marks stable (they read DateStyle, the locale, the
time zone or the clock)."""


def _stable(e: BCall) -> bool:
    """A call Postgres marks stable, not immutable: the functions above, timestamptz plus or
    minus an interval (the time zone's day length), and the casts that read DateStyle or the
    time zone (text to a date/time type, a date/time type other than time to text, timestamptz
    to or from another date/time type)."""
    if e.name in _STABLE_FUNCTIONS:
        return True
    kinds = {a.type.id for a in e.args if not a.type.array}
    if e.name in ("+", "-"):
        return TypeId.TIMESTAMPTZ in kinds and TypeId.INTERVAL in kinds
    if e.name != "cast" or len(e.args) != 1 or e.type.array or e.args[0].type.array:
        return False
    src, dst = e.args[0].type.id, e.type.id
    if src in _TEXTUAL:
        return dst in _DATETIME
    if dst in _TEXTUAL:
        return src in _DATETIME and src is not TypeId.TIME
    return src != dst and TypeId.TIMESTAMPTZ in (src, dst) and {src, dst} <= _DATETIME


def expression_reads(sql: str, names: set[str]) -> bool:
    """Whether the expression ``sql`` (a generation expression, a CHECK, an index key) reads
    a column named in ``names``."""
    node = sqlglot.parse_one(sql, read="postgres")
    return any(ref.name in names for ref in node.find_all(exp.Column))


_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*").fullmatch
"""Matches a name that reads back as itself unquoted (None: it needs quotes)."""


def rename_reads(sql: str, old: str, new: str) -> str:
    """``sql`` with its references to column ``old`` made to ``new``."""

    def rename(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.name == old:
            # The catalog's name is exact (case-folded if it was written unquoted): quoted only
            # where Postgres needs it, so that the text reads as the same expression written
            # anew would (ON CONFLICT (lower(mail)) compares them).
            return exp.column(exp.to_identifier(new, quoted=_PLAIN_NAME(new) is None))
        return n

    return sqlglot.parse_one(sql, read="postgres").transform(rename).sql("postgres")


__all__ = [
    "expression_reads",
    "not_immutable",
    "refuse_outside_row",
    "rename_reads",
    "row_scope",
]
