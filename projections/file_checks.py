"""What says a view's SQLite file is itself wrong: its `stat`, or the error SQLite gave on it.

Apart from projections/health (which imports files): files checks its catalog with these too.
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

# SQLite's primary result codes that say "this file is not what it should be", not "try again":
# SQLITE_ERROR (no such table, no such column, ...), SQLITE_CORRUPT, SQLITE_SCHEMA, SQLITE_NOTADB.
# Busy, locked, full, I/O and permission errors are about the machine, never a reason to rebuild.
BROKEN_CODES = frozenset({1, 11, 17, 26})


def primary_code(error: BaseException) -> int | None:
    """SQLite's primary result code of `error`, None when it is not an SQLite error."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(error, sqlite3.DatabaseError) and code is not None else None


def is_broken(error: BaseException) -> bool:
    """Whether an SQLite error says the file itself is wrong (random bytes, truncated, other schema)."""
    return primary_code(error) in BROKEN_CODES


def file_problem(path: Path) -> str | None:
    """What `stat` shows wrong with a view's file (None when nothing, or when it is gone, link and all).

    Never opened here: closing a descriptor of a database file would drop the POSIX locks
    this process's SQLite connections hold on it. SQLite reads the first bytes itself."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "a link to nothing" if path.is_symlink() else None
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return "zero length" if st.st_size == 0 else None


__all__ = ["BROKEN_CODES", "primary_code", "file_problem", "is_broken"]
