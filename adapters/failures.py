"""Telling a full or failing disk (or database server) from every other error: the CLI exits 5 on it."""

from __future__ import annotations

import errno
import sqlite3

# What the machine says, not the program: out of space or quota, a failing or read-only device.
_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}
# SQLite's primary codes for the same: SQLITE_IOERR (its extended codes too) and SQLITE_FULL.
_SQLITE_CODES = {10, 13}
# PostgreSQL's classes "insufficient resources" (disk full, out of memory) and "system error" (I/O).
_SQLSTATE_CLASSES = ("53", "58")


def disk_problem(error: BaseException) -> str | None:
    """One line saying what failed, when `error` (or what caused it) is a full or failing disk."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if _is_disk(link):
            return " ".join(str(link).split()) or type(link).__name__
        link = link.__cause__ or link.__context__
    return None


def _is_disk(error: BaseException) -> bool:
    if isinstance(error, OSError) and error.errno in _ERRNOS:
        return True
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_CODES
    sqlstate = getattr(error, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith(_SQLSTATE_CLASSES)
