"""CREATE DATABASE and DROP DATABASE, answered as Postgres answers them about the one
database a deployment has.

A deployment serves one database (its name is the server's ``--database``), so neither
statement changes anything. What they say is Postgres's answer wherever the answer does not
need a second database: creating the database that exists is 42P04, dropping the one the
session is connected to is 55006, dropping another is 3D000 (a NOTICE with IF EXISTS), and
both are 25001 in a transaction block. Only creating a new database is refused (0A000).
Clients rely on these answers: Django's test runner with ``--keepdb`` asks whether its test
database exists and, when told "already exists", uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from percolator.server.sql.errors import (
    ACTIVE_SQL_TRANSACTION,
    DUPLICATE_DATABASE,
    INVALID_CATALOG_NAME,
    OBJECT_IN_USE,
    SqlError,
    unsupported,
)

if TYPE_CHECKING:
    from percolator.server.sql.utility import TokenReader


@dataclass(frozen=True)
class CreateDatabase:
    """``CREATE DATABASE name [[WITH] option ...]`` (the options are not read)."""

    name: str


@dataclass(frozen=True)
class DropDatabase:
    """``DROP DATABASE [IF EXISTS] name [[WITH] (FORCE)]``."""

    name: str
    if_exists: bool


def parse_create(r: TokenReader) -> CreateDatabase:
    r.expect("CREATE", "DATABASE")
    name = r.name()
    while not r.done():  # OWNER, TEMPLATE, ENCODING, ...: nothing is created to apply them to
        r.next()
    return CreateDatabase(name)


def parse_drop(r: TokenReader) -> DropDatabase:
    r.expect("DROP", "DATABASE")
    if_exists = r.accept("IF", "EXISTS")
    name = r.name()
    r.accept("WITH")
    if r.accept("("):
        r.expect("FORCE")
        r.expect(")")
    r.end()
    return DropDatabase(name, if_exists)


def run(stmt: CreateDatabase | DropDatabase, current: str, in_block: bool) -> list[str]:
    """Answer ``stmt`` for a session connected to database ``current``: raise Postgres's
    error, or return the NOTICEs of a DROP DATABASE IF EXISTS of a database that is not
    there."""
    verb = "CREATE" if isinstance(stmt, CreateDatabase) else "DROP"
    if in_block:
        raise SqlError(
            ACTIVE_SQL_TRANSACTION, f"{verb} DATABASE cannot run inside a transaction block"
        )
    if isinstance(stmt, CreateDatabase):
        if stmt.name == current:
            raise SqlError(DUPLICATE_DATABASE, f'database "{stmt.name}" already exists')
        raise unsupported("CREATE DATABASE (a deployment has one database)")
    if stmt.name == current:
        raise SqlError(OBJECT_IN_USE, "cannot drop the currently open database")
    if stmt.if_exists:
        return [f'database "{stmt.name}" does not exist, skipping']
    raise SqlError(INVALID_CATALOG_NAME, f'database "{stmt.name}" does not exist')


__all__ = ["CreateDatabase", "DropDatabase", "parse_create", "parse_drop", "run"]
