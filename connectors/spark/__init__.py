"""PySpark data source (not yet implemented)."""
