"""Named arguments in function calls, ``f(a => 1)`` / ``f(a := 1)``, put in their positions.

Postgres matches them to the function's parameter names, and fills the parameters left out
with their defaults. Our functions are resolved by position, so the calls are rewritten into
positional ones here, for the built-in functions whose parameter names Postgres documents and
applications use by name; elsewhere a named argument is 42883, as a function with no such
parameter is in Postgres.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from percolator.server.sql.errors import SYNTAX_ERROR, UNDEFINED_FUNCTION, SqlError

_ZERO = exp.Literal.number(0)


def _text(value: str) -> exp.Expression:
    return exp.Literal.string(value)


PARAMETERS: dict[str, tuple[tuple[str, exp.Expression | None], ...]] = {
    "make_interval": tuple(
        (name, _ZERO) for name in ("years", "months", "weeks", "days", "hours", "mins", "secs")
    ),
    "make_date": (("year", None), ("month", None), ("day", None)),
    "make_time": (("hour", None), ("min", None), ("sec", None)),
    "make_timestamp": (
        ("year", None), ("month", None), ("mday", None), ("hour", None), ("min", None),
        ("sec", None),
    ),
    "make_timestamptz": (
        ("year", None), ("month", None), ("mday", None), ("hour", None), ("min", None),
        ("sec", None), ("timezone", None),
    ),
    "jsonb_set": (
        ("jsonb_in", None), ("path", None), ("replacement", None),
        ("create_if_missing", exp.true()),
    ),
    "jsonb_set_lax": (
        ("jsonb_in", None), ("path", None), ("replacement", None),
        ("create_if_missing", exp.true()), ("null_value_treatment", _text("use_json_null")),
    ),
    "jsonb_insert": (
        ("jsonb_in", None), ("path", None), ("replacement", None),
        ("insert_after", exp.false()),
    ),
}  # fmt: skip
"""Parameter names and defaults (None: none) of the functions that take named arguments."""


def _named(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """(name, value) of a named argument, else None."""
    if isinstance(node, exp.Kwarg | exp.PropertyEQ):
        return node.this.name.lower(), node.expression
    return None


def positional(name: str, args: Sequence[exp.Expression]) -> list[exp.Expression]:
    """``args`` of a call of ``name`` with any named ones moved into place (defaults for
    those left out before the last one given); unchanged when none is named."""
    named = [_named(a) for a in args]
    if not any(named):
        return list(args)
    first_named = next(i for i, n in enumerate(named) if n is not None)
    if any(n is None for n in named[first_named:]):
        raise SqlError(SYNTAX_ERROR, "positional argument cannot follow named argument")
    given: dict[str, exp.Expression] = {}
    for n in named:
        if n is not None:
            if n[0] in given:
                raise SqlError(SYNTAX_ERROR, f'argument name "{n[0]}" used more than once')
            given[n[0]] = n[1]
    params = PARAMETERS.get(name)
    if params is None or not set(given) <= {p for p, _ in params}:
        shown = ", ".join(f"{k} => ..." for k in given)
        raise SqlError(UNDEFINED_FUNCTION, f"function {name}({shown}) does not exist")
    names = [p for p, _ in params]
    out = list(args[:first_named])
    last = max(names.index(k) for k in given)
    for i in range(first_named, last + 1):
        param, default = params[i]
        if param in given:
            out.append(given[param])
        elif default is not None:
            out.append(default.copy())
        else:
            raise SqlError(UNDEFINED_FUNCTION, f"function {name} needs argument {param}")
    if any(k in names[:first_named] for k in given):
        raise SqlError(
            SYNTAX_ERROR, "argument name used more than once, or both by name and position"
        )
    return out
