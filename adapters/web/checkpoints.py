"""Checkpoints of the views' write-ahead logs for `rollouts serve`, by a thread of their own, off the requests' path.

A connection that commits checkpoints its file's WAL itself once it has grown past SQLite's 1,000
pages, within that commit: a scrape that caught the history view up by one event then also copied
and synced some 4 MB (at 1M events and 1,000 configs: /metrics after an event took 150 ms instead
of 2 ms, once every few dozen scrapes). The server's connections leave that to this thread: after
a request, the files whose WAL holds as many pages not yet copied back are checkpointed (PASSIVE:
waiting for no reader nor writer) by connections of the thread's own.

Not the WAL file's size: a checkpoint leaves the file as long as it was (the next writer starts over
at its beginning), so once past 4 MB its size said "due" after nearly every request, and a thread
checkpointed (and synced) 146 times in 200 scrapes at 1M events. The pages not yet copied are the
WAL index's: its header's last frame (mxFrame) less the frames the last checkpoint copied (nBackfill),
read from the `-shm` file SQLite keeps beside the WAL (https://sqlite.org/walformat.html)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

WAL_PAGES = 1000  # SQLite's own point to checkpoint at: 1,000 pages not yet copied back
WAL_BYTES = WAL_PAGES * 4096  # as many pages of 4 KiB
MX_FRAME, N_BACKFILL = 16, 96  # offsets in the WAL index (-shm): the header's mxFrame, the checkpoint's nBackfill


class Checkpoints:
    """At most one thread at a time checkpointing the files it was given."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def after(self, paths: Iterable[Path]) -> None:
        """Checkpoint those of `paths` whose WAL holds WAL_PAGES not yet copied back (unless one still runs)."""
        if self._thread is not None and self._thread.is_alive():
            return
        due = [path for path in paths if wal_pages(path) >= WAL_PAGES]
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


def wal_pages(path: Path) -> int:
    """The pages in `path`'s WAL that no checkpoint has copied back yet (0: no WAL). Without its index
    (`-shm`: a database opened with exclusive locking keeps it in memory), the WAL's pages, copied or not."""
    try:
        with open(f"{path}-shm", "rb") as shm:
            index = shm.read(N_BACKFILL + 4)
    except FileNotFoundError:
        return wal_bytes(path) // 4096
    except OSError:
        return 0
    if len(index) < N_BACKFILL + 4:
        return 0
    (last,) = struct.unpack_from("=I", index, MX_FRAME)  # the index is in the machine's byte order
    (copied,) = struct.unpack_from("=I", index, N_BACKFILL)
    return max(0, last - copied)


def checkpoint(paths: Iterable[Path]) -> None:
    """A PASSIVE checkpoint of each file (one that went meanwhile, swapped out by a rebuild, is left)."""
    for path in paths:
        with contextlib.suppress(sqlite3.Error, OSError):
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=1.0)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()
