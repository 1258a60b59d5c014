"""What a sink says never goes into the log (DESIGN 7.11): a failed delivery keeps the status code and
our own words, not the sink's reason text, which may echo the URL's token or be kilobytes of anything."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rollouts.adapters.notify.http import Poster
from tests.conftest import Rollouts

pytestmark = pytest.mark.slow
TOKEN = "t0k3n-0f-the-hook"
CHATTER = "Z" * 5000


class Echoing(BaseHTTPRequestHandler):
    """Answers 404 with the request's path (and a long tail) as its reason phrase, as some servers do."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(404, f"no route {self.path} {CHATTER}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the library's name
        return  # quiet: the test reads the log, not stderr


@pytest.fixture
def echoing_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echoing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/{TOKEN}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_poster_reports_the_code_and_the_standard_phrase_only(echoing_sink: str) -> None:
    poster = Poster(timeout=2)
    try:
        said = poster.post(echoing_sink + "?key=" + TOKEN, {"a": 1}, "k")
    finally:
        poster.close()
    assert said == "HTTP 404 Not Found"


def test_a_404_that_echoes_the_path_keeps_the_token_out_of_the_log(rollouts_on: Rollouts, echoing_sink: str) -> None:
    r = rollouts_on
    r.env.update({"ROLLOUTS_NOTIFY_TIMEOUT": "1", "ROLLOUTS_NOTIFY_LEASE_SECONDS": "3", "HOOK_URL": echoing_sink})
    assert r.sh("notify", "add", "chat", "--url-env", "HOOK_URL", "--on", "triggered").exit_code == 0
    r.sh("config", "create", "web", "--", "true")
    r.sh("rollout", "latest", "web")
    controller = r.popen("controller", "run", "-q")
    try:
        deadline = time.monotonic() + 30
        while json.loads(r.sh("notify", "status", "-o", "json").stdout)[0]["last_error"] is None:
            assert time.monotonic() < deadline, "no failure recorded"
            time.sleep(0.2)
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(30)
    status = json.loads(r.sh("notify", "status", "-o", "json").stdout)[0]
    assert status["last_error"] == "HTTP 404 Not Found"
    said = r.sh("events", "-o", "json").stdout + r.sh("log", "export").stdout + r.sh("notify", "status").stdout
    assert "NotificationFailed" in said
    assert TOKEN not in said and "hooks" not in said and CHATTER[:100] not in said
