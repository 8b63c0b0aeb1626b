"""Triggers as a table writer fires them (CREATE TRIGGER; server/sql/trigger_ddl.py).

Statement-level triggers fire once before and once after a statement (the session calls
:meth:`RowTriggers.statement`); row triggers as follows.

BEFORE triggers run as each row is about to be written (after the rows before it were), in
the order of their names, each seeing the row the one before returned: one that returns NULL
skips the row (no write, no later trigger, not counted), one that returns a changed row
writes that. AFTER triggers run once a write call's rows are written and its foreign keys
checked (Postgres queues them to the statement's end; see docs/sql.md for where the two
differ). The function runs through the session (``ctx.functions``,
server/session_functions.py), in the statement's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.sql import trigger_ddl
from percolator.server.sql.catalog import Catalog, FunctionDef, TableDef, TriggerDef

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder

Row = tuple[object, ...]


@dataclass(frozen=True)
class Trigger:
    """One enabled trigger: its definition, its function, its WHEN compiled over the row
    OLD's columns then NEW's."""

    definition: TriggerDef
    function: FunctionDef
    when: Compiled | None


@dataclass(frozen=True)
class RowTriggers:
    """A table's enabled row triggers with their functions."""

    table: TableDef
    triggers: tuple[Trigger, ...]

    @classmethod
    def of(cls, table: TableDef, catalog: Catalog, binder: Binder) -> RowTriggers | None:
        """The table's triggers (None when it has none, so writers pay nothing)."""
        found = tuple(
            Trigger(
                t,
                catalog.functions[t.function],
                None
                if t.when is None
                else compile_expr(trigger_ddl.when_condition(binder, table, t.when)),
            )
            for t in table.triggers
            if t.enabled and t.function in catalog.functions
        )
        return cls(table, found) if found else None

    def fires(self, before: bool, event: str) -> bool:
        """Whether a BEFORE (or AFTER) trigger of ``event`` is enabled."""
        return bool(self._for(before, event))

    def _for(self, before: bool, event: str, row_level: bool = True) -> list[Trigger]:
        return [
            t
            for t in self.triggers
            if t.definition.before == before
            and event in t.definition.events
            and t.definition.row_level == row_level
        ]

    async def statement(self, ctx: Any, before: bool, events: Sequence[str]) -> None:
        """The statement-level triggers of ``events`` (once per statement, whether or not
        it changes rows, as in Postgres)."""
        for event in events:
            for trigger in self._for(before, event, row_level=False):
                await self._fire(ctx, trigger, event, None, None)

    def _applies(self, trigger: Trigger, ctx: Any, old: Row | None, new: Row | None) -> bool:
        """Whether the trigger fires for this change: its UPDATE OF columns (whether one of
        them changed: Postgres asks whether the UPDATE names one in its SET list, a column
        set to its own value differs here) and its WHEN."""
        t = trigger.definition
        if t.update_column_ids and old is not None and new is not None:
            positions = map(self.table.position, t.update_column_ids)
            if not any(old[p] != new[p] for p in positions):
                return False
        if trigger.when is None:
            return True
        width = len(self.table.columns)
        nulls = (None,) * width
        row = (old[:width] if old is not None else nulls) + (
            new[:width] if new is not None else nulls
        )
        return trigger.when(row, ctx) is True

    async def before_insert(self, ctx: Any, rows: Sequence[Row]) -> list[Row]:
        """The rows to insert once BEFORE INSERT triggers ran (skipped ones left out)."""
        fired = self._for(True, "insert")
        if not fired:
            return list(rows)
        out: list[Row] = []
        for row in rows:
            current: Row | None = row
            for trigger in fired:
                if self._applies(trigger, ctx, None, current):
                    current = await self._fire(ctx, trigger, "insert", None, current)
                    if current is None:
                        break
            if current is not None:
                out.append(current)
        return out

    async def before_update(self, ctx: Any, old: Row, new: Row) -> Row | None:
        """The row to write once BEFORE UPDATE triggers ran; None: the update is skipped."""
        current: Row | None = new
        for trigger in self._for(True, "update"):
            if self._applies(trigger, ctx, old, current):
                current = await self._fire(ctx, trigger, "update", old, current)
                if current is None:
                    return None
        return current

    async def before_delete(self, ctx: Any, old: Row) -> bool:
        """Whether the row is still to be deleted once BEFORE DELETE triggers ran."""
        for trigger in self._for(True, "delete"):
            if self._applies(trigger, ctx, old, None):
                if await self._fire(ctx, trigger, "delete", old, None) is None:
                    return False
        return True

    async def after(
        self, ctx: Any, event: str, changes: Sequence[tuple[Row | None, Row | None]]
    ) -> None:
        """AFTER triggers for the rows a statement changed: (old, new) pairs."""
        fired = self._for(False, event)
        for old, new in changes if fired else ():
            for trigger in fired:
                if self._applies(trigger, ctx, old, new):
                    await self._fire(ctx, trigger, event, old, new)

    async def _fire(
        self, ctx: Any, trigger: Trigger, event: str, old: Row | None, new: Row | None
    ) -> Row | None:
        return await ctx.functions.fire(  # type: ignore[no-any-return]
            trigger.function, trigger.definition, self.table, event, old, new
        )
