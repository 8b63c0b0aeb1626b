"""Binding window calls as Postgres does: the function applied over a window (ranking,
distribution, navigation functions and aggregates), the frame clause, and named windows (the
WINDOW clause, ``OVER name`` and ``OVER (name ORDER BY ...)``).

Named windows are resolved on the sqlglot tree before binding (:func:`resolve_named_windows`):
each reference is replaced by the window it names, so the rest of binding sees only inline
windows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from percolator.server.sql import casts
from percolator.server.sql import types as T
from percolator.server.sql.bound import (
    BColumn,
    BExpr,
    BoundKind,
    BOuter,
    BSubquery,
    FrameBound,
    FrameExclusion,
    FrameMode,
    SortKey,
    WindowFrame,
    walk,
)
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    INVALID_COLUMN_REFERENCE,
    SYNTAX_ERROR,
    UNDEFINED_FUNCTION,
    UNDEFINED_OBJECT,
    WRONG_OBJECT_TYPE,
    SqlError,
    undetermined_polymorphic,
    unsupported,
)
from percolator.server.sql.types import SqlType, TypeId

if TYPE_CHECKING:
    from percolator.server.sql.expr_binder import ExprBinder

WINDOWING_ERROR = "42P20"

BindArg = Callable[[exp.Expression], BExpr]

RANKING: dict[type, str] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist",
}
"""Window functions without arguments; they see peers, not the frame."""
_RANKING_TYPES = {"percent_rank": T.FLOAT8, "cume_dist": T.FLOAT8}

VALUE_FUNCTIONS: dict[type, str] = {
    exp.Lag: "lag",
    exp.Lead: "lead",
    exp.FirstValue: "first_value",
    exp.LastValue: "last_value",
    exp.NthValue: "nth_value",
    exp.Ntile: "ntile",
}
"""Window functions with arguments (sqlglot has a node for each)."""

WINDOW_ONLY = tuple(RANKING) + tuple(VALUE_FUNCTIONS)
"""Nodes of functions that exist only as window functions (they need OVER)."""

WINDOW_FUNCTION_NAMES = frozenset(RANKING.values()) | frozenset(VALUE_FUNCTIONS.values())
"""Names of the window calls that are not aggregates."""


def requires_over(node: exp.Expression) -> SqlError:
    """The error for a window-only function called without OVER (42809)."""
    name = RANKING.get(type(node)) or VALUE_FUNCTIONS[type(node)]
    return SqlError(WRONG_OBJECT_TYPE, f"window function {name} requires an OVER clause")


# -- the function ---------------------------------------------------------------------------


def window_only_function(
    b: ExprBinder, fn: exp.Expression, bind_arg: BindArg
) -> tuple[str, list[BExpr], SqlType]:
    """(name, arguments, result type) of a ranking or value window function call."""
    if isinstance(fn, exp.IgnoreNulls | exp.RespectNulls):
        # Postgres has no IGNORE / RESPECT NULLS for window functions.
        word = "IGNORE" if isinstance(fn, exp.IgnoreNulls) else "RESPECT"
        raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{word}"')
    if type(fn) in RANKING:
        name = RANKING[type(fn)]
        given = [a for a in [fn.args.get("this"), *(fn.args.get("expressions") or [])] if a]
        if given and name != "row_number":
            # rank(args) and the like are hypothetical-set aggregates, not window functions.
            raise SqlError(
                WRONG_OBJECT_TYPE, f"OVER is not supported for ordered-set aggregate {name}"
            )
        if given:
            types = ", ".join(str(bind_arg(a).type) for a in given)
            raise _no_function(name, types)
        return name, [], _RANKING_TYPES.get(name, T.INT8)
    name = VALUE_FUNCTIONS[type(fn)]
    if fn.this is None:
        raise _no_function(name, "")
    if name == "ntile":
        return name, [_int4_arg(b, name, [], bind_arg(fn.this))], T.INT4
    value = bind_arg(fn.this)
    args = [value]
    if name == "nth_value":
        args.append(_int4_arg(b, name, [value], bind_arg(fn.args["offset"])))
    elif name in ("lag", "lead") and fn.args.get("offset") is not None:
        args.append(_int4_arg(b, name, [value], bind_arg(fn.args["offset"])))
        if fn.args.get("default") is not None:
            args.append(bind_arg(fn.args["default"]))
            args[0], args[2] = _compatible(b, name, args)
    args[0] = _polymorphic(args[0])
    t = args[0].type
    # A polymorphic function's result has no type modifier.
    return name, args, SqlType(t.id, -1, t.array)


def _polymorphic(e: BExpr) -> BExpr:
    """The value argument of an ``anyelement`` function: an untyped literal (or parameter,
    which is what a lifted literal is) has no type to give it (42804, as in Postgres)."""
    if e.type.id is TypeId.UNKNOWN:
        raise undetermined_polymorphic()
    return e


def _no_function(name: str, types: str) -> SqlError:
    return SqlError(
        UNDEFINED_FUNCTION,
        f"function {name}({types}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


def _int4_arg(b: ExprBinder, name: str, before: list[BExpr], e: BExpr) -> BExpr:
    """An ``integer`` argument (an offset or bucket count), converted implicitly or 42883."""
    if e.type.id is TypeId.UNKNOWN or casts.can_implicitly_cast(e.type, T.INT4):
        return b.coerce(e, T.INT4)
    raise _no_function(name, ", ".join(str(a.type) for a in [*before, e]))


def _compatible(b: ExprBinder, name: str, args: list[BExpr]) -> tuple[BExpr, BExpr]:
    """lag / lead (anycompatible, integer, anycompatible): value and default brought to
    their common type."""
    value, default = args[0], args[2]
    try:
        # All untyped: text, as anycompatible resolves.
        t = b.common_type_of([value.type, default.type], name)
    except SqlError:
        raise _no_function(name, ", ".join(str(a.type) for a in args)) from None
    return b.coerce(value, t), b.coerce(default, t)


# -- the frame ------------------------------------------------------------------------------

_FRAME_STARTS = {"PRECEDING": BoundKind.PRECEDING, "FOLLOWING": BoundKind.FOLLOWING}
_UNBOUNDED = {
    "PRECEDING": BoundKind.UNBOUNDED_PRECEDING,
    "FOLLOWING": BoundKind.UNBOUNDED_FOLLOWING,
}


def window_frame(
    b: ExprBinder, node: exp.Window, order: list[SortKey], bind_arg: BindArg
) -> WindowFrame | None:
    """The frame clause of ``node`` (None: the default frame)."""
    spec = node.args.get("spec")
    if spec is None:
        return None
    mode = FrameMode(str(spec.args.get("kind") or "").lower())
    exclude = spec.args.get("exclude")
    exclusion = FrameExclusion.NO_OTHERS
    if exclude is not None:
        words = " ".join(exclude.name.lower().split())
        if words not in {e.value for e in FrameExclusion}:
            raise unsupported(f"window frame EXCLUDE {words.upper()}")
        exclusion = FrameExclusion(words)
    start = _bound_kind(spec.args.get("start"), spec.args.get("start_side"))
    between = spec.args.get("end") is not None
    end = (
        _bound_kind(spec.args.get("end"), spec.args.get("end_side"))
        if between
        else BoundKind.CURRENT_ROW
    )
    _check_frame(start, end, between)
    if mode is FrameMode.GROUPS and not order:
        raise SqlError(WINDOWING_ERROR, "GROUPS mode requires an ORDER BY clause")
    return WindowFrame(
        mode,
        FrameBound(start, _offset(b, mode, start, spec.args.get("start"), order, bind_arg)),
        FrameBound(end, _offset(b, mode, end, spec.args.get("end"), order, bind_arg)),
        exclusion,
    )


def _bound_kind(value: object, side: object) -> BoundKind:
    side_word = str(side or "").upper()
    if isinstance(value, str):
        if value.upper() == "CURRENT ROW":
            return BoundKind.CURRENT_ROW
        if value.upper() == "UNBOUNDED" and side_word in _UNBOUNDED:
            return _UNBOUNDED[side_word]
    elif isinstance(value, exp.Expression) and side_word in _FRAME_STARTS:
        return _FRAME_STARTS[side_word]
    raise unsupported(f"window frame bound {value} {side_word}")


def _check_frame(start: BoundKind, end: BoundKind, between: bool) -> None:
    """The frame shapes Postgres's grammar rejects (42P20)."""
    if start is BoundKind.UNBOUNDED_FOLLOWING:
        raise SqlError(WINDOWING_ERROR, "frame start cannot be UNBOUNDED FOLLOWING")
    if not between:
        if start is BoundKind.FOLLOWING:
            raise SqlError(
                WINDOWING_ERROR, "frame starting from following row cannot end with current row"
            )
        return
    if end is BoundKind.UNBOUNDED_PRECEDING:
        raise SqlError(WINDOWING_ERROR, "frame end cannot be UNBOUNDED PRECEDING")
    if start is BoundKind.CURRENT_ROW and end is BoundKind.PRECEDING:
        raise SqlError(
            WINDOWING_ERROR, "frame starting from current row cannot have preceding rows"
        )
    if start is BoundKind.FOLLOWING and end in (BoundKind.PRECEDING, BoundKind.CURRENT_ROW):
        raise SqlError(
            WINDOWING_ERROR, "frame starting from following row cannot have preceding rows"
        )


def _offset(
    b: ExprBinder,
    mode: FrameMode,
    kind: BoundKind,
    node: object,
    order: list[SortKey],
    bind_arg: BindArg,
) -> BExpr | None:
    """The bound offset of ``n PRECEDING`` / ``n FOLLOWING``: a constant expression of the
    type the mode takes (bigint for ROWS and GROUPS; for RANGE, what the ORDER BY key's
    in_range function takes)."""
    if kind not in (BoundKind.PRECEDING, BoundKind.FOLLOWING):
        return None
    assert isinstance(node, exp.Expression)
    construct = mode.value.upper()
    e = bind_arg(node)
    for n in walk(e):
        if isinstance(n, BColumn) or (isinstance(n, BSubquery) and n.correlated):
            # A correlated subquery here reads the row (an uncorrelated one runs once, before
            # the window reads its rows).
            raise SqlError(
                INVALID_COLUMN_REFERENCE, f"argument of {construct} must not contain variables"
            )
        if isinstance(n, BOuter):
            raise unsupported(f"outer references in a {construct} offset")
    if mode is not FrameMode.RANGE:
        # Converted as on assignment (ROWS 1.5 PRECEDING is 2 rows), as Postgres does.
        if e.type.id is TypeId.UNKNOWN or casts.can_assign(e.type, T.INT8):
            return b.coerce(e, T.INT8, assignment=True)
        raise SqlError(
            DATATYPE_MISMATCH, f"argument of {construct} must be type bigint, not type {e.type}"
        )
    if len(order) != 1:
        raise SqlError(
            WINDOWING_ERROR,
            "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column",
        )
    key = order[0].expr.type
    want = range_offset_type(key)
    if want is None:
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            f"RANGE with offset PRECEDING/FOLLOWING is not supported for column type {key}",
        )
    if e.type.id is TypeId.UNKNOWN or casts.can_implicitly_cast(e.type, want):
        return b.coerce(e, want)
    raise SqlError(
        FEATURE_NOT_SUPPORTED,
        "RANGE with offset PRECEDING/FOLLOWING is not supported for column type "
        f"{key} and offset type {e.type}",
    )


def range_offset_type(key: SqlType) -> SqlType | None:
    """The offset type of RANGE frames over an ORDER BY key of type ``key`` (the types with an
    in_range support function that is implemented here), or None."""
    if key.array:
        return None
    if key.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
        return T.INT8
    if key.id is TypeId.NUMERIC:
        return T.NUMERIC
    if key.id in (TypeId.FLOAT4, TypeId.FLOAT8):
        return T.FLOAT8
    if key.id in (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.TIME):
        return T.INTERVAL
    if key.id is TypeId.INTERVAL:
        return T.INTERVAL
    return None


# -- named windows --------------------------------------------------------------------------


def resolve_named_windows(select: exp.Select) -> exp.Select:
    """``select`` with every window that refers to a named one (``OVER w``, ``OVER (w ORDER BY
    ...)``) replaced by the window it denotes; a copy when anything changes. References that
    remain (no WINDOW clause defines them) fail when bound."""
    definitions = select.args.get("windows") or []
    if not definitions:
        # Only an error to report (42704), before any other clause's, as Postgres does.
        for w in _references(select):
            _refined(w, {}, bare=True)
        return select
    select = select.copy()
    named: dict[str, exp.Window] = {}
    for d in select.args["windows"]:
        name = d.this.name
        if name in named:
            raise SqlError(WINDOWING_ERROR, f'window "{name}" is already defined')
        named[name] = _refined(d, named, bare=False)
    for w in _references(select):
        bare = not w.meta.get("parenthesized") and not any(
            w.args.get(k) for k in ("partition_by", "order", "spec")
        )
        resolved = _refined(w, named, bare)
        for k in ("partition_by", "order", "spec"):
            w.set(k, resolved.args.get(k))
        w.set("alias", None)
    return select


def _references(select: exp.Select) -> list[exp.Window]:
    """The windows of ``select``'s own clauses that name another window."""
    return [
        w
        for w in select.find_all(exp.Window)
        if w.args.get("alias") is not None and w.arg_key != "windows" and _owner(w) is select
    ]


def _owner(node: exp.Expression) -> exp.Expression | None:
    """The SELECT whose clause ``node`` belongs to."""
    p = node.parent
    while p is not None and not isinstance(p, exp.Select):
        p = p.parent
    return p


def _refined(w: exp.Window, named: dict[str, exp.Window], bare: bool) -> exp.Window:
    """The window ``w`` denotes: its own clauses, or those of the window it names refined by
    its own, under Postgres's rules (42P20 for a clause it cannot override). ``bare`` is
    ``OVER name`` without parentheses, which copies the named window whole."""
    ref = w.args.get("alias")
    out = exp.Window(
        partition_by=[p.copy() for p in w.args.get("partition_by") or []],
        order=_copy(w.args.get("order")),
        spec=_copy(w.args.get("spec")),
    )
    if ref is None:
        return out
    name = ref.name
    base = named.get(name)
    if base is None:
        raise SqlError(UNDEFINED_OBJECT, f'window "{name}" does not exist')
    if bare:
        return base.copy()
    if out.args.get("partition_by"):
        raise SqlError(WINDOWING_ERROR, f'cannot override PARTITION BY clause of window "{name}"')
    if out.args.get("order") is not None and base.args.get("order") is not None:
        raise SqlError(WINDOWING_ERROR, f'cannot override ORDER BY clause of window "{name}"')
    if base.args.get("spec") is not None:
        raise SqlError(
            WINDOWING_ERROR, f'cannot copy window "{name}" because it has a frame clause'
        )
    out.set("partition_by", [p.copy() for p in base.args.get("partition_by") or []])
    if out.args.get("order") is None:
        out.set("order", _copy(base.args.get("order")))
    return out


def _copy(node: exp.Expression | None) -> exp.Expression | None:
    return node.copy() if node is not None else None
