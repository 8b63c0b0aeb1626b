"""Which columns of each scanned table a query actually uses.

Every SQL column is a cell, and a read costs per cell, so a query reads only the cells it needs
(``SELECT abalance FROM accounts WHERE aid = 1`` reads the row marker and one cell, not all of
them). Unread columns are None in the rows the scan produces; nothing above reads them.

The analysis walks the relation tree from the top, carrying the set of output positions each
operator's parent needs. It gives up (every column is read) where a correlated subquery could
reach a row's columns from below. An outer reference reads an enclosing row, never this query's
tables: the right side of a LATERAL join adds the left columns it reads to the left's needs.
"""

from __future__ import annotations

from percolator.server.sql.bound import (
    AggregateRel,
    BColumn,
    BExpr,
    BSubquery,
    DistinctRel,
    FilterRel,
    JoinRel,
    LimitRel,
    ProjectRel,
    ProjectSetRel,
    Rel,
    SetOpRel,
    SortRel,
    TableRel,
    WindowRel,
    walk,
)
from percolator.server.sql.expr_binder import outer_references

Needed = dict[int, set[int]]
"""id(TableRel) -> positions of its columns that are read."""


def needed_columns(rel: Rel) -> Needed | None:
    """The columns each table of ``rel`` must read, or None to read them all."""
    out: Needed = {}
    try:
        _visit(rel, set(range(len(rel.columns))), out)
    except _GiveUp:
        return None
    return out


class _GiveUp(Exception):
    pass


def _refs(exprs: list[BExpr]) -> set[int]:
    cols: set[int] = set()
    for e in exprs:
        for n in walk(e):
            if isinstance(n, BColumn):
                cols.add(n.index)
            elif isinstance(n, BSubquery):
                if n.correlated:
                    raise _GiveUp
                sub = needed_columns(n.rel)
                if sub is None:
                    raise _GiveUp
    return cols


def _visit(rel: Rel, needed: set[int], out: Needed) -> None:
    if isinstance(rel, TableRel):
        cols = needed | _refs(rel.filters)
        out[id(rel)] = out.get(id(rel), set()) | cols
    elif isinstance(rel, ProjectRel):
        _visit(rel.input, _refs([rel.exprs[i] for i in sorted(needed) if i < len(rel.exprs)]), out)
    elif isinstance(rel, FilterRel):
        _visit(rel.input, needed | _refs([rel.predicate]), out)
    elif isinstance(rel, SortRel):
        _visit(rel.input, needed | _refs([k.expr for k in rel.keys]), out)
    elif isinstance(rel, LimitRel):
        _refs([e for e in (rel.limit, rel.offset) if e is not None])
        _visit(rel.input, needed, out)
    elif isinstance(rel, DistinctRel):
        # DISTINCT compares whole rows (or its ON keys plus what is kept).
        keys = _refs(rel.on) if rel.on is not None else set(range(len(rel.columns)))
        _visit(rel.input, needed | keys, out)
    elif isinstance(rel, AggregateRel):
        exprs = list(rel.groups)
        for a in rel.aggs:
            exprs.extend(a.args)
            if a.filter is not None:
                exprs.append(a.filter)
            exprs.extend(k.expr for k in a.order)
        _visit(rel.input, _refs(exprs), out)
    elif isinstance(rel, WindowRel):
        exprs = [e for spec in rel.specs for e in spec.partition]
        exprs.extend(k.expr for spec in rel.specs for k in spec.order)
        for c in rel.calls:
            exprs.extend(c.args)
            if c.filter is not None:
                exprs.append(c.filter)
        _visit(rel.input, _passed_through(rel, needed) | _refs(exprs), out)
    elif isinstance(rel, ProjectSetRel):
        exprs = [a for c in rel.calls for a in c.args]
        _visit(rel.input, _passed_through(rel, needed) | _refs(exprs), out)
    elif isinstance(rel, JoinRel):
        nleft = len(rel.left.columns)
        cols = set(needed)
        if rel.condition is not None:
            cols |= _refs([rel.condition])
        for a, b in rel.equi_keys:
            cols |= _refs([a])
            cols |= {i + nleft for i in _refs([b])}
        if rel.lateral:
            cols |= {i for level, i in outer_references(rel.right) if level == 1}
        _visit(rel.left, {i for i in cols if i < nleft}, out)
        _visit(rel.right, {i - nleft for i in cols if i >= nleft}, out)
    elif isinstance(rel, SetOpRel):
        everything = set(range(len(rel.columns)))
        _visit(rel.left, everything, out)
        _visit(rel.right, everything, out)
    else:
        # Leaves without table columns (VALUES, functions, system tables): check their
        # expressions for correlation, nothing to prune.
        for child in rel.inputs():
            _visit(child, set(range(len(child.columns))), out)


def _passed_through(rel: WindowRel | ProjectSetRel, needed: set[int]) -> set[int]:
    """The needed positions that are the input row's (the computed columns follow it)."""
    width = len(rel.input.columns)
    return {i for i in needed if i < width}
