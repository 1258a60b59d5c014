"""The HTTP side of `rollouts serve`: the standard library's threading server, GET and HEAD only.

Requests are read and written on their own threads, so a slow client holds no one up; what
they ask of the views is answered one at a time, under one lock (the views' connections and
the log's recorder are the command's State's, made for one user at a time)."""

from __future__ import annotations

import hmac
import signal
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import checkpoints, exposition, routes

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SECURITY_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"),
)


class Stopped(BaseException):
    """SIGTERM or Ctrl-C arrived: stop serving. Not an Exception, as KeyboardInterrupt is not: socketserver
    catches any Exception raised while it hands a request to its thread, and would serve on."""


class Reader:
    """Answers one request at a time from the views of `state` (caught up per request)."""

    def __init__(self, state: Any, answer: Callable[..., Any], on_error: Callable[[BaseException], str]) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.metrics = exposition.Exposition(lambda: state.projections)
        self.answer = answer
        self.on_error = on_error
        self.checkpoints = checkpoints.Checkpoints()

    def respond(self, target: str) -> routes.Response:
        with self.lock:
            try:
                return self.answer(self.state, self.metrics, target)
            except Exception as error:  # noqa: BLE001 - one request's failure must not stop the server
                line = self.on_error(error)
                print(f"error: {line}", file=sys.stderr, flush=True)
                api = target.startswith("/api/")
                return routes.error(500, line, api)
            finally:
                if self.state.projections_open:
                    self.checkpoints.after(self.state.projections.open_paths())


UNAUTHORIZED = routes.Response(
    401, "text/plain; charset=utf-8", b"a bearer token is needed\n", (("WWW-Authenticate", 'Bearer realm="rollouts"'),)
)


def authorized(header: str | None, token: bytes) -> bool:
    """Whether an Authorization header carries the bearer token (compared in constant time)."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)


def make_handler(reader: Reader, loopback: bool, token: bytes | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "rollouts"
        sys_version = ""
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait for an ACK between them

        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            self._send(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._send(head=True)

        def _send(self, head: bool) -> None:
            if loopback and not _is_loopback_host(self.headers.get("Host", "")):
                # A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) reads nothing.
                response = routes.Response(421, "text/plain; charset=utf-8", b"this server answers only to localhost\n")
            elif token is not None and not authorized(self.headers.get("Authorization"), token):
                response = UNAUTHORIZED
            else:
                response = reader.respond(self.path)
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for key, value in (*response.headers, *SECURITY_HEADERS):
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self.wfile.write(response.body)

        def _refuse(self) -> None:
            body = b"read-only: GET and HEAD only\n"
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: no access log
            return

    return Handler


def _is_loopback_host(header: str) -> bool:
    host = header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":")[0]
    return host in LOOPBACK_NAMES


def is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return all(info[4][0] in ("127.0.0.1", "::1") or info[4][0].startswith("127.") for info in infos)


class Server(ThreadingHTTPServer):
    """The threading server, quiet when a client hangs up: a browser that stops loading, or a scraper that
    gives up, is no error; anything else is one `error:` line, never the library's traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):  # broken pipe, reset, aborted: the client left
            return
        what = " ".join(f"{type(error).__name__}: {error}".split())
        print(f"error: a request from {client_address[0]} failed: {what}", file=sys.stderr, flush=True)


class Server6(Server):
    address_family = socket.AF_INET6


def listen(host: str, port: int, reader: Reader, token: bytes | None = None) -> ThreadingHTTPServer:
    """A server bound to `host`:`port` (port 0: a free one), not yet serving; with `token`, every
    request must carry it as `Authorization: Bearer TOKEN` (401 otherwise)."""
    server_class = Server6 if ":" in host else Server
    return server_class((host, port), make_handler(reader, is_loopback(host), token))


def url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else str(host)
    return f"http://{shown}:{port}/"


def serve_until_stopped(server: ThreadingHTTPServer, reader: Reader) -> None:
    """Serve until Ctrl-C or SIGTERM; then wait for the request being answered, and close."""

    def stop(signum: int, frame: Any) -> None:
        raise Stopped()

    # Both set here, as the controller does: a process started with SIGINT ignored (a background job
    # of a script, a test runner's worker) gets no KeyboardInterrupt from Python, and Ctrl-C must still stop it.
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever(poll_interval=0.2)
    except (KeyboardInterrupt, Stopped):
        pass
    finally:
        for signum in previous:  # a second signal must not cut the closing short
            signal.signal(signum, signal.SIG_IGN)
        server.server_close()
        reader.lock.acquire(timeout=10)  # the views close after the request in flight
        for signum, handler in previous.items():
            signal.signal(signum, handler)
