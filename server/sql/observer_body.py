"""The SQL body of an observer: its statements, with ``NEW.column`` and the ``TG_*`` names
turned into parameters.

In a body, ``NEW.<column>`` is the changed row as the observer's transaction reads it (when the
row was deleted, its key columns still hold the key and the other columns are NULL), and:

- ``TG_NAME``: the observer's name (text);
- ``TG_TABLE_NAME``: the observed table (text);
- ``TG_DELETED``: true when the row no longer exists (boolean);
- ``TG_KEY``: the row's key as stored (bytea; the encoded primary key or the hidden row id).

Each reference becomes a parameter ``$n`` padded with spaces to the reference's length, so
positions in error messages still point into the body as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from percolator.server.sql.errors import SYNTAX_ERROR, UNDEFINED_COLUMN, SqlError
from percolator.server.sql.splitter import split_statements
from percolator.server.sql.utility import tokenize

TRIGGER_NAMES = ("tg_name", "tg_table_name", "tg_deleted", "tg_key")


@dataclass(frozen=True)
class BodyRef:
    """What a parameter of a body statement stands for: ``NEW.<column>`` or a ``TG_`` name."""

    kind: str
    """``"new"`` or ``"tg"``."""
    name: str
    """The column name, or the lower-case TG_ name."""


@dataclass(frozen=True)
class BodyStatement:
    """One statement of a body, ready to prepare: ``$n`` is ``refs[n - 1]``."""

    sql: str
    offset: int
    """0-based position of the statement in the body."""
    refs: tuple[BodyRef, ...]


def parse_body(body: str, columns: set[str]) -> list[BodyStatement]:
    """Split a body into statements and replace its references by parameters.

    Raises 42601 for an empty body or one that uses ``$n`` parameters itself, and 42703 for
    ``NEW.x`` when the table has no column ``x``.
    """
    statements = [p for p in split_statements(body) if p.text]
    if not statements:
        raise SqlError(SYNTAX_ERROR, "an observer body needs at least one statement")
    return [_rewrite(p.text, p.offset, columns) for p in statements]


def _rewrite(text: str, offset: int, columns: set[str]) -> BodyStatement:
    refs: list[BodyRef] = []
    out: list[str] = []
    last = 0
    tokens = tokenize(text)
    i = 0
    while i < len(tokens):
        t = tokens[i]
        ref, end = _reference(text, tokens, i)
        if t.kind == "punct" and t.text == "$" and i + 1 < len(tokens):
            if tokens[i + 1].kind == "num" and tokens[i + 1].pos == t.pos + 1:
                raise SqlError(
                    SYNTAX_ERROR,
                    "an observer body takes no $n parameters: use NEW.column and TG_ names",
                    position=offset + t.pos + 1,
                )
        if ref is None:
            i += 1
            continue
        if ref.kind == "new" and ref.name not in columns:
            raise SqlError(
                UNDEFINED_COLUMN,
                f'record "new" has no field "{ref.name}"',
                position=offset + t.pos + 1,
            )
        if ref not in refs:
            refs.append(ref)
        placeholder = f"${refs.index(ref) + 1}"
        out.append(text[last : t.pos])
        out.append(placeholder.ljust(end - t.pos))
        last = end
        i = _skip_to(tokens, i, end)
    out.append(text[last:])
    return BodyStatement("".join(out), offset, tuple(refs))


def _reference(text: str, tokens: list, i: int) -> tuple[BodyRef | None, int]:
    """The reference starting at token ``i`` and where it ends, or (None, 0)."""
    t = tokens[i]
    if t.kind != "word":
        return None, 0
    if i > 0 and tokens[i - 1].text == "." and tokens[i - 1].pos + 1 == t.pos:
        return None, 0  # a qualified name's second part (x.tg_name)
    lower = t.text.lower()
    if lower in TRIGGER_NAMES:
        return BodyRef("tg", lower), t.pos + len(t.text)
    if lower.startswith("new.") and len(lower) > 4 and "." not in lower[4:]:
        return BodyRef("new", lower[4:]), t.pos + len(t.text)
    if lower == "new." and i + 1 < len(tokens):
        nxt = tokens[i + 1]
        if nxt.kind == "ident" and nxt.pos == t.pos + len(t.text):
            return BodyRef("new", nxt.value), nxt.pos + len(nxt.text)
    return None, 0


def _skip_to(tokens: list, i: int, end: int) -> int:
    while i < len(tokens) and tokens[i].pos < end:
        i += 1
    return i
