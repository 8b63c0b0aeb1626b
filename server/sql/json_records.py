"""json(b)_to_record and json(b)_to_recordset: json objects as rows of the columns a FROM
item's column definition list names (``jsonb_to_recordset($1) AS x(id int, name text)``, the
way applications pass many rows in one parameter).

Each column takes the object's value under its name, as Postgres's populate_record does: a
missing key or json null is NULL; a string is the column type's input; a number or boolean
its text; a json array fills an array column element by element; anything else (an object,
or an array for a scalar column) is its json text, read by the column's type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal

from percolator.server.sql import casts
from percolator.server.sql import types as T
from percolator.server.sql.bound import BExpr
from percolator.server.sql.errors import INVALID_PARAMETER_VALUE, SYNTAX_ERROR, SqlError
from percolator.server.sql.textio import format_json_value, parse_json
from percolator.server.sql.types import SqlType, TypeId

NAMES = frozenset({"json_to_record", "jsonb_to_record", "json_to_recordset", "jsonb_to_recordset"})

Column = tuple[str, SqlType]


def needs_definition_list() -> SqlError:
    """Postgres's error for these functions without ``AS alias(column type, ...)``."""
    return SqlError(
        SYNTAX_ERROR,
        'a column definition list is required for functions returning "record"',
    )


def row_function(
    name: str, columns: list[Column]
) -> Callable[[object], Iterator[tuple[object, ...]]]:
    """The rows ``name(doc)`` yields for these columns."""
    many = name.endswith("recordset")

    def rows(doc: object) -> Iterator[tuple[object, ...]]:
        value = parse_json(str(doc))
        if not many:
            yield _row(name, value, columns)
            return
        if not isinstance(value, list):
            raise SqlError(INVALID_PARAMETER_VALUE, f"cannot call {name} on a non-array")
        for item in value:
            yield _row(name, item, columns)

    return rows


def argument(name: str, arg: BExpr, binder: object) -> BExpr:
    """The document argument as json or jsonb, as the function's name says."""
    t = T.JSONB if name.startswith("jsonb") else T.JSON
    return binder.coerce(arg, t)  # type: ignore[attr-defined, no-any-return]


def _row(name: str, value: object, columns: list[Column]) -> tuple[object, ...]:
    if not isinstance(value, dict):
        what = "an array" if isinstance(value, list) else "a scalar"
        raise SqlError(INVALID_PARAMETER_VALUE, f"cannot call {name} on {what}")
    return tuple(_column_value(value.get(col), t) for col, t in columns)


def _column_value(v: object, t: SqlType) -> object:
    if v is None:
        return None
    if t.id in (TypeId.JSON, TypeId.JSONB) and not t.array:
        return format_json_value(v)
    if t.array and isinstance(v, list):
        return [_column_value(e, t.element) for e in v]
    if isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, str):
        text = v
    elif isinstance(v, int | float | Decimal):
        text = str(v)
    else:
        text = format_json_value(v)
    return casts.cast(text, T.TEXT, t, explicit=True)
