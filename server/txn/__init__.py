"""The Percolator protocol: timestamps, transactions, lock resolution, GC."""
