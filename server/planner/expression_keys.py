"""WHERE equalities on the key expressions of indexes (``WHERE lower(email) = $1`` over an
index on ``lower(email)``), for the planner's choice of an index lookup.

The planner finds the columns fixed by ``=`` by their positions in the row. An expression key
gets a virtual position past the row's, fixed when a conjunct ``expr = value`` has the index's
bound expression on one side (the same tree, as the binder builds it for the same text) and a
value that does not read the row on the other; an index's key columns are then positions as
before, and a prefix of them fixed by ``=`` makes the same lookup a column index gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from percolator.server.sql.bound import BCall, BExpr, same_expression
from percolator.server.sql.catalog import IndexDef, TableDef

VIRTUAL_BASE = 1 << 20
"""Virtual positions start here, far past any row's (with its hidden columns)."""

NOT_FIXED = -1
"""The position of an expression key that no conjunct fixes."""


@dataclasses.dataclass
class ExpressionKeys:
    """The expression keys a table's WHERE conjuncts fix: their virtual positions, values
    and display names."""

    positions: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)
    """(index id, key column) -> virtual position, for the fixed ones."""
    values: dict[int, BExpr] = dataclasses.field(default_factory=dict)
    """Virtual position -> the value the key equals."""
    names: dict[int, str] = dataclasses.field(default_factory=dict)
    """Virtual position -> the expression as EXPLAIN shows it."""

    def key_positions(self, table: TableDef, ix: IndexDef) -> list[int]:
        """Positions of ``ix``'s key columns: a column's in the row, an expression's virtual
        one (:data:`NOT_FIXED` when no conjunct fixes it)."""
        return [
            table.position(c) if c else self.positions.get((ix.id, i), NOT_FIXED)
            for i, c in enumerate(ix.column_ids)
        ]


def find(
    table: TableDef,
    filters: list[BExpr],
    index_keys: dict[int, list[BExpr | None]],
    is_value: Callable[[BExpr], bool],
    describe: Callable[[BExpr], str],
) -> ExpressionKeys:
    """The expression keys of ``table``'s indexes (``index_keys``: bound, by index id) that a
    conjunct ``key = value`` fixes, ``is_value`` telling what may stand on the other side."""
    out = ExpressionKeys()
    if not index_keys:
        return out
    equalities = [
        (side, other)
        for f in filters
        if isinstance(f, BCall) and f.name == "=" and len(f.args) == 2
        for side, other in (f.args, f.args[::-1])
        if is_value(other)
    ]
    for ix in table.indexes:
        for i, key in enumerate(index_keys.get(ix.id, ())):
            if key is None:
                continue
            value = next((v for e, v in equalities if same_expression(e, key)), None)
            if value is not None:
                pos = VIRTUAL_BASE + len(out.values)
                out.positions[(ix.id, i)] = pos
                out.values[pos] = value
                out.names[pos] = describe(key)
    return out


__all__ = ["NOT_FIXED", "ExpressionKeys", "find"]
