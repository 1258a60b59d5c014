"""Telling driver and OS errors apart by their types and codes: a full or failing disk, a lock held
too long, a store or file that cannot be used, a missing table. Only where a driver gives no code
(or one code for many errors) is text read, and then here alone (`_lock_text`, `missing_table`, `not_utf8`)."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator

# What the machine says, not the program: out of space or quota, a failing or read-only device.
_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}
# SQLite's primary codes for the same: SQLITE_IOERR (its extended codes too) and SQLITE_FULL.
_SQLITE_CODES = {10, 13}
# PostgreSQL's classes "insufficient resources" (disk full, out of memory) and "system error" (I/O).
_SQLSTATE_CLASSES = ("53", "58")

# SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock past our busy timeout.
SQLITE_LOCK_CODES = frozenset({5, 6})
# lock_not_available (a lock_timeout), serialization_failure, deadlock_detected, query_canceled (a statement_timeout).
_LOCK_SQLSTATES = frozenset({"55P03", "40001", "40P01", "57014"})

# SQLite's primary codes that say the file or the machine cannot serve, not that the program is wrong:
# PERM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB (SQLITE_ERROR, "no such table", is left out).
_SQLITE_UNUSABLE = frozenset({3, 8, 10, 11, 13, 14, 26})
# PostgreSQL: connection exceptions, insufficient privilege, resources, operator intervention, system errors.
_SQLSTATE_UNUSABLE = ("08", "42501", "53", "57P", "58")


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it, outermost first (each link once)."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def disk_problem(error: BaseException) -> str | None:
    """One line saying what failed, when `error` (or what caused it) is a full or failing disk."""
    for link in causes(error):
        if _is_disk(link):
            return " ".join(str(link).split()) or type(link).__name__
    return None


def _is_disk(error: BaseException) -> bool:
    if isinstance(error, OSError) and error.errno in _ERRNOS:
        return True
    code = _sqlite_code(error)
    if code is not None:
        return code in _SQLITE_CODES
    sqlstate = _sqlstate(error)
    return sqlstate is not None and sqlstate.startswith(_SQLSTATE_CLASSES)


def is_lock_timeout(error: BaseException) -> bool:
    """Whether `error` says another writer held a lock past our timeout (worth deciding again).

    The driver's code decides when the error carries one; an error made without a driver error
    (eventsourcing's own) has only its text."""
    for link in causes(error):
        code = _sqlite_code(link)
        if code is not None:
            return code in SQLITE_LOCK_CODES
        sqlstate = _sqlstate(link)
        if sqlstate is not None:
            return sqlstate in _LOCK_SQLSTATES
    return _lock_text(str(error))


def _lock_text(text: str) -> bool:
    return "locked" in text or "timeout" in text


def missing_table(error: BaseException) -> bool:
    """Whether `error` says a table (or its schema) does not exist (a log made before that table was added).

    PostgreSQL says so with a code (undefined_table); SQLite's SQLITE_ERROR covers every SQL error,
    so its text tells this one from the others."""
    for link in causes(error):
        sqlstate = _sqlstate(link)
        if sqlstate is not None:
            return sqlstate in ("42P01", "3F000")  # undefined_table, invalid_schema_name
        code = _sqlite_code(link)
        if code is not None:
            return code == 1 and "no such table" in str(link)
    return False


def not_utf8(error: BaseException) -> str | None:
    """The column named, when `error` (or what caused it) is Python's sqlite3 failing to read stored text as
    UTF-8: SQLite keeps any bytes as text, so only a hand edit leaves such a row. The module raises it with no
    SQLite code, so its text tells this one from the others."""
    for link in causes(error):
        if isinstance(link, sqlite3.OperationalError) and _sqlite_code(link) is None:
            head, _, rest = str(link).partition("Could not decode to UTF-8 column ")
            if not head and rest:
                return rest.split(" with text ")[0].strip("'")
    return None


def unusable_store(error: BaseException) -> bool:
    """Whether `error` is the operating system or a database driver saying the home or the store
    cannot be used (a file where a directory should be, no permission, a corrupt or unreachable
    database); an error of the program itself is not."""
    if isinstance(error, OSError):
        return True
    for link in causes(error):
        code = _sqlite_code(link)
        if code is not None:
            return code in _SQLITE_UNUSABLE
        sqlstate = _sqlstate(link)
        if sqlstate is not None:
            return sqlstate.startswith(_SQLSTATE_UNUSABLE)
        if type(link).__module__.startswith(("psycopg", "psycopg_pool")) and type(link).__name__ in (
            "OperationalError",
            "PoolTimeout",
        ):
            return True  # a connection lost or never made: psycopg gives no code for it
    return False


def _sqlite_code(error: BaseException) -> int | None:
    code = getattr(error, "sqlite_errorcode", None) if isinstance(error, sqlite3.Error) else None
    return code & 0xFF if isinstance(code, int) else None


def _sqlstate(error: BaseException) -> str | None:
    sqlstate = getattr(error, "sqlstate", None)
    return sqlstate if isinstance(sqlstate, str) else None
