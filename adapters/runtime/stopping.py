"""Ending deployers of the local runtime: stop and delete, and finishing a stop whose stopper died."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from . import procs, table
from .port import NoSuchDeployer
from .shim import utc_now

ACTIVE = ("created", "running")
SHIM_EXIT_MARGIN = 5.0


class Stopping(ABC):
    """The part of LocalRuntime that ends deployers (state first, then the kill, then ended_at).

    A stop marks the row first: a shim that starts after that runs nothing; the stop deadline
    lets any controller finish the kill of a stopper that died in its grace."""

    _lock: threading.RLock

    @abstractmethod
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]: ...

    @abstractmethod
    def _execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor: ...

    @abstractmethod
    def _reap(self) -> None: ...

    @staticmethod
    def _kill_remains(row: sqlite3.Row) -> bool:
        """With its shim dead: kill the deployer's group and whatever is left in the shim's session."""
        if row["pgid"] is not None and not procs.kill_group_and_wait(row["pgid"], row["start_time"], grace=0):
            return False
        return procs.kill_session_and_wait(row["shim_pid"], row["shim_start"])

    def _finish_stop(self, row: sqlite3.Row) -> None:
        """Set ended_at of a stopped or deleted deployer once nothing of it runs.

        Its stopper sets it itself after the kill; if the stopper died in its grace
        (or hangs), whoever observes past the deadline kills the group and the shim.
        """
        shim_alive = procs.is_alive(row["shim_pid"], row["shim_start"])
        if row["stop_deadline"] is None or time.time() > row["stop_deadline"]:
            if shim_alive:
                os.kill(row["shim_pid"], signal.SIGKILL)
                if not self._wait_shim(row, SHIM_EXIT_MARGIN):
                    return
            if row["shim_pid"] is not None and not self._kill_remains(row):
                return
        elif shim_alive or (row["pgid"] is not None and procs.group_alive(row["pgid"], row["start_time"])):
            return
        self._execute(table.ENDED, (utc_now(), row["name"]))

    def stop(self, name: str, *, reason: str, grace: float = 5.0) -> None:
        """End a created or running deployer: state 'stopped', then its group is killed."""
        row = self._end(name, "stopped", reason, ACTIVE, grace)
        if row is not None:
            self._terminate(row, grace)

    def delete(self, name: str) -> None:
        """What a user deleting a pod does; the row stays as a tombstone in state 'deleted'."""
        states = ("created", "running", "exited", "stopped", "lost")
        row = self._end(name, "deleted", "deleted by user", states, grace=5.0)
        if row is not None:
            self._terminate(row, grace=5.0)

    def _end(
        self,
        name: str,
        state: str,
        reason: str,
        from_states: tuple[str, ...],
        grace: float,
    ) -> sqlite3.Row | None:
        """Move the row to `state`; the row as it was before, or None if it was not in from_states.

        The stop deadline says when others may finish the kill if this process has not.
        """
        with self._tx() as db:
            row = db.execute("SELECT * FROM deployers WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NoSuchDeployer(name)
            if row["state"] not in from_states:
                return None
            sql = "UPDATE deployers SET state = ?, reason = ?, stop_deadline = ? WHERE name = ?"
            db.execute(sql, (state, reason, time.time() + grace + 2 * SHIM_EXIT_MARGIN, name))
            return row

    def _terminate(self, row: sqlite3.Row, grace: float) -> None:
        gone = True
        if row["pgid"] is not None:
            gone = procs.kill_group_and_wait(row["pgid"], row["start_time"], grace=grace)
        if row["shim_pid"] is not None:  # a shim between spawn and 'running' kills its child itself
            gone = self._wait_shim(row, grace + SHIM_EXIT_MARGIN) and gone
        if gone:
            self._execute(table.ENDED, (utc_now(), row["name"]))

    def _wait_shim(self, row: sqlite3.Row, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while procs.is_alive(row["shim_pid"], row["shim_start"]):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        self._reap()
        return True
