"""Checkpoints of the views' write-ahead logs for `rollouts serve`, by a thread of their own, off the requests' path.

A connection that commits checkpoints its file's WAL itself once it has grown past SQLite's 1,000
pages, within that commit: a scrape that caught the history view up by one event then also copied
and synced some 4 MB (at 1M events and 1,000 configs: /metrics after an event took 150 ms instead
of 2 ms, once every few dozen scrapes). The server's connections leave that to this thread: after
a request, the files whose WAL has grown past as much are checkpointed (PASSIVE: waiting for no
reader nor writer) by connections of the thread's own."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

WAL_BYTES = 1000 * 4096  # SQLite's own point to checkpoint at: 1,000 pages of 4 KiB


class Checkpoints:
    """At most one thread at a time checkpointing the files it was given."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def after(self, paths: Iterable[Path]) -> None:
        """Checkpoint those of `paths` whose WAL has grown past WAL_BYTES (unless a checkpoint still runs)."""
        if self._thread is not None and self._thread.is_alive():
            return
        due = [path for path in paths if wal_bytes(path) >= WAL_BYTES]
        if due:
            self._thread = threading.Thread(target=checkpoint, args=(due,), name="views-checkpoint", daemon=True)
            self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()


def wal_bytes(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except OSError:
        return 0


def checkpoint(paths: Iterable[Path]) -> None:
    """A PASSIVE checkpoint of each file (one that went meanwhile, swapped out by a rebuild, is left)."""
    for path in paths:
        with contextlib.suppress(sqlite3.Error, OSError):
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=1.0)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()
