"""sqlglot's Postgres dialect, adjusted where it reads Postgres SQL differently than Postgres.

Applied once, when ``percolator.server.sql`` is imported, to the dialect every parse here uses
(``read="postgres"``); what a statement means is then up to the binder, which follows
Postgres.
"""

from __future__ import annotations

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


def adjust() -> None:
    """Apply the adjustments (idempotent)."""
    _keep_postgres_functions()
    _keep_array_subscripts()
