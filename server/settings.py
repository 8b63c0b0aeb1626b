"""Session settings (Postgres GUCs): defaults, which ones are reported to the client with
ParameterStatus, and validation of SET for the ones that change behaviour."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from percolator.server.sql.catalog_functions import SERVER_VERSION, SERVER_VERSION_NUM
from percolator.server.sql.errors import (
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    SqlError,
)
from percolator.server.sql.time_zones import canonical_setting

# Reported at startup and whenever they change (the list Postgres 15 sends).
REPORTED = (
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_transaction_read_only",
    "in_hot_standby",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
)

DEFAULTS: dict[str, str] = {
    "application_name": "",
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "default_transaction_read_only": "off",
    "default_transaction_isolation": "repeatable read",
    "transaction_isolation": "repeatable read",
    "transaction_read_only": "off",
    "transaction_deferrable": "off",
    "default_transaction_deferrable": "off",
    "in_hot_standby": "off",
    "integer_datetimes": "on",
    "intervalstyle": "postgres",
    "is_superuser": "on",
    "server_encoding": "UTF8",
    "server_version": SERVER_VERSION,
    "server_version_num": str(SERVER_VERSION_NUM),
    "session_authorization": "postgres",
    "standard_conforming_strings": "on",
    "timezone": "UTC",
    "search_path": '"$user", public',
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "percolator.locking": "pessimistic",
    "idle_in_transaction_session_timeout": "0",
    "max_identifier_length": "63",
    "max_index_keys": "32",  # pgjdbc reads it (pg_settings) to list foreign key columns
    "default_table_access_method": "heap",
    "jit": "off",
    "bytea_output": "hex",
    "synchronous_commit": "on",
    "max_connections": "100",
    "password_encryption": "scram-sha-256",
    "lc_messages": "C",
    "lc_monetary": "C",
    "lc_numeric": "C",
    "lc_time": "C",
    "row_security": "on",
    "client_min_messages": "notice",
    "escape_string_warning": "on",
    "work_mem": "4MB",
    "geqo": "on",
    "enable_seqscan": "on",
    "cursor_tuple_fraction": "0.1",
    "timezone_abbreviations": "Default",
    "xmlbinary": "base64",
    "xmloption": "content",
    "default_with_oids": "off",
    "array_nulls": "on",
    "backslash_quote": "safe_encoding",
    "vacuum_cost_delay": "0",
}

_CANONICAL = {name.lower(): name for name in REPORTED}
_READ_ONLY = {"server_version", "server_version_num", "server_encoding", "integer_datetimes",
              "in_hot_standby", "is_superuser", "max_identifier_length", "max_index_keys",
              "session_authorization", "transaction_isolation",
              "transaction_read_only"}  # fmt: skip


@dataclass(frozen=True)
class Change:
    """A SET that a client should hear about (ParameterStatus)."""

    name: str
    value: str


def reported_name(name: str) -> str | None:
    """The spelling Postgres reports a setting under, if it is reported at all."""
    return _CANONICAL.get(name.lower())


def normalize(name: str, value: str) -> str:
    """Validate a SET value; returns the value as SHOW will print it."""
    key = name.lower()
    if key in _READ_ONLY:
        raise SqlError("55P02", f'parameter "{name}" cannot be changed')
    if key == "client_encoding":
        if value.replace("-", "").replace("_", "").upper() not in ("UTF8", "UNICODE"):
            raise SqlError(
                FEATURE_NOT_SUPPORTED,
                f'client_encoding "{value}" is not supported: only UTF8 is',
            )
        return "UTF8"
    if key == "timezone":
        return canonical_setting(value)
    if key == "datestyle":
        if not value.upper().startswith("ISO"):
            raise SqlError(FEATURE_NOT_SUPPORTED, f'DateStyle "{value}" is not supported: only ISO')
        return "ISO, MDY"
    if key == "intervalstyle" and value.lower() != "postgres":
        raise SqlError(FEATURE_NOT_SUPPORTED, f'IntervalStyle "{value}" is not supported')
    if key == "standard_conforming_strings" and value.lower() not in ("on", "true", "1"):
        raise SqlError(FEATURE_NOT_SUPPORTED, "standard_conforming_strings = off is not supported")
    if key in ("statement_timeout", "idle_in_transaction_session_timeout", "lock_timeout"):
        parse_duration_ms(value)
        return value
    if key == "extra_float_digits":
        return _extra_float_digits(name, value)
    if key == "bytea_output" and value.lower() != "hex":
        raise SqlError(FEATURE_NOT_SUPPORTED, "bytea_output = escape is not supported")
    if key == "percolator.locking":
        mode = value.lower()
        if mode not in ("pessimistic", "optimistic"):
            raise SqlError(
                INVALID_PARAMETER_VALUE,
                f'invalid value for parameter "{name}": "{value}"',
                hint="Available values: pessimistic, optimistic.",
            )
        return mode
    if key in ("default_transaction_isolation",):
        level = value.lower()
        if level not in ("read committed", "repeatable read", "read uncommitted", "serializable"):
            raise SqlError(
                INVALID_PARAMETER_VALUE, f'invalid value for parameter "{name}": "{value}"'
            )
        return level
    return value


def _extra_float_digits(name: str, value: str) -> str:
    """extra_float_digits: an integer in -15..3, as Postgres checks it."""
    try:
        n = int(value.strip())
    except ValueError:
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f'invalid value for parameter "{name}": "{value}"',
        ) from None
    if not -15 <= n <= 3:
        raise SqlError(
            INVALID_PARAMETER_VALUE,
            f'{n} is outside the valid range for parameter "{name}" (-15 .. 3)',
        )
    return str(n)


@functools.lru_cache(maxsize=64)  # read for every statement (statement_timeout)
def parse_duration_ms(value: str) -> int:
    """A duration setting in milliseconds ('5s', '100ms', '1min', '250' = ms)."""
    text = value.strip().strip("'").lower()
    units = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "us": 0.001}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit) and text[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return int(float(text[: -len(unit)]) * units[unit])
    try:
        return int(float(text))
    except ValueError:
        raise SqlError(
            INVALID_PARAMETER_VALUE, f'invalid value for a duration parameter: "{value}"'
        ) from None
