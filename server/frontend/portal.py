"""The extended protocol's objects: prepared statements as the client named them, and portals.

A portal holds a bound statement, its decoded parameters, the result formats the client asked
for and, once executed, the engine's :class:`Execution`. Statement execution starts at the
first Execute, as in Postgres, so a portal that is only described or closed costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from percolator.server.engine_api import Execution, PreparedStatement, ResultColumn
from percolator.server.frontend.values import Encoder, decode_param, encoder_for
from percolator.server.sql.errors import (
    INVALID_BINARY_REPRESENTATION,
    INVALID_PARAMETER_VALUE,
    PROTOCOL_VIOLATION,
    SqlError,
)
from percolator.server.sql.types import TypeId
from percolator.server.wire.codec import encode_data_row
from percolator.server.wire.messages import FieldDescription, FormatCode, RowDescription


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
    encoders: list[Encoder] | None = field(default=None, repr=False)

    @property
    def columns(self) -> list[ResultColumn] | None:
        """The result columns: the execution's once it started, else the statement's."""
        if self.execution is not None:
            return self.execution.columns
        return self.prepared.columns

    def formats(self) -> list[int]:
        """One format code per result column."""
        return expand_formats(self.result_formats, len(self.columns or ()), "result")

    def row_description(self) -> RowDescription | None:
        """The RowDescription for this portal's results, or None (NoData)."""
        columns = self.columns
        if columns is None:
            return None
        return row_description(columns, self.formats())

    def encode_rows(self, rows: Sequence[tuple[object, ...]]) -> list[bytes]:
        """The DataRow messages of ``rows``, in the portal's result formats."""
        encoders = self.encoders
        if encoders is None:
            columns = self.columns or []
            encoders = [
                encoder_for(c.type, f == FormatCode.BINARY)
                for c, f in zip(columns, self.formats(), strict=True)
            ]
            self.encoders = encoders
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
