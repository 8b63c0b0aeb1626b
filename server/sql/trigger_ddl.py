"""CREATE TRIGGER and DROP TRIGGER: row triggers that run a PL/pgSQL function.

A trigger lives in its table's definition (:attr:`TableDef.triggers`), so it goes with the
table (DROP TABLE, renames). The table writer fires it (server/planner/triggers.py). What is
supported: ``{BEFORE | AFTER} {INSERT | UPDATE [OF col, ...] | DELETE} [OR ...] ON table
[FOR EACH {ROW | STATEMENT}] [WHEN (condition)] EXECUTE {FUNCTION | PROCEDURE} f(args)``,
and ``ALTER TABLE ... {ENABLE | DISABLE} TRIGGER``; INSTEAD OF, TRUNCATE, REFERENCING and
constraint triggers are 0A000.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from percolator.server.sql import schemas, user_functions
from percolator.server.sql.bound import BExpr, OutCol
from percolator.server.sql.catalog import (
    FIRST_USER_OID,
    Catalog,
    ColumnDef,
    FunctionDef,
    TableDef,
    TriggerDef,
)
from percolator.server.sql.errors import (
    DEPENDENT_OBJECTS_STILL_EXIST,
    DUPLICATE_OBJECT,
    FEATURE_NOT_SUPPORTED,
    UNDEFINED_FUNCTION,
    UNDEFINED_OBJECT,
    WRONG_OBJECT_TYPE,
    SqlError,
    unsupported,
)
from percolator.server.sql.scope import Scope

if TYPE_CHECKING:
    from percolator.server.sql.binder import Binder
    from percolator.server.sql.utility import TokenReader

_EVENTS = ("insert", "update", "delete")
INVALID_OBJECT_DEFINITION = "42P17"


@dataclass(frozen=True)
class CreateTrigger:
    """``CREATE [OR REPLACE] TRIGGER name {BEFORE | AFTER} events ON table FOR EACH ROW
    EXECUTE FUNCTION f(args)``."""

    name: str
    before: bool
    events: tuple[str, ...]
    update_columns: tuple[str, ...]
    table: str
    function: str
    args: tuple[str, ...]
    or_replace: bool = False
    when: str | None = None
    """WHEN's condition, as SQL text over OLD and NEW."""
    row_level: bool = True


@dataclass(frozen=True)
class DropTrigger:
    """``DROP TRIGGER [IF EXISTS] name ON table [CASCADE | RESTRICT]``."""

    name: str
    table: str
    if_exists: bool


@dataclass(frozen=True)
class EnableTrigger:
    """``ALTER TABLE [IF EXISTS] table {ENABLE | DISABLE} TRIGGER {name | ALL | USER}``."""

    table: str
    enable: bool
    name: str | None
    """None: ALL or USER (every trigger made by CREATE TRIGGER)."""
    if_exists: bool = False


TriggerStatement = CreateTrigger | DropTrigger | EnableTrigger


# -- parsing (the reader is utility.TokenReader) ------------------------------------------------


def parse_create(r: TokenReader) -> CreateTrigger:
    r.expect("CREATE")
    or_replace = r.accept("OR", "REPLACE")
    if r.accept("CONSTRAINT"):
        raise unsupported("constraint triggers")
    r.expect("TRIGGER")
    name = r.name()
    if r.accept("INSTEAD", "OF"):
        raise unsupported("INSTEAD OF triggers")
    before = r.accept("BEFORE")
    if not before:
        r.expect("AFTER")
    events: list[str] = []
    columns: list[str] = []
    while True:
        event = r.next().upper
        if event == "TRUNCATE":
            raise unsupported("TRUNCATE triggers")
        if event.lower() not in _EVENTS:
            r.error(f'syntax error at or near "{event}"')
        events.append(event.lower())
        if event == "UPDATE" and r.accept("OF"):
            columns.append(r.name())
            while r.accept(","):
                columns.append(r.name())
        if not r.accept("OR"):
            break
    r.expect("ON")
    table = r.public_name()
    if r.at("FROM") or r.at("NOT") or r.at("DEFERRABLE") or r.at("INITIALLY"):
        raise unsupported("constraint trigger options")
    if r.at("REFERENCING"):
        raise unsupported("REFERENCING (transition tables)")
    statement_level = False
    if r.accept("FOR"):
        r.accept("EACH")
        statement_level = r.accept("STATEMENT")
        if not statement_level:
            r.expect("ROW")
    else:
        statement_level = True  # Postgres's default
    when = _when(r) if r.accept("WHEN") else None
    if statement_level and when is not None:
        raise unsupported("WHEN on statement-level triggers")
    if statement_level and columns:
        raise unsupported("UPDATE OF on statement-level triggers")
    r.expect("EXECUTE")
    if not r.accept("FUNCTION"):
        r.expect("PROCEDURE")
    function = r.public_name()
    args = _arguments(r)
    r.end()
    ordered = tuple(e for e in _EVENTS if e in events)
    return CreateTrigger(
        name, before, ordered, tuple(columns), table, function, args, or_replace, when,
        not statement_level,
    )  # fmt: skip


def _when(r: TokenReader) -> str:
    """WHEN ( condition ): the condition's text."""
    start = r.peek()
    r.expect("(")
    depth = 1
    while depth:
        t = r.next()
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
    assert start is not None
    end = r.tokens[r.i - 1]
    return r.sql[start.pos + 1 : end.pos].strip()


def _arguments(r: TokenReader) -> tuple[str, ...]:
    """A trigger's arguments: literals, passed to the function as text (TG_ARGV)."""
    r.expect("(")
    args: list[str] = []
    if r.accept(")"):
        return ()
    while True:
        t = r.next()
        if t.kind not in ("str", "num", "word", "ident"):
            r.error(f'syntax error at or near "{t.text}"', t)
        args.append(t.value if t.kind != "num" else t.text)
        if r.accept(")"):
            return tuple(args)
        r.expect(",")


def parse_drop(r: TokenReader) -> DropTrigger:
    r.expect("DROP", "TRIGGER")
    if_exists = r.accept("IF", "EXISTS")
    name = r.name()
    r.expect("ON")
    table = r.public_name()
    if not r.accept("CASCADE"):
        r.accept("RESTRICT")
    r.end()
    return DropTrigger(name, table, if_exists)


def is_enable(r: TokenReader) -> bool:
    """Whether ``r`` (at ALTER) reads ``ALTER TABLE ... {ENABLE | DISABLE} [ALWAYS |
    REPLICA] TRIGGER ...`` and nothing else."""
    words = [t.upper for t in r.tokens[r.i :]]
    if words[:2] != ["ALTER", "TABLE"]:
        return False
    rest = [w for w in words if w not in ("ALWAYS", "REPLICA")]
    return (
        any(
            rest[k] in ("ENABLE", "DISABLE") and rest[k + 1] == "TRIGGER"
            for k in range(len(rest) - 1)
        )
        and "," not in words
    )


def parse_enable(r: TokenReader) -> EnableTrigger:
    r.expect("ALTER", "TABLE")
    if_exists = r.accept("IF", "EXISTS")
    r.accept("ONLY")
    table = r.public_name()
    enable = r.accept("ENABLE")
    if not enable:
        r.expect("DISABLE")
    elif r.accept("ALWAYS") or r.accept("REPLICA"):
        pass  # session_replication_role is not kept: such a trigger fires as any other
    r.expect("TRIGGER")
    name: str | None = None
    if not (r.accept("ALL") or r.accept("USER")):
        name = r.name()
    r.end()
    return EnableTrigger(table, enable, name, if_exists)


# -- catalog changes -----------------------------------------------------------------------------


def create(catalog: Catalog, stmt: CreateTrigger) -> Catalog:
    """The catalog with the trigger on its table."""
    table = _table(catalog, stmt.table)
    fn = _function(catalog, stmt.function)
    column_ids = []
    for column in stmt.update_columns:
        found = table.find_column(column)
        if found is None:
            raise SqlError(
                "42703", f'column "{column}" of relation "{schemas.split(table.name)[1]}" '
                "does not exist",
            )  # fmt: skip
        column_ids.append(found.id)
    existing = next((t for t in table.triggers if t.name == stmt.name), None)
    if existing is not None and not stmt.or_replace:
        raise SqlError(
            DUPLICATE_OBJECT,
            f'trigger "{stmt.name}" for relation "{schemas.split(table.name)[1]}" already exists',
        )
    if existing is not None:
        oid = existing.oid
    else:
        trigger_id, catalog = catalog.allocate_id()
        oid = FIRST_USER_OID + trigger_id
    when = None if stmt.when is None else _parse_when(stmt.when).sql(dialect="postgres")
    trigger = TriggerDef(
        stmt.name, stmt.before, stmt.events, fn.signature, stmt.args, tuple(column_ids),
        oid=oid, when=when, row_level=stmt.row_level,
    )  # fmt: skip
    if trigger.when is not None:
        _check_when(catalog, table, trigger)
    kept = tuple(t for t in table.triggers if t.name != stmt.name)
    return catalog.with_table(table.replace(triggers=_ordered((*kept, trigger))))


def when_condition(binder: Binder, table: TableDef, text: str) -> BExpr:
    """A trigger's WHEN bound over the row ``OLD`` columns then ``NEW`` columns (each the
    table's, a row of NULLs where the event has none)."""
    columns = [
        OutCol(c.name, c.type, table.oid, i + 1, relation)
        for relation in ("old", "new")
        for i, c in enumerate(table.columns)
    ]
    return binder.exprs.bind_condition(
        _parse_when(text), Scope(columns, None, {"old", "new"}), "WHEN"
    )


def _parse_when(text: str) -> exp.Expression:
    """A WHEN condition's tree, its unquoted names folded as Postgres folds them."""
    select = sqlglot.parse_one(f"SELECT {text}", read="postgres")
    return normalize_identifiers(select, dialect="postgres").expressions[0]


def rename_column(table: TableDef, old: str, new: str) -> TableDef:
    """After column ``old`` became ``new``: the WHEN conditions that read it say so."""

    def rename(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.name == old:
            return exp.column(exp.to_identifier(new, quoted=new != new.lower()), table=n.table)
        return n

    triggers = tuple(
        t
        if t.when is None
        else dataclasses.replace(
            t, when=_parse_when(t.when).transform(rename).sql(dialect="postgres")
        )
        for t in table.triggers
    )
    return table.replace(triggers=triggers)


def check_column_drop(
    table: TableDef, gone: list[ColumnDef], cascade: bool, notices: list[str]
) -> None:
    """DROP COLUMN of columns a trigger reads (UPDATE OF, WHEN): 2BP01 without CASCADE, as
    in Postgres; with it, a notice for each trigger (dropped with the columns)."""
    ids, names = {c.id for c in gone}, {c.name for c in gone}
    users = sorted((t for t in table.triggers if reads(t, ids, names)), key=lambda t: t.oid)
    if not users:
        return
    bare = schemas.split(table.name)[1]
    if not cascade:
        column = gone[0].name
        raise SqlError(
            DEPENDENT_OBJECTS_STILL_EXIST,
            f"cannot drop column {column} of table {bare} because other objects depend on it",
            detail="\n".join(
                f"trigger {t.name} on table {bare} depends on column {column} of table {bare}"
                for t in users
            ),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    notices.extend(f"drop cascades to trigger {t.name} on table {bare}" for t in users)


def reads(trigger: TriggerDef, ids: set[int], names: set[str]) -> bool:
    """Whether ``trigger`` fires on an UPDATE OF one of the columns ``ids`` or its WHEN reads
    one named in ``names`` (DROP COLUMN drops such a trigger)."""
    if ids & set(trigger.update_column_ids):
        return True
    if trigger.when is None:
        return False
    return any(c.name in names for c in _parse_when(trigger.when).find_all(exp.Column))


def _check_when(catalog: Catalog, table: TableDef, trigger: TriggerDef) -> None:
    """Postgres's checks of a WHEN condition: it binds over OLD and NEW, does not read OLD
    in an INSERT trigger nor NEW in a DELETE one (42P17), and has no subquery (0A000)."""
    from percolator.server.sql.binder import Binder  # it reads the catalog this module edits
    from percolator.server.sql.expr_binder import Params

    assert trigger.when is not None
    node = _parse_when(trigger.when)
    parameter = node.find(exp.Parameter, exp.Placeholder)
    if parameter is not None:
        raise SqlError("42P02", f"there is no parameter ${parameter.name}")
    if node.find(exp.Subquery, exp.Exists, exp.Select) is not None:
        raise SqlError(FEATURE_NOT_SUPPORTED, "cannot use subquery in trigger WHEN condition")
    qualifiers = {c.table.lower() for c in node.find_all(exp.Column)}
    for event, side in (("insert", "old"), ("delete", "new")):
        if event in trigger.events and side in qualifiers:
            raise SqlError(
                INVALID_OBJECT_DEFINITION,
                f"{event.upper()} trigger's WHEN condition cannot reference {side.upper()} values",
            )
    when_condition(Binder(catalog, Params()), table, trigger.when)


def _ordered(triggers: tuple[TriggerDef, ...]) -> tuple[TriggerDef, ...]:
    """Postgres fires a table's triggers of one kind in the order of their names."""
    return tuple(sorted(triggers, key=lambda t: t.name))


def _table(catalog: Catalog, name: str) -> TableDef:
    key = name if "." in name else schemas.resolve(catalog, name)
    if key in catalog.views:
        raise SqlError(
            WRONG_OBJECT_TYPE,
            f'"{name}" is a view',
            detail="Views cannot have row-level BEFORE or AFTER triggers.",
        )
    return catalog.table(key)


def _function(catalog: Catalog, name: str) -> FunctionDef:
    schema, bare = schemas.split(name) if "." in name else (None, name)
    found = [f for f in user_functions.candidates(catalog, bare, schema) if not f.args]
    if not found:
        raise SqlError(UNDEFINED_FUNCTION, f"function {bare}() does not exist")
    fn = found[0]
    if not fn.trigger:
        raise SqlError(INVALID_OBJECT_DEFINITION, f"function {bare} must return type trigger")
    return fn


def drop(catalog: Catalog, stmt: DropTrigger) -> tuple[Catalog, list[str]]:
    """The catalog without the trigger, and the notice of IF EXISTS."""
    table = _table(catalog, stmt.table)
    if not any(t.name == stmt.name for t in table.triggers):
        bare = schemas.split(table.name)[1]
        if stmt.if_exists:
            return catalog, [
                f'trigger "{stmt.name}" for relation "{bare}" does not exist, skipping'
            ]
        raise SqlError(UNDEFINED_OBJECT, f'trigger "{stmt.name}" for table "{bare}" does not exist')
    kept = tuple(t for t in table.triggers if t.name != stmt.name)
    return catalog.with_table(table.replace(triggers=kept)), []


def enable(catalog: Catalog, stmt: EnableTrigger) -> tuple[Catalog, list[str]]:
    """The catalog with the table's trigger (or all its triggers) enabled or disabled."""
    key = stmt.table if "." in stmt.table else schemas.resolve(catalog, stmt.table)
    if stmt.if_exists and key not in catalog.tables:
        return catalog, [f'relation "{stmt.table}" does not exist, skipping']
    table = _table(catalog, stmt.table)
    if stmt.name is not None and not any(t.name == stmt.name for t in table.triggers):
        bare = schemas.split(table.name)[1]
        raise SqlError(UNDEFINED_OBJECT, f'trigger "{stmt.name}" for table "{bare}" does not exist')
    triggers = tuple(
        dataclasses.replace(t, enabled=stmt.enable)
        if stmt.name is None or t.name == stmt.name
        else t
        for t in table.triggers
    )
    return catalog.with_table(table.replace(triggers=triggers)), []


def using(catalog: Catalog, signature: str) -> list[tuple[TableDef, TriggerDef]]:
    """The triggers that run the function ``signature`` (DROP FUNCTION refuses while any
    do, or drops them with CASCADE)."""
    return [
        (table, trigger)
        for table in catalog.tables.values()
        for trigger in table.triggers
        if trigger.function == signature
    ]


def definition(catalog: Catalog, oid: object, pretty: bool) -> str | None:
    """pg_get_triggerdef: the trigger's CREATE TRIGGER, as Postgres prints it (the table
    schema-qualified unless ``pretty``); None for an OID that is no trigger."""
    for table in catalog.tables.values():
        for t in table.triggers:
            if t.oid == oid:
                return _definition(catalog, table, t, pretty)
    return None


def _definition(catalog: Catalog, table: TableDef, t: TriggerDef, pretty: bool) -> str:
    from percolator.server.sql.quoting import quote_ident, quote_literal

    events = []
    for e in sorted(t.events, key=("insert", "delete", "update").index):  # tgtype's bit order
        text = e.upper()
        if e == "update" and t.update_column_ids:
            columns = [table.column_by_id(c).name for c in t.update_column_ids]
            text += " OF " + ", ".join(quote_ident(c) for c in columns)
        events.append(text)
    schema, bare = schemas.split(table.name)
    on = quote_ident(bare) if pretty else f"{quote_ident(schema)}.{quote_ident(bare)}"
    fn = catalog.functions.get(t.function)
    fn_name = schemas.split(fn.name)[1] if fn is not None else "?"
    args = ", ".join(quote_literal(a) for a in t.args)
    when = f" WHEN ({t.when})" if t.when is not None else ""
    return (
        f"CREATE TRIGGER {quote_ident(t.name)} {'BEFORE' if t.before else 'AFTER'} "
        f"{' OR '.join(events)} ON {on} FOR EACH {'ROW' if t.row_level else 'STATEMENT'}"
        f"{when} EXECUTE FUNCTION {fn_name}({args})"
    )
