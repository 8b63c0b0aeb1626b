"""sqlglot's Postgres dialect, adjusted where it reads Postgres SQL differently than Postgres.

Applied once, when ``percolator.server.sql`` is imported, to the dialect every parse here uses
(``read="postgres"``); what a statement means is then up to the binder, which follows
Postgres.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import TokenizerCore
from sqlglot.tokens import TokenType


def _keep_postgres_functions() -> None:
    """Leave these calls the plain functions they are: sqlglot reads date_part(f, x) as
    EXTRACT (whose result type and column name differ), log10(x) as log(10, x) (numeric, where
    Postgres's log10 of a double is a double), and to_date / to_timestamp(text, text) /
    make_timestamp / make_time as other dialects' functions, rewriting the format's template
    patterns into strftime codes on the way, make_interval with other dialects' parameters,
    and var_samp as variance (a column named variance)."""
    parser = Postgres.Parser
    parser.FUNCTION_PARSERS = {k: v for k, v in parser.FUNCTION_PARSERS.items() if k != "DATE_PART"}
    dropped = (
        "TO_DATE", "TO_TIMESTAMP", "MAKE_TIMESTAMP", "MAKE_TIME", "MAKE_INTERVAL", "LOG10",
        "VAR_SAMP",
    )  # fmt: skip
    parser.FUNCTIONS = {k: v for k, v in parser.FUNCTIONS.items() if k not in dropped}


def _keep_array_subscripts() -> None:
    """Keep an array subscript as written. With the dialect's 1-based INDEX_OFFSET, sqlglot
    turns a literal subscript of an array whose type it can tell (``(ARRAY[10,20])[2]``) into
    its own 0-based form, and leaves others (``a[2]``) alone; the binder reads every subscript
    as Postgres's 1-based one, so the first kind answered one element early."""
    Postgres.INDEX_OFFSET = 0


def _colon_is_not_a_placeholder() -> None:
    """Read ``:name`` as a colon and a name. sqlglot takes it for a named placeholder (other
    dialects' bind syntax, not Postgres's), so the slice ``a[:hi]`` lost its colon and became
    a placeholder, which the binder rejects."""
    parser = Postgres.Parser
    parser.PLACEHOLDER_PARSERS = {
        k: v for k, v in parser.PLACEHOLDER_PARSERS.items() if k is not TokenType.COLON
    }


def _keep_interval_strings() -> None:
    """Keep an interval literal's whole text. sqlglot reads ``interval '-1 day -04:05:06.5'``
    as ``'-1' DAY`` when the string holds a single number-and-unit pair, dropping the rest
    (here the time part), so the binder saw minus one day."""
    parser = Postgres.Parser
    original = parser._parse_interval_span
    if getattr(original, "keeps_strings", False):
        return

    def parse_interval_span(
        self: Any, this: exp.Expression, parse_function_unit: bool = True
    ) -> exp.Interval:
        interval = original(self, this, parse_function_unit=parse_function_unit)
        text = this.name if this is not None and this.is_string else None
        if text is not None and exp.INTERVAL_STRING_RE.sub("", text).strip():
            if interval.this is not None and interval.this.name != text:
                return exp.Interval(this=exp.Literal.string(text))
        return interval

    parse_interval_span.keeps_strings = True  # type: ignore[attr-defined]
    parser._parse_interval_span = parse_interval_span  # type: ignore[method-assign]


def _prefix_operators() -> None:
    """Read the prefix operators ``@`` (absolute value), ``|/`` (square root) and ``||/``
    (cube root) as Postgres does: an operand up to the next operator of lower precedence than
    ``+`` and ``-`` (``|/ 16 + 9`` is 5; sqlglot took only ``16``), and ``@`` at all (sqlglot
    reads it as the start of a session variable, ``@ -5`` then fails to parse)."""
    parser = Postgres.Parser
    original = parser.PLACEHOLDER_PARSERS[TokenType.PARAMETER]
    if getattr(original, "prefix_operators", False):
        return

    def parameter(self: Any) -> exp.Expression | None:
        # "$1" is a PARAMETER token too; only "@" is the operator.
        if self._prev.text == "@":
            return self.expression(exp.Abs(this=self._parse_term()))
        return original(self)  # type: ignore[no-any-return]

    parameter.prefix_operators = True  # type: ignore[attr-defined]
    parser.PLACEHOLDER_PARSERS = {**parser.PLACEHOLDER_PARSERS, TokenType.PARAMETER: parameter}
    parser.UNARY_PARSERS = {
        **parser.UNARY_PARSERS,
        TokenType.PIPE_SLASH: lambda self: self.expression(exp.Sqrt(this=self._parse_term())),
        TokenType.DPIPE_SLASH: lambda self: self.expression(exp.Cbrt(this=self._parse_term())),
    }


def _substring_similar() -> None:
    """Parse ``substring(x SIMILAR pattern ESCAPE escape)`` (sqlglot knows only the FROM / FOR
    forms) into substring(x, pattern, escape), the function Postgres calls for it."""
    parser = Postgres.Parser
    original = parser._parse_substring
    if getattr(original, "similar", False):
        return

    def parse_substring(self: Any) -> exp.Expression:
        index = self._index
        this = self._parse_bitwise()
        if this is not None and self._match_text_seq("SIMILAR"):
            pattern = self._parse_bitwise()
            if not self._match_text_seq("ESCAPE"):
                self.raise_error("Expecting ESCAPE")
            escape = self._parse_bitwise()
            return self.expression(exp.Substring(this=this, start=pattern, length=escape))
        self._retreat(index)
        return original(self)  # type: ignore[no-any-return]

    parse_substring.similar = True  # type: ignore[attr-defined]
    parser._parse_substring = parse_substring  # type: ignore[method-assign]


def _json_literals_are_casts() -> None:
    """Read the typed literal ``json '...'`` as the cast it is in Postgres. sqlglot makes it a
    ParseJSON call, which the binder took for an unknown function parse_json."""
    parser = Postgres.Parser
    parser.TYPE_LITERAL_PARSERS = {
        k: v for k, v in parser.TYPE_LITERAL_PARSERS.items() if k is not exp.DType.JSON
    }


def _json_object_function() -> None:
    """Read ``json_object(keys [, values])`` (text arrays) as the plain function it is. sqlglot
    knows only the SQL-standard ``JSON_OBJECT(key : value, ...)`` form (kept for calls that
    use it), failing on the one-argument call and taking the two-argument one for a pair."""
    parser = Postgres.Parser
    original = parser.FUNCTION_PARSERS.get("JSON_OBJECT")
    if original is None or getattr(original, "plain_call", False):
        return

    def parse_json_object(self: Any) -> exp.Expression:
        index = self._index
        try:
            args = self._parse_csv(self._parse_lambda)
            if self._curr is not None and self._curr.token_type is TokenType.R_PAREN:
                return self.expression(exp.Anonymous(this="json_object", expressions=args))
        except ParseError:
            pass
        self._retreat(index)  # key : value or key VALUE value
        return original(self)  # type: ignore[no-any-return]

    parse_json_object.plain_call = True  # type: ignore[attr-defined]
    parser.FUNCTION_PARSERS = {**parser.FUNCTION_PARSERS, "JSON_OBJECT": parse_json_object}


def _order_by_using() -> None:
    """Read ``ORDER BY x USING <`` / ``USING >`` (Postgres's sort by an ordering operator) as
    ``ORDER BY x ASC`` / ``DESC``, the orders those operators define; sqlglot rejected it."""
    parser = Postgres.Parser
    original = parser._parse_ordered
    if getattr(original, "using", False):
        return

    def parse_ordered(self: Any, parse_method: Any = None) -> exp.Ordered | None:
        ordered = original(self, parse_method)
        if ordered is None or ordered.args.get("desc") is not None:
            return ordered
        if not self._match(TokenType.USING):
            return ordered
        if not self._match_set((TokenType.LT, TokenType.GT)):
            self.raise_error("Expecting < or > after USING")
        desc = self._prev.token_type is TokenType.GT
        nulls_first = desc  # Postgres's default: NULLs sort as larger than any value
        if self._match_text_seq("NULLS", "FIRST"):
            nulls_first = True
        elif self._match_text_seq("NULLS", "LAST"):
            nulls_first = False
        ordered.set("desc", desc)
        ordered.set("nulls_first", nulls_first)
        return ordered

    parse_ordered.using = True  # type: ignore[attr-defined]
    parser._parse_ordered = parse_ordered  # type: ignore[method-assign]


def _arrow_is_not_a_lambda() -> None:
    """Read ``f(j -> 'a')`` as a call on the json operator ``->``. sqlglot takes ``name ->``
    in a function's arguments for another dialect's lambda, so a json field of a column passed
    to any function (``jsonb_typeof(doc -> 'a')``) was refused."""
    parser = Postgres.Parser
    parser.LAMBDAS = {k: v for k, v in parser.LAMBDAS.items() if k is not TokenType.ARROW}


def _parenthesized_window_names() -> None:
    """Tell ``OVER (w)`` from ``OVER w``, which sqlglot reads alike: the first copies window
    ``w`` (and cannot copy a frame clause), the second is ``w`` itself. A parenthesized window
    gets ``meta["parenthesized"]``."""
    parser = Postgres.Parser
    original = parser._parse_window
    if getattr(original, "parenthesized", False):
        return

    def parse_window(self: Any, this: Any, alias: bool = False) -> exp.Expression | None:
        nxt = self._next
        parenthesized = (
            not alias
            and self._curr is not None
            and self._curr.token_type in self.WINDOW_BEFORE_PAREN_TOKENS
            and nxt is not None
            and nxt.token_type is TokenType.L_PAREN
        )
        window = original(self, this, alias)
        if parenthesized and isinstance(window, exp.Window):
            window.meta["parenthesized"] = True
        return window  # type: ignore[no-any-return]

    parse_window.parenthesized = True  # type: ignore[attr-defined]
    parser._parse_window = parse_window  # type: ignore[method-assign]


def _generated_by_default() -> None:
    """Remember ``BY DEFAULT`` in ``GENERATED BY DEFAULT AS (expr) STORED``: sqlglot reads it
    as the ALWAYS form, which Postgres alone accepts (42601 for the other, from
    :mod:`percolator.server.sql.generated_columns`)."""
    parser = Postgres.Parser
    original = parser._parse_generated_as_identity
    if getattr(original, "keeps_by_default", False):
        return

    def parse_generated_as_identity(self: Any) -> exp.Expression:
        by_default = self._curr is not None and self._curr.text.upper() == "BY"
        node = original(self)
        if by_default and isinstance(node, exp.ComputedColumnConstraint):
            node.meta["by_default"] = True
        return node  # type: ignore[no-any-return]

    parse_generated_as_identity.keeps_by_default = True  # type: ignore[attr-defined]
    parser._parse_generated_as_identity = parse_generated_as_identity  # type: ignore[method-assign]


def _parameters_before_punctuation() -> None:
    """Read ``$1,$2`` as two parameters. sqlglot takes ``$1,$`` for the opening of a
    dollar-quoted string tagged ``1,`` (a tag must be an identifier, which cannot start with
    a digit) and fails to tokenize ``select $1,$2``, which psycopg sends for ``%s,%s``."""
    original = TokenizerCore._scan_string
    if getattr(original, "reads_parameters", False):
        return

    def scan_string(self: Any, start: str) -> bool:
        if start == "$" and self.heredoc_tag_is_identifier and self._peek.isdigit():
            self._add(self.heredoc_string_alternative)  # the parameter's number follows
            return True
        return original(self, start)  # type: ignore[no-any-return]

    scan_string.reads_parameters = True  # type: ignore[attr-defined]
    TokenizerCore._scan_string = scan_string  # type: ignore[method-assign]


def adjust() -> None:
    """Apply the adjustments (idempotent)."""
    _parameters_before_punctuation()
    _keep_postgres_functions()
    _keep_array_subscripts()
    _colon_is_not_a_placeholder()
    _keep_interval_strings()
    _prefix_operators()
    _substring_similar()
    _json_literals_are_casts()
    _json_object_function()
    _arrow_is_not_a_lambda()
    _order_by_using()
    _parenthesized_window_names()
    _generated_by_default()
