"""Row triggers as a table writer fires them (CREATE TRIGGER; server/sql/trigger_ddl.py).

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
from typing import Any

from percolator.server.sql.catalog import Catalog, FunctionDef, TableDef, TriggerDef

Row = tuple[object, ...]


@dataclass(frozen=True)
class RowTriggers:
    """A table's enabled row triggers with their functions."""

    table: TableDef
    triggers: tuple[tuple[TriggerDef, FunctionDef], ...]

    @classmethod
    def of(cls, table: TableDef, catalog: Catalog) -> RowTriggers | None:
        """The table's triggers (None when it has none, so writers pay nothing)."""
        found = tuple(
            (t, catalog.functions[t.function])
            for t in table.triggers
            if t.enabled and t.function in catalog.functions
        )
        return cls(table, found) if found else None

    def fires(self, before: bool, event: str) -> bool:
        """Whether a BEFORE (or AFTER) trigger of ``event`` is enabled."""
        return bool(self._for(before, event))

    def _for(self, before: bool, event: str) -> list[tuple[TriggerDef, FunctionDef]]:
        return [(t, f) for t, f in self.triggers if t.before == before and event in t.events]

    def _update_fires(self, trigger: TriggerDef, old: Row, new: Row) -> bool:
        """UPDATE OF columns: whether one of them changed (Postgres asks whether the UPDATE
        names one in its SET list; a column set to its own value differs here)."""
        if not trigger.update_column_ids:
            return True
        return any(old[p] != new[p] for p in map(self.table.position, trigger.update_column_ids))

    async def before_insert(self, ctx: Any, rows: Sequence[Row]) -> list[Row]:
        """The rows to insert once BEFORE INSERT triggers ran (skipped ones left out)."""
        fired = self._for(True, "insert")
        if not fired:
            return list(rows)
        out: list[Row] = []
        for row in rows:
            current: Row | None = row
            for trigger, fn in fired:
                current = await ctx.functions.fire(fn, trigger, self.table, "insert", None, current)
                if current is None:
                    break
            if current is not None:
                out.append(current)
        return out

    async def before_update(self, ctx: Any, old: Row, new: Row) -> Row | None:
        """The row to write once BEFORE UPDATE triggers ran; None: the update is skipped."""
        current: Row | None = new
        for trigger, fn in self._for(True, "update"):
            if not self._update_fires(trigger, old, new):
                continue
            current = await ctx.functions.fire(fn, trigger, self.table, "update", old, current)
            if current is None:
                return None
        return current

    async def before_delete(self, ctx: Any, old: Row) -> bool:
        """Whether the row is still to be deleted once BEFORE DELETE triggers ran."""
        for trigger, fn in self._for(True, "delete"):
            if await ctx.functions.fire(fn, trigger, self.table, "delete", old, None) is None:
                return False
        return True

    async def after(
        self, ctx: Any, event: str, changes: Sequence[tuple[Row | None, Row | None]]
    ) -> None:
        """AFTER triggers for the rows a statement changed: (old, new) pairs."""
        fired = self._for(False, event)
        for old, new in changes if fired else ():
            for trigger, fn in fired:
                if event == "update" and not self._update_fires(trigger, old, new):  # type: ignore[arg-type]
                    continue
                await ctx.functions.fire(fn, trigger, self.table, event, old, new)
