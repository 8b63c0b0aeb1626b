"""Correlated EXISTS in a WHERE clause, as the IN subquery it is equivalent to there.

``WHERE EXISTS (SELECT ... FROM b WHERE b.x = a.y AND c)`` runs its subquery once per row of
``a``: a scan of ``b`` each time (a 10,000-row table against itself ran for minutes). When the
correlation is that one equality, ``a.y IN (SELECT b.x FROM b WHERE c)`` asks the same of a
subquery that no longer depends on the row, so it runs once. The two can differ only where
EXISTS is false and IN is NULL (``a.y`` NULL, or NULLs among the ``b.x``), which a WHERE
treats alike; so only EXISTS conjuncts at the top of a WHERE are rewritten, never under NOT,
OR or in a select list.

The rewrite is syntactic and conservative: the subquery must be a plain SELECT over a FROM
(no aggregate, GROUP BY, HAVING, LIMIT, OFFSET, window or WITH, which change how many rows it
has), and the only column qualified by a table outside it must be the one side of one equality
conjunct of its WHERE. Unqualified columns stay as they are: should one name an outer column,
the IN subquery is still correlated through it, and as correct as before.
"""

from __future__ import annotations

from sqlglot import exp

_ROW_SHAPERS = ("group", "having", "limit", "offset", "with_", "with", "qualify", "windows")


def where_exists_as_in(condition: exp.Expression) -> exp.Expression:
    """``condition`` (a WHERE clause's) with its top-level correlated EXISTS conjuncts
    rewritten as IN subqueries where that is equivalent; the same object if none is."""
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    rewritten = [_exists_as_in(c) for c in conjuncts]
    if all(r is None for r in rewritten):
        return condition
    parts = [r if r is not None else c for c, r in zip(conjuncts, rewritten, strict=True)]
    return exp.and_(*parts)  # copies: the parsed tree is cached and shared


def _exists_as_in(node: exp.Expression) -> exp.Expression | None:
    if not isinstance(node, exp.Exists) or not isinstance(node.this, exp.Select):
        return None
    select = node.this
    if any(select.args.get(k) for k in _ROW_SHAPERS) or select.args.get("from_") is None:
        return None
    if any(e.find(exp.AggFunc, exp.Window) for e in select.expressions):
        return None
    inner = _relation_names(select)
    where = select.args.get("where")
    if inner is None or where is None:
        return None
    conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    found = [(i, pair) for i, c in enumerate(conjuncts) if (pair := _correlation(c, inner))]
    if len(found) != 1:
        return None
    index, (inner_side, outer_col) = found[0]
    rest = [c for i, c in enumerate(conjuncts) if i != index]
    if any(_outer_columns(c, inner) for c in rest) or _outer_in_from(select, inner):
        return None
    query = select.copy()
    query.set("expressions", [inner_side.copy()])
    query.set("distinct", None)
    query.set("order", None)
    query.set("where", exp.Where(this=exp.and_(*[c.copy() for c in rest])) if rest else None)
    return exp.In(this=outer_col.copy(), query=exp.Subquery(this=query))


def _relation_names(select: exp.Select) -> set[str] | None:
    """The names the subquery's FROM and JOIN items are known by (None: one has none)."""
    items = [select.args["from_"].this, *(j.this for j in select.args.get("joins") or [])]
    names = set()
    for item in items:
        name = item.alias_or_name
        if not name:
            return None
        names.add(name)
    return names


def _outer_columns(node: exp.Expression, inner: set[str]) -> list[exp.Column]:
    """The columns of ``node`` qualified by a table outside the subquery."""
    return [c for c in node.find_all(exp.Column) if c.table and c.table not in inner]


def _outer_in_from(select: exp.Select, inner: set[str]) -> bool:
    """Whether the select list, FROM or JOINs refer to an outer table."""
    parts = [*select.expressions, select.args["from_"], *(select.args.get("joins") or [])]
    return any(_outer_columns(p, inner) for p in parts)


def _correlation(node: exp.Expression, inner: set[str]) -> tuple[exp.Expression, exp.Column] | None:
    """(inner side, outer column) of ``inner_expr = outer.column``, either way round."""
    if not isinstance(node, exp.EQ):
        return None
    for outer, other in ((node.this, node.expression), (node.expression, node.this)):
        if (
            isinstance(outer, exp.Column)
            and outer.table
            and outer.table not in inner
            and not _outer_columns(other, inner)
            and not other.find(exp.Subquery, exp.Select)
        ):
            return other, outer
    return None
