"""Real SQLite errors of broken files, for tests of what a build or a read does on meeting one."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def not_a_database_error(folder: Path) -> sqlite3.DatabaseError:
    """The error SQLite raises on a file of random bytes (as bytes written over a view give)."""
    junk = folder / "junk.db"
    junk.write_bytes(bytes(range(256)) * 16)
    conn = sqlite3.connect(junk)
    try:
        conn.execute("SELECT * FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as error:
        return error
    finally:
        conn.close()
    raise AssertionError("SQLite read random bytes as a database")
