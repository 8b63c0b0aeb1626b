"""Errors raised by cell stores."""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every cell-store error."""


class StoreUnavailable(StoreError):
    """A shard could not be reached, or its connection broke mid-statement (the shard crashed
    or restarted). The message names the shard's DSN.

    ``sqlstate`` is what the SQL layer reports (``from_exception`` reads it, as it does for
    transaction errors): 08006 connection_failure, the class clients and pools treat as "the
    server side is unreachable, retry later", rather than XX000 internal error.
    """

    sqlstate = "08006"

    def __init__(self, dsn: str, reason: str) -> None:
        super().__init__(f"cannot reach Postgres shard {redact_dsn(dsn)}: {reason}")
        self.dsn = redact_dsn(dsn)


class StoreResourceExhausted(StoreError):
    """A shard refused a statement for want of resources: Postgres's class 53 (disk full, out
    of memory, too many connections). ``sqlstate`` is the shard's own, so that a client sees
    53100 disk_full rather than XX000 internal error; the statement did nothing."""

    def __init__(self, dsn: str, sqlstate: str, reason: str) -> None:
        super().__init__(f"Postgres shard {redact_dsn(dsn)} is out of resources: {reason}")
        self.dsn = redact_dsn(dsn)
        self.sqlstate = sqlstate


class SchemaVersionError(StoreError):
    """The shard's schema was written by a newer version of Percolator than this code."""


class CorruptRecordError(StoreError):
    """A lock or write record in a format this code does not understand."""


class SnapshotTooOld(StoreError):
    """A read at a timestamp below the shard's GC safe point: its versions may be gone."""

    def __init__(self, ts: int, safe_point: int) -> None:
        super().__init__(
            f"snapshot at ts {ts} is older than the GC safe point {safe_point}: the versions it "
            "reads may have been collected (transaction ran longer than the GC lifetime)"
        )
        self.ts = ts
        self.safe_point = safe_point


class LimitExceeded(StoreError, ValueError):
    """A key, column name or value is larger than the documented limit."""


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced, fit for error messages and logs."""
    scheme, sep, rest = dsn.partition("://")
    if not sep or "@" not in rest:
        return dsn
    userinfo, at, hostpart = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}{at}{hostpart}"
