"""Faults between hosts (bench/nemesis/run.py): controllers on network namespaces sharing one PostgreSQL log."""
