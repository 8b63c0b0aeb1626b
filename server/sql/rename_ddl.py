"""Renaming constraints and indexes, and the constraint-name checks of ADD CONSTRAINT.

``ALTER TABLE t RENAME CONSTRAINT a TO b`` and ``ALTER INDEX a RENAME TO b``. A UNIQUE or
PRIMARY KEY constraint and its index share one name in Postgres, so renaming either renames
both; the primary key's index is implicit here (:attr:`TableDef.pk_name`). Indexes, like
every relation, are named in one namespace (42P07); constraints per table (42710).
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from percolator.server.sql import schemas
from percolator.server.sql.catalog import Catalog, TableDef
from percolator.server.sql.errors import (
    DUPLICATE_TABLE,
    UNDEFINED_OBJECT,
    WRONG_OBJECT_TYPE,
    SqlError,
)
from percolator.server.sql.foreign_key_ddl import constraint_names

DUPLICATE_OBJECT = "42710"


class RenameConstraint(exp.Expression):
    """The ALTER TABLE action ``RENAME CONSTRAINT this TO to`` (sqlglot has none)."""

    arg_types = {"this": True, "to": True}


class ValidateConstraint(exp.Expression):
    """The ALTER TABLE action ``VALIDATE CONSTRAINT this``: the existing rows are checked
    against the CHECK or FOREIGN KEY (one added NOT VALID skipped that check)."""

    arg_types = {"this": True}


class IgnoredAction(exp.Expression):
    """An ALTER TABLE action accepted and ignored (``OWNER TO``: privileges are not
    enforced; ``ALTER COLUMN c SET STATISTICS n``: there is no planner statistics)."""

    arg_types = {"this": True, "column": False}


def check_new_constraint(catalog: Catalog, table: TableDef, name: str, indexed: bool) -> None:
    """Refuse a new constraint ``name`` on ``table`` as Postgres does: one with an index
    (UNIQUE, PRIMARY KEY) takes a relation name first (42P07); every constraint needs a name
    no other constraint of the table has (42710)."""
    if indexed and catalog.relation_exists(name):
        raise SqlError(DUPLICATE_TABLE, f'relation "{name}" already exists')
    check_new_constraint_name(table, name)


def check_new_constraint_name(table: TableDef, name: str) -> None:
    """42710 if ``table`` has a constraint named ``name``."""
    if name in _constraints(table):
        raise SqlError(
            DUPLICATE_OBJECT, f'constraint "{name}" for relation "{table.name}" already exists'
        )


def _constraints(table: TableDef) -> set[str]:
    """The names of the table's constraints (not of its plain indexes)."""
    plain = {ix.name for ix in table.indexes if not ix.constraint}
    return constraint_names(table) - plain


def rename_constraint(catalog: Catalog, table: TableDef, old: str, new: str) -> Catalog:
    """ALTER TABLE ... RENAME CONSTRAINT old TO new."""
    # A constraint implemented by an index is named by the index's key, in the table's
    # schema (server/sql/schemas.py); checks and foreign keys keep bare names.
    schema = schemas.schema_of(table.name)
    if schemas.key(schema, old) in _constraints(table):
        old = schemas.key(schema, old)
    if old not in _constraints(table):
        raise SqlError(
            UNDEFINED_OBJECT, f'constraint "{old}" for table "{table.name}" does not exist'
        )
    indexed = (table.primary_key and old == table.pk_constraint_name) or any(
        ix.name == old and ix.constraint for ix in table.indexes
    )
    if indexed:
        new = schemas.key(schema, new)
    check_new_constraint(catalog, table, new, bool(indexed))
    return catalog.with_table(_renamed(table, old, new))


def rename_index(catalog: Catalog, old: str, new: str) -> Catalog | None:
    """ALTER INDEX old RENAME TO new, or None when no index (nor primary key) is named
    ``old``."""
    owner = _index_owner(catalog, old)
    if owner is None:
        return None
    if catalog.relation_exists(new):
        raise SqlError(DUPLICATE_TABLE, f'relation "{new}" already exists')
    return catalog.with_table(_renamed(owner, old, new))


def _index_owner(catalog: Catalog, name: str) -> TableDef | None:
    """The table with an index (or primary key index) named ``name``."""
    found = catalog.index(name)
    if found is not None:
        return found[0]
    for table in catalog.tables.values():
        if table.primary_key and table.pk_constraint_name == name:
            return table
    return None


def _renamed(table: TableDef, old: str, new: str) -> TableDef:
    """``table`` with its constraint or index ``old`` named ``new``."""
    if table.primary_key and old == table.pk_constraint_name:
        return table.replace(pk_name=new)
    indexes = tuple(
        dataclasses.replace(ix, name=new) if ix.name == old else ix for ix in table.indexes
    )
    checks = tuple(
        dataclasses.replace(ck, name=new) if ck.name == old else ck for ck in table.checks
    )
    fks = tuple(
        dataclasses.replace(fk, name=new) if fk.name == old else fk for fk in table.foreign_keys
    )
    return table.replace(indexes=indexes, checks=checks, foreign_keys=fks)


def validate_constraint(table: TableDef, name: str) -> None:
    """ALTER TABLE ... VALIDATE CONSTRAINT name: 42704 if there is no such constraint, 42809
    for one that is not a CHECK or FOREIGN KEY."""
    if name not in _constraints(table):
        raise SqlError(
            UNDEFINED_OBJECT, f'constraint "{name}" of relation "{table.name}" does not exist'
        )
    if not any(ck.name == name for ck in table.checks) and not any(
        fk.name == name for fk in table.foreign_keys
    ):
        raise SqlError(
            WRONG_OBJECT_TYPE,
            f'constraint "{name}" of relation "{table.name}" is not a foreign key or check '
            "constraint",
        )
