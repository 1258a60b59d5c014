"""Projection files on disk: the catalog of current files, private SQLite connections, tracking."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

TRACKING = "CREATE TABLE IF NOT EXISTS tracking (name TEXT PRIMARY KEY, version INTEGER, position INTEGER, log_id TEXT)"
BUSY_TIMEOUT_S = 120.0
BUILD_CACHE_KIB = -256 * 1024  # negative: in KiB


@dataclass(frozen=True)
class Tracked:
    version: int
    position: int
    log_id: str


def connect(path: Path) -> sqlite_utils.Database:
    """A private file in WAL mode, autocommit so that transactions are explicit."""
    if not path.exists():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # No sqlite-utils plugins: loading them scans every installed package's entry points
    # (importlib.metadata), paid by every read command, for functions no projection uses.
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.execute(TRACKING)
    return db


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A read-then-write transaction: BEGIN IMMEDIATE, so it never fails on a stale snapshot."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def create_unjournaled(path: Path) -> sqlite_utils.Database:
    """A new file to fill from zero before anyone may open it: no journal, no syncs, a big cache.

    A crash leaves a broken file, but nobody reads it: the catalog points to it only after
    `seal`. The connection takes URI names (to attach the log read-only)."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    conn = sqlite3.connect(
        path.resolve().as_uri(), uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size={BUILD_CACHE_KIB}", "temp_store=MEMORY"):
        conn.execute(f"PRAGMA {pragma}")
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.execute(TRACKING)
    return db


def seal(db: sqlite_utils.Database, path: Path) -> None:
    """Make a file filled by `create_unjournaled` like every other (WAL), on disk, then close it."""
    db.execute("PRAGMA main.journal_mode=WAL")
    db.close()
    for name in (path, path.parent):  # the file, and its name in the folder
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def tracked(db: sqlite_utils.Database, name: str) -> Tracked | None:
    row = db.execute("SELECT version, position, log_id FROM tracking WHERE name = ?", (name,)).fetchone()
    return Tracked(*row) if row else None


def track(db: sqlite_utils.Database, name: str, at: Tracked) -> None:
    db.execute(
        "INSERT OR REPLACE INTO tracking (name, version, position, log_id) VALUES (?, ?, ?, ?)",
        (name, at.version, at.position, at.log_id),
    )


class Catalog:
    """Which file holds each projection now; swapping a row is the atomic shadow swap."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self.setup_lock():
            self.path = folder / "catalog.db"
            self.db = connect(self.path)
            if not self.db["current"].exists():
                self.db.execute("CREATE TABLE current (name TEXT PRIMARY KEY, file TEXT)")

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        """New SQLite files opened by several processes at once fail: set them up one at a time.

        The lock is on the folder: closing a descriptor of a database file would drop
        SQLite's own POSIX locks on it, held by this process's open connections.
        """
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def current(self, name: str) -> Path | None:
        row = self.db.execute("SELECT file FROM current WHERE name = ?", (name,)).fetchone()
        return self.folder / row[0] if row else None

    def point(self, name: str, file: Path) -> None:
        self.db.execute("INSERT OR REPLACE INTO current (name, file) VALUES (?, ?)", (name, file.name))

    def next_file(self, name: str) -> Path:
        existing = [int(p.stem.rsplit("-", 1)[1]) for p in self.folder.glob(f"{name}-*.db")]
        return self.folder / f"{name}-{max(existing, default=0) + 1}.db"

    def remove_strays(self, name: str, keep: set[Path]) -> None:
        """Delete files of `name` that the catalog does not point to (old or abandoned shadows)."""
        for path in self.folder.glob(f"{name}-*.db*"):
            if Path(str(path).removesuffix("-wal").removesuffix("-shm")) not in keep:
                path.unlink(missing_ok=True)
