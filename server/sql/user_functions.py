"""Calls of functions made by CREATE FUNCTION ... LANGUAGE sql: resolution and inlining.

A SQL function's body is one query. A call expands, before it is bound, into that query with
its parameters replaced by the call's arguments, as Postgres's planner inlines simple SQL
functions; the result is bound like any other expression, so the function's tables are read
in the statement's snapshot and an argument that names an outer column is an ordinary
correlated reference:

- a scalar function whose body is a bare ``SELECT expr`` becomes ``expr`` (cast to the
  return type);
- any other scalar function becomes a scalar subquery returning the first row's value, or
  NULL when the body returns no row (Postgres's rule for a function not declared SETOF);
- in FROM, a call becomes a subquery: the body's rows (SETOF, RETURNS TABLE), or the one row
  of a scalar function;
- a SETOF function in a select list becomes ``unnest(ARRAY(...))`` of its rows.

Each argument is converted to its parameter's type by an implicit cast (a CAST marked
:data:`IMPLICIT`); an argument that has none is 42883 as in Postgres.

A body with a FROM clause reads the arguments from a one-row table of their own, so that its
tables never capture a column an argument names. Differences from Postgres (docs/sql.md): in
a body without FROM, an argument that the body names twice is evaluated twice (Postgres does
not inline such a call when the argument is volatile); a function that calls itself is 0A000.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from percolator.server.sql import schemas
from percolator.server.sql.catalog import Catalog, FunctionDef, ViewColumn
from percolator.server.sql.errors import (
    AMBIGUOUS_FUNCTION,
    SYNTAX_ERROR,
    UNDEFINED_FUNCTION,
    SqlError,
    unsupported,
)
from percolator.server.sql.types import Category, SqlType, TypeId

IMPLICIT = "implicit"
"""The arg of a CAST node that makes it an implicit cast: how an argument reaches its
parameter (the call checked that the cast exists; the binder applies it as one)."""


@dataclass(frozen=True)
class Call:
    """A resolved call: the function and one argument node per parameter (defaults filled)."""

    function: FunctionDef
    args: list[exp.Expression]
    given: list[int | None]
    """For each parameter, the index of the call's argument it takes (None: its default)."""
    arg_types: tuple[SqlType, ...] = ()
    """The call's argument types, as written (for messages: ``f(unknown) is a procedure``)."""

    def shown(self) -> str:
        """The call as Postgres's messages name it: ``f(integer, unknown)``."""
        bare = self.function.name.rpartition(".")[2]
        return f"{bare}({', '.join(str(t) for t in self.arg_types)})"


def candidates(catalog: Catalog, name: str, schema: str | None = None) -> list[FunctionDef]:
    """The functions a call of ``name`` (qualified by ``schema`` or not) may mean: those of
    the first schema of the search path that has any (of ``schema`` alone when qualified)."""
    if not catalog.functions:
        return []
    if schema is not None:
        return catalog.functions_named(schemas.key(schema, name))
    for s in schemas.path(catalog):
        found = catalog.functions_named(schemas.key(s, name))
        if found:
            return found
    return []


def argument_values(arg_nodes: Sequence[exp.Expression]) -> list[exp.Expression]:
    """The value nodes of a call's arguments (``name => value`` gives ``value``)."""
    return [a.expression if isinstance(a, _NAMED) else a for a in arg_nodes]


def resolve(
    name: str,
    overloads: Sequence[FunctionDef],
    arg_nodes: Sequence[exp.Expression],
    arg_types: list[SqlType],
) -> Call:
    """The overload a call with ``arg_nodes`` (of ``arg_types``, in the same order) means:
    one that takes them, with implicit casts, matching the most types exactly."""
    positional, named = _split_named(arg_nodes)
    fits = [c for f in overloads if (c := _fill(f, positional, named)) is not None]
    scored = [(s, c) for c in fits if (s := _score(c, arg_types)) is not None]
    if not scored:
        raise _no_function(name, arg_nodes, arg_types)
    best = max(s for s, _ in scored)
    top = [c for s, c in scored if s == best]
    if len(top) > 1:
        shown = ", ".join(str(t) for t in arg_types)
        raise SqlError(
            AMBIGUOUS_FUNCTION,
            f"function {name}({shown}) is not unique",
            hint="Could not choose a best candidate function. "
            "You might need to add explicit type casts.",
        )
    return dataclasses.replace(top[0], arg_types=tuple(arg_types))


_NAMED = (exp.Kwarg, exp.PropertyEQ)


def _split_named(
    arg_nodes: Sequence[exp.Expression],
) -> tuple[int, dict[str, int]]:
    """(the number of positional arguments, the index of each named one by name)."""
    positional = 0
    named: dict[str, int] = {}
    for i, a in enumerate(arg_nodes):
        if isinstance(a, _NAMED):
            key = a.this.name.lower()
            if key in named:
                raise SqlError(SYNTAX_ERROR, f'argument name "{key}" used more than once')
            named[key] = i
        elif named:
            raise SqlError(SYNTAX_ERROR, "positional argument cannot follow named argument")
        else:
            positional += 1
    return positional, named


def _fill(fn: FunctionDef, positional: int, named: dict[str, int]) -> Call | None:
    """Which argument each parameter of ``fn`` takes, or None if the call does not fit."""
    if positional > len(fn.args):
        return None
    given: list[int | None] = list(range(positional))
    for param in fn.args[positional:]:
        index = named.get(param.name) if param.name else None
        if index is None and param.default is None:
            return None
        given.append(index)
    if sum(i is not None for i in given[positional:]) != len(named):
        return None
    return Call(fn, [], given)


def _score(call: Call, types: list[SqlType]) -> int | None:
    """How well the arguments fit: two points for each of the parameter's type exactly, one
    for an untyped literal reaching a string; None when one cannot be cast implicitly."""
    from percolator.server.sql import casts

    total = 0
    for index, param in zip(call.given, call.function.args, strict=True):
        if index is None:
            continue
        t = types[index]
        if t == param.type:
            total += 2
        elif t.id is TypeId.UNKNOWN:
            # Postgres reads an untyped literal as a string where a candidate takes one.
            total += param.type.category is Category.STRING
        elif not casts.can_implicitly_cast(t, param.type):
            return None
    return total


def bind_arguments(call: Call, arg_nodes: Sequence[exp.Expression]) -> Call:
    """``call`` with its argument nodes: the call's own, or the parameters' defaults."""
    values = argument_values(arg_nodes)
    args = [
        values[i] if i is not None else _default(p.default or "NULL")
        for i, p in zip(call.given, call.function.args, strict=True)
    ]
    return dataclasses.replace(call, args=args)


@functools.lru_cache(maxsize=256)
def _parsed_default(text: str) -> exp.Expression:
    return sqlglot.parse_one(f"SELECT {text}", read="postgres").expressions[0]


def _default(text: str) -> exp.Expression:
    return _parsed_default(text).copy()


def _no_function(
    name: str, arg_nodes: Sequence[exp.Expression], arg_types: list[SqlType]
) -> SqlError:
    shown = ", ".join(
        f"{a.this.name} => {t}" if isinstance(a, _NAMED) else str(t)
        for a, t in zip(arg_nodes, arg_types, strict=True)
    )
    return SqlError(
        UNDEFINED_FUNCTION,
        f"function {name}({shown}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


# -- expansion ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def parsed_statements(body: str) -> tuple[exp.Expression, ...]:
    """A SQL function's body as statements (parsed once per body text)."""
    return tuple(s for s in sqlglot.parse(body, read="postgres") if s is not None)


def is_inlined(fn: FunctionDef) -> bool:
    """Whether calls of ``fn`` expand into the statement: a SQL function whose body is one
    query. Other SQL functions (statements that write, several statements, ``void``) run
    at each call, as PL/pgSQL functions do (server/session_functions.py)."""
    if fn.language != "sql" or fn.returns.id is TypeId.VOID:
        return False
    statements = parsed_statements(fn.body)
    return len(statements) == 1 and isinstance(statements[0], exp.Query | exp.Values)


def body_query(fn: FunctionDef, args: Sequence[exp.Expression], catalog: Catalog) -> exp.Query:
    """The function's query with its parameters replaced by ``args`` (nodes, used as given)."""
    return substituted(parsed_statements(fn.body)[-1], fn, args, catalog)  # type: ignore[return-value]


def body_texts(fn: FunctionDef, catalog: Catalog) -> list[str]:
    """The body's statements as texts that read the parameters as ``$1``, ``$2``, ...: what
    a call runs, one statement after another."""
    params = [exp.Parameter(this=exp.Literal.number(i + 1)) for i in range(len(fn.args))]
    return [
        substituted(s, fn, params, catalog).sql(dialect="postgres")
        for s in parsed_statements(fn.body)
    ]


def substituted(
    statement: exp.Expression,
    fn: FunctionDef,
    args: Sequence[exp.Expression],
    catalog: Catalog,
) -> exp.Expression:
    """``statement`` of ``fn``'s body with its parameters replaced by ``args``, and its
    table names resolved along the search path (as the session does for a statement)."""
    query = schemas.qualify(statement, catalog)
    query = query.copy() if query is statement else query
    names = {a.name: i for i, a in enumerate(fn.args) if a.name}
    bare = fn.name.rpartition(".")[2]
    scope = _Columns(query, catalog)

    def place(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            n = int(node.name) if node.name.isdigit() else 0
            if not 1 <= n <= len(args):
                raise SqlError("42P02", f"there is no parameter ${node.name}", position=None)
            return args[n - 1].copy()
        if isinstance(node, exp.Column) and names and not isinstance(node.this, exp.Star):
            key = _folded(node.this)
            qualifier = node.table
            if key in names and (
                qualifier == bare or (not qualifier and key not in scope.visible(node))
            ):
                return args[names[key]].copy()
        return node

    return query.transform(place, copy=False)


def _folded(identifier: exp.Expression) -> str:
    """An identifier as Postgres reads it: unquoted names fold to lower case."""
    name = identifier.name
    return name if getattr(identifier, "quoted", False) else name.lower()


class _Columns:
    """The column names visible where a column reference of a body stands: those of the
    FROM items of its query and of the queries around it (a parameter of the same name is
    hidden by such a column, Postgres's rule in SQL functions)."""

    def __init__(self, statement: exp.Expression, catalog: Catalog) -> None:
        self.catalog = catalog
        self.ctes = {
            cte.alias: _output_names(cte.this, cte.args.get("alias"))
            for cte in statement.find_all(exp.CTE)
        }

    def visible(self, column: exp.Expression) -> set[str]:
        out: set[str] = set()
        node: exp.Expression | None = column
        while node is not None:
            parent = node.parent
            if isinstance(parent, exp.Select | exp.Update | exp.Delete):
                for source in _sources(parent):
                    out |= self._names(source)
            elif isinstance(parent, exp.Insert) and node.arg_key not in ("this", "expression"):
                out |= self._names(parent.this)  # RETURNING, ON CONFLICT see the target
            node = parent
        return out

    def _names(self, source: exp.Expression) -> set[str]:
        if isinstance(source, exp.Schema):
            source = source.this
        if isinstance(source, exp.Lateral | exp.Unnest | exp.Subquery | exp.Values):
            inner = source.this if isinstance(source, exp.Lateral | exp.Subquery) else source
            return _output_names(inner, source.args.get("alias"))
        if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
            return _output_names(None, source.args.get("alias"))
        if not source.db and source.name in self.ctes:
            return self.ctes[source.name]
        key = schemas.key(source.db, source.name) if source.db else source.name
        table = self.catalog.tables.get(key) or self.catalog.tables.get(
            schemas.resolve(self.catalog, source.name)
        )
        if table is not None:
            return {c.name for c in table.columns}
        view = self.catalog.views.get(key)
        return {c.name for c in view.columns} if view is not None else set()


def _sources(query: exp.Expression) -> list[exp.Expression]:
    """The FROM items of a SELECT, an UPDATE (its table and FROM) or a DELETE (its table
    and USING)."""
    out: list[exp.Expression] = []
    if isinstance(query, exp.Update | exp.Delete):
        out.append(query.this)
    for key in ("from_", "from", "using"):
        clause = query.args.get(key)
        if isinstance(clause, exp.From):
            out.append(clause.this)
        elif isinstance(clause, list):
            out.extend(clause)
    out.extend(j.this for j in query.args.get("joins") or [])
    return out


def _output_names(query: exp.Expression | None, alias: exp.Expression | None) -> set[str]:
    """The column names a FROM item's query gives it (its alias's column list first)."""
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return {_folded(c) for c in alias.columns}
    if isinstance(query, exp.Query):
        return {n.lower() for n in query.named_selects}
    return set()


def typed_arguments(call: Call) -> list[exp.Expression]:
    """The call's arguments wrapped for their implicit casts to the parameter types."""
    return [
        exp.Cast(this=a, to=data_type(p.type), **{IMPLICIT: True})
        for a, p in zip(call.args, call.function.args, strict=True)
    ]


def data_type(t: SqlType) -> exp.DataType:
    """``t`` as a sqlglot type node (for CASTs)."""
    return exp.DataType.build(t.format(), dialect="postgres", udt=True)


ARGS = "_percolator_args"
"""The name of the one-row table that holds a call's arguments (see :func:`_with_arguments`)."""
_FN = "_percolator_fn"


def scalar_expression(call: Call, catalog: Catalog) -> exp.Expression:
    """What a call of a function not declared SETOF stands for in an expression."""
    fn = call.function
    if fn.returns_set:
        raise unsupported(f"set-returning function {fn.name}() in an expression (call it in FROM)")
    if fn.returns.id is TypeId.RECORD:
        raise unsupported(f"function {fn.name}() returning a record in an expression")
    args = typed_arguments(call)
    target = data_type(fn.returns)
    if _is_bare_select(parsed_statements(fn.body)[-1]):
        # No FROM in the body: nothing can capture an argument's column references.
        bare = body_query(fn, args, catalog)
        value: exp.Expression = exp.Cast(
            this=exp.Paren(this=bare.expressions[0].unalias()), to=target
        )
    else:
        body = _aliased(body_query(fn, _argument_columns(fn), catalog), ["_v"])
        first = exp.select(exp.Cast(this=exp.column("_v", _FN), to=target))
        value = exp.Subquery(this=_with_arguments(first, body, args).limit(1))
    if fn.strict and args:
        nulls = [exp.Is(this=a.copy(), expression=exp.Null()) for a in call.args]
        value = exp.Case(ifs=[exp.If(this=exp.or_(*nulls), true=exp.Null())], default=value)
    return exp.Paren(this=value)


def set_in_select_list(call: Call, catalog: Catalog) -> exp.Expression:
    """A SETOF function called in a select list: ``unnest(ARRAY(SELECT ... FROM f(...)))``,
    the rows of its call in FROM, one per output row as Postgres's ProjectSet gives them."""
    fn = call.function
    if fn.columns:
        raise unsupported(
            f"function {fn.name}() returning rows of several columns in a select list"
        )
    rows = from_item(call, catalog, _FN, ["_v"])
    query = exp.select(exp.column("_v", _FN)).from_(rows)
    return exp.Explode(this=exp.Array(expressions=[query]))


def from_item(call: Call, catalog: Catalog, alias: str, column_aliases: list[str]) -> exp.Subquery:
    """What a call in FROM stands for: a subquery named ``alias`` with the function's rows."""
    fn = call.function
    if not fn.returns_set:
        value = scalar_expression(call, catalog)
        name = column_aliases[0] if column_aliases else alias
        return exp.Subquery(
            this=exp.select(exp.alias_(value, name, quoted=True)),
            alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
        )
    columns = output_columns(fn, catalog)
    outputs = [(c.name, c.type) for c in columns] if columns else [(alias, fn.returns)]
    if len(column_aliases) > len(outputs):
        raise SqlError(
            "42601",
            f'table "{alias}" has {len(outputs)} columns available but '
            f"{len(column_aliases)} columns specified",
        )
    names = [
        column_aliases[i] if i < len(column_aliases) else n for i, (n, _) in enumerate(outputs)
    ]
    inner_cols = [f"_c{i}" for i in range(len(outputs))]
    body = _aliased(body_query(fn, _argument_columns(fn), catalog), inner_cols)
    select = exp.select(
        *(
            exp.alias_(exp.Cast(this=exp.column(c, _FN), to=data_type(t)), n, quoted=True)
            for c, n, (_, t) in zip(inner_cols, names, outputs, strict=True)
        )
    )
    return exp.Subquery(
        this=_with_arguments(select, body, typed_arguments(call)),
        alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
    )


def output_columns(fn: FunctionDef, catalog: Catalog) -> tuple[ViewColumn, ...]:
    """The columns of the rows a function returns: RETURNS TABLE's, or the current columns
    of the table ``RETURNS SETOF table`` names (a column added since is part of its rows,
    as in Postgres); empty for a function of one unnamed column."""
    if fn.row_of is None:
        return fn.columns
    key = schemas.resolve(catalog, fn.row_of) if "." not in fn.row_of else fn.row_of
    table = catalog.tables.get(key)
    if table is not None:
        return tuple(ViewColumn(c.name, c.type) for c in table.columns)
    view = catalog.views.get(key)
    if view is None:
        raise SqlError("42704", f'type "{fn.row_of}" does not exist')
    return view.columns


def _argument_columns(fn: FunctionDef) -> list[exp.Expression]:
    return [exp.column(f"p{i}", ARGS) for i in range(len(fn.args))]


def _aliased(query: exp.Query, columns: list[str]) -> exp.Subquery:
    return exp.Subquery(
        this=query,
        alias=exp.TableAlias(
            this=exp.to_identifier(_FN), columns=[exp.to_identifier(c) for c in columns]
        ),
    )


def _with_arguments(
    select: exp.Select, body: exp.Subquery, args: list[exp.Expression]
) -> exp.Select:
    """``select`` reading ``body``, which reads the arguments from a one-row table of their
    own, computed where the call is: a table of the body never captures a column that an
    argument names, and each argument is evaluated once per call."""
    if not args:
        return select.from_(body)
    values = exp.select(*(exp.alias_(a, f"p{i}") for i, a in enumerate(args)))
    table = exp.Subquery(this=values, alias=exp.TableAlias(this=exp.to_identifier(ARGS)))
    return select.from_(table).join(exp.Lateral(this=body), join_type="CROSS")


def _is_bare_select(query: exp.Expression) -> bool:
    """``SELECT expr`` and nothing else: the call is the expression itself."""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return False
    if any(
        query.args.get(k)
        for k in (
            "from_",
            "from",
            "where",
            "group",
            "having",
            "order",
            "limit",
            "offset",
            "distinct",
            "with_",
            "with",
            "joins",
            "windows",
            "qualify",
        )
    ):
        return False
    item = query.expressions[0].unalias()
    return item.find(exp.AggFunc, exp.Window) is None
