"""A notification sink for tests and benchmarks: an HTTP server on 127.0.0.1 that records every POST.

It can answer 500 to the first few requests, hang past the sender's timeout on some, or take a
while on each (so that a controller killed meanwhile dies with a delivery in flight).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    key: str
    body: dict[str, Any]
    at: float  # time.time() when the request arrived
    ok: bool  # answered 2xx (in time, as far as the sink knows)
    authorization: str | None = None  # the request's Authorization header, as sent


class SinkServer:
    def __init__(
        self,
        fail_first: int = 0,
        hang_first: int = 0,
        hang_s: float = 0.0,
        delay_s: float = 0.0,
        authorization: str | None = None,  # when given, a request without this header is answered 401
    ) -> None:
        self.fail_first, self.hang_first, self.hang_s, self.delay_s = fail_first, hang_first, hang_s, delay_s
        self.authorization = authorization
        self.received: list[Received] = []
        self.ok_count = 0  # how many were answered 2xx: cheap to poll
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SinkServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def delivered(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.ok]

    def _take(self, key: str, body: dict[str, Any], authorization: str | None = None) -> tuple[int, float]:
        """Record a request; (status, seconds to wait before answering) for it."""
        with self.lock:
            if self.authorization is not None and authorization != self.authorization:
                status, wait = 401, 0.0
            else:
                status, wait = self._decide(len(self.received) + 1)
            self.received.append(Received(key, body, time.time(), status == 200, authorization))
            self.ok_count += status == 200
        return status, wait

    def _decide(self, n: int) -> tuple[int, float]:
        if n <= self.fail_first:
            return 500, 0.0
        if n <= self.fail_first + self.hang_first:
            return 599, self.hang_s  # answered after the sender gave up: not delivered
        return 200, self.delay_s

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                if len(data) < length:  # the sender died mid-request: nothing was delivered
                    self.close_connection = True
                    return
                body = json.loads(data or b"{}")
                key, authorization = self.headers.get("Idempotency-Key", ""), self.headers.get("Authorization")
                status, wait = sink._take(key, body, authorization)
                if wait:
                    time.sleep(wait)
                try:
                    self.send_response(min(status, 500))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender is gone (killed, or it timed out)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
