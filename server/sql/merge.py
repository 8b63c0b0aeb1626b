"""Binding MERGE (Postgres 15): ``MERGE INTO target [AS t] USING source [AS s] ON cond`` and its
``WHEN [NOT] MATCHED [AND cond] THEN UPDATE SET ... | DELETE | INSERT ... | DO NOTHING``
clauses.

The statement becomes one relation, the source LEFT JOIN the target on the ON condition (so the
planner's join rules apply: a key equality makes a lookup or hash join), plus the WHEN clauses
as actions over the joined row. The source's columns come first, so a NOT MATCHED clause, which
may read the source only, is bound over the source's scope and reads the same positions of the
joined row. The executor is :mod:`percolator.server.planner.merge`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from percolator.server.sql import generated_columns
from percolator.server.sql.binder import (
    GENERATED_ALWAYS,
    Binder,
    _hidden_key,
    _Query,
)
from percolator.server.sql.bound import BExpr, OutCol, Rel, TableRel
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.errors import (
    DUPLICATE_COLUMN,
    FEATURE_NOT_SUPPORTED,
    SYNTAX_ERROR,
    SqlError,
    unsupported,
)
from percolator.server.sql.scope import Scope


@dataclass(eq=False)
class MergeAction:
    """One WHEN clause."""

    matched: bool
    kind: str
    """update, delete, insert or nothing."""
    condition: BExpr | None = None
    """The clause's AND condition over the joined row (None: always)."""
    assignments: list[tuple[ColumnDef, BExpr]] = field(default_factory=list)
    """UPDATE SET: column and new value over the joined row."""
    target_ids: list[int] = field(default_factory=list)
    """INSERT: the columns given values, in ``values`` order."""
    values: list[BExpr] = field(default_factory=list)
    """INSERT: a value per target column over the source row (a ``NextValue`` constant for
    DEFAULT on a serial or identity column)."""
    defaults: dict[int, BExpr] = field(default_factory=dict)
    """INSERT: column id -> default for the columns not given (serial ones drawn by the
    executor)."""


@dataclass(eq=False)
class MergeStmt:
    """A bound MERGE."""

    table: TableDef
    source: Rel
    """The source LEFT JOIN the target: the source's columns, then the target's full row (its
    hidden row id last, for a table without a primary key)."""
    source_width: int
    actions: list[MergeAction]


def bind_merge(binder: Binder, node: exp.Merge) -> MergeStmt:
    """Bind a MERGE statement."""
    if node.args.get("returning") is not None:
        # MERGE ... RETURNING came with Postgres 17; Postgres 15's grammar has no such clause.
        raise SqlError(SYNTAX_ERROR, 'syntax error at or near "RETURNING"')
    if node.args.get("using_cond"):
        raise SqlError(SYNTAX_ERROR, 'syntax error at or near "USING"')
    if node.args.get("with_") is not None or node.args.get("with") is not None:
        raise unsupported("WITH ... MERGE")
    target_node = node.this
    if (
        isinstance(target_node, exp.Table)
        and target_node.db in ("", "public")
        and target_node.name in binder.catalog.views
    ):
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            f'cannot execute MERGE on relation "{target_node.name}"',
            detail="This operation is not supported for views.",
        )
    table, alias = binder._dml_table(target_node)
    overriding: str | None = node.meta.get("overriding")  # "system", "user" or None
    cols = [
        OutCol(c.name, c.type, table.oid, i + 1, alias) for i, c in enumerate(table.columns)
    ] + _hidden_key(table, alias)
    target_rel = TableRel(cols, table, alias)
    target = _Query(target_rel, Scope(cols, None, {alias}), [target_rel])
    source_node = node.args.get("using")
    if source_node is None or node.args.get("on") is None:
        raise SqlError(SYNTAX_ERROR, "MERGE needs USING and ON")
    source = binder._bind_from_item(source_node, None)
    source_width = len(source.scope.columns)
    join = exp.Join(this=node.this.copy(), side="LEFT", on=node.args["on"])
    joined = binder._join(source, target, join, None)
    # A NOT MATCHED clause sees the source only; Postgres names the target in its error.
    source_scope = Scope(
        list(source.scope.columns),
        None,
        set(source.scope.relations),
        source.scope.star_order,
        {alias},
    )
    whens = node.args.get("whens")
    actions = [
        _bind_when(binder, w, table, joined.scope, source_scope, overriding)
        for w in (whens.expressions if whens is not None else [])
    ]
    return MergeStmt(table, joined.rel, source_width, actions)


def _bind_when(
    binder: Binder,
    when: exp.When,
    table: TableDef,
    joined: Scope,
    source: Scope,
    overriding: str | None,
) -> MergeAction:
    matched = bool(when.args.get("matched"))
    if when.args.get("source"):
        # WHEN NOT MATCHED BY SOURCE is Postgres 17's.
        raise SqlError(SYNTAX_ERROR, 'syntax error at or near "BY"')
    scope = joined if matched else source
    cond_node = when.args.get("condition")
    condition = (
        binder.exprs.bind_condition(cond_node, scope, "WHEN") if cond_node is not None else None
    )
    then = when.args.get("then")
    if isinstance(then, exp.Var):
        word = then.name.upper()
        if word == "DO NOTHING":
            return MergeAction(matched, "nothing", condition)
        if word == "DELETE" and matched:
            return MergeAction(matched, "delete", condition)
        raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{then.name.split()[0]}"')
    if isinstance(then, exp.Update) and matched:
        width = len(source.columns)
        assignments = binder._bind_assignments(then.expressions, table, joined, width)
        return MergeAction(matched, "update", condition, assignments=assignments)
    if isinstance(then, exp.Insert) and not matched:
        return _bind_insert(
            binder, then, table, source, condition, overriding == "system", overriding == "user"
        )
    word = "UPDATE" if isinstance(then, exp.Update) else "INSERT"
    if isinstance(then, exp.Update | exp.Insert):
        # UPDATE or DELETE under NOT MATCHED, INSERT under MATCHED: Postgres's grammar error.
        raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{word}"')
    raise unsupported(f"MERGE action {then.sql(dialect='postgres') if then else ''}")


def _is_default_values(node: exp.Insert) -> bool:
    """sqlglot reads ``INSERT DEFAULT VALUES`` as a column list holding one column DEFAULT."""
    cols = node.this
    return (
        node.expression is None
        and isinstance(cols, exp.Tuple)
        and len(cols.expressions) == 1
        and isinstance(cols.expressions[0], exp.Column)
        and cols.expressions[0].name.upper() == "DEFAULT"
        and not cols.expressions[0].table
    )


def _bind_insert(
    binder: Binder,
    node: exp.Insert,
    table: TableDef,
    scope: Scope,
    condition: BExpr | None,
    overriding: bool,
    user_value: bool = False,
) -> MergeAction:
    """``INSERT [(columns)] [OVERRIDING SYSTEM VALUE] VALUES (...)`` or ``INSERT DEFAULT
    VALUES``: values over the source row, defaults for the other columns."""
    targets: list[ColumnDef] = []
    value_nodes: list[exp.Expression] = []
    if not _is_default_values(node):
        cols = node.this
        if isinstance(cols, exp.Tuple | exp.Schema):
            for c in cols.expressions:
                col = table.column(c.name)
                if col in targets:
                    raise SqlError(DUPLICATE_COLUMN, f'column "{c.name}" specified more than once')
                targets.append(col)
        values = node.expression
        if values is None:
            raise SqlError(SYNTAX_ERROR, "syntax error at end of input")
        value_nodes = list(values.expressions) if isinstance(values, exp.Tuple) else [values]
        if cols is None:
            if len(value_nodes) > len(table.columns):
                raise SqlError(SYNTAX_ERROR, "INSERT has more expressions than target columns")
            targets = list(table.columns[: len(value_nodes)])
        elif len(value_nodes) > len(targets):
            raise SqlError(SYNTAX_ERROR, "INSERT has more expressions than target columns")
        elif len(value_nodes) < len(targets):
            raise SqlError(SYNTAX_ERROR, "INSERT has more target columns than expressions")
    values_bound: list[BExpr] = []
    for col, v in zip(targets, value_nodes, strict=True):
        if isinstance(v, exp.Var) and v.name.upper() == "DEFAULT":
            values_bound.append(binder._values_default(table, col))
            continue
        if col.generated is not None:
            raise generated_columns.insert_error(col)
        if col.identity is not None and user_value:
            # OVERRIDING USER VALUE: the given value is ignored for the sequence's next one.
            values_bound.append(binder._values_default(table, col))
            continue
        if col.identity == "a" and not overriding:
            raise SqlError(
                GENERATED_ALWAYS,
                f'cannot insert a non-DEFAULT value into column "{col.name}"',
                detail=f'Column "{col.name}" is an identity column defined as GENERATED ALWAYS.',
                hint="Use OVERRIDING SYSTEM VALUE to override.",
            )
        e = binder._bind_allowing_async(v, scope)
        values_bound.append(binder.exprs.coerce(e, col.type, assignment=True))
    given = {c.id for c in targets}
    defaults = {c.id: binder.default_expr(table, c) for c in table.columns if c.id not in given}
    return MergeAction(
        False,
        "insert",
        condition,
        target_ids=[c.id for c in targets],
        values=values_bound,
        defaults=defaults,
    )


__all__ = ["MergeAction", "MergeStmt", "bind_merge"]
