"""Row values: ``ROW(a, b)`` / ``(a, b)`` constructors, whole-row references (``t`` naming a
FROM item), row comparisons (``(a, b) < (1, 2)``) and row ``IN`` lists.

A row value is a tuple whose type is an anonymous record type (:func:`record_type`: its field
names and types). Comparisons of two row constructors are expanded into their fields'
comparisons, as Postgres defines them (``(a, b) < (x, y)`` is ``a < x OR (a = x AND b < y)``,
NULL where a pair that decides is NULL), so the planner sees ordinary column predicates: a
row equality on the primary key is a point get, a row ``>`` on it a range scan (the first
field's ``>=`` is added, which the expansion implies).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from percolator.server.sql import operators
from percolator.server.sql import types as T
from percolator.server.sql.bound import (
    BBool,
    BCall,
    BColumn,
    BExpr,
    BNot,
    BOuter,
    OutCol,
    ProjectRel,
    SubqueryKind,
)
from percolator.server.sql.errors import SYNTAX_ERROR, SqlError, unsupported
from percolator.server.sql.set_functions import record_type
from percolator.server.sql.types import SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.catalog import Catalog
    from percolator.server.sql.expr_binder import ExprBinder
    from percolator.server.sql.scope import Scope

_ORDERING = {"<": "<", "<=": "<", ">": ">", ">=": ">"}


ROW_IS_NULL = "row is null"
ROW_IS_NOT_NULL = "row is not null"


def is_row(e: BExpr) -> bool:
    """Whether ``e`` is a record (a row constructor, a whole-row reference, a record column)."""
    return e.type.id is TypeId.RECORD and not e.type.array


def is_null(arg: BExpr, negate: bool) -> BExpr:
    """``row IS [NOT] NULL``: whether every field is NULL (IS NOT NULL: none is), as Postgres
    defines it for rows; a NULL record is NULL. A nested row counts as a value, NULL fields
    or not."""
    if negate:
        return BCall(T.BOOL, ROW_IS_NOT_NULL, _row_is_not_null, [arg], strict=False)
    return BCall(T.BOOL, ROW_IS_NULL, _row_is_null, [arg], strict=False)


def _row_is_null(v: tuple[object, ...] | None) -> bool:
    return v is None or all(f is None for f in v)


def _row_is_not_null(v: tuple[object, ...] | None) -> bool:
    return v is not None and all(f is not None for f in v)


def row_items(node: exp.Expression) -> list[exp.Expression] | None:
    """The fields of a row constructor (``ROW(a, b)``, ``(a, b)``), or None for any other
    expression. A parenthesized single value is not a row; ``ROW(a)`` is."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "row":
        return list(node.expressions)
    return None


def bind_row(binder: ExprBinder, items: list[exp.Expression], scope: Scope) -> BExpr:
    """``ROW(...)``: a record with fields f1, f2, ... (untyped literals become text)."""
    fields = []
    for item in items:
        e = binder.bind(item, scope)
        if _is_table_star(item) and isinstance(e, BCall) and e.name == "row":
            fields.extend(e.args)  # ROW(t.*, x) takes t's columns as fields, as Postgres does
            continue
        if e.type.id is TypeId.UNKNOWN:
            e = binder.coerce(e, T.TEXT)
        fields.append(e)
    names = [f"f{i + 1}" for i in range(len(fields))]
    return construct(names, fields)


def _is_table_star(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and isinstance(node.this, exp.Star) and bool(node.table)


def construct(names: list[str], fields: list[BExpr]) -> BExpr:
    """A record value made of ``fields`` (never NULL itself, as in Postgres)."""
    t = record_type(names, [f.type for f in fields])
    return BCall(t, "row", _as_tuple, fields, strict=False)


def _as_tuple(*values: object) -> tuple[object, ...]:
    return values


def _as_tuple_or_null(*values: object) -> tuple[object, ...] | None:
    return None if all(v is None for v in values) else values


def _has_not_null_column(cols: list[OutCol], catalog: Catalog) -> bool:
    """Whether ``cols`` are a table's own columns, in order, one of them NOT NULL."""
    oids = {c.table_oid for c in cols}
    if len(oids) != 1 or 0 in oids:
        return False
    table = catalog.table_by_oid(oids.pop())
    if table is None or len(table.columns) != len(cols):
        return False
    if [c.column_number for c in cols] != list(range(1, len(cols) + 1)):
        return False
    return any(c.not_null for c in table.columns)


def whole_row(scope: Scope, name: str, catalog: Catalog | None = None) -> BExpr | None:
    """A FROM item's name used as a value (``SELECT t FROM t``, ``row_to_json(t)``): the
    record of its columns, or the value of a one-column function (``SELECT e FROM
    unnest(a) e``); None when no visible FROM item has that name.

    A table's row whose fields are all NULL though one of its columns is NOT NULL is the
    null-extended side of an outer join: NULL, as Postgres has it (``count(b)`` over ``a LEFT
    JOIN b`` counts the matches). Without a NOT NULL column such a row cannot be told from
    a row of NULLs, and stays a record of NULLs."""
    level = 0
    current: Scope | None = scope
    while current is not None:
        if name in current.relations:
            indexes = current.star(name)
            cols = [current.columns[i] for i in indexes]
            if len(cols) == 1 and cols[0].function_value:
                i = indexes[0]
                return BColumn(cols[0].type, i) if level == 0 else BOuter(cols[0].type, level, i)
            fields: list[BExpr] = [
                BColumn(c.type, i, c.name) if level == 0 else BOuter(c.type, level, i)
                for c, i in zip(cols, indexes, strict=True)
            ]
            row = construct([c.name for c in cols], fields)
            if catalog is not None and _has_not_null_column(cols, catalog):
                assert isinstance(row, BCall)
                row = BCall(row.type, "row", _as_tuple_or_null, fields, strict=False)
            return row
        current = current.parent
        level += 1
    return None


def compare(
    binder: ExprBinder,
    op: str,
    left: list[exp.Expression],
    right: list[exp.Expression],
    scope: Scope,
) -> BExpr:
    """``(l1, l2, ...) op (r1, r2, ...)`` expanded into the fields' comparisons."""
    if len(left) != len(right):
        raise SqlError(SYNTAX_ERROR, "unequal number of entries in row expressions")
    if not left:
        raise unsupported("comparison of empty rows")
    pairs = [
        (binder.bind(a, scope), binder.bind(b, scope)) for a, b in zip(left, right, strict=True)
    ]
    return compare_pairs(binder, op, pairs)


def compare_with_subquery(
    binder: ExprBinder, op: str, left: list[exp.Expression], query: exp.Expression, scope: Scope
) -> BExpr:
    """``(a, b) op (SELECT x, y ...)``: the row against the subquery's single row (NULLs when
    it returns none, 21000 when it returns more than one)."""
    node = query.this if isinstance(query, exp.Subquery) else query
    width = len(node.selects) if isinstance(node, exp.Select) else None
    if (
        width is not None
        and width != len(left)
        and not any(
            isinstance(s, exp.Star) or (isinstance(s, exp.Column) and isinstance(s.this, exp.Star))
            for s in node.selects
        )
    ):
        few = width < len(left)
        raise SqlError(SYNTAX_ERROR, f"subquery has too {'few' if few else 'many'} columns")
    fields = row_subquery(binder, query, len(left), scope)
    pairs = [(binder.bind(a, scope), f) for a, f in zip(left, fields, strict=True)]
    return compare_pairs(binder, op, pairs)


def compare_pairs(binder: ExprBinder, op: str, pairs: list[tuple[BExpr, BExpr]]) -> BExpr:
    """The row comparison of bound field pairs, expanded into the fields' comparisons."""
    if op in ("=", "<>"):
        parts = [binder.compare(op, a, b) for a, b in pairs]
        return parts[0] if len(parts) == 1 else BBool(T.BOOL, op == "=", parts)
    if op not in _ORDERING:
        raise unsupported(f"row comparison with operator {op}")
    expanded = _lexicographic(binder, op, pairs)
    if len(pairs) == 1:
        return expanded
    # Implied by the expansion; lets the planner bound a key range by the first field.
    first = binder.compare(op[0] + "=", *pairs[0])
    return BBool(T.BOOL, True, [first, expanded])


def _lexicographic(binder: ExprBinder, op: str, pairs: list[tuple[BExpr, BExpr]]) -> BExpr:
    """``a op x`` for the last pair; ``a strict x OR (a = x AND rest)`` before it."""
    a, b = pairs[0]
    if len(pairs) == 1:
        return binder.compare(op, a, b)
    strict = binder.compare(_ORDERING[op], a, b)
    rest = BBool(T.BOOL, True, [binder.compare("=", a, b), _lexicographic(binder, op, pairs[1:])])
    return BBool(T.BOOL, False, [strict, rest])


def in_list(
    binder: ExprBinder, left: list[exp.Expression], items: list[exp.Expression], scope: Scope
) -> BExpr:
    """``(a, b) IN ((1, 2), (3, 4))``: the OR of the row equalities, Postgres's definition."""
    rows = []
    for item in items:
        fields = row_items(item)
        if fields is None:
            # A row against a scalar: no ``record = integer`` operator, as Postgres says.
            raise operators.operator_missing("=", T.RECORD, binder.bind(item, scope).type)
        rows.append(compare(binder, "=", left, fields, scope))
    return rows[0] if len(rows) == 1 else BBool(T.BOOL, False, rows)


def in_subquery(
    binder: ExprBinder, left: list[exp.Expression], query: exp.Expression, scope: Scope
) -> BExpr:
    """``(a, b) IN (SELECT x, y ...)``: the subquery's rows as records, compared with the
    left row's record (NULL fields follow the row equality's three-valued logic)."""
    arg, rows, _ = _row_subquery_operands(binder, left, query, scope)
    return binder.subquery(SubqueryKind.IN, rows, T.BOOL, arg=arg)


def quantified_subquery(
    binder: ExprBinder,
    op: str,
    left: list[exp.Expression],
    query: exp.Expression,
    scope: Scope,
    is_all: bool,
) -> BExpr:
    """``(a, b) op ANY | ALL (SELECT x, y ...)``: the row comparison with every row of the
    subquery, three-valued as Postgres has it (a NULL result from some row makes an otherwise
    undecided ANY / ALL NULL)."""
    if op == "=" and not is_all:
        return in_subquery(binder, left, query, scope)
    if op == "<>" and is_all:
        return BNot(T.BOOL, in_subquery(binder, left, query, scope))
    if op not in ("=", "<>") and op not in _ORDERING:
        raise unsupported(f"row comparison with operator {op}")
    args, rows, types = _row_subquery_operands(binder, left, query, scope)
    eqs = [operators.comparison("=", t) for t in types]
    stricts = [operators.comparison(_ORDERING.get(op, "<"), t) for t in types]
    test = functools.partial(_row_test, op, eqs, stricts)
    array = binder.subquery(SubqueryKind.ARRAY, rows, rows.columns[0].type.array_of())

    def any_all(row: tuple[object, ...], others: list[tuple[object, ...]] | None) -> object:
        saw_null = False
        for other in others or ():
            r = test(row, other)
            if r is None:
                saw_null = True
            elif r is not is_all:
                return r
        return None if saw_null else is_all

    return BCall(T.BOOL, "row any", any_all, [args, array], strict=False)


def _row_test(
    op: str,
    eqs: list[Callable[[object, object], object]],
    stricts: list[Callable[[object, object], object]],
    left: tuple[object, ...],
    right: tuple[object, ...],
) -> bool | None:
    """One row comparison at run time, with the NULL rules of the expanded form."""
    if op in ("=", "<>"):
        result: bool | None = True
        for eq, a, b in zip(eqs, left, right, strict=True):
            if a is None or b is None:
                result = None
            elif not eq(a, b):
                return op == "<>"
        return result if result is None or op == "=" else not result
    for eq, strict, a, b in zip(eqs, stricts, left, right, strict=True):
        if a is None or b is None:
            return None
        if not eq(a, b):
            return bool(strict(a, b))
    return op in ("<=", ">=")


def _row_subquery_operands(
    binder: ExprBinder, left: list[exp.Expression], query: exp.Expression, scope: Scope
) -> tuple[BExpr, ProjectRel, list[SqlType]]:
    """The left row and the subquery's rows as records, both with fields of the types the
    pairs compare as."""
    node = query.this if isinstance(query, exp.Subquery) else query
    sub = binder.binder.bind_query(node, scope)
    if len(sub.columns) != len(left):
        few = len(sub.columns) < len(left)
        raise SqlError(SYNTAX_ERROR, f"subquery has too {'few' if few else 'many'} columns")
    args: list[BExpr] = []
    columns: list[BExpr] = []
    types: list[SqlType] = []
    for item, col in zip(left, sub.columns, strict=True):
        a = binder.bind(item, scope)
        if a.type.id is TypeId.UNKNOWN:
            a = binder.coerce(a, col.type)
        t = operators.comparison_type(a.type, col.type)
        if t is None:
            raise operators.operator_missing("=", a.type, col.type)
        args.append(binder.coerce(a, t, explicit=True))
        columns.append(binder.coerce(BColumn(col.type, len(columns)), t, explicit=True))
        types.append(t)
    names = [c.name for c in sub.columns]
    rows = construct(names, columns)
    return construct(names, args), ProjectRel([OutCol("row", rows.type)], sub, [rows]), types


def row_subquery(
    binder: ExprBinder, query: exp.Expression, width: int, scope: Scope
) -> list[BExpr]:
    """The fields of a subquery's single row (``SET (a, b) = (SELECT x, y ...)``): NULLs
    when it returns no row, 21000 when it returns more than one."""
    node = query.this if isinstance(query, exp.Subquery) else query
    sub = binder.binder.bind_query(node, scope)
    columns = list(sub.columns)
    if len(columns) != width:
        raise SqlError(SYNTAX_ERROR, "number of columns does not match number of values")
    row = construct([c.name for c in columns], [BColumn(c.type, i) for i, c in enumerate(columns)])
    as_record = ProjectRel([OutCol("row", row.type)], sub, [row])
    value = binder.subquery(SubqueryKind.SCALAR, as_record, row.type)
    return [
        BCall(c.type, "field", functools.partial(_field, i), [value], strict=False)
        for i, c in enumerate(columns)
    ]


def _field(i: int, row: tuple[object, ...] | None) -> object:
    return None if row is None else row[i]
