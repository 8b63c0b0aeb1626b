"""COPY ... FROM STDIN and COPY ... TO STDOUT: the text, CSV and binary formats.

Rows read by COPY FROM are inserted in chunks as the data arrives (constraints, defaults and
indexes as for INSERT), into the statement's transaction; nothing is visible before it commits.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from percolator.server.planner.dml import CHUNK, KeyColumns, insert_rows, key_detail
from percolator.server.sql import binaryio, generated_columns, schemas, textio
from percolator.server.sql.catalog import Catalog, ColumnDef, TableDef
from percolator.server.sql.errors import (
    BAD_COPY_FORMAT,
    CHARACTER_NOT_IN_REPERTOIRE,
    CHECK_VIOLATION,
    DUPLICATE_COLUMN,
    INVALID_COLUMN_REFERENCE,
    NOT_NULL_VIOLATION,
    QUERY_CANCELED,
    UNIQUE_VIOLATION,
    UNTRANSLATABLE_CHARACTER,
    WRONG_OBJECT_TYPE,
    SqlError,
)
from percolator.server.sql.expr_binder import Params
from percolator.server.txn.transaction import Transaction

if TYPE_CHECKING:
    from percolator.server.session import Plan, SqlSession

BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_TEXT_ESCAPES = {"b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_OCTAL = "01234567"
_HEX = "0123456789abcdefABCDEF"


def copy_target(catalog: Catalog, stmt: Any) -> tuple[TableDef, list[ColumnDef]]:
    """The table of ``COPY table [(columns)]`` and the columns it reads or writes, with
    Postgres's errors (42809 for a view, 42701 for a column listed twice)."""
    name = schemas.resolve(catalog, stmt.table or "")
    if name not in catalog.tables and name in catalog.views:
        shown = stmt.table
        if stmt.direction_in:
            raise SqlError(
                WRONG_OBJECT_TYPE,
                f'cannot copy to view "{shown}"',
                hint="To enable copying to a view, provide an INSTEAD OF INSERT trigger.",
            )
        raise SqlError(
            WRONG_OBJECT_TYPE,
            f'cannot copy from view "{shown}"',
            hint="Try the COPY (SELECT ...) TO variant.",
        )
    table = catalog.table(name)
    # Generated columns are not copied, either way (Postgres 15): without a list they are
    # left out, and a list may not name one.
    names = (
        list(stmt.columns)
        if stmt.columns
        else [c.name for c in table.columns if c.generated is None]
    )
    columns: list[ColumnDef] = []
    for n in names:
        col = table.column(n)
        if col.generated is not None:
            raise generated_columns.copy_error(col)
        if col in columns:
            raise SqlError(DUPLICATE_COLUMN, f'column "{n}" specified more than once')
        columns.append(col)
    return table, columns


def _force_flags(
    option: str, given: tuple[str, ...] | None, names: list[str], table: TableDef | None
) -> list[bool]:
    """Per copied column: is it named by the FORCE_* option ``given`` (``*``: all)? A name
    must be a copied column: 42703 if the table has no such column, else 42P10."""
    if not given:
        return [False] * len(names)
    if given == ("*",):
        return [True] * len(names)
    for g in given:
        if g in names:
            continue
        if table is not None:
            table.column(g)
        raise SqlError(
            INVALID_COLUMN_REFERENCE, f'{option.upper()} column "{g}" not referenced by COPY'
        )
    return [n in given for n in names]


def _bad_encoding(data: bytes, encoding: str) -> SqlError:
    """22021 for bytes that are not valid in ``encoding``, naming the first bad ones."""
    try:
        data.decode(encoding)
    except UnicodeDecodeError as err:
        lead = data[err.start]
        # Postgres shows the bytes of the character the first one begins (UTF-8's length).
        size = _utf8_length(lead) if encoding == "utf-8" else 1
        shown = " ".join(f"0x{b:02x}" for b in data[err.start : err.start + size])
        return SqlError(
            CHARACTER_NOT_IN_REPERTOIRE,
            f'invalid byte sequence for encoding "{_label(encoding)}": {shown}',
        )
    return SqlError(CHARACTER_NOT_IN_REPERTOIRE, "invalid byte sequence")


def _utf8_length(lead: int) -> int:
    """The length of the UTF-8 sequence ``lead`` begins (1 for a byte that begins none)."""
    for size, low, high in ((2, 0xC0, 0xE0), (3, 0xE0, 0xF0), (4, 0xF0, 0xF8)):
        if low <= lead < high:
            return size
    return 1


def _shown(text: str | None) -> str:
    """Data quoted for an error's CONTEXT, cut at 100 characters as Postgres does."""
    if text is None:
        return "null input"
    return '"' + (text[:100] + "..." if len(text) > 100 else text) + '"'


def _decode(data: bytes, encoding: str) -> str:
    """COPY data as text; 22021 for bytes invalid in ``encoding`` or a zero byte."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        raise _bad_encoding(data, encoding) from None
    if "\x00" in text:
        raise SqlError(
            CHARACTER_NOT_IN_REPERTOIRE,
            f'invalid byte sequence for encoding "{_label(encoding)}": 0x00',
        )
    return text


def _label(encoding: str) -> str:
    """Postgres's name for a Python codec name (``utf-8`` is ``UTF8``)."""
    return "UTF8" if encoding == "utf-8" else encoding.upper().replace("-", "")


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
        self._names = [c.name for c in target]
        self._force_not_null = _force_flags(
            "force_not_null", stmt.force_not_null, self._names, table
        )
        self._force_null = _force_flags("force_null", stmt.force_null, self._names, table)
        assert plan.catalog is not None
        binder = Binder(plan.catalog, Params())
        self._writer = session._writer(table, binder)
        self._positions = [table.position(c.id) for c in target]
        self._decoders: list[Callable[[str], object]] = [
            textio.text_decoder(c.type) for c in target
        ]
        self._types = [c.type for c in target]
        target_ids = {c.id for c in target}
        self._defaults = session.insert_defaults(
            table, [c for c in table.columns if c.id not in target_ids], plan.catalog, binder
        )
        self._ctx = session._context(txn, plan.catalog, [])
        self._encoding = stmt.encoding or "utf-8"
        self._delimiter = stmt.delimiter or ("," if self._csv else "\t")
        self._null = stmt.null if stmt.null is not None else ("" if self._csv else "\\N")
        self._header = stmt.header
        self._header_match = stmt.header_match
        self._quote = stmt.quote
        self._escape = stmt.escape or stmt.quote
        self._csv_plain = re.compile("[^" + re.escape(self._delimiter + self._quote) + "\r\n]*")
        self._csv_quoted = re.compile("[^" + re.escape(self._quote + self._escape) + "]*")
        self._buffer = b""
        self._pending: list[tuple[object, ...]] = []
        self._pending_at: list[tuple[int, str | None]] = []
        """Each pending row's line and text (None in binary), for a constraint error's CONTEXT."""
        self._count = 0
        self._fired_before = False
        self._line = 0
        self._raw = ""
        """The current line (record), for errors' CONTEXT."""
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
        self._pending_at = []

    # engine_api.CopyIn
    async def write(self, data: bytes) -> None:
        async with self._session.guard():
            await self._statement_triggers(before=True)
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
                if not self._binary_header_done:
                    raise SqlError(BAD_COPY_FORMAT, "COPY file signature not recognized")
                if self._buffer:
                    raise SqlError(BAD_COPY_FORMAT, "unexpected EOF in COPY data")
            else:
                self._parse_lines(final=True)
            await self._statement_triggers(before=True)
            await self._flush()
            await self._statement_triggers(before=False)
        self._session.statement_done()
        return self.command_tag

    async def _statement_triggers(self, before: bool) -> None:
        """The table's statement-level INSERT triggers: BEFORE with the first data (once),
        AFTER once every row is in."""
        triggers = self._writer.triggers
        if triggers is None or (before and self._fired_before):
            return
        self._fired_before = True
        await triggers.statement(self._ctx, before, ["insert"])

    async def fail(self, message: str) -> None:
        self._pending = []
        self._pending_at = []
        raise SqlError(QUERY_CANCELED, f"COPY from stdin failed: {message}")

    # -- parsing -----------------------------------------------------------------------------

    def _parse_lines(self, final: bool) -> None:
        if self._csv:
            self._parse_csv(final)
            return
        lines = self._buffer.split(b"\n")
        tail = lines.pop()  # an incomplete line, or b"" after the last newline
        lines, carried = _join_escaped_newlines(lines)
        if final:
            lines += [carried + b"\n" + tail] if carried is not None else [tail] if tail else []
            self._buffer = b""
        else:
            self._buffer = tail if carried is None else carried + b"\n" + tail
        for raw in lines:
            if self._ended:
                return
            self._line += 1
            line = _decode(raw, self._encoding)
            if line.endswith("\r"):
                line = line[:-1]
            if line == "\\.":
                self._ended = True
                continue
            self._raw = line
            raw_fields = _split_text(line, self._delimiter)
            try:
                fields = [None if f == self._null else _unescape(f) for f in raw_fields]
            except SqlError as err:
                raise replace(err, context=self._where()) from None
            if self._header and self._line == 1:
                self._check_header(fields)
                continue
            self._add([(f, False) for f in fields])

    def _parse_csv(self, final: bool) -> None:
        """Complete CSV records of the buffer (a quoted field may span lines)."""
        text = _decode(self._buffer, self._encoding) if final else None
        if text is None:
            cut = self._buffer.rfind(b"\n")
            if cut < 0:
                return
            text = _decode(self._buffer[: cut + 1], self._encoding)
            rest = self._buffer[cut + 1 :]
        else:
            rest = b""
        pos = 0
        n = len(text)
        while pos < n and not self._ended:
            if text.startswith("\\.", pos) and text[pos + 2 : pos + 3] in ("", "\n", "\r"):
                self._ended = True
                break
            start = pos
            record = self._csv_record(text, pos, final)
            if record is None:
                break
            fields, pos, lines = record
            self._raw = text[start:pos].removesuffix("\n").removesuffix("\r")
            first = self._line + 1
            self._line += lines
            if self._header and first == 1:
                self._check_header([v for v, _ in fields])
                continue
            self._add(fields)
        if self._ended:
            pos = n
        self._buffer = text[pos:].encode(self._encoding) + rest

    def _csv_record(
        self, text: str, pos: int, final: bool
    ) -> tuple[list[tuple[str | None, bool]], int, int] | None:
        """One CSV record from ``pos``: its fields as (value, quoted) with NULL as (None,
        False), the position after it and the lines it took; None if it is incomplete."""
        fields: list[tuple[str | None, bool]] = []
        quote, escape, delim = self._quote, self._escape, self._delimiter
        start = pos
        lines = 1
        n = len(text)
        while True:
            parts: list[str] = []
            quoted = False
            while True:
                m = self._csv_plain.match(text, pos)
                assert m is not None
                parts.append(m.group())
                pos = m.end()
                if pos < n and text[pos] == quote:
                    quoted = True
                    pos += 1
                    while True:
                        m = self._csv_quoted.match(text, pos)
                        assert m is not None
                        parts.append(m.group())
                        lines += m.group().count("\n")
                        pos = m.end()
                        if pos >= n:
                            if final:
                                raise self._unterminated(text[start:])
                            return None
                        c = text[pos]
                        if c == escape:
                            if pos + 1 >= n and not final:
                                return None  # what it escapes is in the next CopyData
                            nxt = text[pos + 1 : pos + 2]
                            if nxt and nxt in (quote, escape):
                                parts.append(nxt)
                                pos += 2
                                continue
                        if c == quote:
                            pos += 1
                            break
                        parts.append(c)  # an escape character before an ordinary one
                        pos += 1
                    continue
                break
            value = "".join(parts)
            fields.append((None, False) if not quoted and value == self._null else (value, quoted))
            if pos < n and text[pos] == delim:
                pos += 1
                continue
            if pos < n and text[pos] == "\r":
                pos += 1
            if pos < n and text[pos] == "\n":
                pos += 1
            elif pos >= n and not final:
                return None
            return fields, pos, lines

    def _unterminated(self, record: str) -> SqlError:
        self._line += 1
        self._raw = record
        return SqlError(BAD_COPY_FORMAT, "unterminated CSV quoted field", context=self._where())

    def _check_header(self, fields: list[str | None]) -> None:
        """HEADER MATCH: the header line must name the copied columns, in order."""
        if not self._header_match:
            return
        if len(fields) != self.column_count:
            raise SqlError(
                BAD_COPY_FORMAT,
                f"wrong number of fields in header line: got {len(fields)}, "
                f"expected {self.column_count}",
                context=self._where(),
            )
        for i, (got, want) in enumerate(zip(fields, self._names, strict=True), 1):
            if got is None:
                raise SqlError(
                    BAD_COPY_FORMAT,
                    f"column name mismatch in header line field {i}: got null value "
                    f'("{self._null}"), expected "{want}"',
                    context=self._where(),
                )
            if got != want:
                raise SqlError(
                    BAD_COPY_FORMAT,
                    f'column name mismatch in header line field {i}: got "{got}", '
                    f'expected "{want}"',
                    context=self._where(),
                )

    def _add(self, fields: list[tuple[str | None, bool]]) -> None:
        """Convert one record's fields (value, quoted) and queue the row, checking the count
        and converting column by column as Postgres does (so its errors come in its order)."""
        if len(fields) > self.column_count:
            raise SqlError(
                BAD_COPY_FORMAT, "extra data after last expected column", context=self._where()
            )
        values: list[object] = []
        for i, dec in enumerate(self._decoders):
            if i >= len(fields):
                raise SqlError(
                    BAD_COPY_FORMAT,
                    f'missing data for column "{self._names[i]}"',
                    context=self._where(),
                )
            value, quoted = fields[i]
            if value is None and self._force_not_null[i]:
                value = self._null
            elif value == self._null and quoted and self._force_null[i]:
                value = None
            try:
                values.append(None if value is None else dec(value))
            except SqlError as err:
                where = f"COPY {self._table.name}, line {self._line}, column {self._names[i]}"
                raise replace(err, context=f"{where}: {_shown(value)}") from None
        self._pending.append(tuple(values))
        self._pending_at.append((self._line, self._raw))

    def _where(self) -> str:
        """CONTEXT for an error on the current line, as Postgres words it."""
        return f"COPY {self._table.name}, line {self._line}: {_shown(self._raw)}"

    def _parse_binary(self) -> None:
        buf = self._buffer
        pos = 0
        if not self._binary_header_done:
            if len(buf) < 19:
                return
            if not buf.startswith(BINARY_SIGNATURE):
                raise SqlError(BAD_COPY_FORMAT, "COPY file signature not recognized")
            (ext_len,) = struct.unpack_from("!I", buf, 15)
            if len(buf) < 19 + ext_len:
                return  # the header extension is still to come
            pos = 19 + ext_len
            self._binary_header_done = True
        while not self._ended:
            if len(buf) - pos < 2:
                break
            (nfields,) = struct.unpack_from("!h", buf, pos)
            if nfields == -1:
                pos += 2
                self._ended = True
                break
            if nfields != self.column_count:
                raise SqlError(
                    BAD_COPY_FORMAT,
                    f"row field count is {nfields}, expected {self.column_count}",
                    context=f"COPY {self._table.name}, line {self._line + 1}",
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
            self._pending_at.append((self._line + 1, None))
            self._line += 1
            pos = p
        # Data after the trailer is ignored, as Postgres does.
        self._buffer = b"" if self._ended else buf[pos:]

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
        at, self._pending_at = self._pending_at, []
        try:
            result = await insert_rows(self._writer, self._ctx, rows)
        except SqlError as err:
            if err.context is None:
                if err.sqlstate in (NOT_NULL_VIOLATION, CHECK_VIOLATION):
                    raise self._on_line(err, rows, at) from None
                if err.sqlstate == UNIQUE_VIOLATION:
                    raise self._on_duplicate_line(err, rows, at) from None
            raise
        self._count += result.count

    def _on_duplicate_line(
        self, err: SqlError, rows: list[tuple[object, ...]], at: list[tuple[int, str | None]]
    ) -> SqlError:
        """``err`` (23505) with the CONTEXT of the line whose row took the key the DETAIL
        names, as Postgres's ``COPY t, line N`` (without the text, as Postgres): the second
        row of the chunk with that key, else the only one (the key was stored before)."""
        writer, ctx = self._writer, self._ctx
        table = writer.table
        keys: list[KeyColumns] = [*writer.unique_indexes]
        if table.primary_key:
            keys.append(tuple(table.primary_key))
        lines = [
            line
            for row, (line, _) in zip(rows, at, strict=True)
            if any(key_detail(table, k, writer.generate(row, ctx)) == err.detail for k in keys)
        ]
        if not lines:
            return err
        line = lines[1] if len(lines) > 1 else lines[0]
        return replace(err, context=f"COPY {self._table.name}, line {line}")

    def _on_line(
        self, err: SqlError, rows: list[tuple[object, ...]], at: list[tuple[int, str | None]]
    ) -> SqlError:
        """``err`` with the CONTEXT of the line whose row fails the same check (found again
        on the error's path only), as Postgres's ``COPY t, line N: "..."``."""
        writer, ctx = self._writer, self._ctx
        for row, (line, raw) in zip(rows, at, strict=True):
            try:
                writer.check_row(writer.generate(row, ctx), ctx)
            except SqlError:
                where = f"COPY {self._table.name}, line {line}"
                return replace(err, context=where if raw is None else f"{where}: {_shown(raw)}")
        return err


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
        table: TableDef | None = None,
    ) -> None:
        self.copy = self
        self.binary = stmt.format == "binary"
        self.column_count = len(types)
        self._session = session
        self._rows = rows
        self._types = types
        self._stmt = stmt
        self._names = names
        self._force_quote = _force_flags("force_quote", stmt.force_quote, names, table)
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
        if self.binary:
            async for chunk in self._binary_chunks():
                yield chunk
        else:
            async for chunk in self._text_chunks():
                yield chunk
        self.command_tag = f"COPY {self._count}"
        self._session.statement_done()

    async def _binary_chunks(self) -> AsyncIterator[bytes]:
        yield BINARY_SIGNATURE + struct.pack("!II", 0, 0)
        encoders = [binaryio.binary_encoder(t) for t in self._types]
        async with self._session.guard():
            async for row in self._rows:
                self._count += 1
                parts = [struct.pack("!h", len(row))]
                for v, enc in zip(row, encoders, strict=True):
                    if v is None:
                        parts.append(b"\xff\xff\xff\xff")
                    else:
                        data = enc(v)
                        parts.append(struct.pack("!i", len(data)) + data)
                yield b"".join(parts)
        yield b"\xff\xff"

    async def _text_chunks(self) -> AsyncIterator[bytes]:
        stmt = self._stmt
        csv_mode = stmt.format == "csv"
        delimiter = stmt.delimiter or ("," if csv_mode else "\t")
        null = stmt.null if stmt.null is not None else ("" if csv_mode else "\\N")
        encoding = stmt.encoding or "utf-8"
        single = len(self._names) == 1
        quote, escape = stmt.quote, stmt.escape or stmt.quote

        def field(text: str, force: bool) -> str:
            if csv_mode:
                return _csv_field(text, delimiter, quote, escape, null, force, single)
            return _escape(text, delimiter)

        if stmt.header:
            line = delimiter.join(field(n, False) for n in self._names) + "\n"
            yield _encode(line, encoding)
        encoders = [textio.text_encoder(t) for t in self._types]
        flags = self._force_quote
        async with self._session.guard():
            async for row in self._rows:
                self._count += 1
                fields = [
                    null if v is None else field(enc(v), force)
                    for v, enc, force in zip(row, encoders, flags, strict=True)
                ]
                yield _encode(delimiter.join(fields) + "\n", encoding)


def _encode(text: str, encoding: str) -> bytes:
    """``text`` in the COPY's encoding; 22P05 for a character it has no byte for."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as err:
        ch = err.object[err.start]
        raise SqlError(
            UNTRANSLATABLE_CHARACTER,
            f'character with byte sequence 0x{ch.encode().hex()} in encoding "UTF8" has no '
            f'equivalent in encoding "{_label(encoding)}"',
        ) from None


async def start_copy(session: SqlSession, plan: Plan, txn: Transaction) -> Any:
    """The execution of a planned COPY: CopyIn for FROM STDIN, CopyOut for TO STDOUT."""
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
        session, rows(), [c.type for c in target], stmt, [c.name for c in target], table
    )


def _join_escaped_newlines(lines: list[bytes]) -> tuple[list[bytes], bytes | None]:
    """Text-format lines with a backslash-escaped newline joined to the next line (a
    backslash protects the newline too, as in Postgres), and the last one if it goes on
    after these lines (None if not)."""
    if not any(line.endswith(b"\\") for line in lines):
        return lines, None
    out: list[bytes] = []
    carried: bytes | None = None
    for line in lines:
        if carried is not None:
            line = carried + b"\n" + line
        backslashes = len(line) - len(line.rstrip(b"\\"))
        if backslashes % 2:
            carried = line
            continue
        carried = None
        out.append(line)
    return out, carried


def _split_text(line: str, delimiter: str) -> list[str]:
    """A text-format line's raw fields: a backslash protects the character after it, the
    delimiter too."""
    if "\\" not in line:
        return line.split(delimiter)
    fields = []
    start = 0
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c == delimiter:
            fields.append(line[start:i])
            start = i + 1
        i += 1
    fields.append(line[start:])
    return fields


def _unescape(field: str) -> str:
    """A text-format field's value: backslash escapes decoded. Octal and hex escapes give
    bytes, so the result is checked to be UTF-8 (22021 otherwise), as Postgres does."""
    if "\\" not in field:
        return field
    out = bytearray()
    i = 0
    n = len(field)
    while i < n:
        ch = field[i]
        if ch != "\\" or i + 1 >= n:
            out += ch.encode()
            i += 1
            continue
        nxt = field[i + 1]
        if nxt in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and field[j] in _OCTAL:
                j += 1
            out.append(int(field[i + 1 : j], 8) & 0xFF)
            i = j
        elif nxt == "x" and i + 2 < n and field[i + 2] in _HEX:
            j = i + 2
            while j < n and j < i + 4 and field[j] in _HEX:
                j += 1
            out.append(int(field[i + 2 : j], 16))
            i = j
        else:
            code = _TEXT_ESCAPES.get(nxt)
            out += nxt.encode() if code is None else bytes((code,))
            i += 2
    return _decode(bytes(out), "utf-8")


_OUT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


@functools.cache
def _out_special(delimiter: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape("\\\b\f\n\r\t\v" + delimiter) + "]")


def _escape(text: str, delimiter: str) -> str:
    """A value in the text format: backslash, control characters and the delimiter escaped."""
    special = _out_special(delimiter)
    if not special.search(text):
        return text
    return special.sub(lambda m: _OUT_ESCAPES.get(m.group(), "\\" + m.group()), text)


def _csv_field(
    text: str, delimiter: str, quote: str, escape: str, null: str, force: bool, single: bool
) -> str:
    """A value in CSV: quoted when forced, when it reads as NULL, holds the delimiter, the
    quote or a line break, or is ``\\.`` alone on a line (the end marker)."""
    if not (
        force
        or text == null
        or any(c in text for c in (delimiter, quote, "\n", "\r"))
        or (single and text == "\\.")
    ):
        return text
    if escape == quote:
        body = text.replace(quote, quote + quote)
    else:
        body = "".join(escape + c if c in (quote, escape) else c for c in text)
    return quote + body + quote
