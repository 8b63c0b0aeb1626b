"""Binding expressions: sqlglot expression nodes to typed :mod:`bound` expressions.

Types follow Postgres: an untyped string literal or parameter takes its type from context (the
other side of a comparison, the target column, a cast); integer literals are integer, bigint or
numeric by size; functions resolve by argument types (:mod:`functions`). Parameters that no
context types become text, as Postgres does for ``SELECT $1``.
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from percolator.server.sql import (
    advisory_functions,
    array_operators,
    casts,
    enums,
    functions,
    grouping_sets,
    json_functions,
    json_operators,
    json_records,
    named_arguments,
    operators,
    ordered_set_aggregates,
    regex_functions,
    row_values,
    schemas,
    sequence_functions,
    sleep_functions,
    user_functions,
    window_binder,
)
from percolator.server.sql import types as T
from percolator.server.sql.bound import (
    AggCall,
    BAsyncCall,
    BBool,
    BCall,
    BCase,
    BCoalesce,
    BColumn,
    BConst,
    BContextCall,
    BExpr,
    BInList,
    BIsBool,
    BIsNull,
    BNot,
    BOuter,
    BParam,
    BSubquery,
    OutCol,
    SortKey,
    SrfCall,
    SubqueryKind,
    WindowCall,
    WindowSpec,
)
from percolator.server.sql.datetime_functions import (
    current_date,
    extract_in_zone,
    extract_source_type,
    local_time,
    local_timestamp,
)
from percolator.server.sql.errors import (
    DATATYPE_MISMATCH,
    FEATURE_NOT_SUPPORTED,
    GROUPING_ERROR,
    INVALID_PARAMETER_VALUE,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_FUNCTION,
    UNDEFINED_OBJECT,
    UNDEFINED_PARAMETER,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)
from percolator.server.sql.scope import Scope
from percolator.server.sql.to_char import to_char_format_node
from percolator.server.sql.types import EnumType, SqlType, TypeId

AMBIGUOUS_FUNCTION = "42725"
WINDOWING_ERROR = "42P20"

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder
    from percolator.server.sql.catalog import Catalog, FunctionDef

_INT4_MAX = (1 << 31) - 1
_INT8_MAX = (1 << 63) - 1


@dataclass
class Params:
    """Parameter types of one statement: given by the client (Parse) or inferred."""

    types: list[SqlType | None] = field(default_factory=list)
    nodes: list[list[BParam]] = field(default_factory=list)

    @classmethod
    def from_oids(cls, oids: Sequence[int], catalog: Catalog | None = None) -> Params:
        p = cls()
        for i, oid in enumerate(oids):
            if oid:
                t = T.type_by_oid(oid)
                if t is None and catalog is not None:
                    t = enums.by_oid(catalog, oid)  # a client that introspected an enum
                if t is None:
                    raise SqlError(UNDEFINED_OBJECT, f"type with OID {oid} does not exist")
                p._ensure(i)
                p.types[i] = t
        return p

    def _ensure(self, index: int) -> None:
        while len(self.types) <= index:
            self.types.append(None)
            self.nodes.append([])

    def node(self, index: int) -> BParam:
        self._ensure(index)
        t = self.types[index]
        n = BParam(t if t is not None else T.UNKNOWN, index)
        self.nodes[index].append(n)
        return n

    def resolve(self, index: int, t: SqlType) -> None:
        if t.id is TypeId.UNKNOWN:
            return
        self.types[index] = t
        for n in self.nodes[index]:
            n.type = t

    def finish(self) -> list[SqlType]:
        """Fix every unresolved parameter to text; the final list of types."""
        for i, t in enumerate(self.types):
            if t is None or t.id is TypeId.UNKNOWN:
                self.resolve(i, T.TEXT)
        return [t for t in self.types if t is not None]


@dataclass
class AggregateContext:
    """The grouping of a SELECT: its group expressions and the aggregates found so far."""

    scope: Scope
    groups: list[BExpr] = field(default_factory=list)
    group_nodes: list[exp.Expression] = field(default_factory=list)
    aggs: list[AggCall] = field(default_factory=list)
    sets: list[tuple[int, ...]] | None = None
    """GROUP BY's grouping sets (positions in ``groups``); None for a plain GROUP BY."""

    _canonical: list[exp.Expression] | None = field(default=None, init=False, repr=False)

    def add_group(self, node: exp.Expression, e: BExpr) -> None:
        self.group_nodes.append(node)
        self.groups.append(e)
        self._canonical = None

    def group_of(self, node: exp.Expression) -> int | None:
        """The group expression ``node`` is (by its columns, not how it names them:
        ``a % 2`` is ``t.a % 2``), or None."""
        if self._canonical is None:
            self._canonical = [_canonical(g, self.scope) for g in self.group_nodes]
        if isinstance(node, exp.Column) or node.find(exp.Column) is None:
            return next((i for i, g in enumerate(self.group_nodes) if node == g), None)
        canonical = _canonical(node, self.scope)
        for i, g in enumerate(self._canonical):
            if canonical == g:
                return i
        return None

    @property
    def agg_base(self) -> int:
        """The position of the first aggregate in the grouped row: after the groups and, with
        grouping sets, the mask GROUPING() reads (see grouping_sets.py)."""
        return len(self.groups) + (self.sets is not None)

    def add_aggregate(self, call: AggCall) -> BColumn:
        """Add an aggregate call; the reference to its value in the grouped row."""
        self.aggs.append(call)
        return BColumn(call.type, self.agg_base + len(self.aggs) - 1, call.name)

    def output_columns(self) -> list[OutCol]:
        cols = [OutCol(f"group{i}", g.type) for i, g in enumerate(self.groups)]
        if self.sets is not None:
            cols.append(OutCol("grouping", T.INT8))
        return cols + [OutCol(a.name, a.type) for a in self.aggs]


def _canonical(node: exp.Expression, scope: Scope) -> exp.Expression:
    """``node`` with each column of ``scope`` written as its position, for comparing two
    spellings of one expression (a column ``scope`` cannot resolve stays as written)."""

    def resolve(n: exp.Expression) -> exp.Expression:
        if not isinstance(n, exp.Column) or isinstance(n.this, exp.Star):
            return n
        try:
            found = scope.lookup(n.table or None, n.name)
        except SqlError:
            return n
        if found is None or found[0] != 0:
            return n
        return exp.column(f"#{found[1]}")

    return node.transform(resolve)


_WINDOW_BASE = 1 << 40
_SRF_BASE = 1 << 41
"""Window and set-returning function values are columns after the input row, whose width is
known only when the whole select list is bound: their references start at these placeholder
positions and are moved by :meth:`WindowContext.place` / :meth:`SrfContext.place`."""


@dataclass
class WindowContext:
    """The window function calls of one SELECT, found while binding its select list and
    ORDER BY."""

    specs: list[WindowSpec] = field(default_factory=list)
    spec_nodes: list[tuple[list[exp.Expression], exp.Expression | None]] = field(
        default_factory=list
    )
    calls: list[WindowCall] = field(default_factory=list)
    call_nodes: list[exp.Expression] = field(default_factory=list)
    refs: list[BColumn] = field(default_factory=list)

    def ref(self, k: int) -> BColumn:
        r = BColumn(self.calls[k].type, _WINDOW_BASE + k, self.calls[k].name)
        self.refs.append(r)
        return r

    def place(self, width: int) -> None:
        """The window values follow an input row of ``width`` columns."""
        for r in self.refs:
            r.index = width + r.index - _WINDOW_BASE


@dataclass
class SrfContext:
    """The set-returning function calls of one SELECT's select list (and ORDER BY)."""

    calls: list[SrfCall] = field(default_factory=list)
    refs: list[BColumn] = field(default_factory=list)

    def add(self, call: SrfCall, t: SqlType) -> BColumn:
        self.calls.append(call)
        r = BColumn(t, _SRF_BASE + len(self.calls) - 1, call.name)
        self.refs.append(r)
        return r

    def place(self, width: int) -> None:
        """The function values follow an input row of ``width`` columns."""
        for r in self.refs:
            r.index = width + r.index - _SRF_BASE


_SET_FUNCTIONS = {"generate_series", "unnest", "generate_subscripts", "_pg_expandarray",
                  "pg_partition_ancestors", *json_functions.SET_FUNCTION_NAMES,
                  *regex_functions.SET_FUNCTION_NAMES}  # fmt: skip


_COMPARISONS: dict[type, str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ARITHMETIC: dict[type, str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_BITWISE_OPS: dict[type, str] = {
    exp.BitwiseAnd: "&",
    exp.BitwiseOr: "|",
    exp.BitwiseXor: "#",
    exp.BitwiseLeftShift: "<<",
    exp.BitwiseRightShift: ">>",
}
_BITWISE_OPS_BY_NAME = set(_BITWISE_OPS.values())
_AGGREGATES = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.ArrayAgg: "array_agg",
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "variance",  # var_samp stays an Anonymous call (dialect.py)
    exp.VariancePop: "var_pop",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
    exp.BitwiseXorAgg: "bit_xor",
    exp.JSONArrayAgg: "json_agg",
    exp.JSONObjectAgg: "json_object_agg",
    exp.JSONBObjectAgg: "jsonb_object_agg",
}
_GROUPED_ONLY = (exp.WithinGroup, exp.Grouping)
"""Calls that, like aggregates, make a SELECT grouped and are bound over its grouped row:
ordered-set aggregates and GROUPING()."""
_AGG_NAMES = {"count", "sum", "avg", "min", "max", "array_agg", "string_agg", "bool_and",
              "bool_or", "every", "json_agg", "jsonb_agg", "stddev", "variance", "stddev_samp",
              "stddev_pop", "var_samp", "var_pop", "json_object_agg",
              "jsonb_object_agg", "bit_and", "bit_or", "bit_xor"}  # fmt: skip

# sqlglot function classes whose Postgres name differs from sql_name(), with argument order.
_FUNCTION_NAMES: dict[type, tuple[str, tuple[str, ...]]] = {
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.JSONBContains: ("jsonb_contains", ("this", "expression")),
    exp.TimestampTrunc: ("date_trunc", ("unit", "this", "zone")),
    exp.ArraySize: ("array_length", ("this", "expression")),
    exp.ArrayAppend: ("array_append", ("this", "expression")),
    exp.ArrayPrepend: ("array_prepend", ("expression", "this")),  # sqlglot puts the array first
    exp.ArrayConcat: ("array_cat", ("this", "expressions")),
    exp.ArrayRemove: ("array_remove", ("this", "expression")),
    exp.ArrayPosition: ("array_position", ("this", "expression", "zero_based")),  # 3rd: start
    exp.ArrayToString: ("array_to_string", ("this", "expression", "null")),
    exp.StringToArray: ("string_to_array", ("this", "expression", "null")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.Substring: ("substring", ("this", "start", "length")),
    exp.Round: ("round", ("this", "decimals")),
    exp.Repeat: ("repeat", ("this", "times")),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.Length: ("length", ("this",)),
    exp.Initcap: ("initcap", ("this",)),
    exp.MD5: ("md5", ("this",)),
    exp.Pow: ("power", ("this", "expression")),
    exp.Ceil: ("ceil", ("this",)),
    exp.Floor: ("floor", ("this",)),
    exp.Abs: ("abs", ("this",)),
    exp.Lower: ("lower", ("this",)),
    exp.Upper: ("upper", ("this",)),
    exp.Concat: ("concat", ("expressions",)),
    exp.ConcatWs: ("concat_ws", ("expressions",)),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.Exp: ("exp", ("this",)),
    exp.Ln: ("ln", ("this",)),
    exp.Log: ("log", ("this", "expression")),
    exp.Sign: ("sign", ("this",)),
    exp.Hex: ("to_hex", ("this",)),
    exp.Uuid: ("gen_random_uuid", ()),
    exp.UnixToTime: ("to_timestamp", ("this",)),
    exp.Rand: ("random", ()),
}


class ExprBinder:
    """Binds expressions for one :class:`Binder` (sharing its catalog and parameters)."""

    def __init__(self, binder: Binder) -> None:
        self.binder = binder
        self.subquery_slots = 0
        self.async_calls_ok = False
        """Set while binding a select-list item or a VALUES item, where nextval() may be
        (see sequence_functions.py)."""
        self.window_ctx: WindowContext | None = None
        """Set while binding a select list or ORDER BY, where window functions may appear."""
        self.srf_ctx: SrfContext | None = None
        """Set while binding a select list, where set-returning functions may appear."""
        self.in_aggregate_args = False

    @contextlib.contextmanager
    def contexts(self, window: WindowContext | None, srf: SrfContext | None) -> Iterator[None]:
        """Bind with these window / set-returning function contexts (None: not allowed)."""
        saved = self.window_ctx, self.srf_ctx
        self.window_ctx, self.srf_ctx = window, srf
        try:
            yield
        finally:
            self.window_ctx, self.srf_ctx = saved

    @contextlib.contextmanager
    def async_calls(self, allowed: bool) -> Iterator[None]:
        """Bind where calls that wait (nextval, pg_sleep) may be, or may not be."""
        saved = self.async_calls_ok
        self.async_calls_ok = allowed
        try:
            yield
        finally:
            self.async_calls_ok = saved

    @property
    def params(self) -> Params:
        return self.binder.params

    # -- public helpers --------------------------------------------------------------------

    def bind_condition(self, node: exp.Expression, scope: Scope, clause: str) -> BExpr:
        return self.coerce_condition(self.bind(node, scope), clause)

    def coerce_condition(self, e: BExpr, clause: str) -> BExpr:
        if e.type.id is TypeId.BOOL and not e.type.array:
            return e
        if e.type.id is TypeId.UNKNOWN:
            return self.coerce(e, T.BOOL)
        raise SqlError(
            DATATYPE_MISMATCH, f"argument of {clause} must be type boolean, not type {e.type}"
        )

    def make_and(self, args: list[BExpr]) -> BExpr:
        return BBool(T.BOOL, True, args)

    def contains_aggregate(self, node: exp.Expression) -> bool:
        for n in node.walk():
            if isinstance(n, exp.Subquery | exp.Select) and n is not node:
                continue
            if isinstance(n, (*_AGGREGATES, *_GROUPED_ONLY)) or (
                isinstance(n, exp.Anonymous) and str(n.this).lower() in _AGG_NAMES
            ):
                if not _inside_subquery(n, node) and not _is_window_function(n):
                    return True
        return False

    def _strong_name(self, node: exp.Expression) -> str | None:
        """The name ``node`` gives a column when Postgres lets it name an enclosing CASE (a
        column, a function call, a cast or CASE of one): ``CASE ... ELSE i END`` is ``i``."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Cast) and not _is_div_call(node):
            return self._strong_name(node.this)
        if isinstance(node, exp.Case):
            default = node.args.get("default")
            return self._strong_name(default) if default is not None else None
        if isinstance(node, exp.Column | exp.Func | exp.Anonymous):
            name = self.column_name(node)
            return None if name == "?column?" else name
        return None

    def column_name(self, node: exp.Expression) -> str:
        """The name Postgres gives an unaliased select item."""
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star) and node.table:
                return node.table  # ``(t.*)::text``: the whole row, named by its table
            return node.name
        if isinstance(node, exp.Cast) and not _is_div_call(node):
            inner = node.this
            while isinstance(inner, exp.Paren):  # Postgres's parse tree has no parentheses
                inner = inner.this
            base = inner.this if isinstance(inner, exp.Bracket) else None
            while isinstance(base, exp.Paren):
                base = base.this
            if isinstance(base, exp.Column):
                return base.name  # ``a[1]::text`` is named by the column, as in Postgres
            if isinstance(
                inner, exp.Column | exp.Func | exp.Anonymous | exp.WithinGroup | exp.Window
            ) and not isinstance(inner, exp.Cast):
                return self.column_name(inner)
            return _type_display_name(node.to)
        if isinstance(node, exp.Paren | exp.Collate):
            return self.column_name(node.this)
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func | exp.Anonymous):
            return self.column_name(node.expression)
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            return node.expression.name
        if isinstance(node, exp.Window | exp.Bracket | exp.WithinGroup):
            return self.column_name(node.this)
        source = _source_name(node)
        if source is not None:
            return source
        if isinstance(node, exp.Interval):
            return "interval"
        if isinstance(node, exp.Case):
            default = node.args.get("default")
            return (self._strong_name(default) if default is not None else None) or "case"
        if isinstance(node, exp.Exists):
            return "exists"
        if isinstance(node, exp.Array):
            return "array"
        if isinstance(node, exp.Tuple):
            return "row"
        if isinstance(node, exp.Coalesce):
            return "coalesce"
        if isinstance(node, exp.Subquery):
            inner = node.this
            if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                item = inner.expressions[0]
                return item.alias if isinstance(item, exp.Alias) else self.column_name(item)
            return "?column?"
        special = {
            exp.CurrentTimestamp: "now",
            exp.CurrentDate: "current_date",
            exp.CurrentUser: "current_user",
            exp.SessionUser: "session_user",
            exp.CurrentSchema: "current_schema",
            exp.CurrentVersion: "version",
            exp.CurrentCatalog: "current_catalog",
            exp.Extract: "extract",
        }
        for cls, name in special.items():
            if isinstance(node, cls):
                if cls is exp.CurrentTimestamp and "start" not in node.meta:
                    # now() carries its position; the keyword CURRENT_TIMESTAMP does not.
                    return "current_timestamp"
                return name
        if isinstance(node, exp.AtTimeZone):
            return "timezone"  # x AT TIME ZONE z is timezone(z, x)
        if isinstance(node, exp.Anonymous):
            return str(node.this).lower()
        if isinstance(node, tuple(_AGGREGATES)):
            return _AGGREGATES[type(node)]
        if isinstance(node, exp.Filter):
            return self.column_name(node.this)
        if json_operators.is_extract_path_call(node):
            # json_extract_path[_text](...), which sqlglot parses into a JSON path node.
            text = isinstance(node, exp.JSONExtractScalar)
            return "json_extract_path" + ("_text" if text else "")
        if isinstance(node, exp.Func) and (
            # Some calls are binary nodes to sqlglot (array_position).
            type(node) in _FUNCTION_NAMES or not isinstance(node, exp.Binary | exp.Connector)
        ):
            name, _ = self.function_name_args(node)
            return name
        return "?column?"

    def function_name_args(self, node: exp.Expression) -> tuple[str, list[exp.Expression]]:
        if isinstance(node, exp.Dot):
            node = node.expression
        if isinstance(node, exp.Anonymous):
            return str(node.this).lower(), list(node.expressions)
        mapped = _FUNCTION_NAMES.get(type(node))
        if mapped is not None:
            name, keys = mapped
            args: list[exp.Expression] = []
            for k in keys:
                v = node.args.get(k)
                if isinstance(v, list):
                    args.extend(v)
                elif v is not None:
                    args.append(v)
            return name, args
        if isinstance(node, exp.Pad):
            name = "lpad" if node.args.get("is_left") else "rpad"
            return name, [
                a
                for a in (node.this, node.args.get("expression"), node.args.get("fill_pattern"))
                if a is not None
            ]
        if isinstance(node, exp.ExplodingGenerateSeries | exp.GenerateSeries):
            return "generate_series", [
                a
                for a in (node.args.get("start"), node.args.get("end"), node.args.get("step"))
                if a is not None
            ]
        if isinstance(node, exp.Explode | exp.Unnest):
            return "unnest", [node.this, *node.expressions]
        if isinstance(node, exp.TimeToStr):
            return "to_char", [node.this, to_char_format_node(node.args["format"])]
        if isinstance(node, exp.Func):
            args = []
            for k in node.arg_types:
                v = node.args.get(k)
                if isinstance(v, list):
                    args.extend(a for a in v if isinstance(a, exp.Expression))
                elif isinstance(v, exp.Expression):
                    args.append(v)
            return node.sql_name().lower(), args
        raise unsupported(f"expression {type(node).__name__}")

    # -- coercion --------------------------------------------------------------------------

    def coerce(
        self, e: BExpr, target: SqlType, *, assignment: bool = False, explicit: bool = False
    ) -> BExpr:
        """``e`` as a value of ``target`` (an implicit, assignment or explicit cast)."""
        src = e.type
        if src == target:
            return e
        if isinstance(e, BParam) and src.id is TypeId.UNKNOWN:
            if target.id in _REG_TYPES and not target.array:
                # $1::regclass: the value is a name to look up in the catalog when the
                # statement runs (text input of a reg type takes only a number).
                self.params.resolve(e.index, T.TEXT)
                return self._reg_cast(e, target)
            self.params.resolve(e.index, _param_type(target))
            return (
                e
                if e.type == target
                else self.coerce(e, target, assignment=assignment, explicit=explicit)
            )
        if target.id is TypeId.UNKNOWN:
            return e
        if target.id in _REG_TYPES and not target.array and src.id is TypeId.UNKNOWN:
            return self._reg_cast(e, target)
        if src.id is TypeId.UNKNOWN and isinstance(e, BConst):
            if e.value is None:
                return BConst(target, None)
            if casts.depends_on_zone(src, target):
                # Read in the session's zone when the statement runs (plans are shared).
                return BCall(
                    target,
                    "cast",
                    lambda v, _t=target: casts.cast(str(v), T.UNKNOWN, _t),
                    [e],
                )
            return BConst(target, self._literal_as(str(e.value), target, explicit))
        if not explicit:
            allowed = (
                casts.can_assign(src, target)
                if assignment
                else casts.can_implicitly_cast(src, target)
            )
            if not allowed and src.id is not TypeId.UNKNOWN:
                if assignment:
                    raise SqlError(
                        DATATYPE_MISMATCH,
                        f"column is of type {target} but expression is of type {src}",
                        hint="You will need to rewrite or cast the expression.",
                    )
                raise SqlError(DATATYPE_MISMATCH, f"cannot cast type {src} to {target} implicitly")
        if target.id in _REG_TYPES and not target.array:
            return self._reg_cast(e, target)
        if isinstance(e, BConst) and not casts.depends_on_zone(src, target):
            if e.value is None:
                return BConst(target, None)
            return BConst(
                target, casts.cast(e.value, src, target, explicit=explicit or not assignment)
            )
        is_explicit = explicit or not assignment

        def cast_fn(v: object, _s: SqlType = src, _t: SqlType = target) -> object:
            return casts.cast(v, _s, _t, explicit=is_explicit)

        return BCall(target, "cast", cast_fn, [e])

    def _literal_as(self, text: str, target: SqlType, explicit: bool = False) -> object:
        from percolator.server.sql.textio import text_in

        if target.id in _REG_TYPES and not target.array:
            raise SqlError("0A000", "internal: reg literal")
        value = text_in(target, text)
        if target.typmod >= 0 or target.id in (TypeId.VARCHAR, TypeId.BPCHAR, TypeId.NUMERIC):
            source = SqlType(target.id, -1, target.array)
            value = casts.cast(value, source, target, explicit=explicit)
        return value

    def _reg_cast(self, e: BExpr, target: SqlType) -> BExpr:
        """'name'::regclass and friends: looked up when the statement runs."""
        from percolator.server.sql.catalog_functions import oid_to_reg, reg_lookup

        if operators.is_numeric(e.type):
            # An OID (pg_constraint.conrelid::regclass): printed as the name, as in Postgres.
            return BContextCall(
                target,
                "reg",
                lambda ctx, v, _t=target: None if v is None else oid_to_reg(ctx, _t, int(v)),
                [e],
            )
        return BContextCall(target, "reg", lambda ctx, v, _t=target: reg_lookup(ctx, _t, v), [e])

    def common_type(self, exprs: list[BExpr], context: str) -> SqlType:
        return self.common_type_of([e.type for e in exprs], context)

    def common_type_of(self, types: list[SqlType], context: str) -> SqlType:
        known = [t for t in types if t.id is not TypeId.UNKNOWN]
        if not known:
            return T.TEXT
        try:
            return casts.common_type(known)
        except SqlError as err:
            raise SqlError(err.sqlstate, f"{context} types {err.message}") from None

    # -- binding ---------------------------------------------------------------------------

    def bind(self, node: exp.Expression, scope: Scope) -> BExpr:
        method = getattr(self, f"_bind_{type(node).__name__}", None)
        if method is not None:
            return method(node, scope)
        if type(node) in _COMPARISONS:
            return self._comparison(node, scope, _COMPARISONS[type(node)])
        if type(node) in _ARITHMETIC:
            return self._arithmetic(node, scope, _ARITHMETIC[type(node)])
        if type(node) in _BITWISE_OPS:
            return self._arithmetic(node, scope, _BITWISE_OPS[type(node)])
        if isinstance(node, json_operators.NODE_TYPES):
            return json_operators.bind_operator(self, node, scope)
        if isinstance(node, tuple(_AGGREGATES)):
            raise SqlError(GROUPING_ERROR, "aggregate functions are not allowed here")
        if isinstance(node, window_binder.WINDOW_ONLY):
            raise window_binder.requires_over(node)
        if isinstance(node, exp.Func):
            return self._function(node, scope)
        if node.__class__.__name__ == "_IndexRef":
            col = scope.columns[node.column_index]  # type: ignore[attr-defined]
            return BColumn(col.type, node.column_index, col.name)  # type: ignore[attr-defined]
        raise unsupported(f"expression {node.sql(dialect='postgres')[:60]!r}")

    def _bind_Paren(self, node: exp.Paren, scope: Scope) -> BExpr:
        return self.bind(node.this, scope)

    def _bind_Tuple(self, node: exp.Tuple, scope: Scope) -> BExpr:
        return row_values.bind_row(self, list(node.expressions), scope)

    def _bind_Alias(self, node: exp.Alias, scope: Scope) -> BExpr:
        return self.bind(node.this, scope)

    def _bind_Column(self, node: exp.Column, scope: Scope) -> BExpr:
        if isinstance(node.this, exp.Star):
            row = (
                row_values.whole_row(scope, node.table, self.binder.catalog) if node.table else None
            )
            if row is None:
                raise unsupported("table.* in this position")
            return row
        qualifier = node.table or None
        if node.db:
            qualifier = node.table
        try:
            level, index, col = scope.resolve(qualifier, node.name)
        except SqlError as err:
            # A FROM item's name where no column has it is the item's whole row.
            row = (
                row_values.whole_row(scope, node.name, self.binder.catalog)
                if qualifier is None
                else None
            )
            if row is None or err.sqlstate != UNDEFINED_COLUMN:
                raise
            return row
        if level == 0:
            return BColumn(col.type, index, col.name)
        return BOuter(col.type, level, index)

    def _bind_Identifier(self, node: exp.Identifier, scope: Scope) -> BExpr:
        return self._bind_Column(exp.Column(this=node), scope)

    def _bind_Literal(self, node: exp.Literal, scope: Scope) -> BExpr:
        if node.is_string:
            return BConst(T.UNKNOWN, node.this)
        text = node.this
        if re.fullmatch(r"\d+", text):
            v = int(text)
            if v <= _INT4_MAX:
                return BConst(T.INT4, v)
            if v <= _INT8_MAX:
                return BConst(T.INT8, v)
            return BConst(T.NUMERIC, Decimal(text))
        return BConst(T.NUMERIC, Decimal(text))

    def _bind_Null(self, node: exp.Null, scope: Scope) -> BExpr:
        return BConst(T.UNKNOWN, None)

    def _bind_Boolean(self, node: exp.Boolean, scope: Scope) -> BExpr:
        return BConst(T.BOOL, bool(node.this))

    def _bind_ByteString(self, node: exp.ByteString, scope: Scope) -> BExpr:
        # E'...' strings: sqlglot already applied the escapes.
        return BConst(T.UNKNOWN, node.this)

    def _bind_RawString(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BConst(T.UNKNOWN, node.this)

    def _bind_National(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BConst(T.UNKNOWN, node.this)

    def _bind_HexString(self, node: exp.HexString, scope: Scope) -> BExpr:
        raise unsupported("bit-string constants")

    def _bind_Parameter(self, node: exp.Parameter, scope: Scope) -> BExpr:
        inner = node.this
        text = (
            inner.this if isinstance(inner, exp.Literal | exp.Identifier | exp.Var) else str(inner)
        )
        try:
            n = int(str(text))
        except ValueError:
            raise SqlError(SYNTAX_ERROR, f'syntax error at or near "${text}"') from None
        if n < 1:
            raise SqlError(UNDEFINED_PARAMETER, f"there is no parameter ${n}")
        if n > 65535:
            raise SqlError(UNDEFINED_PARAMETER, f"there is no parameter ${n}")
        return self.params.node(n - 1)

    def _bind_Placeholder(self, node: exp.Placeholder, scope: Scope) -> BExpr:
        raise SqlError(SYNTAX_ERROR, 'syntax error at or near "?"')

    def _bind_Cast(self, node: exp.Cast, scope: Scope) -> BExpr:
        if _is_div_call(node):
            # sqlglot rewrites div(a, b) as CAST(a // b AS numeric): bind the function.
            div = node.this
            return self.call("div", [self.bind(div.this, scope), self.bind(div.expression, scope)])
        target = self.bind_type(node.to)
        inner = self.bind(node.this, scope)
        # An argument reaching a user function's parameter is cast implicitly.
        return self.coerce(inner, target, explicit=not node.args.get(user_functions.IMPLICIT))

    def bind_type(self, dtype: exp.DataType) -> SqlType:
        """A sqlglot DataType (or its text) as our SqlType; 42704 for unknown types."""
        array = False
        if dtype.this == exp.DataType.Type.ARRAY:
            array = True
            dtype = dtype.expressions[0]
        text = dtype.sql(dialect="postgres")
        base = text.split("(")[0].strip().lower()
        if base != '"char"':
            base = base.replace('"', "")  # a quoted name: "pg_catalog"."int4"
        if base.endswith("[]"):
            array = True
            base = base[:-2].strip()
        mods: tuple[int, ...] = ()
        params = [p for p in dtype.expressions if isinstance(p, exp.DataTypeParam)]
        if params:
            try:
                mods = tuple(int(p.this.this) for p in params)
            except (ValueError, AttributeError):
                raise SqlError(SYNTAX_ERROR, f"invalid type modifier in {text}") from None
        base = _SQLGLOT_TYPE_NAMES.get(base, base)
        if dtype.this == exp.DataType.Type.USERDEFINED or base not in _KNOWN_BASES:
            base = (
                (dtype.args.get("kind") or base)
                if isinstance(dtype.args.get("kind"), str)
                else base
            )
        try:
            t = T.make_type(base, mods, array)
        except ValueError as err:
            # A modifier the type does not take is a syntax error; one out of range is a bad
            # value (numeric(1001), varchar(0), float(54)), as Postgres classes them.
            code = SYNTAX_ERROR if "takes no modifiers" in str(err) else INVALID_PARAMETER_VALUE
            raise SqlError(code, str(err)) from None
        if t is None:
            t = self._user_type(dtype, base, array)
        if t is None:
            raise SqlError(UNDEFINED_OBJECT, f'type "{base}" does not exist')
        return t

    def _user_type(self, dtype: exp.DataType, base: str, array: bool) -> SqlType | None:
        """An enum type of the catalog named by ``dtype`` (its name keeps a quoted name's
        case), or None."""
        kind = dtype.args.get("kind")
        name = base
        if isinstance(kind, exp.Identifier):
            name = kind.this if kind.quoted else kind.this.lower()
        elif isinstance(kind, exp.Dot | exp.Column | exp.Table):
            name = kind.sql(dialect="postgres").replace('"', "")
        name = name.removeprefix("public.")
        found = self.binder.catalog.enums.get(schemas.resolve_type(self.binder.catalog, name))
        return None if found is None else SqlType(found, array=array)

    def _bind_DataType(self, node: exp.DataType, scope: Scope) -> BExpr:
        raise unsupported(f"type name {node.sql()} as a value")

    def _comparison(self, node: exp.Expression, scope: Scope, op: str) -> BExpr:
        right_node = node.expression
        if (
            isinstance(right_node, exp.Anonymous)
            and str(right_node.this).upper() in ("ALL", "SOME")
            and len(right_node.expressions) == 1
        ):
            # sqlglot reads ``op ALL (array)`` / ``op SOME (array)`` as a function call.
            quant = exp.All if str(right_node.this).upper() == "ALL" else exp.Any
            right_node = quant(this=right_node.expressions[0])
        if isinstance(right_node, exp.Any | exp.All):
            return self._any_all(node, scope, op, right_node)
        left_row = row_values.row_items(node.this)
        right_row = row_values.row_items(right_node)
        if left_row is not None and right_row is not None:
            return row_values.compare(self, op, left_row, right_row, scope)
        if left_row is not None and isinstance(right_node, exp.Subquery | exp.Select):
            return row_values.compare_with_subquery(self, op, left_row, right_node, scope)
        left = self.bind(node.this, scope)
        right = self.bind(right_node, scope)
        return self.compare(op, left, right)

    def compare(self, op: str, left: BExpr, right: BExpr) -> BExpr:
        left, right, t = self._unify(left, right, op)
        fn = operators.comparison(op, t)
        return BCall(T.BOOL, op, fn, [left, right])

    def _unify(self, left: BExpr, right: BExpr, op: str) -> tuple[BExpr, BExpr, SqlType]:
        lu = left.type.id is TypeId.UNKNOWN
        ru = right.type.id is TypeId.UNKNOWN
        if lu and ru:
            return self.coerce(left, T.TEXT), self.coerce(right, T.TEXT), T.TEXT
        if lu:
            return self.coerce(left, _param_type(right.type)), right, _param_type(right.type)
        if ru:
            return left, self.coerce(right, _param_type(left.type)), _param_type(left.type)
        t = operators.comparison_type(left.type, right.type)
        if t is None:
            raise operators.operator_missing(op, left.type, right.type)
        return self.coerce(left, t, explicit=True), self.coerce(right, t, explicit=True), t

    def _any_all(self, node: exp.Expression, scope: Scope, op: str, quant: exp.Expression) -> BExpr:
        inner = quant.this
        is_all = isinstance(quant, exp.All)
        left_row = row_values.row_items(node.this)
        if left_row is not None and isinstance(inner, exp.Subquery | exp.Query):
            return row_values.quantified_subquery(self, op, left_row, inner, scope, is_all)
        left = self.bind(node.this, scope)
        if isinstance(inner, exp.Subquery | exp.Select):
            if op == "=" and not is_all:
                return self._in_subquery(left, inner, scope, negate=False)
            # Other operators compare with every row: the subquery's values as an array
            # (with the same NULL rules: a NULL value makes a non-decisive result NULL).
            arr = self._array_subquery(inner, scope)
        else:
            arr = self.bind(inner, scope)
        if arr.type.id is TypeId.UNKNOWN:
            arr = self.coerce(
                arr,
                SqlType(left.type.id, array=True)
                if left.type.id is not TypeId.UNKNOWN
                else T.TEXT_ARRAY,
            )
        if not arr.type.array:
            raise SqlError(DATATYPE_MISMATCH, "op ANY/ALL (array) requires array on right side")
        elem = arr.type.element
        left, _, t = self._unify(
            left, BConst(elem, None) if elem.id is not TypeId.UNKNOWN else BConst(T.TEXT, None), op
        )
        cmp = operators.comparison(op, t)
        conv = (lambda v: v) if t == elem else (lambda v, _e=elem, _t=t: casts.cast(v, _e, _t))

        def any_all(v: object, values: list[object] | None) -> object:
            if values is None:
                return None
            if not values:
                # Over no values ANY is false and ALL true, even for a NULL operand.
                return is_all
            if v is None:
                return None
            saw_null = False
            for item in values:
                if item is None:
                    saw_null = True
                    continue
                r = cmp(v, conv(item))
                if is_all and not r:
                    return False
                if not is_all and r:
                    return True
            if saw_null:
                return None
            return is_all

        return BCall(T.BOOL, "any", any_all, [left, arr], strict=False)

    def _array_subquery(self, query: exp.Expression, scope: Scope) -> BExpr:
        """The values of a one-column subquery as an array (ARRAY(subquery))."""
        rel = self._subquery_rel(query, scope)
        if len(rel.columns) != 1:
            raise SqlError(SYNTAX_ERROR, "subquery has too many columns")
        rel = self.binder._resolve_unknown_output(rel)
        return self.subquery(SubqueryKind.ARRAY, rel, rel.columns[0].type.array_of())

    def _arithmetic(self, node: exp.Expression, scope: Scope, op: str) -> BExpr:
        left = self.bind(node.this, scope)
        right = self.bind(node.expression, scope)
        if op == "-" and left.type.id is TypeId.JSONB and not left.type.array:
            return json_operators.bind_minus(self, left, right)
        if left.type.id is TypeId.UNKNOWN and right.type.id is not TypeId.UNKNOWN:
            left = self.coerce(left, _arith_partner(right.type, op))
        elif right.type.id is TypeId.UNKNOWN and left.type.id is not TypeId.UNKNOWN:
            right = self.coerce(right, _arith_partner(left.type, op))
        elif left.type.id is TypeId.UNKNOWN and right.type.id is TypeId.UNKNOWN:
            raise SqlError(
                AMBIGUOUS_FUNCTION,
                f"operator is not unique: unknown {op} unknown",
                hint="Could not choose a best candidate operator. "
                "You might need to add explicit type casts.",
            )
        found = (
            operators.bitwise(op, left.type, right.type)
            if op in _BITWISE_OPS_BY_NAME
            else operators.arithmetic(op, left.type, right.type)
        )
        if found is None:
            raise operators.operator_missing(op, left.type, right.type)
        fn, rt = found
        if operators.is_numeric(left.type) and operators.is_numeric(right.type):
            left = (
                self.coerce(left, rt)
                if rt.id in (TypeId.NUMERIC, TypeId.FLOAT8, TypeId.FLOAT4)
                and left.type.id != rt.id
                and left.type.id not in (TypeId.INT2, TypeId.INT4, TypeId.INT8)
                else left
            )
        return BCall(rt, op, fn, [left, right])

    def _bind_Neg(self, node: exp.Neg, scope: Scope) -> BExpr:
        inner = node.this
        while isinstance(inner, exp.Paren):  # -(2147483648) folds too: parens leave no node
            inner = inner.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            text = "-" + inner.this
            if re.fullmatch(r"-\d+", text):
                v = int(text)
                if v >= -(1 << 31):
                    return BConst(T.INT4, v)
                if v >= -(1 << 63):
                    return BConst(T.INT8, v)
            return BConst(T.NUMERIC, Decimal(text))
        e = self.bind(inner, scope)
        if e.type.id is TypeId.UNKNOWN:
            raise SqlError(
                AMBIGUOUS_FUNCTION,
                "operator is not unique: - unknown",
                hint="Could not choose a best candidate operator. "
                "You might need to add explicit type casts.",
            )
        if e.type.id is TypeId.INTERVAL:
            return BCall(e.type, "-", lambda v: -v, [e])
        if not operators.is_numeric(e.type):
            raise SqlError(UNDEFINED_FUNCTION, f"operator does not exist: - {e.type}")
        return BCall(e.type, "neg", operators.negation(e.type), [e])

    def _bind_BitwiseNot(self, node: exp.BitwiseNot, scope: Scope) -> BExpr:
        e = self.bind(node.this, scope)
        if e.type.id is TypeId.UNKNOWN:
            e = self.coerce(e, T.INT4)
        if e.type.array or e.type.id not in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
            raise SqlError(UNDEFINED_FUNCTION, f"operator does not exist: ~ {e.type}")
        return BCall(SqlType(e.type.id), "~", operator.invert, [e])

    def _bind_DPipe(self, node: exp.DPipe, scope: Scope) -> BExpr:
        left = self.bind(node.this, scope)
        right = self.bind(node.expression, scope)
        if left.type.array or right.type.array:
            return array_operators.bind_concat(self, left, right)
        if TypeId.JSONB in (left.type.id, right.type.id):
            return json_operators.bind_concat(self, left, right)
        ids = {left.type.id, right.type.id}
        if TypeId.BYTEA in ids and ids <= {TypeId.BYTEA, TypeId.UNKNOWN}:
            parts = [self.coerce(left, T.BYTEA), self.coerce(right, T.BYTEA)]
            return BCall(T.BYTEA, "||", operator.add, parts)
        if not any(
            operators.is_string(t) or t.id is TypeId.UNKNOWN for t in (left.type, right.type)
        ):
            # Postgres's || takes text on one side at least (anynonarray || text).
            raise operators.operator_missing("||", left.type, right.type)
        parts = [self._as_text(left), self._as_text(right)]
        return BCall(T.TEXT, "||", operators.concat_text, parts)

    def _as_text(self, e: BExpr) -> BExpr:
        if e.type.id in (TypeId.TEXT, TypeId.VARCHAR) and not e.type.array:
            return e
        return self.coerce(e, T.TEXT, explicit=True)

    def _bind_And(self, node: exp.And, scope: Scope) -> BExpr:
        args = [self.bind_condition(a, scope, "AND") for a in _flatten(node, exp.And)]
        return BBool(T.BOOL, True, args)

    def _bind_Or(self, node: exp.Or, scope: Scope) -> BExpr:
        args = [self.bind_condition(a, scope, "OR") for a in _flatten(node, exp.Or)]
        return BBool(T.BOOL, False, args)

    def _bind_Not(self, node: exp.Not, scope: Scope) -> BExpr:
        inner = node.this
        if isinstance(inner, exp.RegexpLike | exp.RegexpILike):
            return BNot(T.BOOL, self.bind(inner, scope))
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            # ``row IS NOT NULL`` (every field non-NULL) is not ``NOT (row IS NULL)``.
            test = self._bind_Is(inner, scope)
            if isinstance(test, BCall) and test.name == row_values.ROW_IS_NULL:
                return row_values.is_null(test.args[0], negate=True)
            return BNot(T.BOOL, test)
        return BNot(T.BOOL, self.bind_condition(inner, scope, "NOT"))

    def _bind_Is(self, node: exp.Is, scope: Scope) -> BExpr:
        target = node.expression
        arg = self.bind(node.this, scope)
        negate = bool(node.args.get("negate"))
        if isinstance(target, exp.Null):
            if row_values.is_row(arg):
                return row_values.is_null(arg, negate)
            return BIsNull(T.BOOL, arg, negate)
        if isinstance(target, exp.Boolean):
            return BIsBool(T.BOOL, self.coerce_condition(arg, "IS"), bool(target.this), negate)
        raise unsupported(f"IS {target.sql()}")

    def _bind_NullSafeEQ(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._distinct(node, scope, negate=True)

    def _bind_NullSafeNEQ(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._distinct(node, scope, negate=False)

    def _distinct(self, node: exp.Expression, scope: Scope, negate: bool) -> BExpr:
        left = self.bind(node.this, scope)
        right = self.bind(node.expression, scope)
        left, right, t = self._unify(left, right, "=")
        eq = operators.comparison("=", t)

        def is_distinct(a: object, b: object) -> bool:
            if a is None or b is None:
                d = (a is None) != (b is None)
            else:
                d = not eq(a, b)
            return not d if negate else d

        return BCall(T.BOOL, "is distinct from", is_distinct, [left, right], strict=False)

    def _bind_Between(self, node: exp.Between, scope: Scope) -> BExpr:
        arg = node.this
        lo, hi = node.args["low"], node.args["high"]
        low = self._comparison(exp.GTE(this=arg, expression=lo), scope, ">=")
        high = self._comparison(exp.LTE(this=arg, expression=hi), scope, "<=")
        forward = BBool(T.BOOL, True, [low, high])
        if not node.args.get("symmetric"):
            return forward
        # BETWEEN SYMMETRIC: either order of the bounds.
        low2 = self._comparison(exp.GTE(this=arg, expression=hi), scope, ">=")
        high2 = self._comparison(exp.LTE(this=arg, expression=lo), scope, "<=")
        return BBool(T.BOOL, False, [forward, BBool(T.BOOL, True, [low2, high2])])

    def _bind_In(self, node: exp.In, scope: Scope) -> BExpr:
        query = node.args.get("query")
        if node.args.get("unnest"):
            raise unsupported("IN UNNEST")
        left_row = row_values.row_items(node.this)
        if left_row is not None:
            if query is not None:
                return row_values.in_subquery(self, left_row, query, scope)
            return row_values.in_list(self, left_row, list(node.expressions), scope)
        arg = self.bind(node.this, scope)
        if query is not None:
            return self._in_subquery(arg, query, scope, negate=False)
        items = [self.bind(i, scope) for i in node.expressions]
        t = self.common_type_of([arg.type] + [i.type for i in items], "IN")
        if arg.type.id is not TypeId.UNKNOWN and all(i.type.id is TypeId.UNKNOWN for i in items):
            t = _param_type(arg.type)
        arg = self.coerce(
            arg,
            t,
            explicit=arg.type.id is not TypeId.UNKNOWN
            and operators.comparison_type(arg.type, t) is not None,
        )
        items = [self.coerce(i, t, explicit=i.type.id is not TypeId.UNKNOWN) for i in items]
        return BInList(T.BOOL, arg, items, False, operators.comparison("=", t))

    def _in_subquery(self, arg: BExpr, query: exp.Expression, scope: Scope, negate: bool) -> BExpr:
        sub = self._subquery_rel(query, scope)
        if len(sub.columns) != 1:
            raise SqlError(SYNTAX_ERROR, "subquery has too many columns")
        col_t = sub.columns[0].type
        if arg.type.id is TypeId.UNKNOWN:
            arg = self.coerce(arg, col_t)
        t = operators.comparison_type(arg.type, col_t)
        if t is None:
            raise operators.operator_missing("=", arg.type, col_t)
        arg = self.coerce(arg, t, explicit=True)
        if col_t != t:
            from percolator.server.sql.bound import ProjectRel

            sub = ProjectRel(
                [OutCol(sub.columns[0].name, t)],
                sub,
                [self.coerce(BColumn(col_t, 0), t, explicit=True)],
            )
        return self.subquery(SubqueryKind.IN, sub, T.BOOL, arg=arg, negate=negate)

    def _subquery_rel(self, query: exp.Expression, scope: Scope):  # type: ignore[no-untyped-def]
        node = query.this if isinstance(query, exp.Subquery) else query
        return self.binder.bind_query(node, scope)

    def subquery(
        self,
        kind: SubqueryKind,
        rel: Any,
        t: SqlType,
        arg: BExpr | None = None,
        negate: bool = False,
    ) -> BExpr:
        slot = self.subquery_slots
        self.subquery_slots += 1
        correlated = _is_correlated(rel)
        return BSubquery(t, kind, rel, slot, correlated, arg, negate)

    def _bind_Exists(self, node: exp.Exists, scope: Scope) -> BExpr:
        rel = self._subquery_rel(node.this, scope)
        return self.subquery(SubqueryKind.EXISTS, rel, T.BOOL)

    def _bind_Subquery(self, node: exp.Subquery, scope: Scope) -> BExpr:
        rel = self._subquery_rel(node, scope)
        if len(rel.columns) != 1:
            raise SqlError(
                SYNTAX_ERROR,
                "subquery must return only one column",
            )
        return self.subquery(SubqueryKind.SCALAR, rel, rel.columns[0].type)

    def _bind_Select(self, node: exp.Select, scope: Scope) -> BExpr:
        return self._bind_Subquery(exp.Subquery(this=node), scope)

    def _bind_Array(self, node: exp.Array, scope: Scope) -> BExpr:
        items = node.expressions
        if len(items) == 1 and isinstance(items[0], exp.Select | exp.Subquery):
            rel = self._subquery_rel(items[0], scope)
            return self.subquery(SubqueryKind.ARRAY, rel, rel.columns[0].type.array_of())
        bound = [self.bind(i, scope) for i in items]
        elem = self.common_type(bound, "ARRAY") if bound else T.TEXT
        bound = [self.coerce(b, elem) for b in bound]
        # Array elements make a multi-dimensional array, which must stay rectangular.
        build = array_operators.nest if elem.array else (lambda *v: list(v))
        return BCall(elem.array_of(), "array", build, bound, strict=False)

    def _bind_Like(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._like(node, scope, False)

    def _bind_ILike(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._like(node, scope, True)

    def _bind_Escape(self, node: exp.Escape, scope: Scope) -> BExpr:
        inner = node.this
        if isinstance(inner, exp.SimilarTo):
            return regex_functions.bind_similar(self, inner, scope, node.expression)
        esc = self.bind(node.expression, scope)
        if not isinstance(esc, BConst):
            raise unsupported("a non-constant LIKE ESCAPE")
        return self._like(inner, scope, isinstance(inner, exp.ILike), str(esc.value))

    def _like(self, node: exp.Expression, scope: Scope, ci: bool, escape: str = "\\") -> BExpr:
        # sqlglot folds NOT LIKE / NOT ILIKE into the node as ``negate``.
        like = self._like_match(node, scope, ci, escape)
        return BNot(T.BOOL, like) if node.args.get("negate") else like

    def _like_match(self, node: exp.Expression, scope: Scope, ci: bool, escape: str) -> BExpr:
        if isinstance(node.expression, exp.Any | exp.All):
            raise unsupported("LIKE ANY/ALL")
        arg = self._as_text(
            self.coerce(self.bind(node.this, scope), T.TEXT)
            if self.bind(node.this, scope).type.id is TypeId.UNKNOWN
            else self.bind(node.this, scope)
        )
        pattern = self.coerce(self.bind(node.expression, scope), T.TEXT)
        if isinstance(pattern, BConst) and pattern.value is not None:
            regex = operators.like_matcher(str(pattern.value), ci, escape)
            return BCall(T.BOOL, "like", lambda s, _r=regex: _r.fullmatch(s) is not None, [arg])
        cache: dict[str, re.Pattern[str]] = {}

        def like(s: str, p: str) -> bool:
            r = cache.get(p)
            if r is None:
                r = cache[p] = operators.like_matcher(p, ci, escape)
            return r.fullmatch(s) is not None

        return BCall(T.BOOL, "like", like, [arg, pattern])

    def _bind_SimilarTo(self, node: exp.SimilarTo, scope: Scope) -> BExpr:
        return regex_functions.bind_similar(self, node, scope)  # type: ignore[no-any-return]

    def _bind_RegexpLike(self, node: exp.Expression, scope: Scope) -> BExpr:
        if node.args.get("flag") is not None:  # regexp_like(s, pattern, flags)
            args = [node.this, node.expression, node.args["flag"]]
            return self.call("regexp_like", [self.bind(a, scope) for a in args])
        return self._regex(node.this, node.expression, scope, False)

    def _bind_RegexpILike(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._regex(node.this, node.expression, scope, True)

    def _bind_Operator(self, node: exp.Operator, scope: Scope) -> BExpr:
        op = str(node.args.get("operator", "")).replace("pg_catalog.", "").strip()
        mapping = {
            "~": (False, False),
            "~*": (True, False),
            "!~": (False, True),
            "!~*": (True, True),
        }
        if op in mapping:
            ci, neg = mapping[op]
            e = self._regex(node.this, node.expression, scope, ci)
            return BNot(T.BOOL, e) if neg else e
        if op in ("=", "<>", "<", ">", "<=", ">="):
            return self.compare(op, self.bind(node.this, scope), self.bind(node.expression, scope))
        raise unsupported(f"operator {op}")

    def _regex(self, left: exp.Expression, right: exp.Expression, scope: Scope, ci: bool) -> BExpr:
        arg = regex_functions.regex_operand(self, self.bind(left, scope), "~*" if ci else "~")
        pattern = self.coerce(self.bind(right, scope), T.TEXT)
        flags = re.IGNORECASE if ci else 0
        if isinstance(pattern, BConst) and pattern.value is not None:
            regex = _compile_regex(str(pattern.value), flags)
            return BCall(T.BOOL, "~", lambda s, _r=regex: _r.search(s) is not None, [arg])
        return BCall(
            T.BOOL, "~", lambda s, p: _compile_regex(p, flags).search(s) is not None, [arg, pattern]
        )

    def _bind_Bracket(self, node: exp.Bracket, scope: Scope) -> BExpr:
        """Subscripts and slices: ``a[i]``, ``a[i][j]``, ``a[lo:hi]`` (bounds may be left out);
        sqlglot nests each further subscript as a Bracket around the previous ones."""
        chain: list[exp.Expression] = []
        base: exp.Expression = node
        while isinstance(base, exp.Bracket):
            if len(base.expressions) != 1:
                raise SqlError(SYNTAX_ERROR, 'syntax error at or near ","')
            chain.append(base.expressions[0])
            base = base.this
        arr = self.bind(base, scope)
        subscripts: list[array_operators.Subscript] = []
        for sub in reversed(chain):
            if isinstance(sub, exp.Slice):
                lower, upper = sub.this, sub.expression
                subscripts.append(
                    (
                        None if lower is None else self.bind(lower, scope),
                        None if upper is None else self.bind(upper, scope),
                        True,
                    )
                )
            else:
                subscripts.append((None, self.bind(sub, scope), False))
        return array_operators.bind_subscript(self, arr, subscripts)

    def _bind_ArrayOverlaps(self, node: exp.ArrayOverlaps, scope: Scope) -> BExpr:
        left = self.bind(node.this, scope)
        right = self.bind(node.expression, scope)
        return array_operators.bind_set_operator(self, "&&", left, right)

    def _bind_Collate(self, node: exp.Collate, scope: Scope) -> BExpr:
        return self.bind(node.this, scope)

    def _bind_Case(self, node: exp.Case, scope: Scope) -> BExpr:
        operand = node.this
        whens: list[tuple[BExpr, BExpr]] = []
        results: list[BExpr] = []
        conds: list[BExpr] = []
        for w in node.args.get("ifs") or []:
            if operand is not None:
                cond = self._comparison(exp.EQ(this=operand, expression=w.this), scope, "=")
            else:
                cond = self.bind_condition(w.this, scope, "CASE/WHEN")
            conds.append(cond)
            results.append(self.bind(w.args["true"], scope))
        default_node = node.args.get("default")
        default = self.bind(default_node, scope) if default_node is not None else None
        t = self.common_type(results + ([default] if default is not None else []), "CASE")
        whens = [(c, self.coerce(r, t)) for c, r in zip(conds, results, strict=True)]
        return BCase(t, whens, self.coerce(default, t) if default is not None else None)

    def _bind_If(self, node: exp.If, scope: Scope) -> BExpr:
        cond = self.bind_condition(node.this, scope, "CASE/WHEN")
        true = self.bind(node.args["true"], scope)
        false_node = node.args.get("false")
        false = self.bind(false_node, scope) if false_node is not None else None
        t = self.common_type([true] + ([false] if false is not None else []), "CASE")
        return BCase(
            t, [(cond, self.coerce(true, t))], self.coerce(false, t) if false is not None else None
        )

    def _bind_Coalesce(self, node: exp.Coalesce, scope: Scope) -> BExpr:
        args = [self.bind(node.this, scope)] + [self.bind(e, scope) for e in node.expressions]
        t = self.common_type(args, "COALESCE")
        return BCoalesce(t, [self.coerce(a, t) for a in args])

    def _bind_Nullif(self, node: exp.Nullif, scope: Scope) -> BExpr:
        left = self.bind(node.this, scope)
        right = self.bind(node.expression, scope)
        left2, right2, t = self._unify(left, right, "=")
        eq = operators.comparison("=", t)
        rtype = left2.type
        return BCall(
            rtype,
            "nullif",
            lambda a, b: None if a is not None and b is not None and eq(a, b) else a,
            [left2, right2],
            strict=False,
        )

    def _bind_Greatest(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._extreme(node, scope, max, "greatest")

    def _bind_Least(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._extreme(node, scope, min, "least")

    def _extreme(
        self, node: exp.Expression, scope: Scope, pick: Callable[..., Any], name: str
    ) -> BExpr:
        args = [self.bind(node.this, scope)] + [self.bind(e, scope) for e in node.expressions]
        t = self.common_type(args, name.upper())
        args = [self.coerce(a, t) for a in args]
        key = operators.order_key(t)  # NaN is the greatest number
        if key is None and (isinstance(t.id, EnumType) or t.id is TypeId.RECORD):
            key = casts.compare_key(t)  # enums in declaration order, not by label

        def extreme(*vals: object) -> object:
            present = [v for v in vals if v is not None]
            return pick(present, key=key) if present else None

        return BCall(t, name, extreme, args, strict=False)

    def _bind_Interval(self, node: exp.Interval, scope: Scope) -> BExpr:
        from percolator.server.sql.textio import text_in

        value = node.this
        unit = node.args.get("unit")
        text = value.this if isinstance(value, exp.Literal) else value.sql()
        if unit is not None:
            text = f"{text} {unit.name if hasattr(unit, 'name') else unit}"
        return BConst(T.INTERVAL, text_in(T.INTERVAL, str(text)))

    def _bind_Extract(self, node: exp.Extract, scope: Scope) -> BExpr:
        field_node = node.this
        if isinstance(field_node, exp.Var | exp.Identifier):
            field: BExpr = BConst(T.TEXT, field_node.name)
        else:  # date_part's field as a value: a literal lifted into a parameter, an expression
            field = self.coerce(self.bind(field_node, scope), T.TEXT)
        arg = self.bind(node.expression, scope)
        source = extract_source_type(T.UNKNOWN, arg.type)
        if source is None:
            raise SqlError(
                UNDEFINED_FUNCTION,
                f"function pg_catalog.extract(unknown, {arg.type}) does not exist",
                hint="No function matches the given name and argument types. You might need to"
                " add explicit type casts.",
            )
        # A timestamptz's fields are its wall clock's in the zone of the running statement.
        args = [field, self.coerce(arg, source)]
        return BContextCall(T.NUMERIC, "extract", extract_in_zone, args)

    def _bind_AtTimeZone(self, node: exp.AtTimeZone, scope: Scope) -> BExpr:
        # value AT TIME ZONE zone is timezone(zone, value).
        return self.call(
            "timezone", [self.bind(node.args["zone"], scope), self.bind(node.this, scope)]
        )

    def _bind_Trim(self, node: exp.Trim, scope: Scope) -> BExpr:
        arg = self.coerce(self.bind(node.this, scope), T.TEXT)
        chars_node = node.args.get("expression")
        chars = (
            self.coerce(self.bind(chars_node, scope), T.TEXT)
            if chars_node is not None
            else BConst(T.TEXT, " ")
        )
        where = (node.args.get("position") or "BOTH").upper()
        fn = {"BOTH": str.strip, "LEADING": str.lstrip, "TRAILING": str.rstrip}[where]
        return BCall(T.TEXT, "trim", lambda s, c: fn(s, c), [self._as_text(arg), chars])

    def _bind_CurrentTimestamp(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.TIMESTAMPTZ, "now", lambda ctx: ctx.transaction_time, [])

    def _bind_CurrentDate(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.DATE, "current_date", current_date, [])

    def _bind_Localtimestamp(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(
            T.TIMESTAMP, "localtimestamp", local_timestamp, self._precision(node, scope)
        )

    def _bind_Localtime(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.TIME, "localtime", local_time, self._precision(node, scope))

    def _precision(self, node: exp.Expression, scope: Scope) -> list[BExpr]:
        """The fractional-second precision argument of ``LOCALTIMESTAMP(p)``, if written."""
        if node.this is None:
            return []
        return [self.coerce(self.bind(node.this, scope), T.INT4)]

    def _bind_CurrentTime(self, node: exp.Expression, scope: Scope) -> BExpr:
        raise unsupported("current_time (time with time zone)")

    def _bind_CurrentUser(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.NAME, "current_user", lambda ctx: ctx.user, [])

    def _bind_SessionUser(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.NAME, "session_user", lambda ctx: ctx.user, [])

    def _bind_CurrentSchema(self, node: exp.Expression, scope: Scope) -> BExpr:
        # The first existing schema of the search path (server/sql/schemas.py).
        return self._function(exp.Anonymous(this="current_schema", expressions=[]), scope)

    def _bind_CurrentCatalog(self, node: exp.Expression, scope: Scope) -> BExpr:
        return BContextCall(T.NAME, "current_catalog", lambda ctx: ctx.database, [])

    def _bind_CurrentVersion(self, node: exp.Expression, scope: Scope) -> BExpr:
        return self._function(exp.Anonymous(this="version", expressions=[]), scope)

    def _bind_Dot(self, node: exp.Dot, scope: Scope) -> BExpr:
        left = node.this
        right = node.expression
        if (
            isinstance(left, exp.Identifier | exp.Column | exp.Var)
            and str(left.name).lower() == "pg_catalog"
        ):
            return self.bind(right, scope)
        if isinstance(right, exp.Anonymous) and isinstance(left, exp.Identifier | exp.Column):
            schema = str(left.name).lower()
            found = self.user_function(right, scope, schema)
            if found is not None:
                return found
            if schema not in schemas.SYSTEM_SCHEMAS and not schemas.exists(
                self.binder.catalog, schema
            ):
                raise SqlError(schemas.INVALID_SCHEMA_NAME, f'schema "{schema}" does not exist')
        if isinstance(right, exp.Func | exp.Anonymous):
            return self.bind(right, scope)
        if isinstance(right, exp.Identifier):
            return self.field_select(self.bind(left, scope), right.name)
        raise unsupported(f"expression {node.sql(dialect='postgres')}")

    def field_select(self, base: BExpr, name: str) -> BExpr:
        """``(base).name`` on a composite value (a function's record result)."""
        from percolator.server.sql.set_functions import record_fields

        fields = record_fields(base.type)
        if fields is None:
            if base.type.id is TypeId.RECORD:
                raise SqlError(
                    UNDEFINED_COLUMN, f'could not identify column "{name}" in record data type'
                )
            raise SqlError(
                WRONG_OBJECT_TYPE,
                f"column notation .{name} applied to type {base.type}, which is not a "
                "composite type",
            )
        for i, (field_name, t) in enumerate(fields):
            if field_name == name:
                return BCall(t, "field", operator.itemgetter(i), [base])
        raise SqlError(UNDEFINED_COLUMN, f'could not identify column "{name}" in record data type')

    def _bind_Filter(self, node: exp.Filter, scope: Scope) -> BExpr:
        raise SqlError(GROUPING_ERROR, "aggregate functions are not allowed here")

    def _bind_WithinGroup(self, node: exp.WithinGroup, scope: Scope) -> BExpr:
        raise SqlError(GROUPING_ERROR, "aggregate functions are not allowed here")

    def _bind_Grouping(self, node: exp.Grouping, scope: Scope) -> BExpr:
        raise grouping_sets.not_allowed()

    def _bind_Window(self, node: exp.Window, scope: Scope) -> BExpr:
        return self._window_call(node, lambda n: self.bind(n, scope))

    def _window_call(self, node: exp.Window, bind_arg: Callable[[exp.Expression], BExpr]) -> BExpr:
        """A window function call, added to the SELECT's window context; its value is a
        column after the window's input row. ``bind_arg`` binds over that input row."""
        ctx = self.window_ctx
        if ctx is None:
            if self.in_aggregate_args:
                raise SqlError(
                    GROUPING_ERROR, "aggregate function calls cannot contain window function calls"
                )
            raise SqlError(WINDOWING_ERROR, "window functions are not allowed here")
        for k, seen in enumerate(ctx.call_nodes):
            if seen == node:
                return ctx.ref(k)
        if node.args.get("alias") is not None:
            # Named windows were resolved before binding (window_binder); this one is not
            # defined by the SELECT's WINDOW clause.
            raise SqlError(UNDEFINED_OBJECT, f'window "{node.args["alias"].name}" does not exist')
        with self.contexts(None, None):
            name, args, t, filt = self._window_function(node.this, bind_arg)
            spec = self._window_spec(ctx, node, bind_arg)
            frame = window_binder.window_frame(self, node, ctx.specs[spec].order, bind_arg)
        ctx.calls.append(WindowCall(name, args, t, spec, filt, frame))
        ctx.call_nodes.append(node)
        return ctx.ref(len(ctx.calls) - 1)

    def _window_function(
        self, fn: exp.Expression, bind_arg: Callable[[exp.Expression], BExpr]
    ) -> tuple[str, list[BExpr], SqlType, BExpr | None]:
        """(name, arguments, result type, FILTER) of the function applied over a window."""
        filter_node = None
        if isinstance(fn, exp.Filter):
            filter_node = fn.expression
            if isinstance(filter_node, exp.Where):
                filter_node = filter_node.this
            fn = fn.this
        if isinstance(fn, exp.WithinGroup):
            raise ordered_set_aggregates.over_not_supported(fn)
        if isinstance(fn, exp.Grouping):
            raise SqlError(SYNTAX_ERROR, 'syntax error at or near "over"')  # as Postgres
        if isinstance(fn, (*window_binder.WINDOW_ONLY, exp.IgnoreNulls, exp.RespectNulls)):
            if filter_node is not None:
                raise unsupported("FILTER for non-aggregate window functions")
            return (*window_binder.window_only_function(self, fn, bind_arg), None)
        if not self._is_agg_node(fn):
            raise self._not_a_window_function(fn, bind_arg)
        name, arg_nodes = _aggregate_name_args(fn)
        if arg_nodes and isinstance(arg_nodes[0], exp.Distinct):
            raise unsupported("DISTINCT in window functions")
        if arg_nodes and isinstance(arg_nodes[0], exp.Order):
            raise unsupported("ORDER BY inside a window aggregate's arguments")
        star = len(arg_nodes) == 1 and isinstance(arg_nodes[0], exp.Star)
        args = [] if star else [_resolve_unknown_arg(self, bind_arg(a)) for a in arg_nodes]
        from percolator.server.sql.aggregates import aggregate_type

        t = aggregate_type(name, [a.type for a in args])
        filt = (
            self.coerce_condition(bind_arg(filter_node), "FILTER")
            if filter_node is not None
            else None
        )
        return name, args, t, filt

    def _not_a_window_function(
        self, fn: exp.Expression, bind_arg: Callable[[exp.Expression], BExpr]
    ) -> SqlError:
        """Postgres's error for OVER after a call that is neither a window function nor an
        aggregate: an unknown function is reported as such (42883), a known one as 42809."""
        try:
            bind_arg(fn)
        except SqlError as e:
            if e.sqlstate == UNDEFINED_FUNCTION:
                return e
        name = self.column_name(fn)
        return SqlError(
            WRONG_OBJECT_TYPE,
            f"OVER specified, but {name} is not a window function nor an aggregate function",
        )

    def _window_spec(
        self,
        ctx: WindowContext,
        node: exp.Window,
        bind_arg: Callable[[exp.Expression], BExpr],
    ) -> int:
        """The index of the window's (PARTITION BY, ORDER BY) in ``ctx``, added if new."""
        partition_nodes = list(node.args.get("partition_by") or [])
        order_node = node.args.get("order")
        for k, (p, o) in enumerate(ctx.spec_nodes):
            if p == partition_nodes and o == order_node:
                return k
        partition = [_resolve_unknown_arg(self, bind_arg(p)) for p in partition_nodes]
        order: list[SortKey] = []
        for o in order_node.expressions if order_node is not None else []:
            # sqlglot fills nulls_first with the dialect default; keep it only when explicit.
            explicit_nulls = "NULLS" in o.sql(dialect="postgres").upper()
            order.append(
                SortKey(
                    _resolve_unknown_arg(self, bind_arg(o.this)),
                    bool(o.args.get("desc")),
                    bool(o.args.get("nulls_first")) if explicit_nulls else None,
                )
            )
        ctx.specs.append(WindowSpec(partition, order))
        ctx.spec_nodes.append((partition_nodes, order_node))
        return len(ctx.specs) - 1

    def _bind_JSONExtract(self, node: exp.Expression, scope: Scope) -> BExpr:
        return json_operators.bind_operator(self, node, scope)

    _bind_JSONExtractScalar = _bind_JSONExtract

    # -- functions -------------------------------------------------------------------------

    def _function(self, node: exp.Expression, scope: Scope) -> BExpr:
        name, arg_nodes = self.function_name_args(node)
        if self.binder.catalog.functions and not is_builtin_function(name):
            found = self.user_function(_as_call(node, name, arg_nodes), scope, None)
            if found is not None:
                return found
        arg_nodes = named_arguments.positional(name, arg_nodes)
        if name in _AGG_NAMES:
            raise SqlError(GROUPING_ERROR, "aggregate functions are not allowed here")
        if name == "date_trunc" and arg_nodes and isinstance(arg_nodes[0], exp.Var):
            # sqlglot turns the field literal into a keyword.
            arg_nodes = [exp.Literal.string(arg_nodes[0].name.lower()), *arg_nodes[1:]]
        if name in _SET_FUNCTIONS:
            return self._set_function(name, arg_nodes, scope)
        if name == "row":
            return row_values.bind_row(self, arg_nodes, scope)
        if arg_nodes and isinstance(arg_nodes[-1], exp.Variadic):
            if name not in json_functions.VARIADIC_NAMES:
                raise unsupported(f"VARIADIC arguments of {name}")
            args = [self.bind(a, scope) for a in (*arg_nodes[:-1], arg_nodes[-1].this)]
            return json_functions.bind_variadic(self, name, args)
        args = [self.bind(a, scope) for a in arg_nodes]
        if name in sequence_functions.NAMES:
            return sequence_functions.bind(self, name, args)
        if name in advisory_functions.NAMES:
            return advisory_functions.bind(self, name, args)
        if name in sleep_functions.NAMES:
            return sleep_functions.bind(self, name, args)
        return self.call(name, args)

    def user_function(self, node: exp.Anonymous, scope: Scope, schema: str | None) -> BExpr | None:
        """A call of a function made by CREATE FUNCTION, expanded into its body
        (user_functions.py); None when ``node`` names none. A built-in function of the same
        name comes first, as pg_catalog does on Postgres's search path."""
        name = str(node.this).lower()
        overloads = user_functions.candidates(self.binder.catalog, name, schema)
        if not overloads or (schema is None and is_builtin_function(name)):
            return None
        call = self.user_call(name, overloads, list(node.expressions), scope)
        if call.function.trigger:
            raise SqlError(
                FEATURE_NOT_SUPPORTED, "trigger functions can only be called as triggers"
            )
        if call.function.procedure:
            raise SqlError(
                WRONG_OBJECT_TYPE,
                f"{call.shown()} is a procedure",
                hint="To call a procedure, use CALL.",
            )
        if not user_functions.is_inlined(call.function):
            return self._run_at_call(call, scope)
        if call.function.returns_set and self.srf_ctx is not None:
            expansion = user_functions.set_in_select_list(call, self.binder.catalog)
        else:
            expansion = user_functions.scalar_expression(call, self.binder.catalog)
        with self.binder.expanding(call.function):
            return self.bind(expansion, scope)

    def _run_at_call(self, call: user_functions.Call, scope: Scope) -> BExpr:
        """A call of a PL/pgSQL function, or of a SQL function whose body is not one query:
        run by the session when the operator awaits it (a call that waits, as nextval is:
        0A000 where no operator awaits calls)."""
        fn = call.function
        args = [self.bind(a, scope) for a in user_functions.typed_arguments(call)]

        async def run(ctx: Any, *values: object) -> object:
            return await ctx.functions.call(fn, values)

        return self.async_call(fn.name, fn.returns, run, args)

    def user_call(
        self,
        name: str,
        overloads: list[FunctionDef],
        arg_nodes: list[exp.Expression],
        scope: Scope,
    ) -> user_functions.Call:
        """The overload a call means, with its argument nodes. The arguments are bound once
        apart, for their types only (their nodes are bound again where the body uses them)."""
        probe = ExprBinder(self.binder)
        probe.async_calls_ok = self.async_calls_ok
        types = [probe.bind(a, scope).type for a in user_functions.argument_values(arg_nodes)]
        call = user_functions.resolve(name, overloads, arg_nodes, types)
        return user_functions.bind_arguments(call, arg_nodes)

    def async_call(
        self, name: str, t: SqlType, fn: Callable[..., Awaitable[object]], args: list[BExpr]
    ) -> BExpr:
        """A call that needs a round trip or may wait (nextval, pg_advisory_lock, pg_sleep):
        awaited by the operator before it evaluates the row, so allowed only in a select list,
        VALUES or a query's WHERE (0A000 elsewhere)."""
        if not self.async_calls_ok:
            raise unsupported(
                f"{name}() here (it is allowed in a select list, in VALUES and in a query's WHERE)"
            )
        slot = self.subquery_slots
        self.subquery_slots += 1
        return BAsyncCall(t, name, fn, args, slot)

    def _set_function(self, name: str, arg_nodes: list[exp.Expression], scope: Scope) -> BExpr:
        """A set-returning function in a select list: its value is a column of the rows the
        SELECT's ProjectSet produces."""
        ctx = self.srf_ctx
        if ctx is None:
            raise unsupported(f"set-returning function {name} in this position")
        from percolator.server.sql.set_functions import record_type, resolve_set_function

        with self.contexts(self.window_ctx, None):
            args = [self.bind(a, scope) for a in arg_nodes]
        # unnest of several arrays exists only in FROM (ROWS FROM syntax), as in Postgres.
        several_arrays = name == "unnest" and len(args) > 1
        impl = None if several_arrays else resolve_set_function(name, args, self)
        if impl is None:
            shown = ", ".join(str(a.type) for a in args)
            raise SqlError(
                UNDEFINED_FUNCTION,
                f"function {name}({shown}) does not exist",
                hint="No function matches the given name and argument types.",
            )
        composite = impl.names is not None
        t = record_type(impl.names, impl.types) if impl.names is not None else impl.types[0]
        return ctx.add(SrfCall(name, impl.fn, impl.args, composite), t)

    def call(self, name: str, args: list[BExpr]) -> BExpr:
        """A call of the registered function ``name`` on bound arguments."""
        types = [a.type for a in args]
        impl = functions.resolve(name, types)
        if impl is None:
            from percolator.server.sql import catalog_functions  # noqa: F401

            impl = functions.resolve(name, types)
        if impl is None:
            if functions.known(name):
                shown = ", ".join(str(t) for t in types)
                raise SqlError(
                    UNDEFINED_FUNCTION,
                    f"function {name}({shown}) does not exist",
                    hint="No function matches the given name and argument types.",
                )
            raise SqlError(
                UNDEFINED_FUNCTION,
                f"function {name}({', '.join(str(t) for t in types)}) does not exist",
                hint="No function matches the given name and argument types. "
                "You might need to add explicit type casts.",
            )
        if impl.args is not None:
            # The implementation declared its parameter types: cast the arguments to them
            # (implicitly, as Postgres does once it has picked the function).
            args = [self.coerce(a, t) for a, t in zip(args, impl.args, strict=False)]
        args = [_resolve_unknown_arg(self, a) for a in args]
        if impl.needs_context:
            return BContextCall(impl.type, name, impl.fn, args)
        return BCall(impl.type, name, impl.fn, args, impl.strict, impl.volatile)

    # -- aggregates ------------------------------------------------------------------------

    def bind_in_aggregate(self, node: exp.Expression, ctx: AggregateContext) -> BExpr:
        """Bind an expression over the aggregate's output row: group expressions and
        aggregate calls become column references; other input columns are an error."""
        i = ctx.group_of(node)
        if i is not None:
            return BColumn(ctx.groups[i].type, i)
        if isinstance(node, exp.Window):
            return self._window_call(node, lambda n: self.bind_in_aggregate(n, ctx))
        if isinstance(node, exp.Column):
            try:
                e = self.bind(node, ctx.scope)
            except SqlError:
                raise
            if isinstance(e, BOuter):
                return e
            assert isinstance(e, BColumn)
            for i, g in enumerate(ctx.groups):
                if isinstance(g, BColumn) and g.index == e.index:
                    return BColumn(g.type, i)
            raise SqlError(
                GROUPING_ERROR,
                f'column "{_qualified(node)}" must appear in the GROUP BY clause or be used in '
                "an aggregate function",
            )
        agg = self._aggregate_call(node, ctx)
        if agg is not None:
            return agg
        if isinstance(node, exp.Subquery | exp.Exists) or node.__class__.__name__ == "_IndexRef":
            if node.__class__.__name__ == "_IndexRef":
                col = ctx.scope.columns[node.column_index]  # type: ignore[attr-defined]
                return self.bind_in_aggregate(
                    exp.Column(
                        this=exp.to_identifier(col.name),
                        table=exp.to_identifier(col.relation) if col.relation else None,
                    ),
                    ctx,
                )
            return self.bind(node, _AggScope(ctx))
        # Rebuild the node with its children bound in aggregate mode: bind a copy whose
        # column/aggregate children are replaced by placeholders.
        return self._bind_composite_in_aggregate(node, ctx)

    def _bind_composite_in_aggregate(self, node: exp.Expression, ctx: AggregateContext) -> BExpr:
        placeholders: list[BExpr] = []
        copy = node.copy()

        def replace_below(n: exp.Expression) -> None:
            for child in list(n.iter_expressions()):
                if isinstance(child, exp.Subquery | exp.Query):
                    # A subquery keeps its own columns and aggregates; its references to
                    # the grouped query resolve through the placeholder scope's parent.
                    continue
                if (
                    ctx.group_of(child) is not None
                    or isinstance(child, exp.Column | exp.Window)
                    or self._is_agg_node(child)
                ):
                    placeholders.append(self.bind_in_aggregate(child, ctx))
                    child.replace(_Bound(len(placeholders) - 1))
                else:
                    replace_below(child)

        if not isinstance(copy, exp.Column):
            replace_below(copy)
        scope = _PlaceholderScope(placeholders, ctx)
        return self.bind(copy, scope)  # type: ignore[arg-type]

    def _is_agg_node(self, n: exp.Expression) -> bool:
        if isinstance(n, exp.Filter):
            return self._is_agg_node(n.this)
        return isinstance(n, (*_AGGREGATES, *_GROUPED_ONLY)) or (
            isinstance(n, exp.Anonymous) and str(n.this).lower() in _AGG_NAMES
        )

    def _aggregate_call(self, node: exp.Expression, ctx: AggregateContext) -> BExpr | None:
        # Aggregate arguments can hold neither window functions nor set-returning functions.
        saved = self.in_aggregate_args
        self.in_aggregate_args = True
        try:
            # Nor calls that wait: the aggregate's input is not where the select list's
            # operator awaits them.
            with self.contexts(None, None), self.async_calls(False):
                return self._aggregate_call_inner(node, ctx)
        finally:
            self.in_aggregate_args = saved

    def _aggregate_call_inner(self, node: exp.Expression, ctx: AggregateContext) -> BExpr | None:
        filter_node = None
        if isinstance(node, exp.Filter):
            filter_node = node.expression
            if isinstance(filter_node, exp.Where):
                filter_node = filter_node.this
            node = node.this
        if isinstance(node, exp.WithinGroup):
            return ordered_set_aggregates.bind(self, node, filter_node, ctx)
        if isinstance(node, exp.Grouping) and filter_node is None:
            return grouping_sets.bind_grouping(self, node, ctx)
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _AGG_NAMES:
            name = str(node.this).lower()
            arg_nodes = list(node.expressions)
        elif isinstance(node, tuple(_AGGREGATES)):
            name = _AGGREGATES[type(node)]
            arg_nodes = _aggregate_args(node)
            if isinstance(node, exp.GroupConcat) and node.args.get("separator") is not None:
                arg_nodes.append(node.args["separator"])
        else:
            return None
        distinct = False
        order: list[SortKey] = []
        if arg_nodes and isinstance(arg_nodes[0], exp.Distinct):
            distinct = True
            arg_nodes = list(arg_nodes[0].expressions) + arg_nodes[1:]
        if arg_nodes and isinstance(arg_nodes[0], exp.Order):
            o = arg_nodes[0]
            arg_nodes = [o.this, *arg_nodes[1:]]
            order = [
                SortKey(
                    self.bind(k.this, ctx.scope),
                    bool(k.args.get("desc")),
                    # sqlglot fills nulls_first with the dialect default: only when explicit.
                    bool(k.args.get("nulls_first"))
                    if "NULLS" in k.sql(dialect="postgres").upper()
                    else None,
                )
                for k in o.expressions
            ]
        if arg_nodes and isinstance(arg_nodes[0], exp.Distinct):  # DISTINCT x ORDER BY ...
            distinct = True
            arg_nodes = list(arg_nodes[0].expressions) + arg_nodes[1:]
        if (
            len(arg_nodes) == 2
            and isinstance(arg_nodes[1], exp.Order) is False
            and name == "string_agg"
            and isinstance(arg_nodes[1], exp.Expression)
            and arg_nodes[1].find(exp.Order)
        ):
            pass
        star = len(arg_nodes) == 1 and isinstance(arg_nodes[0], exp.Star)
        args = [] if star else [self.bind(a, ctx.scope) for a in arg_nodes]
        for a in args:
            for n in _walk_nodes(a):
                if isinstance(n, BSubquery):
                    continue
        from percolator.server.sql.aggregates import aggregate_type

        args = [_resolve_unknown_arg(self, a) for a in args]
        t = aggregate_type(name, [a.type for a in args])
        filt = (
            self.bind_condition(filter_node, ctx.scope, "FILTER")
            if filter_node is not None
            else None
        )
        return ctx.add_aggregate(AggCall(name, args, distinct, t, filt, order))


class _Bound(exp.Expression):
    """A placeholder for an already-bound sub-expression (aggregate-mode rebinding)."""

    arg_types = {"this": False}

    def __init__(self, index: int = -1) -> None:
        super().__init__()
        # Kept in the node's meta, which sqlglot's copy() carries over (it builds each node
        # with no arguments); not ``index``, where sqlglot keeps its position in the parent.
        self.meta["slot"] = index

    @property
    def slot(self) -> int:
        return int(self.meta["slot"])


def _bind_placeholder(self: ExprBinder, node: _Bound, scope: Scope) -> BExpr:
    if isinstance(scope, _PlaceholderScope):
        return scope.placeholders[node.slot]
    # A grouped value moved into a subquery (the argument of a SQL function whose body reads
    # tables): a column of the grouped row, reached as an outer reference.
    level = 0
    outer: Scope | None = scope
    while outer is not None and not isinstance(outer, _PlaceholderScope):
        outer, level = outer.parent, level + 1
    value = outer.placeholders[node.slot] if outer is not None else None
    if isinstance(value, BColumn):
        return BOuter(value.type, level, value.index)
    if isinstance(value, BOuter):
        return BOuter(value.type, value.level + level, value.index)
    raise unsupported("this grouped expression as the argument of a SQL function")


ExprBinder._bind__Bound = _bind_placeholder  # type: ignore[attr-defined]


class _AggScope(Scope):
    """The scope a subquery inside an aggregated SELECT sees its query through. The row it
    is evaluated against is the grouped one (the groups, then the aggregates), so a reference
    to the query's column resolves to the group that holds it; an ungrouped column is 42803,
    as in Postgres."""

    def __init__(self, ctx: AggregateContext) -> None:
        self._input = ctx.scope
        columns = [
            ctx.scope.columns[g.index]
            if isinstance(g, BColumn)
            else OutCol("", g.type, hidden=True)
            for g in ctx.groups
        ]
        super().__init__(columns, ctx.scope.parent, ctx.scope.relations)

    def _find(self, qualifier: str | None, name: str) -> int | None:
        found = super()._find(qualifier, name)
        if found is None and self._input._find(qualifier, name) is not None:
            shown = f"{qualifier}.{name}" if qualifier else name
            raise SqlError(
                GROUPING_ERROR, f'subquery uses ungrouped column "{shown}" from outer query'
            )
        return found


class _PlaceholderScope(_AggScope):
    """An aggregated expression's scope: its grouped parts as placeholders (its own column
    references are all placeholders by then), and for a subquery in it the grouped query as
    an _AggScope shows it."""

    def __init__(self, placeholders: list[BExpr], ctx: AggregateContext) -> None:
        super().__init__(ctx)
        self.placeholders = placeholders


def _is_window_function(n: exp.Expression) -> bool:
    """Whether aggregate node ``n`` is the function of an OVER clause (not a plain aggregate)."""
    parent = n.parent
    if isinstance(parent, exp.Filter) and parent.this is n:
        n, parent = parent, parent.parent
    return isinstance(parent, exp.Window) and parent.this is n


def _aggregate_args(node: exp.Expression) -> list[exp.Expression]:
    """The argument nodes of an aggregate node (json_object_agg's pair is in expressions,
    jsonb_object_agg's in this and expression)."""
    if isinstance(node, exp.JSONObjectAgg | exp.JSONBObjectAgg):
        pair = (
            list(node.expressions)
            if isinstance(node, exp.JSONObjectAgg)
            else [node.this, node.expression]
        )
        if len(pair) == 2 and isinstance(pair[1], exp.Order):
            # sqlglot hangs the ORDER BY on the value: put it where other aggregates have it.
            order = pair[1]
            return [exp.Order(this=pair[0], expressions=order.expressions), order.this]
        return pair
    if isinstance(node, exp.Count) and node.this is None:
        raise SqlError(
            WRONG_OBJECT_TYPE, "count(*) must be used to call a parameterless aggregate function"
        )
    return [node.this] if node.this is not None else []


def _aggregate_name_args(node: exp.Expression) -> tuple[str, list[exp.Expression]]:
    """The name and argument nodes of an aggregate call node."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower(), list(node.expressions)
    args = _aggregate_args(node)
    if isinstance(node, exp.GroupConcat) and node.args.get("separator") is not None:
        args.append(node.args["separator"])
    return _AGGREGATES[type(node)], args


def _walk_nodes(e: BExpr):  # type: ignore[no-untyped-def]
    from percolator.server.sql.bound import walk

    return walk(e)


def _resolve_unknown_arg(b: ExprBinder, a: BExpr) -> BExpr:
    if a.type.id is TypeId.UNKNOWN:
        return b.coerce(a, T.TEXT)
    return a


def _flatten(node: exp.Expression, cls: type) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cls):
            stack.append(n.expression)
            stack.append(n.this)
        else:
            out.append(n)
    return out


def _inside_subquery(n: exp.Expression, root: exp.Expression) -> bool:
    if n is root:
        return False
    p = n.parent
    while p is not None and p is not root:
        if isinstance(p, exp.Subquery | exp.Select | exp.Exists):
            return True
        p = p.parent
    return False


def _is_correlated(rel: Any) -> bool:
    return bool(outer_references(rel))


def outer_references(rel: Any) -> set[tuple[int, int]]:
    """The columns of enclosing scopes ``rel`` reads, as (level, index): level 1 is the
    nearest scope (levels as seen from ``rel``'s own scope). The right side of a LATERAL join
    is one scope deeper: its level 1 is the join's left row, inside ``rel``."""
    from percolator.server.sql.bound import JoinRel, Rel, walk

    def exprs_of(r: Rel) -> list[BExpr]:
        out: list[BExpr] = []
        for name in ("filters", "exprs", "groups", "rows", "args"):
            v = getattr(r, name, None)
            if isinstance(v, list):
                for item in v:
                    if isinstance(item, list):
                        out.extend(item)
                    elif isinstance(item, BExpr):
                        out.append(item)
        for name in ("predicate", "condition", "limit", "offset"):
            v = getattr(r, name, None)
            if isinstance(v, BExpr):
                out.append(v)
        for a in getattr(r, "aggs", []) or []:
            out.extend(a.args)
        for c in getattr(r, "calls", []) or []:
            out.extend(c.args)
            if getattr(c, "filter", None) is not None:
                out.append(c.filter)
        for spec in getattr(r, "specs", []) or []:
            out.extend(spec.partition)
            out.extend(k.expr for k in spec.order)
        for k in getattr(r, "keys", []) or []:
            out.append(k.expr)
        return out

    refs: set[tuple[int, int]] = set()

    def visit(r: Rel, depth: int) -> None:
        for e in exprs_of(r):
            for n in walk(e):
                if isinstance(n, BOuter) and n.level >= depth:
                    refs.add((n.level - depth + 1, n.index))
                if isinstance(n, BSubquery):
                    visit(n.rel, depth + 1)
        if isinstance(r, JoinRel) and r.lateral:
            visit(r.left, depth)
            visit(r.right, depth + 1)
            return
        for i in r.inputs():
            visit(i, depth)

    visit(rel, 1)
    return refs


def _is_div_call(node: exp.Cast) -> bool:
    meta = node.meta
    return (
        isinstance(node.this, exp.IntDiv)
        and "start" in meta
        and meta.get("end", 0) - meta["start"] == 2
    )


# Functions sqlglot normalises to one node, told apart by the length of the name that was
# written (sqlglot keeps its position in ``meta``; canonical spellings have none).
_SOURCE_NAMES: dict[type, dict[int | None, str]] = {
    exp.Ceil: {7: "ceiling"},
    exp.Substring: {6: "substr"},
    exp.Length: {11: "char_length", 16: "character_length"},
    exp.StrPosition: {None: "position"},
    exp.Mod: {3: "mod"},
    exp.Pow: {3: "pow", 5: "power"},
    exp.Log: {5: "log10"},
    exp.RegexpLike: {11: "regexp_like"},
    # The prefix operators @, |/ and ||/ (no position: the parser made them up).
    exp.Abs: {None: "?column?"},
    exp.Sqrt: {None: "?column?"},
    exp.Cbrt: {None: "?column?"},
}


def _source_name(node: exp.Expression) -> str | None:
    """The Postgres column name of a function call whose sqlglot node hides the name used."""
    if isinstance(node, exp.Trim):
        position = str(node.args.get("position") or "").upper()
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
    if isinstance(node, exp.Cast) and _is_div_call(node):
        return "div"
    names = _SOURCE_NAMES.get(type(node))
    if names is None:
        return None
    meta = node.meta
    length = meta["end"] - meta["start"] + 1 if "start" in meta and "end" in meta else None
    if length in names:
        return names[length]
    if isinstance(node, exp.Mod | exp.Pow):
        return "?column?"
    return None


def _qualified(node: exp.Column) -> str:
    return f"{node.table}.{node.name}" if node.table else node.name


def _param_type(t: SqlType) -> SqlType:
    """The type an untyped parameter compared with a value of ``t`` gets (no modifier)."""
    if t.id is TypeId.BPCHAR:
        return T.BPCHAR
    return SqlType(t.id, -1, t.array)


def _arith_partner(t: SqlType, op: str) -> SqlType:
    if t.id in (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ):
        return T.INTERVAL if op in "+-" else t
    return _param_type(t)


_REG_TYPES = {TypeId.REGCLASS, TypeId.REGTYPE, TypeId.REGPROC, TypeId.REGNAMESPACE}

_SQLGLOT_TYPE_NAMES = {
    "int": "integer", "bigint": "bigint", "smallint": "smallint", "double precision": "float8",
    "decimal": "numeric", "timestamptz": "timestamptz", "bytea": "bytea",
}  # fmt: skip
_KNOWN_BASES = set(_SQLGLOT_TYPE_NAMES) | {"text"}


def _type_display_name(dtype: exp.DataType) -> str:
    """The column name Postgres gives a cast to ``dtype``: its type's name (an array's
    element type's: ``'{1}'::int[]`` is ``int4``)."""
    text = dtype.sql(dialect="postgres").lower().split("(")[0].removesuffix("[]")
    names = {"int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2",
             "double precision": "float8", "real": "float4", "boolean": "bool",
             "varchar": "varchar", "character varying": "varchar", "decimal": "numeric",
             "timestamptz": "timestamptz", "timestamp": "timestamp", "char": "bpchar"}  # fmt: skip
    return names.get(text, text)


def _compile_regex(pattern: str, flags: int) -> re.Pattern[str]:
    """A Postgres regex (an ARE, translated to Python's dialect) for ``~`` / ``~*``."""
    return regex_functions.compile_regex(pattern, "i" if flags & re.IGNORECASE else "").regex


__all__ = ["AggregateContext", "ExprBinder", "Params"]


def _as_call(node: exp.Expression, name: str, args: list[exp.Expression]) -> exp.Anonymous:
    """A call as a plain named call: sqlglot gives calls of names other dialects know their
    own nodes (``datediff(a, b)`` is DateDiff), which a user function may be named after."""
    if isinstance(node, exp.Anonymous):
        return node
    return exp.Anonymous(this=name, expressions=[a.copy() for a in args])


def is_builtin_function(name: str) -> bool:
    """Whether the server implements a function ``name`` (Postgres's pg_catalog ones)."""
    from percolator.server.sql import catalog_functions  # noqa: F401  (registers its functions)

    return (
        functions.known(name)
        or name in _AGG_NAMES
        or name in _SET_FUNCTIONS
        or name in sequence_functions.NAMES
        or name in advisory_functions.NAMES
        or name in sleep_functions.NAMES
        or name in window_binder.WINDOW_FUNCTION_NAMES
        or name in json_records.NAMES
        or name == "row"
    )
