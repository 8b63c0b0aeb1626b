"""``percolator demo NAME ...``: example applications run end to end.

``percolator demo webindex``: the paper's incremental web index (dedup by content hash, link
inversion, anchor text forwarded to canonical pages) kept by observers; see docs/webindex.md.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

DEMOS = {"webindex": "percolator.examples.webindex.demo"}
HELP = {"webindex": "the paper's web index kept up to date by observers (--verify, --json)"}


def _load(name: str) -> ModuleType:
    return importlib.import_module(DEMOS[name])


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand with one sub-subcommand per demo."""
    p = subparsers.add_parser(
        "demo",
        help="run an example application",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = p.add_subparsers(dest="demo", metavar="NAME")
    for name in DEMOS:
        try:
            module = _load(name)
        except ImportError as exc:
            dp = names.add_parser(name, help=f"{HELP[name]} (unavailable)")
            dp.set_defaults(run=_unavailable(name, exc))
            continue
        dp = names.add_parser(
            name,
            help=HELP[name],
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(dp)
        dp.set_defaults(run=module.run)


def _unavailable(name: str, error: ImportError) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"percolator demo {name}: cannot load {DEMOS[name]}: {error}", file=sys.stderr)
        return 1

    return run
