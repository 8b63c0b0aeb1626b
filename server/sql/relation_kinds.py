"""What kind of relation a name is, for DROP's wrong-object-type errors.

Tables, views, indexes and sequences share one namespace in Postgres, so ``DROP TABLE`` of
an index is not "does not exist" but 42809 naming the DROP that would do.
"""

from __future__ import annotations

from percolator.server.sql.catalog import Catalog
from percolator.server.sql.errors import WRONG_OBJECT_TYPE, SqlError

_ARTICLE = {"table": "a table", "view": "a view", "index": "an index", "sequence": "a sequence"}


def relation_kind(catalog: Catalog, name: str) -> str | None:
    """``table``, ``view``, ``index`` (a primary key's too) or ``sequence``; None when no
    relation has the name."""
    if name in catalog.tables:
        return "table"
    if name in catalog.views:
        return "view"
    if name in catalog.sequences:
        return "sequence"
    if catalog.relation_exists(name):
        return "index"
    return None


def check_kind(catalog: Catalog, name: str, wanted: str) -> None:
    """42809 if ``name`` is a relation of another kind than ``wanted`` (as Postgres says it,
    even under IF EXISTS); nothing if it is one or does not exist."""
    kind = relation_kind(catalog, name)
    if kind is None or kind == wanted:
        return
    raise SqlError(
        WRONG_OBJECT_TYPE,
        f'"{name}" is not {_ARTICLE[wanted]}',
        hint=f"Use DROP {kind.upper()} to remove {_ARTICLE[kind]}.",
    )
