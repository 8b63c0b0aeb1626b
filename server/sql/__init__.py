"""SQL parsing and binding (sqlglot)."""
