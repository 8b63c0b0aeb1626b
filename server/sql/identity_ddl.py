"""``ALTER TABLE ... ALTER COLUMN c`` actions on identity columns, which sqlglot cannot read:
``ADD GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(options)]``, ``SET GENERATED ...``,
``SET <sequence option>``, ``RESTART [[WITH] n]`` and ``DROP IDENTITY [IF EXISTS]``.

:func:`parse` reads one action's tokens (``alter_commands`` splits the action list) into an
:class:`AlterIdentity` node; :func:`apply` changes the column and its sequence in the catalog,
with Postgres's checks and SQLSTATEs. An identity column's sequence is internal to it: it is
made with the column's integer type (so its bounds are the type's) and dropped with DROP
IDENTITY.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from percolator.server.sql import schemas, sequence_ddl
from percolator.server.sql.catalog import Catalog, ColumnDef, SequenceDef, TableDef
from percolator.server.sql.errors import SYNTAX_ERROR, SqlError, unsupported
from percolator.server.sql.types import TypeId
from percolator.server.sql.utility import TokenReader

OBJECT_NOT_IN_PREREQUISITE_STATE = "55000"
_INTEGER_TYPES = frozenset({TypeId.INT2, TypeId.INT4, TypeId.INT8})


class AlterIdentity(exp.Expression):
    """One identity action on column ``this``: ``add`` ('a' / 'd': ADD GENERATED),
    ``generation`` ('a' / 'd': SET GENERATED), ``options`` (a SequenceOptions: SET options,
    RESTART), ``drop`` (DROP IDENTITY) with ``if_exists``."""

    arg_types = {
        "this": True,
        "add": False,
        "generation": False,
        "options": False,
        "drop": False,
        "if_exists": False,
    }


def parse(piece: list[Any]) -> AlterIdentity | None:
    """``ALTER [COLUMN] c <identity action>`` as a node, or None when the tokens are not one
    (other ALTER COLUMN actions are sqlglot's)."""
    words = [t.upper for t in piece]
    if words[:1] != ["ALTER"] or len(piece) < 3:
        return None
    i = 2 if words[1] == "COLUMN" else 1
    column = piece[i]
    if column.kind not in ("word", "ident"):
        return None
    r = _Reader(piece[i + 1 :])
    name = exp.to_identifier(column.value, quoted=True)
    if r.accept("ADD", "GENERATED"):
        kind = _generation(r)
        r.expect("AS", "IDENTITY")
        options = sequence_ddl.SequenceOptions()
        if r.accept("("):
            options = sequence_ddl.SequenceOptions(**_options(r, closing=")"))
            r.expect(")")
        r.end()
        return AlterIdentity(this=name, add=kind, options=options)
    if r.accept("DROP", "IDENTITY"):
        if_exists = r.accept("IF", "EXISTS")
        r.end()
        return AlterIdentity(this=name, drop=True, if_exists=if_exists)
    if not (r.at("SET", "GENERATED") or r.at("RESTART") or (r.at("SET") and _seq_option(r))):
        return None
    generation = None
    values: dict[str, Any] = {}
    while not r.done():
        if r.accept("SET", "GENERATED"):
            generation = _generation(r)
        elif r.accept("RESTART"):
            if r.accept("WITH") or r.peek_kind() == "num":
                values["restart"] = r.number()
            else:
                values["restart_default"] = True
        elif r.accept("SET"):
            values.update(_options(r, closing="SET", one=True))
        else:
            r.fail()
    options = sequence_ddl.SequenceOptions(**values)
    return AlterIdentity(this=name, generation=generation, options=options)


def _seq_option(r: _Reader) -> bool:
    nxt = r.peek_word(1)
    return nxt in ("INCREMENT", "START", "MINVALUE", "MAXVALUE", "NO", "CYCLE", "CACHE")


def _generation(r: _Reader) -> str:
    if r.accept("ALWAYS"):
        return "a"
    r.expect("BY", "DEFAULT")
    return "d"


def _options(r: _Reader, closing: str, one: bool = False) -> dict[str, Any]:
    """Sequence options up to ``closing`` (or one option, for SET), as SequenceOptions'
    fields."""
    values: dict[str, Any] = {}
    while not r.done() and not r.at(closing):
        if r.accept("INCREMENT"):
            r.accept("BY")
            values["increment"] = r.number()
        elif r.accept("START"):
            r.accept("WITH")
            values["start"] = r.number()
        elif r.accept("MINVALUE"):
            values["minimum"] = r.number()
        elif r.accept("MAXVALUE"):
            values["maximum"] = r.number()
        elif r.accept("NO", "MINVALUE") or r.accept("NO", "MAXVALUE") or r.accept("NO", "CYCLE"):
            pass
        elif r.accept("CACHE"):
            r.number()  # each process caches its own block anyway
        elif r.accept("CYCLE"):
            raise unsupported("CYCLE sequences")
        elif r.accept("SEQUENCE", "NAME"):
            raise unsupported("identity SEQUENCE NAME")
        else:
            r.fail()
        if one:
            break
    return values


class _Reader(TokenReader):
    """Tokens of one action, read left to right; a syntax error names the token it met."""

    def __init__(self, tokens: list[Any]) -> None:
        super().__init__("", tokens)

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail()

    def peek_kind(self) -> str | None:
        return None if self.done() else self.tokens[self.i].kind

    def peek_word(self, ahead: int) -> str | None:
        j = self.i + ahead
        return self.tokens[j].upper if j < len(self.tokens) else None

    def number(self) -> int:
        if self.peek_kind() != "num" or "." in self.tokens[self.i].text:
            self.fail()
        self.i += 1
        return int(self.tokens[self.i - 1].text)

    def end(self) -> None:
        if not self.done():
            self.fail()

    def fail(self) -> None:
        text = "end of input" if self.done() else f'"{self.tokens[self.i].text}"'
        raise SqlError(SYNTAX_ERROR, f"syntax error at or near {text}")


def apply(
    catalog: Catalog, table: TableDef, action: AlterIdentity, notices: list[str]
) -> tuple[Catalog, tuple[str, int | None] | None]:
    """The catalog with the action applied, and the sequence to restart (its name and the
    value, None for its start) if the action says RESTART."""
    col = table.column(action.this.name)
    relation = schemas.bare(table.name)
    where = f'column "{col.name}" of relation "{relation}"'
    if action.args.get("add"):
        return _add(catalog, table, col, action, where), None
    if col.identity is None:
        if action.args.get("drop") and action.args.get("if_exists"):
            notices.append(f"{where} is not an identity column, skipping")
            return catalog, None
        raise SqlError(OBJECT_NOT_IN_PREREQUISITE_STATE, f"{where} is not an identity column")
    seq = catalog.sequences.get(col.serial_sequence or "")
    if action.args.get("drop"):
        catalog = _with_column(
            catalog, table, dataclasses.replace(col, identity=None, serial_sequence=None)
        )
        if seq is not None:
            sequences = {n: s for n, s in catalog.sequences.items() if n != seq.name}
            catalog = dataclasses.replace(catalog, sequences=sequences)
        return catalog, None
    changed = col
    if (generation := action.args.get("generation")) is not None:
        changed = dataclasses.replace(col, identity=generation)
    catalog = _with_column(catalog, table, changed)
    options: sequence_ddl.SequenceOptions = action.args.get("options")
    restart = None
    if seq is not None and options != sequence_ddl.SequenceOptions():
        seq = sequence_ddl.alter_options(seq, options, catalog)
        catalog = catalog.with_sequence(seq)
        if options.restart is not None or options.restart_default:
            restart = (seq.name, options.restart)
    return catalog, restart


def _add(
    catalog: Catalog, table: TableDef, col: ColumnDef, action: AlterIdentity, where: str
) -> Catalog:
    """ADD GENERATED ... AS IDENTITY: a new sequence for an existing NOT NULL integer column
    without a default; the rows keep their values."""
    if col.type.id not in _INTEGER_TYPES or col.type.array:
        raise SqlError("22023", "identity column type must be smallint, integer, or bigint")
    if col.identity is not None:
        raise SqlError(OBJECT_NOT_IN_PREREQUISITE_STATE, f"{where} is already an identity column")
    if col.default is not None:
        raise SqlError(OBJECT_NOT_IN_PREREQUISITE_STATE, f"{where} already has a default value")
    if not col.not_null:
        raise SqlError(
            OBJECT_NOT_IN_PREREQUISITE_STATE,
            f"{where} must be declared NOT NULL before identity can be added",
        )
    name = _free_sequence_name(catalog, f"{table.name}_{col.name}_seq")
    oid, catalog = catalog.allocate_id()
    options = dataclasses.replace(action.args["options"], type_name=str(col.type))
    seq = sequence_ddl.apply_options(SequenceDef(name, oid + 16384, table.name), options, catalog)
    catalog = catalog.with_sequence(seq)
    return _with_column(
        catalog, table, dataclasses.replace(col, identity=action.args["add"], serial_sequence=name)
    )


def _free_sequence_name(catalog: Catalog, name: str) -> str:
    """``name``, or with the first number appended that makes it unused (as Postgres picks
    the names of the sequences it makes)."""
    candidate, n = name, 0
    while catalog.relation_exists(candidate):
        n += 1
        candidate = f"{name}{n}"
    return candidate


def _with_column(catalog: Catalog, table: TableDef, col: ColumnDef) -> Catalog:
    table = catalog.table(table.name)
    cols = tuple(col if c.id == col.id else c for c in table.columns)
    return catalog.with_table(table.replace(columns=cols))
