"""The home directory: its layout, its privacy, and the lock that initialises it once."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..domain.errors import StoreProblem

DEFAULT_HOME = ".rollouts"  # --home when neither it nor ROLLOUTS_HOME is given


class HomeNotOurs(StoreProblem):
    """The home, or a folder of it, belongs to another account (the CLI exits 5)."""


class HomeNotADirectory(StoreProblem):
    """`--home` names a file (/dev/null), or a path under one (the CLI exits 5)."""


class HomeReadOnly(StoreProblem):
    """A command that writes, on a home this account cannot write (the CLI exits 5)."""


class Home:
    """`--home DIR`: events.db, projections/ and runtime/, all private to the user.

    A home this creates is 0700. An existing directory keeps its mode and owner (a shared
    1777 folder stays one): `warn` is told when group or others may write it. A home, or a folder
    of it, that another account owns is refused (HomeNotOurs): its owner could put a link where a
    file of the home goes, and this account would write, or show, what it points to."""

    def __init__(self, path: str | os.PathLike[str], warn: Callable[[str], None] | None = None) -> None:
        self.path = Path(path).absolute()
        self.warn = warn
        self._checked = False

    @property
    def events_db(self) -> Path:
        return self.path / "events.db"

    @property
    def projections(self) -> Path:
        return self.path / "projections"

    @property
    def runtime(self) -> Path:
        return self.path / "runtime"

    @property
    def runtime_db(self) -> Path:
        """The local runtime's table of deployers."""
        return self.runtime / "runtime.db"

    def ensure(self) -> Home:
        if not self._checked:
            ours(self.path, follow=True)  # (the path given may be a link: where it leads is the home)
        for folder in (self.path, self.projections, self.runtime):
            private_dir(folder)
        if self._checked:
            return self
        for folder in (self.projections, self.runtime, self.runtime / "logs"):
            ours(folder, follow=False)
        self._checked = True
        if self.warn:
            mode = self.path.stat().st_mode
            if mode & 0o022:
                self.warn(
                    f"home {self.path} may be written by group or others (mode {mode & 0o7777:o}):"
                    " anyone who can write it can change what runs; use a private directory"
                )
        return self

    def usable(self) -> bool:
        """Whether the home is a directory or may become one (not a file, a device, or under one) and is this
        account's, as far as can be told without creating anything: else opening it says why (HomeNotADirectory,
        HomeNotOurs)."""
        there = next((p for p in (self.path, *self.path.parents) if p.exists()), None)
        if there is not None and not there.is_dir():
            return False
        try:  # another account's home (or a folder of it) is refused first, whatever the command (ensure)
            ours(self.path, follow=True)
            for folder in (self.projections, self.runtime, self.runtime / "logs"):
                ours(folder, follow=False)
        except HomeNotOurs:
            return False
        return True

    def writable(self) -> bool:
        """Whether this account may write the home and what it holds: not on a read-only mount or an
        auditor's copy made read-only (a read there answers from a copy: DESIGN 7.11)."""
        return all(
            os.access(p, os.W_OK) for p in (self.path, self.projections, self.runtime, self.events_db) if p.exists()
        )

    def copy_for_reading(self, into: Home) -> None:
        """Copy the log (the SQLite file and its write-ahead log, when the home holds it) and the binding
        into `into`, a private home of a read's own, for a home that cannot be written."""
        into.ensure()
        for source, target in (
            (self.events_db, into.events_db),
            (self.path / "events.db-wal", into.path / "events.db-wal"),
            (self.runtime / "binding.json", into.runtime / "binding.json"),
        ):
            if source.exists():
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out, source.open("rb") as original:
                    shutil.copyfileobj(original, out)

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


def ours(path: Path, follow: bool) -> None:
    """HomeNotOurs unless `path` (when there: a link, where it leads) and, unless `follow`, the link
    itself belong to this process's account."""
    me = os.geteuid()
    try:
        found = [os.stat(path)] if follow else [os.lstat(path), os.stat(path)]
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (private_dir says if nothing can be)
        return
    for st in found:
        if st.st_uid != me:
            raise HomeNotOurs(
                f"{path} belongs to uid {st.st_uid}, not to this account (uid {me}): its owner could link"
                " the home's files anywhere; run rollouts as that account"
            )


def private_dir(path: Path) -> None:
    """Create `path` 0700 when missing; an existing directory's mode and owner are left as they are."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file is there, or on the way there
        raise HomeNotADirectory(f"{path} is not a directory and cannot be made one: give --home a directory") from None
    except FileNotFoundError:  # a folder that refuses new entries (/proc/1): said in words, not as a type
        raise HomeNotADirectory(
            f"{path} cannot be made (no such file or directory there): give --home a directory this account can create"
        ) from None


def private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if missing (SQLite copies it to -wal and -shm).

    An existing file is never opened here: closing a descriptor of a database file would
    drop the POSIX locks this process's SQLite connections hold on it.
    """
    ours(path, follow=False)  # a link this account made may lead elsewhere; one another made, not
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
