"""A sort under a LIMIT keeps only the rows it can return (server/planner/physical.py
Sort.first): its output is the full sort's prefix, ties in input order, whatever the LIMIT."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from percolator.server.planner.physical import Limit, Sort


class _Rows:
    """A plan node yielding fixed rows."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    async def rows(self, ctx: Any) -> AsyncIterator[tuple[Any, ...]]:
        for r in self._rows:
            yield r


def _sorted(rows: list[tuple[Any, ...]], top: int | None, descending: bool) -> list[Any]:
    keys = [(lambda r, _c: r[0], descending, False, lambda v: v)]
    node = Sort(_Rows(rows), keys)  # type: ignore[arg-type]

    async def run() -> list[Any]:
        return [r async for r in node.first(None, top)]

    return asyncio.run(run())


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("top", [0, 1, 7, 100, 2999, 10_000])
def test_top_n_is_the_full_sorts_prefix(top: int, descending: bool) -> None:
    rnd = random.Random(7)
    rows = [(rnd.randint(0, 40), i) for i in range(6000)] + [(None, -1), (None, -2)]
    full = _sorted(rows, None, descending)
    assert _sorted(rows, top, descending) == full[:top]


def test_a_limit_is_evaluated_once_for_its_sort() -> None:
    # A volatile LIMIT (``LIMIT (random() * 10)::int``) gives one count: the sort below keeps
    # the rows that count needs, not those of a second evaluation.
    counts = iter([5, 1])
    keys = [(lambda r, _c: r[0], False, False, lambda v: v)]
    node = Limit(Sort(_Rows([(i,) for i in range(3000)]), keys), lambda _r, _c: next(counts), None)  # type: ignore[arg-type]

    async def run() -> list[Any]:
        return [r async for r in node.rows(None)]

    assert asyncio.run(run()) == [(i,) for i in range(5)]
