"""Cell store: single-row atomic, batched operations on Postgres shards (and in memory)."""
