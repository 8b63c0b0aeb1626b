"""COPY ... FROM STDIN and COPY ... TO STDOUT: the text, CSV and binary formats.

Rows read by COPY FROM are inserted in chunks as the data arrives (constraints, defaults and
indexes as for INSERT), into the statement's transaction; nothing is visible before it commits.
"""

from __future__ import annotations

import csv
import io
import struct
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from percolator.server.planner.dml import CHUNK, insert_rows
from percolator.server.sql import binaryio, textio
from percolator.server.sql.catalog import ColumnDef, TableDef
from percolator.server.sql.errors import (
    BAD_COPY_FORMAT,
    QUERY_CANCELED,
    SqlError,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.txn.transaction import Transaction

if TYPE_CHECKING:
    from percolator.server.session import Plan, SqlSession

BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_TEXT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


class CopyInExecution:
    """COPY FROM STDIN: the front end feeds CopyData; rows are inserted as they complete."""

    columns = None
    notices: list[Any] = []

    def __init__(self, session: SqlSession, plan: Plan, txn: Transaction) -> None:
        from percolator.server.sql.binder import Binder

        stmt = plan.statement
        self.copy = self
        self.binary = stmt.format == "binary"
        self._csv = stmt.format == "csv"
        self._session = session
        table: TableDef = plan.extra["table"]
        target: list[ColumnDef] = plan.extra["target"]
        self.column_count = len(target)
        self._table = table
        assert plan.catalog is not None
        binder = Binder(plan.catalog, Params())
        self._writer = session._writer(table, binder)
        self._positions = [table.position(c.id) for c in target]
        self._decoders: list[Callable[[str], object]] = [
            (lambda s, _t=c.type: textio.text_in(_t, s)) for c in target
        ]
        self._types = [c.type for c in target]
        target_ids = {c.id for c in target}
        self._defaults = session.insert_defaults(
            table, [c for c in table.columns if c.id not in target_ids], plan.catalog, binder
        )
        self._ctx = session._context(txn, plan.catalog, [])
        self._delimiter = stmt.delimiter or ("," if self._csv else "\t")
        self._null = stmt.null if stmt.null is not None else ("" if self._csv else "\\N")
        self._header = stmt.header
        self._quote = stmt.quote
        self._escape = stmt.escape or stmt.quote
        self._buffer = b""
        self._pending: list[tuple[object, ...]] = []
        self._count = 0
        self._line = 0
        self._ended = False
        self._binary_header_done = False

    # engine_api.Execution (unused rows API)
    async def fetch(self, max_rows: int) -> list[tuple[object, ...]]:
        return []

    @property
    def done(self) -> bool:
        return True

    @property
    def command_tag(self) -> str:
        return f"COPY {self._count}"

    async def close(self) -> None:
        self._pending = []

    # engine_api.CopyIn
    async def write(self, data: bytes) -> None:
        async with self._session.guard():
            self._buffer += data
            if self.binary:
                self._parse_binary()
            else:
                self._parse_lines(final=False)
            if len(self._pending) >= CHUNK:
                await self._flush()

    async def finish(self) -> str:
        async with self._session.guard():
            if self.binary:
                self._parse_binary()
                if self._buffer:
                    raise SqlError(BAD_COPY_FORMAT, "unexpected EOF in COPY data")
            else:
                self._parse_lines(final=True)
            await self._flush()
        self._session.statement_done()
        return self.command_tag

    async def fail(self, message: str) -> None:
        self._pending = []
        raise SqlError(QUERY_CANCELED, f"COPY from stdin failed: {message}")

    # -- parsing -----------------------------------------------------------------------------

    def _parse_lines(self, final: bool) -> None:
        if self._csv:
            self._parse_csv(final)
            return
        lines = self._buffer.split(b"\n")
        tail = lines.pop()  # an incomplete line, or b"" after the last newline
        if final and tail:
            lines.append(tail)
        self._buffer = b"" if final else tail
        for raw in lines:
            self._line += 1
            line = raw.decode("utf-8")
            if line.endswith("\r"):
                line = line[:-1]
            if self._ended:
                continue
            if line == "\\.":
                self._ended = True
                continue
            if self._header and self._line == 1:
                continue
            fields = line.split(self._delimiter)
            self._add([None if f == self._null else _unescape(f) for f in fields])

    def _parse_csv(self, final: bool) -> None:
        data = self._buffer
        if not final:
            cut = data.rfind(b"\n")
            if cut < 0:
                return
            chunk, self._buffer = data[: cut + 1], data[cut + 1 :]
        else:
            chunk, self._buffer = data, b""
        if not chunk:
            return
        text = chunk.decode("utf-8")
        reader = csv.reader(
            io.StringIO(text, newline=""),
            delimiter=self._delimiter,
            quotechar=self._quote,
            escapechar=None if self._escape == self._quote else self._escape,
            doublequote=self._escape == self._quote,
            strict=True,
        )
        # csv cannot tell "" (empty string) from an unquoted empty field (NULL); recover the
        # distinction from the raw text of each line.
        raw_lines = text.splitlines()
        try:
            for i, fields in enumerate(reader):
                self._line += 1
                if self._header and self._line == 1:
                    continue
                raw = raw_lines[i] if i < len(raw_lines) else ""
                if raw == "\\.":
                    self._ended = True
                    continue
                if self._ended:
                    continue
                quoted_empty = _quoted_empty_fields(raw, self._delimiter, self._quote)
                values: list[str | None] = []
                for j, f in enumerate(fields):
                    if f == self._null and j not in quoted_empty:
                        values.append(None)
                    else:
                        values.append(f)
                self._add(values)
        except csv.Error as err:
            raise SqlError(BAD_COPY_FORMAT, f"invalid CSV data: {err}") from None

    def _add(self, fields: list[str | None]) -> None:
        if len(fields) != self.column_count:
            word = (
                "extra data after last expected column"
                if len(fields) > self.column_count
                else "missing data for column"
            )
            raise SqlError(
                BAD_COPY_FORMAT, f"{word}", detail=f"COPY {self._table.name}, line {self._line}"
            )
        values = []
        for f, dec in zip(fields, self._decoders, strict=True):
            values.append(None if f is None else dec(f))
        self._pending.append(tuple(values))

    def _parse_binary(self) -> None:
        buf = self._buffer
        pos = 0
        if not self._binary_header_done:
            if len(buf) < 19:
                return
            if not buf.startswith(BINARY_SIGNATURE):
                raise SqlError(BAD_COPY_FORMAT, "COPY file signature not recognized")
            (ext_len,) = struct.unpack_from("!I", buf, 15)
            pos = 19 + ext_len
            self._binary_header_done = True
        while True:
            if len(buf) - pos < 2:
                break
            (nfields,) = struct.unpack_from("!h", buf, pos)
            if nfields == -1:
                pos += 2
                self._ended = True
                break
            if nfields != self.column_count:
                raise SqlError(
                    BAD_COPY_FORMAT, f"row field count is {nfields}, expected {self.column_count}"
                )
            p = pos + 2
            values: list[object] = []
            complete = True
            for t in self._types:
                if len(buf) - p < 4:
                    complete = False
                    break
                (n,) = struct.unpack_from("!i", buf, p)
                p += 4
                if n == -1:
                    values.append(None)
                    continue
                if len(buf) - p < n:
                    complete = False
                    break
                values.append(binaryio.binary_in(t, bytes(buf[p : p + n])))
                p += n
            if not complete:
                break
            self._pending.append(tuple(values))
            pos = p
        self._buffer = buf[pos:]

    async def _flush(self) -> None:
        if not self._pending:
            return
        width = len(self._table.columns)
        rows = []
        for values in self._pending:
            row: list[object] = [None] * width
            for pos, v in zip(self._positions, values, strict=True):
                row[pos] = v
            for pos, fill in self._defaults:
                row[pos] = await fill(self._ctx)
            rows.append(tuple(row))
        self._pending = []
        result = await insert_rows(self._writer, self._ctx, rows)
        self._count += result.count


class CopyOutExecution:
    """COPY TO STDOUT: rows formatted as text, CSV or binary CopyData payloads."""

    columns = None
    notices: list[Any] = []

    def __init__(
        self,
        session: SqlSession,
        rows: AsyncIterator[tuple[object, ...]],
        types: list[Any],
        stmt: Any,
        names: list[str],
    ) -> None:
        self.copy = self
        self.binary = stmt.format == "binary"
        self.column_count = len(types)
        self._session = session
        self._rows = rows
        self._types = types
        self._stmt = stmt
        self._names = names
        self._count = 0
        self.command_tag = "COPY 0"

    async def fetch(self, max_rows: int) -> list[tuple[object, ...]]:
        return []

    @property
    def done(self) -> bool:
        return True

    async def close(self) -> None:
        aclose = getattr(self._rows, "aclose", None)
        if aclose is not None:
            await aclose()

    async def chunks(self) -> AsyncIterator[bytes]:
        stmt = self._stmt
        csv_mode = stmt.format == "csv"
        delimiter = stmt.delimiter or ("," if csv_mode else "\t")
        null = stmt.null if stmt.null is not None else ("" if csv_mode else "\\N")
        if self.binary:
            yield BINARY_SIGNATURE + struct.pack("!II", 0, 0)
            encoders = [binaryio.binary_encoder(t) for t in self._types]
        else:
            encoders = [textio.text_encoder(t) for t in self._types]
            if stmt.header:
                yield (
                    delimiter.join(
                        _csv_field(n, delimiter, stmt.quote) if csv_mode else n for n in self._names
                    )
                    + "\n"
                ).encode()
        async with self._session.guard():
            async for row in self._rows:
                self._count += 1
                if self.binary:
                    parts = [struct.pack("!h", len(row))]
                    for v, enc in zip(row, encoders, strict=True):
                        if v is None:
                            parts.append(b"\xff\xff\xff\xff")
                        else:
                            data = enc(v)
                            parts.append(struct.pack("!i", len(data)) + data)
                    yield b"".join(parts)
                    continue
                fields = []
                for v, enc in zip(row, encoders, strict=True):
                    if v is None:
                        fields.append(null)
                    elif csv_mode:
                        fields.append(_csv_field(enc(v), delimiter, stmt.quote, null))
                    else:
                        fields.append(_escape(enc(v), delimiter))
                yield (delimiter.join(fields) + "\n").encode()
        if self.binary:
            yield b"\xff\xff"
        self.command_tag = f"COPY {self._count}"
        self._session.statement_done()


async def start_copy(session: SqlSession, plan: Plan, txn: Transaction) -> Any:
    stmt = plan.statement
    if stmt.direction_in:
        return CopyInExecution(session, plan, txn)
    assert plan.catalog is not None
    ctx = session._context(txn, plan.catalog, [])
    if plan.node is not None:
        cols = plan.extra["columns"]
        return CopyOutExecution(
            session, plan.node.rows(ctx), [c.type for c in cols], stmt, [c.name for c in cols]
        )
    table: TableDef = plan.extra["table"]
    target: list[ColumnDef] = plan.extra["target"]
    node = session.engine.planner.table_access(table, table.name, [])
    positions = [table.position(c.id) for c in target]

    async def rows() -> AsyncIterator[tuple[object, ...]]:
        async for r in node.rows(ctx):
            yield tuple(r[p] for p in positions)

    return CopyOutExecution(
        session, rows(), [c.type for c in target], stmt, [c.name for c in target]
    )


def _unescape(field: str) -> str:
    if "\\" not in field:
        return field
    out = []
    i = 0
    n = len(field)
    while i < n:
        ch = field[i]
        if ch == "\\" and i + 1 < n:
            nxt = field[i + 1]
            if nxt in _TEXT_ESCAPES:
                out.append(_TEXT_ESCAPES[nxt])
                i += 2
                continue
            if nxt.isdigit():
                j = i + 1
                while j < n and j < i + 4 and field[j] in "01234567":
                    j += 1
                out.append(chr(int(field[i + 1 : j], 8)))
                i = j
                continue
            if nxt == "x" and i + 2 < n:
                j = i + 2
                while j < n and j < i + 4 and field[j] in "0123456789abcdefABCDEF":
                    j += 1
                out.append(chr(int(field[i + 2 : j], 16)))
                i = j
                continue
            out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _escape(text: str, delimiter: str) -> str:
    if not any(c in text for c in ("\\", "\n", "\r", "\t", delimiter)):
        return text
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if delimiter not in ("\t",):
        out = out.replace(delimiter, "\\" + delimiter)
    return out


def _csv_field(text: str, delimiter: str, quote: str, null: str = "") -> str:
    if (
        text == ""
        or text == null
        or any(c in text for c in (delimiter, quote, "\n", "\r"))
        or text.startswith("\\.")
    ):
        return quote + text.replace(quote, quote + quote) + quote
    return text


def _quoted_empty_fields(raw: str, delimiter: str, quote: str) -> set[int]:
    """Indexes of the fields written as "" (an empty string, not NULL) on a CSV line."""
    out = set()
    index = 0
    i = 0
    n = len(raw)
    while i <= n:
        if raw.startswith(quote + quote, i) and (i + 2 == n or raw[i + 2] == delimiter):
            out.add(index)
        if raw.startswith(quote, i):
            i += 1
            while i < n:
                if raw[i] == quote:
                    if i + 1 < n and raw[i + 1] == quote:
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        j = raw.find(delimiter, i)
        if j < 0:
            break
        i = j + 1
        index += 1
    return out
