"""The collector settings of server processes: fewer collections, cyclic garbage still freed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import gc, weakref
    from percolator.server import python_gc

    python_gc.tune_for_serving()
    assert gc.isenabled()
    assert gc.get_threshold() == (
        python_gc.YOUNG_THRESHOLD, python_gc.OLDER_THRESHOLD, python_gc.OLDER_THRESHOLD
    )
    assert gc.get_freeze_count() > 1000  # the modules and classes imported so far

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    freed = weakref.ref(a)
    del a, b
    keep = [[i] for i in range(3 * python_gc.YOUNG_THRESHOLD)]  # allocations trigger collections
    assert freed() is None, "the cycle was never collected"
    print("ok")
    """
)


def test_tuned_collector_still_frees_cycles() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
