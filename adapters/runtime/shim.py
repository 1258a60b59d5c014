"""Detached shim that runs one deployer, reaps it and records its fate in the runtime table."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import FrameType

if __package__:
    from adapters.runtime import procs
else:  # run as `python -I -S shim.py`: the stdlib and this folder only
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import procs

BUSY_TIMEOUT = 30.0
_PR_SET_PDEATHSIG = 1
_CANNOT_EXECUTE = 127
_FORWARDED = (signal.SIGTERM, signal.SIGINT)

_CLAIM = "UPDATE deployers SET shim_pid = ?, shim_start = ? WHERE name = ? AND state = 'created'"
_RUNNING = (
    "UPDATE deployers SET state = 'running', pid = ?, pgid = ?, start_time = ?, started_at = ?"
    " WHERE name = ? AND state = 'created'"
)
_UNEXECUTABLE = (
    "UPDATE deployers SET state = 'exited', exit_code = ?, reason = ?, ended_at = ?"
    " WHERE name = ? AND state = 'created'"
)
_EXITED = (
    "UPDATE deployers SET state = 'exited', exit_code = ?, reason = ?, ended_at = ?"
    " WHERE name = ? AND state = 'running'"
)
_LOST_HEARTBEAT = "UPDATE deployers SET state = 'lost', reason = ?, ended_at = ? WHERE name = ? AND state = 'running'"
# A deployer stopped or deleted by someone else keeps that state and reason; only its code is added.
_EXITED_AFTER_STOP = (
    "UPDATE deployers SET exit_code = ?, ended_at = COALESCE(ended_at, ?)"
    " WHERE name = ? AND exit_code IS NULL AND state IN ('stopped', 'deleted')"
)


def connect(path: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) with a long busy timeout."""
    db = sqlite3.connect(
        path,
        timeout=BUSY_TIMEOUT,
        isolation_level=None,
        check_same_thread=check_same_thread,
    )
    db.row_factory = sqlite3.Row
    return db


def utc_now() -> str:
    return datetime.now(UTC).isoformat()


def outcome(returncode: int) -> tuple[int, str | None]:
    """Exit code and reason as the runtime reports them: a death by signal n is 128+n."""
    if returncode >= 0:
        return returncode, None if returncode == 0 else f"exited with code {returncode}"
    number = -returncode
    try:
        label = signal.Signals(number).name
    except ValueError:
        label = f"SIG{number}"
    return 128 + number, f"killed by signal {number} ({label})"


def _claim(db: sqlite3.Connection, name: str) -> sqlite3.Row | None:
    """Record this shim on the row; None if the row is gone past 'created' (stopped first)."""
    me = os.getpid()
    db.execute("BEGIN IMMEDIATE")
    try:
        claimed = db.execute(_CLAIM, (me, procs.start_time_of(me), name)).rowcount == 1
        spec = db.execute("SELECT argv, env, cwd FROM deployers WHERE name = ?", (name,)).fetchone()
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return spec if claimed else None


class _Forwarder:
    """Passes SIGTERM and SIGINT on to the deployer's group, holding them until it exists."""

    def __init__(self) -> None:
        self.pgid: int | None = None
        self.pending: list[int] = []
        for sig in _FORWARDED:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.pgid is None:
            self.pending.append(signum)
        else:
            procs.signal_group(self.pgid, signum)

    def attach(self, pgid: int) -> None:
        self.pgid = pgid
        for signum in self.pending:
            procs.signal_group(pgid, signum)


def _child_setup(shim_pid: int) -> Callable[[], None]:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    catchable = sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})

    def setup() -> None:
        # SIG_IGN and the blocked mask survive exec: give the deployer a clean slate.
        for sig in catchable:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != shim_pid:  # the shim died before prctl took effect
            os._exit(128 + signal.SIGKILL)

    return setup


def _spawn(spec: sqlite3.Row) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        json.loads(spec["argv"]),
        env=json.loads(spec["env"]),
        cwd=spec["cwd"],
        stdin=subprocess.DEVNULL,
        process_group=0,
        preexec_fn=_child_setup(os.getpid()),  # safe here: the shim has a single thread
    )


def _record_unexecutable(db: sqlite3.Connection, name: str, exc: Exception) -> None:
    detail = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) else str(exc)
    reason = f"cannot execute: {detail}"
    print(f"rollouts shim: {name}: {reason}", file=sys.stderr, flush=True)
    db.execute(_UNEXECUTABLE, (_CANNOT_EXECUTE, reason, utc_now(), name))


def _record_running(db: sqlite3.Connection, name: str, child: subprocess.Popen[bytes]) -> bool:
    start = procs.start_time_of(child.pid)
    row = (child.pid, child.pid, start, utc_now(), name)
    return db.execute(_RUNNING, row).rowcount == 1


def _record_exit(db: sqlite3.Connection, name: str, returncode: int) -> None:
    code, reason = outcome(returncode)
    now = utc_now()
    if db.execute(_EXITED, (code, reason, now, name)).rowcount == 0:
        db.execute(_EXITED_AFTER_STOP, (code, now, name))


def run(db_path: str, name: str, heartbeat: tuple[str, float] | None = None) -> int:
    """Run deployer `name` to its end; every outcome is written to the row, never raised."""
    forwarder = _Forwarder()
    db = connect(db_path)
    spec = _claim(db, name)
    if spec is None:
        return 0
    try:
        child = _spawn(spec)
    except (OSError, subprocess.SubprocessError) as exc:
        _record_unexecutable(db, name, exc)
        return 0
    if not _record_running(db, name, child):  # stopped or deleted while we spawned
        procs.signal_group(child.pid, signal.SIGKILL)
    forwarder.attach(child.pid)
    returncode = child.wait() if heartbeat is None else _wait_while_fresh(db, name, child, heartbeat)
    _record_exit(db, name, returncode)
    return 0


def _wait_while_fresh(
    db: sqlite3.Connection, name: str, child: subprocess.Popen[bytes], heartbeat: tuple[str, float]
) -> int:
    """Reap the deployer, killing its group once the controller's heartbeat is older than allowed.

    Other hosts end this claim only after a full lease; this fires at half of it, so the
    deployer is gone before anyone may start its successor.
    """
    path, max_age = heartbeat
    while True:
        try:
            return child.wait(timeout=min(0.5, max_age / 8))
        except subprocess.TimeoutExpired:
            pass
        try:
            age = time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            age = float("inf")
        if age > max_age:
            reason = f"controller heartbeat {age:.1f}s old (limit {max_age:.1f}s): deployer stopped"
            db.execute(_LOST_HEARTBEAT, (reason, utc_now(), name))
            procs.signal_group(child.pid, signal.SIGKILL)
            return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) == 5:
        return run(argv[1], argv[2], (argv[3], float(argv[4])))
    if len(argv) != 3:
        print("usage: shim.py RUNTIME_DB NAME [HEARTBEAT_FILE MAX_AGE_S]", file=sys.stderr)
        return 2
    return run(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
