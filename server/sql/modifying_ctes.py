"""Data-modifying statements in WITH, as Postgres has them: the binding side.

``WITH moved AS (DELETE FROM queue WHERE ... RETURNING *) INSERT INTO done SELECT * FROM
moved``: each INSERT, UPDATE or DELETE of the statement's top-level WITH is bound as the same
statement outside WITH would be (constraints, indexes, foreign keys and row locks come with
it), and is recorded in the order written, as a :class:`ModifyingCte`. The rest of the
statement reads it by name as a relation of its RETURNING rows: the executor runs it once, to
completion, before the main statement, and leaves those rows in the statement's context
(``ctx.subquery_values[slot]``), where that relation finds them (server/planner/
modifying_ctes.py runs the parts; the session plans them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from percolator.server.sql.bound import DeleteStmt, InsertStmt, OutCol, UpdateStmt, VirtualRel
from percolator.server.sql.errors import FEATURE_NOT_SUPPORTED, SqlError
from percolator.server.sql.recursive_cte import INVALID_RECURSION, references

ModifyingStmt = InsertStmt | UpdateStmt | DeleteStmt


@dataclass
class ModifyingCte:
    """One data-modifying CTE of a statement: its bound statement, and the slot of the
    statement's context where its RETURNING rows are left for the rest of the statement."""

    name: str
    statement: ModifyingStmt
    slot: int


def is_modifying(body: exp.Expression) -> bool:
    """Whether a CTE's body is a data-modifying statement (rather than a query)."""
    return isinstance(body, exp.Insert | exp.Update | exp.Delete | exp.Merge)


def check(body: exp.Expression, name: str, *, top: bool, recursive: bool) -> None:
    """Postgres's refusals of a data-modifying CTE: MERGE (not in WITH before Postgres 17), a
    WITH below the statement's own (a subquery's, a CTE's), one that refers to itself."""
    if isinstance(body, exp.Merge):
        raise SqlError(FEATURE_NOT_SUPPORTED, "MERGE not supported in WITH query")
    if not top:
        raise SqlError(
            FEATURE_NOT_SUPPORTED,
            "WITH clause containing a data-modifying statement must be at the top level",
        )
    if recursive and references(body, name):
        raise SqlError(
            INVALID_RECURSION,
            f'recursive query "{name}" must not contain data-modifying statements',
        )


def relation(cte: ModifyingCte) -> VirtualRel | None:
    """The relation the rest of the statement reads the CTE as: its RETURNING rows (None
    without RETURNING: naming it is then :func:`no_returning`)."""
    cols = cte.statement.returning_cols
    if cols is None:
        return None
    out = [OutCol(c.name, c.type, c.table_oid, c.column_number, cte.name) for c in cols]
    slot = cte.slot
    return VirtualRel(out, cte.name, lambda ctx: _returned(ctx, slot), label="CTE Scan")


def _returned(ctx: Any, slot: int) -> Iterator[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = ctx.subquery_values[slot]
    return iter(rows)


def no_returning(name: str) -> SqlError:
    """0A000 for reading a data-modifying CTE that returns nothing."""
    return SqlError(FEATURE_NOT_SUPPORTED, f'WITH query "{name}" does not have a RETURNING clause')


def in_view() -> SqlError:
    """0A000 for CREATE VIEW over a query with a data-modifying CTE."""
    return SqlError(
        FEATURE_NOT_SUPPORTED, "views must not contain data-modifying statements in WITH"
    )


def in_cursor() -> SqlError:
    """0A000 for DECLARE CURSOR over a query with a data-modifying CTE."""
    return SqlError(
        FEATURE_NOT_SUPPORTED, "DECLARE CURSOR must not contain data-modifying statements in WITH"
    )
