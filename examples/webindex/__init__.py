"""The paper's incremental web-indexing pipeline, on Percolator observers.

A crawl (``crawl.py``) is loaded into the ``pages`` table; observers (``observers.py``) keep
the derived tables up to date as pages are inserted, re-crawled and deleted: documents and
their content hash, duplicate clusters with their canonical URL (the paper's Figure 2), and the
inverted link graph with anchor text forwarded to canonical pages. ``batch.py`` computes the
same tables from scratch, and ``percolator demo webindex --verify`` compares the two. See
docs/webindex.md.
"""
