"""Runtimes that run deployers: the local process runtime."""
