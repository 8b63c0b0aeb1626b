"""User-defined enum types: CREATE TYPE ... AS ENUM, ALTER TYPE ... ADD / RENAME VALUE, DROP
TYPE (read by keyword, as sqlglot does not parse them), and enum_range / enum_first /
enum_last.

A type is an :class:`~percolator.server.sql.types.EnumType` in the catalog (its OID and its
array type's OID come from the catalog's id counter, as tables' do). Columns store the label,
and keys the label's sort order, both of which ALTER TYPE leaves alone for existing values:
ADD VALUE BEFORE/AFTER places the new label between its neighbours' sort orders (as
Postgres's pg_enum.enumsortorder does) and RENAME VALUE keeps the sort order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from percolator.server.sql import functions, schemas
from percolator.server.sql import types as T
from percolator.server.sql.catalog import FIRST_USER_OID, Catalog
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_OBJECT,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    UNDEFINED_OBJECT,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import EnumType, SqlType

INVALID_NAME = "42602"
NAMEDATALEN = 64


@dataclass(frozen=True)
class CreateEnum:
    name: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class DropType:
    names: tuple[str, ...]
    if_exists: bool
    cascade: bool


@dataclass(frozen=True)
class AlterEnum:
    """ALTER TYPE name ADD VALUE / RENAME VALUE / RENAME TO."""

    name: str
    add: str | None = None
    if_not_exists: bool = False
    before: str | None = None
    after: str | None = None
    rename_value: tuple[str, str] | None = None
    rename_to: str | None = None


EnumStatement = CreateEnum | DropType | AlterEnum


# -- parsing (the reader is utility.TokenReader) ------------------------------------------------


def _label(r: Any) -> str:
    t = r.next()
    if t.kind != "str":
        r.error(f'syntax error at or near "{t.text}"', t)
    return t.value


def parse_create(r: Any) -> CreateEnum:
    """``CREATE TYPE name AS ENUM ('a', ...)``; the other CREATE TYPE forms get 0A000."""
    r.expect("CREATE", "TYPE")
    name = r.public_name()
    if not r.accept("AS"):
        raise unsupported("CREATE TYPE for base types (only CREATE TYPE ... AS ENUM)")
    if r.accept("RANGE"):
        raise unsupported("CREATE TYPE ... AS RANGE (range types)")
    if not r.accept("ENUM"):
        raise unsupported("CREATE TYPE ... AS (...) (composite types)")
    r.expect("(")
    labels: list[str] = []
    if not r.accept(")"):
        labels.append(_label(r))
        while r.accept(","):
            labels.append(_label(r))
        r.expect(")")
    r.end()
    return CreateEnum(name, tuple(labels))


def parse_drop(r: Any) -> DropType:
    """``DROP TYPE [IF EXISTS] name [, ...] [CASCADE | RESTRICT]``."""
    r.expect("DROP", "TYPE")
    names, if_exists, cascade = r.drop_list(r.public_name)
    return DropType(tuple(names), if_exists, cascade)


def parse_alter(r: Any) -> AlterEnum:
    """``ALTER TYPE name ADD VALUE [IF NOT EXISTS] 'x' [BEFORE | AFTER 'y']``,
    ``... RENAME VALUE 'a' TO 'b'``, ``... RENAME TO new``."""
    r.expect("ALTER", "TYPE")
    name = r.public_name()
    if r.accept("ADD", "VALUE"):
        if_not_exists = r.accept("IF", "NOT", "EXISTS")
        label = _label(r)
        before = _label(r) if r.accept("BEFORE") else None
        after = _label(r) if before is None and r.accept("AFTER") else None
        r.end()
        return AlterEnum(name, add=label, if_not_exists=if_not_exists, before=before, after=after)
    if r.accept("RENAME", "VALUE"):
        old = _label(r)
        r.expect("TO")
        new = _label(r)
        r.end()
        return AlterEnum(name, rename_value=(old, new))
    if r.accept("RENAME", "TO"):
        new_name = r.public_name()
        r.end()
        return AlterEnum(name, rename_to=new_name)
    t = r.peek()
    raise unsupported(f"ALTER TYPE ... {t.text.upper() if t else ''}".rstrip())


# -- catalog changes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EnumResult:
    """The catalog an enum statement leads to, its command tag and notices, and the data work
    of the columns DROP TYPE ... CASCADE drops."""

    catalog: Catalog
    tag: str
    notices: list[str]
    actions: list[Any] = dataclasses.field(default_factory=list)


def find(catalog: Catalog, name: str) -> EnumType:
    """The enum type ``name``, or 42704."""
    found = catalog.enums.get(name)
    if found is None:
        raise SqlError(UNDEFINED_OBJECT, f'type "{name}" does not exist')
    return found


def by_oid(catalog: Catalog, oid: int) -> SqlType | None:
    """The enum type (or array of one) with this OID in the catalog."""
    for e in catalog.enums.values():
        if e.oid == oid:
            return SqlType(e)
        if e.array_oid == oid:
            return SqlType(e, array=True)
    return None


def _check_label(label: str) -> None:
    if not label or len(label.encode()) > NAMEDATALEN - 1:
        raise SqlError(
            INVALID_NAME,
            f'invalid enum label "{label}"',
            detail=f"Labels must be {NAMEDATALEN - 1} bytes or less.",
        )


def _type_exists(catalog: Catalog, name: str) -> bool:
    # Tables, views and sequences have row types of the same name in Postgres.
    return (
        name in catalog.enums
        or name in catalog.tables
        or name in catalog.views
        or name in catalog.sequences
        or T.lookup_type_name(name) is not None
    )


def create(catalog: Catalog, stmt: CreateEnum) -> Catalog:
    if _type_exists(catalog, stmt.name):
        raise SqlError(DUPLICATE_OBJECT, f'type "{stmt.name}" already exists')
    seen: set[str] = set()
    for label in stmt.labels:
        _check_label(label)
        if label in seen:
            # Postgres reports pg_enum's unique index.
            raise SqlError(
                "23505",
                'duplicate key value violates unique constraint "pg_enum_typid_label_index"',
                detail=f"Key (enumtypid, enumlabel)=(?, {label}) already exists.",
            )
        seen.add(label)
    type_id, catalog = catalog.allocate_id()
    array_id, catalog = catalog.allocate_id()
    orders = tuple(float(i + 1) for i in range(len(stmt.labels)))
    enum = EnumType(
        FIRST_USER_OID + type_id, FIRST_USER_OID + array_id, stmt.name, stmt.labels, orders
    )
    return catalog.with_enum(enum)


def _not_a_label(label: str) -> SqlError:
    return SqlError(INVALID_PARAMETER_VALUE, f'"{label}" is not an existing enum label')


def _add_value(enum: EnumType, stmt: AlterEnum, notices: list[str]) -> EnumType:
    label = stmt.add
    assert label is not None
    _check_label(label)
    if enum.has_label(label):
        if stmt.if_not_exists:
            notices.append(f'enum label "{label}" already exists, skipping')
            return enum
        raise SqlError(DUPLICATE_OBJECT, f'enum label "{label}" already exists')
    labels, orders = list(enum.labels), list(enum.sort_orders)  # both in sort order
    neighbour = stmt.before or stmt.after
    if neighbour is None:
        at, order = len(labels), (orders[-1] + 1 if orders else 1.0)
    else:
        if not enum.has_label(neighbour):
            raise _not_a_label(neighbour)
        i = labels.index(neighbour)
        at = i if stmt.before is not None else i + 1
        lo = orders[at - 1] if at > 0 else None
        hi = orders[at] if at < len(orders) else None
        # Postgres: one below the first, one above the last, else halfway between neighbours.
        if lo is None:
            order = hi - 1  # type: ignore[operator]
        elif hi is None:
            order = lo + 1
        else:
            order = (lo + hi) / 2
        if order in (lo, hi):
            # Postgres renumbers the labels here; that would change the sort orders that keys
            # hold, so it is refused (after some 50 insertions at the same place).
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                f'no room left for another enum label before "{labels[at]}" in type '
                f"{enum.type_name}",
            )
    labels.insert(at, label)
    orders.insert(at, order)
    return dataclasses.replace(enum, labels=tuple(labels), sort_orders=tuple(orders))


def alter(catalog: Catalog, stmt: AlterEnum) -> tuple[Catalog, list[str]]:
    enum = find(catalog, stmt.name)
    notices: list[str] = []
    if stmt.add is not None:
        new = _add_value(enum, stmt, notices)
    elif stmt.rename_value is not None:
        old, label = stmt.rename_value
        if not enum.has_label(old):
            raise _not_a_label(old)
        if enum.has_label(label):
            raise SqlError(DUPLICATE_OBJECT, f'enum label "{label}" already exists')
        _check_label(label)
        labels = tuple(label if x == old else x for x in enum.labels)
        new = dataclasses.replace(enum, labels=labels)
    else:
        assert stmt.rename_to is not None
        if _type_exists(catalog, stmt.rename_to):
            raise SqlError(DUPLICATE_OBJECT, f'type "{stmt.rename_to}" already exists')
        new = dataclasses.replace(enum, type_name=stmt.rename_to)
    if new == enum:
        return catalog, notices
    return catalog.with_enum(new), notices


def _uses(t: SqlType, enum: EnumType) -> bool:
    return isinstance(t.id, EnumType) and t.id.oid == enum.oid


def dependents(catalog: Catalog, enum: EnumType) -> list[tuple[str, str]]:
    """The (table, column) pairs whose column is of the type or an array of it."""
    return [
        (t.name, c.name) for t in catalog.tables.values() for c in t.columns if _uses(c.type, enum)
    ]


def drop(
    catalog: Catalog,
    stmt: DropType,
    apply_ddl: Callable[[Catalog, str], Any],
) -> EnumResult:
    """DROP TYPE; with CASCADE the columns of the type are dropped first (``apply_ddl`` runs
    an ALTER TABLE ... DROP COLUMN and returns its DdlResult), as Postgres does."""
    notices: list[str] = []
    actions: list[Any] = []
    for name in stmt.names:
        enum = catalog.enums.get(name)
        if enum is None:
            if stmt.if_exists:
                notices.append(f'type "{name}" does not exist, skipping')
                continue
            raise SqlError(UNDEFINED_OBJECT, f'type "{name}" does not exist')
        deps = dependents(catalog, enum)
        views = [
            v.name for v in catalog.views.values() if any(_uses(c.type, enum) for c in v.columns)
        ]
        if deps or views:
            lines = [f"column {c} of table {t} depends on type {name}" for t, c in deps]
            lines += [f"view {v} depends on type {name}" for v in views]
            if not stmt.cascade:
                raise SqlError(
                    DEPENDENT_OBJECTS_STILL_EXIST,
                    f"cannot drop type {name} because other objects depend on it",
                    detail="\n".join(lines),
                    hint="Use DROP ... CASCADE to drop the dependent objects too.",
                )
            if views:
                raise unsupported("DROP TYPE ... CASCADE of a type a view uses")
            for table, column in deps:
                result = apply_ddl(catalog, f"ALTER TABLE {_q(table)} DROP COLUMN {_q(column)}")
                catalog = result.catalog
                actions.extend(result.actions)
            if len(lines) == 1:
                notices.append(f"drop cascades to {lines[0].split(' depends on ')[0]}")
            else:
                listing = "\n".join(x.split(" depends on ")[0] for x in lines)
                notices.append(f"drop cascades to {len(lines)} other objects\n{listing}")
        catalog = catalog.without_enum(name)
    return EnumResult(catalog, "DROP TYPE", notices, actions)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def apply(
    catalog: Catalog, stmt: EnumStatement, apply_ddl: Callable[[Catalog, str], Any]
) -> EnumResult:
    """The effect of one enum statement on the catalog (its names made catalog keys first:
    server/sql/schemas.py)."""
    if isinstance(stmt, CreateEnum):
        stmt = dataclasses.replace(stmt, name=schemas.creation_name(catalog, stmt.name))
    elif isinstance(stmt, AlterEnum):
        stmt = dataclasses.replace(stmt, name=schemas.resolve_type(catalog, stmt.name))
        if stmt.rename_to is not None:
            schema = schemas.schema_of(stmt.name)
            renamed = schemas.key(schema, schemas.bare(stmt.rename_to))
            stmt = dataclasses.replace(stmt, rename_to=renamed)
    else:
        names = tuple(schemas.resolve_type(catalog, n) for n in stmt.names)
        stmt = dataclasses.replace(stmt, names=names)
    if isinstance(stmt, CreateEnum):
        return EnumResult(create(catalog, stmt), "CREATE TYPE", [])
    if isinstance(stmt, AlterEnum):
        after, notices = alter(catalog, stmt)
        return EnumResult(after, "ALTER TYPE", notices)
    return drop(catalog, stmt, apply_ddl)


# -- functions -----------------------------------------------------------------------------------


def _enum_arg(arg_types: Sequence[SqlType]) -> EnumType | None:
    """The enum type of enum_range & co.'s arguments (an untyped NULL takes the other's)."""
    found = [t.id for t in arg_types if isinstance(t.id, EnumType) and not t.array]
    if not found or any(
        not (isinstance(t.id, EnumType) and t.id == found[0]) and t.id is not T.TypeId.UNKNOWN
        for t in arg_types
    ):
        return None
    return found[0]


@functions.register("enum_first")
def _first_last(arg_types: Sequence[SqlType]) -> functions.FunctionImpl | None:
    # The argument's value is ignored (only its type matters), so NULL::mood works.
    enum = _enum_arg(arg_types) if len(arg_types) == 1 else None
    if enum is None:
        return None
    return functions.FunctionImpl(lambda _v: _label_at(enum, 0), SqlType(enum), strict=False)


@functions.register("enum_last")
def _last(arg_types: Sequence[SqlType]) -> functions.FunctionImpl | None:
    enum = _enum_arg(arg_types) if len(arg_types) == 1 else None
    if enum is None:
        return None
    return functions.FunctionImpl(lambda _v: _label_at(enum, -1), SqlType(enum), strict=False)


def _label_at(enum: EnumType, i: int) -> str:
    """enum_first / enum_last: 55000 for an enum with no labels, as in Postgres."""
    if not enum.labels:
        raise SqlError("55000", f"enum {enum.type_name} contains no values")
    return enum.labels[i]


@functions.register("enum_range")
def _range(arg_types: Sequence[SqlType]) -> functions.FunctionImpl | None:
    enum = _enum_arg(arg_types) if len(arg_types) in (1, 2) else None
    if enum is None:
        return None
    t = SqlType(enum)
    if len(arg_types) == 1:
        return functions.FunctionImpl(lambda _v: list(enum.labels), t.array_of(), strict=False)

    def between(lo: str | None, hi: str | None) -> list[str]:
        # NULL bounds mean the first and the last label; a reversed range is empty.
        i = 0 if lo is None else enum.labels.index(lo)
        j = len(enum.labels) - 1 if hi is None else enum.labels.index(hi)
        return list(enum.labels[i : j + 1])

    return functions.FunctionImpl(between, t.array_of(), strict=False, args=(t, t))


__all__ = [
    "AlterEnum",
    "CreateEnum",
    "DropType",
    "EnumStatement",
    "apply",
    "by_oid",
    "dependents",
    "find",
]
