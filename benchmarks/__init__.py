"""Benchmarks run by hand on a GPU machine (not part of the installed package)."""
