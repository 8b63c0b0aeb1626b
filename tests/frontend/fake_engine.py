"""A tiny engine implementing ``engine_api`` for a handful of statements, to test the front end
before (and independently of) the real SQL engine.

Statements (case-insensitive, ``;``-separated):

* ``select <items>`` where each item is an integer, a 'string' or ``$n[::int|int8|text|bool]``
* ``select generate_series(1, n)``: n int4 rows, produced lazily
* ``select fail`` (SqlError 42703 with a position), ``select boom`` (RuntimeError)
* ``select pg_sleep(s)``: waits s seconds unless cancelled (57014); sets ``engine.sleeping``
* ``select wait``: waits for ``engine.release`` (for shutdown tests)
* ``select notice``: one row and a NOTICE
* ``begin`` / ``commit`` / ``end`` / ``rollback`` with I/T/E tracking
* ``insert ...``: ``INSERT 0 1``; ``set application_name = 'x'``: a ParameterStatus
* ``copy t from stdin`` (counts lines), ``copy t to stdout`` (three rows)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field

from percolator.server.engine_api import (
    CopyIn,
    CopyOut,
    Notice,
    ParsedStatement,
    PreparedStatement,
    ResultColumn,
    UserInfo,
)
from percolator.server.frontend.auth import make_md5_hash, make_scram_verifier
from percolator.server.sql import types as T
from percolator.server.sql.errors import (
    IN_FAILED_SQL_TRANSACTION,
    INVALID_CATALOG_NAME,
    QUERY_CANCELED,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    SqlError,
)
from percolator.server.sql.types import SqlType

PASSWORD = "secret"
_TYPES = {"int": T.INT4, "int4": T.INT4, "int8": T.INT8, "text": T.TEXT, "bool": T.BOOL}
_BY_OID = {t.oid: t for t in (T.INT2, T.INT4, T.INT8, T.TEXT, T.BOOL, T.FLOAT8, T.VARCHAR)}
_PARAM = re.compile(r"^\$(\d+)(?:::(\w+))?$")


class _Rows:
    """Rows with one row of lookahead, so ``done`` is exact."""

    def __init__(self, rows: Iterator[tuple[object, ...]]) -> None:
        self._rows = rows
        self._next = next(rows, None)
        self.count = 0

    @property
    def done(self) -> bool:
        return self._next is None

    def take(self, n: int) -> list[tuple[object, ...]]:
        out = []
        while self._next is not None and (n <= 0 or len(out) < n):
            out.append(self._next)
            self._next = next(self._rows, None)
        self.count += len(out)
        return out


@dataclass
class FakeExecution:
    columns: list[ResultColumn] | None
    tag: str
    rows: _Rows = field(default_factory=lambda: _Rows(iter(())))
    copy: CopyIn | CopyOut | None = None
    notices: list[Notice] = field(default_factory=list)
    closed: bool = False

    async def fetch(self, max_rows: int) -> list[tuple[object, ...]]:
        return self.rows.take(max_rows)

    @property
    def done(self) -> bool:
        return self.rows.done

    @property
    def command_tag(self) -> str:
        return f"SELECT {self.rows.count}" if self.columns is not None else self.tag

    async def close(self) -> None:
        self.closed = True


class FakeCopyIn:
    binary = False
    column_count = 2

    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.data = bytearray()

    async def write(self, data: bytes) -> None:
        self.data += data

    async def finish(self) -> str:
        self.engine.copied.append(bytes(self.data))
        lines = self.data.count(b"\n")
        return f"COPY {lines}"

    async def fail(self, message: str) -> None:
        self.engine.copy_failures.append(message)


class FakeCopyOut:
    binary = False
    column_count = 2
    command_tag = ""

    async def _chunks(self) -> AsyncIterator[bytes]:
        for i, word in enumerate(("one", "two", "three"), 1):
            yield f"{i}\t{word}\n".encode()
        self.command_tag = "COPY 3"

    def chunks(self) -> AsyncIterator[bytes]:
        return self._chunks()


def _col(name: str, t: SqlType) -> ResultColumn:
    return ResultColumn(name, t)


class FakeSession:
    def __init__(self, engine: FakeEngine, user: str, options: dict[str, str], pid: int) -> None:
        self.engine = engine
        self.user = user
        self.options = options
        self.pid = pid
        self.status = "I"
        self.implicit_failed = False
        self.changes: list[tuple[str, str]] = []
        self.closed = asyncio.Event()
        self.executed: list[str] = []
        self.syncs = 0
        self.cancelled = 0
        self._cancel: asyncio.Event | None = None

    def idle_in_transaction_timeout_s(self) -> float:
        return 0.0  # not set: the server's option holds

    @property
    def transaction_status(self) -> str:
        return self.status

    def startup_parameters(self) -> list[tuple[str, str]]:
        return [
            ("application_name", self.options.get("application_name", "")),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("default_transaction_read_only", "off"),
            ("in_hot_standby", "off"),
            ("integer_datetimes", "on"),
            ("IntervalStyle", "postgres"),
            ("is_superuser", "on"),
            ("server_encoding", "UTF8"),
            ("server_version", "15.0"),
            ("session_authorization", self.user),
            ("standard_conforming_strings", "on"),
            ("TimeZone", "Etc/UTC"),
        ]

    def take_parameter_changes(self) -> list[tuple[str, str]]:
        out, self.changes = self.changes, []
        return out

    def take_deallocations(self) -> list[str | None]:
        return []

    def parse(self, sql: str) -> list[ParsedStatement]:
        parts = [p.strip() for p in sql.split(";")]
        statements = [ParsedStatement(p) for p in parts if p]
        if not statements:
            return [ParsedStatement("", empty=True)]
        for st in statements:
            if st.sql.lower().startswith("xyz"):
                raise SqlError(SYNTAX_ERROR, 'syntax error at or near "xyz"', position=1)
        return statements

    async def prepare(
        self, statement: ParsedStatement, param_oids: Sequence[int]
    ) -> PreparedStatement:
        sql = statement.sql
        lower = sql.lower()
        params: list[SqlType] = []
        columns: list[ResultColumn] | None = None
        if lower.startswith("select "):
            items = [i.strip() for i in sql[7:].split(",")]
            if lower.startswith("select generate_series"):
                columns = [_col("generate_series", T.INT4)]
            elif lower.startswith("select pg_sleep"):
                columns = [_col("pg_sleep", T.TEXT)]
            elif lower in ("select fail", "select boom", "select wait", "select notice"):
                columns = [_col("x", T.INT4)]
            else:
                columns = []
                for item in items:
                    m = _PARAM.match(item)
                    if m:
                        n = int(m.group(1))
                        given = param_oids[n - 1] if n <= len(param_oids) else 0
                        cast = _TYPES[m.group(2)] if m.group(2) else None
                        # A type the client gave wins; the cast then converts the value.
                        t = _BY_OID.get(given) or cast or T.TEXT
                        while len(params) < n:
                            params.append(T.TEXT)
                        params[n - 1] = t
                        columns.append(_col("?column?", cast or t))
                    elif item.startswith("'"):
                        columns.append(_col("?column?", T.TEXT))
                    elif item.lstrip("-").isdigit():
                        columns.append(_col("?column?", T.INT4))
                    else:
                        raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{item}"')
        else:
            count = max((int(n) for n in re.findall(r"\$(\d+)", sql)), default=0)
            for n in range(count):
                given = param_oids[n] if n < len(param_oids) else 0
                params.append(_BY_OID.get(given, T.TEXT))
        return PreparedStatement(statement, params, columns)

    async def execute(self, prepared: PreparedStatement, params: Sequence[object]) -> FakeExecution:
        sql = prepared.statement.sql
        lower = sql.lower()
        self.executed.append(sql)
        if self.status == "E" and lower not in ("rollback", "commit", "end"):
            raise SqlError(
                IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        cols = prepared.columns
        if lower == "begin":
            self.status = "T"
            return FakeExecution(None, "BEGIN")
        if lower in ("commit", "end"):
            tag = "ROLLBACK" if self.status == "E" else "COMMIT"
            self.status = "I"
            return FakeExecution(None, tag)
        if lower == "rollback":
            self.status = "I"
            return FakeExecution(None, "ROLLBACK")
        if lower.startswith("insert"):
            return FakeExecution(None, "INSERT 0 1")
        if lower.startswith("set application_name"):
            value = re.split(r"=|\bto\b", sql, maxsplit=1)[1].strip().strip("'")
            self.changes.append(("application_name", value))
            return FakeExecution(None, "SET")
        if lower.startswith("copy") and lower.endswith("from stdin"):
            return FakeExecution(None, "", copy=FakeCopyIn(self.engine))
        if lower.startswith("copy") and lower.endswith("to stdout"):
            return FakeExecution(None, "", copy=FakeCopyOut())
        if cols is None:
            raise SqlError(SYNTAX_ERROR, f'syntax error at or near "{sql.split()[0]}"', position=1)
        if lower == "select fail":
            raise SqlError(UNDEFINED_COLUMN, 'column "fail" does not exist', position=8)
        if lower == "select boom":
            raise RuntimeError("boom")
        if lower.startswith("select generate_series"):
            n = int(re.findall(r"\d+", lower)[-1])
            rows = _Rows((i,) for i in range(1, n + 1))
            self.engine.last_rows = rows
            return FakeExecution(cols, "", rows)
        if lower.startswith("select pg_sleep"):
            seconds = float(re.findall(r"[\d.]+", lower)[-1])
            await self._sleep(seconds)
            return FakeExecution(cols, "", _Rows(iter([("",)])))
        if lower == "select wait":
            self.engine.waiting.set()
            await self.engine.release.wait()
            return FakeExecution(cols, "", _Rows(iter([(1,)])))
        if lower == "select notice":
            return FakeExecution(
                cols, "", _Rows(iter([(1,)])), notices=[Notice("00000", "hello from the engine")]
            )
        values: list[object] = []
        for item in (i.strip() for i in sql[7:].split(",")):
            m = _PARAM.match(item)
            if m:
                values.append(params[int(m.group(1)) - 1])
            elif item.startswith("'"):
                values.append(item.strip("'"))
            else:
                values.append(int(item))
        return FakeExecution(cols, "", _Rows(iter([tuple(values)])))

    async def _sleep(self, seconds: float) -> None:
        self._cancel = asyncio.Event()
        self.engine.sleeping.set()
        try:
            async with asyncio.timeout(seconds):
                await self._cancel.wait()
        except TimeoutError:
            return
        finally:
            self._cancel = None
            self.engine.sleeping.clear()
        self.cancelled += 1
        raise SqlError(QUERY_CANCELED, "canceling statement due to user request")

    def cursor_columns(self, name: str) -> list[ResultColumn] | None:
        return None

    def on_notification(self, sink: object) -> None:
        pass

    def share_portal(self, name: str, *args: object) -> None:
        pass

    def unshare_portal(self, name: str) -> None:
        pass

    async def sync(self) -> None:
        self.syncs += 1
        self.implicit_failed = False

    def statement_failed(self, error: BaseException) -> None:
        if self.status == "T":
            self.status = "E"
        else:
            self.implicit_failed = True

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    async def close(self) -> None:
        self.closed.set()


class FakeEngine:
    def __init__(self) -> None:
        self.users = {
            "u": UserInfo("u", make_scram_verifier(PASSWORD), make_md5_hash("u", PASSWORD)),
            "scramonly": UserInfo("scramonly", make_scram_verifier(PASSWORD), None),
            "md5only": UserInfo("md5only", None, make_md5_hash("md5only", PASSWORD)),
        }
        self.sessions: list[FakeSession] = []
        self.copied: list[bytes] = []
        self.copy_failures: list[str] = []
        self.last_rows: _Rows | None = None
        self.sleeping = asyncio.Event()
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def lookup_user(self, name: str) -> UserInfo | None:
        return self.users.get(name)

    def open_session(
        self, user: str, database: str, options: dict[str, str], backend_pid: int
    ) -> FakeSession:
        if database == "nosuchdb":
            raise SqlError(INVALID_CATALOG_NAME, f'database "{database}" does not exist')
        session = FakeSession(self, user, options, backend_pid)
        self.sessions.append(session)
        return session
