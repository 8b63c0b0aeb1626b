"""A sort under a LIMIT keeps only the rows it can return (server/planner/physical.py Sort.top):
its output is the full sort's prefix, ties in input order, whatever the LIMIT."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from percolator.server.planner.physical import Sort


class _Rows:
    """A plan node yielding fixed rows."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    async def rows(self, ctx: Any) -> AsyncIterator[tuple[Any, ...]]:
        for r in self._rows:
            yield r


def _sorted(rows: list[tuple[Any, ...]], top: int | None, descending: bool) -> list[Any]:
    keys = [(lambda r, _c: r[0], descending, False, lambda v: v)]
    node = Sort(_Rows(rows), keys, top=(lambda _ctx: top) if top is not None else None)  # type: ignore[arg-type]

    async def run() -> list[Any]:
        return [r async for r in node.rows(None)]

    return asyncio.run(run())


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("top", [0, 1, 7, 100, 2999, 10_000])
def test_top_n_is_the_full_sorts_prefix(top: int, descending: bool) -> None:
    rnd = random.Random(7)
    rows = [(rnd.randint(0, 40), i) for i in range(6000)] + [(None, -1), (None, -2)]
    full = _sorted(rows, None, descending)
    assert _sorted(rows, top, descending) == full[:top]
