"""Running the connector's async code inside Spark's Python workers.

Every method of a Python data source runs in some Python worker process, and the objects Spark
pickles between them must hold no connection. So each call opens what it needs inside a private
event loop and closes both before returning: :func:`run` for one coroutine, :func:`iterate` to
drive an async generator from the synchronous generator Spark's ``read()`` must be.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from percolator.clients.database import Database, connect
from percolator.connectors.spark.errors import CONNECTION_FAILURE, PercolatorSparkError
from percolator.connectors.spark.options import Connection
from percolator.server.sql.catalog import Catalog, TableDef
from percolator.server.storage.errors import redact_dsn

T = TypeVar("T")
log = logging.getLogger(__name__)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a private event loop, closed afterwards."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)


def iterate(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """The items of an async generator, produced on a private event loop that lives as long as
    this (synchronous) generator. Closing this generator early closes the async one."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        agen = make()

        async def step() -> T:
            return await agen.__anext__()

        try:
            while True:
                try:
                    item = runner.run(step())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                runner.run(aclose())


@asynccontextmanager
async def open_database(connection: Connection) -> AsyncIterator[Database]:
    """A connection to the deployment (store, coordinator), closed on exit; 08006 with the
    DSN (password hidden) when the store cannot be reached."""
    try:
        db = await connect(list(connection.store), coordinator=connection.coordinator)
    except Exception as exc:
        where = ", ".join(redact_dsn(d) for d in connection.store)
        raise PercolatorSparkError(
            CONNECTION_FAILURE, f"cannot connect to the store at {where}: {exc}"
        ) from exc
    try:
        yield db
    finally:
        try:
            await db.close()
        except Exception:
            log.warning("closing the connection to the store failed", exc_info=True)


def find_table(catalog: Catalog, name: str) -> TableDef:
    """The table ``name`` (as written, else folded to lower case as unquoted SQL names are);
    42P01 when there is none."""
    found = catalog.tables.get(name) or catalog.tables.get(name.lower())
    if found is None:
        raise PercolatorSparkError("42P01", f'table "{name}" does not exist')
    return found
