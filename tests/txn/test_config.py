"""Lock TTLs grow with the transaction's size, within bounds."""

from percolator.server.txn.config import TxnConfig


def test_lock_ttl_grows_with_size_and_is_capped() -> None:
    config = TxnConfig()
    small = config.lock_ttl_ms(1_000)
    sixteen_mib = config.lock_ttl_ms(16 * 1024 * 1024)
    huge = config.lock_ttl_ms(100 * 1024 * 1024 * 1024)
    assert small == config.base_lock_ttl_ms
    assert sixteen_mib == 4 * config.base_lock_ttl_ms  # sqrt(16) times the base
    assert huge == config.max_lock_ttl_ms
