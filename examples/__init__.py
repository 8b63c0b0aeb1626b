"""Example applications built on Percolator (``percolator.examples.*``)."""
