"""A fork server for shims: one process with the shim already imported forks a detached shim per request.

Starting a shim as its own interpreter costs tens of milliseconds of CPU (Python's start and
the shim's imports); a fork of this small, single-threaded process costs about one. A forked
shim is set up as `python -m rollouts.adapters.runtime.shim DB NAME` started by the controller would be: its own
session, stdin from /dev/null, stdout and stderr to its log, the controller's environment (less
the store URL), working directory and umask (this server's), and it outlives the controller.
This server reaps the shims it forked while it lives (as the controller reaps the shims it
starts); it ends when its controller closes the request pipe or dies.

Protocol, one line each way, answered in order: the client sends {"name": ..., "log": ...} as
JSON; the server answers "PID START_TIME" (the shim's pid and its start time in clock ticks) or
"error TEXT". The server opens no database and starts no thread, so forking it is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from . import procs, shim
from .interpreter import module_argv

LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND
READY = b"ready\n"
_REAP_EVERY_S = 0.5
_READER_JOIN_S = 5.0
_START_S = 30.0  # the longest a server may take to say it is ready


# -- server (the fork server process) ----------------------------------------------------------------


def _reap() -> None:
    """Collect every forked shim that has ended (a zombie counts as dead to the runtime anyway)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _shim_child(db_path: str, name: str, log: int, heartbeat: tuple[str, float] | None) -> NoReturn:
    """In the forked child: detach as `Popen(start_new_session=True)` would, then run the shim."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # ignored by the server only
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)  # the server holds no other descriptor (it was started with close_fds)
        os.close(log)
        code = shim.run(db_path, name, heartbeat)
    except BaseException:  # noqa: BLE001 - nothing may return into the server's loop
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)


def _serve_one(line: bytes, db_path: str, heartbeat: tuple[str, float] | None) -> bytes:
    try:
        request = json.loads(line)
        name, log_path = str(request["name"]), str(request["log"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"error bad request: {exc}\n".encode()
    try:
        log = os.open(log_path, LOG_FLAGS, 0o600)  # there when the client's create returns
    except OSError as exc:
        return f"error cannot open the log: {exc}\n".encode()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(log)
        return f"error fork failed: {exc}\n".encode()
    if pid == 0:
        _shim_child(db_path, name, log, heartbeat)
    os.close(log)
    # Not reaped before this read, so the pid is still the child's (alive or a zombie).
    return f"{pid} {procs.start_time_of(pid)}\n".encode()


def serve(db_path: str, heartbeat: tuple[str, float] | None = None) -> int:
    """Answer requests on stdin until it closes; reap forked shims meanwhile."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session; only EOF or a kill ends it
    shim.preload()
    shim.undumpable()  # and so the shims it forks
    os.write(1, READY)
    pending = b""
    while True:
        if b"\n" not in pending:
            readable, _, _ = select.select([0], [], [], _REAP_EVERY_S)
            _reap()
            if not readable:
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                return 0
            pending += chunk
            continue
        line, pending = pending.split(b"\n", 1)
        answer = _serve_one(line, db_path, heartbeat)
        try:
            os.write(1, answer)
        except BrokenPipeError:
            return 0  # its controller died (SIGKILL) with a request on the way: nobody is left to answer


def main(argv: list[str]) -> int:
    if len(argv) == 4:
        return serve(argv[1], (argv[2], float(argv[3])))
    if len(argv) != 2:
        usage = "usage: python -m rollouts.adapters.runtime.forkserver RUNTIME_DB [HEARTBEAT_FILE MAX_AGE_S]"
        print(usage, file=sys.stderr)
        return 2
    return serve(argv[1])


# -- client (in the controller) -----------------------------------------------------------------


class ForkServerFailed(Exception):
    """The fork server could not take the request: nothing was forked for it."""


@dataclass(frozen=True)
class Forked:
    """The server's answer about one request: the shim's pid and start time, or why there is none."""

    name: str
    pid: int | None = None
    start: int | None = None
    failure: str | None = None  # no shim: it could not fork, or it died and whether it forked is unknown


Answered = Callable[[Forked], None]


class ForkServer:
    """The controller's handle on its fork server, started on first use and again if it died.

    Requests do not wait for their answer: a thread of this process reads the answers and hands
    each to `answered` (which records the shim's pid on its row, or starts a shim otherwise).
    """

    def __init__(self, db_path: str, heartbeat: tuple[str, float] | None, answered: Answered) -> None:
        self._argv = module_argv("rollouts.adapters.runtime.forkserver", db_path)
        if heartbeat is not None:
            self._argv += [heartbeat[0], str(heartbeat[1])]
        self._answered = answered
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._broken: str | None = None  # why it could not start: then it is not tried again
        self._requesting = threading.Lock()  # one request (or start, or close) at a time
        self._lock = threading.Lock()  # guards the pending names, shared with the reader thread
        self._pending: deque[str] = deque()  # names asked of the current server, in order, not answered yet

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> bool:
        """Start the server now rather than on the first request; False if it cannot start."""
        with self._requesting:
            try:
                self._running()
            except ForkServerFailed:
                return False
            return True

    def request(self, name: str, log_path: str) -> None:
        """Ask for a detached shim for deployer `name`; its answer comes to `answered` later.

        ForkServerFailed: the request was not taken (the server cannot start, or has died).
        """
        request = json.dumps({"name": name, "log": log_path}).encode() + b"\n"
        with self._requesting:
            proc = self._running()
            pending = self._pending
            with self._lock:
                pending.append(name)
            try:
                os.write(proc.stdin.fileno(), request)  # type: ignore[union-attr]
            except OSError as exc:
                proc.kill()  # its reader answers every request still pending as failed
                with self._lock:
                    if name not in pending:
                        return  # the reader has answered it already
                    pending.remove(name)
                raise ForkServerFailed(f"fork server failed: {exc}") from None

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._end_server()
        if self._broken is not None:
            raise ForkServerFailed(self._broken)
        try:
            proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                env=shim.spawner_environment(),
            )
        except OSError as exc:
            self._broken = f"fork server did not start: {exc}"
            raise ForkServerFailed(self._broken) from None
        assert proc.stdout is not None  # (stdout=PIPE above)
        started, _, _ = select.select([proc.stdout], [], [], _START_S)
        ready = proc.stdout.readline() if started else b"no answer"
        if ready != READY:
            proc.kill()
            proc.communicate()
            self._broken = f"fork server did not start: {ready!r}"
            raise ForkServerFailed(self._broken)
        self._proc, self._pending = proc, deque()
        self._reader = threading.Thread(
            target=self._read, args=(proc, self._pending), name="fork-server-answers", daemon=True
        )
        self._reader.start()
        return proc

    def _read(self, proc: subprocess.Popen[bytes], pending: deque[str]) -> None:
        """Hand each answer on, in order; once the server is gone, the requests it left unanswered."""
        for line in proc.stdout:  # type: ignore[union-attr]
            with self._lock:
                name = pending.popleft() if pending else None
            if name is not None:  # (an answer to nothing asked is not the server's to give)
                self._hand_on(_parse(name, line.decode()))
        with self._lock:
            unanswered = list(pending)
            pending.clear()
        for name in unanswered:  # forked or not, unknown: a second shim for its row would run nothing
            self._hand_on(Forked(name, failure="the fork server died"))

    def _hand_on(self, forked: Forked) -> None:
        try:
            self._answered(forked)
        except Exception:  # noqa: BLE001 - this thread must go on reading answers whatever one of them met
            traceback.print_exc()

    def _end_server(self) -> None:
        """Reap an ended server and wait for its reader to hand on its last answers."""
        proc, reader = self._proc, self._reader
        self._reader, self._proc = None, None
        if proc is not None:
            proc.wait()
        if reader is not None:
            reader.join(_READER_JOIN_S)
        if proc is not None and (reader is None or not reader.is_alive()):
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def close(self, timeout: float = 5.0) -> None:
        """Close the request pipe: the server answers what it was asked, exits, and is reaped here."""
        with self._requesting:
            proc = self._proc
            if proc is None:
                return
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
            self._end_server()


def _parse(name: str, answer: str) -> Forked:
    word, _, rest = answer.strip().partition(" ")
    if word == "error" or not word.isdigit():
        return Forked(name, failure=rest or answer.strip() or "no answer")
    return Forked(name, int(word), int(rest) if rest.isdigit() else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
