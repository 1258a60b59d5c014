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
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import FrameType

from . import procs

BUSY_TIMEOUT = 30.0
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_CANNOT_EXECUTE = 127
_FORWARDED = (signal.SIGTERM, signal.SIGINT)

# Exclusive: a row names at most one shim (the one its spawner recorded, or the first to claim),
# so a second shim started for the same row (a fork server's failure, then a fallback) runs nothing.
_CLAIM = (
    "UPDATE deployers SET shim_pid = :pid, shim_start = :start WHERE name = :name AND state = 'created'"
    " AND (shim_pid IS NULL OR (shim_pid = :pid AND shim_start = :start))"
)
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


def begin_immediate(db: sqlite3.Connection, timeout: float = BUSY_TIMEOUT) -> None:
    """BEGIN IMMEDIATE, tried again every fraction of a millisecond while another writer holds the lock.

    SQLite's own busy handler sleeps 1, 2, 5, 10... ms between tries: with a shim per deployer
    writing to one table, those sleeps, not the writes, were what a create and a shim waited on.
    """
    deadline = time.monotonic() + timeout
    delay = 0.0001
    busy_ms = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in (5, 6) or time.monotonic() >= deadline:  # BUSY, LOCKED
                    raise
            time.sleep(delay * (0.5 + time.perf_counter_ns() % 1000 / 1000))  # jittered, no `random` import
            delay = min(delay * 2, 0.002)
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")


@contextlib.contextmanager
def writing(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (BEGIN IMMEDIATE, see begin_immediate), rolled back on any error."""
    begin_immediate(db)
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


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
    with writing(db):
        claimed = db.execute(_CLAIM, {"pid": me, "start": procs.start_time_of(me), "name": name}).rowcount == 1
        spec = db.execute("SELECT argv, env, pass_env, cwd FROM deployers WHERE name = ?", (name,)).fetchone()
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


_prctl: Callable[..., int] | None = None


def _libc_prctl() -> Callable[..., int]:
    global _prctl
    if _prctl is None:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _prctl


def undumpable() -> None:
    """Keep this process's /proc/PID files (environ, memory, descriptors) from the account's other
    processes, its deployers included: they may read only what they were given. Root still can;
    a deployer is dumpable again once exec'd."""
    _libc_prctl()(_PR_SET_DUMPABLE, 0)


def preload() -> None:
    """Do once, before a fork server forks shims, what each shim would otherwise do itself."""
    _libc_prctl()
    utc_now()
    outcome(-signal.SIGTERM)


_KEPT = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ})
# The signals whose disposition a spawn resets, as plain numbers: fixed for a process, so computed once (in
# the fork server, whose shims inherit it); signal.valid_signals() makes 64 enums on each call (~1 ms a spawn).
_RESETTABLE = tuple(sorted(int(s) for s in signal.valid_signals() - _KEPT))


@contextlib.contextmanager
def _clean_slate() -> Iterator[None]:
    """While the deployer is spawned: no ignored and no blocked signal, as both survive fork and exec.

    Done in the shim around the spawn (its own handlers end at exec; SIGPIPE and SIGXFSZ, which
    Python ignores, are restored in the child by subprocess), so that the child runs no Python
    but for PR_SET_PDEATHSIG; the shim's own dispositions and mask are restored afterwards.
    """
    ignored = []
    for sig in _RESETTABLE:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
                ignored.append(sig)
        except (OSError, ValueError):
            continue
    mask = signal.pthread_sigmask(signal.SIG_SETMASK, ())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)


def _child_setup(shim_pid: int) -> Callable[[], None]:
    prctl = _libc_prctl()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != shim_pid:  # the shim died before prctl took effect
            os._exit(128 + signal.SIGKILL)

    return setup


UNINHERITED = ("ROLLOUTS_STORE",)  # may hold the store's password; no deployer is ever given it


def spawner_environment() -> dict[str, str]:
    """The environment a shim or the fork server is started with: the controller's, less the store URL."""
    return {k: v for k, v in os.environ.items() if k not in UNINHERITED}


def environment(stored: dict[str, str], passed: list[str], own: dict[str, str]) -> dict[str, str]:
    """The deployer's environment: the row's env, over the variables named in `passed` as this
    shim has them (inherited from the controller). Their values are read here, written nowhere."""
    missing = [name for name in passed if name not in own and name not in stored]
    if missing:
        print(f"rollouts shim: not in the controller's environment, not passed: {' '.join(missing)}", file=sys.stderr)
    return {**{name: own[name] for name in passed if name in own}, **stored}


def _spawn(spec: sqlite3.Row) -> subprocess.Popen[bytes]:
    env = environment(json.loads(spec["env"]), json.loads(spec["pass_env"] or "[]"), dict(os.environ))
    with _clean_slate():
        return subprocess.Popen(
            json.loads(spec["argv"]),
            env=env,
            cwd=spec["cwd"],
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=_child_setup(os.getpid()),  # safe here: the shim has a single thread
        )


def _record_unexecutable(db: sqlite3.Connection, name: str, exc: Exception) -> None:
    # DESIGN 7.11's words, `cannot execute PROGRAM: REASON`, as `rollout status` shows them
    reason = f"cannot execute {exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else f"cannot execute: {exc}"
    print(f"rollouts shim: {name}: {reason}", file=sys.stderr, flush=True)
    with writing(db):
        db.execute(_UNEXECUTABLE, (_CANNOT_EXECUTE, reason, utc_now(), name))


def _record_running(db: sqlite3.Connection, name: str, child: subprocess.Popen[bytes]) -> bool:
    start = procs.start_time_of(child.pid)
    row = (child.pid, child.pid, start, utc_now(), name)
    with writing(db):
        return db.execute(_RUNNING, row).rowcount == 1


def _record_exit(db: sqlite3.Connection, name: str, returncode: int) -> None:
    code, reason = outcome(returncode)
    now = utc_now()
    with writing(db):
        if db.execute(_EXITED, (code, reason, now, name)).rowcount == 0:
            db.execute(_EXITED_AFTER_STOP, (code, now, name))


def run(db_path: str, name: str, heartbeat: tuple[str, float] | None = None) -> int:
    """Run deployer `name` to its end; every outcome is written to the row, never raised."""
    undumpable()
    forwarder = _Forwarder()
    db = connect(db_path)
    # This shim's writes need not survive a power loss, which ends its deployer too: each row it
    # touches was inserted durably (synchronous FULL) before it started, and a row left 'created'
    # or 'running' by a dead shim ends as lost. A process crash loses no commit in WAL mode.
    db.execute("PRAGMA synchronous = NORMAL")
    spec = _claim(db, name)
    if spec is None:
        return 0
    try:
        child = _spawn(spec)
    except (OSError, subprocess.SubprocessError) as exc:
        _record_unexecutable(db, name, exc)
        return 0
    if not _record_running(db, name, child):  # stopped or deleted while we spawned
        # Its stopper knew no group to kill and waits for this shim alone: exit only once the whole group
        # is dead (a SIGKILLed process still runs until it is scheduled; under load a child outlived us).
        procs.kill_group_and_wait(child.pid, None, grace=0)
    forwarder.attach(child.pid)
    returncode = child.wait() if heartbeat is None else _wait_while_fresh(db, name, child, heartbeat)
    _record_exit(db, name, returncode)
    return 0


def boot_clock() -> float:
    """Seconds since boot: the same for every process of the host, and not moved when the wall clock
    is stepped (NTP, an operator, a VM resumed); it goes on while a process is stopped."""
    return time.clock_gettime(getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC))


def beat(path: str, at: float | None = None) -> None:
    """Write the controller's heartbeat: a boot clock reading (`at`, or now), in place and of a fixed width
    (one write of 32 bytes over the same block: no new space, so a full disk does not stop the beat)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, f"{boot_clock() if at is None else at:.3f}".ljust(31).encode() + b"\n", 0)
    finally:
        os.close(fd)


def heartbeat_age(path: str) -> float:
    """How old the controller's heartbeat is, by the boot clock (a wall clock stepped back would keep a
    deployer alive, one stepped forward would kill it early); a file without a reading (written by a
    controller from before) by its time of change; no file: infinitely old."""
    try:
        with open(path, "rb") as f:
            text = f.read(64)
        return boot_clock() - float(text)
    except FileNotFoundError:
        return float("inf")
    except ValueError:
        try:
            return time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            return float("inf")


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
        age = heartbeat_age(path)
        if age > max_age:
            reason = f"controller heartbeat {age:.1f}s old (limit {max_age:.1f}s): deployer stopped"
            with writing(db):
                db.execute(_LOST_HEARTBEAT, (reason, utc_now(), name))
            procs.signal_group(child.pid, signal.SIGKILL)
            return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) == 5:
        return run(argv[1], argv[2], (argv[3], float(argv[4])))
    if len(argv) != 3:
        usage = "usage: python -m rollouts.adapters.runtime.shim RUNTIME_DB NAME [HEARTBEAT_FILE MAX_AGE_S]"
        print(usage, file=sys.stderr)
        return 2
    return run(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
