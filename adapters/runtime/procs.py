"""Process liveness and process-group termination read from /proc, guarded against pid reuse."""

from __future__ import annotations

import contextlib
import os
import signal
import time

# Indices into the fields that follow the ")" closing comm (field 2) in /proc/PID/stat.
_STATE = 0  # field 3
_PGRP = 2  # field 5
_STARTTIME = 19  # field 22, clock ticks since boot
_DEAD = ("Z", "X")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].decode().split()


def start_time_of(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if there is no such pid."""
    fields = _stat(pid)
    return None if fields is None else int(fields[_STARTTIME])


def is_alive(pid: int | None, start_time: int | None) -> bool:
    """True if pid runs, is not a zombie, and is the same process that started at start_time."""
    if pid is None or start_time is None:
        return False
    fields = _stat(pid)
    return fields is not None and fields[_STATE] not in _DEAD and int(fields[_STARTTIME]) == start_time


def _group_is_ours(pgid: int, leader_start: int | None) -> bool:
    # A pid is never reused while its group exists, so another process holding
    # the leader's pid means our group is gone and the pgid belongs to someone else.
    fields = _stat(pgid)
    return fields is None or leader_start is None or int(fields[_STARTTIME]) == leader_start


def _only_zombies(pgid: int) -> bool:
    # Orphaned zombies stay until their new parent reaps them (some PID 1s never do).
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields and int(fields[_PGRP]) == pgid and fields[_STATE] not in _DEAD:
            return False
    return True


def group_gone(pgid: int) -> bool:
    """True when no live (non-zombie) process is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _only_zombies(pgid)


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not group_gone(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return True


def signal_group(pgid: int, sig: int) -> None:
    """Send sig to the group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def kill_group_and_wait(pgid: int, leader_start: int | None, *, grace: float = 5.0, timeout: float = 5.0) -> bool:
    """SIGTERM the group, SIGKILL it after grace (at once if grace is 0); True once it is gone."""
    if not _group_is_ours(pgid, leader_start):
        return True
    if grace > 0:
        signal_group(pgid, signal.SIGTERM)
        if _wait_group_gone(pgid, grace):
            return True
    signal_group(pgid, signal.SIGKILL)
    return _wait_group_gone(pgid, timeout)


def group_alive(pgid: int, leader_start: int | None) -> bool:
    """True while a live process is left in the group whose leader started at leader_start."""
    return _group_is_ours(pgid, leader_start) and not group_gone(pgid)


_SESSION = 3  # field 6


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields and int(fields[_SESSION]) == sid and fields[_STATE] not in _DEAD:
            members.append(int(entry))
    return members


def kill_session_and_wait(sid: int, leader_start: int | None, *, timeout: float = 5.0) -> bool:
    """SIGKILL every process of the session whose leader started at leader_start; True once none is left.

    A dead shim's deployer may not have a recorded group yet, and its children may have
    left the group: the shim's session holds them all. The pid of a session's leader is
    not reused while the session has members, so a different process with that pid means
    the session is gone.
    """
    if not _group_is_ours(sid, leader_start):
        return True
    deadline = time.monotonic() + timeout
    while members := _session_members(sid):
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
