"""From bound relations to physical operators, choosing each table's access path.

For a table, the conjuncts the binder pushed into it decide the path, in this order:

1. every primary-key column fixed by ``=`` (or one by ``IN``) -> a point get, all keys in one
   batched read;
2. a secondary index whose leading columns are fixed by ``=`` -> an index lookup;
3. leading primary-key columns fixed by ``=`` and/or a range on the next one -> a range scan;
4. otherwise a full snapshot scan.

Every conjunct is still applied as a filter afterwards, so the path only has to be a superset.

Joins with equality conditions become lookup joins or hash joins, others nested loops. A
*lookup join* (index nested loop) streams one input (the outer, or driving, side) in batches
and fetches the other's matching rows by key, one batched read per batch. Without statistics,
the rule is:

- the inner side must be a plain table (its pushed filters allowed) *keyed* by the join's
  equalities: its whole primary key, a whole unique index, or the leading columns of a
  secondary index or of the primary key fixed by outer-side expressions (or by constants of
  its own filters, at least one column by the outer side);
- the driving side must be bounded: ranked by :func:`driving_rank` (point get 4, index lookup
  3, primary-key range or LIMIT 2, scan with pushed filters 1, full scan 0), it needs 1 or more;
- INNER and LEFT joins may drive from the left, INNER and RIGHT joins from the right (the
  sides are swapped, the joined row keeps the statement's column order). When both sides
  qualify, the higher-ranked side drives (the left one on a tie);
- otherwise a hash join (an unbounded driving side would cost a read per batch of a table
  likely bigger than the one the hash join scans).

The planner's output for a statement is cached with the prepared statement (no re-planning
per execution).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any, cast

from percolator.server.planner import expression_keys
from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.planner.expression_keys import NOT_FIXED
from percolator.server.planner.physical import (
    Aggregate,
    AsyncCallRunner,
    Distinct,
    Filter,
    FunctionScan,
    HashJoin,
    IndexLookup,
    KeyRange,
    LateralJoin,
    Limit,
    LockRows,
    LookupJoin,
    LookupTarget,
    NestedLoopJoin,
    Node,
    PointGet,
    Project,
    ProjectSet,
    RecursiveUnion,
    SetOp,
    Sort,
    SubqueryRunner,
    TableScan,
    ValuesScan,
    VirtualScan,
    WorkTableScan,
    ordered_factory,
)
from percolator.server.planner.pruning import Needed, needed_columns
from percolator.server.planner.row_codec import IndexCodec, Row, RowCodec
from percolator.server.planner.window_agg import (
    Frame,
    FrameEdge,
    WindowAgg,
    WindowFunction,
    in_range_datetime,
    in_range_integer,
    in_range_interval,
    in_range_number,
    in_range_time,
)
from percolator.server.sql import casts
from percolator.server.sql.aggregates import make_factory
from percolator.server.sql.bound import (
    FOR_UPDATE,
    AggregateRel,
    BAsyncCall,
    BBool,
    BCall,
    BColumn,
    BConst,
    BContextCall,
    BExpr,
    BInList,
    BOuter,
    BParam,
    BSubquery,
    DistinctRel,
    FilterRel,
    FrameBound,
    FrameMode,
    FunctionRel,
    JoinKind,
    JoinRel,
    LimitRel,
    LockClause,
    OutCol,
    ProjectRel,
    ProjectSetRel,
    RecursiveUnionRel,
    Rel,
    SetOpRel,
    SortRel,
    TableRel,
    ValuesRel,
    VirtualRel,
    WindowFrame,
    WindowRel,
    WorkTableRel,
    implies,
    walk,
)
from percolator.server.sql.catalog import IndexDef, TableDef
from percolator.server.sql.errors import unsupported
from percolator.server.sql.keycodec import KeyType, prefix_successor
from percolator.server.sql.types import SqlType, TypeId, key_type
from percolator.server.sql.window_binder import WINDOW_FUNCTION_NAMES

_MAX_POINT_KEYS = 10_000


LOCK_BATCH = 256
"""Rows a FOR UPDATE scan locks per round trip when no LIMIT is above it."""


class Planner:
    """Builds physical plans; caches one row codec per table definition."""

    def __init__(self) -> None:
        self._codecs: dict[tuple[int, frozenset[int] | None], tuple[TableDef, RowCodec]] = {}
        self._needed: Needed = {}
        self._work_tables: dict[int, object] = {}
        """id(RecursiveUnionRel) -> its working table's token, while its terms are planned."""
        self._lock_later: set[int] = set()
        """id(TableRel) of FOR UPDATE tables whose rows a LockRows above locks instead."""
        self._under_limit = 0
        """How many LIMITs are above the relation being planned (FOR UPDATE locks row by row
        there)."""

    def codec(self, table: TableDef, read: frozenset[int] | None = None) -> RowCodec:
        """The row codec of a table (reading only the ``read`` positions, if given)."""
        key = (id(table), read)
        cached = self._codecs.get(key)
        if cached is not None and cached[0] is table:
            return cached[1]
        codec = RowCodec(table, read)
        self._codecs[key] = (table, codec)
        return codec

    def plan_query(self, rel: Rel, *, lock_as_fetched: bool = False) -> Node:
        """Plan a query, reading from each table only the columns it uses. ``lock_as_fetched``:
        a cursor's query, whose FOR UPDATE locks each row as it is fetched (Postgres), not a
        batch ahead."""
        saved = self._needed
        self._needed = needed_columns(rel) or {}
        self._under_limit += lock_as_fetched
        try:
            return self.plan(rel)
        finally:
            self._needed = saved
            self._under_limit -= lock_as_fetched

    def plan(self, rel: Rel) -> Node:
        method = getattr(self, f"_plan_{type(rel).__name__}")
        node: Node = method(rel)
        node.width = len(rel.columns)
        return node

    # -- leaves ----------------------------------------------------------------------------

    def _plan_TableRel(self, rel: TableRel) -> Node:
        needed = self._needed.get(id(rel))
        read = frozenset(needed) if needed is not None else None
        lock_rows = rel.lock_rows and id(rel) not in self._lock_later
        return self.table_access(
            rel.table,
            rel.alias,
            rel.filters,
            lock_rows,
            read,
            lock_clause=rel.lock_clause,
            index_keys=rel.index_keys,
            index_predicates=rel.index_predicates,
        )

    def table_access(
        self,
        table: TableDef,
        alias: str,
        filters: list[BExpr],
        lock_rows: bool = False,
        read: frozenset[int] | None = None,
        *,
        lock_clause: LockClause = FOR_UPDATE,
        index_keys: dict[int, list[BExpr | None]] | None = None,
        index_predicates: dict[int, BExpr] | None = None,
    ) -> Node:
        """The access path of ``table`` for conjuncts ``filters`` (``index_keys``: the bound
        key expressions of its indexes on expressions, TableRel.index_keys;
        ``index_predicates``: its partial indexes' WHERE, TableRel.index_predicates)."""
        codec = self.codec(table, read)
        predicate = _conjunction(filters)
        filter_text = " AND ".join(describe(f, table) for f in filters)
        eq, ins, ranges = _analyze(filters)
        pk = [table.position(c) for c in table.primary_key]
        if pk and all(p in eq or p in ins for p in pk) and sum(p in ins for p in pk) <= 1:
            keys = _point_keys(codec, pk, eq, ins)
            desc = ", ".join(f"{table.columns[p].name} {'IN' if p in ins else '='} ..." for p in pk)
            key_only = len(filters) == len(pk) and {p for p in (*eq, *ins) if p in pk} == set(pk)
            return PointGet(
                codec,
                table.name,
                keys,
                desc,
                predicate,
                filter_text,
                lock_rows,
                lock_clause,
                key_only=key_only,
            )
        alternatives = _key_alternatives(filters, pk)
        if alternatives is not None:
            names = ", ".join(table.columns[p].name for p in pk)
            return PointGet(
                codec,
                table.name,
                _alternative_keys(codec, pk, alternatives),
                f"({names}) IN ...",
                predicate,
                filter_text,
                lock_rows,
                lock_clause,
            )
        index_keys = index_keys or {}
        ekeys = expression_keys.find(
            table, filters, index_keys, _is_runtime_constant, lambda e: describe(e, table)
        )
        fixed = {**eq, **ekeys.values}
        best_index = None
        partial = index_predicates or {}
        for ix in table.indexes:
            # The rows a partial index leaves out then fail the filters, which still run on
            # the rows it gives.
            if ix.predicate is not None and not implies(filters, partial.get(ix.id)):
                continue  # a partial index lacks the rows its WHERE excludes
            positions = ekeys.key_positions(table, ix)
            n = 0
            while n < len(positions) and positions[n] in fixed:
                n += 1
            if n and (best_index is None or n > best_index[1]):
                best_index = (ix, n, positions)
        if best_index is not None:
            ix, n, positions = best_index
            icodec = IndexCodec(table, ix, index_keys.get(ix.id, ()))
            exprs = [fixed[p] for p in positions[:n]]
            desc = " AND ".join(
                f"{ekeys.names.get(p) or table.columns[p].name} = ..." for p in positions[:n]
            )
            prefix = _index_prefix(icodec, exprs)
            return IndexLookup(
                codec,
                icodec,
                table.name,
                prefix,
                desc,
                predicate,
                filter_text,
                lock_rows,
                lock_clause,
                lock_batch=self._lock_batch(),
                whole_key=n == len(positions),
            )
        key_range = _pk_range(codec, table, pk, eq, ranges)
        return TableScan(
            codec,
            table.name,
            predicate,
            filter_text,
            key_range,
            lock_rows,
            lock_clause,
            lock_batch=self._lock_batch(),
        )

    def _lock_batch(self) -> int:
        return 1 if self._under_limit else LOCK_BATCH

    def _plan_VirtualRel(self, rel: VirtualRel) -> Node:
        return VirtualScan(rel.name, rel.rows, _conjunction(rel.filters), label=rel.label)

    def _plan_ValuesRel(self, rel: ValuesRel) -> Node:
        runners = [self.runners(row) for row in rel.rows]
        return ValuesScan(
            [[compile_expr(e) for e in row] for row in rel.rows],
            runners=runners if any(runners) else [],
        )

    def _plan_FunctionRel(self, rel: FunctionRel) -> Node:
        return FunctionScan(rel.name, rel.fn, [compile_expr(a) for a in rel.args], rel.ordinality)

    # -- operators -------------------------------------------------------------------------

    def _plan_FilterRel(self, rel: FilterRel) -> Node:
        locked = _locked_table_below(rel)
        if locked is not None and id(locked) not in self._lock_later:
            # FOR UPDATE under a filter the scan cannot take (a subquery, a call that waits):
            # lock the rows that pass it, not every row the scan reads.
            self._lock_later.add(id(locked))
            try:
                filtered = self._plan_FilterRel(rel)
            finally:
                self._lock_later.discard(id(locked))
            codec = self.codec(locked.table, None)
            return LockRows(
                filtered,
                codec,
                locked.lock_clause,
                lock_batch=self._lock_batch(),
                key_last=False,
            )
        return Filter(
            self.plan(rel.input),
            compile_expr(rel.predicate),
            describe(rel.predicate),
            self.runners([rel.predicate]),
        )

    def _plan_ProjectRel(self, rel: ProjectRel) -> Node:
        child = self.plan(rel.input)
        identity = len(rel.exprs) == len(rel.input.columns) and all(
            isinstance(e, BColumn) and e.index == i for i, e in enumerate(rel.exprs)
        )
        return Project(
            child, [compile_expr(e) for e in rel.exprs], self.runners(rel.exprs), identity
        )

    def _plan_JoinRel(self, rel: JoinRel) -> Node:
        left = self.plan(rel.left)
        right = self.plan(rel.right)
        nleft, nright = len(rel.left.columns), len(rel.right.columns)
        kind = rel.kind.value
        if rel.lateral:
            return self._lateral_join(rel, left, right)
        has_subquery = rel.condition is not None and any(
            isinstance(n, BSubquery | BAsyncCall) for n in walk(rel.condition)
        )
        if rel.equi_keys and not has_subquery:
            lookup = self._lookup_join(rel, left, right)
            if lookup is not None:
                return lookup
            return HashJoin(
                left,
                right,
                kind,
                [compile_expr(a) for a, _ in rel.equi_keys],
                [compile_expr(b) for _, b in rel.equi_keys],
                compile_expr(rel.condition) if rel.condition is not None else None,
                nright,
                nleft,
            )
        cond = compile_expr(rel.condition) if rel.condition is not None else None
        runners = self.runners([rel.condition]) if rel.condition is not None else []
        return NestedLoopJoin(left, right, kind, cond, nright, nleft, runners)

    def _lateral_join(self, rel: JoinRel, left: Node, right: Node) -> LateralJoin:
        """The right side reads the left row: run it once per left row (its access paths,
        keyed by the outer row's values, are chosen as for a correlated subquery)."""
        cond = compile_expr(rel.condition) if rel.condition is not None else None
        runners = self.runners([rel.condition]) if rel.condition is not None else []
        return LateralJoin(left, right, rel.kind.value, cond, len(rel.right.columns), runners)

    def _lookup_join(self, rel: JoinRel, left: Node, right: Node) -> LookupJoin | None:
        """A lookup join for an equi-join, when one side is a table keyed by the join keys
        and the other is bounded (see the module docstring for the rule); else None."""
        if not LOOKUP_JOINS:
            return None
        forward = backward = None
        if rel.kind in (JoinKind.INNER, JoinKind.LEFT) and isinstance(rel.right, TableRel):
            pairs = [(r, lft) for lft, r in rel.equi_keys]
            forward = self._lookup_target(rel.right, pairs, rel.left.columns)
        if rel.kind in (JoinKind.INNER, JoinKind.RIGHT) and isinstance(rel.left, TableRel):
            backward = self._lookup_target(rel.left, list(rel.equi_keys), rel.right.columns)
        rank_left, rank_right = driving_rank(left), driving_rank(right)
        residual = compile_expr(rel.condition) if rel.condition is not None else None
        kind = rel.kind.value
        if forward is not None and rank_left >= 1 and (backward is None or rank_left >= rank_right):
            target, key_of = forward
            return LookupJoin(
                left, target, key_of, residual, kind, kind == "left", True, len(rel.right.columns)
            )
        if backward is not None and rank_right >= 1:
            target, key_of = backward
            return LookupJoin(
                right, target, key_of, residual, kind, kind == "right", False, len(rel.left.columns)
            )
        return None

    def _lookup_target(
        self, inner: TableRel, pairs: list[tuple[BExpr, BExpr]], outer_columns: list[OutCol]
    ) -> tuple[LookupTarget, Callable[[Row, Any], bytes | None]] | None:
        """How to fetch ``inner``'s rows matching an outer row, given (inner expression, outer
        expression) equalities: its primary key, a unique index, the leading columns of a
        secondary index or of the primary key, each column fixed by an outer expression or a
        constant of the table's own filters (at least one by the outer row). None if none."""
        table = inner.table
        eq, _, _ = _analyze(inner.filters)
        fixed: dict[int, tuple[BExpr, bool]] = {p: (e, False) for p, e in eq.items()}
        for inner_e, outer_e in pairs:
            p = _key_column(inner_e)
            if p is not None and p < len(table.columns):
                fixed[p] = (outer_e, True)  # preferred: the point of the lookup
        path = _lookup_path(table, fixed)
        if path is None:
            return None
        mode, index, positions = path
        needed = self._needed.get(id(inner))
        codec = self.codec(table, frozenset(needed) if needed is not None else None)
        icodec = (
            IndexCodec(table, index, inner.index_keys.get(index.id, ()))
            if index is not None
            else None
        )
        exprs = [fixed[p][0] for p in positions]
        encode = icodec.prefix if icodec is not None else codec.key_of_values
        types = [table.columns[p].type for p in positions]
        names = [table.columns[p].name for p in positions]
        shown = [
            _qualified(e, outer_columns) if fixed[p][1] else e
            for p, e in zip(positions, exprs, strict=True)
        ]
        desc = ", ".join(f"{n} = {describe(e)}" for n, e in zip(names, shown, strict=True))
        target = LookupTarget(
            codec,
            table.name,
            mode,
            icodec,
            desc,
            _conjunction(inner.filters),
            " AND ".join(describe(f, table) for f in inner.filters),
            inner.lock_rows,
            inner.lock_clause,
        )
        return target, _lookup_key([compile_expr(e) for e in exprs], types, encode)

    def _plan_AggregateRel(self, rel: AggregateRel) -> Node:
        child = self.plan(rel.input)
        aggs = []
        for a in rel.aggs:
            # Only min and max order their values (json has no ordering operator).
            less = (
                _less(a.args[0].type)
                if a.args and a.name in ("min", "max")
                else (lambda x, y: x < y)
            )
            factory = make_factory(a.name, [x.type for x in a.args], less)
            args = [compile_expr(x) for x in a.args]
            if a.order:
                # Each ordered aggregate sorts its own values (aggregates of one SELECT may
                # each have their own ORDER BY): its keys travel as extra arguments.
                keys = [_sort_key(k) for k in a.order]
                factory = ordered_factory(factory, len(args), [k[1:] for k in keys])
                args += [k[0] for k in keys]
            aggs.append(
                (
                    factory,
                    args,
                    a.distinct,
                    compile_expr(a.filter) if a.filter is not None else None,
                    a.name not in _NULL_KEEPING_AGGREGATES,
                )
            )
        return Aggregate(child, [compile_expr(g) for g in rel.groups], aggs, sets=rel.sets)

    def _plan_WindowRel(self, rel: WindowRel) -> Node:
        child = self.plan(rel.input)
        exprs = [e for spec in rel.specs for e in spec.partition] + [
            k.expr for spec in rel.specs for k in spec.order
        ]
        for c in rel.calls:
            exprs.extend(c.args)
            if c.filter is not None:
                exprs.append(c.filter)
        if any(isinstance(n, BSubquery | BAsyncCall) for e in exprs for n in walk(e)):
            raise unsupported("subqueries in window function arguments or windows")
        specs = [
            (
                [(compile_expr(e), False, False, casts.compare_key(e.type)) for e in w.partition],
                [_sort_key(k) for k in w.order],
            )
            for w in rel.specs
        ]
        calls = []
        for c in rel.calls:
            factory = None
            if c.name not in WINDOW_FUNCTION_NAMES:
                less = (
                    _less(c.args[0].type)
                    if c.args and c.name in ("min", "max")
                    else (lambda x, y: x < y)
                )
                factory = make_factory(c.name, [a.type for a in c.args], less)
            order = rel.specs[c.spec].order
            calls.append(
                WindowFunction(
                    c.name,
                    c.spec,
                    factory,
                    [compile_expr(a) for a in c.args],
                    compile_expr(c.filter) if c.filter is not None else None,
                    _frame(c.frame, order[0].expr.type if order else None),
                )
            )
        offsets = [
            b.offset
            for c in rel.calls
            if c.frame is not None
            for b in (c.frame.start, c.frame.end)
            if b.offset is not None
        ]
        return WindowAgg(child, specs, calls, offset_runners=self.runners(offsets))

    def _plan_RecursiveUnionRel(self, rel: RecursiveUnionRel) -> Node:
        # The token names this union's working table for the scans in its recursive term.
        token = object()
        self._work_tables[id(rel)] = token
        try:
            initial = self.plan(rel.initial)
            assert rel.recursive is not None
            recursive = self.plan(rel.recursive)
        finally:
            del self._work_tables[id(rel)]
        return RecursiveUnion(rel.name, rel.all, initial, recursive, token)

    def _plan_WorkTableRel(self, rel: WorkTableRel) -> Node:
        assert isinstance(rel.cte, RecursiveUnionRel)
        return WorkTableScan(rel.cte.name, self._work_tables[id(rel.cte)])

    def _plan_ProjectSetRel(self, rel: ProjectSetRel) -> Node:
        calls = [(c.fn, [compile_expr(a) for a in c.args], c.composite) for c in rel.calls]
        runners = self.runners([a for c in rel.calls for a in c.args])
        return ProjectSet(self.plan(rel.input), calls, runners)

    def _plan_SortRel(self, rel: SortRel) -> Node:
        keys = [_sort_key(k) for k in rel.keys]
        project = rel.input
        locked = _locked_table_below(project.input) if isinstance(project, ProjectRel) else None
        if locked is None:
            child = self.plan(rel.input)
            backward = _primary_key_order(rel)
            access = _key_ordered_access(child)
            if backward is not None and access is not None:
                # the access yields the rows in this order already (read backward for DESC)
                access.reverse = backward
                return child
            return Sort(child, keys)
        # FOR UPDATE on a sorted table: lock after the sort, row by row as rows are taken, not
        # every row the scan reads (a job queue's ORDER BY ... LIMIT 1 FOR UPDATE SKIP LOCKED).
        # The projection keeps each row's key, as a last value, for the LockRows above.
        assert isinstance(project, ProjectRel)
        self._lock_later.add(id(locked))
        try:
            child = self.plan(project.input)
        finally:
            self._lock_later.discard(id(locked))
        codec = self.codec(locked.table, None)
        key = cast(Compiled, lambda row, _ctx: codec.key_of_stored(row))
        exprs = [compile_expr(e) for e in project.exprs] + [key]
        width = len(project.columns) + 1
        projected = Project(child, exprs, self.runners(project.exprs), width=width)
        sort = Sort(projected, keys, width=width)
        return LockRows(sort, codec, locked.lock_clause, lock_batch=self._lock_batch())

    def _plan_LimitRel(self, rel: LimitRel) -> Node:
        self._under_limit += 1
        try:
            child = self.plan(rel.input)
        finally:
            self._under_limit -= 1
        limit = compile_expr(rel.limit) if rel.limit is not None else None
        offset = compile_expr(rel.offset) if rel.offset is not None else None
        return Limit(child, limit, offset)

    def _plan_DistinctRel(self, rel: DistinctRel) -> Node:
        on = [compile_expr(e) for e in rel.on] if rel.on is not None else None
        return Distinct(self.plan(rel.input), on)

    def _plan_SetOpRel(self, rel: SetOpRel) -> Node:
        return SetOp(rel.kind.value, rel.all, self.plan(rel.left), self.plan(rel.right))

    def runners(self, exprs: list[BExpr]) -> list[Any]:
        """Runners for the subqueries inside these expressions (not inside nested ones), and
        for the calls that need a round trip (nextval), innermost first."""
        out: list[Any] = []
        for e in exprs:
            for n in walk(e):
                if isinstance(n, BSubquery):
                    out.append(SubqueryRunner(n, self.plan_query(n.rel)))
            out.extend(_async_runners(e))
        return out


_NULL_KEEPING_AGGREGATES = frozenset(
    {"array_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg"}
)
"""Aggregates that take NULL values (so DISTINCT keeps one NULL); the others ignore them."""


def _async_runners(e: BExpr) -> list[AsyncCallRunner]:
    """A runner per async call in ``e``, arguments before the calls that use them."""
    out: list[AsyncCallRunner] = []
    for child in e.children():
        out.extend(_async_runners(child))
    if isinstance(e, BAsyncCall):
        out.append(AsyncCallRunner(e.slot, e.fn, [compile_expr(a) for a in e.args]))
    return out


# -- access-path analysis -------------------------------------------------------------------


def _is_runtime_constant(e: BExpr) -> bool:
    """True if ``e`` does not depend on the scanned row (constants, parameters, outer refs)."""
    for n in walk(e):
        if isinstance(n, BColumn | BSubquery | BAsyncCall):
            return False
        if isinstance(n, BCall) and n.volatile:
            return False
    return True


def _key_column(e: BExpr) -> int | None:
    """The position of the column ``e`` reads, if ``e`` is a column or a cast of one that keeps
    its key encoding (int widening, varchar to text)."""
    if isinstance(e, BColumn):
        return e.index
    if (
        isinstance(e, BCall)
        and e.name == "cast"
        and len(e.args) == 1
        and isinstance(e.args[0], BColumn)
    ):
        src = e.args[0].type
        dst = e.type
        ints = (TypeId.INT2, TypeId.INT4, TypeId.INT8)
        if src.id in ints and dst.id in ints:
            return e.args[0].index
        if src.id in (TypeId.VARCHAR, TypeId.TEXT) and dst.id in (TypeId.VARCHAR, TypeId.TEXT):
            return e.args[0].index
    return None


def _analyze(
    filters: list[BExpr],
) -> tuple[dict[int, BExpr], dict[int, list[BExpr]], dict[int, list[tuple[str, BExpr]]]]:
    """Per column position: an equality value, IN values, range bounds (op, value)."""
    eq: dict[int, BExpr] = {}
    ins: dict[int, list[BExpr]] = {}
    ranges: dict[int, list[tuple[str, BExpr]]] = {}
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
    for f in filters:
        if isinstance(f, BCall) and f.name in flip and len(f.args) == 2:
            a, b = f.args
            col, val, op = _key_column(a), b, f.name
            if col is None or not _is_runtime_constant(val):
                col, val, op = _key_column(b), a, flip[f.name]
                if col is None or not _is_runtime_constant(val):
                    continue
            if op == "=":
                eq.setdefault(col, val)
            else:
                ranges.setdefault(col, []).append((op, val))
        elif isinstance(f, BInList) and not f.negate:
            col = _key_column(f.arg)
            if col is not None and all(_is_runtime_constant(i) for i in f.items):
                ins.setdefault(col, f.items)
    for col in eq:
        ins.pop(col, None)
    return eq, ins, ranges


LOOKUP_JOINS = True
"""Whether equi-joins may become lookup joins (off: hash joins only, to compare the two)."""

_RANK_POINT, _RANK_INDEX, _RANK_RANGE, _RANK_FILTERED, _RANK_UNBOUNDED = 4, 3, 2, 1, 0


def driving_rank(node: Node) -> int:
    """How few rows a plan is expected to produce, without statistics, from its access path:
    4 a point get (or a few constant rows), 3 an index lookup, 2 a primary-key range (or a
    LIMIT), 1 a scan with pushed filters, 0 a full scan or anything unknown. A lookup join
    drives from a side ranked 1 or more."""
    if isinstance(node, PointGet | ValuesScan):
        return _RANK_POINT
    if isinstance(node, IndexLookup):
        return _RANK_INDEX
    if isinstance(node, TableScan):
        if node.key_range is not None:
            return _RANK_RANGE
        return _RANK_FILTERED if node.predicate is not None else _RANK_UNBOUNDED
    if isinstance(node, Limit):
        return max(_RANK_RANGE, driving_rank(node.input))
    if isinstance(node, Aggregate) and not node.groups:
        return _RANK_POINT
    if isinstance(node, LookupJoin):
        return driving_rank(node.outer)
    if isinstance(node, HashJoin):
        return min(driving_rank(node.left), driving_rank(node.right))
    if isinstance(node, Filter | Project | Sort | Distinct | Aggregate):
        return driving_rank(node.input)
    return _RANK_UNBOUNDED


def _lookup_path(
    table: TableDef, fixed: dict[int, tuple[BExpr, bool]]
) -> tuple[str, IndexDef | None, list[int]] | None:
    """(mode, index, lookup column positions) of the best way to look rows of ``table`` up
    with the columns ``fixed`` (position -> (expression, from the outer row)): the whole
    primary key, then a whole unique index, then the longest prefix of an index or of the
    primary key (the primary key on a tie: no second read). Each needs an outer column."""

    def leading(positions: list[int]) -> list[int]:
        n = 0
        while n < len(positions) and positions[n] in fixed:
            n += 1
        out = positions[:n]
        return out if any(fixed[p][1] for p in out) else []

    pk = [table.position(c) for c in table.primary_key]
    pk_prefix = leading(pk)
    if pk and len(pk_prefix) == len(pk):
        return "primary key", None, pk
    best: tuple[str, IndexDef | None, list[int]] | None = (
        ("range", None, pk_prefix) if pk_prefix else None
    )
    for ix in table.indexes:
        if ix.predicate is not None:
            continue  # a partial index lacks the rows its WHERE excludes
        # An expression key is never fixed here (joins match columns): it ends the prefix.
        positions = [table.position(c) if c else NOT_FIXED for c in ix.column_ids]
        prefix = leading(positions)
        if ix.unique and prefix and len(prefix) == len(positions):
            return "unique", ix, prefix
        if prefix and (best is None or len(prefix) > len(best[2])):
            best = ("index", ix, prefix)
    return best


def _qualified(e: BExpr, columns: list[OutCol]) -> BExpr:
    """A copy of ``e`` whose columns are named ``relation.name`` (EXPLAIN of a lookup key:
    the outer row's columns, told apart from the inner table's)."""
    clone = copy.deepcopy(e)
    for n in walk(clone):
        if isinstance(n, BColumn) and n.index < len(columns):
            c = columns[n.index]
            n.name = f"{c.relation}.{c.name}" if c.relation else c.name
    return clone


def _lookup_key(
    exprs: list[Compiled], types: list[SqlType], encode: Callable[[list[object]], bytes]
) -> Callable[[Row, Any], bytes | None]:
    """The encoded lookup key of an outer row; None when no inner row can match it: a NULL
    value (equality never holds) or one out of its column's range."""

    def key_of(row: Row, ctx: Any) -> bytes | None:
        values: list[object] = []
        for f, t in zip(exprs, types, strict=True):
            v = f(row, ctx)
            if v is None:
                return None
            v = _to_column_type(v, t)
            if v is _NO_MATCH:
                return None
            values.append(v)
        return encode(values)

    return key_of


def _point_keys(
    codec: RowCodec, pk: list[int], eq: dict[int, BExpr], ins: dict[int, list[BExpr]]
) -> Callable[[Any], list[bytes]]:
    columns: list[list[Compiled]] = []
    for p in pk:
        if p in eq:
            columns.append([compile_expr(eq[p])])
        else:
            columns.append([compile_expr(i) for i in ins[p]])
    types = codec.pk_types

    def keys(ctx: Any) -> list[bytes]:
        choices = []
        for i, options in enumerate(columns):
            values = []
            for f in options:
                v = f((), ctx)
                if v is None:
                    continue
                v = _to_column_type(v, types[i])
                if v is not _NO_MATCH:
                    values.append(v)
            choices.append(values)
        out = []
        for combo in itertools.product(*choices):
            out.append(codec.key_of_values(combo))
            if len(out) > _MAX_POINT_KEYS:
                break
        return out

    return keys


_KEY_ORDERED_TYPES = frozenset(
    {
        TypeId.INT2, TypeId.INT4, TypeId.INT8, TypeId.TEXT, TypeId.VARCHAR, TypeId.DATE,
        TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ, TypeId.UUID, TypeId.BOOL, TypeId.NUMERIC,
        TypeId.BYTEA,
    }
)  # fmt: skip
"""Key column types whose memcomparable encoding orders as ORDER BY does (keycodec.py)."""


def _primary_key_order(rel: SortRel) -> bool | None:
    """Whether ``rel`` sorts a single table's rows by a prefix of its primary key, the order its
    scans and point gets produce them in (keys are memcomparable): False if every key is
    ascending, True if every key is descending (read backward), each with its default NULLS
    order; None if it sorts otherwise (mixed directions keep their sort)."""
    project = rel.input
    if not isinstance(project, ProjectRel) or not rel.keys:
        return None
    source = project.input
    while isinstance(source, FilterRel):
        source = source.input
    if not isinstance(source, TableRel) or not source.table.primary_key:
        return None
    table = source.table
    pk = [table.position(c) for c in table.primary_key]
    backward = rel.keys[0].descending
    if len(rel.keys) > len(pk):
        return None
    for key, position in zip(rel.keys, pk, strict=False):
        if key.descending != backward or key.nulls_first not in (None, backward):
            return None
        if not isinstance(key.expr, BColumn):
            return None
        e = project.exprs[key.expr.index]
        if not isinstance(e, BColumn) or e.index != position:
            return None
        t = table.columns[position].type
        if t.array or t.id not in _KEY_ORDERED_TYPES:
            return None
    return backward


def _key_ordered_access(node: Node) -> TableScan | PointGet | IndexLookup | None:
    """The access under ``node``'s projections and filters if it yields its table's rows in
    primary-key order (forward, or backward when asked): a scan, a point get, or an index
    lookup fixing every column of its index; None otherwise."""
    while isinstance(node, Project | Filter):
        node = node.input
    if isinstance(node, TableScan | PointGet) or (isinstance(node, IndexLookup) and node.whole_key):
        return node
    return None


def _key_alternatives(filters: list[BExpr], pk: list[int]) -> list[dict[int, BExpr]] | None:
    """The primary keys a filter ORs together, each disjunct fixing every key column by
    equality (``(a, b) IN ((1, 2), (3, 4))`` on a composite key); None if no filter does."""
    if not pk:
        return None
    for f in filters:
        if not isinstance(f, BBool) or f.is_and:
            continue
        alternatives = []
        for d in f.args:
            eq, _, _ = _analyze(d.args if isinstance(d, BBool) and d.is_and else [d])
            if not all(p in eq for p in pk):
                break
            alternatives.append({p: eq[p] for p in pk})
        else:
            return alternatives
    return None


def _alternative_keys(
    codec: RowCodec, pk: list[int], alternatives: list[dict[int, BExpr]]
) -> Callable[[Any], list[bytes]]:
    compiled = [[compile_expr(a[p]) for p in pk] for a in alternatives]
    types = codec.pk_types

    def keys(ctx: Any) -> list[bytes]:
        out = []
        for exprs in compiled:
            values = [_to_column_type(f((), ctx), t) for f, t in zip(exprs, types, strict=True)]
            if all(v is not None and v is not _NO_MATCH for v in values):
                out.append(codec.key_of_values(values))
        return out

    return keys


_NO_MATCH = object()


def _to_column_type(v: object, t: Any) -> object:
    """A lookup value as the key column's type; _NO_MATCH if no row can hold it (an int8
    value beyond an int4 column's range)."""
    if t.id in (TypeId.INT2, TypeId.INT4):
        limit = 1 << (15 if t.id is TypeId.INT2 else 31)
        if isinstance(v, int) and not -limit <= v < limit:
            return _NO_MATCH
    return v


def _index_prefix(icodec: IndexCodec, exprs: list[BExpr]) -> Callable[[Any], bytes | None]:
    compiled = [compile_expr(e) for e in exprs]

    def prefix(ctx: Any) -> bytes | None:
        values = [f((), ctx) for f in compiled]
        if any(v is None for v in values):
            return None
        return icodec.prefix(values)

    return prefix


def _pk_range(
    codec: RowCodec,
    table: TableDef,
    pk: list[int],
    eq: dict[int, BExpr],
    ranges: dict[int, list[tuple[str, BExpr]]],
) -> KeyRange | None:
    if not pk:
        return None
    fixed = []
    for p in pk:
        if p in eq:
            fixed.append(p)
        else:
            break
    nxt = pk[len(fixed)] if len(fixed) < len(pk) else None
    bounds = ranges.get(nxt, []) if nxt is not None else []
    kt = key_type(table.columns[nxt].type) if nxt is not None else None
    if kt is KeyType.FLOAT:
        bounds = []  # NaN ordering makes float ranges subtle; filter instead
    if not fixed and not bounds:
        return None
    fixed_exprs = [compile_expr(eq[p]) for p in fixed]
    lower = [(op, compile_expr(v)) for op, v in bounds if op in (">", ">=")]
    upper = [(op, compile_expr(v)) for op, v in bounds if op in ("<", "<=")]

    def compute(ctx: Any) -> tuple[bytes | None, bytes | None] | None:
        values = [f((), ctx) for f in fixed_exprs]
        if any(v is None for v in values):
            return None
        base = codec.key_of_values(values) if values else b""
        start: bytes | None = base or None
        end: bytes | None = prefix_successor(base) if base else None
        for op, f in lower:
            v = f((), ctx)
            if v is None:
                return None
            k = codec.key_of_values([*values, v])
            candidate = k if op == ">=" else prefix_successor(k)
            if candidate is not None and (start is None or candidate > start):
                start = candidate
        for op, f in upper:
            v = f((), ctx)
            if v is None:
                return None
            k = codec.key_of_values([*values, v])
            candidate = k if op == "<" else prefix_successor(k)
            if candidate is not None and (end is None or candidate < end):
                end = candidate
        return start, end

    names = [table.columns[p].name for p in fixed]
    text = " AND ".join(f"{n} = ..." for n in names)
    if bounds:
        text = (text + " AND " if text else "") + " AND ".join(
            f"{table.columns[nxt].name} {op} ..."
            for op, _ in bounds  # type: ignore[index]
        )
    return KeyRange(text, compute)


# -- helpers --------------------------------------------------------------------------------


def _conjunction(filters: list[BExpr]) -> Compiled | None:
    if not filters:
        return None
    if len(filters) == 1:
        return compile_expr(filters[0])
    return compile_expr(BBool(filters[0].type, True, filters))


def _less(t: Any) -> Callable[[Any, Any], bool]:
    sk = casts.compare_key(t)
    return lambda a, b: sk(a) < sk(b)


def _frame(frame: WindowFrame | None, key: SqlType | None) -> Frame | None:
    """The run-time frame of a window call (``key``: the type of its first ORDER BY key)."""
    if frame is None:
        return None
    in_range = None
    if frame.mode is FrameMode.RANGE and key is not None:
        if key.id in (TypeId.INT2, TypeId.INT4, TypeId.INT8):
            in_range = in_range_integer
        elif key.id in (TypeId.DATE, TypeId.TIMESTAMP, TypeId.TIMESTAMPTZ):
            in_range = in_range_datetime
        elif key.id is TypeId.TIME:
            in_range = in_range_time
        elif key.id is TypeId.INTERVAL:
            in_range = in_range_interval
        else:
            in_range = in_range_number

    def edge(b: FrameBound) -> FrameEdge:
        return FrameEdge(b.kind, compile_expr(b.offset) if b.offset is not None else None)

    return Frame(frame.mode, edge(frame.start), edge(frame.end), in_range, frame.exclude)


def _sort_key(k: Any) -> tuple[Compiled, bool, bool, Callable[[Any], Any]]:
    nulls_first = k.nulls_first if k.nulls_first is not None else k.descending
    return compile_expr(k.expr), k.descending, nulls_first, casts.compare_key(k.expr.type)


def describe(e: BExpr, table: TableDef | None = None) -> str:
    """A short text of an expression for EXPLAIN."""
    if isinstance(e, BColumn):
        if table is not None and e.index < len(table.columns):
            return table.columns[e.index].name
        return e.name or f"${e.index}"
    if isinstance(e, BConst):
        return (
            "NULL"
            if e.value is None
            else repr(e.value)
            if isinstance(e.value, str)
            else str(e.value)
        )
    if isinstance(e, BParam):
        return f"${e.index + 1}"
    if isinstance(e, BOuter):
        return "(outer)"
    if isinstance(e, BBool):
        word = " AND " if e.is_and else " OR "
        return "(" + word.join(describe(a, table) for a in e.args) + ")"
    if isinstance(e, BCall):
        if e.name == "cast" and e.args:
            return f"{describe(e.args[0], table)}::{e.type}"
        if len(e.args) == 2 and not e.name.isidentifier():
            return f"({describe(e.args[0], table)} {e.name} {describe(e.args[1], table)})"
        return f"{e.name}({', '.join(describe(a, table) for a in e.args)})"
    if isinstance(e, BContextCall):
        return f"{e.name}()"
    if isinstance(e, BInList):
        return f"({describe(e.arg, table)} IN (...))"
    if isinstance(e, BSubquery):
        return f"(SubPlan {e.slot + 1})"
    return type(e).__name__


__all__ = ["Planner", "describe"]


def _locked_table_below(rel: Rel) -> TableRel | None:
    """The FOR UPDATE table whose rows ``rel`` yields unchanged (through filters), if any."""
    while isinstance(rel, FilterRel):
        rel = rel.input
    return rel if isinstance(rel, TableRel) and rel.lock_rows else None
