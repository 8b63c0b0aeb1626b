"""The entry point of one SQL worker process of ``percolator serve --processes N``.

Started by :class:`percolator.server.worker_pool.WorkerPool` as ``python -m
percolator.server.worker_process`` with its :class:`~percolator.server.worker_pool.WorkerSpec`
in the environment. It serves the connections its acceptor hands it until SIGTERM or SIGINT
(a graceful shutdown, as ``percolator serve``'s) or until the acceptor process is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from percolator.server import logs, python_gc
from percolator.server.frontend.listener import WorkerSlot
from percolator.server.runtime import start_server
from percolator.server.txn import eventloop
from percolator.server.worker_pool import SPEC_ENV, WorkerSpec

log = logging.getLogger("percolator.worker_process")


async def _serve(spec: WorkerSpec) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await start_server(
        spec.server_config(),
        spec.dsns,
        worker_slot=WorkerSlot(spec.index, spec.count, spec.channel_fd),
        shared_dir=spec.shared_dir,
    )
    gone = asyncio.ensure_future(server.frontend.acceptor_gone.wait())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if gone.done():
        log.warning("the acceptor process is gone: worker %d shutting down", spec.index)
    gone.cancel()
    stopped.cancel()
    await server.close()
    return 0


def main() -> int:
    """Run the worker described by the environment."""
    text = os.environ.get(SPEC_ENV)
    if text is None:
        print(f"{__name__}: {SPEC_ENV} is not set (started by percolator serve)", file=sys.stderr)
        return 2
    spec = WorkerSpec.from_json(text)
    logs.configure(spec.log_level, spec.log_format)
    python_gc.tune_for_serving()
    return eventloop.run(_serve(spec))


if __name__ == "__main__":
    sys.exit(main())
