"""The shape Postgres requires of a recursive CTE, checked on the sqlglot tree.

``WITH RECURSIVE name AS (initial UNION [ALL] recursive)``: the initial (non-recursive) term
must not refer to ``name``; the recursive term refers to it exactly once, and not from an
expression subquery, the nullable side of an outer join, INTERSECT ALL or (the right side of)
EXCEPT: Postgres rejects these with 42P19.
"""

from __future__ import annotations

from sqlglot import exp

from percolator.server.sql.errors import SqlError, unsupported

INVALID_RECURSION = "42P19"


def references(query: exp.Expression, name: str) -> list[exp.Table]:
    """The unqualified table references to ``name`` inside ``query``."""
    return [t for t in query.find_all(exp.Table) if not t.args.get("db") and t.name == name]


def split(name: str, body: exp.Expression) -> tuple[exp.Expression, exp.Expression, bool]:
    """(initial term, recursive term, UNION ALL) of the recursive CTE ``name``, or the error
    Postgres gives for a body of another shape."""
    if not isinstance(body, exp.Union):
        raise SqlError(
            INVALID_RECURSION,
            f'recursive query "{name}" does not have the form non-recursive-term UNION [ALL] '
            "recursive-term",
        )
    for arg, word in (("order", "ORDER BY"), ("offset", "OFFSET"), ("limit", "LIMIT")):
        if body.args.get(arg) is not None:
            raise unsupported(f"{word} in a recursive query")
    initial, recursive = body.this, body.expression
    if references(initial, name):
        raise _recursion_error(name, "within its non-recursive term")
    refs = references(recursive, name)
    if len(refs) > 1:
        raise _recursion_error(name, "more than once")
    for ref in refs:
        _check_reference(name, ref, recursive)
    return initial, recursive, not body.args.get("distinct", True)


def _recursion_error(name: str, where: str) -> SqlError:
    return SqlError(
        INVALID_RECURSION, f'recursive reference to query "{name}" must not appear {where}'
    )


def _check_reference(name: str, ref: exp.Expression, root: exp.Expression) -> None:
    """Reject a recursive reference placed where the working table would be read wrongly."""
    child: exp.Expression = ref
    node = ref.parent
    while node is not None and child is not root:
        if isinstance(node, exp.Intersect | exp.Except) and _in_set_operation(node, child):
            raise _recursion_error(name, f"within {type(node).__name__.upper()}")
        if (
            isinstance(node, exp.Subquery)
            and node is not root
            # A FROM item, or parentheses around a set operation's operand.
            and not isinstance(node.parent, exp.From | exp.Join | exp.SetOperation)
        ):
            raise _recursion_error(name, "within a subquery")
        if isinstance(node, exp.Exists | exp.In | exp.Any | exp.All) and child.arg_key in (
            "this",
            "query",
            "expression",
        ):
            if isinstance(child, exp.Query | exp.Subquery):
                raise _recursion_error(name, "within a subquery")
        if isinstance(node, exp.Select) and _on_nullable_side(node, child):
            raise _recursion_error(name, "within an outer join")
        child, node = node, node.parent


def _in_set_operation(node: exp.Intersect | exp.Except, child: exp.Expression) -> bool:
    """Whether Postgres rejects a recursive reference in this operand: either operand of
    INTERSECT ALL, the right one of EXCEPT, the left one of EXCEPT ALL (a working table
    that is matched against itself across iterations would give wrong answers)."""
    is_all = not node.args.get("distinct", True)
    if isinstance(node, exp.Intersect):
        return is_all
    return child.arg_key == "expression" or is_all


def _on_nullable_side(select: exp.Select, child: exp.Expression) -> bool:
    """Whether ``child`` (the FROM item or a join of ``select``) can be null-extended."""
    joins = select.args.get("joins") or []
    if child.arg_key in ("from_", "from"):
        position = 0
    elif any(j is child for j in joins):
        position = next(i for i, j in enumerate(joins) if j is child) + 1
        if str(child.args.get("side") or "").upper() in ("LEFT", "FULL"):
            return True
    else:
        return False
    later = joins[position:]
    return any(str(j.args.get("side") or "").upper() in ("RIGHT", "FULL") for j in later)
