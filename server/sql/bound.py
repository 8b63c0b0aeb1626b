"""Bound statements: names resolved, types known, ready for the planner.

Expressions (:class:`BExpr` subclasses) refer to input columns by position in the row their
operator receives. Relations (:class:`Rel` subclasses) form a logical tree; each has the list
of :class:`OutCol` it produces. The planner (``percolator.server.planner``) picks access paths
for :class:`TableRel` from the conjuncts pushed into it, and compiles expressions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from percolator.server.sql.catalog import ColumnDef, SequenceDef, TableDef
from percolator.server.sql.types import SqlType
from percolator.server.txn.transaction import LockWait, RowLockMode

# -- expressions ----------------------------------------------------------------------------


@dataclass(eq=False)
class BExpr:
    type: SqlType

    def children(self) -> list[BExpr]:
        return []


@dataclass(eq=False)
class BColumn(BExpr):
    """The value at ``index`` of the operator's input row."""

    index: int
    name: str = ""


@dataclass(eq=False)
class BOuter(BExpr):
    """A column of an enclosing query's row (correlated subquery); level 1 = nearest."""

    level: int
    index: int


@dataclass(eq=False)
class BConst(BExpr):
    value: object


@dataclass(eq=False)
class BParam(BExpr):
    """``$n`` (0-based ``index``); its type is fixed when binding ends."""

    index: int


@dataclass(eq=False)
class BCall(BExpr):
    """A scalar function or operator: ``fn(*args)``. Strict functions return NULL for any NULL
    argument without being called."""

    name: str
    fn: Callable[..., object]
    args: list[BExpr]
    strict: bool = True
    volatile: bool = False

    def children(self) -> list[BExpr]:
        return self.args


@dataclass(eq=False)
class BContextCall(BExpr):
    """A function that needs the execution context (now(), current_user, catalog lookups)."""

    name: str
    fn: Callable[..., object]
    args: list[BExpr]

    def children(self) -> list[BExpr]:
        return self.args


@dataclass(eq=False)
class BAsyncCall(BExpr):
    """A function that needs a round trip (nextval, setval): the operator evaluating the
    expression awaits it first, for each row, into ``ctx.subquery_values[slot]`` (as it
    computes subqueries)."""

    name: str
    fn: Callable[..., Awaitable[object]]
    """``fn(ctx, *argument values)``."""
    args: list[BExpr]
    slot: int

    def children(self) -> list[BExpr]:
        return self.args


@dataclass(eq=False)
class BBool(BExpr):
    """AND / OR with SQL's three-valued logic."""

    is_and: bool
    args: list[BExpr]

    def children(self) -> list[BExpr]:
        return self.args


@dataclass(eq=False)
class BNot(BExpr):
    arg: BExpr

    def children(self) -> list[BExpr]:
        return [self.arg]


@dataclass(eq=False)
class BIsNull(BExpr):
    arg: BExpr
    negate: bool

    def children(self) -> list[BExpr]:
        return [self.arg]


@dataclass(eq=False)
class BIsBool(BExpr):
    """IS [NOT] TRUE / FALSE / UNKNOWN (never NULL)."""

    arg: BExpr
    value: bool | None
    negate: bool

    def children(self) -> list[BExpr]:
        return [self.arg]


@dataclass(eq=False)
class BCase(BExpr):
    whens: list[tuple[BExpr, BExpr]]
    default: BExpr | None

    def children(self) -> list[BExpr]:
        out = [e for pair in self.whens for e in pair]
        return out + ([self.default] if self.default is not None else [])


@dataclass(eq=False)
class BCoalesce(BExpr):
    args: list[BExpr]

    def children(self) -> list[BExpr]:
        return self.args


@dataclass(eq=False)
class BInList(BExpr):
    arg: BExpr
    items: list[BExpr]
    negate: bool
    eq: Callable[[object, object], object]

    def children(self) -> list[BExpr]:
        return [self.arg, *self.items]


class SubqueryKind(Enum):
    SCALAR = "scalar"
    EXISTS = "exists"
    IN = "in"
    ARRAY = "array"


@dataclass(eq=False)
class BSubquery(BExpr):
    """A subquery's value for the current row. The operator evaluating the expression computes
    it first (asynchronously) into ``ctx.subquery_values[slot]``."""

    kind: SubqueryKind
    rel: Rel
    slot: int
    correlated: bool
    arg: BExpr | None = None
    negate: bool = False

    def children(self) -> list[BExpr]:
        return [self.arg] if self.arg is not None else []


# -- relations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutCol:
    """A column a relation produces: name, type, and its source table column if any."""

    name: str
    type: SqlType
    table_oid: int = 0
    column_number: int = 0
    relation: str | None = None
    """The alias/name that qualifies it (``t`` in ``t.a``)."""
    hidden: bool = False
    """Not part of ``*`` (a USING join's duplicate column, a sort key)."""
    joined_away: bool = False
    """A USING join's duplicate column: hidden from unqualified names and ``*``, but still
    part of its own table's ``t.*``, as in Postgres."""
    function_value: bool = False
    """The value of a function in FROM that returns one column (no ORDINALITY): the item's
    name used as a value means it, not a record of it (``SELECT e FROM unnest(a) e``)."""


@dataclass(eq=False)
class Rel:
    columns: list[OutCol]

    def inputs(self) -> list[Rel]:
        return []


@dataclass(frozen=True, slots=True)
class LockClause:
    """What FOR UPDATE / FOR SHARE asks of the rows of one table."""

    wait: LockWait = LockWait.WAIT
    strength: RowLockMode = RowLockMode.UPDATE
    """FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE or FOR KEY SHARE."""

    @property
    def shared(self) -> bool:
        """FOR SHARE / FOR KEY SHARE: other sharers do not wait for it."""
        return self.strength <= RowLockMode.SHARE


FOR_UPDATE = LockClause()


@dataclass(eq=False)
class TableRel(Rel):
    """All columns of a table, in order; ``filters`` are conjuncts over those columns."""

    table: TableDef
    alias: str
    filters: list[BExpr] = field(default_factory=list)
    lock_rows: bool = False
    """FOR UPDATE: lock each row read (through the transaction layer)."""
    lock_clause: LockClause = FOR_UPDATE
    """The lock's strength and NOWAIT / SKIP LOCKED (the strongest and the strictest of the
    clauses naming the table)."""
    index_keys: dict[int, list[BExpr | None]] = field(default_factory=dict)
    """Per index on expressions (by id): its key columns' expressions bound over the table's
    row (None for a plain column), what the planner matches WHERE conjuncts against."""
    index_predicates: dict[int, BExpr] = field(default_factory=dict)
    """Per partial index (by id): its WHERE bound over the table's row; the planner reads
    through the index only when the conjuncts include each of its terms."""


@dataclass(eq=False)
class VirtualRel(Rel):
    """A system table (pg_catalog, information_schema) computed from the catalog, or rows
    the statement computed before (a data-modifying CTE's RETURNING rows)."""

    name: str
    rows: Callable[[Any], Iterator[tuple[object, ...]]]
    filters: list[BExpr] = field(default_factory=list)
    label: str = "System Table Scan"
    """What EXPLAIN calls its scan."""


@dataclass(eq=False)
class ValuesRel(Rel):
    rows: list[list[BExpr]]


@dataclass(eq=False)
class FunctionRel(Rel):
    """A set-returning function in FROM (generate_series, unnest)."""

    name: str
    fn: Callable[..., Iterator[tuple[object, ...]]]
    args: list[BExpr]
    ordinality: bool = False
    """WITH ORDINALITY: a last bigint column numbering the rows from 1."""


class JoinKind(Enum):
    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    CROSS = "cross"


@dataclass(eq=False)
class JoinRel(Rel):
    kind: JoinKind
    left: Rel
    right: Rel
    condition: BExpr | None
    equi_keys: list[tuple[BExpr, BExpr]] = field(default_factory=list)
    """(left expr over left row, right expr over right row) pairs: a hash join can use them."""
    lateral: bool = False
    """The right side reads the left row (LATERAL): it runs once per left row, with that row
    as its outer row (level 1 of its outer references)."""

    def inputs(self) -> list[Rel]:
        return [self.left, self.right]


@dataclass(eq=False)
class FilterRel(Rel):
    input: Rel
    predicate: BExpr

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class ProjectRel(Rel):
    input: Rel
    exprs: list[BExpr]

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class AggCall:
    name: str
    args: list[BExpr]
    distinct: bool
    type: SqlType
    filter: BExpr | None = None
    order: list[SortKey] = field(default_factory=list)
    extra: object = None
    """Aggregate-specific constant (string_agg's delimiter when constant)."""


@dataclass(eq=False)
class AggregateRel(Rel):
    """Output: the group expressions' values, then each aggregate's value. With grouping
    sets, each set's rows have NULL for the groups the set leaves out, and a bitmask of those
    (bit i: group i left out) comes between the groups and the aggregates."""

    input: Rel
    groups: list[BExpr]
    aggs: list[AggCall]
    sets: list[tuple[int, ...]] | None = None
    """The grouping sets, as positions in ``groups``; None for a plain GROUP BY."""

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class SortKey:
    expr: BExpr
    descending: bool = False
    nulls_first: bool | None = None
    """None: Postgres's default (NULLS LAST ascending, NULLS FIRST descending)."""


@dataclass(eq=False)
class SortRel(Rel):
    input: Rel
    keys: list[SortKey]

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class LimitRel(Rel):
    input: Rel
    limit: BExpr | None
    offset: BExpr | None

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class DistinctRel(Rel):
    input: Rel
    on: list[BExpr] | None = None
    """DISTINCT ON (...) expressions; None: whole rows."""

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class WindowSpec:
    """``OVER (PARTITION BY ... ORDER BY ...)``: shared by the calls that name the same one."""

    partition: list[BExpr]
    order: list[SortKey]


class FrameMode(Enum):
    """How a window frame's offsets count: rows, values of the ORDER BY key, peer groups."""

    ROWS = "rows"
    RANGE = "range"
    GROUPS = "groups"


class BoundKind(Enum):
    """The kind of one end of a window frame."""

    UNBOUNDED_PRECEDING = "unbounded preceding"
    PRECEDING = "preceding"
    CURRENT_ROW = "current row"
    FOLLOWING = "following"
    UNBOUNDED_FOLLOWING = "unbounded following"


class FrameExclusion(Enum):
    """``EXCLUDE ...`` of a window frame: which rows around the current one leave it."""

    NO_OTHERS = "no others"
    CURRENT_ROW = "current row"
    GROUP = "group"
    TIES = "ties"


@dataclass(eq=False)
class FrameBound:
    """One end of a window frame; ``offset`` (a constant expression) for n PRECEDING / FOLLOWING."""

    kind: BoundKind
    offset: BExpr | None = None


@dataclass(eq=False)
class WindowFrame:
    """``ROWS | RANGE | GROUPS BETWEEN start AND end`` of a window call.

    A RANGE offset has the type the (single) ORDER BY key's in_range support function takes:
    bigint for integer keys, numeric, double precision for floats, interval for dates and
    timestamps."""

    mode: FrameMode
    start: FrameBound
    end: FrameBound
    exclude: FrameExclusion = FrameExclusion.NO_OTHERS


@dataclass(eq=False)
class WindowCall:
    """A window function (row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag,
    lead, first_value, last_value, nth_value) or an aggregate used with OVER.

    Without a ``frame``, the frame is Postgres's default: with ORDER BY, from the partition's
    start to the current row's last peer; without, the whole partition. Only aggregates and
    first_value / last_value / nth_value look at the frame."""

    name: str
    args: list[BExpr]
    type: SqlType
    spec: int
    """Index into :attr:`WindowRel.specs`."""
    filter: BExpr | None = None
    frame: WindowFrame | None = None


@dataclass(eq=False)
class WindowRel(Rel):
    """Output: the input row, then each window call's value."""

    input: Rel
    specs: list[WindowSpec]
    calls: list[WindowCall]

    def inputs(self) -> list[Rel]:
        return [self.input]


@dataclass(eq=False)
class SrfCall:
    """A set-returning function in a select list (evaluated by :class:`ProjectSetRel`)."""

    name: str
    fn: Callable[..., Iterator[tuple[object, ...]]]
    args: list[BExpr]
    composite: bool
    """The value is the function's whole row (a record), not its only column."""


@dataclass(eq=False)
class ProjectSetRel(Rel):
    """Output: the input row, then each set-returning function's value. The functions run in
    lockstep (Postgres 10+): a row gives as many rows as its longest function result, the
    shorter ones padded with NULL, and none when every function returns nothing."""

    input: Rel
    calls: list[SrfCall]

    def inputs(self) -> list[Rel]:
        return [self.input]


class SetOpKind(Enum):
    UNION = "union"
    INTERSECT = "intersect"
    EXCEPT = "except"


@dataclass(eq=False)
class SetOpRel(Rel):
    kind: SetOpKind
    all: bool
    left: Rel
    right: Rel

    def inputs(self) -> list[Rel]:
        return [self.left, self.right]


@dataclass(eq=False)
class WorkTableRel(Rel):
    """The working table of a recursive CTE, read by the recursive term: the rows the
    previous iteration produced. ``cte`` is the :class:`RecursiveUnionRel` it belongs to."""

    cte: object = field(default=None, repr=False)


@dataclass(eq=False)
class RecursiveUnionRel(Rel):
    """``WITH RECURSIVE name AS (initial UNION [ALL] recursive)``: the initial term's rows,
    then the recursive term run again over the rows the previous run produced, until a run
    produces none. With UNION (``all`` false) rows already produced are dropped."""

    name: str
    all: bool
    initial: Rel
    recursive: Rel | None = None
    """Set once bound (its :class:`WorkTableRel` refers back to this node)."""

    def inputs(self) -> list[Rel]:
        return [self.initial] + ([self.recursive] if self.recursive is not None else [])


# -- statements -----------------------------------------------------------------------------


@dataclass(eq=False)
class QueryStmt:
    rel: Rel
    lock_rows: bool = False
    """FOR UPDATE somewhere in the query (its subqueries included)."""


@dataclass(eq=False)
class OnConflict:
    """ON CONFLICT [target] DO NOTHING | DO UPDATE SET ... [WHERE ...]."""

    do_update: bool
    target_key: tuple[object, ...] | None
    """The conflict target (a unique index or the primary key) as
    :func:`percolator.server.sql.catalog.key_signature` gives it, None: any."""
    assignments: list[tuple[ColumnDef, BExpr]] = field(default_factory=list)
    """Evaluated over (existing row + excluded row)."""
    where: BExpr | None = None


@dataclass(eq=False)
class InsertStmt:
    table: TableDef
    source: Rel
    """Produces one value per target column, in ``target_ids`` order."""
    target_ids: list[int]
    defaults: dict[int, BExpr]
    """Column id -> default expression for columns not targeted (evaluated per row)."""
    on_conflict: OnConflict | None
    returning: list[BExpr] | None
    returning_cols: list[OutCol] | None


@dataclass(frozen=True)
class NextValue:
    """The value of ``DEFAULT`` in an INSERT's VALUES for a serial or identity column: the
    executor replaces it with the next value of ``sequence`` (drawing one needs a round trip,
    which an expression cannot make)."""

    sequence: SequenceDef


@dataclass(eq=False)
class UpdateStmt:
    table: TableDef
    source: Rel
    """The rows to update: the table's columns first (its full row), then any FROM tables."""
    assignments: list[tuple[ColumnDef, BExpr]]
    returning: list[BExpr] | None
    returning_cols: list[OutCol] | None


@dataclass(eq=False)
class DeleteStmt:
    table: TableDef
    source: Rel
    returning: list[BExpr] | None
    returning_cols: list[OutCol] | None


def conjuncts(e: BExpr) -> list[BExpr]:
    """The AND-ed terms of a condition (the condition itself when it is no AND)."""
    if isinstance(e, BBool) and e.is_and:
        return [c for a in e.args for c in conjuncts(a)]
    return [e]


def implies(given: list[BExpr], predicate: BExpr | None) -> bool:
    """Whether conjuncts ``given`` imply a partial index's ``predicate``: each of its AND-ed
    terms is one of them. Postgres proves more (``a > 5`` from ``a > 6``)."""
    if predicate is None:
        return False
    return all(any(same_expression(t, g) for g in given) for t in conjuncts(predicate))


def same_expression(a: BExpr, b: BExpr) -> bool:
    """Whether two bound expressions compute the same thing: same node kinds, types,
    function names, constants, columns and parameters (a GROUP BY item and a select-list
    item, an index's key expression and a WHERE operand)."""
    if type(a) is not type(b) or a.type != b.type:
        return False
    if isinstance(a, BColumn):
        return a.index == b.index  # type: ignore[attr-defined]
    if isinstance(a, BConst):
        return a.value == b.value  # type: ignore[attr-defined]
    if isinstance(a, BParam):
        # Lifted literals: the same literal text is the same parameter (normalize.py).
        return a.index == b.index  # type: ignore[attr-defined]
    ca, cb = a.children(), b.children()
    if not ca and isinstance(a, BCall | BContextCall):
        return a.name == b.name  # type: ignore[attr-defined]  # random(), now()
    if not ca or len(ca) != len(cb):
        return False
    if getattr(a, "name", None) != getattr(b, "name", None):
        return False
    return all(same_expression(x, y) for x, y in zip(ca, cb, strict=True))


def walk(expr: BExpr) -> Iterator[BExpr]:
    """Every node of an expression tree, depth first (subquery bodies not entered)."""
    yield expr
    for child in expr.children():
        yield from walk(child)
