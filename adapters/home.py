"""The home directory: its layout, its privacy, and the lock that initialises it once."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Home:
    """`--home DIR`: events.db, projections/ and runtime/, all private to the user."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).absolute()

    @property
    def events_db(self) -> Path:
        return self.path / "events.db"

    @property
    def projections(self) -> Path:
        return self.path / "projections"

    @property
    def runtime(self) -> Path:
        return self.path / "runtime"

    def ensure(self) -> Home:
        for folder in (self.path, self.projections, self.runtime):
            private_dir(folder)
        return self

    @contextmanager
    def init_lock(self) -> Iterator[None]:
        """Serialise first-time setup: concurrent opens of a new SQLite file fail at once."""
        self.ensure()
        fd = os.open(self.runtime / "init.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if missing (SQLite copies it to -wal and -shm).

    An existing file is never opened here: closing a descriptor of a database file would
    drop the POSIX locks this process's SQLite connections hold on it.
    """
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
