"""Percolator server: wire protocol front end, sessions, auth and the CLI entry."""
