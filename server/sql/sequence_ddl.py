"""CREATE / ALTER / DROP SEQUENCE: the statements (read by keyword, as sqlglot misreads some of
them) and what they do to the catalog. Values are handed out by ``server/sequences.py``."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from percolator.server.sql import schemas
from percolator.server.sql.catalog import Catalog, ColumnDef, SequenceDef, TableDef
from percolator.server.sql.errors import (
    DUPLICATE_TABLE,
    INVALID_PARAMETER_VALUE,
    SYNTAX_ERROR,
    UNDEFINED_TABLE,
    SqlError,
    unsupported,
)
from percolator.server.sql.quoting import quote_ident
from percolator.server.sql.relation_kinds import check_kind as _check_kind
from percolator.server.sql.sequence_functions import sequence_name

_TYPE_LIMITS = {
    "smallint": (-(1 << 15), (1 << 15) - 1),
    "int2": (-(1 << 15), (1 << 15) - 1),
    "integer": (-(1 << 31), (1 << 31) - 1),
    "int": (-(1 << 31), (1 << 31) - 1),
    "int4": (-(1 << 31), (1 << 31) - 1),
    "bigint": (-(1 << 63), (1 << 63) - 1),
    "int8": (-(1 << 63), (1 << 63) - 1),
}


@dataclass(frozen=True)
class SequenceOptions:
    """The options a CREATE or ALTER SEQUENCE gives (None: not given)."""

    type_name: str | None = None
    start: int | None = None
    increment: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    restart: int | None = None
    """ALTER ... RESTART [WITH n]; RESTART alone is the start value (see ``restart_default``)."""
    restart_default: bool = False
    owned_by: str | None = None
    """OWNED BY table.column: the table (``""`` for OWNED BY NONE)."""


@dataclass(frozen=True)
class CreateSequence:
    name: str
    if_not_exists: bool
    options: SequenceOptions


@dataclass(frozen=True)
class AlterSequence:
    name: str
    if_exists: bool
    options: SequenceOptions
    rename_to: str | None = None
    """ALTER SEQUENCE ... RENAME TO: the new name (no options then)."""


@dataclass(frozen=True)
class DropSequence:
    names: tuple[str, ...]
    if_exists: bool


def parse_create(r: Any) -> CreateSequence:
    """``CREATE SEQUENCE [IF NOT EXISTS] name [options]`` (the reader is at CREATE)."""
    r.next()
    r.next()
    if_not_exists = r.accept("IF", "NOT", "EXISTS")
    name = r.public_name()
    return CreateSequence(name, if_not_exists, _options(r, alter=False))


def parse_alter(r: Any) -> AlterSequence:
    r.next()
    r.next()
    if_exists = r.accept("IF", "EXISTS")
    name = r.public_name()
    if r.accept("RENAME", "TO"):
        new = r.public_name()
        r.end()
        return AlterSequence(name, if_exists, SequenceOptions(), rename_to=new)
    if r.at("RENAME") or r.at("OWNER") or r.at("SET"):
        raise unsupported(f"ALTER SEQUENCE ... {r.peek().upper}")
    return AlterSequence(name, if_exists, _options(r, alter=True))


def parse_drop(r: Any) -> DropSequence:
    r.next()
    r.next()
    names, if_exists, _ = r.drop_list(r.public_name)
    return DropSequence(tuple(names), if_exists)


def _options(r: Any, alter: bool) -> SequenceOptions:
    values: dict[str, Any] = {}
    while not r.done():
        if r.accept("AS"):
            values["type_name"] = r.name()
        elif r.accept("INCREMENT"):
            r.accept("BY")
            values["increment"] = _number(r)
        elif r.accept("START"):
            r.accept("WITH")
            values["start"] = _number(r)
        elif r.accept("MINVALUE"):
            values["minimum"] = _number(r)
        elif r.accept("MAXVALUE"):
            values["maximum"] = _number(r)
        elif r.accept("NO", "MINVALUE") or r.accept("NO", "MAXVALUE"):
            continue
        elif r.accept("NO", "CYCLE") or r.accept("CACHE"):
            if r.peek() is not None and r.peek().kind == "num":
                r.next()  # CACHE n: each process caches its own block anyway
        elif r.accept("CYCLE"):
            raise unsupported("CYCLE sequences")
        elif alter and r.accept("RESTART"):
            if r.accept("WITH") or (r.peek() is not None and r.peek().kind == "num"):
                values["restart"] = _number(r)
            else:
                values["restart_default"] = True
        elif r.accept("OWNED", "BY"):
            if r.accept("NONE"):
                values["owned_by"] = ""
            else:
                table, _, _column = r.name().rpartition(".")
                values["owned_by"] = table
        else:
            t = r.next()
            r.error(f'syntax error at or near "{t.text}"', t)
    return SequenceOptions(**values)


def _number(r: Any) -> int:
    sign = -1 if r.accept("-") else 1
    t = r.next()
    if t.kind != "num" or "." in t.text:
        r.error(f'syntax error at or near "{t.text}"', t)
    return sign * int(t.text)


# -- the catalog ----------------------------------------------------------------------------


def create(catalog: Catalog, stmt: CreateSequence, counter_suffix: str) -> tuple[Catalog, str]:
    """The catalog with the new sequence, and a notice (IF NOT EXISTS) or ""."""
    stmt = dataclasses.replace(stmt, name=schemas.creation_name(catalog, stmt.name))
    if stmt.name in catalog.sequences or catalog.relation_exists(stmt.name):
        if stmt.if_not_exists:
            return catalog, f'relation "{stmt.name}" already exists, skipping'
        raise SqlError(DUPLICATE_TABLE, f'relation "{stmt.name}" already exists')
    oid, catalog = catalog.allocate_id()
    seq = SequenceDef(stmt.name, oid + 16384, "", f"{oid + 16384}.{counter_suffix}")
    seq = _apply(seq, stmt.options, catalog, created=True)
    return catalog.with_sequence(seq), ""


def alter(catalog: Catalog, stmt: AlterSequence) -> tuple[Catalog, SequenceDef | None, str]:
    """The catalog with the sequence changed, the sequence (None if it does not exist and
    IF EXISTS said so) and a notice or ""."""
    stmt = dataclasses.replace(stmt, name=schemas.resolve(catalog, stmt.name))
    if stmt.rename_to is not None:
        renamed = stmt.rename_to
        if "." in renamed and schemas.schema_of(renamed) != schemas.schema_of(stmt.name):
            raise SqlError("0A000", "cannot move a sequence to another schema by RENAME")
        renamed = schemas.key(schemas.schema_of(stmt.name), schemas.bare(renamed))
        stmt = dataclasses.replace(stmt, rename_to=renamed)
    seq = catalog.sequences.get(stmt.name)
    if seq is None:
        if stmt.if_exists:
            return catalog, None, f'relation "{stmt.name}" does not exist, skipping'
        raise SqlError(UNDEFINED_TABLE, f'relation "{stmt.name}" does not exist')
    if stmt.rename_to is not None:
        catalog = rename(catalog, seq, stmt.rename_to)
        return catalog, catalog.sequences[stmt.rename_to], ""
    if stmt.options.owned_by is not None and _feeds_identity(catalog, seq):
        raise SqlError(
            "0A000",
            "cannot change ownership of identity sequence",
            detail=f'Sequence "{schemas.bare(seq.name)}" is linked to table '
            f'"{schemas.bare(seq.table)}".',
        )
    seq = _apply(seq, stmt.options, catalog, created=False)
    return catalog.with_sequence(seq), seq, ""


def _feeds_identity(catalog: Catalog, seq: SequenceDef) -> bool:
    """Whether ``seq`` is an identity column's sequence (part of the column, not owned)."""
    table = catalog.tables.get(seq.table)
    return table is not None and any(
        c.serial_sequence == seq.name and c.identity is not None for c in table.columns
    )


def rename(catalog: Catalog, seq: SequenceDef, new: str) -> Catalog:
    """The catalog with ``seq`` named ``new`` (ALTER SEQUENCE or ALTER TABLE ... RENAME TO).
    It keeps its counter; the serial and identity columns it feeds and the column defaults
    ``nextval('old')`` follow it, as Postgres's defaults name it by OID."""
    if catalog.relation_exists(new):
        raise SqlError(DUPLICATE_TABLE, f'relation "{new}" already exists')
    sequences = {name: s for name, s in catalog.sequences.items() if name != seq.name}
    sequences[new] = dataclasses.replace(seq, name=new)
    catalog = dataclasses.replace(catalog, sequences=sequences)
    for table in list(catalog.tables.values()):
        columns = tuple(_renamed_in_column(c, seq.name, new) for c in table.columns)
        if columns != table.columns:
            catalog = catalog.with_table(table.replace(columns=columns))
    return catalog


def _renamed_in_column(col: ColumnDef, old: str, new: str) -> ColumnDef:
    """``col`` with the sequence ``old`` called ``new`` where it names it."""
    if col.serial_sequence == old:
        col = dataclasses.replace(col, serial_sequence=new)
    m = _NEXTVAL_DEFAULT.match((col.default or "").strip())
    if m is not None and sequence_name(m.group(1)) == old:
        col = dataclasses.replace(col, default=f"nextval('{quote_ident(new)}'::regclass)")
    return col


def drop(catalog: Catalog, stmt: DropSequence) -> tuple[Catalog, list[str]]:
    notices = []
    sequences = dict(catalog.sequences)
    for name in stmt.names:
        name = schemas.resolve(catalog, name)
        seq = sequences.get(name)
        if seq is None:
            _check_kind(catalog, name, "sequence")
            if stmt.if_exists:
                notices.append(f'sequence "{name}" does not exist, skipping')
                continue
            raise SqlError(UNDEFINED_TABLE, f'sequence "{name}" does not exist')
        for table in catalog.tables.values():
            for col in table.columns:
                used = default_sequence(table, col, catalog)
                if used is not None and used.name == name:
                    raise SqlError(
                        "2BP01",
                        f"cannot drop sequence {name} because other objects depend on it",
                        detail=f"default value for column {col.name} of table {table.name} "
                        f"depends on sequence {name}",
                        hint="Use DROP ... CASCADE to drop the dependent objects too.",
                    )
        del sequences[name]
    return dataclasses.replace(catalog, sequences=sequences), notices


def _apply(seq: SequenceDef, o: SequenceOptions, catalog: Catalog, created: bool) -> SequenceDef:
    low, high = _TYPE_LIMITS.get((o.type_name or "bigint").lower(), (None, None))
    if low is None or high is None:
        raise SqlError(
            INVALID_PARAMETER_VALUE, "sequence type must be smallint, integer, or bigint"
        )
    increment = o.increment if o.increment is not None else seq.increment
    if increment == 0:
        raise SqlError(INVALID_PARAMETER_VALUE, "INCREMENT must not be zero")
    ascending = increment > 0
    minimum = o.minimum if o.minimum is not None else (1 if ascending else low)
    maximum = o.maximum if o.maximum is not None else (high if ascending else -1)
    if not created:
        minimum = o.minimum if o.minimum is not None else seq.minimum
        maximum = o.maximum if o.maximum is not None else seq.maximum
    start = (
        o.start
        if o.start is not None
        else ((minimum if ascending else maximum) if created else seq.start)
    )
    if minimum >= maximum:
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f"MINVALUE ({minimum}) must be less than MAXVALUE ({maximum})",
        )
    if not minimum <= start <= maximum:
        which = "less" if start < minimum else "greater"
        bound = "MINVALUE" if start < minimum else "MAXVALUE"
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f"START value ({start}) cannot be {which} than {bound} "
            f"({minimum if start < minimum else maximum})",
        )
    table = seq.table
    if o.owned_by is not None:
        if o.owned_by and o.owned_by not in catalog.tables:
            raise SqlError(UNDEFINED_TABLE, f'relation "{o.owned_by}" does not exist')
        table = o.owned_by
    if o.restart is not None and not created and not minimum <= o.restart <= maximum:
        raise SqlError(INVALID_PARAMETER_VALUE, f"RESTART value ({o.restart}) is out of range")
    if o.type_name is not None and o.type_name.lower() not in _TYPE_LIMITS:
        raise SqlError(SYNTAX_ERROR, f'type "{o.type_name}" does not exist')
    return dataclasses.replace(
        seq, start=start, increment=increment, minimum=minimum, maximum=maximum, table=table
    )


def apply_options(seq: SequenceDef, options: SequenceOptions, catalog: Catalog) -> SequenceDef:
    """A new sequence (an identity column's) with ``options`` applied and checked, as
    CREATE SEQUENCE applies its own."""
    return _apply(seq, options, catalog, created=True)


def alter_options(seq: SequenceDef, options: SequenceOptions, catalog: Catalog) -> SequenceDef:
    """An existing sequence with ``options`` applied and checked, as ALTER SEQUENCE does
    (``ALTER TABLE ... ALTER COLUMN c SET INCREMENT BY 2`` on an identity column)."""
    return _apply(seq, options, catalog, created=False)


_NEXTVAL_DEFAULT = re.compile(r"^nextval\('([^']+)'(?:::regclass)?\)$", re.IGNORECASE)


def default_sequence(table: TableDef, col: ColumnDef, catalog: Catalog) -> SequenceDef | None:
    """The sequence whose next value is the column's default: a serial or identity column's,
    or one named by a ``DEFAULT nextval('name')``; None for other columns."""
    name = col.serial_sequence
    if name is None and col.default is not None:
        m = _NEXTVAL_DEFAULT.match(col.default.strip())
        name = sequence_name(m.group(1)) if m is not None else None
        if name is not None and name not in catalog.sequences:
            return None
    if name is None:
        return None
    seq = catalog.sequences.get(name)
    if seq is None:  # a catalog from before sequences were recorded: the old counter key
        seq = SequenceDef(name, 0, table.name, f"{table.oid}.{col.id}")
    return seq
