"""A session's temporary tables: its overlay catalog, their DDL and their lifecycle.

``CREATE {TEMP | TEMPORARY} TABLE`` puts the table in this session's overlay only: the shared
catalog (and so every other session and server process) never holds it. The session binds
against the shared catalog with the overlay laid over it (:meth:`SessionTempTables.overlay`),
so a temporary table shadows a regular one of the same name, as ``pg_temp`` comes first in
Postgres's search path. Its rows are ordinary cells written by the session's transactions
(transactional, as in Postgres) in storages of their own (see
:mod:`percolator.server.sql.temp_tables`).

The overlay is transactional like the shared catalog's DDL: a transaction's changes are staged
and become the session's at its commit; a rollback (or ROLLBACK TO a savepoint) forgets them.
At commit, ON COMMIT DROP tables go, and the writes to ON COMMIT DELETE ROWS tables (and to
tables created and dropped within the transaction) are left out of the commit, so those
storages never hold committed cells. Storages that did and are no longer used (DROP TABLE,
TRUNCATE, the session's end) are retired for the storage reclaimer as DROP TABLE does.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from percolator.server.sql import catalog_store, ddl, ddl_validate
from percolator.server.sql import temp_tables as tt
from percolator.server.sql.binder import Binder
from percolator.server.sql.catalog import Catalog, IndexDef, SequenceDef, TableDef
from percolator.server.sql.errors import unsupported
from percolator.server.sql.expr_binder import Params
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.transaction import Transaction

log = logging.getLogger(__name__)

_FIRST_SCHEMA_NUMBER = 3
"""psql shows a first session's temporary schema as ``pg_temp_3`` in Postgres too."""
_numbers_in_use: set[int] = set()
"""The ``pg_temp_N`` numbers of this process's live sessions with temporary tables."""


class OnCommit(enum.Enum):
    """What a transaction's commit does to a temporary table."""

    PRESERVE_ROWS = "preserve"
    DELETE_ROWS = "delete"
    DROP = "drop"


@dataclass(frozen=True)
class TempState:
    """The session's temporary tables (and their serial sequences) at one point."""

    tables: Mapping[str, TableDef] = field(default_factory=dict)
    sequences: Mapping[str, SequenceDef] = field(default_factory=dict)
    on_commit: Mapping[int, OnCommit] = field(default_factory=dict)
    """By table id."""
    next_id: int = 0


def _storages(tables: Mapping[str, TableDef]) -> dict[str, str]:
    """Every storage of ``tables`` (rows and index entries), with its table's name."""
    out = {}
    for t in tables.values():
        out[t.storage] = t.name
        for ix in t.indexes:
            out[ix.storage] = t.name
    return out


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` (a TableDef, an IndexDef or a DDL data action holding them) with its
    storages renamed as ``names`` says."""
    if isinstance(value, IndexDef):
        return dataclasses.replace(value, storage=names.get(value.storage, value.storage))
    if isinstance(value, TableDef):
        return value.replace(
            storage=names.get(value.storage, value.storage),
            indexes=tuple(_renamed(ix, names) for ix in value.indexes),
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _renamed(getattr(value, f.name), names)
            for f in dataclasses.fields(value)
            if isinstance(getattr(value, f.name), TableDef | IndexDef)
        }
        return dataclasses.replace(value, **changes) if changes else value
    return value


class SessionTempTables:
    """One session's temporary tables (see the module's docstring)."""

    def __init__(self) -> None:
        self.committed = TempState()
        self.staged: TempState | None = None
        """The open transaction's state, once its DDL changed it."""
        self._created: set[str] = set()
        """Storages the open transaction created (their cells are its own writes only)."""
        self._ending: tuple[TempState | None, set[str]] = (None, set())
        """The ending transaction's staged state and created storages (see detach)."""
        self._final: TempState | None = None
        self._marks: dict[int, tuple[TempState | None, frozenset[str]]] = {}
        self._overlay: tuple[Catalog, TempState, Catalog] | None = None
        self._number: int | None = None

    @property
    def current(self) -> TempState:
        return self.staged if self.staged is not None else self.committed

    def overlay(self, base: Catalog) -> Catalog:
        """``base`` with the temporary tables laid over it (``base`` itself when there are
        none, so plans stay shareable). The same object while neither changes, as the plan
        cache and prepared statements compare catalogs by identity."""
        state = self.current
        if not state.tables:
            return base
        cached = self._overlay
        if cached is not None and cached[0] is base and cached[1] is state:
            return cached[2]
        merged = dataclasses.replace(
            base,
            tables={**base.tables, **state.tables},
            sequences={**base.sequences, **state.sequences},
        )
        self._overlay = (base, state, merged)
        return merged

    @property
    def active(self) -> bool:
        """Whether the session binds against an overlay (its plans are its own then)."""
        return bool(self.current.tables)

    # -- DDL -----------------------------------------------------------------------------

    def handles(self, node: exp.Expression) -> bool:
        """Whether a DDL statement is about temporary tables (CREATE TEMP TABLE, or one that
        names temporary tables), so :meth:`run_ddl` runs it, not the shared catalog's DDL."""
        if isinstance(node, exp.Create) and (node.args.get("kind") or "").upper() == "TABLE":
            return self._creates_temp(node)
        if isinstance(node, exp.Drop | exp.TruncateTable):
            names = list(node.find_all(exp.Table))
        else:
            first = node.find(exp.Table)
            names = [first] if first is not None else []
        temp = [self._names_temp(t, node) for t in names]
        if any(temp) and not all(temp):
            raise unsupported("a statement on both temporary and permanent tables")
        return bool(temp) and all(temp)

    def _creates_temp(self, node: exp.Create) -> bool:
        props = node.args.get("properties")
        if props is not None and any(
            isinstance(p, exp.TemporaryProperty) for p in props.expressions
        ):
            return True
        table = node.find(exp.Table)
        return table is not None and tt.is_temp_schema(table.db or None)

    def _names_temp(self, table: exp.Table, node: exp.Expression) -> bool:
        if table.db:
            return tt.is_temp_schema(table.db)
        state = self.current
        if table.name in state.tables:
            return True
        if isinstance(node, exp.Drop) and (node.args.get("kind") or "").upper() == "INDEX":
            return any(ix.name == table.name for t in state.tables.values() for ix in t.indexes)
        return False

    async def run_ddl(self, session: Any, node: exp.Expression) -> ddl.DdlResult:
        """Run a DDL statement on temporary tables: against the overlay alone (the session's
        ``pg_temp`` schema: a temporary table may have a regular one's name), in the
        session's transaction (``session``: the SqlSession), staging the new state."""
        if isinstance(node, exp.Create) and node.args.get("expression") is not None:
            raise unsupported("CREATE TABLE ... AS")
        txn: Transaction = await session.transaction(writes=True)
        shared: Catalog = session.txn_catalog or session.engine.catalog
        state = self.current
        if self._number is None:
            self._number = _take_number()
        before = dataclasses.replace(
            shared,
            tables=dict(state.tables),
            sequences=dict(state.sequences),
            views={},
            observers={},
            next_id=state.next_id or tt.first_id(self._number),
        )
        node = node.copy()
        for table in node.find_all(exp.Table):
            if tt.is_temp_schema(table.db or None):
                table.set("db", None)
        on_commit = OnCommit.PRESERVE_ROWS
        if isinstance(node, exp.Create):
            on_commit = _take_properties(node)
        result = ddl.apply_ddl(before, node, Binder(before, Params()).exprs.bind_type)
        ddl_validate.validate(before, result.catalog)
        old = _storages(before.tables)
        names = {
            s: f"{tt.STORAGE_PREFIX}{uuid.uuid4().hex}"
            for s in _storages(result.catalog.tables)
            if s not in old
        }
        tables = {n: _renamed(t, names) for n, t in result.catalog.tables.items()}
        after = dataclasses.replace(result.catalog, tables=tables)
        sequences = {
            n: s
            if n in before.sequences
            else dataclasses.replace(s, counter=f"{s.oid}.{txn.start_ts}")
            for n, s in after.sequences.items()
        }
        after = dataclasses.replace(after, sequences=sequences)
        actions = [_renamed(a, names) for a in result.actions]
        await session._run_data_actions(txn, after, actions)
        old_ids = {t.id for t in before.tables.values()}
        # A new table gets the statement's ON COMMIT; the others keep theirs.
        policies = {
            t.id: state.on_commit.get(
                t.id, OnCommit.PRESERVE_ROWS if t.id in old_ids else on_commit
            )
            for t in after.tables.values()
        }
        self._created |= set(names.values())
        self.staged = TempState(after.tables, after.sequences, policies, after.next_id)
        return result

    # -- transactions ---------------------------------------------------------------------

    def mark(self, savepoint: object) -> None:
        """SAVEPOINT: remember the state to go back to."""
        self._marks[id(savepoint)] = (self.staged, frozenset(self._created))

    def rollback_to(self, savepoint: object) -> None:
        """ROLLBACK TO SAVEPOINT: the state as it was at the savepoint."""
        mark = self._marks.get(id(savepoint))
        if mark is not None:
            self.staged = mark[0]

    def detach(self) -> None:
        """The transaction ends (commit or rollback): its changes are set aside for
        :meth:`before_commit`; until then, and if it rolls back, the committed state holds."""
        self._ending = (self.staged, self._created)
        self.staged = None
        self._created = set()
        self._marks = {}
        self._final = None

    def before_commit(self, txn: Transaction) -> None:
        """Just before the ending transaction commits: drop its ON COMMIT DROP tables, leave
        out its writes to ON COMMIT DELETE ROWS tables and to storages it created and no
        longer uses, and retire the committed storages it stopped using."""
        staged, created = self._ending
        state = staged if staged is not None else self.committed
        if not state.tables and not self.committed.tables:
            self._final = state
            return
        dropped = {n for n, t in state.tables.items() if state.on_commit.get(t.id) == OnCommit.DROP}
        final = state
        if dropped:
            final = TempState(
                {n: t for n, t in state.tables.items() if n not in dropped},
                {n: s for n, s in state.sequences.items() if s.table not in dropped},
                {i: p for i, p in state.on_commit.items() if p != OnCommit.DROP},
                state.next_id,
            )
        kept = _storages(final.tables)
        gone = (set(_storages(self.committed.tables)) | created) - set(kept)
        emptied = {
            s for s in kept if final.on_commit.get(final.tables[kept[s]].id) == OnCommit.DELETE_ROWS
        }
        discard = (gone & created) | emptied
        if discard:
            txn.discard_writes(discard)
        previous = _storages(self.committed.tables)
        for storage in sorted(gone - created):
            catalog_store.retire_storage(txn, storage, previous.get(storage, ""))
        self._final = final

    def after_commit(self) -> None:
        """The ending transaction committed: its state is the session's."""
        if self._final is not None:
            self.committed = self._final
        self._ending = (None, set())
        self._final = None

    async def close(self, client: TransactionClient) -> None:
        """The session ends: its temporary tables go, their storages retired (a crash of the
        process leaves them behind)."""
        storages = _storages(self.committed.tables)
        self.committed = TempState()
        self.staged = None
        if self._number is not None:
            _numbers_in_use.discard(self._number)
            self._number = None
        if not storages:
            return
        try:
            txn = await client.begin()
            for storage, table in sorted(storages.items()):
                catalog_store.retire_storage(txn, storage, table)
            await txn.commit()
        except Exception:
            log.warning("retiring the storages of temporary tables failed", exc_info=True)


def _take_properties(node: exp.Create) -> OnCommit:
    """Take TEMPORARY and ON COMMIT off a CREATE TABLE (apply_ddl refuses the first), and
    return what ON COMMIT said."""
    on_commit = OnCommit.DROP if node.meta.get("on_commit_drop") else OnCommit.PRESERVE_ROWS
    props = node.args.get("properties")
    if props is None:
        return on_commit
    kept = []
    for p in props.expressions:
        if isinstance(p, exp.OnCommitProperty):
            if p.args.get("delete"):
                on_commit = OnCommit.DELETE_ROWS
        elif not isinstance(p, exp.TemporaryProperty):
            kept.append(p)
    props.set("expressions", kept)
    return on_commit


def _take_number() -> int:
    """The lowest ``pg_temp_N`` number no live session of this process uses."""
    number = _FIRST_SCHEMA_NUMBER
    while number in _numbers_in_use:
        number += 1
    if number >= tt.MAX_SCHEMAS:
        raise unsupported("more sessions with temporary tables")
    _numbers_in_use.add(number)
    return number
