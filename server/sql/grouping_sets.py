"""GROUP BY ROLLUP / CUBE / GROUPING SETS: a GROUP BY clause expanded into its grouping sets,
and the GROUPING() function over them.

A grouped SELECT keeps one list of distinct group expressions; each grouping set is the
positions in that list it groups by. The aggregate's output row holds every group expression
(NULL where the row's set does not group by it), then a bitmask of the group positions left
out of the row's set (the column GROUPING() reads), then the aggregates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from percolator.server.sql import types as T
from percolator.server.sql.bound import BCall, BColumn, BConst, BExpr
from percolator.server.sql.errors import GROUPING_ERROR, SqlError

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import AggregateContext, ExprBinder

GroupingSet = tuple[int, ...]
"""The positions of a grouping set's expressions among the SELECT's group expressions."""

MAX_GROUPING_SETS = 4096
MAX_CUBE_ELEMENTS = 12
MAX_GROUPING_ARGS = 31

_SET_NODES = (exp.Rollup, exp.Cube, exp.GroupingSets)


def uses_grouping_sets(group: exp.Group) -> bool:
    """Whether a GROUP BY clause is more than a list of expressions (ROLLUP, CUBE, GROUPING
    SETS, an empty set ``()`` or a parenthesized list), or is GROUP BY DISTINCT."""
    return group.args.get("all") is False or any(
        isinstance(g, (*_SET_NODES, exp.Tuple)) for g in group.expressions
    )


def expand(group: exp.Group, position: Callable[[exp.Expression], int]) -> list[GroupingSet]:
    """The grouping sets of a GROUP BY clause, as Postgres's expand_grouping_sets makes them:
    the cross product of its items' sets (``a, ROLLUP (b)`` is ``(a, b), (a)``), each set's
    expressions as ``position`` numbers them. GROUP BY DISTINCT drops repeated sets."""
    per_item = [_item_sets(g, position) for g in group.expressions]
    total = 1
    for sets in per_item:
        total *= len(sets)
    if total > MAX_GROUPING_SETS:
        raise SqlError("54001", f"too many grouping sets present (maximum {MAX_GROUPING_SETS})")
    result: list[GroupingSet] = [()]
    for sets in per_item:
        result = [_union(r, s) for r in result for s in sets]
    if group.args.get("all") is False:
        result = list(dict.fromkeys(result))
    return result


def _union(a: GroupingSet, b: GroupingSet) -> GroupingSet:
    return tuple(sorted(set(a) | set(b)))


def _item_sets(
    node: exp.Expression, position: Callable[[exp.Expression], int]
) -> list[GroupingSet]:
    """The grouping sets one GROUP BY item (or one element of GROUPING SETS) stands for."""
    if isinstance(node, exp.Rollup):
        elements = [_element(e, position) for e in node.expressions]
        return [_union((), _flat(elements[:k])) for k in range(len(elements), -1, -1)]
    if isinstance(node, exp.Cube):
        if len(node.expressions) > MAX_CUBE_ELEMENTS:
            raise SqlError("54011", f"CUBE is limited to {MAX_CUBE_ELEMENTS} elements")
        elements = [_element(e, position) for e in node.expressions]
        return [
            _union((), _flat(list(chosen)))
            for k in range(len(elements), -1, -1)
            for chosen in itertools.combinations(elements, k)
        ]
    if isinstance(node, exp.GroupingSets):
        return [s for e in node.expressions for s in _item_sets(e, position)]
    if isinstance(node, exp.Tuple):
        # ``()`` is the empty set; ``(a, b)`` one set of both (an implicit row constructor is
        # a list of grouping expressions in Postgres, even at the top level).
        return [_union((), tuple(position(e) for e in node.expressions))]
    return [_element(node, position)]


def _element(node: exp.Expression, position: Callable[[exp.Expression], int]) -> GroupingSet:
    """One element of ROLLUP or CUBE: an expression or a parenthesized list kept together."""
    if isinstance(node, exp.Tuple):
        return tuple(position(e) for e in node.expressions)
    if isinstance(node, exp.Paren):
        node = node.this
    return (position(node),)


def _flat(elements: list[GroupingSet]) -> GroupingSet:
    return tuple(i for e in elements for i in e)


def omitted_mask(grouping_set: GroupingSet, width: int) -> int:
    """The bitmask of the group positions (of ``width``) a grouping set leaves out: bit i is
    set when the set does not group by expression i."""
    return sum(1 << i for i in range(width) if i not in grouping_set)


def bind_grouping(binder: ExprBinder, node: exp.Grouping, ctx: AggregateContext) -> BExpr:
    """GROUPING(e1, ..., en): an integer whose bit n-1-k is set when the row's grouping set
    leaves ek out. Each argument must be one of the query's group expressions (42803); with a
    plain GROUP BY every row groups by all of them, so the value is 0."""
    args = list(node.expressions)
    if len(args) > MAX_GROUPING_ARGS:
        raise SqlError("54023", "GROUPING must have fewer than 32 arguments")
    positions = [_group_position(binder, a, ctx) for a in args]
    if ctx.sets is None:
        return BConst(T.INT4, 0)
    n = len(positions)

    def grouping(mask: int, *pos: int) -> int:
        return sum(((mask >> p) & 1) << (n - 1 - k) for k, p in enumerate(pos))

    # The positions travel as constant arguments, so two GROUPING calls over different
    # expressions are never taken for the same expression (ORDER BY matching).
    return BCall(
        T.INT4,
        "grouping",
        grouping,
        [BColumn(T.INT8, len(ctx.groups), "grouping"), *(BConst(T.INT4, p) for p in positions)],
    )


def _group_position(binder: ExprBinder, node: exp.Expression, ctx: AggregateContext) -> int:
    # Bound first, as Postgres does, so that an argument in error reports its own error.
    e = binder.bind(node, ctx.scope)
    i = ctx.group_of(node)
    if i is None and isinstance(node, exp.Column):
        # ``w.g`` names the group expression ``g``: compare the columns they resolve to.
        if isinstance(e, BColumn):
            i = next(
                (
                    k
                    for k, g in enumerate(ctx.groups)
                    if isinstance(g, BColumn) and g.index == e.index
                ),
                None,
            )
    if i is None:
        raise SqlError(
            GROUPING_ERROR,
            "arguments to GROUPING must be grouping expressions of the associated query level",
        )
    return i


def not_allowed() -> SqlError:
    """GROUPING outside a grouped select list, HAVING or ORDER BY (WHERE, GROUP BY, an
    aggregate's arguments)."""
    return SqlError(GROUPING_ERROR, "grouping operations are not allowed here")
