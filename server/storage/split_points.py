"""Split points of a table's row keys, for key-range partitioning (``sample_row_keys``).

Each shard holds a hash-chosen subset of a table's rows, so each shard's quantiles estimate the
whole table's. A shard answers with its quantiles and how many row keys they stand for; the
store merges them, weighting each shard by its share of the rows.
"""

from __future__ import annotations

from collections.abc import Sequence


def quantile_points(sorted_keys: Sequence[bytes], n: int) -> list[bytes]:
    """Postgres's ``percentile_disc`` at fractions ``i / n`` (i = 1 .. n-1) of sorted keys: for
    each, the first key whose position reaches the fraction. Empty for no keys."""
    count = len(sorted_keys)
    if count == 0 or n < 2:
        return []
    return [sorted_keys[max(0, -(-i * count // n) - 1)] for i in range(1, n)]


def merge_split_points(per_shard: Sequence[tuple[Sequence[bytes], int]], n: int) -> list[bytes]:
    """Up to ``n - 1`` sorted, distinct split points from each shard's ``n - 1`` quantiles and
    row count: the points where the rows counted so far, over all shards, reach ``k / n`` of
    all rows (each quantile of a shard stands for ``rows / n`` of that shard's rows)."""
    weighted = sorted(
        (point, rows / n)
        for points, rows in per_shard
        if rows > 0
        for point in points
        if point is not None
    )
    total = sum(rows for points, rows in per_shard if rows > 0 and points)
    if not weighted or n < 2:
        return []
    result: list[bytes] = []
    seen = 0.0
    k = 1
    for point, weight in weighted:
        seen += weight
        # Several targets may fall on one point (a heavy shard's point); it is kept once.
        while k < n and seen >= k * total / n - 1e-9:
            if not result or result[-1] != point:
                result.append(point)
            k += 1
    return result
