"""PL/pgSQL: a parser (:mod:`.parser`) and an executor (:mod:`.executor`) for the language's
blocks, used by DO; a function body is the same block with parameters and a RETURN value
(:func:`parse_function`, then :func:`run_block` with the arguments).

The executor runs every SQL statement and expression through a
:class:`~percolator.server.plpgsql.executor.SqlRunner`, which the session implements
(server/session_plpgsql.py), so this package never sees transactions.
"""

from percolator.server.plpgsql.executor import Record, SqlResult, SqlRunner, run_block
from percolator.server.plpgsql.parser import Param, parse, parse_function

__all__ = ["Param", "Record", "SqlResult", "SqlRunner", "parse", "parse_function", "run_block"]
