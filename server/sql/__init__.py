"""SQL parsing and binding (sqlglot)."""

from percolator.server.sql import dialect

dialect.adjust()
