"""sqlglot's Postgres dialect, adjusted where it reads Postgres SQL differently than Postgres.

Applied once, when ``percolator.server.sql`` is imported, to the dialect every parse here uses
(``read="postgres"``); what a statement means is then up to the binder, which follows
Postgres.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres


def _keep_postgres_functions() -> None:
    """Leave these calls the plain functions they are: sqlglot reads date_part(f, x) as
    EXTRACT (whose result type and column name differ), log10(x) as log(10, x) (numeric, where
    Postgres's log10 of a double is a double), and to_date / to_timestamp(text, text) /
    make_timestamp / make_time as other dialects' functions, rewriting the format's template
    patterns into strftime codes on the way."""
    parser = Postgres.Parser
    parser.FUNCTION_PARSERS = {k: v for k, v in parser.FUNCTION_PARSERS.items() if k != "DATE_PART"}
    dropped = ("TO_DATE", "TO_TIMESTAMP", "MAKE_TIMESTAMP", "MAKE_TIME", "LOG10")
    parser.FUNCTIONS = {k: v for k, v in parser.FUNCTIONS.items() if k not in dropped}


def _keep_array_subscripts() -> None:
    """Keep an array subscript as written. With the dialect's 1-based INDEX_OFFSET, sqlglot
    turns a literal subscript of an array whose type it can tell (``(ARRAY[10,20])[2]``) into
    its own 0-based form, and leaves others (``a[2]``) alone; the binder reads every subscript
    as Postgres's 1-based one, so the first kind answered one element early."""
    Postgres.INDEX_OFFSET = 0


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


def adjust() -> None:
    """Apply the adjustments (idempotent)."""
    _keep_postgres_functions()
    _keep_array_subscripts()
    _keep_interval_strings()
