"""The window function operator: partitions, peers and frames as Postgres computes them.

:class:`WindowAgg` materializes its input (a window needs its whole partition), sorts it by
each window's PARTITION BY and ORDER BY keys, and computes every call's value per row:

* ranking and distribution functions look at peers (rows equal on the ORDER BY keys);
* lag / lead at rows a given distance away in the partition; ntile at the partition's size;
* aggregates and first_value / last_value / nth_value at the row's frame: ROWS, RANGE or
  GROUPS between two bounds; by default (RANGE UNBOUNDED PRECEDING to CURRENT ROW) the
  partition's start to the current row's last peer.

A frame is a tuple of half-open position ranges within the partition: one, ``[head, tail)``,
unless EXCLUDE cuts rows out of it. An aggregate adds rows to one accumulator while
consecutive frames only grow at the end (the default frame, any frame starting UNBOUNDED
PRECEDING) and starts a new one otherwise, as Postgres does for aggregates without an
inverse transition function.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from percolator.server.planner.compile import Compiled
from percolator.server.planner.physical import (
    YIELD_EVERY,
    Node,
    SortSpec,
    _explain_tree,
    _pause,
    _sort_decorated,
)
from percolator.server.planner.row_codec import Row
from percolator.server.sql.aggregates import Accumulator
from percolator.server.sql.bound import BoundKind, FrameExclusion, FrameMode
from percolator.server.sql.errors import NULL_VALUE_NOT_ALLOWED, SqlError
from percolator.server.sql.operators import add_interval
from percolator.server.sql.types import Interval

INVALID_PRECEDING_OR_FOLLOWING_SIZE = "22013"
INVALID_ARGUMENT_FOR_NTILE = "22014"
INVALID_ARGUMENT_FOR_NTH_VALUE = "22016"

Segments = tuple[tuple[int, int], ...]
"""A row's frame: ascending, disjoint position ranges ``[start, end)``."""

InRange = Callable[[Any, Any, Any, bool, bool], bool]
"""Postgres's in_range(value, base, offset, subtract, less): whether ``value`` is at most
(``less``) or at least ``base`` -/+ ``offset``."""


@dataclass
class FrameEdge:
    """One end of a window frame; ``offset`` for n PRECEDING / n FOLLOWING."""

    kind: BoundKind
    offset: Compiled | None = None


@dataclass
class Frame:
    """A window call's frame clause; ``in_range`` compares ORDER BY keys for RANGE offsets."""

    mode: FrameMode
    start: FrameEdge
    end: FrameEdge
    in_range: InRange | None = None
    exclude: FrameExclusion = FrameExclusion.NO_OTHERS


@dataclass
class WindowFunction:
    """One window call: ``factory`` makes the accumulator of an aggregate; otherwise ``name``
    is the window function (row_number, rank, lag, ...)."""

    name: str
    spec: int
    factory: Callable[[], Accumulator] | None
    args: list[Compiled]
    filter: Compiled | None
    frame: Frame | None = None


class _Ticker:
    """Counts in-memory steps and lets the event loop run every YIELD_EVERY of them, so a
    cancel request or statement timeout can interrupt a long computation."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    async def tick(self, steps: int = 1) -> None:
        before = self.n
        self.n += steps
        if self.n // YIELD_EVERY != before // YIELD_EVERY:
            await asyncio.sleep(0)


@dataclass
class _Partition:
    """One partition's rows in window order, with their peer groups."""

    rows: list[Row]
    group: list[int]
    """Peer group number of each position."""
    starts: list[int]
    """First position of each peer group (then the partition's size)."""
    keys: list[object] | None
    """Each row's (first) ORDER BY key, for RANGE offsets."""

    def peer_start(self, i: int) -> int:
        return self.starts[self.group[i]]

    def peer_end(self, i: int) -> int:
        return self.starts[self.group[i] + 1]


@dataclass
class WindowAgg(Node):
    """Window functions: materializes its input, orders it by each window's partition and
    order keys, and yields every input row followed by the window values."""

    input: Node
    specs: list[tuple[list[SortSpec], list[SortSpec]]]
    """(partition keys, order keys) of each window."""
    calls: list[WindowFunction]
    width: int = 0
    offset_runners: list[Any] = field(default_factory=list)
    """Runners of the (uncorrelated) subqueries in frame offsets."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        # Postgres evaluates frame offsets once, before reading any row.
        for runner in self.offset_runners:
            await runner.prepare((), ctx)
        offsets = [_frame_offsets(c.frame, ctx) for c in self.calls]
        rows = [r async for r in self.input.rows(ctx)]
        values: list[list[object]] = [[None] * len(rows) for _ in self.calls]
        order: list[int] = list(range(len(rows)))
        ticker = _Ticker()
        for spec_index, (partition, ordering) in enumerate(self.specs):
            calls = [(i, c) for i, c in enumerate(self.calls) if c.spec == spec_index]
            if calls:
                order = await self._compute(
                    rows, ctx, partition, ordering, calls, offsets, values, ticker
                )
        for n, i in enumerate(order, 1):
            await _pause(n)
            yield rows[i] + tuple(v[i] for v in values)

    async def _compute(
        self,
        rows: list[Row],
        ctx: Any,
        partition: list[SortSpec],
        ordering: list[SortSpec],
        calls: list[tuple[int, WindowFunction]],
        offsets: list[tuple[object, object]],
        values: list[list[object]],
        ticker: _Ticker,
    ) -> list[int]:
        """Fill ``values`` for the calls of one window; the row order it sorted by."""
        keys = [*partition, *ordering]
        decorated = []
        for n, r in enumerate(rows):
            await _pause(n + 1)
            decorated.append((n, [k[0](r, ctx) for k in keys]))
        _sort_decorated(decorated, keys)
        nparts = len(partition)
        # Rows are peers when their normalized keys are equal (1 = 1.0 for numerics).
        norms = [_normalized(kv, keys) for _, kv in decorated]
        idx = [n for n, _ in decorated]
        start = 0
        while start < len(idx):
            end = start + 1
            while end < len(idx) and norms[end][:nparts] == norms[start][:nparts]:
                end += 1
            part = _partition(rows, idx[start:end], norms[start:end], nparts)
            if ordering:
                part.keys = [kv[nparts] for _, kv in decorated[start:end]]
            for ci, call in calls:
                key_order = (ordering[0][1], ordering[0][2]) if ordering else (False, False)
                out = await _evaluate(call, part, ctx, offsets[ci], key_order, ticker)
                target = values[ci]
                for pos, v in enumerate(out):
                    target[idx[start + pos]] = v
            start = end
        return idx

    def explain(self) -> list[str]:
        return _explain_tree("WindowAgg", [], self.children())

    def children(self) -> list[Node]:
        return [self.input, *(r.node for r in self.offset_runners if r.node is not None)]


def _normalized(values: list[object], keys: list[SortSpec]) -> tuple[object, ...]:
    return tuple(None if v is None else k[3](v) for v, k in zip(values, keys, strict=True))


def _partition(
    rows: list[Row], idx: list[int], norms: list[tuple[object, ...]], nparts: int
) -> _Partition:
    group: list[int] = []
    starts: list[int] = []
    for pos, norm in enumerate(norms):
        if pos == 0 or norm[nparts:] != norms[pos - 1][nparts:]:
            starts.append(pos)
        group.append(len(starts) - 1)
    starts.append(len(norms))
    return _Partition([rows[i] for i in idx], group, starts, None)


def _frame_offsets(frame: Frame | None, ctx: Any) -> tuple[object, object]:
    """The (start, end) offsets of a frame, checked as Postgres checks them."""
    if frame is None:
        return None, None
    out: list[object] = []
    for edge, which in ((frame.start, "starting"), (frame.end, "ending")):
        if edge.offset is None:
            out.append(None)
            continue
        v = edge.offset((), ctx)
        if v is None:
            raise SqlError(NULL_VALUE_NOT_ALLOWED, f"frame {which} offset must not be null")
        if frame.mode is not FrameMode.RANGE and v < 0:  # type: ignore[operator]
            raise SqlError(
                INVALID_PRECEDING_OR_FOLLOWING_SIZE, f"frame {which} offset must not be negative"
            )
        out.append(v)
    return out[0], out[1]


# -- the functions --------------------------------------------------------------------------


async def _evaluate(
    call: WindowFunction,
    part: _Partition,
    ctx: Any,
    offsets: tuple[object, object],
    key_order: tuple[bool, bool],
    ticker: _Ticker,
) -> list[object]:
    """The values of one call for the rows of one partition, in window order."""
    n = len(part.rows)
    await ticker.tick(n)
    name = call.name
    if call.factory is not None or name in ("first_value", "last_value", "nth_value"):
        frames = _frames(part, call.frame, offsets, key_order)
        if call.factory is not None:
            return await _aggregate(call, call.factory, part, frames, ctx, ticker)
        return _frame_value(call, part, frames, ctx)
    if name == "row_number":
        return list(range(1, n + 1))
    if name == "rank":
        return [part.peer_start(i) + 1 for i in range(n)]
    if name == "dense_rank":
        return [g + 1 for g in part.group]
    if name == "percent_rank":
        return [part.peer_start(i) / (n - 1) if n > 1 else 0.0 for i in range(n)]
    if name == "cume_dist":
        return [part.peer_end(i) / n for i in range(n)]
    if name == "ntile":
        return _ntile(call, part, ctx)
    if name in ("lag", "lead"):
        return _lag_lead(call, part, ctx, -1 if name == "lag" else 1)
    raise AssertionError(f"unknown window function {name}")


def _ntile(call: WindowFunction, part: _Partition, ctx: Any) -> list[object]:
    """Postgres's ntile: the bucket count is read at the partition's first row (at later rows
    while it is NULL); the first ``rows % buckets`` buckets get one row more."""
    out: list[object] = []
    total = len(part.rows)
    bucket = rows_in_bucket = boundary = remainder = 0
    for row in part.rows:
        if bucket == 0:
            buckets = call.args[0](row, ctx)
            if buckets is None:
                out.append(None)
                continue
            if buckets <= 0:  # type: ignore[operator]
                raise SqlError(
                    INVALID_ARGUMENT_FOR_NTILE, "argument of ntile must be greater than zero"
                )
            bucket = 1
            boundary = total // buckets  # type: ignore[operator]
            remainder = total % buckets  # type: ignore[operator]
            if boundary <= 0:
                boundary = 1
            elif remainder:
                boundary += 1
        rows_in_bucket += 1
        if boundary < rows_in_bucket:
            if remainder and bucket == remainder:
                remainder = 0
                boundary -= 1
            bucket += 1
            rows_in_bucket = 1
        out.append(bucket)
    return out


def _lag_lead(call: WindowFunction, part: _Partition, ctx: Any, direction: int) -> list[object]:
    """The value at the row ``offset`` rows before (lag) or after (lead) in the partition, or
    the default (evaluated at the current row) when there is none; NULL for a NULL offset."""
    out: list[object] = []
    rows = part.rows
    for i, row in enumerate(rows):
        offset = call.args[1](row, ctx) if len(call.args) > 1 else 1
        if offset is None:
            out.append(None)
            continue
        target = i + direction * offset  # type: ignore[operator]
        if 0 <= target < len(rows):
            out.append(call.args[0](rows[target], ctx))
        else:
            out.append(call.args[2](row, ctx) if len(call.args) > 2 else None)
    return out


def _frame_value(
    call: WindowFunction, part: _Partition, frames: list[Segments], ctx: Any
) -> list[object]:
    """first_value, last_value or nth_value of each row's frame (NULL past its end)."""
    out: list[object] = []
    value = call.args[0]
    for i, segments in enumerate(frames):
        if call.name == "nth_value":
            nth = call.args[1](part.rows[i], ctx)
            if nth is None:
                out.append(None)
                continue
            if nth <= 0:  # type: ignore[operator]
                raise SqlError(
                    INVALID_ARGUMENT_FOR_NTH_VALUE,
                    "argument of nth_value must be greater than zero",
                )
            pos = _position(segments, nth - 1)  # type: ignore[operator]
        else:
            pos = _position(segments, 0 if call.name == "first_value" else -1)
        out.append(value(part.rows[pos], ctx) if pos is not None else None)
    return out


def _position(segments: Segments, k: int) -> int | None:
    """The partition position of the frame's k-th row (0-based; -1: the last), if any."""
    if k < 0:
        for start, end in reversed(segments):
            if start < end:
                return end - 1
        return None
    for start, end in segments:
        if start < end:
            if k < end - start:
                return start + k
            k -= end - start
    return None


async def _aggregate(
    call: WindowFunction,
    factory: Callable[[], Accumulator],
    part: _Partition,
    frames: list[Segments],
    ctx: Any,
    ticker: _Ticker,
) -> list[object]:
    """An aggregate over each row's frame: one accumulator extended while frames only grow
    at their end, a new one when the head moves (or rows are excluded)."""
    inputs: list[list[object] | None] = []
    for row in part.rows:
        keep = call.filter is None or call.filter(row, ctx) is True
        inputs.append([a(row, ctx) for a in call.args] if keep else None)

    def add(acc: Accumulator, start: int, end: int) -> None:
        for k in range(start, end):
            args = inputs[k]
            if args is not None:
                acc.add(*args)

    out: list[object] = []
    acc = factory()
    grown: tuple[int, int] | None = (0, 0)
    """The range the accumulator holds, while it is one that can grow at its end."""
    last: Segments | None = None
    result: object = None
    for segments in frames:
        if segments != last:
            if len(segments) == 1 and grown is not None and segments[0][0] == grown[0]:
                start, end = segments[0]
                if end >= grown[1]:
                    add(acc, grown[1], end)
                    await ticker.tick(end - grown[1] + 1)
                    grown = (start, end)
                    result = acc.result()
                    last = segments
                    out.append(result)
                    continue
            acc = factory()
            for start, end in segments:
                add(acc, start, end)
                await ticker.tick(max(end - start, 0) + 1)
            grown = segments[0] if len(segments) == 1 else None
            result = acc.result()
            last = segments
        out.append(result)
    return out


# -- frames ---------------------------------------------------------------------------------


def _frames(
    part: _Partition,
    frame: Frame | None,
    offsets: tuple[object, object],
    key_order: tuple[bool, bool],
) -> list[Segments]:
    """Each row's frame."""
    n = len(part.rows)
    if frame is None:
        return [((0, part.peer_end(i)),) for i in range(n)]
    out: list[Segments] = []
    for i in range(n):
        head = _head(part, frame, offsets[0], key_order, i)
        tail = max(_tail(part, frame, offsets[1], key_order, i), head)
        out.append(_excluded(part, frame.exclude, i, head, tail))
    return out


def _excluded(part: _Partition, exclude: FrameExclusion, i: int, head: int, tail: int) -> Segments:
    """The frame ``[head, tail)`` of row ``i`` without the rows EXCLUDE names."""
    if exclude is FrameExclusion.NO_OTHERS:
        return ((head, tail),)
    if exclude is FrameExclusion.CURRENT_ROW:
        cut = (i, i + 1)
    else:
        cut = (part.peer_start(i), part.peer_end(i))
    pieces = [(head, min(tail, cut[0])), (max(head, cut[1]), tail)]
    if exclude is FrameExclusion.TIES and head <= i < tail:
        pieces.insert(1, (i, i + 1))
    return tuple(p for p in pieces if p[0] < p[1]) or ((head, head),)


def _head(part: _Partition, frame: Frame, offset: Any, key_order: tuple[bool, bool], i: int) -> int:
    kind = frame.start.kind
    n = len(part.rows)
    if kind is BoundKind.UNBOUNDED_PRECEDING:
        return 0
    if kind is BoundKind.CURRENT_ROW:
        return i if frame.mode is FrameMode.ROWS else part.peer_start(i)
    sign = -1 if kind is BoundKind.PRECEDING else 1
    if frame.mode is FrameMode.ROWS:
        return min(max(i + sign * offset, 0), n)
    if frame.mode is FrameMode.GROUPS:
        g = part.group[i] + sign * offset
        return part.starts[min(max(g, 0), len(part.starts) - 1)]
    return _range_search(part, frame, offset, key_order, i, start=True)


def _tail(part: _Partition, frame: Frame, offset: Any, key_order: tuple[bool, bool], i: int) -> int:
    kind = frame.end.kind
    n = len(part.rows)
    if kind is BoundKind.UNBOUNDED_FOLLOWING:
        return n
    if kind is BoundKind.CURRENT_ROW:
        return i + 1 if frame.mode is FrameMode.ROWS else part.peer_end(i)
    sign = -1 if kind is BoundKind.PRECEDING else 1
    if frame.mode is FrameMode.ROWS:
        return min(max(i + sign * offset + 1, 0), n)
    if frame.mode is FrameMode.GROUPS:
        g = part.group[i] + sign * offset
        if g < 0:
            return 0
        return part.starts[min(g + 1, len(part.starts) - 1)]
    return _range_search(part, frame, offset, key_order, i, start=False)


def _range_search(
    part: _Partition,
    frame: Frame,
    offset: Any,
    key_order: tuple[bool, bool],
    i: int,
    start: bool,
) -> int:
    """The frame head (``start``) or tail of row ``i`` for a RANGE offset bound: the first
    position at or after the start / past the end, found by bisection (the tests are monotone
    over the sorted partition), with Postgres's rules for NULL keys (NULLs are peers of each
    other, before or after every value as the ORDER BY places them)."""
    assert part.keys is not None and frame.in_range is not None
    keys, in_range = part.keys, frame.in_range
    descending, nulls_first = key_order
    current = keys[i]
    edge = frame.start if start else frame.end
    subtract = (edge.kind is BoundKind.PRECEDING) != descending
    less = descending if start else not descending

    def reached(k: int) -> bool:
        """Whether row k is at or after the frame start (``start``) / past the frame end."""
        v = keys[k]
        if v is None or current is None:
            if start:
                return (
                    (v is not None or current is None)
                    if nulls_first
                    else (v is None or current is not None)
                )
            return not (v is None if nulls_first else current is None)
        inside = in_range(v, current, offset, subtract, less)
        return inside if start else not inside

    return bisect.bisect_left(range(len(keys)), True, key=reached)


# -- in_range support functions -------------------------------------------------------------


def _bad_size() -> SqlError:
    return SqlError(
        INVALID_PRECEDING_OR_FOLLOWING_SIZE,
        "invalid preceding or following size in window function",
    )


def in_range_integer(value: int, base: int, offset: int, subtract: bool, less: bool) -> bool:
    """in_range for integer keys (no overflow in Python: Postgres treats it as infinity)."""
    if offset < 0:
        raise _bad_size()
    bound = base - offset if subtract else base + offset
    return value <= bound if less else value >= bound


def _is_nan(v: float | Decimal) -> bool:
    return v.is_nan() if isinstance(v, Decimal) else math.isnan(v)


def _is_inf(v: float | Decimal) -> bool:
    return v.is_infinite() if isinstance(v, Decimal) else math.isinf(v)


def in_range_number(
    value: float | Decimal,
    base: float | Decimal,
    offset: float | Decimal,
    subtract: bool,
    less: bool,
) -> bool:
    """in_range for numeric and float keys: NaN equals NaN and follows everything; an infinite
    offset from an infinite base of the far sign includes every value (as in Postgres)."""
    if _is_nan(offset) or offset < 0:
        raise _bad_size()
    if _is_nan(value):
        return True if _is_nan(base) else not less
    if _is_nan(base):
        return less
    if _is_inf(offset) and _is_inf(base) and (base > 0 if subtract else base < 0):
        return True
    bound = base - offset if subtract else base + offset
    return value <= bound if less else value >= bound


def in_range_datetime(
    value: dt.date, base: dt.date, offset: Interval, subtract: bool, less: bool
) -> bool:
    """in_range for date and timestamp keys with an interval offset (dates as midnight)."""
    if offset.sort_key() < 0:
        raise _bad_size()
    try:
        bound = add_interval(_as_timestamp(base), offset, -1 if subtract else 1)
    except (OverflowError, ValueError):
        # Past the representable range: the bound is at minus / plus infinity.
        return less != subtract
    return _as_timestamp(value) <= bound if less else _as_timestamp(value) >= bound


def in_range_time(
    value: dt.time, base: dt.time, offset: Interval, subtract: bool, less: bool
) -> bool:
    """in_range for time keys: as time + interval does, only the offset's time part counts."""
    if offset.microseconds < 0:
        raise _bad_size()
    bound = _time_micros(base) + (-offset.microseconds if subtract else offset.microseconds)
    return _time_micros(value) <= bound if less else _time_micros(value) >= bound


def _time_micros(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def in_range_interval(
    value: Interval, base: Interval, offset: Interval, subtract: bool, less: bool
) -> bool:
    """in_range for interval keys, compared as intervals compare (30-day months)."""
    if offset.sort_key() < 0:
        raise _bad_size()
    bound = (base - offset if subtract else base + offset).sort_key()
    return value.sort_key() <= bound if less else value.sort_key() >= bound


def _as_timestamp(v: dt.date) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    return dt.datetime(v.year, v.month, v.day)
