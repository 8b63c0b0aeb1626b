"""The extended protocol's objects: prepared statements as the client named them, and portals.

A portal holds a bound statement, its decoded parameters, the result formats the client asked
for and, once executed, the engine's :class:`Execution`. Statement execution starts at the
first Execute, as in Postgres, so a portal that is only described or closed costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from percolator.server.engine_api import Execution, PreparedStatement, ResultColumn
from percolator.server.frontend.values import Encoder, decode_param, encoder_for
from percolator.server.sql.errors import (
    INVALID_BINARY_REPRESENTATION,
    INVALID_PARAMETER_VALUE,
    PROTOCOL_VIOLATION,
    SqlError,
)
from percolator.server.sql.textio import float_digits_reduced
from percolator.server.sql.types import TypeId
from percolator.server.wire.codec import encode, encode_data_row
from percolator.server.wire.messages import FieldDescription, FormatCode, RowDescription


@dataclass(frozen=True, slots=True)
class ResultShape:
    """How a result goes out on the wire for one request of result formats: worked out once
    per prepared statement and format request, not per execution."""

    columns: list[ResultColumn] | None
    formats: list[int]
    description: bytes | None
    """The encoded RowDescription (None: NoData)."""
    encoders: list[Encoder]


def _shape(columns: list[ResultColumn] | None, result_formats: tuple[int, ...]) -> ResultShape:
    formats = expand_formats(result_formats, len(columns or ()), "result")
    if columns is None:
        return ResultShape(None, formats, None, [])
    return ResultShape(
        columns,
        formats,
        encode(row_description(columns, formats)),
        [
            encoder_for(c.type, f == FormatCode.BINARY)
            for c, f in zip(columns, formats, strict=True)
        ],
    )


@dataclass
class Portal:
    """A bound statement, ready to run (or running, or done)."""

    name: str
    prepared: PreparedStatement
    params: list[object]
    result_formats: tuple[int, ...]
    """The client's result format codes as sent (0, 1 or one per column)."""
    execution: Execution | None = None
    completed_tag: str | None = None
    """The CommandComplete tag once the portal ran to its end."""
    notices_sent: int = 0

    @property
    def columns(self) -> list[ResultColumn] | None:
        """The result columns: the execution's once it started, else the statement's."""
        if self.execution is not None:
            return self.execution.columns
        return self.prepared.columns

    def shape(self) -> ResultShape:
        """How the results go out (raises for a result format count that does not fit)."""
        columns = self.columns
        cache = self.prepared.wire_cache
        # Float text encoders depend on the session's extra_float_digits.
        key = (self.result_formats, float_digits_reduced())
        shape = cache.get(key)
        # An execution planned again may bring other columns than the statement's.
        if not isinstance(shape, ResultShape) or shape.columns is not columns:
            shape = _shape(columns, self.result_formats)
            cache[key] = shape
        return shape

    def formats(self) -> list[int]:
        """One format code per result column."""
        return self.shape().formats

    def row_description(self) -> bytes | None:
        """The encoded RowDescription for this portal's results, or None (NoData)."""
        return self.shape().description

    def encode_rows(self, rows: Sequence[tuple[object, ...]]) -> list[bytes]:
        """The DataRow messages of ``rows``, in the portal's result formats."""
        encoders = self.shape().encoders
        return [
            encode_data_row(
                [None if v is None else enc(v) for v, enc in zip(row, encoders, strict=True)]
            )
            for row in rows
        ]


def expand_formats(codes: Sequence[int], count: int, what: str) -> list[int]:
    """Format codes as the client sent them (none, one for all, or one each) -> one each."""
    for code in codes:
        if code not in (FormatCode.TEXT, FormatCode.BINARY):
            raise SqlError(INVALID_PARAMETER_VALUE, f"unsupported format code: {code}")
    if not codes:
        return [FormatCode.TEXT] * count
    if len(codes) == 1:
        return [codes[0]] * count
    if len(codes) != count:
        raise SqlError(
            PROTOCOL_VIOLATION,
            f"bind message has {len(codes)} {what} formats but query has {count} columns",
        )
    return list(codes)


def decode_params(
    prepared: PreparedStatement,
    statement_name: str,
    formats: Sequence[int],
    values: Sequence[bytes | None],
) -> list[object]:
    """Bind's parameter values decoded with the statement's parameter types."""
    types = prepared.param_types
    if len(values) != len(types):
        raise SqlError(
            PROTOCOL_VIOLATION,
            f"bind message supplies {len(values)} parameters, but prepared statement "
            f'"{statement_name}" requires {len(types)}',
        )
    codes = expand_formats(formats, len(values), "parameter")
    out: list[object] = []
    for number, (t, raw, code) in enumerate(zip(types, values, codes, strict=True), 1):
        if raw is None:
            out.append(None)
            continue
        try:
            out.append(decode_param(t, raw, code == FormatCode.BINARY))
        except SqlError as exc:
            if exc.sqlstate != INVALID_BINARY_REPRESENTATION:
                raise
            raise SqlError(
                INVALID_BINARY_REPRESENTATION,
                f"incorrect binary data format in bind parameter {number}",
            ) from exc
    return out


def row_description(columns: Sequence[ResultColumn], formats: Sequence[int]) -> RowDescription:
    """RowDescription for ``columns`` sent in ``formats``."""
    return RowDescription(
        tuple(
            FieldDescription(
                c.name,
                c.table_oid,
                c.column_number,
                c.type.oid,
                c.type.typlen,
                -1 if c.type.id is TypeId.RECORD else c.type.typmod,  # ours names the fields
                f,
            )
            for c, f in zip(columns, formats, strict=True)
        )
    )
