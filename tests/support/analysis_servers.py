"""The real things the providers are tested against (DESIGN 7.9): Debian's Prometheus on a free loopback port
with a data directory and config of its own, scraping an app that prometheus_client serves on loopback every
second; a local HTTP server in a thread; and the measurement process run as the controller starts it.

A test module makes its fixtures of `running_prometheus` (one per module: it takes seconds to start and to see
its first samples) and `serving_site` (not a conftest of its own: tests import the root conftest by name)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

SCRAPE_CONFIG = """global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: app
    static_configs:
      - targets: ['127.0.0.1:{port}']
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Measured:
    """What the measurement process said: its exit code, its lines and the JSON of its last line."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    document: dict[str, object] = field(default_factory=dict)

    @property
    def line(self) -> str:
        return self.stdout.splitlines()[0]


def measure(template: dict[str, object], env: dict[str, str] | None = None, timeout: float = 30) -> Measured:
    """`python -m rollouts measure --resolved` with $ROLLOUT_ANALYSIS holding `template`, as the controller
    starts it: a process of its own, the variables the template names in its environment."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ROLLOUT_", "PROM_", "HOOK_"))}
    environ.update({"ROLLOUT_ANALYSIS": json.dumps({"name": "t@1", **template}), **(env or {})})
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rollouts", "measure", "--resolved"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - started
    lines = done.stdout.splitlines()
    document = json.loads(lines[-1]) if lines else {}
    return Measured(done.returncode, done.stdout, done.stderr, seconds, document)


class Prometheus:
    """A Prometheus server of the test's own and the app it scrapes (gauges the test sets)."""

    def __init__(self, address: str, registry: CollectorRegistry, early: dict[str, Measured]) -> None:
        self.address = address
        self.value = Gauge("demo_value", "one sample", registry=registry)
        self.series = Gauge("demo_series", "several samples", ["n"], registry=registry)
        self.nan = Gauge("demo_nan", "a sample that is NaN", registry=registry)
        self.early = early  # measurements made at once after /-/ready answered, before any scrape

    def wait_for_samples(self, query: str = "demo_nan", seconds: float = 30) -> None:
        """Until `query` has a sample (the first scrape's come some seconds after ready)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{self.address}/api/v1/query?query={query}", timeout=5) as reply:
                if json.load(reply)["data"]["result"]:
                    return
            time.sleep(0.3)
        raise AssertionError(f"no sample of {query} after {seconds} s")


EARLY_QUERY = "demo_value"


def running_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Debian's `prometheus` (skipped when it is not installed, unless ROLLOUTS_REQUIRE_PROMETHEUS=1)."""
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("ROLLOUTS_REQUIRE_PROMETHEUS") == "1":
            pytest.fail("Prometheus is required (ROLLOUTS_REQUIRE_PROMETHEUS=1) but `prometheus` is not on PATH")
        pytest.skip("Debian's prometheus is not installed (apt-get install prometheus)")
    registry = CollectorRegistry()
    app, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    work = tmp_path_factory.mktemp("prometheus")
    (work / "prometheus.yml").write_text(SCRAPE_CONFIG.format(port=app.server_port))
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with (work / "prometheus.log").open("w") as log:
        server = subprocess.Popen(
            [
                binary,
                f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--config.file={work / 'prometheus.yml'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(address, server, work / "prometheus.log")
        early = {
            "default": measure({"provider": "prometheus", "address": address, "query": EARLY_QUERY}),
            "passed": measure(
                {"provider": "prometheus", "address": address, "query": EARLY_QUERY, "on_empty": "passed"}
            ),
            "failed": measure(
                {"provider": "prometheus", "address": address, "query": EARLY_QUERY, "on_empty": "failed"}
            ),
        }
        found = Prometheus(address, registry, early)
        found.value.set(12)
        for n, value in (("a", 1), ("b", 2), ("c", 3.5)):
            found.series.labels(n=n).set(value)
        found.nan.set(float("nan"))
        yield found
    finally:
        server.terminate()
        server.wait(timeout=30)
        app.shutdown()


def _wait_ready(address: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"prometheus exited {server.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{address}/-/ready", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"prometheus not ready after 60 s: {log.read_text()[-2000:]}")


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: str


class Site:
    """A local HTTP server's address and the requests it saw."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.seen: list[Seen] = []


REPLIES = {
    "/json": (200, "application/json", json.dumps({"a": {"b": [0.5, 2]}, "status": "ok", "none": None})),
    "/text": (200, "text/plain", "all good"),
    "/fail": (503, "text/plain", "upstream secret-body-text: database password is hunter2"),
}


def serving_site() -> Iterator[Site]:
    """A real HTTP server on loopback, in a thread: /json, /text, /fail (503), /echo (the request as JSON),
    /slow (answers after 3 s)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            path = self.path.partition("?")[0]
            found.seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
            if path == "/slow":
                time.sleep(3)
            status, kind, text = REPLIES.get(path, (200, "application/json", ""))
            if path == "/echo":
                text = json.dumps({"method": self.command, "body": body, "headers": dict(self.headers.items())})
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # /slow's asker left at its timeout
                self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    found = Site(f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()
