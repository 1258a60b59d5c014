"""`serve` against misbehaving clients (issue 48): idle and slow clients are cut, hundreds of idle
connections cost no thread each and lock no one out, oversized requests are 414/431; the page polls
the API with ETags (304 while nothing changed); its templates ship in the wheel."""

from __future__ import annotations

import http.client
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rollouts.adapters.cli.state import State
from rollouts.adapters.web import routes, server
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow  # real processes and sockets held for seconds (see tests/test_tiers.py)
ROOT = Path(__file__).resolve().parents[3]


def ask(address: tuple[str, int], path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(*address, timeout=10)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


@contextmanager
def in_process(rollouts: Rollouts, limits: server.Limits) -> Iterator[tuple[str, int]]:
    """The server `serve` runs, in this process with `limits`, on a free port; stopped at the end."""
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    state = State(str(rollouts.home), None, "tester@test")
    state.reading()
    reader = server.Reader(state, routes.answer, lambda error: f"internal error ({error})")
    httpd = server.listen("127.0.0.1", 0, reader, limits=limits)
    loop = threading.Thread(target=httpd.run, daemon=True)
    loop.start()
    try:
        yield "127.0.0.1", int(httpd.effective_port)
    finally:
        httpd.close()
        httpd.task_dispatcher.shutdown()
        state.close()


def closed_within(client: socket.socket, seconds: float) -> float | None:
    """How long until the server closed `client` (None: still open after `seconds`)."""
    started = time.monotonic()
    client.settimeout(seconds)
    try:
        while client.recv(1024):
            pass
    except TimeoutError:
        return None
    except ConnectionError:
        pass
    return time.monotonic() - started


def test_a_client_idle_or_slow_past_the_limit_is_disconnected(rollouts: Rollouts) -> None:
    with in_process(rollouts, server.Limits(idle=2, sweep=1)) as address:
        idle = socket.create_connection(address)
        slow = socket.create_connection(address)
        slow.sendall(b"GET /api/configs HTTP/1.1\r\n")

        def trickle() -> None:  # a header byte every 0.3 s: never idle, never done
            for _ in range(40):
                try:
                    slow.sendall(b"X")
                except OSError:
                    return
                time.sleep(0.3)

        threading.Thread(target=trickle, daemon=True).start()
        assert (closed_within(idle, 8) or 99) < 6, "an idle client was never cut"
        assert (closed_within(slow, 8) or 99) < 6, "a client sending a byte at a time was never cut"
        assert ask(address, "/api/configs").status == 200


def test_oversized_requests_are_414_and_431(rollouts: Rollouts) -> None:
    with in_process(rollouts, server.Limits()) as address:
        assert ask(address, "/api/events?actor=" + "a" * 9000).status == 414
        assert ask(address, "/api/configs", {f"X-{i}": "1" for i in range(120)}).status == 431
        assert ask(address, "/api/configs", {"X-Big": "b" * 70_000}).status == 431
        assert ask(address, "/api/configs").status == 200


def test_the_api_answers_304_while_nothing_changed(rollouts: Rollouts) -> None:
    with in_process(rollouts, server.Limits()) as address:
        first = ask(address, "/api/events?config=web&after=1&limit=1")
        tag = first.getheader("ETag")
        assert first.status == 200 and tag
        assert ask(address, "/api/events?config=web&after=1&limit=1", {"If-None-Match": tag}).status == 304
        assert rollouts.run("rollout", "latest", "web").exit_code == 0
        changed = ask(address, "/api/events?config=web&after=1&limit=1", {"If-None-Match": tag})
        assert changed.status == 200 and changed.getheader("ETag") != tag


def test_300_idle_connections_cost_no_thread_each_and_lock_no_one_out(rollouts: Rollouts) -> None:
    """The standard library's server held a thread per connection (301 threads for 300 idle clients) and
    none was cut: here the threads stay few, and a normal request is answered within 1 s."""
    assert rollouts.run("config", "create", "web", "--", "true").exit_code == 0
    proc = rollouts.popen("serve", "--port", "0")
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "serve printed no URL within 30 s"
        port = urlsplit(proc.stdout.readline().strip()).port  # type: ignore[union-attr]
        address = ("127.0.0.1", int(port or 0))
        assert ask(address, "/api/configs").status == 200
        threads_before = len(list(Path(f"/proc/{proc.pid}/task").iterdir()))
        with ExitStack() as held:
            for _ in range(300):
                held.enter_context(socket.create_connection(address, timeout=5))
            time.sleep(1.0)  # let the server take in what it will
            threads = len(list(Path(f"/proc/{proc.pid}/task").iterdir()))
            started = time.monotonic()
            assert ask(address, "/api/configs").status == 200
            took = time.monotonic() - started
            fds = len(list(Path(f"/proc/{proc.pid}/fd").iterdir()))
        assert threads <= threads_before + 2, (threads_before, threads)
        assert took < 1.0, f"a normal request took {took:.2f} s behind 300 idle connections"
        assert fds < 150, f"{fds} descriptors open: more than the 100 connections allowed"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err, err


def test_the_wheel_carries_the_pages_templates_and_static_files(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, ROOT],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("rollouts-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "adapters/web").glob("*/*") if p.suffix != ".pyc"}
    assert shipped and {f"rollouts/{name}" for name in shipped} <= names
