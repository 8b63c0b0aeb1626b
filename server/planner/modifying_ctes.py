"""Running a statement with data-modifying CTEs (bound by server/sql/modifying_ctes.py).

``WITH d AS (DELETE FROM t ... RETURNING *) INSERT INTO done SELECT * FROM d``: each part (a
data-modifying CTE, or the main statement) is planned as it would be alone and runs through
the same DML execution, so row locks, constraints, indexes, foreign keys and observers work as
they do outside WITH. The CTEs run first, in the order written, each once and to completion
(whatever the rest of the statement reads of it: a LIMIT outside does not stop it), their
RETURNING rows left in the statement's context for the parts after them; then the main
statement, whose result (and command tag) is the statement's; then the foreign-key checks of
every part, as Postgres makes them at the end of the statement.

Postgres runs every part on one snapshot: no part sees another's changes in the tables, only
through its RETURNING rows. A transaction here reads its own buffered writes, so the parts'
reads are made with the statement's own writes hidden (:class:`OwnWrites`): the rows an
INSERT inserts, an UPDATE or a DELETE changes, or the main query returns are read as the
statement found the tables. The writes themselves, and the constraint, index and foreign key
checks that go with them, see everything written so far, as Postgres's unique checks see a
sibling's rows (two parts inserting one key: 23505). A row that an earlier part changed is
left alone by a later UPDATE or DELETE, as Postgres leaves a row already changed by the same
command (which part wins is not something to rely on, in Postgres either).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from percolator.server.planner import foreign_keys
from percolator.server.planner.physical import Node
from percolator.server.planner.row_codec import Row
from percolator.server.storage.cells import CellKey, Mutation, WriteKind
from percolator.server.txn.transaction import Savepoint, Transaction, TransactionState

RunPart = Callable[[Any], Awaitable[Any]]
"""Runs one part's plan (the session's ``Plan``) in the statement's context: its execution,
with a query's rows already read to the end."""
Drain = Callable[[Any], Awaitable[list[Row]]]
"""The rows of a part's execution (a CTE's RETURNING rows)."""


@dataclass
class CtePart:
    """A data-modifying CTE's plan (the session's ``Plan``), and the slot of the statement's
    context where its RETURNING rows go."""

    name: str
    slot: int
    plan: Any


@dataclass
class ModifyingWith:
    """The plan of a statement with data-modifying CTEs (the session's ``Plan.statement``)."""

    ctes: list[CtePart]
    """In the order written, which is the order they run in."""
    main: Any
    """The main statement's plan."""


@dataclass
class Materialized(Node):
    """A part's source rows, read before it writes (with the statement's writes hidden)."""

    found: list[Row]
    source: Node
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        for row in self.found:
            yield row

    def explain(self) -> list[str]:
        return self.source.explain()


class OwnWrites:
    """The transaction's own writes as the statement found them, to hide what the statement
    writes from its reads. The transaction layer's public savepoints do it: hiding sets the
    write buffer back to the statement's start, keeping the row locks held now; showing
    again brings back what was hidden, with anything buffered meanwhile. Each costs a copy of
    the write buffer, and no round trip."""

    def __init__(self, txn: Transaction) -> None:
        self.txn = txn
        self.base = txn.savepoint()

    def changed_rows(self) -> set[tuple[str, bytes]]:
        """(storage, row key) of the rows the statement has written so far."""
        base = self.base.writes
        return {
            (k.table, k.row)
            for k, m in self.txn.savepoint().writes.items()
            if m.kind != WriteKind.LOCK and base.get(k) != m
        }

    @asynccontextmanager
    async def hidden(self) -> AsyncIterator[None]:
        """Reads inside see the transaction's writes as they were when the statement began."""
        txn = self.txn
        now = txn.savepoint()
        if now.writes == self.base.writes:
            yield
            return
        await txn.rollback_to(Savepoint(self.base.writes, self.base.size, now.held))
        try:
            yield
        finally:
            # Unless the transaction ended meanwhile (then the error that ended it stands).
            if txn.state is TransactionState.ACTIVE:
                after = txn.savepoint()
                writes, size = _merged(self.base, now, after)
                await txn.rollback_to(Savepoint(writes, size, after.held))


def _merged(
    base: Savepoint, now: Savepoint, after: Savepoint
) -> tuple[dict[CellKey, Mutation], int]:
    """The write buffer ``now`` with what was buffered while it was hidden (``after`` differs
    from ``base``) where the statement had not written the cell (a row lock's LOCK record
    taken by a read: it must not replace the statement's write)."""
    writes = dict(now.writes)
    added = False
    for key, m in after.writes.items():
        was = base.writes.get(key)
        if m != was and now.writes.get(key) == was:
            writes[key] = m
            added = True
    # The size only bounds the transaction: the cells buffered meanwhile counted as new.
    size = now.size + max(0, after.size - base.size) if added else now.size
    return writes, size


async def run(stmt: ModifyingWith, ctx: Any, run_part: RunPart, drain: Drain) -> Any:
    """Run the CTEs in order, then the main statement, then the foreign-key checks of all of
    them; the main statement's execution."""
    own = OwnWrites(ctx.txn)
    outer = ctx.deferred_constraints
    checks = foreign_keys.StatementEnd(outer=outer)
    ctx.deferred_constraints = checks
    try:
        for cte in stmt.ctes:
            execution = await _run_part(cte.plan, ctx, own, run_part)
            ctx.subquery_values[cte.slot] = await drain(execution)
        main = await _run_part(stmt.main, ctx, own, run_part)
    finally:
        ctx.deferred_constraints = outer
    await foreign_keys.run_statement_end(checks, ctx)
    return main


async def _run_part(plan: Any, ctx: Any, own: OwnWrites, run_part: RunPart) -> Any:
    """One part, its reads made with the statement's writes hidden."""
    if plan.kind == "query":
        async with own.hidden():
            return await run_part(plan)
    changed = own.changed_rows()
    if not changed:
        return await run_part(plan)  # nothing to hide: it runs as it would alone
    async with own.hidden():
        found = [r async for r in plan.node.rows(ctx)]
    if plan.kind in ("update", "delete"):
        found = _unchanged(plan.writer, found, changed)
    source = Materialized(found, plan.node, plan.node.width)
    return await run_part(replace(plan, node=source))


def _unchanged(writer: Any, found: list[Row], changed: set[tuple[str, bytes]]) -> list[Row]:
    """The rows an UPDATE or DELETE found that no earlier part changed: a row changed by
    another part of the statement is left as that part left it (Postgres skips a row already
    changed by the same command), and its index entries stay those of its current values."""
    table = writer.table
    width = len(table.columns) + (0 if table.primary_key else 1)
    storage = writer.codec.storage
    return [r for r in found if (storage, writer.codec.key_of_stored(r[:width])) not in changed]


def explain(stmt: ModifyingWith, lines_of: Callable[[Any], list[str]]) -> list[str]:
    """EXPLAIN: the main statement's plan, then each CTE's under ``CTE name``, as Postgres
    shows them."""
    lines = lines_of(stmt.main)
    for cte in stmt.ctes:
        sub = lines_of(cte.plan)
        lines.append(f"  CTE {cte.name}")
        lines.append("    ->  " + sub[0])
        lines.extend("        " + s for s in sub[1:])
    return lines


__all__ = ["CtePart", "Materialized", "ModifyingWith", "OwnWrites", "explain", "run"]
