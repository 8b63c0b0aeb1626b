"""System tables (pg_catalog, information_schema): computed from the catalog when read.

A :class:`SystemTable` has a fixed column list and a function from the execution context to
its rows. Modules register tables with :func:`register`; ``pg_catalog_tables`` defines the
Postgres catalogs clients query. Unknown tables of these schemas fail with 42P01 as usual.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from percolator.server.sql.types import SqlType


@dataclass(frozen=True)
class SystemTable:
    schema: str
    name: str
    columns: tuple[tuple[str, SqlType], ...]
    rows: Callable[[Any], Iterable[tuple[object, ...]] | AsyncIterable[tuple[object, ...]]]
    """Called with the execution context (its ``catalog`` and ``session``); may return an
    async iterable when the rows come from the store."""
    oid: int = 0


_TABLES: dict[tuple[str, str], SystemTable] = {}

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "percolator")


def register(table: SystemTable) -> SystemTable:
    _TABLES[(table.schema, table.name)] = table
    return table


_loaded = False


def _ensure_loaded() -> None:
    # The definitions import this module to register themselves; import them on first use.
    global _loaded
    if not _loaded:
        _loaded = True
        from percolator.server.sql import observer_tables, pg_catalog_tables  # noqa: F401


def lookup(schema: str | None, name: str) -> SystemTable | None:
    """The system table ``schema.name``; an unqualified name is looked up in pg_catalog
    (which is on every search_path)."""
    _ensure_loaded()
    if schema is None:
        return _TABLES.get(("pg_catalog", name))
    return _TABLES.get((schema, name))


def all_tables() -> list[SystemTable]:
    _ensure_loaded()
    return list(_TABLES.values())


def rows_with_tableoid(
    table: SystemTable,
) -> Callable[[Any], Iterable[tuple[object, ...]] | AsyncIterable[tuple[object, ...]]]:
    """The table's rows with its OID appended: the hidden system column ``tableoid``, which
    psql's ``\\dd`` joins on (``pg_description.classoid = pgc.tableoid``)."""

    def rows(ctx: Any) -> Iterable[tuple[object, ...]] | AsyncIterable[tuple[object, ...]]:
        source = table.rows(ctx)
        if isinstance(source, AsyncIterable):
            return _append_async(source, table.oid)
        return ((*row, table.oid) for row in source)

    return rows


async def _append_async(
    source: AsyncIterable[tuple[object, ...]], value: object
) -> AsyncIterator[tuple[object, ...]]:
    async for row in source:
        yield (*row, value)
