"""Binding: sqlglot trees to bound statements (names resolved against the catalog, types
inferred, parameters typed), for SELECT, VALUES, set operations, INSERT, UPDATE and DELETE.

Expressions are bound by :class:`~percolator.server.sql.expr_binder.ExprBinder`; this module
binds the relational structure: FROM and joins, WHERE (conjuncts over one table are pushed into
that table's scan, where the planner looks for key ranges), GROUP BY and aggregates, the select
list, DISTINCT, ORDER BY, LIMIT, set operations and CTEs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sqlglot import exp, parse_one

from percolator.server.sql import (
    array_assignment,
    decorrelate,
    generated_columns,
    grouping_sets,
    index_expressions,
    json_records,
    modifying_ctes,
    recursive_cte,
    row_values,
    sequence_ddl,
    sequence_functions,
    system_tables,
    temp_tables,
    user_functions,
    views,
)
from percolator.server.sql import types as T
from percolator.server.sql.bound import (
    AggregateRel,
    BAsyncCall,
    BCall,
    BCoalesce,
    BColumn,
    BConst,
    BContextCall,
    BExpr,
    BOuter,
    BSubquery,
    DeleteStmt,
    DistinctRel,
    FilterRel,
    FunctionRel,
    InsertStmt,
    JoinKind,
    JoinRel,
    LimitRel,
    LockClause,
    NextValue,
    OnConflict,
    OutCol,
    ProjectRel,
    ProjectSetRel,
    QueryStmt,
    RecursiveUnionRel,
    Rel,
    SetOpKind,
    SetOpRel,
    SortKey,
    SortRel,
    TableRel,
    UpdateStmt,
    ValuesRel,
    VirtualRel,
    WindowRel,
    WorkTableRel,
    conjuncts,
    implies,
    same_expression,
    walk,
)
from percolator.server.sql.catalog import Catalog, ColumnDef, TableDef, key_signature
from percolator.server.sql.errors import (
    AMBIGUOUS_COLUMN,
    DATATYPE_MISMATCH,
    DUPLICATE_COLUMN,
    FEATURE_NOT_SUPPORTED,
    INVALID_COLUMN_REFERENCE,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_FUNCTION,
    UNDEFINED_TABLE,
    SqlError,
    unsupported,
)
from percolator.server.sql.expr_binder import (
    AggregateContext,
    ExprBinder,
    Params,
    SrfContext,
    WindowContext,
    is_builtin_function,
    outer_references,
)
from percolator.server.sql.row_expressions import row_scope
from percolator.server.sql.scope import Scope
from percolator.server.sql.set_functions import resolve_set_function
from percolator.server.sql.types import SqlType
from percolator.server.sql.window_binder import resolve_named_windows
from percolator.server.txn.transaction import LockWait, RowLockMode

if TYPE_CHECKING:
    from percolator.server.sql.catalog import FunctionDef
    from percolator.server.sql.merge import MergeStmt


@dataclass
class _Cte:
    rel: Rel | None
    """None: a data-modifying CTE without RETURNING, which cannot be read."""
    names: list[str]


@dataclass
class _Query:
    """What binding a FROM clause produced."""

    rel: Rel
    scope: Scope
    tables: list[TableRel] = field(default_factory=list)
    """Tables whose rows appear unchanged in the row (inner side of every join above them)."""


def _base_table_columns(rel: Rel) -> dict[int, TableRel]:
    """The columns (by identity) of the tables read in ``rel``'s own FROM (not inside a
    subquery or a view: their output columns are new objects), each with its table."""
    found: dict[int, TableRel] = {}
    todo = [rel]
    while todo:
        r = todo.pop()
        if isinstance(r, TableRel):
            found.update((id(c), r) for c in r.columns)
        todo.extend(r.inputs())
    return found


def _add_dependent_groups(ctx: AggregateContext, q: _Query, node: exp.Expression) -> None:
    """Postgres lets a grouped query read any column of a table whose primary key it groups
    by, as that key determines the row (``SELECT t.id, t.name, count(*) ... GROUP BY t.id``,
    which Django's annotate() writes). Such columns that the statement names become extra
    group keys: they cannot split a group, and the select list, HAVING and ORDER BY then
    find them among the groups. With grouping sets, only the groups every set has count (as
    in Postgres), and the new ones join every set."""
    cols = q.scope.columns
    base = _base_table_columns(q.rel)
    grouped: dict[int, set[int]] = {}  # id(TableRel) -> the attnums of its grouped columns
    tables: dict[int, TableRel] = {}
    common = set.intersection(*map(set, ctx.sets)) if ctx.sets else range(len(ctx.groups))
    for g in (ctx.groups[i] for i in common):
        if isinstance(g, BColumn) and g.index < len(cols) and id(cols[g.index]) in base:
            rel = base[id(cols[g.index])]
            tables[id(rel)] = rel
            grouped.setdefault(id(rel), set()).add(cols[g.index].column_number)
    named = {c.name for c in node.find_all(exp.Column)}
    star = any(  # ``*`` or ``t.*`` in the select list names every column (not count(*))
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
        for e in node.expressions
    )
    for key, numbers in grouped.items():
        table = tables[key].table
        pk = {table.position(cid) + 1 for cid in table.primary_key}
        if not pk or not pk <= numbers:
            continue
        for i, c in enumerate(cols):
            if (
                base.get(id(c)) is tables[key]
                and c.column_number not in numbers
                and (star or c.name in named)
                and not c.hidden
            ):
                ctx.add_group(exp.column(c.name, table=c.relation), BColumn(c.type, i, c.name))
                if ctx.sets is not None:
                    k = len(ctx.groups) - 1
                    ctx.sets = [(*s, k) for s in ctx.sets]


class Binder:
    """Binds the statements of one Parse (one set of parameters)."""

    def __init__(self, catalog: Catalog, params: Params) -> None:
        self.catalog = catalog
        self.params = params
        self.exprs = ExprBinder(self)
        self._ctes: list[dict[str, _Cte]] = []
        self._statement: exp.Expression | None = None
        """The statement being bound: its own WITH may hold data-modifying CTEs."""
        self.modifying_ctes: list[modifying_ctes.ModifyingCte] = []
        """The statement's data-modifying CTEs, in the order written (run in that order)."""
        self.dependencies = views.Dependencies()
        """The tables and views named (a view's dependencies; the plan's, for the catalog
        guard)."""
        self._expanding: list[str] = []
        """The user functions whose calls are being expanded, outermost first."""

    @contextmanager
    def expanding(self, fn: FunctionDef) -> Iterator[None]:
        """Bind the expansion of a call of ``fn`` (user_functions.py). A function whose
        body calls itself, however indirectly, would expand forever: 0A000."""
        if fn.signature in self._expanding:
            raise unsupported(f"recursive SQL function {fn.name}")
        self._expanding.append(fn.signature)
        try:
            yield
        finally:
            self._expanding.pop()

    # -- entry points ----------------------------------------------------------------------

    def bind_statement(
        self, node: exp.Expression
    ) -> QueryStmt | InsertStmt | UpdateStmt | DeleteStmt | MergeStmt:
        if isinstance(node, exp.Merge):
            from percolator.server.sql.merge import bind_merge  # it builds on this module

            return bind_merge(self, node)
        outer, self._statement = self._statement, node
        try:
            if isinstance(node, exp.Insert | exp.Update | exp.Delete):
                return self._bind_dml(node)
            if isinstance(node, exp.Query | exp.Values):
                rel = self._resolve_unknown_output(self.bind_query(node, None))
                return QueryStmt(rel, node.find(exp.Lock) is not None)
        finally:
            self._statement = outer
        raise unsupported(f"statement {type(node).__name__.upper()}")

    def _bind_dml(self, node: exp.Insert | exp.Update | exp.Delete) -> modifying_ctes.ModifyingStmt:
        with self._with_clause(node, None):
            if isinstance(node, exp.Insert):
                return self.bind_insert(node)
            if isinstance(node, exp.Update):
                return self.bind_update(node)
            return self.bind_delete(node)

    def _resolve_unknown_output(self, rel: Rel) -> Rel:
        """A query's untyped output columns ('a', NULL) are text, as Postgres reports them."""
        if not any(c.type.id is T.TypeId.UNKNOWN for c in rel.columns):
            return rel
        cols = []
        exprs: list[BExpr] = []
        for i, c in enumerate(rel.columns):
            e: BExpr = BColumn(c.type, i)
            if c.type.id is T.TypeId.UNKNOWN:
                c = replace(c, type=T.TEXT)
                e = self.exprs.coerce(e, T.TEXT)
            cols.append(c)
            exprs.append(e)
        return ProjectRel(cols, rel, exprs)

    def bind_query(self, node: exp.Expression, outer: Scope | None) -> Rel:
        """A query expression (SELECT, VALUES, UNION, ..., with its WITH clause)."""
        # A subquery's window functions and set-returning functions are its own.
        with self.exprs.contexts(None, None):
            return self._bind_query_with(node, outer)

    def _bind_query_with(self, node: exp.Expression, outer: Scope | None) -> Rel:
        with self._with_clause(node, outer):
            return self._bind_query_body(node, outer)

    @contextmanager
    def _with_clause(self, node: exp.Expression, outer: Scope | None) -> Iterator[None]:
        """The CTEs of ``node``'s WITH clause (a query's, or an INSERT's, UPDATE's or
        DELETE's), visible by name while the body is bound."""
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is None:
            yield
            return
        recursive = bool(with_.args.get("recursive"))
        ctes: dict[str, _Cte] = {}
        self._ctes.append(ctes)
        try:
            for cte in with_.expressions:
                name = cte.alias
                aliases = (
                    [c.name for c in cte.args["alias"].columns]
                    if cte.args.get("alias") and cte.args["alias"].columns
                    else []
                )
                if modifying_ctes.is_modifying(cte.this):
                    top = node is self._statement
                    ctes[name] = self._bind_modifying_cte(name, cte.this, aliases, top, recursive)
                    continue
                if recursive and recursive_cte.references(cte.this, name):
                    ctes[name] = self._bind_recursive_cte(name, cte.this, aliases, outer)
                    continue
                rel = self.bind_query(cte.this, outer)
                ctes[name] = _Cte(rel, aliases or [c.name for c in rel.columns])
            yield
        finally:
            self._ctes.pop()

    def _bind_modifying_cte(
        self, name: str, body: exp.Expression, aliases: list[str], top: bool, recursive: bool
    ) -> _Cte:
        """``WITH name AS (INSERT / UPDATE / DELETE ...)``: bound as that statement alone
        would be (seeing the CTEs before it), recorded to run before the main statement, and
        read by name as its RETURNING rows (modifying_ctes.py)."""
        modifying_ctes.check(body, name, top=top, recursive=recursive)
        assert isinstance(body, exp.Insert | exp.Update | exp.Delete)
        statement = self._bind_dml(body)
        # Its rows go to a slot of the context's subquery values that no subquery takes
        # (theirs count up from 0, a view's included).
        slot = -1 - len(self.modifying_ctes)
        cte = modifying_ctes.ModifyingCte(name, statement, slot)
        self.modifying_ctes.append(cte)
        rel = modifying_ctes.relation(cte)
        if rel is None:
            return _Cte(None, [])
        return _Cte(rel, aliases or [c.name for c in rel.columns])

    def _bind_recursive_cte(
        self, name: str, body: exp.Expression, aliases: list[str], outer: Scope | None
    ) -> _Cte:
        """A CTE of WITH RECURSIVE that refers to itself: while its recursive term is bound,
        ``name`` is the working table, whose columns have the initial term's types."""
        initial_node, recursive_node, union_all = recursive_cte.split(name, body)
        initial = self._resolve_unknown_output(self.bind_query(initial_node, outer))
        names = aliases or [c.name for c in initial.columns]
        cols = [OutCol(c.name, c.type) for c in initial.columns]
        rel = RecursiveUnionRel(cols, name, union_all, initial)
        self._ctes[-1][name] = _Cte(WorkTableRel(cols, rel), names)
        if isinstance(recursive_node, exp.Select) and (
            any(self.exprs.contains_aggregate(e) for e in recursive_node.expressions)
            or recursive_node.args.get("having") is not None
        ):
            raise SqlError(
                recursive_cte.INVALID_RECURSION,
                "aggregate functions are not allowed in a recursive query's recursive term",
            )
        recursive = self.bind_query(recursive_node, outer)
        if len(recursive.columns) != len(cols):
            raise SqlError(SYNTAX_ERROR, "each UNION query must have the same number of columns")
        for i, (c, r) in enumerate(zip(cols, recursive.columns, strict=True)):
            self._check_recursive_type(name, i, c.type, r.type)
        rel.recursive = self._cast_rel(recursive, [c.type for c in cols])
        return _Cte(rel, names)

    def _check_recursive_type(self, name: str, i: int, initial: SqlType, rec: SqlType) -> None:
        """The recursive term's column must resolve with the initial term's to the initial
        term's type (the working table has that type), else 42804 as in Postgres."""
        if rec == initial:
            return
        overall = self.exprs.common_type_of([initial, rec], "UNION")
        if overall.id is initial.id and overall.array == initial.array:
            if initial.typmod == -1 or rec.typmod == initial.typmod:
                return
            overall = SqlType(initial.id, -1, initial.array)
        raise SqlError(
            DATATYPE_MISMATCH,
            f'recursive query "{name}" column {i + 1} has type {initial} in non-recursive term '
            f"but type {overall} overall",
            hint="Cast the output of the non-recursive term to the correct type.",
        )

    def _bind_query_body(self, node: exp.Expression, outer: Scope | None) -> Rel:
        if isinstance(node, exp.Select):
            return self.bind_select(node, outer)
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            return self._bind_setop(node, outer)
        if isinstance(node, exp.Values):
            rel = self._order_by_output(node, self._bind_values(node, outer))
            return self._bind_limit(node, rel, outer)
        if isinstance(node, exp.Subquery):
            return self._wrap_order_limit(node, self.bind_query(node.this, outer), outer)
        raise unsupported(f"query {type(node).__name__}")

    # -- SELECT ----------------------------------------------------------------------------

    def bind_select(self, node: exp.Select, outer: Scope | None) -> Rel:
        # Inside a select-list item, a subquery's own clauses are not select-list items.
        with self.exprs.async_calls(False):
            return self._bind_select(node, outer)

    def _bind_select(self, node: exp.Select, outer: Scope | None) -> Rel:
        node = resolve_named_windows(node)
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is not None:
            q = self._bind_from(from_.this, node.args.get("joins") or [], outer)
        else:
            q = _Query(ValuesRel([], [[]]), Scope([], outer))  # type: ignore[arg-type]
            q.rel = ValuesRel([], [[]])
        for lock in node.args.get("locks") or []:
            # OF names the tables whose rows are locked; a table named by several clauses
            # takes the strongest lock and the strictest wait among them, as in Postgres.
            names = {t.name for t in lock.expressions}
            asked = _lock_clause(lock)
            for t in q.tables:
                if names and t.alias not in names:
                    continue
                clause = asked
                if t.lock_rows:
                    clause = LockClause(
                        max(t.lock_clause.wait, asked.wait, key=_STRICTNESS.index),
                        max(t.lock_clause.strength, asked.strength),
                    )
                t.lock_rows = True
                t.lock_clause = clause
            for name in names - {t.alias for t in q.tables}:
                raise SqlError(
                    UNDEFINED_TABLE,
                    f'relation "{name}" in FOR UPDATE clause not found in FROM clause',
                )
        where = node.args.get("where")
        if where is not None:
            # A call that waits (pg_advisory_lock, pg_sleep) stays in the WHERE filter, which
            # awaits it row by row, as Postgres evaluates it for each row the scan finds.
            with self.exprs.async_calls(True):
                condition = decorrelate.where_exists_as_in(where.this)
                pred = self.exprs.bind_condition(condition, q.scope, "WHERE")
            q.rel = self._apply_where(q, pred)

        select_items = self._expand_stars(node.expressions, q.scope)
        group = node.args.get("group")
        having = node.args.get("having")
        agg_ctx: AggregateContext | None = None
        needs_agg = (
            group is not None
            or having is not None
            or any(self.exprs.contains_aggregate(e) for e, _ in select_items)
        )
        order = node.args.get("order")
        if not needs_agg and order is not None:
            needs_agg = any(self.exprs.contains_aggregate(o.this) for o in order.expressions)
        source_scope = q.scope
        if needs_agg:
            agg_ctx = self._bind_grouping(group, select_items, q.scope)
            if agg_ctx.groups:
                _add_dependent_groups(agg_ctx, q, node)
            # The select list, HAVING and ORDER BY see the aggregate's output row.
        windows = WindowContext()
        srfs = SrfContext()
        project_exprs: list[BExpr] = []
        out_cols: list[OutCol] = []
        with self.exprs.contexts(windows, srfs):
            for item, name in select_items:
                if agg_ctx is not None:
                    # A call that waits may read the groups and the aggregates' values, as
                    # Django's loaddata does: ``SELECT setval(..., max(id)) FROM t``.
                    with self.exprs.async_calls(True):
                        e = self.exprs.bind_in_aggregate(item, agg_ctx)
                else:
                    e = self._bind_allowing_async(item, source_scope)
                project_exprs.append(e)
                out_cols.append(self._out_col(item, name, _source_of(e, agg_ctx), source_scope))
        having_pred = None
        if agg_ctx is not None and having is not None:
            having_pred = self.exprs.coerce_condition(
                self.exprs.bind_in_aggregate(having.this, agg_ctx), "HAVING"
            )

        distinct = node.args.get("distinct")
        on = distinct.args.get("on") if distinct is not None else None
        sort_keys: list[SortKey] = []
        on_exprs = None
        with self.exprs.contexts(windows, srfs):
            if order is not None:
                sort_keys = self._bind_order(
                    order,
                    project_exprs,
                    out_cols,
                    source_scope,
                    agg_ctx,
                    distinct is not None and on is None,
                )
            if on is not None:
                on_exprs = [
                    self._output_ref(e, out_cols, project_exprs, source_scope, agg_ctx)
                    for e in on.expressions
                ]
                _check_distinct_on(on_exprs, sort_keys, project_exprs)
        if node.args.get("locks"):
            _check_select_locking(
                node.args["locks"][0],
                [
                    ("DISTINCT clause", distinct is not None),
                    ("GROUP BY clause", group is not None),
                    ("HAVING clause", having is not None),
                    ("aggregate functions", agg_ctx is not None and bool(agg_ctx.aggs)),
                    ("window functions", bool(windows.calls)),
                    ("set-returning functions in the target list", bool(srfs.calls)),
                ],
            )
        if agg_ctx is not None:
            # Built after ORDER BY, which can add aggregates of its own.
            rel: Rel = AggregateRel(
                agg_ctx.output_columns(),
                _grouped_source(q.rel, agg_ctx, having is not None or group is not None),
                agg_ctx.groups,
                agg_ctx.aggs,
                agg_ctx.sets,
            )
            if having_pred is not None:
                rel = FilterRel(rel.columns, rel, having_pred)
        else:
            rel = q.rel
        rel = self._add_windows(rel, windows)
        rel = self._add_set_functions(rel, srfs)
        rel = ProjectRel(out_cols, rel, project_exprs)
        if on_exprs is not None:
            # DISTINCT ON keeps the first row of each group in ORDER BY order. Postgres sorts
            # by the DISTINCT ON keys that ORDER BY leaves out too (its rows come out in
            # their order).
            sorted_by = [k.expr for k in sort_keys]
            rest = [e for e in on_exprs if not _among(e, sorted_by, project_exprs)]
            keys = sort_keys + [SortKey(e, False, None) for e in rest]
            rel = SortRel(rel.columns, rel, keys)
            rel = DistinctRel(rel.columns, rel, on_exprs)
        else:
            if distinct is not None:
                rel = DistinctRel(rel.columns, rel, None)
            if sort_keys:
                rel = SortRel(rel.columns, rel, sort_keys)
        visible = [i for i, c in enumerate(out_cols) if not c.hidden]
        rel = self._bind_limit(node, rel, outer)
        if len(visible) != len(out_cols):
            rel = ProjectRel(
                [out_cols[i] for i in visible],
                rel,
                [BColumn(out_cols[i].type, i, out_cols[i].name) for i in visible],
            )
        return rel

    def _add_windows(self, rel: Rel, windows: WindowContext) -> Rel:
        """The window functions of a SELECT, computed over ``rel``'s rows."""
        if not windows.calls:
            return rel
        rel = _precompute_window_subqueries(rel, windows)
        windows.place(len(rel.columns))
        cols = list(rel.columns) + [OutCol(c.name, c.type) for c in windows.calls]
        return WindowRel(cols, rel, windows.specs, windows.calls)

    def _add_set_functions(self, rel: Rel, srfs: SrfContext) -> Rel:
        """The set-returning functions of a select list, run over ``rel``'s rows."""
        if not srfs.calls:
            return rel
        srfs.place(len(rel.columns))
        # One reference per call, made when the call was added.
        cols = list(rel.columns) + [OutCol(r.name, r.type) for r in srfs.refs]
        return ProjectSetRel(cols, rel, srfs.calls)

    def _bind_limit(self, node: exp.Expression, rel: Rel, outer: Scope | None = None) -> Rel:
        """LIMIT / OFFSET / FETCH: constants, parameters, or an enclosing query's columns (a
        LATERAL subquery's ``LIMIT g.n``), never the query's own."""
        limit = node.args.get("limit")
        offset = node.args.get("offset")
        if limit is None and offset is None:
            return rel
        empty = Scope([], outer)
        lim = None
        off = None
        if isinstance(limit, exp.Fetch):
            if limit.args.get("limit_options") and limit.args["limit_options"].args.get(
                "with_ties"
            ):
                raise unsupported("FETCH ... WITH TIES")
            if limit.args.get("percent"):
                raise unsupported("FETCH ... PERCENT")
            count = limit.args.get("count")
            lim_node = count if count is not None else exp.Literal.number(1)
            lim = self._limit_value(lim_node, empty)
        elif limit is not None:
            lim_node = limit.args.get("expression")
            # LIMIT ALL and LIMIT NULL mean no limit.
            if (
                lim_node is not None
                and not isinstance(lim_node, exp.Null)
                and not (isinstance(lim_node, exp.Var) and lim_node.name.upper() == "ALL")
            ):
                lim = self._limit_value(lim_node, empty)
        if offset is not None:
            off = self._limit_value(offset.args["expression"], empty)
        return LimitRel(rel.columns, rel, lim, off)

    def _limit_value(self, node: exp.Expression, scope: Scope) -> BExpr:
        """A LIMIT or OFFSET count as bigint, by assignment as Postgres coerces it
        (``LIMIT 2.5`` is 3)."""
        return self.exprs.coerce(self.exprs.bind(node, scope), T.INT8, assignment=True)

    def _expand_stars(
        self, items: list[exp.Expression], scope: Scope
    ) -> list[tuple[exp.Expression, str | None]]:
        """Select items with ``*`` and ``t.*`` expanded to column references."""
        out: list[tuple[exp.Expression, str | None]] = []
        for item in items:
            if isinstance(item, exp.Star):
                indexes = scope.star(None)
                if not indexes and not scope.columns:
                    raise SqlError(SYNTAX_ERROR, "SELECT * with no tables specified is not valid")
                out.extend((_IndexRef(i), scope.columns[i].name) for i in indexes)
            elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                qualifier = item.table
                out.extend((_IndexRef(i), scope.columns[i].name) for i in scope.star(qualifier))
            elif isinstance(item, exp.Dot) and isinstance(item.expression, exp.Star):
                out.extend(self._expand_record_star(item.this, scope))
            else:
                alias = item.alias if isinstance(item, exp.Alias) else None
                out.append((item.this if isinstance(item, exp.Alias) else item, alias))
        return out

    def _expand_record_star(
        self, node: exp.Expression, scope: Scope
    ) -> list[tuple[exp.Expression, str | None]]:
        """``(record).*``: one select item per field, ``(record).field`` (the record is
        computed for each, as in Postgres)."""
        from percolator.server.sql.set_functions import record_fields

        t = self.exprs.bind(node, scope).type
        fields = record_fields(t)
        if fields is None:
            if t.id is not T.TypeId.RECORD or t.array:
                raise SqlError("42809", f"type {t} is not composite")
            raise unsupported(f"expression {node.sql(dialect='postgres')[:60]}.*")
        return [
            (exp.Dot(this=node.copy(), expression=exp.to_identifier(name, quoted=True)), name)
            for name, _ in fields
        ]

    def _out_col(self, item: exp.Expression, alias: str | None, e: BExpr, scope: Scope) -> OutCol:
        """The output column of a select item bound to ``e`` (over ``scope``'s row: a
        grouped query's item is given as its group's expression, :func:`_source_of`)."""
        if isinstance(item, _IndexRef):
            src = scope.columns[item.column_index]
            return OutCol(src.name, e.type, src.table_oid, src.column_number)
        if alias is not None:
            name = alias
        else:
            name = self.exprs.column_name(item)
        table_oid = 0
        column_number = 0
        if isinstance(item, exp.Column) and isinstance(e, BColumn):
            src = scope.columns[e.index]
            table_oid, column_number = src.table_oid, src.column_number
        return OutCol(name, e.type, table_oid, column_number)

    def _bind_grouping(
        self,
        group: exp.Group | None,
        select_items: list[tuple[exp.Expression, str | None]],
        scope: Scope,
    ) -> AggregateContext:
        ctx = AggregateContext(scope)
        if group is None:
            return ctx
        if not grouping_sets.uses_grouping_sets(group):
            for g in group.expressions:
                node = self._group_item(g, select_items, scope)
                ctx.add_group(node, self.exprs.bind(node, scope))
            return ctx

        def position(g: exp.Expression) -> int:
            # An expression named in several sets is one group expression.
            node = self._group_item(g, select_items, scope)
            e = self.exprs.bind(node, scope)
            for i, seen in enumerate(ctx.groups):
                if same_expression(seen, e):
                    return i
            ctx.add_group(node, e)
            return len(ctx.groups) - 1

        sets = grouping_sets.expand(group, position)
        if sets != [tuple(range(len(ctx.groups)))]:
            ctx.sets = sets  # more than one plain GROUP BY (``GROUP BY a, ()`` is ``a``)
        return ctx

    def _group_item(
        self,
        g: exp.Expression,
        select_items: list[tuple[exp.Expression, str | None]],
        scope: Scope,
    ) -> exp.Expression:
        """A GROUP BY expression, with a select-list position or output name (not a column
        of FROM) replaced by the select item it stands for."""
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this)
            if not 1 <= pos <= len(select_items):
                raise SqlError(
                    INVALID_COLUMN_REFERENCE,
                    f"GROUP BY position {pos} is not in select list",
                )
            return select_items[pos - 1][0]
        if isinstance(g, exp.Column) and not g.table and scope.lookup(None, g.name) is None:
            for item, alias in select_items:
                if alias == g.name:
                    return item
        return g

    def _bind_order(
        self,
        order: exp.Order,
        project_exprs: list[BExpr],
        out_cols: list[OutCol],
        scope: Scope,
        agg_ctx: AggregateContext | None,
        distinct: bool,
    ) -> list[SortKey]:
        keys = []
        for o in order.expressions:
            ref = self._output_ref(o.this, out_cols, project_exprs, scope, agg_ctx, distinct)
            nulls_first = o.args.get("nulls_first")
            desc = bool(o.args.get("desc"))
            # sqlglot fills nulls_first with the dialect default; keep it only when explicit.
            explicit_nulls = "NULLS" in o.sql(dialect="postgres").upper()
            keys.append(SortKey(ref, desc, bool(nulls_first) if explicit_nulls else None))
        return keys

    def _output_ref(
        self,
        node: exp.Expression,
        out_cols: list[OutCol],
        project_exprs: list[BExpr],
        scope: Scope,
        agg_ctx: AggregateContext | None,
        distinct: bool = False,
    ) -> BExpr:
        """An ORDER BY / DISTINCT ON key as a reference to a projected column (adding a hidden
        one for an expression that is not in the select list)."""
        if isinstance(node, exp.Literal) and not node.is_string:
            pos = int(node.this)
            if not 1 <= pos <= len(out_cols):
                raise SqlError(
                    INVALID_COLUMN_REFERENCE, f"ORDER BY position {pos} is not in select list"
                )
            return BColumn(out_cols[pos - 1].type, pos - 1)
        if isinstance(node, exp.Column) and not node.table:
            matches = [i for i, c in enumerate(out_cols) if c.name == node.name and not c.hidden]
            if len(matches) > 1 and not all(
                same_expression(project_exprs[i], project_exprs[matches[0]]) for i in matches
            ):
                raise SqlError(AMBIGUOUS_COLUMN, f'ORDER BY "{node.name}" is ambiguous')
            if (matches and scope.lookup(None, node.name) is None) or len(matches) == 1:
                if matches:
                    return BColumn(out_cols[matches[0]].type, matches[0])
        e = (
            self.exprs.bind_in_aggregate(node, agg_ctx)
            if agg_ctx is not None
            else self.exprs.bind(node, scope)
        )
        for i, pe in enumerate(project_exprs):
            if same_expression(pe, e) and not out_cols[i].hidden:
                return BColumn(e.type, i)
        if distinct:
            raise SqlError(
                INVALID_COLUMN_REFERENCE,
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
            )
        project_exprs.append(e)
        out_cols.append(OutCol("?sort?", e.type, hidden=True))
        return BColumn(e.type, len(out_cols) - 1)

    def _bind_allowing_async(self, node: exp.Expression, scope: Scope) -> BExpr:
        """Bind a select-list or VALUES item, where calls that need a round trip (nextval)
        may be: the operator computing the item awaits them first."""
        with self.exprs.async_calls(True):
            return self.exprs.bind(node, scope)

    def _apply_where(self, q: _Query, pred: BExpr) -> Rel:
        """Push conjuncts that read one table (and no subquery) into its scan, and
        those that read both sides of an inner join (``FROM a, b WHERE a.x = b.y``) into
        that join's condition, where a hash join can use them."""
        rest = []
        offsets = _table_offsets(q.rel)
        for conj in conjuncts(pred):
            target = _single_table(conj, offsets, q.tables)
            if target is not None:
                table, offset = target
                table.filters.append(_shift(conj, -offset))
            elif not self._push_into_join(q.rel, conj):
                rest.append(conj)
        if not rest:
            return q.rel
        combined = rest[0] if len(rest) == 1 else self.exprs.make_and(rest)
        return FilterRel(q.rel.columns, q.rel, combined)

    def _push_into_join(self, rel: Rel, conj: BExpr) -> bool:
        """Add ``conj`` to the condition of the deepest inner join whose two sides it reads,
        reached from ``rel`` through inner joins and the preserved sides of outer joins
        only (a WHERE conjunct must not filter rows before an outer join null-extends
        them)."""
        columns = _plain_columns(conj)
        if columns is None:
            return False
        found = _join_spanning(rel, 0, columns)
        if found is None:
            return False
        join, offset = found
        shifted = _shift(conj, -offset)
        join.condition = (
            shifted if join.condition is None else self.exprs.make_and([join.condition, shifted])
        )
        if join.kind is JoinKind.CROSS:
            join.kind = JoinKind.INNER
        join.equi_keys = _equi_keys(join.condition, len(join.left.columns))
        return True

    # -- FROM ------------------------------------------------------------------------------

    def _bind_from(
        self, first: exp.Expression, joins: list[exp.Join], outer: Scope | None
    ) -> _Query:
        q = self._bind_from_item(first, outer)
        for j in joins:
            q = self._join_next(q, j, outer)
        return q

    def _join_next(self, left: _Query, j: exp.Join, outer: Scope | None) -> _Query:
        """Join the next FROM item to the items before it. A LATERAL item, or a function call
        (implicitly LATERAL, as in Postgres), sees their columns as its outer row; when it
        reads that row or an enclosing query's, it runs once per left row. Any other item
        cannot see them (Postgres's 42P01 names the entry)."""
        node, lateral = _lateral_item(j.this)
        if not lateral and _is_join_tree(node) and node.find(exp.Lateral) is not None:
            # Postgres lets the LATERAL items of a parenthesized join see the items before
            # it (and refuses its other references to them, which this accepts).
            lateral = True
        if not lateral:
            right = self._bind_from_item(node, _hiding(outer, left.scope.relations))
            return self._join(left, right, j, outer)
        lateral_scope = Scope(list(left.scope.columns), outer, set(left.scope.relations))
        right = self._bind_from_item(node, lateral_scope)
        refs = outer_references(right.rel)
        left_refs = sorted(i for level, i in refs if level == 1)
        if not left_refs:
            # Independent of the left row: an ordinary join (hash, lookup), the item bound
            # again if it reads enclosing queries, for those references' usual levels.
            if refs:
                right = self._bind_from_item(node, outer)
            return self._join(left, right, j, outer)
        q = self._join(left, right, j, outer)
        # A FULL USING join projects its merged columns over the join.
        join = q.rel if isinstance(q.rel, JoinRel) else q.rel.inputs()[0]
        assert isinstance(join, JoinRel)
        if join.kind in (JoinKind.RIGHT, JoinKind.FULL):
            name = left.scope.columns[left_refs[0]].relation
            raise SqlError(
                INVALID_COLUMN_REFERENCE,
                f'invalid reference to FROM-clause entry for table "{name}"',
                detail="The combining JOIN type must be INNER or LEFT for a LATERAL reference.",
            )
        join.lateral = True
        return q

    def _bind_from_item(self, node: exp.Expression, outer: Scope | None) -> _Query:
        if _is_join_tree(node):
            return self._bind_join_tree(node, outer)
        if isinstance(node, exp.Table):
            if isinstance(node.this, exp.Func | exp.Anonymous):
                return self._bind_function_table(node, outer)
            return self._bind_table(node, outer)
        if isinstance(node, exp.Subquery):
            rel = self.bind_query(node.this, outer)
            rel = self._wrap_order_limit(node, rel, outer)
            alias = node.alias
            if not alias:
                raise SqlError(SYNTAX_ERROR, "subquery in FROM must have an alias")
            return self._aliased(rel, alias, _column_aliases(node), outer)
        if isinstance(node, exp.Values):
            rel = self._bind_values(node, outer)
            alias = node.alias or "*VALUES*"
            return self._aliased(rel, alias, _column_aliases(node), outer)
        if isinstance(node, exp.Unnest):
            return self._bind_unnest_from(node, outer)
        if isinstance(node, exp.Lateral):
            # LATERAL on the first item: nothing precedes it to see.
            return self._bind_from_item(_unwrap_lateral(node), outer)
        raise unsupported(f"FROM item {type(node).__name__}")

    def _bind_join_tree(self, node: exp.Expression, outer: Scope | None) -> _Query:
        """A parenthesized join (``a LEFT JOIN (b JOIN c ON ...) ON ...``), which sqlglot gives
        as a Subquery around a Table that carries the inner joins (or the Table alone, for
        ``a JOIN b JOIN c ON ... ON ...``). Its ON conditions see only its own tables (and
        enclosing queries). With an alias, its columns are reached through that name only."""
        if isinstance(node, exp.Table):
            first = node.copy()
            first.set("joins", None)
            return self._bind_from(first, node.args["joins"], outer)
        if isinstance(node.this, exp.Table) and not node.this.args.get("joins"):
            # Postgres's grammar has no parenthesized table name
            raise SqlError(SYNTAX_ERROR, 'syntax error at or near ")"')
        q = self._bind_from_item(node.this, outer)
        alias = node.alias
        if not alias:
            return q
        return self._aliased_join(q, alias, _column_aliases(node), outer)

    def _aliased_join(self, q: _Query, alias: str, names: list[str], outer: Scope | None) -> _Query:
        """``(a JOIN b ...) AS alias``: the join's visible columns (as ``*`` orders them, a
        USING join's merged columns once), all qualified by ``alias``."""
        cols = q.scope.columns
        order = q.scope.star_order
        if order is None:
            order = [i for i, c in enumerate(cols) if not c.hidden]
        out = []
        for n, i in enumerate(order):
            c = cols[i]
            name = names[n] if n < len(names) else c.name
            out.append(OutCol(name, c.type, c.table_oid, c.column_number, alias))
        rel = ProjectRel(out, q.rel, [BColumn(cols[i].type, i) for i in order])
        return _Query(rel, Scope(out, outer, {alias}))

    def _wrap_order_limit(self, node: exp.Expression, rel: Rel, outer: Scope | None) -> Rel:
        return rel

    def _aliased(self, rel: Rel, alias: str, names: list[str], outer: Scope | None) -> _Query:
        cols = []
        for i, c in enumerate(rel.columns):
            name = names[i] if i < len(names) else c.name
            cols.append(OutCol(name, c.type, c.table_oid, c.column_number, alias))
        rel = ProjectRel(cols, rel, [BColumn(c.type, i) for i, c in enumerate(rel.columns)])
        return _Query(rel, Scope(cols, outer, {alias}))

    def _bind_table(self, node: exp.Table, outer: Scope | None) -> _Query:
        name = node.name
        schema = node.db or None
        alias = node.alias or name
        col_aliases = _column_aliases(node)
        if schema is None:
            for ctes in reversed(self._ctes):
                if name in ctes:
                    cte = ctes[name]
                    if cte.rel is None:
                        raise modifying_ctes.no_returning(name)
                    return self._aliased(cte.rel, alias, col_aliases or cte.names, outer)
        if schema in (None, "public") or temp_tables.is_temp_schema(schema):
            table = temp_tables.visible(self.catalog.tables.get(name), schema)
            if table is not None:
                cols = [
                    OutCol(
                        col_aliases[i] if i < len(col_aliases) else c.name,
                        c.type,
                        table.oid,
                        i + 1,
                        alias,
                    )
                    for i, c in enumerate(table.columns)
                ] + _hidden_key(table, alias)
                rel = self._table_rel(cols, table, alias)
                self.dependencies.tables.add(table.id)
                return _Query(rel, Scope(cols, outer, {alias}), [rel])
            view = self.catalog.views.get(name)
            if view is not None:
                vrel = views.expand(self, view, alias, col_aliases)
                return _Query(vrel, Scope(vrel.columns, outer, {alias}))
        if schema is None or schema in system_tables.SYSTEM_SCHEMAS:
            sys_table = system_tables.lookup(schema, name)
            if sys_table is not None:
                cols = [OutCol(n, t, relation=alias) for n, t in sys_table.columns]
                rows = sys_table.rows
                if sys_table.oid:
                    # Postgres's hidden tableoid column (psql's \dd reads it).
                    cols.append(OutCol("tableoid", T.OID, relation=alias, hidden=True))
                    rows = system_tables.rows_with_tableoid(sys_table)
                vrel = VirtualRel(cols, f"{sys_table.schema}.{name}", rows)
                return _Query(vrel, Scope(cols, outer, {alias}))
        shown = f"{schema}.{name}" if schema else name
        raise SqlError(UNDEFINED_TABLE, f'relation "{shown}" does not exist')

    def _bind_function_table(self, node: exp.Table, outer: Scope | None) -> _Query:
        user = self._user_function_from(node, outer)
        if user is not None:
            return user
        name, args = self.exprs.function_name_args(node.this)
        ordinality = bool(node.args.get("ordinality"))
        if name in json_records.NAMES:
            return self._json_records_from(name, args, node, ordinality, outer)
        return self._set_function_from(
            name, args, node.alias, _column_aliases(node), ordinality, outer
        )

    def _user_function_from(self, node: exp.Table, outer: Scope | None) -> _Query | None:
        """A call of a function made by CREATE FUNCTION in FROM: the subquery it expands
        to (user_functions.py); None when the call names none."""
        call_node = node.this
        if not isinstance(call_node, exp.Anonymous) or not self.catalog.functions:
            return None
        name = str(call_node.this).lower()
        schema = node.db.lower() if node.db else None
        overloads = user_functions.candidates(self.catalog, name, schema)
        if not overloads or (schema is None and is_builtin_function(name)):
            return None
        if node.args.get("ordinality"):
            raise unsupported(f"WITH ORDINALITY on function {name}")
        call = self.exprs.user_call(name, overloads, list(call_node.expressions), Scope([], outer))
        alias = node.alias or name
        if not user_functions.is_inlined(call.function):
            # One row: the call in a select list, where the operator awaits it.
            names = _column_aliases(node)
            item = exp.alias_(call_node.copy(), names[0] if names else alias, quoted=True)
            expansion = exp.Subquery(
                this=exp.select(item), alias=exp.TableAlias(this=exp.to_identifier(alias))
            )
        else:
            expansion = user_functions.from_item(call, self.catalog, alias, _column_aliases(node))
        with self.expanding(call.function):
            return self._bind_from_item(expansion, outer)

    def _json_records_from(
        self,
        name: str,
        arg_nodes: list[exp.Expression],
        node: exp.Table,
        ordinality: bool,
        outer: Scope | None,
    ) -> _Query:
        """``json(b)_to_record[set](doc) AS alias(column type, ...)``."""
        alias = node.args.get("alias")
        defs = alias.columns if isinstance(alias, exp.TableAlias) else []
        if not defs or not all(isinstance(d, exp.ColumnDef) and d.args.get("kind") for d in defs):
            raise json_records.needs_definition_list()
        if len(arg_nodes) != 1:
            raise SqlError(UNDEFINED_FUNCTION, f"function {name} takes one argument")
        if ordinality:
            raise SqlError(
                SYNTAX_ERROR, "WITH ORDINALITY cannot be used with a column definition list"
            )
        columns = [(d.name, self.exprs.bind_type(d.args["kind"])) for d in defs]
        doc = self.exprs.bind(arg_nodes[0], Scope([], outer))
        doc = json_records.argument(name, doc, self.exprs)
        relation = node.alias or name
        cols = [OutCol(n, t, relation=relation) for n, t in columns]
        rel = FunctionRel(cols, name, json_records.row_function(name, columns), [doc], False)
        return _Query(rel, Scope(cols, outer, {relation}))

    def _bind_unnest_from(self, node: exp.Unnest, outer: Scope | None) -> _Query:
        """``unnest(...) [WITH ORDINALITY] [AS alias(columns)]``, which sqlglot parses into
        its own node (the ordinality column's alias, if any, in ``offset``)."""
        offset = node.args.get("offset")
        names = _column_aliases(node)
        if isinstance(offset, exp.Expression):
            names.append(offset.name)
        return self._set_function_from(
            "unnest", list(node.expressions), node.alias, names, bool(offset), outer
        )

    def _set_function_from(
        self,
        name: str,
        arg_nodes: list[exp.Expression],
        alias: str | None,
        col_aliases: list[str],
        ordinality: bool,
        outer: Scope | None,
    ) -> _Query:
        """A set-returning function in FROM."""
        bound = [self.exprs.bind(a, Scope([], outer)) for a in arg_nodes]
        impl = resolve_set_function(name, bound, self.exprs)
        if impl is None and name in {"unnest", "generate_series", "generate_subscripts"}:
            # A set-returning function we have, not for these arguments (Postgres's words).
            shown = ", ".join(str(a.type) for a in bound)
            raise SqlError(
                UNDEFINED_FUNCTION,
                f"function {name}({shown}) does not exist",
                hint="No function matches the given name and argument types. You might need to "
                "add explicit type casts.",
            )
        if impl is None:
            raise unsupported(f"function {name} in FROM")
        # A one-column function's column is named after the table alias (Postgres's rule).
        names = list(impl.names) if impl.names is not None else [impl.column or alias or name]
        types = list(impl.types)
        if ordinality:
            names.append("ordinality")
            types.append(T.INT8)
        if len(col_aliases) > len(names):
            raise SqlError(
                SYNTAX_ERROR,
                f'table "{alias or name}" has {len(names)} columns available but '
                f"{len(col_aliases)} columns specified",
            )
        names[: len(col_aliases)] = col_aliases
        relation = alias or name
        scalar = impl.names is None and not ordinality
        cols = [
            OutCol(n, t, relation=relation, function_value=scalar)
            for n, t in zip(names, types, strict=True)
        ]
        rel = FunctionRel(cols, name, impl.fn, impl.args, ordinality)
        return _Query(rel, Scope(cols, outer, {relation}))

    def _join(self, left: _Query, right: _Query, j: exp.Join, outer: Scope | None) -> _Query:
        side = (j.args.get("side") or "").upper()
        kind_word = (j.args.get("kind") or "").upper()
        natural = (j.args.get("method") or "").upper() == "NATURAL"
        if kind_word == "CROSS" or (
            not side and j.args.get("on") is None and not j.args.get("using") and not natural
        ):
            kind = JoinKind.CROSS if not j.args.get("on") else JoinKind.INNER
        elif side == "LEFT":
            kind = JoinKind.LEFT
        elif side == "RIGHT":
            kind = JoinKind.RIGHT
        elif side == "FULL":
            kind = JoinKind.FULL
        else:
            kind = JoinKind.INNER
        using = j.args.get("using")
        using_names = [u.name for u in using] if using else []
        if natural:
            right_names = {c.name for c in right.scope.columns if not c.hidden}
            using_names = list(
                dict.fromkeys(
                    c.name for c in left.scope.columns if not c.hidden and c.name in right_names
                )
            )
            if not using_names and kind is JoinKind.INNER:
                kind = JoinKind.CROSS
        dup = left.scope.relations & right.scope.relations
        if dup:
            raise SqlError("42712", f'table name "{next(iter(dup))}" specified more than once')
        nleft = len(left.scope.columns)
        if using_names:
            return self._using_join(left, right, kind, using_names, outer)
        cols = list(left.scope.columns) + list(right.scope.columns)
        scope = Scope(cols, outer, left.scope.relations | right.scope.relations)
        scope.star_order = _joined_star(left.scope, right.scope, nleft)
        condition = None
        if j.args.get("on") is not None:
            condition = self.exprs.bind_condition(j.args["on"], scope, "JOIN/ON")
        return self._join_query(left, right, kind, cols, scope, condition)

    def _using_join(
        self, left: _Query, right: _Query, kind: JoinKind, names: list[str], outer: Scope | None
    ) -> _Query:
        """A USING (or NATURAL) join: each named column appears once, first in ``*``; it is
        the left column (the right one for RIGHT JOIN, their COALESCE for FULL JOIN)."""
        nleft = len(left.scope.columns)
        pairs: list[tuple[int, int]] = []
        for name in names:
            li = left.scope._find(None, name)
            ri = right.scope._find(None, name)
            if li is None or ri is None:
                raise SqlError(
                    UNDEFINED_COLUMN,
                    f'column "{name}" specified in USING clause does not exist in '
                    f"{'left' if li is None else 'right'} table",
                )
            pairs.append((li, nleft + ri))
        cols = list(left.scope.columns) + list(right.scope.columns)
        parts = [
            self.exprs.compare(
                "=", BColumn(cols[li].type, li, name), BColumn(cols[ri].type, ri, name)
            )
            for name, (li, ri) in zip(names, pairs, strict=True)
        ]
        condition = parts[0] if len(parts) == 1 else self.exprs.make_and(parts)
        hide = {i for pair in pairs for i in pair}
        if kind is JoinKind.RIGHT:
            merged = [ri for _, ri in pairs]
        elif kind is JoinKind.FULL:
            merged = [len(cols) + k for k in range(len(pairs))]
        else:
            merged = [li for li, _ in pairs]
        cols = [
            replace(c, hidden=True, joined_away=True) if i in hide and i not in merged else c
            for i, c in enumerate(cols)
        ]
        rest = [i for i in _joined_star(left.scope, right.scope, nleft) if i not in hide]
        if kind is JoinKind.FULL:
            # The merged columns are computed, after the joined row (keeping its offsets).
            base = list(cols)
            extra: list[BExpr] = []
            for name, (li, ri) in zip(names, pairs, strict=True):
                t = self.exprs.common_type_of([base[li].type, base[ri].type], "JOIN/USING")
                extra.append(
                    BCoalesce(
                        t,
                        [
                            self.exprs.coerce(BColumn(base[li].type, li), t),
                            self.exprs.coerce(BColumn(base[ri].type, ri), t),
                        ],
                    )
                )
                cols.append(OutCol(name, t))
            scope = Scope(cols, outer, left.scope.relations | right.scope.relations)
            scope.star_order = merged + rest
            q = self._join_query(left, right, kind, base, scope, condition)
            exprs = [BColumn(c.type, i) for i, c in enumerate(base)] + extra
            q.rel = ProjectRel(cols, q.rel, exprs)
            return q
        scope = Scope(cols, outer, left.scope.relations | right.scope.relations)
        scope.star_order = merged + rest
        return self._join_query(left, right, kind, cols, scope, condition)

    def _join_query(
        self,
        left: _Query,
        right: _Query,
        kind: JoinKind,
        cols: list[OutCol],
        scope: Scope,
        condition: BExpr | None,
    ) -> _Query:
        rel = JoinRel(cols, kind, left.rel, right.rel, condition)
        if condition is not None:
            rel.equi_keys = _equi_keys(condition, len(left.scope.columns))
        tables: list[TableRel] = []
        if kind in (JoinKind.INNER, JoinKind.CROSS):
            tables = left.tables + right.tables
        elif kind is JoinKind.LEFT:
            tables = left.tables
        elif kind is JoinKind.RIGHT:
            tables = right.tables
        return _Query(rel, scope, tables)

    # -- VALUES and set operations ---------------------------------------------------------

    def _bind_values(
        self, node: exp.Values, outer: Scope | None, targets: list[SqlType] | None = None
    ) -> Rel:
        scope = Scope([], outer)
        rows: list[list[BExpr]] = []
        for tup in node.expressions:
            items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
            rows.append(
                [
                    self._bind_allowing_async(i, scope)
                    if not isinstance(i, exp.Var) or i.name.upper() != "DEFAULT"
                    else _DEFAULT
                    for i in items
                ]
            )
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise SqlError(SYNTAX_ERROR, "VALUES lists must all be the same length")
        types = []
        for c in range(width):
            if targets is not None and c < len(targets):
                t = targets[c]
            else:
                t = self.exprs.common_type([r[c] for r in rows if r[c] is not _DEFAULT], "VALUES")
            types.append(t)
            for r in rows:
                if r[c] is not _DEFAULT:
                    r[c] = self.exprs.coerce(r[c], t, assignment=targets is not None)
        cols = [OutCol(f"column{i + 1}", t) for i, t in enumerate(types)]
        return ValuesRel(cols, rows)

    def _bind_setop(self, node: exp.Expression, outer: Scope | None) -> Rel:
        left = self.bind_query(node.this, outer)
        right = self.bind_query(node.expression, outer)
        if len(left.columns) != len(right.columns):
            word = type(node).__name__.upper()
            raise SqlError(SYNTAX_ERROR, f"each {word} query must have the same number of columns")
        types = [
            self.exprs.common_type_of([a.type, b.type], type(node).__name__.upper())
            for a, b in zip(left.columns, right.columns, strict=True)
        ]
        left = self._cast_rel(left, types)
        right = self._cast_rel(right, types)
        kind = {
            exp.Union: SetOpKind.UNION,
            exp.Intersect: SetOpKind.INTERSECT,
            exp.Except: SetOpKind.EXCEPT,
        }[type(node)]
        cols = [OutCol(c.name, t) for c, t in zip(left.columns, types, strict=True)]
        rel: Rel = SetOpRel(cols, kind, not node.args.get("distinct", True), left, right)
        return self._bind_limit(node, self._order_by_output(node, rel), outer)

    def _order_by_output(self, node: exp.Expression, rel: Rel) -> Rel:
        """ORDER BY of a set operation or of VALUES: it names output columns, by position or
        by name, as nothing else is in scope there."""
        cols = rel.columns
        order = node.args.get("order")
        if order is not None:
            keys = []
            for o in order.expressions:
                e = o.this
                if isinstance(e, exp.Literal) and not e.is_string:
                    idx = int(e.this) - 1
                elif isinstance(e, exp.Column):
                    names = [c.name for c in cols]
                    if e.name not in names:
                        raise SqlError(UNDEFINED_COLUMN, f'column "{e.name}" does not exist')
                    idx = names.index(e.name)
                else:
                    raise unsupported("ORDER BY an expression on a set operation")
                if not 0 <= idx < len(cols):
                    raise SqlError(
                        INVALID_COLUMN_REFERENCE,
                        f"ORDER BY position {idx + 1} is not in select list",
                    )
                explicit_nulls = "NULLS" in o.sql(dialect="postgres").upper()
                nulls_first = bool(o.args.get("nulls_first")) if explicit_nulls else None
                keys.append(
                    SortKey(BColumn(cols[idx].type, idx), bool(o.args.get("desc")), nulls_first)
                )
            rel = SortRel(cols, rel, keys)
        return rel

    def _cast_rel(self, rel: Rel, types: list[SqlType]) -> Rel:
        if all(c.type == t for c, t in zip(rel.columns, types, strict=True)):
            return rel
        exprs = [
            self.exprs.coerce(BColumn(c.type, i), t)
            for i, (c, t) in enumerate(zip(rel.columns, types, strict=True))
        ]
        cols = [OutCol(c.name, t) for c, t in zip(rel.columns, types, strict=True)]
        return ProjectRel(cols, rel, exprs)

    # -- DML -------------------------------------------------------------------------------

    def _dml_table(self, node: exp.Expression) -> tuple[TableDef, str]:
        if not isinstance(node, exp.Table):
            raise unsupported(f"DML target {type(node).__name__}")
        if node.db and node.db != "public" and not temp_tables.is_temp_schema(node.db):
            raise SqlError(UNDEFINED_TABLE, f'relation "{node.db}.{node.name}" does not exist')
        views.refuse_write(node, self.catalog)
        table = self.catalog.table(node.name)
        return table, node.alias or node.name

    def bind_insert(self, node: exp.Insert) -> InsertStmt:
        target = node.this
        columns_nodes = None
        if isinstance(target, exp.Schema):
            columns_nodes = target.expressions
            target = target.this
        table, alias = self._dml_table(target)
        if columns_nodes is not None:
            targets = []
            for c in columns_nodes:
                col = table.column(c.name)
                if col in targets:
                    raise SqlError(DUPLICATE_COLUMN, f'column "{c.name}" specified more than once')
                targets.append(col)
        else:
            targets = list(table.columns)
        source_node = node.expression
        if source_node is None:
            if node.args.get("default"):
                source_node = None
            else:
                raise SqlError(SYNTAX_ERROR, "INSERT has no VALUES or query")
        if source_node is None:
            targets = []
            source: Rel = ValuesRel([], [[]])
        elif isinstance(source_node, exp.Values):
            source = self._bind_values(source_node, None, [c.type for c in targets])
            if len(source.columns) > len(targets):
                raise SqlError(SYNTAX_ERROR, "INSERT has more expressions than target columns")
            if columns_nodes is None:
                targets = targets[: len(source.columns)]
        else:
            source = self.bind_query(source_node, None)
            if len(source.columns) > len(targets):
                raise SqlError(SYNTAX_ERROR, "INSERT has more expressions than target columns")
            if columns_nodes is None:
                targets = targets[: len(source.columns)]
            source = self._assign_rel(source, [c.type for c in targets])
        if (
            columns_nodes is not None
            and source_node is not None
            and len(targets) > len(source.columns)
        ):
            raise SqlError(SYNTAX_ERROR, "INSERT has more target columns than expressions")
        if node.meta.get("overriding") == "user":
            source, targets = _without_identity_targets(source, targets)
        _check_generated_targets(targets, source)
        target_ids = [c.id for c in targets]
        defaults = {
            c.id: self.default_expr(table, c) for c in table.columns if c.id not in target_ids
        }
        # DEFAULT keyword inside VALUES: fill from the column's default.
        if isinstance(source, ValuesRel):
            for row in source.rows:
                for i, e in enumerate(row):
                    if e is _DEFAULT:
                        row[i] = self._values_default(table, targets[i])
        if node.meta.get("overriding") != "system":
            _check_identity_targets(targets, source)
        on_conflict = self._bind_on_conflict(node.args.get("conflict"), table, alias)
        returning, returning_cols = self._bind_returning(node.args.get("returning"), table, alias)
        return InsertStmt(
            table, source, target_ids, defaults, on_conflict, returning, returning_cols
        )

    def _values_default(self, table: TableDef, col: ColumnDef) -> BExpr:
        """``DEFAULT`` in VALUES: the column's default (a serial or identity column's next
        value is drawn by the executor)."""
        seq = sequence_ddl.default_sequence(table, col, self.catalog)
        if seq is not None:
            return BConst(col.type, NextValue(seq))
        return self.default_expr(table, col)

    def default_expr(self, table: TableDef, col: ColumnDef) -> BExpr:
        """The column's default as a bound expression (NULL when it has none)."""
        if col.default is None or sequence_ddl.default_sequence(table, col, self.catalog):
            # A serial column's nextval() is drawn by the executor (serial_sequence).
            return BConst(col.type, None)

        e = self.exprs.bind(parse_one(col.default, read="postgres"), Scope())
        return self.exprs.coerce(e, col.type, assignment=True)

    def _assign_rel(self, rel: Rel, types: list[SqlType]) -> Rel:
        exprs = [
            self.exprs.coerce(BColumn(c.type, i), t, assignment=True)
            for i, (c, t) in enumerate(zip(rel.columns, types, strict=False))
        ]
        cols = [OutCol(c.name, t) for c, t in zip(rel.columns, types, strict=False)]
        return ProjectRel(cols, rel, exprs)

    def _bind_on_conflict(
        self, node: exp.OnConflict | None, table: TableDef, alias: str
    ) -> OnConflict | None:
        if node is None:
            return None
        if node.args.get("constraint") is not None:
            raise unsupported("ON CONFLICT ON CONSTRAINT")
        target = None
        keys = node.args.get("conflict_keys")
        if keys:
            # Columns and expressions (``ON CONFLICT (lower(email))``), matched against the
            # unique keys order aside, as Postgres infers its arbiter index.
            items = [index_expressions.key_item(table, k) for k in keys]
            wanted = key_signature([i.column_id for i in items], [i.expression for i in items])
            where = node.args.get("index_predicate")
            # ON CONFLICT (...) WHERE names a partial index whose predicate's terms it repeats
            # (Postgres proves more, with operator reasoning).
            given = (
                conjuncts(self.exprs.bind_condition(where.this, row_scope(table), "WHERE"))
                if where
                else []
            )
            predicates = self._index_predicates(table) if where else {}
            if wanted == key_signature(table.primary_key, ()):
                target = wanted
            for ix in table.indexes:
                # A partial index only when ``ON CONFLICT (...) WHERE`` implies its predicate,
                # as Postgres infers it (without a WHERE it does not: 42P10).
                if (
                    target is None
                    and ix.unique
                    and key_signature(ix.column_ids, ix.expressions) == wanted
                    and (ix.predicate is None or implies(given, predicates.get(ix.id)))
                ):
                    target = ix.signature
            if target is None:
                raise SqlError(
                    INVALID_COLUMN_REFERENCE,
                    "there is no unique or exclusion constraint matching the ON CONFLICT "
                    "specification",
                )
        action = node.args.get("action")
        action_text = action.name.upper() if action is not None else ""
        if "UPDATE" not in action_text:
            return OnConflict(False, target)
        if target is None:
            raise SqlError(
                SYNTAX_ERROR,
                "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                hint="For example, ON CONFLICT (column_name).",
            )
        cols = [
            OutCol(c.name, c.type, table.oid, i + 1, alias) for i, c in enumerate(table.columns)
        ] + [OutCol(c.name, c.type, relation="excluded") for c in table.columns]
        scope = Scope(cols, None, {alias, "excluded"})
        assignments = self._bind_assignments(node.expressions, table, scope)
        where = node.args.get("where")
        pred = self.exprs.bind_condition(where.this, scope, "WHERE") if where is not None else None
        return OnConflict(True, target, assignments, pred)

    def _bind_assignments(
        self, items: list[exp.Expression], table: TableDef, scope: Scope, target_at: int = 0
    ) -> list[tuple[ColumnDef, BExpr]]:
        """UPDATE's SET list: ``c = v``, ``(a, b) = (x, y)`` / ``ROW(...)`` / ``(SELECT ...)``,
        and assignments to array elements and slices (``a[2] = v``, several per column).
        ``target_at`` is where the target's row starts in the scope's row (MERGE joins the
        source before it)."""
        values: dict[int, BExpr] = {}
        subscripted: set[int] = set()
        # The operators running SET await a row's calls (nextval) before they evaluate it.
        with self.exprs.async_calls(True):
            for eq in items:
                if not isinstance(eq, exp.EQ):
                    raise unsupported(f"assignment {eq.sql(dialect='postgres')}")
                pairs = self._assignment_pairs(eq.this, eq.expression, scope)
                for target, value in pairs:
                    inner = target.this if isinstance(target, exp.Bracket) else target
                    col = table.column(inner.name)
                    if col.id in values and not (
                        isinstance(target, exp.Bracket) and col.id in subscripted
                    ):
                        raise SqlError("42601", f'multiple assignments to same column "{col.name}"')
                    if isinstance(target, exp.Bracket):
                        current = values.get(col.id)
                        if current is None:
                            position = target_at + table.columns.index(col)
                            current = BColumn(col.type, position, col.name)
                        values[col.id] = self._element_assignment(
                            col, current, target, value, scope
                        )
                        subscripted.add(col.id)
                    else:
                        values[col.id] = self._column_assignment(table, col, value, scope)
        by_id = {c.id: c for c in table.columns}
        return [(by_id[cid], value) for cid, value in values.items()]

    def _assignment_pairs(
        self, target: exp.Expression, value: exp.Expression, scope: Scope
    ) -> list[tuple[exp.Expression, exp.Expression | BExpr]]:
        """One SET item as (target column, value) pairs: a multiple-column assignment takes
        its values from a row constructor or, one field each, from a subquery's row."""
        if isinstance(target, exp.Paren):
            targets = [target.this]  # ``(b) = ROW(1)``: a list of one column
        elif isinstance(target, exp.Tuple):
            targets = list(target.expressions)
        else:
            return [(target, value)]
        fields = row_values.row_items(value)
        if fields is not None:
            if len(fields) != len(targets):
                raise SqlError(
                    "42601",
                    "number of columns does not match number of values",
                )
            return list(zip(targets, fields, strict=True))
        if isinstance(value, exp.Subquery | exp.Select):
            row = row_values.row_subquery(self.exprs, value, len(targets), scope)
            return list(zip(targets, row, strict=True))
        raise SqlError(
            FEATURE_NOT_SUPPORTED,  # Postgres's own SQLSTATE for it
            "source for a multiple-column UPDATE item must be a sub-SELECT or ROW() expression",
        )

    def _column_assignment(
        self, table: TableDef, col: ColumnDef, value: exp.Expression | BExpr, scope: Scope
    ) -> BExpr:
        """``col = value``: DEFAULT, or the value cast as an assignment."""
        if isinstance(value, BExpr):
            return self.exprs.coerce(value, col.type, assignment=True)
        if (isinstance(value, exp.Var) and value.name.upper() == "DEFAULT") or (
            isinstance(value, exp.Column)
            and value.name.upper() == "DEFAULT"
            and not value.table
            and scope.lookup(None, "default") is None
        ):
            seq = sequence_ddl.default_sequence(table, col, self.catalog)
            if seq is not None:  # a serial or identity column: its sequence's next value
                drawn = sequence_functions.next_value(self.exprs, seq)
                return self.exprs.coerce(drawn, col.type, assignment=True)
            return self.default_expr(table, col)
        if col.generated is not None:
            raise generated_columns.update_error(col)
        if col.identity == "a":
            raise SqlError(
                GENERATED_ALWAYS,
                f'column "{col.name}" can only be updated to DEFAULT',
                detail=f'Column "{col.name}" is an identity column defined as GENERATED ALWAYS.',
            )
        return self.exprs.coerce(self.exprs.bind(value, scope), col.type, assignment=True)

    def _element_assignment(
        self,
        col: ColumnDef,
        current: BExpr,
        target: exp.Bracket,
        value: exp.Expression | BExpr,
        scope: Scope,
    ) -> BExpr:
        """``col[i] = v`` or ``col[lo:hi] = arr`` applied to ``current`` (the column's value
        or an earlier assignment's result)."""
        if not col.type.array:
            raise SqlError(
                DATATYPE_MISMATCH,
                f"cannot subscript type {col.type} because it does not support subscripting",
            )
        if len(target.expressions) != 1:
            raise unsupported("assignment to an element of a multi-dimensional array")
        sub = target.expressions[0]
        bound = value if isinstance(value, BExpr) else self.exprs.bind(value, scope)

        def index(node: exp.Expression | None) -> BExpr:
            if node is None:
                return BConst(T.INT4, None)
            return self.exprs.coerce(self.exprs.bind(node, scope), T.INT4, assignment=True)

        if isinstance(sub, exp.Slice):
            source = self.exprs.coerce(bound, col.type, assignment=True)
            args = [current, index(sub.this), index(sub.expression), source]
            return BCall(col.type, "array_set_slice", array_assignment.set_slice, args, False)
        element = self.exprs.coerce(bound, col.type.element, assignment=True)
        args = [current, index(sub), element]
        return BCall(col.type, "array_set", array_assignment.set_element, args, strict=False)

    def _index_predicates(self, table: TableDef) -> dict[int, BExpr]:
        """The bound predicates of ``table``'s partial indexes, for the planner (a binder of
        its own: they take no parameters)."""
        if all(ix.predicate is None for ix in table.indexes):
            return {}
        return index_expressions.bind_predicates(Binder(self.catalog, Params()), table)

    def _table_rel(self, cols: list[OutCol], table: TableDef, alias: str) -> TableRel:
        """A read of ``table``, with what the planner matches conjuncts against: its
        expression indexes' keys and its partial indexes' predicates."""
        return TableRel(
            cols,
            table,
            alias,
            index_keys=self._index_keys(table),
            index_predicates=self._index_predicates(table),
        )

    def _index_keys(self, table: TableDef) -> dict[int, list[BExpr | None]]:
        """The bound expressions of ``table``'s expression indexes, for the planner to match
        WHERE conjuncts against (a binder of its own: they take no parameters)."""
        if not any(index_expressions.has_expressions(ix) for ix in table.indexes):
            return {}
        return index_expressions.bind_all(Binder(self.catalog, Params()), table)

    def _target_query(self, node: exp.Expression, table: TableDef, alias: str) -> _Query:
        cols = [
            OutCol(c.name, c.type, table.oid, i + 1, alias) for i, c in enumerate(table.columns)
        ] + _hidden_key(table, alias)
        rel = self._table_rel(cols, table, alias)
        q = _Query(rel, Scope(cols, None, {alias}), [rel])
        from_ = node.args.get("from_") or node.args.get("from")
        using = node.args.get("using")
        items: list[exp.Expression] = []
        if isinstance(from_, exp.From):
            items = [from_.this, *(j.this for j in node.args.get("joins") or [])]
        if isinstance(using, list):
            items.extend(using)
        if items:
            for item in items:
                other = self._bind_from_item(item, None)
                q = self._join(q, other, exp.Join(this=item), None)
        where = node.args.get("where")
        if where is not None:
            condition = decorrelate.where_exists_as_in(where.this)
            pred = self.exprs.bind_condition(condition, q.scope, "WHERE")
            q.rel = self._apply_where(q, pred)
        return q

    def bind_update(self, node: exp.Update) -> UpdateStmt:
        table, alias = self._dml_table(node.this)
        q = self._target_query(node, table, alias)
        assignments = self._bind_assignments(node.expressions, table, q.scope)
        returning, returning_cols = self._bind_returning(
            node.args.get("returning"), table, alias, q.scope
        )
        return UpdateStmt(table, q.rel, assignments, returning, returning_cols)

    def bind_delete(self, node: exp.Delete) -> DeleteStmt:
        table, alias = self._dml_table(node.this)
        q = self._target_query(node, table, alias)
        returning, returning_cols = self._bind_returning(
            node.args.get("returning"), table, alias, q.scope
        )
        return DeleteStmt(table, q.rel, returning, returning_cols)

    def _bind_returning(
        self, node: exp.Returning | None, table: TableDef, alias: str, scope: Scope | None = None
    ) -> tuple[list[BExpr] | None, list[OutCol] | None]:
        """RETURNING expressions over the table's (new) row; for UPDATE and DELETE over
        ``scope``, their target query's: the row, then the columns of the FROM / USING
        tables (``RETURNING *`` shows those too, as in Postgres)."""
        if node is None:
            return None, None
        if scope is None:
            cols = [
                OutCol(c.name, c.type, table.oid, i + 1, alias) for i, c in enumerate(table.columns)
            ]
            scope = Scope(cols, None, {alias})
        items = self._expand_stars(node.expressions, scope)
        exprs = []
        out = []
        for item, name in items:
            e = self.exprs.bind(item, scope)
            exprs.append(e)
            out.append(self._out_col(item, name, e, scope))
        return exprs, out


class _IndexRef(exp.Expression):
    """A select item that is input column ``index`` (from ``*`` expansion)."""

    arg_types = {"this": False}

    def __init__(self, index: int) -> None:
        super().__init__()
        # Not ``index``: sqlglot's Expression keeps its position in the parent there.
        self.column_index = index


def _without_identity_targets(source: Rel, targets: list[ColumnDef]) -> tuple[Rel, list[ColumnDef]]:
    """OVERRIDING USER VALUE: the values given for identity columns are ignored, so those
    columns are left out and draw their sequences' next values as unnamed columns do (VALUES
    rows lose them before any DEFAULT in them would draw a value)."""
    keep = [i for i, c in enumerate(targets) if c.identity is None]
    if len(keep) == len(targets):
        return source, targets
    if isinstance(source, ValuesRel):
        rows = [[row[i] for i in keep] for row in source.rows]
        source = ValuesRel([source.columns[i] for i in keep], rows)
    else:
        exprs: list[BExpr] = [BColumn(source.columns[i].type, i) for i in keep]
        source = ProjectRel([source.columns[i] for i in keep], source, exprs)
    return source, [targets[i] for i in keep]


def _check_generated_targets(targets: list[ColumnDef], source: Rel) -> None:
    """428C9 for a value given to a generated column: only ``DEFAULT`` in VALUES is one
    (checked before DEFAULT is replaced by the column's default, a NULL like any other)."""
    for i, col in enumerate(targets):
        if col.generated is None:
            continue
        if not isinstance(source, ValuesRel) or any(row[i] is not _DEFAULT for row in source.rows):
            raise generated_columns.insert_error(col)


def _check_identity_targets(targets: list[ColumnDef], source: Rel) -> None:
    """428C9 for a value given to a GENERATED ALWAYS identity column (DEFAULT is allowed)."""
    for i, col in enumerate(targets):
        if col.identity != "a":
            continue
        given = not isinstance(source, ValuesRel) or any(
            not (isinstance(row[i], BConst) and isinstance(row[i].value, NextValue))
            for row in source.rows
        )
        if given:
            raise SqlError(
                GENERATED_ALWAYS,
                f'cannot insert a non-DEFAULT value into column "{col.name}"',
                detail=f'Column "{col.name}" is an identity column defined as GENERATED ALWAYS.',
                hint="Use OVERRIDING SYSTEM VALUE to override.",
            )


GENERATED_ALWAYS = generated_columns.GENERATED_ALWAYS

_DEFAULT = BConst(T.UNKNOWN, None)
"""Marks a DEFAULT keyword inside VALUES until the target column is known."""


def _hidden_key(table: TableDef, alias: str) -> list[OutCol]:
    """A table without a primary key carries its hidden row id as a last, hidden column
    (like Postgres's ctid), so UPDATE and DELETE can address its rows."""
    if table.primary_key:
        return []
    return [OutCol("ctid", T.BYTEA, relation=alias, hidden=True)]


def _check_select_locking(lock: exp.Lock, features: list[tuple[str, bool]]) -> None:
    """0A000 for FOR UPDATE / FOR SHARE on a SELECT whose rows are not table rows (the first of
    the ``features`` it has, in Postgres's order of checks)."""
    for what, present in features:
        if present:
            key = " KEY" if lock.args.get("key") else ""
            if lock.args.get("update") is False:
                mode = f"FOR{key} SHARE"
            else:
                mode = "FOR NO KEY UPDATE" if key else "FOR UPDATE"
            raise SqlError(FEATURE_NOT_SUPPORTED, f"{mode} is not allowed with {what}")


def _grouped_source(rel: Rel, agg_ctx: AggregateContext, clause: bool) -> Rel:
    """The rows a grouped SELECT aggregates: none of ``rel``'s when the grouping is degenerate
    (a HAVING or GROUP BY ``clause``, but no aggregate and no grouping column), where Postgres
    yields its row(s) without scanning (so WHERE is never evaluated)."""
    if agg_ctx.groups or agg_ctx.aggs or not clause:
        return rel
    return ValuesRel([], [[]])


def _precompute_window_subqueries(rel: Rel, windows: WindowContext) -> Rel:
    """``rel`` with the window arguments, FILTERs and PARTITION BY / ORDER BY keys that hold a
    subquery (or a call that waits) computed as extra columns by a projection, which runs the
    subqueries: the window operator evaluates plain expressions only."""
    width = len(rel.columns)
    extra: list[BExpr] = []

    def column(e: BExpr) -> BExpr:
        if not any(isinstance(n, BSubquery | BAsyncCall) for n in walk(e)):
            return e
        extra.append(e)
        return BColumn(e.type, width + len(extra) - 1)

    for spec in windows.specs:
        spec.partition = [column(e) for e in spec.partition]
        spec.order = [SortKey(column(k.expr), k.descending, k.nulls_first) for k in spec.order]
    for call in windows.calls:
        call.args = [column(a) for a in call.args]
        if call.filter is not None:
            call.filter = column(call.filter)
    if not extra:
        return rel
    cols = list(rel.columns) + [OutCol("?window?", e.type, hidden=True) for e in extra]
    passed: list[BExpr] = [BColumn(c.type, i) for i, c in enumerate(rel.columns)]
    return ProjectRel(cols, rel, passed + extra)


def _among(key: BExpr, keys: list[BExpr], project_exprs: list[BExpr]) -> bool:
    """Whether the ORDER BY / DISTINCT ON key ``key`` (a reference to an output column) is one
    of ``keys``: the same column, or a column with the same expression."""

    def target(e: BExpr) -> BExpr:
        return project_exprs[e.index] if isinstance(e, BColumn) else e

    for k in keys:
        # Two references to one output column match even when its expression is volatile.
        if isinstance(key, BColumn) and isinstance(k, BColumn) and key.index == k.index:
            return True
        if same_expression(target(key), target(k)):
            return True
    return False


def _check_distinct_on(on: list[BExpr], keys: list[SortKey], project_exprs: list[BExpr]) -> None:
    """Postgres: the DISTINCT ON expressions must be the leading ORDER BY expressions."""
    leading = 0
    while leading < len(keys) and _among(keys[leading].expr, on, project_exprs):
        leading += 1
    if leading == len(keys):
        return
    covered = [k.expr for k in keys[:leading]]
    if all(_among(o, covered, project_exprs) for o in on):
        return
    raise SqlError(
        INVALID_COLUMN_REFERENCE,
        "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
    )


def _joined_star(left: Scope, right: Scope, nleft: int) -> list[int]:
    """What ``*`` expands to over a join of ``left`` and ``right`` (right offset by nleft)."""
    return left.star(None) + [nleft + i for i in right.star(None)]


def _lateral_item(node: exp.Expression) -> tuple[exp.Expression, bool]:
    """A FROM item after the first, and whether it may see the items before it: marked
    LATERAL, or a function call (``generate_series(1, t.n)``, ``unnest(t.arr)``)."""
    if isinstance(node, exp.Lateral):
        return _unwrap_lateral(node), True
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Func | exp.Anonymous):
        return node, True
    return node, isinstance(node, exp.Unnest)


def _unwrap_lateral(node: exp.Lateral) -> exp.Expression:
    """The FROM item under LATERAL, carrying the alias (and WITH ORDINALITY) that sqlglot
    puts on the LATERAL node, in the shape the item has without it."""
    inner = node.this.copy()
    alias = node.args.get("alias")
    if isinstance(inner, exp.Subquery | exp.Unnest):
        if alias is not None:
            inner.set("alias", alias.copy())
        return inner
    if isinstance(inner, exp.Func):
        table = exp.Table(this=inner, alias=alias.copy() if alias is not None else None)
        if node.args.get("ordinality"):
            table.set("ordinality", True)
        return table
    raise SqlError(SYNTAX_ERROR, 'syntax error at or near "LATERAL"')


def _hiding(outer: Scope | None, names: set[str]) -> Scope:
    """``outer`` for a FROM item that is not LATERAL: the items before it (``names``) exist
    but cannot be referenced. A copy at the same level (outer references keep their levels);
    at the top, an empty scope that resolves nothing."""
    scope = copy.copy(outer) if outer is not None else Scope()
    scope.unreachable = scope.unreachable | names
    return scope


def _column_aliases(node: exp.Expression) -> list[str]:
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias):
        return [c.name for c in alias.columns]
    return []


def _is_join_tree(node: exp.Expression) -> bool:
    """Whether a FROM item is a join nested in it (a Table carrying joins), possibly in
    parentheses (a Subquery around one, or around a plain table: ``(b)``)."""
    if isinstance(node, exp.Table):
        return bool(node.args.get("joins"))
    if isinstance(node, exp.Subquery):
        inner = node.this
        return isinstance(inner, exp.Table) or _is_join_tree(inner)
    return False


def _table_offsets(rel: Rel) -> dict[int, int]:
    """id(TableRel) -> offset of its columns in ``rel``'s row, for tables reachable through
    joins only."""
    out: dict[int, int] = {}

    def visit(r: Rel, offset: int) -> None:
        if isinstance(r, TableRel):
            out[id(r)] = offset
        elif isinstance(r, JoinRel):
            visit(r.left, offset)
            visit(r.right, offset + len(r.left.columns))

    visit(rel, 0)
    return out


def _single_table(
    e: BExpr, offsets: dict[int, int], tables: list[TableRel]
) -> tuple[TableRel, int] | None:
    indexes = set()
    for node in walk(e):
        # An outer reference (a correlated or LATERAL subquery's ``i.g = g.id``) is constant
        # for one run of the scan: the access path can key on it.
        if isinstance(node, BSubquery | BAsyncCall):
            return None
        if node.__class__.__name__ == "BContextCall":
            return None
        if isinstance(node, BColumn):
            indexes.add(node.index)
    if not indexes:
        return None
    for t in tables:
        off = offsets.get(id(t))
        if off is None:
            continue
        if all(off <= i < off + len(t.columns) for i in indexes):
            return t, off
    return None


def _plain_columns(e: BExpr) -> set[int] | None:
    """The columns ``e`` reads, or None if it also reads an outer query, a subquery or the
    session (those stay in the WHERE filter)."""
    indexes = set()
    for node in walk(e):
        if isinstance(node, BOuter | BSubquery | BAsyncCall | BContextCall):
            return None
        if isinstance(node, BColumn):
            indexes.add(node.index)
    return indexes or None


def _join_spanning(rel: Rel, offset: int, columns: set[int]) -> tuple[JoinRel, int] | None:
    """The deepest inner join under ``rel`` (whose columns start at ``offset``) that reads
    ``columns`` on both of its sides, reached through inner joins and the preserved sides of
    outer joins; with its offset."""
    if not isinstance(rel, JoinRel):
        return None
    nleft = len(rel.left.columns)
    if all(offset <= i < offset + nleft for i in columns):
        if rel.kind in (JoinKind.INNER, JoinKind.CROSS, JoinKind.LEFT):
            return _join_spanning(rel.left, offset, columns)
        return None
    end = offset + len(rel.left.columns) + len(rel.right.columns)
    if all(offset + nleft <= i < end for i in columns):
        if rel.kind in (JoinKind.INNER, JoinKind.CROSS, JoinKind.RIGHT):
            return _join_spanning(rel.right, offset + nleft, columns)
        return None
    if rel.kind in (JoinKind.INNER, JoinKind.CROSS) and all(offset <= i < end for i in columns):
        return rel, offset
    return None


def _source_of(e: BExpr, agg_ctx: AggregateContext | None) -> BExpr:
    """A select item's expression over the query's input row: in a grouped query, a column
    of the aggregate's output stands for its group's expression (for the RowDescription's
    source column); an aggregate's result has none."""
    if agg_ctx is None or not isinstance(e, BColumn):
        return e
    if e.index < len(agg_ctx.groups):
        return agg_ctx.groups[e.index]
    return BConst(e.type, None)


def _shift(e: BExpr, delta: int) -> BExpr:
    if delta == 0:
        return e
    for node in walk(e):
        if isinstance(node, BColumn):
            node.index += delta
    return e


def _equi_keys(cond: BExpr, nleft: int) -> list[tuple[BExpr, BExpr]]:
    """``left_expr = right_expr`` conjuncts of a join condition, for a hash join."""
    keys = []
    for c in conjuncts(cond):
        if not (isinstance(c, BCall) and c.name == "=" and len(c.args) == 2):
            continue
        a, b = c.args
        sa, sb = _side(a, nleft), _side(b, nleft)
        if sa == "L" and sb == "R":
            keys.append((a, _shift_copy(b, -nleft)))
        elif sa == "R" and sb == "L":
            keys.append((b, _shift_copy(a, -nleft)))
    return keys


def _side(e: BExpr, nleft: int) -> str | None:
    sides = set()
    for node in walk(e):
        if isinstance(node, BOuter | BSubquery | BAsyncCall):
            return None
        if isinstance(node, BColumn):
            sides.add("L" if node.index < nleft else "R")
    return sides.pop() if len(sides) == 1 else None


def _shift_copy(e: BExpr, delta: int) -> BExpr:
    import copy

    clone = copy.deepcopy(e)
    return _shift(clone, delta)


__all__ = ["Binder"]


def _lock_clause(lock: exp.Lock) -> LockClause:
    """A FOR UPDATE / FOR SHARE clause (sqlglot: update=False is FOR [KEY] SHARE, key=True
    says KEY (FOR NO KEY UPDATE, FOR KEY SHARE); wait=True is NOWAIT, wait=False SKIP
    LOCKED)."""
    wait = lock.args.get("wait")
    mode = LockWait.WAIT
    if wait is True:
        mode = LockWait.NOWAIT
    elif wait is False:
        mode = LockWait.SKIP_LOCKED
    key = bool(lock.args.get("key"))
    if lock.args.get("update") is False:
        return LockClause(mode, RowLockMode.KEY_SHARE if key else RowLockMode.SHARE)
    return LockClause(mode, RowLockMode.NO_KEY_UPDATE if key else RowLockMode.UPDATE)


_STRICTNESS = [LockWait.WAIT, LockWait.SKIP_LOCKED, LockWait.NOWAIT]
"""A table named by several FOR UPDATE clauses takes the last of these among them (Postgres:
NOWAIT over SKIP LOCKED over waiting)."""
