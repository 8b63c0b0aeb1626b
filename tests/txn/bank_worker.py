"""A bank-transfer worker process for the chaos test (``python -m tests.txn.bank_worker``).

Each transfer moves a random amount between two random accounts and records itself under the
``transfers`` table, in one transaction. After ``commit()`` returns, the transfer's id is appended
to the acknowledgement log and flushed: an id in that log is a commit the client was told about,
which must never be lost, whatever happens to this process afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys

from percolator.server.storage.postgres_store import PostgresCellStore
from percolator.server.txn.client import TransactionClient
from percolator.server.txn.config import TxnConfig
from percolator.server.txn.errors import Retryable
from percolator.server.txn.timestamp_client import GrpcTimestampSource
from percolator.server.txn.transaction import Transaction

ACCOUNTS_TABLE = "accounts"
TRANSFERS_TABLE = "transfers"
# Short TTLs so that locks of killed workers clear within the test's time.
WORKER_CONFIG = TxnConfig(base_lock_ttl_ms=500, lock_wait_timeout_s=5.0)


def account_row(i: int) -> bytes:
    return f"acct{i:04d}".encode()


async def transfer(txn: Transaction, accounts: int, transfer_id: str, rng: random.Random) -> None:
    a, b = rng.sample(range(accounts), 2)
    from_balance = int(await txn.get(ACCOUNTS_TABLE, account_row(a), "balance") or b"0")
    to_balance = int(await txn.get(ACCOUNTS_TABLE, account_row(b), "balance") or b"0")
    amount = rng.randint(1, 20)
    txn.set(ACCOUNTS_TABLE, account_row(a), "balance", str(from_balance - amount).encode())
    txn.set(ACCOUNTS_TABLE, account_row(b), "balance", str(to_balance + amount).encode())
    txn.set(TRANSFERS_TABLE, transfer_id.encode(), "amount", str(amount).encode())


async def run(dsns: list[str], coordinator: str, accounts: int, ack_log: str, seed: int) -> None:
    rng = random.Random(seed)
    store = await PostgresCellStore.connect(dsns, pool_size=4)
    clock = GrpcTimestampSource(coordinator)
    client = TransactionClient(store, clock, WORKER_CONFIG)
    n = 0
    # Blocking on purpose: an acknowledgement must be on disk before the next transfer.
    with open(ack_log, "a", buffering=1) as log:  # noqa: ASYNC230
        while True:
            n += 1
            transfer_id = f"{os.getpid()}-{seed}-{n}"
            txn = await client.begin()
            try:
                await transfer(txn, accounts, transfer_id, rng)
                await txn.commit()
            except Retryable:
                await txn.rollback()
                continue
            log.write(transfer_id + "\n")
            log.flush()
            os.fsync(log.fileno())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", action="append", required=True)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--accounts", type=int, required=True)
    parser.add_argument("--ack-log", required=True)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    try:
        asyncio.run(run(args.dsn, args.coordinator, args.accounts, args.ack_log, args.seed))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
