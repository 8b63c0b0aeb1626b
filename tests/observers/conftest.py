"""The transaction layer's fixtures (a client over the memory store and over 2 Postgres shards)
serve the runtime tests here too."""

from tests.txn.conftest import client, clock, store  # noqa: F401
