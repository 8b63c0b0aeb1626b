"""Executing MERGE: the joined rows of the source and the target (a LEFT JOIN planned as any
join), the WHEN clauses tried in order on each, and the chosen actions written through the
table writer of INSERT, UPDATE and DELETE (so constraints, indexes, defaults and foreign keys
apply as there).

Every joined row is read before anything is written, so the join sees the snapshot (and the
transaction's earlier statements), never the statement's own changes, as in Postgres. A target
row that a second source row would update or delete again is Postgres's 21000.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.planner.dml import TableWriter, delete_keys, insert_rows, update_keys
from percolator.server.planner.physical import Node
from percolator.server.planner.row_codec import Row
from percolator.server.planner.row_locking import lock_for_write
from percolator.server.sql import sequence_ddl
from percolator.server.sql.bound import BConst, NextValue
from percolator.server.sql.catalog import Catalog
from percolator.server.sql.errors import CARDINALITY_VIOLATION, SqlError
from percolator.server.sql.merge import MergeAction, MergeStmt


@dataclass
class CompiledAction:
    """A WHEN clause ready to run: its condition, and what it computes over the joined row."""

    matched: bool
    kind: str
    condition: Compiled | None
    condition_runners: list[Any]
    assignments: list[tuple[int, Compiled]]
    """UPDATE: (position in the row, new value); INSERT: (position, value) per given column."""
    runners: list[Any]
    """Subqueries and round-trip calls (nextval) of the action's expressions."""
    defaults: list[tuple[int, str, Any]]
    """INSERT: (position, "serial" and its sequence | "expr" and its compiled default)."""


@dataclass
class MergePlan:
    """What executing a MERGE needs besides the table writer."""

    node: Node
    source_width: int
    target_width: int
    """The target's columns, plus its hidden row id when it has no primary key."""
    matched_at: int
    """A position of the joined row that is never NULL when a target row matched (a primary
    key column, or the hidden row id)."""
    actions: list[CompiledAction]


def plan_merge(planner: Any, stmt: MergeStmt, catalog: Catalog) -> MergePlan:
    """The physical plan of a bound MERGE (``planner``: the engine's Planner)."""
    table = stmt.table
    node = planner.plan(stmt.source)
    width = len(table.columns) + (0 if table.primary_key else 1)
    if table.primary_key:
        matched_at = stmt.source_width + table.position(table.primary_key[0])
    else:
        matched_at = stmt.source_width + len(table.columns)
    actions = [_compile_action(planner, a, stmt, catalog) for a in stmt.actions]
    return MergePlan(node, stmt.source_width, width, matched_at, actions)


def _compile_action(
    planner: Any, action: MergeAction, stmt: MergeStmt, catalog: Catalog
) -> CompiledAction:
    table = stmt.table
    cond = action.condition
    if action.kind == "update":
        exprs = [e for _, e in action.assignments]
        assignments = [(table.position(c.id), compile_expr(e)) for c, e in action.assignments]
    else:
        exprs = list(action.values)
        assignments = [
            (table.position(cid), compile_expr(e))
            for cid, e in zip(action.target_ids, action.values, strict=True)
        ]
    defaults: list[tuple[int, str, Any]] = []
    for cid, e in action.defaults.items():
        col = table.column_by_id(cid)
        pos = table.position(cid)
        if (seq := sequence_ddl.default_sequence(table, col, catalog)) is not None:
            defaults.append((pos, "serial", seq))
        elif not (isinstance(e, BConst) and e.value is None):
            defaults.append((pos, "expr", compile_expr(e)))
    return CompiledAction(
        action.matched,
        action.kind,
        compile_expr(cond) if cond is not None else None,
        planner.runners([cond]) if cond is not None else [],
        assignments,
        planner.runners(exprs),
        defaults,
    )


async def run_merge(plan: MergePlan, writer: TableWriter, ctx: Any) -> int:
    """Run a MERGE; returns the number of rows inserted, updated and deleted."""
    codec = writer.codec
    start, end = plan.source_width, plan.source_width + plan.target_width
    ncols = len(writer.table.columns)
    touched: set[bytes] = set()
    updates: list[tuple[bytes, Row, Row]] = []
    deletes: dict[bytes, Row] = {}
    inserts: list[Row] = []
    async for full in plan.node.rows(ctx):
        matched = full[plan.matched_at] is not None
        action = await _first_action(plan.actions, matched, full, ctx)
        if action is None or action.kind == "nothing":
            continue
        for r in action.runners:
            await r.prepare(full, ctx)
        if action.kind == "insert":
            inserts.append(await _new_row(action, full, ctx, ncols))
            continue
        old = full[start:end]
        key = codec.key_of_stored(old)
        if key in touched:
            raise SqlError(
                CARDINALITY_VIOLATION,
                "MERGE command cannot affect row a second time",
                hint="Ensure that not more than one source row matches any one target row.",
            )
        touched.add(key)
        if action.kind == "delete":
            deletes[key] = old
            continue
        new = list(old)
        for pos, fn in action.assignments:
            new[pos] = fn(full, ctx)
        updates.append((key, old, writer.generate(tuple(new), ctx)))
    await lock_for_write(
        ctx, codec, sorted(touched), referenced=bool(writer.foreign_keys.referrers)
    )
    # Deletes first: a row a source row deletes frees its key for one another inserts.
    # Counted as written: a BEFORE trigger may skip rows.
    deleted = len(await delete_keys(writer, ctx, deletes)) if deletes else 0
    updated = len(await update_keys(writer, ctx, updates)) if updates else 0
    inserted = (await insert_rows(writer, ctx, inserts)).count if inserts else 0
    return deleted + updated + inserted


async def _first_action(
    actions: list[CompiledAction], matched: bool, row: Row, ctx: Any
) -> CompiledAction | None:
    """The first WHEN clause of the row's kind whose condition holds (None: no action)."""
    for action in actions:
        if action.matched != matched:
            continue
        if action.condition is None:
            return action
        for r in action.condition_runners:
            await r.prepare(row, ctx)
        if action.condition(row, ctx) is True:
            return action
    return None


async def _new_row(action: CompiledAction, full: Row, ctx: Any, width: int) -> Row:
    """The row a NOT MATCHED ... INSERT adds: its values, the other columns' defaults."""
    row: list[object] = [None] * width
    for pos, fn in action.assignments:
        v = fn(full, ctx)
        if isinstance(v, NextValue):  # DEFAULT for a serial or identity column
            v = await ctx.sequences.nextval(v.sequence)
        row[pos] = v
    for pos, kind, f in action.defaults:
        row[pos] = await ctx.sequences.nextval(f) if kind == "serial" else f((), ctx)
    return tuple(row)


def explain_merge(table_name: str, lines: list[str]) -> list[str]:
    """EXPLAIN MERGE: the join under a Merge node, as Postgres shows it."""
    head = f"Merge on {table_name}"
    return [head, "  ->  " + lines[0], *("      " + line for line in lines[1:])]


__all__ = ["MergePlan", "explain_merge", "plan_merge", "run_merge"]
