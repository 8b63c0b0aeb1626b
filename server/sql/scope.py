"""Name resolution: which input column a (qualified) column name refers to."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from percolator.server.sql.bound import OutCol
from percolator.server.sql.errors import (
    AMBIGUOUS_COLUMN,
    UNDEFINED_COLUMN,
    UNDEFINED_TABLE,
    SqlError,
)


@dataclass
class Scope:
    """The columns visible to an expression: the current FROM clause's row, and the scopes of
    enclosing queries (for correlated subqueries)."""

    columns: list[OutCol] = field(default_factory=list)
    parent: Scope | None = None
    relations: set[str] = field(default_factory=set)
    star_order: list[int] | None = None
    """The columns ``*`` expands to, when not every visible column in order (a USING join
    puts its merged columns first)."""
    unreachable: set[str] = field(default_factory=set)
    """FROM items of an enclosing query that exist but cannot be referenced from here (the
    earlier items, seen from a FROM item that is not LATERAL): Postgres names them in its
    error rather than calling them missing."""

    def lookup(self, qualifier: str | None, name: str) -> tuple[int, int, OutCol] | None:
        """(level, index, column): level 0 is this scope, 1 its parent, ..."""
        for level, scope in enumerate(self._chain()):
            found = scope._find(qualifier, name)
            if found is not None:
                return level, found, scope.columns[found]
        return None

    def _find(self, qualifier: str | None, name: str) -> int | None:
        hits = [
            i
            for i, c in enumerate(self.columns)
            if c.name == name
            and (qualifier is None or c.relation == qualifier)
            and (qualifier is not None or not c.hidden or True)
        ]
        if qualifier is None and len(hits) > 1:
            visible = [i for i in hits if not self.columns[i].hidden]
            if len(visible) == 1:
                return visible[0]
            raise SqlError(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous')
        if len(hits) > 1:
            raise SqlError(AMBIGUOUS_COLUMN, f'column reference "{qualifier}.{name}" is ambiguous')
        return hits[0] if hits else None

    def resolve(self, qualifier: str | None, name: str) -> tuple[int, int, OutCol]:
        found = self.lookup(qualifier, name)
        if found is not None:
            return found
        if qualifier is not None and not self._has_relation(qualifier):
            if self._is_unreachable(qualifier):
                raise SqlError(
                    UNDEFINED_TABLE,
                    f'invalid reference to FROM-clause entry for table "{qualifier}"',
                    hint=f'There is an entry for table "{qualifier}", but it cannot be '
                    "referenced from this part of the query.",
                )
            raise SqlError(UNDEFINED_TABLE, f'missing FROM-clause entry for table "{qualifier}"')
        # Postgres quotes a bare name only: column "x" / column t.x does not exist.
        shown = f"{qualifier}.{name}" if qualifier else f'"{name}"'
        raise SqlError(UNDEFINED_COLUMN, f"column {shown} does not exist")

    def _has_relation(self, qualifier: str) -> bool:
        return any(qualifier in s.relations for s in self._chain())

    def _is_unreachable(self, qualifier: str) -> bool:
        """Whether ``qualifier`` names a FROM item this scope exists beside but cannot see."""
        return any(qualifier in s.unreachable for s in self._chain())

    def _chain(self) -> Iterator[Scope]:
        """This scope and its enclosing ones, innermost first."""
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def star(self, qualifier: str | None) -> list[int]:
        """Indexes of the columns ``*`` or ``qualifier.*`` expands to."""
        if qualifier is not None and qualifier not in self.relations:
            raise SqlError(UNDEFINED_TABLE, f'missing FROM-clause entry for table "{qualifier}"')
        if qualifier is None and self.star_order is not None:
            return list(self.star_order)
        if qualifier is None:
            return [i for i, c in enumerate(self.columns) if not c.hidden]
        return [
            i
            for i, c in enumerate(self.columns)
            if c.relation == qualifier and (not c.hidden or c.joined_away)
        ]
