"""The statement tree of a PL/pgSQL block, as the parser makes it and the executor runs it.

Every node is immutable: a parsed body is cached and shared by every run of it. SQL text is
kept as Postgres's PL/pgSQL keeps it: the statement (or ``SELECT <expression>``) with each
reference to a variable replaced by a parameter ``$n`` (:class:`Sql`), whose value the
executor binds from the variable (:class:`VarRef`) when it runs the statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class VarRef:
    """A variable's slot in the frame, and the field of a record variable (or None)."""

    slot: int
    field: str | None = None


@dataclass(frozen=True, slots=True)
class Sql:
    """A piece of SQL: a whole statement, or an expression run as ``SELECT <expression>``."""

    text: str
    """What runs: variables replaced by ``$1``, ``$2``, ... (one per distinct reference)."""
    params: tuple[VarRef, ...]
    """What ``$1``, ``$2``, ... stand for."""
    source: str
    """As written in the body (error context)."""
    pos: int
    """Offset of ``source`` in the body."""
    prefix: int = 0
    """Characters ``text`` has before ``source`` begins (``SELECT `` of an expression)."""
    substituted: bool = False
    """Whether variables were replaced before any SQL error position (then unmappable)."""
    checks: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(variable, tables): a variable named without qualification where these tables'
    columns are visible too; one of them having a column of that name makes the reference
    ambiguous (Postgres's default ``plpgsql.variable_conflict = error``)."""


@dataclass(frozen=True, slots=True)
class VarDecl:
    name: str
    slot: int
    type_text: str | None
    """The type as written (None: ``record``; %TYPE of a variable is resolved to its type)."""
    kind: str = "scalar"
    """scalar, record (untyped until assigned), rowtype (``table%ROWTYPE``), column
    (``table.column%TYPE``: ``type_text`` is ``table.column``)."""
    constant: bool = False
    not_null: bool = False
    default: Sql | None = None
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Stmt:
    line: int
    pos: int


@dataclass(frozen=True, slots=True)
class Handler:
    conditions: tuple[tuple[str, str], ...]
    """(kind, value): ("name", "others"), ("name", "unique_violation"), ("sqlstate", "23505")."""
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    label: str | None
    decls: tuple[VarDecl, ...]
    body: tuple[Stmt, ...]
    handlers: tuple[Handler, ...] = ()
    error_slots: tuple[int, int] | None = None
    """The slots of SQLSTATE and SQLERRM in the handlers."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a value goes: a variable, a record's field, or an array element."""

    name: str
    ref: VarRef
    subscripts: tuple[Sql, ...] = ()


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    target: Target
    expr: Sql


@dataclass(frozen=True, slots=True)
class If(Stmt):
    branches: tuple[tuple[Sql, tuple[Stmt, ...]], ...]
    otherwise: tuple[Stmt, ...] | None


@dataclass(frozen=True, slots=True)
class Case(Stmt):
    selector: Sql | None
    selector_slot: int | None
    """Where a simple CASE keeps its selector's value (the WHENs compare ``$n`` to it)."""
    whens: tuple[tuple[Sql, tuple[Stmt, ...]], ...]
    otherwise: tuple[Stmt, ...] | None


@dataclass(frozen=True, slots=True)
class Loop(Stmt):
    label: str | None
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class While(Stmt):
    label: str | None
    condition: Sql
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class ForInt(Stmt):
    label: str | None
    var: VarDecl
    lower: Sql
    upper: Sql
    step: Sql | None
    reverse: bool
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class ForQuery(Stmt):
    label: str | None
    targets: tuple[Target, ...]
    query: Sql | None
    """A static query, or None with ``dynamic`` (FOR ... IN EXECUTE)."""
    dynamic: Sql | None
    using: tuple[Sql, ...]
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class ForEach(Stmt):
    label: str | None
    targets: tuple[Target, ...]
    slice: int
    array: Sql
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Exit(Stmt):
    label: str | None
    condition: Sql | None
    is_continue: bool = False


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    expr: Sql | None


@dataclass(frozen=True, slots=True)
class RaiseOption:
    name: str
    """message, detail, hint, errcode, column, constraint, datatype, table, schema."""
    expr: Sql


@dataclass(frozen=True, slots=True)
class Raise(Stmt):
    level: str
    """EXCEPTION, WARNING, NOTICE, INFO, LOG, DEBUG."""
    message: str | None
    """The format string (``%`` placeholders), or None."""
    args: tuple[Sql, ...] = ()
    condition: str | None = None
    """A condition name, or ``sqlstate:XXXXX``."""
    options: tuple[RaiseOption, ...] = ()
    reraise: bool = False


@dataclass(frozen=True, slots=True)
class Assert(Stmt):
    condition: Sql
    message: Sql | None


@dataclass(frozen=True, slots=True)
class ExecSql(Stmt):
    """A SQL statement, PERFORM (``perform``: a SELECT whose rows are dropped), or one with
    INTO."""

    sql: Sql
    into: tuple[Target, ...] | None = None
    strict: bool = False
    perform: bool = False


@dataclass(frozen=True, slots=True)
class Execute(Stmt):
    """EXECUTE string [INTO [STRICT] targets] [USING expressions]."""

    command: Sql
    into: tuple[Target, ...] | None
    strict: bool
    using: tuple[Sql, ...]


@dataclass(frozen=True, slots=True)
class GetDiagnostics(Stmt):
    stacked: bool
    items: tuple[tuple[Target, str], ...]


@dataclass(frozen=True, slots=True)
class Null(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class EndTransaction(Stmt):
    """COMMIT or ROLLBACK [AND [NO] CHAIN]: ends the transaction the block runs in and begins
    another (a DO outside a transaction block only)."""

    commit: bool
    chain: bool = False


@dataclass(frozen=True, slots=True)
class Function:
    """A parsed body: its outermost block, how many variable slots a frame needs, and the
    slots of FOUND and of the parameters (in order; none for a DO block)."""

    block: Block
    slots: int
    found_slot: int
    param_slots: tuple[int, ...] = ()
    decls: tuple[VarDecl, ...] = field(default_factory=tuple)
    """Every declaration by slot (parameters, FOUND, loop variables...), for their types."""
    source: str = ""
