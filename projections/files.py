"""Projection files on disk: the catalog of current files, private SQLite connections, tracking."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..domain.errors import StoreProblem
from .file_checks import file_problem, is_broken

if TYPE_CHECKING:
    import sqlite_utils


TRACKING = "CREATE TABLE IF NOT EXISTS tracking (name TEXT PRIMARY KEY, version INTEGER, position INTEGER, log_id TEXT)"
BUSY_TIMEOUT_S = 120.0
# A new file's page cache while it is filled (negative: in KiB). 256 MiB made a rebuild's and an audit's memory
# grow with the log up to that size a file (the audit view's ~530 bytes an event, the history's ~105): at 64 MiB,
# full by ~120k and ~600k events, peak RSS at 2M events is 1.1-1.2x of 1M's (bench/performance/growth.py).
BUILD_CACHE_KIB = -64 * 1024
SORT_CACHE_KIB = -2000  # SQLite's default (see for_sorting)
SQLITE_FULL = 13  # the primary result code of "database or disk is full"
BUILD_LOCK = "build.lock"  # lock 2's file (see projections.locks): never a view, never removed

_builds_held: dict[tuple[Path, int], int] = {}  # (folder, thread) holding a build lock, and how deep


class CatalogLost(StoreProblem):
    """A build of this thread found its catalog replaced, or unreadable while it holds the build
    lock (replacing it then would remove the build's own files): the build lets go and starts again."""


@dataclass(frozen=True)
class Tracked:
    version: int
    position: int
    log_id: str


def connect(path: Path, page_size: int = 4096) -> sqlite_utils.Database:
    """A private file in WAL mode, autocommit so that transactions are explicit (`page_size`: if it is new)."""
    if not path.exists():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA page_size={int(page_size)}")  # before anything is written, or it changes nothing
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # No sqlite-utils plugins: loading them scans every installed package's entry points
    # (importlib.metadata), paid by every read command, for functions no projection uses.
    import sqlite_utils  # start-up cost: only where a view is opened

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
        if db.conn.in_transaction:  # SQLite ends it itself on some errors (a full disk, a corrupt file)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def snapshot(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A read transaction: every read inside sees the file as one commit left it (WAL: no writer waits)."""
    db.execute("BEGIN")
    try:
        yield db
    finally:
        if db.conn.in_transaction:
            db.execute("COMMIT")


def create_unjournaled(path: Path, page_size: int) -> sqlite_utils.Database:
    """A new file to fill from zero before anyone may open it: no journal, no syncs, a big cache.

    A crash leaves a broken file, but nobody reads it: the catalog points to it only after
    `seal`. The connection takes URI names (to attach the log read-only)."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    conn = sqlite3.connect(
        path.resolve().as_uri(), uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    pragmas = (f"page_size={int(page_size)}", "journal_mode=OFF", "synchronous=OFF", f"cache_size={BUILD_CACHE_KIB}")
    for pragma in (*pragmas, "temp_store=FILE"):  # (temp files: where the index sorts spill, see for_sorting)
        conn.execute(f"PRAGMA {pragma}")
    import sqlite_utils  # start-up cost: only where a view is opened

    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.execute(TRACKING)
    return db


def for_sorting(db: sqlite_utils.Database) -> None:
    """Set `db` (made by `create_unjournaled`, its rows in) to build its indexes with SQLite's default page
    cache. With the big cache that fills a file (256 MiB then), and the in-memory temp store it had, the audit
    view's four indexes at 1M events took 4.4 s of CPU; with the default cache and the sorter spilling to
    temp files, 1.9-2.1 s. The sorts need room in SQLite's temp folder (SQLITE_TMPDIR, TMPDIR, else
    /var/tmp or /tmp): tens of MB at 1M events; without it a rebuild fails as on a full disk."""
    db.execute(f"PRAGMA cache_size={SORT_CACHE_KIB}")


def make_indexes(db: sqlite_utils.Database, statements: list[str], name: str, path: Path) -> None:
    """Run `statements` (CREATE INDEX) on `db`, view `name`'s file at `path`, set for sorting. Where a sort
    finds no room, the error names both places it may have lacked: SQLite's temp folder and the file's."""
    if not statements:
        return
    for_sorting(db)
    try:
        for statement in statements:
            db.execute(statement)
    except sqlite3.Error as error:
        if (getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF != SQLITE_FULL:
            raise
        temp = sorting_folder()
        why = f"no room to sort the {name} view's indexes: in SQLite's temp folder {temp} or in {path.parent}"
        raise OSError(errno.ENOSPC, why) from error


def sorting_folder() -> str:
    """The folder SQLite's sorts spill to: the first writable one of SQLITE_TMPDIR, TMPDIR, /var/tmp,
    /usr/tmp and /tmp (its unix VFS's order), else the current folder."""
    for folder in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"):
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    return "."


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
    """Which file holds each projection now; swapping a row is the atomic shadow swap.

    A catalog that is not readable (random bytes, other columns) is a cache miss like any
    view: under the setup lock, then the build lock (no build is writing meanwhile), it is removed
    with every view file, and the views are rebuilt."""

    def __init__(self, folder: Path, warn: Callable[[str], None] | None = None) -> None:
        self.folder = folder
        self.path = folder / "catalog.db"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._resolved = folder.resolve()  # the build lock's key (see build_lock)
        # A thread holding lock 2 never waits for lock 1, nor removes the files it is building: its
        # build lets go and starts again (LiveFiles._again_if_broken).
        if self.holds_build_lock():
            raise CatalogLost(f"projections catalog {self.path} was lost during a build")
        with self.setup_lock():
            db, problem = self._open()
            if db is None:
                (warn or (lambda _: None))(
                    f"projections catalog {self.path} is not readable ({problem}): rebuilding the views"
                )
                # Under the build lock: no build of another process is writing one of these files.
                with self.build_lock():
                    for stale in folder.glob("*.db*"):
                        remove(stale)
                db, problem = self._open()
            if db is None:
                raise sqlite3.DatabaseError(f"cannot make a new projections catalog {self.path}: {problem}")
            self.db = db
            self._identity = identity(self.path)

    def _open(self) -> tuple[sqlite_utils.Database | None, str]:
        problem = file_problem(self.path)
        if problem:  # SQLite would take an empty file for a new database, and wait for every old reader to make it WAL
            return None, problem
        db = None
        try:
            db = connect(self.path)
            columns = [row[1] for row in db.execute("PRAGMA table_info(current)")]
            if not columns:
                db.execute("CREATE TABLE current (name TEXT PRIMARY KEY, file TEXT)")
            elif columns != ["name", "file"]:
                db.close()
                return None, "table current has other columns"
            return db, ""
        except sqlite3.DatabaseError as error:
            if db is not None:
                db.close()
            if not is_broken(error):
                raise
            return None, " ".join(str(error).split())

    def is_open_file(self) -> bool:
        """Whether the file at `path` is still the one this catalog opened (not replaced, not emptied)."""
        return identity(self.path) == self._identity and file_problem(self.path) is None

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

    @contextmanager
    def build_lock(self) -> Iterator[None]:
        """The first half of lock 2: `flock` on a file of its own, so that it outlives the catalog.

        The catalog's write transaction alone did not do: a process that finds the catalog
        corrupt makes a new one and removes every file of the folder, and a build holding the old
        catalog's lock went on writing a removed file. Whoever replaces the catalog takes this
        lock first. Taken again by the thread that holds it, it is held already (healing in a rebuild).
        The wait is bounded like SQLite's (`BUSY_TIMEOUT_S`)."""
        key = self._held_key()
        if key in _builds_held:
            _builds_held[key] += 1
            try:
                yield
            finally:
                _builds_held[key] -= 1
            return
        fd = self._lock_build_file(time.monotonic() + BUSY_TIMEOUT_S)
        try:
            _builds_held[key] = 1
            try:
                yield
            finally:
                del _builds_held[key]
        finally:
            os.close(fd)

    def _lock_build_file(self, deadline: float) -> int:
        """A descriptor of `build.lock` holding its flock, the file still at its name once locked
        (one removed meanwhile, by old projections put back say, would lock nobody out)."""
        path = self.folder / BUILD_LOCK
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path} held elsewhere for {BUSY_TIMEOUT_S:.0f} s") from None
                time.sleep(0.01)
                continue
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == identity(path):
                return fd
            os.close(fd)

    def holds_build_lock(self) -> bool:
        """Whether this thread holds the build lock of the folder (see `build_lock`)."""
        return self._held_key() in _builds_held

    def _held_key(self) -> tuple[Path, int]:
        return self._resolved, threading.get_ident()

    def current(self, name: str) -> Path | None:
        row = self.db.execute("SELECT file FROM current WHERE name = ?", (name,)).fetchone()
        if not row or not isinstance(row[0], str) or not re.fullmatch(rf"{re.escape(name)}-\d+\.db", row[0]):
            return None  # nothing, or not a file of ours: a cache miss
        return self.folder / row[0]

    def point(self, name: str, file: Path) -> None:
        self.db.execute("INSERT OR REPLACE INTO current (name, file) VALUES (?, ?)", (name, file.name))

    def next_file(self, name: str) -> Path:
        """A name no file has had (side files of a removed one included: SQLite would read a stray -wal)."""
        numbered = re.compile(rf"{re.escape(name)}-(\d+)\.db(?:-wal|-shm)?")
        existing = [int(m[1]) for p in self.folder.glob(f"{name}-*.db*") if (m := numbered.fullmatch(p.name))]
        return self.folder / f"{name}-{max(existing, default=0) + 1}.db"

    def remove_strays(self, name: str, keep: set[Path]) -> None:
        """Delete files of `name` that the catalog does not point to (old or abandoned shadows)."""
        for path in self.folder.glob(f"{name}-*.db*"):
            if Path(str(path).removesuffix("-wal").removesuffix("-shm")) not in keep:
                remove(path)


def remove(path: Path) -> None:
    """Delete the file at `path`: a link itself, not what it leads to; a directory put where a file was, whole."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def identity(path: Path) -> tuple[int, int] | None:
    """Which file `path` names now (device, inode), None when there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
