"""How a bench run starts `rollouts` commands: a fresh interpreter each, or forked from a warm one.

`FreshCli` runs `python -m rollouts ARGS` (subprocess.Popen) per command. `ForkedCli` starts
one server process (`python bench/shared/cli_server.py FD`) that imports once what commands load and
then forks a child per command; the child runs the real entry point (`rollouts.adapters.cli.main()`)
with that argv, and ends with a normal interpreter exit (streams flushed, atexit handlers run,
non-daemon threads joined). Each command is still a separate OS process with its own pid, stdin
from /dev/null, its own stdout and stderr (pipes, or a log file the caller passes), the server's
environment, working directory and process group (the client's, as Popen would give), and its exit
code; only interpreter start-up and imports are shared (a SQLite `config list`: ~0.45 s of CPU as
its own interpreter, ~0.05 s forked, here).

The server imports every module of adapters/, domain/ and projections/ (the PostgreSQL recorder
only when ROLLOUTS_STORE is set), freezes its heap for the GC, and then, single-threaded and with
no connection, file or logger open, answers on one Unix SOCK_SEQPACKET socket, one JSON object per
message:

    {"run": ID, "argv": [...]} with 2 fds (stdout, stderr) -> {"id": ID, "pid": PID} or {"id": ID, "error": TEXT}
    the child has ended                                   -> {"id": ID, "exit": RC, "cpu": SECONDS}
    {"kill": ID, "signal": N}                             -> (nothing) the signal, if the child is not reaped yet

RC is the exit code, or minus the signal that ended the child (as Popen's returncode). Only the
server signals its children: it is their parent, so a pid it has not reaped yet cannot be another
process's. On EOF (the client closed the socket, or died) it SIGKILLs the children still running,
reaps them and exits.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("domain", "projections", "adapters")
NOT_PRELOADED = {"rollouts.adapters.cli.__main__"}  # runs the CLI when imported
POSTGRES_ONLY = {"rollouts.adapters.store.postgres.recorder"}  # psycopg: a SQLite command never imports it
MAX_MESSAGE = 1 << 20
START_S = 120.0  # the longest the server may take to import everything and say it is ready
READY = {"ready": True}


# -- the server ----------------------------------------------------------------------------------


def preload() -> int:
    """Import every module a command may load lazily; how many modules are loaded then."""
    skip = NOT_PRELOADED | (set() if os.environ.get("ROLLOUTS_STORE") else POSTGRES_ONLY)
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(("rollouts", *(parts[:-1] if parts[-1] == "__init__" else parts)))  # the package's names
            if name not in skip:
                importlib.import_module(name)
    return len(sys.modules)


def send(conn: socket.socket, message: dict[str, Any]) -> bool:
    try:
        conn.send(json.dumps(message).encode())
        return True
    except OSError:  # the client is gone: EOF comes next
        return False


def become_command(conn: socket.socket, sigint: Any, out: int, err: int, argv: list[str]) -> None:
    """In the forked child: the state a fresh `python -m rollouts ARGV` would start in."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, sigint)  # Python's own handler, or ignored if the server was started so
    conn.detach()  # closed below with every other descriptor of the server
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)  # (dup2 makes the target inheritable, as a child's stdio is)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # as Popen(close_fds=True): out, err, null, socket, wakeup pipe
    sys.argv = [str(REPO / "adapters" / "cli" / "__main__.py"), *argv]
    gc.enable()


def reap(conn: socket.socket, running: dict[int, int]) -> None:
    """Collect every child that has ended and tell the client its exit code and CPU time."""
    while running:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ident = running.pop(pid, None)
        if ident is not None:
            cpu = round(usage.ru_utime + usage.ru_stime, 4)
            send(conn, {"id": ident, "exit": os.waitstatus_to_exitcode(status), "cpu": cpu})


def serve(conn: socket.socket) -> list[str] | None:
    """Fork a command per request until EOF. Returns (in a forked child only) the argv to run."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    sigint = signal.getsignal(signal.SIGINT)  # as inherited: what a fresh interpreter would have
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the client and the commands; EOF ends this
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd wakes select()
    signal.set_wakeup_fd(wake_w)
    running: dict[int, int] = {}  # pid -> request id, until reaped
    while True:
        readable, _, _ = select.select([conn, wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        reap(conn, running)
        if conn not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        request = json.loads(data)
        if "kill" in request:
            for fd in fds:
                os.close(fd)
            pid = next((p for p, i in running.items() if i == request["kill"]), None)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, int(request.get("signal", signal.SIGKILL)))
            continue
        ident, argv = request["run"], [str(a) for a in request["argv"]]
        if len(fds) != 2 or threading.active_count() != 1:
            for fd in fds:
                os.close(fd)
            send(conn, {"id": ident, "error": "need 2 fds and one thread"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            pid = -1
            send(conn, {"id": ident, "error": f"fork failed: {exc}"})
        if pid == 0:
            become_command(conn, sigint, fds[0], fds[1], argv)
            return argv
        for fd in fds:
            os.close(fd)
        if pid > 0:
            running[pid] = ident
            send(conn, {"id": ident, "pid": pid})
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    while running:
        pid, _ = os.waitpid(-1, 0)
        running.pop(pid, None)
    return None


def server_main(fd: int) -> int:
    conn = socket.socket(fileno=fd)
    try:
        loaded = preload()
        gc.freeze()  # the children's collections skip the imported heap (fewer pages copied, less CPU)
        gc.disable()
    except BaseException as exc:  # noqa: BLE001 - tell the client why, then fail
        send(conn, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        raise
    send(conn, {**READY, "modules": loaded})
    argv = serve(conn)
    if argv is None:
        return 0
    from rollouts.adapters.cli import main  # in the child: the real entry point, as `python -m rollouts`

    main()  # sys.exit()s with the command's code
    return 0


# -- the clients ---------------------------------------------------------------------------------


class Child:
    """A command started by the server, handled as a subprocess.Popen is (poll, wait, kill)."""

    def __init__(self, server: ForkedCli, ident: int, args: list[str]) -> None:
        self.server, self.ident, self.args = server, ident, args
        self.pid: int | None = None
        self.returncode: int | None = None
        self.cpu: float | None = None  # user + system seconds, once it ended
        self.started = threading.Event()
        self.ended = threading.Event()
        self.error: str | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        if self.returncode is None:
            raise RuntimeError(f"the CLI fork server died: {self.error}")
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if not self.ended.is_set():
            self.server.request({"kill": self.ident, "signal": int(sig)})

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkedCli:
    """The client's handle on one CLI fork server, started in `cwd` with `env` (every command's)."""

    mode = "fork"

    def __init__(self, cwd: Path, env: dict[str, str], log: Path, prefix: tuple[str, ...] = ()) -> None:
        """`prefix`: an argv the server runs under (`ip netns exec NS`: every command then runs there)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [*prefix, sys.executable, str(Path(__file__).resolve()), str(theirs.fileno())]
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=(theirs.fileno(),)
            )
        theirs.close()
        self.conn = ours
        self.children: dict[int, Child] = {}
        self.ids = 0
        self.lock = threading.Lock()
        self.cpu = 0.0  # CPU seconds of the children that ended
        self.cpu_by: Counter[str] = Counter()  # the same, by command ("rollout latest", "controller run", ...)
        self.gone: str | None = None
        self.closing = False
        ready, _, _ = select.select([ours], [], [], START_S)
        hello = json.loads(ours.recv(MAX_MESSAGE) or b"{}") if ready else {}
        if not hello.get("ready"):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the CLI fork server did not start: {hello.get('error') or 'no answer'} (see {log})")
        self.reader = threading.Thread(target=self._read, name="cli-server-answers", daemon=True)
        self.reader.start()

    def request(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        try:
            socket.send_fds(self.conn, [json.dumps(message).encode()], list(fds))
        except OSError as exc:
            self.gone = self.gone or f"cannot send: {exc}"

    def spawn(self, args: list[str], stdout: int, stderr: int) -> Child:
        """Start `rollouts ARGS` with these descriptors as its stdout and stderr (the caller closes its own)."""
        with self.lock:
            self.ids += 1
            child = Child(self, self.ids, args)
            self.children[child.ident] = child
        self.request({"run": child.ident, "argv": args}, (stdout, stderr))
        if self.gone:
            self._fail(child, self.gone)
        child.started.wait()
        if child.error is not None and child.pid is None:
            raise RuntimeError(f"the CLI fork server could not start {args[:3]}: {child.error}")
        return child

    def run(self, args: list[str], timeout: float) -> tuple[int | None, str, str, float | None]:
        """`rollouts ARGS` to its end: (exit code, stdout, stderr, CPU seconds); exit code None if killed at timeout."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            child = self.spawn(args, out_w, err_w)
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        out, err, timed_out = collect(out_r, err_r, child, timeout)
        rc = child.wait()
        if timed_out:
            return None, out, err + "\n(killed: timed out)", child.cpu
        return rc, out, err, child.cpu

    def _read(self) -> None:
        while True:
            try:
                data = self.conn.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            answer = json.loads(data)
            with self.lock:
                child = self.children.get(answer["id"])
            if child is None:
                continue
            if "pid" in answer:
                child.pid = answer["pid"]
                child.started.set()
            elif "exit" in answer:
                with self.lock:
                    self.children.pop(child.ident, None)
                    self.cpu += answer["cpu"]
                    self.cpu_by[command_of(child.args)] += answer["cpu"]
                child.cpu, child.returncode = answer["cpu"], answer["exit"]
                child.ended.set()
            else:
                self._fail(child, answer.get("error", "?"))
        self.gone = self.gone or f"the server exited ({self.proc.poll()})"
        if self.closing:
            return  # close() tells what became of the children left
        with self.lock:
            left = list(self.children.values())
        for child in left:
            self._fail(child, self.gone)

    def _fail(self, child: Child, why: str) -> None:
        with self.lock:
            self.children.pop(child.ident, None)
        child.error = why
        child.started.set()
        child.ended.set()

    def close(self, timeout: float = 30.0) -> None:
        """Close the socket: the server SIGKILLs what still runs, reaps it and exits."""
        self.closing = True
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        self.conn.close()
        with self.lock:
            left = list(self.children.values())
        for child in left:
            if self.proc.returncode == 0:  # it killed and reaped them, as it does on EOF
                child.returncode = -signal.SIGKILL
                child.ended.set()
            else:
                self._fail(child, f"the server exited ({self.proc.returncode})")


class FreshCli:
    """Each command in an interpreter of its own: `python -m rollouts ARGS` (subprocess.Popen)."""

    mode = "spawn"

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd, self.env = cwd, env
        self.cpu = 0.0  # not measured per command here
        self.cpu_by: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.running: set[subprocess.Popen[bytes]] = set()

    def spawn(self, args: list[str], stdout: int, stderr: int) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "rollouts", *args]
        return subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=stdout, stderr=stderr)

    def run(self, args: list[str], timeout: float) -> tuple[int | None, str, str, float | None]:
        argv = [sys.executable, "-m", "rollouts", *args]
        proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with self.lock:
            self.running.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
            return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), None
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return None, out.decode(errors="replace"), err.decode(errors="replace") + "\n(killed: timed out)", None
        finally:
            with self.lock:
                self.running.discard(proc)

    def close(self, timeout: float = 10.0) -> None:
        """Kill the commands still running and reap them."""
        with self.lock:
            running = list(self.running)
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)


def command_of(args: list[str]) -> str:
    """The command's words, without the root options: "rollout latest", "controller run"."""
    words = list(args)
    while words[:1] in (["--as"], ["--home"], ["--store"]):
        del words[:2]
    return " ".join(w for w in words[:2] if not w.startswith("-"))


def collect(out_fd: int, err_fd: int, child: Child, timeout: float) -> tuple[str, str, bool]:
    """Read both pipes to their end (as Popen.communicate); SIGKILL the child once `timeout` passed."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    deadline = time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                child.kill()
            for key, _ in sel.select(max(left, 0.0) if not timed_out else None):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    out, err = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_fd, err_fd))
    return out, err, timed_out


if __name__ == "__main__":
    sys.exit(server_main(int(sys.argv[1])))
