"""ALTER TABLE statements that sqlglot gives up on (it returns an ``exp.Command``).

sqlglot has no ``RENAME CONSTRAINT``, ``VALIDATE CONSTRAINT``, ``OWNER TO`` nor ``SET
STATISTICS``, and one such action makes the whole statement a Command. :func:`parse` reads
the statement's head and splits its action list at the top-level commas: those actions
become the nodes of :mod:`percolator.server.sql.rename_ddl`, every other one is parsed by
sqlglot on its own, so the result is an ``exp.Alter`` that DDL runs like any other.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from percolator.server.sql import generated_columns, identity_ddl
from percolator.server.sql.rename_ddl import IgnoredAction, RenameConstraint, ValidateConstraint
from percolator.server.sql.utility import Token, tokenize


def parse(sql: str) -> exp.Alter | None:
    """``sql`` as an ``exp.Alter`` (identifiers folded as Postgres does), or None when it is
    not an ALTER TABLE this module can read."""
    tokens = tokenize(sql.rstrip().rstrip(";"))
    words = [t.upper for t in tokens]
    if words[:2] != ["ALTER", "TABLE"]:
        return None
    i = 2
    exists = words[i : i + 2] == ["IF", "EXISTS"]
    i += 2 if exists else 0
    only = i < len(words) and words[i] == "ONLY"
    i += 1 if only else 0
    if i >= len(tokens) or tokens[i].kind not in ("word", "ident"):
        return None
    name_token = tokens[i]
    i += 1
    if i < len(tokens) and tokens[i].text == "*":
        i += 1
    table = _table(name_token)
    if table is None:
        return None
    actions: list[exp.Expression] = []
    not_valid = False
    for piece in _split(tokens[i:]):
        if [t.upper for t in piece[-2:]] == ["NOT", "VALID"]:
            not_valid = True
            piece = piece[:-2]
        action = _action(sql, name_token, piece) if piece else None
        if action is None:
            return None
        actions.extend(action)
    if not actions:
        return None
    return exp.Alter(
        this=table, kind="TABLE", exists=exists, only=only, actions=actions, not_valid=not_valid
    )


def _table(token: Token) -> exp.Table | None:
    """The table a name token names (``t``, ``"T"``, ``public.t``)."""
    try:
        node = sqlglot.parse_one(f"SELECT * FROM {token.text}", read="postgres")
    except (ParseError, TokenError):
        return None
    table = normalize_identifiers(node, dialect="postgres").find(exp.Table)
    return table.copy() if table is not None else None


def _split(tokens: list[Token]) -> list[list[Token]]:
    """The actions of the list, at the commas outside parentheses."""
    pieces: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == ",":
            pieces.append([])
            continue
        pieces[-1].append(t)
    return [p for p in pieces if p]


def _ident(token: Token) -> exp.Identifier | None:
    """A name token as an identifier (already folded: marked quoted so it stays so)."""
    if token.kind not in ("word", "ident"):
        return None
    return exp.to_identifier(token.value, quoted=True)


def _action(sql: str, table: Token, piece: list[Token]) -> list[exp.Expression] | None:
    """One action: a node of rename_ddl's, or what sqlglot reads it as."""
    words = [t.upper for t in piece]
    if words[:2] == ["RENAME", "CONSTRAINT"] and len(piece) == 5 and words[3] == "TO":
        old, new = _ident(piece[2]), _ident(piece[4])
        if old is None or new is None:
            return None
        return [RenameConstraint(this=old, to=new)]
    if words[:2] == ["VALIDATE", "CONSTRAINT"] and len(piece) == 3:
        name = _ident(piece[2])
        return None if name is None else [ValidateConstraint(this=name)]
    if words[:2] == ["ADD", "CHECK"] and len(piece) > 2:
        # An unnamed table CHECK constraint, which sqlglot reads only with CONSTRAINT name.
        check = _expression(sql, piece[2:])
        if check is None:
            return None
        return [exp.AddConstraint(expressions=[exp.CheckColumnConstraint(this=check)])]
    if words[:2] == ["OWNER", "TO"] and len(piece) == 3:
        return [IgnoredAction(this=exp.Var(this="OWNER TO"))]
    if words[:1] == ["ALTER"] and "STATISTICS" in words[2:5]:
        column = piece[2] if words[1] == "COLUMN" else piece[1]
        return [IgnoredAction(this=exp.Var(this="SET STATISTICS"), column=_ident(column))]
    if words[:1] == ["ALTER"] and (dropped := _drop_expression(piece)) is not None:
        return [dropped]
    if words[:1] == ["ALTER"] and (identity := identity_ddl.parse(piece)) is not None:
        return [identity]
    text = sql[piece[0].pos : piece[-1].pos + len(piece[-1].text)]
    try:
        node = sqlglot.parse_one(f"ALTER TABLE {table.text} {text}", read="postgres")
    except (ParseError, TokenError):
        return None
    if not isinstance(node, exp.Alter):
        return None
    node = normalize_identifiers(node, dialect="postgres")
    return list(node.args.get("actions") or [])


def _drop_expression(piece: list[Token]) -> exp.Expression | None:
    """``ALTER [COLUMN] c DROP EXPRESSION [IF EXISTS]``, or None for another action."""
    words = [t.upper for t in piece]
    at = 2 if words[1:2] == ["COLUMN"] else 1
    if words[at + 1 : at + 3] != ["DROP", "EXPRESSION"]:
        return None
    rest = words[at + 3 :]
    column = _ident(piece[at]) if at < len(piece) else None
    if column is None or rest not in ([], ["IF", "EXISTS"]):
        return None
    return generated_columns.DropExpression(this=column, exists=bool(rest))


def _expression(sql: str, tokens: list[Token]) -> exp.Expression | None:
    """The expression the tokens spell, parentheses around it taken off."""
    text = sql[tokens[0].pos : tokens[-1].pos + len(tokens[-1].text)]
    try:
        node = sqlglot.parse_one(text, read="postgres")
    except (ParseError, TokenError):
        return None
    node = normalize_identifiers(node, dialect="postgres")
    while isinstance(node, exp.Paren):
        node = node.this
    return node
