"""Twin controllers: the long-running controllers of one home (one claimant, one runtime) split the claims.

Each holds an exclusive lock on one file of runtime/controllers/ for as long as it runs; the
locks held tell each how many run and which rank it has among them. A lock ends with its
process, so a twin that died simply stops counting. Splitting is only an economy: every claim
is still decided on the log, and a twin's share is taken over once it has waited too long.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from adapters.home import private_dir

SLOTS = 64
RECOUNT_S = 0.05


class Twins:
    def __init__(self, folder: Path) -> None:
        private_dir(folder)
        self._folder = folder
        self._fd: int | None = None
        self.slot: int | None = None
        for slot in range(SLOTS):
            fd = os.open(self._path(slot), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._fd, self.slot = fd, slot
            break
        self._share = (0, 1)
        self._counted = float("-inf")

    def _path(self, slot: int) -> Path:
        return self._folder / f"{slot}.lock"

    def share(self) -> tuple[int, int]:
        """(rank, count): this controller's rank among the running twins, and how many run."""
        if self.slot is None:
            return 0, 1  # no slot left: take part in everything
        if time.monotonic() - self._counted >= RECOUNT_S:
            slots = sorted(int(name[: -len(".lock")]) for name in os.listdir(self._folder) if _is_slot(name))
            held = [slot for slot in slots if slot == self.slot or self._held(slot)]
            self._share = (held.index(self.slot), len(held))
            self._counted = time.monotonic()
        return self._share

    def _held(self, slot: int) -> bool:
        try:
            fd = os.open(self._path(slot), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing it drops the shared lock taken just now
        return False

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd, self.slot = None, None


def _is_slot(name: str) -> bool:
    stem, dot, ext = name.partition(".")
    return dot == "." and ext == "lock" and stem.isdigit() and int(stem) < SLOTS
