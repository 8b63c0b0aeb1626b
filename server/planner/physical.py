"""Physical operators: each streams rows (tuples) from ``rows(ctx)``, an async iterator.

Scans read through the transaction layer (a snapshot at the transaction's start_ts, with its
own writes); nothing here holds a whole table in memory except where the operator's meaning
requires it (sort, hash join build side, aggregation, DISTINCT), as in any database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from percolator.server.planner.compile import Compiled, compile_expr
from percolator.server.planner.row_codec import MARKER, IndexCodec, Row, RowCodec
from percolator.server.planner.row_locking import Recheck, lock_for_select
from percolator.server.sql.aggregates import Accumulator
from percolator.server.sql.bound import FOR_UPDATE, BSubquery, LockClause, SubqueryKind
from percolator.server.sql.errors import CARDINALITY_VIOLATION, SqlError
from percolator.server.sql.grouping_sets import omitted_mask
from percolator.server.sql.keycodec import prefix_successor
from percolator.server.sql.types import Interval
from percolator.server.storage.cells import CellKey

T = TypeVar("T")

BATCH_GET = 256
"""Rows fetched per batch by index lookups (one round trip per shard each)."""
YIELD_EVERY = 1024
"""Rows an in-memory loop handles before letting the event loop run: a cancel request or a
statement timeout must be able to interrupt a CPU-bound query, and other sessions must run."""


async def _pause(n: int) -> None:
    """Called with a running row count; yields to the event loop every YIELD_EVERY rows."""
    if n % YIELD_EVERY == 0:
        await asyncio.sleep(0)


class Node:
    """A physical operator."""

    width: int

    def rows(self, ctx: Any) -> AsyncIterator[Row]:
        raise NotImplementedError

    def explain(self) -> list[str]:
        """Lines of EXPLAIN output for this subtree (children indented)."""
        raise NotImplementedError

    def children(self) -> list[Node]:
        return []

    def access(self) -> TableAccess | None:
        """The table access whose rows this node yields, filtered or projected row by row
        (so a row that changed can be re-checked: :meth:`recheck_keys`); None when there is
        no such access (a join, an aggregate)."""
        return None

    async def recheck(self, key: bytes, row: Row, ctx: Any) -> Row | None:
        """What this node yields for the table row ``row`` (a newer version of row ``key`` of
        its :meth:`access`): the row as filtered and projected, or None if rejected now."""
        raise NotImplementedError

    def rechecker(self, ctx: Any) -> Recheck | None:
        """How lock_for_select re-checks the rows this node locks that changed: through this
        node's :meth:`recheck_keys` (None: they cannot be re-checked alone)."""
        if self.access() is None:
            return None
        return lambda keys: self.recheck_keys(ctx, keys)

    async def recheck_keys(
        self, ctx: Any, keys: list[bytes]
    ) -> tuple[int, dict[bytes, Row | None]]:
        """READ COMMITTED's re-check of rows that changed after the statement's snapshot, as
        Postgres's EvalPlanQual does: their newest versions (read under the row locks the
        statement holds, at the timestamp returned) go through this node's filters again,
        with the subqueries' values of the statement's snapshot. A row deleted or filtered
        out now maps to None. Only for a node whose :meth:`access` is not None."""
        access = self.access()
        assert access is not None
        ts, rows = await access.codec.get_newest_rows(ctx.txn, keys)
        return ts, {
            k: None if r is None else await self.recheck(k, r, ctx)
            for k, r in zip(keys, rows, strict=True)
        }


class TableAccess:
    """A mixin of the operators that read a table's rows by key (scans, point gets, index
    lookups) and filter them with one predicate over the table's row."""

    codec: RowCodec
    predicate: Compiled | None

    def access(self) -> TableAccess:
        return self

    async def recheck(self, key: bytes, row: Row, ctx: Any) -> Row | None:
        pred = self.predicate
        return row if pred is None or pred(row, ctx) is True else None


def _backward(reverse: bool) -> str:
    """The marker of an access that reads backward (Postgres: "Index Scan Backward")."""
    return " Backward" if reverse else ""


def _explain_tree(label: str, details: list[str], children: Sequence[Node]) -> list[str]:
    lines = [label] + [f"  {d}" for d in details]
    for c in children:
        sub = c.explain()
        lines.append("  ->  " + sub[0])
        lines.extend("      " + s for s in sub[1:])
    return lines


# -- subqueries -----------------------------------------------------------------------------


@dataclass
class SubqueryRunner:
    """Computes one subquery's value into ``ctx.subquery_values`` before a row is evaluated."""

    sub: BSubquery
    node: Node

    async def prepare(self, row: Row, ctx: Any) -> None:
        if not self.sub.correlated and self.sub.slot in ctx.subquery_values:
            return
        if self.sub.correlated:
            ctx.outer_rows.append(row)
        try:
            ctx.subquery_values[self.sub.slot] = await self._value(ctx)
        finally:
            if self.sub.correlated:
                ctx.outer_rows.pop()

    async def _value(self, ctx: Any) -> object:
        kind = self.sub.kind
        if kind is SubqueryKind.EXISTS:
            async for _ in self.node.rows(ctx):
                return not self.sub.negate
            return self.sub.negate
        if kind is SubqueryKind.SCALAR:
            found: object = None
            n = 0
            async for r in self.node.rows(ctx):
                n += 1
                if n > 1:
                    raise SqlError(
                        CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    )
                found = r[0]
            return found
        if kind is SubqueryKind.ARRAY:
            return [r[0] async for r in self.node.rows(ctx)]
        values = set()
        has_null = False
        async for r in self.node.rows(ctx):
            v = r[0]
            if v is None:
                has_null = True
            elif type(v) is tuple and None in v:
                # A row IN's record with a NULL field: it may make the answer NULL.
                has_null = True
                values.add(v)
            else:
                values.add(v)
        return values, has_null


@dataclass
class AsyncCallRunner:
    """Awaits one call of a function that needs a round trip (nextval) into
    ``ctx.subquery_values`` before a row is evaluated: for every row."""

    slot: int
    fn: Callable[..., Awaitable[object]]
    args: list[Compiled]
    node: Node | None = None
    """No plan of its own (a subquery runner's plan shows in EXPLAIN)."""

    async def prepare(self, row: Row, ctx: Any) -> None:
        ctx.subquery_values[self.slot] = await self.fn(ctx, *[a(row, ctx) for a in self.args])


Runner = SubqueryRunner | AsyncCallRunner


async def _prepare(runners: list[SubqueryRunner], row: Row, ctx: Any) -> None:
    for r in runners:
        await r.prepare(row, ctx)


async def _passes(cond: Compiled | None, runners: list[Any], row: Row, ctx: Any) -> bool:
    """Whether a joined row meets the join condition (its subqueries computed first)."""
    if cond is None:
        return True
    if runners:
        await _prepare(runners, row, ctx)
    return cond(row, ctx) is True


async def batched(items: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter, none empty)."""
    batch: list[T] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _runner_plans(runners: list[Any]) -> list[Node]:
    """The plans of subquery runners (EXPLAIN shows them under the operator)."""
    return [r.node for r in runners if r.node is not None]


# -- scans ----------------------------------------------------------------------------------


@dataclass
class KeyRange:
    """A range of row keys computed when the statement runs (from constants/parameters)."""

    describe: str
    bounds: Callable[[Any], tuple[bytes | None, bytes | None] | None]
    """None: the range is empty (a NULL bound)."""


@dataclass
class TableScan(TableAccess, Node):
    """A snapshot scan of a table (all of it, or a primary-key range), with a filter."""

    codec: RowCodec
    table_name: str
    predicate: Compiled | None
    filter_text: str
    key_range: KeyRange | None = None
    lock_rows: bool = False
    lock_clause: LockClause = FOR_UPDATE
    """FOR UPDATE NOWAIT / SKIP LOCKED."""
    lock_batch: int = 1
    """Rows locked per round trip: 1 under a LIMIT, which must lock only the rows it takes
    (a job queue's LIMIT 1 ... SKIP LOCKED); more when every row read is returned."""
    width: int = 0
    reverse: bool = False
    """Read backward, in descending key order (an ORDER BY of the key, DESC)."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        start = end = None
        if self.key_range is not None:
            bounds = self.key_range.bounds(ctx)
            if bounds is None:
                return
            start, end = bounds
        hits = self._hits(ctx, start, end)
        if not self.lock_rows:
            async for _, row in hits:
                yield row
            return
        async for batch in batched(hits, self.lock_batch):
            for locked in await lock_for_select(
                ctx, self.codec, batch, self.lock_clause, self.rechecker(ctx)
            ):
                yield locked

    async def _hits(
        self, ctx: Any, start: bytes | None, end: bytes | None
    ) -> AsyncIterator[tuple[bytes, Row]]:
        """The rows in [start, end) that pass the filters, with their keys."""
        codec = self.codec
        pred = self.predicate
        scan = ctx.txn.scan(codec.storage, start, end, codec.read_names, reverse=self.reverse)
        async for key, cells in scan:
            if not codec.exists(cells):
                continue
            row = codec.decode(key, cells)
            if pred is not None and pred(row, ctx) is not True:
                continue
            yield key, row

    def explain(self) -> list[str]:
        backward = _backward(self.reverse)
        if self.key_range is not None:
            key = f"(primary key {self.key_range.describe})"
            label = f"Range Scan{backward} on {self.table_name} {key}"
        else:
            label = f"Seq Scan{backward} on {self.table_name}"
        details = [f"Filter: {self.filter_text}"] if self.filter_text else []
        if self.lock_rows:
            details.append("Lock Rows: FOR UPDATE")
        return _explain_tree(label, details, [])


@dataclass
class PointGet(TableAccess, Node):
    """Rows by primary key: one batched read (one round trip per shard)."""

    codec: RowCodec
    table_name: str
    keys: Callable[[Any], list[bytes]]
    describe: str
    predicate: Compiled | None
    filter_text: str
    lock_rows: bool = False
    lock_clause: LockClause = FOR_UPDATE
    """FOR UPDATE NOWAIT / SKIP LOCKED."""
    key_only: bool = False
    """The filters only say which keys (every row found by key is a match)."""
    width: int = 0
    reverse: bool = False
    """Rows in descending key order (an ORDER BY of the key, DESC)."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        keys = self.keys(ctx)
        if not keys:
            return
        keys = sorted(set(keys), reverse=self.reverse)
        found = await self.codec.get_rows(ctx.txn, keys)
        pred = self.predicate
        hits = [
            (key, row)
            for key, row in zip(keys, found, strict=True)
            if row is not None and (pred is None or pred(row, ctx) is True)
        ]
        if self.lock_rows:
            for row in await lock_for_select(
                ctx, self.codec, hits, self.lock_clause, self.rechecker(ctx)
            ):
                yield row
            return
        for _, row in hits:
            yield row

    def explain(self) -> list[str]:
        details = [f"Filter: {self.filter_text}"] if self.filter_text else []
        if self.lock_rows:
            details.append("Lock Rows: FOR UPDATE")
        label = f"Point Get{_backward(self.reverse)} on {self.table_name}"
        return _explain_tree(f"{label} (primary key {self.describe})", details, [])


@dataclass
class IndexLookup(TableAccess, Node):
    """Rows through a secondary index: scan the index range, then batched row reads."""

    codec: RowCodec
    index: IndexCodec
    table_name: str
    prefix: Callable[[Any], bytes | None]
    describe: str
    predicate: Compiled | None
    filter_text: str
    lock_rows: bool = False
    lock_clause: LockClause = FOR_UPDATE
    """FOR UPDATE NOWAIT / SKIP LOCKED."""
    lock_batch: int = 1
    """Rows locked per round trip: 1 under a LIMIT, which must lock only the rows it takes
    (a job queue's LIMIT 1 ... SKIP LOCKED); more when every row read is returned."""
    width: int = 0
    whole_key: bool = False
    """Every column of the index is fixed by an equality: the entries, and so the rows, come
    in primary-key order (an entry's key ends with its row's key)."""
    reverse: bool = False
    """Read the entries backward: with ``whole_key``, rows in descending key order."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        prefix = self.prefix(ctx)
        if prefix is None:
            return
        end = prefix_successor(prefix)
        entries = ctx.txn.scan(self.index.storage, prefix, end, ["_"], reverse=self.reverse)
        row_keys = (cells["_"] async for _, cells in entries if "_" in cells)
        async for batch in batched(row_keys, BATCH_GET):
            async for r in self._fetch(batch, ctx):
                yield r

    async def _fetch(self, keys: list[bytes], ctx: Any) -> AsyncIterator[Row]:
        rows = await self.codec.get_rows(ctx.txn, keys)
        pred = self.predicate
        hits = [
            (key, row)
            for key, row in zip(keys, rows, strict=True)
            if row is not None and (pred is None or pred(row, ctx) is True)
        ]
        if not self.lock_rows:
            for _, row in hits:
                yield row
            return
        for i in range(0, len(hits), self.lock_batch):
            chunk = hits[i : i + self.lock_batch]
            for locked in await lock_for_select(
                ctx, self.codec, chunk, self.lock_clause, self.rechecker(ctx)
            ):
                yield locked

    def explain(self) -> list[str]:
        details = [f"Filter: {self.filter_text}"] if self.filter_text else []
        index = f"using {self.index.index.name} on {self.table_name}"
        label = f"Index Lookup{_backward(self.reverse)} {index} ({self.describe})"
        return _explain_tree(label, details, [])


@dataclass
class VirtualScan(Node):
    name: str
    source: Callable[[Any], Any]
    predicate: Compiled | None
    width: int = 0
    label: str = "System Table Scan"

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        pred = self.predicate
        source = self.source(ctx)
        if hasattr(source, "__aiter__"):
            # A system table whose rows come from the store (percolator.observers).
            async for row in source:
                if pred is None or pred(row, ctx) is True:
                    yield row
            return
        for n, row in enumerate(source, 1):
            await _pause(n)
            if pred is None or pred(row, ctx) is True:
                yield row

    def explain(self) -> list[str]:
        return [f"{self.label} on {self.name}"]


@dataclass
class ValuesScan(Node):
    rows_exprs: list[list[Compiled]]
    width: int = 0
    runners: list[list[Runner]] = field(default_factory=list)
    """Per row, what its expressions need computed first (nextval); empty: nothing."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        runners = self.runners
        for i, exprs in enumerate(self.rows_exprs):
            if runners and runners[i]:
                await _prepare(runners[i], (), ctx)  # type: ignore[arg-type]
            yield tuple(e((), ctx) for e in exprs)

    def explain(self) -> list[str]:
        if self.width == 0 and len(self.rows_exprs) == 1:
            return ["Result"]
        return [f"Values Scan ({len(self.rows_exprs)} rows)"]


@dataclass
class FunctionScan(Node):
    name: str
    fn: Callable[..., Any]
    args: list[Compiled]
    ordinality: bool = False
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        values = [a((), ctx) for a in self.args]
        if any(v is None for v in values):
            return
        for n, row in enumerate(self.fn(*values), 1):
            await _pause(n)
            yield (*row, n) if self.ordinality else row

    def explain(self) -> list[str]:
        return [f"Function Scan on {self.name}"]


# -- row-by-row operators -------------------------------------------------------------------


@dataclass
class Filter(Node):
    input: Node
    predicate: Compiled
    text: str
    runners: list[SubqueryRunner] = field(default_factory=list)
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        pred = self.predicate
        runners = self.runners
        async for row in self.input.rows(ctx):
            if runners:
                await _prepare(runners, row, ctx)
            if pred(row, ctx) is True:
                yield row

    def explain(self) -> list[str]:
        return _explain_tree(
            "Filter", [f"Filter: {self.text}"], [self.input, *_runner_plans(self.runners)]
        )

    def children(self) -> list[Node]:
        return [self.input]

    def access(self) -> TableAccess | None:
        return self.input.access()

    async def recheck(self, key: bytes, row: Row, ctx: Any) -> Row | None:
        found = await self.input.recheck(key, row, ctx)
        if found is None:
            return None
        if self.runners:
            await _prepare(self.runners, found, ctx)
        return found if self.predicate(found, ctx) is True else None


@dataclass
class Project(Node):
    input: Node
    exprs: list[Compiled]
    runners: list[SubqueryRunner] = field(default_factory=list)
    passthrough: bool = False
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        exprs = self.exprs
        runners = self.runners
        if self.passthrough:
            async for row in self.input.rows(ctx):
                yield row
            return
        async for row in self.input.rows(ctx):
            if runners:
                await _prepare(runners, row, ctx)
            yield tuple([e(row, ctx) for e in exprs])

    def explain(self) -> list[str]:
        if self.passthrough:
            return self.input.explain()
        if self.runners:
            return _explain_tree("Project", [], [self.input, *_runner_plans(self.runners)])
        return self.input.explain()

    def children(self) -> list[Node]:
        return [self.input]

    def access(self) -> TableAccess | None:
        return self.input.access()

    async def recheck(self, key: bytes, row: Row, ctx: Any) -> Row | None:
        found = await self.input.recheck(key, row, ctx)
        if found is None or self.passthrough:
            return found
        if self.runners:
            await _prepare(self.runners, found, ctx)
        return tuple([e(found, ctx) for e in self.exprs])


@dataclass
class NestedLoopJoin(Node):
    left: Node
    right: Node
    kind: str
    condition: Compiled | None
    right_width: int
    left_width: int
    runners: list[SubqueryRunner] = field(default_factory=list)
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        right_rows = [r async for r in self.right.rows(ctx)]
        matched_right = [False] * len(right_rows)
        cond = self.condition
        null_right = (None,) * self.right_width
        n = 0
        async for lrow in self.left.rows(ctx):
            hit = False
            for j, rrow in enumerate(right_rows):
                n += 1
                await _pause(n)
                row = lrow + rrow
                if not await _passes(cond, self.runners, row, ctx):
                    continue
                hit = True
                matched_right[j] = True
                yield row
            if not hit and self.kind in ("left", "full"):
                yield lrow + null_right
        if self.kind in ("right", "full"):
            for row in _unmatched_right(self.left_width, right_rows, matched_right):
                yield row

    def explain(self) -> list[str]:
        label = "Nested Loop" + (
            "" if self.kind in ("inner", "cross") else f" {self.kind.title()} Join"
        )
        return _explain_tree(label, [], [self.left, self.right])


@dataclass
class LateralJoin(Node):
    """A dependent nested loop (LATERAL): for each left row, the right side runs with that
    row as its outer row. Streams both sides; only the current left row is held."""

    left: Node
    right: Node
    kind: str
    """inner, cross or left (the binder refuses RIGHT and FULL with a LATERAL reference)."""
    condition: Compiled | None
    right_width: int
    runners: list[SubqueryRunner] = field(default_factory=list)
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        cond = self.condition
        null_right = (None,) * self.right_width
        n = 0
        async for lrow in self.left.rows(ctx):
            # Counted per left row too: right sides that return nothing still let a cancel in.
            n += 1
            await _pause(n)
            hit = False
            async for rrow in _rows_with_outer(self.right, lrow, ctx):
                n += 1
                await _pause(n)
                row = lrow + rrow
                if not await _passes(cond, self.runners, row, ctx):
                    continue
                hit = True
                yield row
            if not hit and self.kind == "left":
                yield lrow + null_right

    def explain(self) -> list[str]:
        label = "Nested Loop" + (" Left Join" if self.kind == "left" else "")
        return _explain_tree(label, [], [self.left, self.right, *_runner_plans(self.runners)])

    def children(self) -> list[Node]:
        return [self.left, self.right]


async def _rows_with_outer(node: Node, outer: Row, ctx: Any) -> AsyncIterator[Row]:
    """``node``'s rows computed with ``outer`` as the innermost outer row. It is pushed only
    while ``node`` computes a row, not while the caller handles one: the operators above
    evaluate their own outer references (an enclosing query's row) against the same stack."""
    it = node.rows(ctx).__aiter__()
    try:
        while True:
            ctx.outer_rows.append(outer)
            try:
                row = await it.__anext__()
            except StopAsyncIteration:
                return
            finally:
                ctx.outer_rows.pop()
            yield row
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass
class HashJoin(Node):
    left: Node
    right: Node
    kind: str
    left_keys: list[Compiled]
    right_keys: list[Compiled]
    residual: Compiled | None
    right_width: int
    left_width: int
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        table: dict[tuple[object, ...], list[int]] = {}
        right_rows: list[Row] = []
        async for r in self.right.rows(ctx):
            key = tuple(k(r, ctx) for k in self.right_keys)
            right_rows.append(r)
            if None in key:
                continue
            table.setdefault(_hashable(key), []).append(len(right_rows) - 1)
        matched = [False] * len(right_rows)
        null_right = (None,) * self.right_width
        residual = self.residual
        n = 0
        async for lrow in self.left.rows(ctx):
            n += 1
            await _pause(n)
            key = tuple(k(lrow, ctx) for k in self.left_keys)
            hit = False
            if None not in key:
                for j in table.get(_hashable(key), ()):
                    row = lrow + right_rows[j]
                    if residual is not None and residual(row, ctx) is not True:
                        continue
                    hit = True
                    matched[j] = True
                    yield row
            if not hit and self.kind in ("left", "full"):
                yield lrow + null_right
        if self.kind in ("right", "full"):
            for row in _unmatched_right(self.left_width, right_rows, matched):
                yield row

    def explain(self) -> list[str]:
        label = "Hash Join" if self.kind == "inner" else f"Hash {self.kind.title()} Join"
        return _explain_tree(label, [], [self.left, self.right])


LOOKUP_BATCH = 1000
"""Outer rows a lookup join gathers before fetching their matches in one batched read."""
LOOKUP_SCANS = 32
"""Prefix scans a lookup join runs at once (a prefix lookup scans one key range per distinct
key): bounded, so one batch does not take every connection of the store's pool."""


@dataclass
class LookupTarget:
    """The inner table of a lookup join and how an encoded lookup key reaches its rows.

    ``mode``: ``"primary key"`` (the key is a row key: one batched read), ``"unique"`` (the
    key is a unique index's entry key: one batched read of the entries, one of the rows),
    ``"index"`` (a prefix of a secondary index: one scan per key, then one batched read of
    the rows) or ``"range"`` (a prefix of the primary key: one scan per key)."""

    codec: RowCodec
    table_name: str
    mode: str
    index: IndexCodec | None
    describe: str
    """The lookup columns and what fixes them, for EXPLAIN."""
    predicate: Compiled | None
    """The inner table's own (pushed) filters, over its row."""
    filter_text: str
    lock_rows: bool = False
    lock_clause: LockClause = FOR_UPDATE
    """FOR UPDATE NOWAIT / SKIP LOCKED."""

    async def fetch(self, ctx: Any, keys: list[bytes]) -> dict[bytes, list[Row]]:
        """The rows (passing the table's filters) of each key, in key order within one."""
        if self.mode == "primary key":
            found = await self._rows_by_key(ctx, keys)
        elif self.mode == "unique":
            found = await self._rows_by_unique_entry(ctx, keys)
        elif self.mode == "index":
            found = await self._rows_by_index_prefix(ctx, keys)
        else:
            found = await self._rows_by_key_prefix(ctx, keys)
        pred = self.predicate
        if pred is None:
            return found
        return {k: [r for r in rows if pred(r, ctx) is True] for k, rows in found.items()}

    async def _rows_by_key(self, ctx: Any, keys: list[bytes]) -> dict[bytes, list[Row]]:
        rows = await self.codec.get_rows(ctx.txn, keys)
        return {k: [r] for k, r in zip(keys, rows, strict=True) if r is not None}

    async def _rows_by_unique_entry(self, ctx: Any, keys: list[bytes]) -> dict[bytes, list[Row]]:
        assert self.index is not None
        storage = self.index.storage
        entries = await ctx.txn.get_many([CellKey(storage, k, MARKER) for k in keys])
        pairs = [(k, rk) for k, rk in zip(keys, entries, strict=True) if rk is not None]
        by_row_key = await self._rows_by_key(ctx, sorted({rk for _, rk in pairs}))
        return {k: by_row_key.get(rk, []) for k, rk in pairs}

    async def _rows_by_index_prefix(self, ctx: Any, keys: list[bytes]) -> dict[bytes, list[Row]]:
        assert self.index is not None
        storage = self.index.storage

        async def row_keys(prefix: bytes) -> list[bytes]:
            return [
                rk
                async for _, cells in ctx.txn.scan(
                    storage, prefix, prefix_successor(prefix), [MARKER]
                )
                if (rk := cells.get(MARKER)) is not None
            ]

        per_key = await _bounded_gather([lambda k=k: row_keys(k) for k in keys])
        by_row_key = await self._rows_by_key(ctx, sorted({rk for rks in per_key for rk in rks}))
        return {
            k: [r for rk in rks for r in by_row_key.get(rk, ())]
            for k, rks in zip(keys, per_key, strict=True)
        }

    async def _rows_by_key_prefix(self, ctx: Any, keys: list[bytes]) -> dict[bytes, list[Row]]:
        codec = self.codec

        async def rows(prefix: bytes) -> list[Row]:
            return [
                codec.decode(key, cells)
                async for key, cells in ctx.txn.scan(
                    codec.storage, prefix, prefix_successor(prefix), codec.read_names
                )
                if codec.exists(cells)
            ]

        per_key = await _bounded_gather([lambda k=k: rows(k) for k in keys])
        return dict(zip(keys, per_key, strict=True))

    def explain(self) -> list[str]:
        """EXPLAIN lines of the inner side, shaped as the access path it amounts to."""
        if self.mode == "primary key":
            label = f"Point Get on {self.table_name} (primary key {self.describe})"
        elif self.mode == "range":
            label = f"Range Scan on {self.table_name} (primary key {self.describe})"
        else:
            assert self.index is not None
            label = (
                f"Index Lookup using {self.index.index.name} on {self.table_name} ({self.describe})"
            )
        details = [f"Filter: {self.filter_text}"] if self.filter_text else []
        if self.lock_rows:
            details.append("Lock Rows: FOR UPDATE")
        return _explain_tree(label, details, [])


async def _bounded_gather(calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run the calls concurrently, at most LOOKUP_SCANS at a time; results in call order.
    A task group cancels the others when one fails (none is left reading on its own)."""
    out: list[T] = []
    for i in range(0, len(calls), LOOKUP_SCANS):
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c()) for c in calls[i : i + LOOKUP_SCANS]]
        out.extend(t.result() for t in tasks)
    return out


@dataclass
class LookupJoin(Node):
    """An index nested loop join: the outer input's rows in batches of LOOKUP_BATCH, each
    batch's matches fetched from the inner table by key in one batched read (see
    :class:`LookupTarget`); joined rows come out in the outer input's order.

    ``outer_first``: the outer input is the join's left side (else the planner swapped the
    sides, and joined rows put the inner row first to keep the statement's column order).
    ``preserve_outer``: an outer row without a match comes out null-extended (LEFT JOIN, or a
    RIGHT JOIN driven from its right side). ``residual``: the whole join condition, over the
    joined row (the keys only find candidates)."""

    outer: Node
    target: LookupTarget
    key_of: Callable[[Row, Any], bytes | None]
    """The encoded lookup key of an outer row; None: the row matches nothing (a NULL key)."""
    residual: Compiled | None
    kind: str
    preserve_outer: bool
    outer_first: bool
    inner_width: int
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        async for batch in batched(self.outer.rows(ctx), LOOKUP_BATCH):
            async for out in self._join_batch(batch, ctx):
                yield out

    async def _join_batch(self, batch: list[Row], ctx: Any) -> AsyncIterator[Row]:
        keys = [self.key_of(r, ctx) for r in batch]
        wanted = sorted({k for k in keys if k is not None})
        found = await self.target.fetch(ctx, wanted) if wanted else {}
        residual = self.residual
        null_inner = (None,) * self.inner_width
        n = 0
        for orow, key in zip(batch, keys, strict=True):
            hit = False
            for irow in found.get(key, ()) if key is not None else ():
                n += 1
                await _pause(n)
                row = orow + irow if self.outer_first else irow + orow
                if residual is not None and residual(row, ctx) is not True:
                    continue
                if self.target.lock_rows:
                    codec = self.target.codec
                    locked = [(codec.key_of_stored(irow), row)]
                    if not await lock_for_select(ctx, codec, locked, self.target.lock_clause):
                        continue  # SKIP LOCKED
                hit = True
                yield row
            if not hit and self.preserve_outer:
                yield orow + null_inner if self.outer_first else null_inner + orow

    def explain(self) -> list[str]:
        label = "Lookup Join" if self.kind == "inner" else f"Lookup {self.kind.title()} Join"
        lines = _explain_tree(label, [], [self.outer])
        inner = self.target.explain()
        lines.append("  ->  " + inner[0])
        lines.extend("      " + s for s in inner[1:])
        return lines

    def children(self) -> list[Node]:
        return [self.outer]


def _unmatched_right(left_width: int, right_rows: list[Row], matched: list[bool]) -> list[Row]:
    """RIGHT/FULL join: the right rows no left row matched, null-extended on the left."""
    null_left = (None,) * left_width
    return [null_left + r for r, hit in zip(right_rows, matched, strict=True) if not hit]


def _hashable(key: tuple[object, ...]) -> tuple[object, ...]:
    """``key`` as a dict key under which values are equal when Postgres's ``=`` says so."""
    return tuple(_equality_value(k) if isinstance(k, _NOT_AS_IS) else k for k in key)


_NOT_AS_IS = (list, float, Decimal, Interval)
"""Values whose Python equality (or hashability) differs from Postgres's: arrays are lists,
NaN is unequal to itself in Python, intervals compare by their fields."""
_NAN = ("NaN",)


def _equality_value(v: object) -> object:
    if isinstance(v, list):
        return tuple(_equality_value(x) if isinstance(x, _NOT_AS_IS) else x for x in v)
    if isinstance(v, float):
        return _NAN if v != v else v
    if isinstance(v, Decimal):
        return _NAN if v.is_nan() else v
    if isinstance(v, Interval):
        return (Interval, v.sort_key())  # '1 day' = '24 hours', '1 mon' = '30 days'
    return v


@dataclass
class Aggregate(Node):
    input: Node
    groups: list[Compiled]
    aggs: list[tuple[Callable[[], Accumulator], list[Compiled], bool, Compiled | None, bool]]
    """(accumulator factory, argument closures, DISTINCT, FILTER, strict: NULLs ignored)."""
    width: int = 0
    sets: list[tuple[int, ...]] | None = None
    """GROUP BY's grouping sets (positions in ``groups``), None for a plain GROUP BY."""

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        if self.sets is not None:
            async for row in self._grouping_set_rows(self.sets, ctx):
                yield row
            return
        groups = self.groups
        states: dict[tuple[object, ...], list[Accumulator]] = {}
        seen: dict[tuple[object, ...], list[set[tuple[object, ...]]]] = {}
        order: list[tuple[object, ...]] = []
        n = 0
        async for row in self.input.rows(ctx):
            n += 1
            await _pause(n)
            key = tuple(g(row, ctx) for g in groups)
            hkey = _hashable(key)
            accs = states.get(hkey)
            if accs is None:
                accs = states[hkey] = [factory() for factory, *_ in self.aggs]
                seen[hkey] = [set() for _ in self.aggs]
                order.append(key)
            for i, (_, args, distinct, filt, strict) in enumerate(self.aggs):
                if filt is not None and filt(row, ctx) is not True:
                    continue
                values = [a(row, ctx) for a in args]
                if distinct:
                    dk = _hashable(tuple(values))
                    if values and values[0] is None and strict:
                        continue
                    if dk in seen[hkey][i]:
                        continue
                    seen[hkey][i].add(dk)
                accs[i].add(*values)
        if not order and not groups:
            yield tuple(factory().result() for factory, *_ in self.aggs)
            return
        for key in order:
            accs = states[_hashable(key)]
            yield key + tuple(a.result() for a in accs)

    async def _grouping_set_rows(self, sets: list[tuple[int, ...]], ctx: Any) -> AsyncIterator[Row]:
        """GROUP BY with grouping sets: each input row goes to one group of every set. A
        set's rows have NULL for the groups it leaves out, then the bitmask of those (what
        GROUPING() reads); an empty set has its one row even without input, like an
        aggregate without GROUP BY."""
        width = len(self.groups)
        masks = [omitted_mask(s, width) for s in sets]
        states: dict[tuple[object, ...], tuple[list[Accumulator], list[set[Any]]]] = {}
        order: list[tuple[tuple[object, ...], int]] = []
        n = 0
        async for row in self.input.rows(ctx):
            n += 1
            await _pause(n)
            values = [g(row, ctx) for g in self.groups]
            # Each aggregate's arguments once per row (None: FILTER rejects it), for all sets.
            inputs: list[list[object] | None] = []
            for _, args, _, filt, _ in self.aggs:
                if filt is not None and filt(row, ctx) is not True:
                    inputs.append(None)
                else:
                    inputs.append([a(row, ctx) for a in args])
            for k, s in enumerate(sets):
                key = (k, *(values[i] if i in s else None for i in range(width)))
                hkey = _hashable(key)
                state = states.get(hkey)
                if state is None:
                    state = states[hkey] = (
                        [factory() for factory, *_ in self.aggs],
                        [set() for _ in self.aggs],
                    )
                    order.append((key, k))
                accs, seen = state
                for i, (_, _, distinct, _, strict) in enumerate(self.aggs):
                    vals = inputs[i]
                    if vals is None:
                        continue
                    if distinct:
                        if vals and vals[0] is None and strict:
                            continue
                        dk = _hashable(tuple(vals))
                        if dk in seen[i]:
                            continue
                        seen[i].add(dk)
                    accs[i].add(*vals)
        for key, k in order:
            accs = states[_hashable(key)][0]
            yield (*key[1:], masks[k], *(a.result() for a in accs))
        for k, s in enumerate(sets):
            if not s and not n:
                yield (*(None,) * width, masks[k], *(f().result() for f, *_ in self.aggs))

    def explain(self) -> list[str]:
        if self.sets is not None:
            # Postgres hashes the non-empty sets and adds the empty one's row (MixedAggregate).
            label = "MixedAggregate" if any(not s for s in self.sets) else "HashAggregate"
            if not any(self.sets):
                label = "Aggregate"
        else:
            label = "HashAggregate" if self.groups else "Aggregate"
        return _explain_tree(label, [], [self.input])


@dataclass
class Sort(Node):
    input: Node
    keys: list[tuple[Compiled, bool, bool, Callable[[Any], Any]]]
    """(expression, descending, nulls_first, sort key of a non-null value)."""
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        async for r in self.first(ctx, None):
            yield r

    async def first(self, ctx: Any, wanted: int | None) -> AsyncIterator[Row]:
        """The sorted rows, only the first ``wanted`` of them (None: all): a LIMIT above
        asks for LIMIT + OFFSET, and only those are kept while the input streams (a top-N
        sort, in memory O(N))."""
        keys = self.keys
        decorated: list[Any] = []
        async for r in self.input.rows(ctx):
            decorated.append((r, [k[0](r, ctx) for k in keys]))
            if wanted is not None and len(decorated) >= 2 * wanted + 1024:
                # Keep the first ``wanted`` in order; the sort is stable and the kept rows
                # precede later ones, so ties still come out in input order.
                _sort_decorated(decorated, keys)
                del decorated[wanted:]
        _sort_decorated(decorated, keys)
        if wanted is not None:
            del decorated[wanted:]
        for r, _ in decorated:
            yield r

    def explain(self) -> list[str]:
        return _explain_tree("Sort", [], [self.input])


@dataclass
class LockRows(Node):
    """SELECT ... FOR UPDATE above a Sort or a Filter the scan could not take: locks each row
    of the table as it is pulled, so a LIMIT above takes locks only on the rows it returns and
    rows the filter drops are never locked (Postgres's LockRows node). Above a Sort each row
    carries the table row's key in its last value (added by the projection below the Sort),
    which this node takes off; above a Filter the rows are the table's own (``key_last``
    False)."""

    input: Node
    codec: RowCodec
    lock_clause: LockClause = FOR_UPDATE
    lock_batch: int = 1
    """Rows locked per round trip: 1 under a LIMIT, more when every row is returned."""
    key_last: bool = True
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        codec = self.codec
        async for batch in batched(self.input.rows(ctx), self.lock_batch):
            if self.key_last:
                pairs = [(row[-1], row[:-1]) for row in batch]
            else:
                pairs = [(codec.key_of_stored(row), row) for row in batch]
            recheck = self.rechecker(ctx)
            for locked in await lock_for_select(ctx, codec, pairs, self.lock_clause, recheck):
                yield locked

    def rechecker(self, ctx: Any) -> Recheck | None:
        """A changed row keeps its place in the sort (made on its old version, as in
        Postgres) and is re-checked through the projection below the sort, whose rows carry
        the key last."""
        projected = self.input.input if isinstance(self.input, Sort) else None
        if projected is None or projected.access() is None:
            return None

        async def recheck(keys: list[bytes]) -> tuple[int, dict[bytes, Row | None]]:
            ts, rows = await projected.recheck_keys(ctx, keys)
            return ts, {k: None if r is None else r[:-1] for k, r in rows.items()}

        return recheck

    def explain(self) -> list[str]:
        return _explain_tree("LockRows", [], [self.input])

    def children(self) -> list[Node]:
        return [self.input]


SortSpec = tuple[Compiled, bool, bool, Callable[[Any], Any]]
"""(expression, descending, nulls_first, sort key of a non-null value)."""


def _sort_decorated(decorated: list[Any], keys: Sequence[SortSpec]) -> None:
    """Sort (item, key values) pairs in place by ``keys`` (stable, one pass per key)."""
    for i in range(len(keys) - 1, -1, -1):
        _, desc, nulls_first, sk = keys[i]
        null_flag = (0 if nulls_first else 2) if not desc else (2 if nulls_first else 0)

        def key(item: Any, _i: int = i, _nf: int = null_flag, _sk: Any = sk) -> Any:
            v = item[1][_i]
            return (_nf, None) if v is None else (1, _sk(v))

        try:
            decorated.sort(key=key, reverse=desc)
        except TypeError:
            decorated.sort(key=lambda item, _i=i: str(item[1][_i]), reverse=desc)


class _OrderedAccumulator(Accumulator):
    """An aggregate with its own ORDER BY: its values are kept with their sort keys and fed to
    the real accumulator in order at the end."""

    def __init__(self, inner: Accumulator, nargs: int, keys: list[SortSpec]) -> None:
        self._inner = inner
        self._nargs = nargs
        self._keys = keys
        self._items: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        self._done: object = _NOT_YET

    def add(self, *values: Any) -> None:
        self._items.append((values[: self._nargs], values[self._nargs :]))

    def result(self) -> object:
        if self._done is _NOT_YET:
            _sort_decorated(self._items, self._keys)
            for args, _ in self._items:
                self._inner.add(*args)
            self._done = self._inner.result()
        return self._done


_NOT_YET = object()


def ordered_factory(
    factory: Callable[[], Accumulator], nargs: int, keys: list[tuple[bool, bool, Any]]
) -> Callable[[], Accumulator]:
    """Accumulators of an aggregate with ORDER BY: the first ``nargs`` values of each row are
    its arguments, the rest its sort keys (``keys``: descending, nulls first, compare key)."""
    specs: list[SortSpec] = [(None, desc, nulls_first, sk) for desc, nulls_first, sk in keys]  # type: ignore[misc]
    return lambda: _OrderedAccumulator(factory(), nargs, specs)


@dataclass
class ProjectSet(Node):
    """Set-returning functions of a select list, run in lockstep for each input row."""

    input: Node
    calls: list[tuple[Callable[..., Any], list[Compiled], bool]]
    """(function, argument closures, composite: the value is the function's whole row)."""
    runners: list[SubqueryRunner] = field(default_factory=list)
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        n = 0
        async for row in self.input.rows(ctx):
            if self.runners:
                await _prepare(self.runners, row, ctx)
            iters: list[Any] = []
            for fn, args, _ in self.calls:
                vals = [a(row, ctx) for a in args]
                # Strict, like the functions themselves: a NULL argument gives no rows.
                iters.append(None if None in vals else iter(fn(*vals)))
            while True:
                out: list[object] = []
                alive = False
                for k, (_, _, composite) in enumerate(self.calls):
                    it = iters[k]
                    item = next(it, None) if it is not None else None
                    if item is None:
                        iters[k] = None
                        out.append(None)
                    else:
                        alive = True
                        out.append(item if composite else item[0])
                if not alive:
                    break
                n += 1
                await _pause(n)
                yield row + tuple(out)

    def explain(self) -> list[str]:
        return _explain_tree("ProjectSet", [], [self.input])

    def children(self) -> list[Node]:
        return [self.input]


@dataclass
class Limit(Node):
    input: Node
    limit: Compiled | None
    offset: Compiled | None
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        limit = self.limit((), ctx) if self.limit is not None else None
        offset = self.offset((), ctx) if self.offset is not None else 0
        offset = offset or 0
        if limit is not None and limit < 0:
            raise SqlError("2201W", "LIMIT must not be negative")
        if offset < 0:
            raise SqlError("2201X", "OFFSET must not be negative")
        if limit == 0:
            return
        source = self.input
        # Evaluated once: a sort below keeps only the rows this LIMIT can return.
        rows = (
            source.first(ctx, limit + offset)
            if isinstance(source, Sort) and isinstance(limit, int)
            else source.rows(ctx)
        )
        n = 0
        async for row in rows:
            if offset:
                offset -= 1
                continue
            yield row
            n += 1
            if limit is not None and n >= limit:
                return

    def explain(self) -> list[str]:
        return _explain_tree("Limit", [], [self.input])


@dataclass
class Distinct(Node):
    input: Node
    on: list[Compiled] | None
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        seen: set[tuple[object, ...]] = set()
        async for row in self.input.rows(ctx):
            key = (
                _hashable(tuple(e(row, ctx) for e in self.on))
                if self.on is not None
                else _hashable(row)
            )
            if key in seen:
                continue
            seen.add(key)
            yield row

    def explain(self) -> list[str]:
        return _explain_tree("Unique", [], [self.input])


@dataclass
class SetOp(Node):
    kind: str
    all: bool
    left: Node
    right: Node
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        if self.kind == "union":
            seen: set[tuple[object, ...]] = set()
            async for row in _chain(self.left.rows(ctx), self.right.rows(ctx)):
                if not self.all:
                    h = _hashable(row)
                    if h in seen:
                        continue
                    seen.add(h)
                yield row
            return
        counts: dict[tuple[object, ...], int] = {}
        async for row in self.right.rows(ctx):
            h = _hashable(row)
            counts[h] = counts.get(h, 0) + 1
        emitted: set[tuple[object, ...]] = set()
        async for row in self.left.rows(ctx):
            h = _hashable(row)
            present = counts.get(h, 0) > 0
            if self.kind == "intersect":
                if not present:
                    continue
                if self.all:
                    counts[h] -= 1
                elif h in emitted:
                    continue
            else:
                if present:
                    if self.all:
                        counts[h] -= 1
                    continue
                if not self.all and h in emitted:
                    continue
            emitted.add(h)
            yield row

    def explain(self) -> list[str]:
        label = {"union": "Append" if self.all else "Union"}.get(self.kind, self.kind.title())
        return _explain_tree(label, [], [self.left, self.right])


@dataclass
class WorkTableScan(Node):
    """The working table of a recursive CTE: the rows its :class:`RecursiveUnion` produced
    in the previous iteration."""

    name: str
    token: object
    """Identifies the working table in the execution context (shared with the union)."""
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        for n, row in enumerate(_work_tables(ctx).get(self.token, ()), 1):
            await _pause(n)
            yield row

    def explain(self) -> list[str]:
        return [f"WorkTable Scan on {self.name}"]


@dataclass
class RecursiveUnion(Node):
    """WITH RECURSIVE: the initial term's rows, then the recursive term's rows run over the
    previous iteration's rows (the working table), until an iteration produces none. Rows
    stream out as produced; memory holds the working table (and, for UNION, the rows seen).
    An endless recursion runs until cancelled or timed out, as in Postgres."""

    name: str
    all: bool
    initial: Node
    recursive: Node
    token: object
    width: int = 0

    async def rows(self, ctx: Any) -> AsyncIterator[Row]:
        seen: set[tuple[object, ...]] | None = None if self.all else set()
        tables = _work_tables(ctx)
        produced = 0
        source = self.initial
        try:
            while True:
                found: list[Row] = []
                async for row in source.rows(ctx):
                    if seen is not None:
                        h = _hashable(row)
                        if h in seen:
                            continue
                        seen.add(h)
                    found.append(row)
                    produced += 1
                    await _pause(produced)
                    yield row
                if not found:
                    return
                # Each iteration lets the event loop run: cancellation must reach a
                # recursion of one row per iteration too.
                await asyncio.sleep(0)
                tables[self.token] = found
                source = self.recursive
        finally:
            tables.pop(self.token, None)

    def explain(self) -> list[str]:
        return _explain_tree(f"Recursive Union ({self.name})", [], [self.initial, self.recursive])

    def children(self) -> list[Node]:
        return [self.initial, self.recursive]


def _work_tables(ctx: Any) -> dict[object, list[Row]]:
    """The working tables of the recursive CTEs running in this execution: kept on the
    execution context, not the (cached, reusable) plan."""
    tables: dict[object, list[Row]] | None = getattr(ctx, "work_tables", None)
    if tables is None:
        tables = {}
        ctx.work_tables = tables
    return tables


async def _chain(*iters: AsyncIterator[Row]) -> AsyncIterator[Row]:
    for it in iters:
        async for row in it:
            yield row


def compile_all(exprs: Sequence[Any]) -> list[Compiled]:
    return [compile_expr(e) for e in exprs]


__all__ = ["Node"]
