"""Twin controllers: the controllers of one home (one claimant, one runtime) that run until stopped.

One leads and does all the work; the others stand by, and one of them leads as soon as the
leader's process ends, however it ends: leading is an exclusive lock on runtime/controllers/
leader.lock, which ends with its process. Each twin also holds a lock on one slot file of that
folder while it runs, so anyone can count them. On a machine's two cores, a second controller
working beside the first only slowed both down (the log and the projections have one writer at a
time); every decision is still made on the log, whatever runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..home import private_dir

SLOTS = 64
LEADER = "leader.lock"


class Twins:
    def __init__(self, folder: Path) -> None:
        private_dir(folder)
        self._folder = folder
        self._slot: int | None = None  # no slot left: this twin is not counted
        self._slot_fd: int | None = None
        self._leader: int | None = None
        for slot in range(SLOTS):
            fd = _locked(self._path(slot))
            if fd is not None:
                self._slot, self._slot_fd = slot, fd
                break

    def _path(self, slot: int) -> Path:
        return self._folder / f"{slot}.lock"

    def lead(self) -> bool:
        """Whether this twin leads (from now until it closes), if no other does."""
        if self._leader is None:
            self._leader = _locked(self._folder / LEADER)
        return self._leader is not None

    def running(self) -> int:
        """How many twins run now, this one included."""
        return running(self._folder, self._slot)

    def close(self) -> None:
        for fd in (self._leader, self._slot_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._leader = self._slot = self._slot_fd = None


def running(folder: Path, mine: int | None = None) -> int:
    """How many twins hold a slot of `folder` now (the slot `mine` is this process's own)."""
    count = 0
    for name in os.listdir(folder) if folder.is_dir() else []:
        stem, _, ext = name.partition(".")
        if ext == "lock" and stem.isdigit() and (int(stem) == mine or _held(folder / name)):
            count += 1
    return count


def _locked(path: Path) -> int | None:
    """An open descriptor of `path` holding its exclusive lock, or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _held(path: Path) -> bool:
    """Whether a running twin holds `path` (trying a shared lock drops it at once on close)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
