"""Waking the controller early: signs that the log or the runtime's table has changed.

On Linux, inotify reports every write to the SQLite files (the log's and the runtime's, their
write-ahead logs included) at no cost while nothing happens. Elsewhere, or if inotify cannot
be had, `PRAGMA data_version` is polled (it changes when another connection commits). A
PostgreSQL log has no file to watch: the controller LISTENs on the channel the library NOTIFYs in
every insert, so a new event wakes it at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import sqlite3
import struct
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..runtime.port import Runtime

if TYPE_CHECKING:
    from ..service.application import RolloutsApp

FASTEST_S = 0.002  # polling: the shortest period between two looks
GATHER_S = 0.005  # after a change, how long to let what comes with it land (a burst: one pass, one append)
STOPPING_S = 0.1  # inotify: how often to look at the stopping flag while nothing happens
_IN_MODIFY = 0x2
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name


class Watch:
    """Changes to the log and to the runtime's table since mark(), as cheaply as can be told."""

    def __init__(self, app: RolloutsApp, runtime: Runtime, interval: float) -> None:
        self._runtime = runtime
        logs = app.recorder.watched_files()
        self._files = _Inotify.of([runtime.database, *logs])
        self._log = _connect(logs[0]) if logs and self._files is None else None
        self._listener = app.recorder.listener()
        self.every = min(interval, max(FASTEST_S, interval / 10))
        self._mark: tuple[int, int] = (0, 0)

    def version(self) -> tuple[int, int]:
        """(log, runtime) data_version: each changes when another connection commits."""
        log = self._log.execute("PRAGMA data_version").fetchone()[0] if self._log is not None else 0
        return log, self._runtime.data_version()

    def mark(self) -> None:
        """Forget what changed before now (a pass is about to read the state)."""
        if self._listener is not None:
            # Notifications sent before now, the controller's own appends of its last pass among
            # them: the pass sees what they announce. Left queued, each woke the next wait for a pass
            # with nothing to do, and such passes make the loop heed changes later and later
            # (up to --interval), the next trigger's included.
            try:
                self._listener.changed()
            except Exception:  # noqa: BLE001 - a lost connection: the wait polls at the interval, as before
                self._listener.close()
                self._listener = None
        with contextlib.suppress(sqlite3.Error, OSError):
            if self._files is not None:
                self._files.changed()
            else:
                self._mark = self.version()

    def wait(self, stopping: threading.Event, seconds: float, settle: float = 0.0) -> bool:
        """Wait `seconds`, less once the log or the runtime changed since mark() (GATHER_S after the
        change, and `settle` seconds at least), or until stopping is set. True when a change ended it."""
        began = time.monotonic()
        deadline = began + seconds
        changed = False
        try:
            while (left := deadline - time.monotonic()) > 0:
                nap = max(0.0, began + settle - time.monotonic()) if changed else self._nap()
                if self._sleep(stopping, min(left, nap)):
                    return False
                if not changed and self._changed():
                    changed = True
                    settle = max(settle, time.monotonic() - began + GATHER_S)
                if changed and time.monotonic() - began >= settle:
                    return True
        except (sqlite3.Error, OSError):
            return True  # the next pass meets the same trouble and handles it
        return False

    def _nap(self) -> float:
        return STOPPING_S if self._files is not None else self.every

    def _sleep(self, stopping: threading.Event, seconds: float) -> bool:
        """Sleep (until a file changes, with inotify, or the log's channel is notified); True if stopping is set."""
        fds = [w.fd for w in (self._files, self._listener) if w is not None]
        if not fds:
            return stopping.wait(seconds)
        if seconds > 0:
            select.select(fds, [], [], min(seconds, STOPPING_S) if self._files is None else seconds)
        return stopping.is_set()

    def _changed(self) -> bool:
        heard = False
        if self._listener is not None:
            try:
                heard = self._listener.changed()
            except Exception:  # noqa: BLE001 - a lost connection: poll at the interval from now on, as before
                self._listener.close()
                self._listener, heard = None, True
        if self._files is not None:
            return self._files.changed() or heard
        return self.version() != self._mark or heard

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._log is not None:
            self._log.close()
        if self._files is not None:
            self._files.close()


class _Inotify:
    """Writes to some files, told by Linux inotify on their folders (a database's -wal file comes
    and goes, its folder stays)."""

    def __init__(self, fd: int, names: set[bytes]) -> None:
        self.fd = fd
        self._names = names

    @classmethod
    def of(cls, databases: list[Path]) -> _Inotify | None:
        """Watch these SQLite files and their -wal files; None where inotify cannot be had."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        for folder in {db.parent for db in databases}:
            if libc.inotify_add_watch(fd, os.fsencode(folder), _IN_MODIFY) < 0:
                os.close(fd)
                return None
        names = {os.fsencode(db.name + suffix) for db in databases for suffix in ("", "-wal")}
        return cls(fd, names)

    def changed(self) -> bool:
        """Whether one of the files was written to since the last call."""
        hit = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return hit
            offset = 0
            while offset < len(data):
                _, _, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                hit = hit or name in self._names
                offset += _EVENT.size + length

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _connect(path: Path) -> sqlite3.Connection | None:
    """A connection to the SQLite log that only reads its data_version."""
    with contextlib.suppress(sqlite3.Error):
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return None
