"""The HTTP side of `rollouts serve`: waitress, a production WSGI server, with bounds for misbehaving clients.

One thread waits on every connection (waitress's event loop), so an idle or slow client costs a socket,
never a thread; a few worker threads run the application. What requests ask of the views is answered
one at a time, under one lock (the views' connections and the log's recorder are the command's State's,
made for one user at a time)."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from . import app, checkpoints, exposition, routes

if TYPE_CHECKING:
    from ..service.session import Session


@dataclass(frozen=True)
class Limits:
    """What one client may hold: a connection idle, or a request arriving, for `idle` seconds at most; at most
    `connections` at once (at the limit the one idle the longest is closed for a newcomer); header bytes
    past `header_bytes` are 431, a body past `body_bytes` 413."""

    idle: float = 30.0
    connections: int = 100
    threads: int = 4  # the views answer one request at a time: more threads would only wait on the lock
    header_bytes: int = 65536
    body_bytes: int = 65536
    sweep: float = 1.0  # seconds between two looks for connections past `idle`


class Stopped(SystemExit):
    """SIGTERM or Ctrl-C arrived: stop serving. A SystemExit, as waitress's loop lets those (and no other
    exception raised while it handles a socket) end it."""


class Reader:
    """Answers one request at a time from the views of `state` (caught up per request)."""

    def __init__(
        self, state: Session, answer: Callable[..., routes.Response], on_error: Callable[[BaseException], str]
    ) -> None:
        self.state = state  # the command's session (the CLI's State is one)
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


class Channel(HTTPChannel):
    """A connection that notes when the request it is reading began (a client that sends a byte every few
    seconds is never idle, yet must not hold its connection for ever)."""

    began = 0.0

    def received(self, data: bytes) -> bool:
        if self.request is None:
            self.began = time.monotonic()
        return bool(super().received(data))


class Server(TcpWSGIServer):
    """waitress's server, which closes a connection idle for `channel_timeout` (its own), and also one whose
    request has been arriving for as long, and at its connection limit the idlest connection (not one
    being answered) to let a new one in: 300 clients that connect and say nothing cannot lock others out."""

    channel_class = Channel

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        cutoff = time.monotonic() - self.adj.channel_timeout
        for channel in list(self.active_channels.values()):
            if channel.request is not None and channel.began < cutoff:
                channel.will_close = True

    def readable(self) -> bool:
        if self.accepting:
            channels = list(self.active_channels.values())
            if len(self._map) - sum(1 for c in channels if c.will_close) >= self.adj.connection_limit:
                idle = [c for c in channels if not c.will_close and not c.requests and not c.total_outbufs_len]
                if idle:
                    min(idle, key=lambda c: c.last_activity).will_close = True
                    self.pull_trigger()  # the loop closes it now, not after its next timeout
        return bool(super().readable())


def quiet_logs() -> None:
    """waitress logs to `waitress`: a client that hangs up or a limit reached is no error of ours (quiet);
    anything worse is one `error:` line, never a traceback."""
    logger = logging.getLogger("waitress")
    logger.propagate = False
    logger.setLevel(logging.ERROR)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLine())
        logger.addHandler(handler)


class OneLine(logging.Formatter):
    """A record as one `error:` line: its message, and the exception's type and text without the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        cause = f": {type(error).__name__}: {error}" if error is not None else ""
        return "error: " + " ".join(f"{record.getMessage()}{cause}".split())


def listen(host: str, port: int, reader: Reader, token: bytes | None = None, limits: Limits | None = None) -> Server:
    """A server bound to `host`:`port` (port 0: a free one), not yet serving; with `token`, every
    request must carry it as `Authorization: Bearer TOKEN` (401 otherwise)."""
    limits = limits or Limits()
    quiet_logs()
    adjustments = Adjustments(
        host=host,
        port=port,
        ident="rollouts",
        threads=limits.threads,
        connection_limit=limits.connections,
        channel_timeout=int(limits.idle),
        cleanup_interval=max(int(limits.sweep), 1),
        max_request_header_size=limits.header_bytes,
        max_request_body_size=limits.body_bytes,
        asyncore_use_poll=True,  # select() cannot wait on a descriptor past 1023
        asyncore_loop_timeout=1,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockinfo = next((info for info in adjustments.listen if info[0] == family), adjustments.listen[0])
    wsgi = app.application(reader.respond, is_loopback(host), token)
    return Server(wsgi, adj=adjustments, sockinfo=sockinfo)


def is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return all(str(info[4][0]) in ("127.0.0.1", "::1") or str(info[4][0]).startswith("127.") for info in infos)


def url(server: Server) -> str:
    host, port = str(server.effective_host), server.effective_port
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve_until_stopped(server: Server, reader: Reader) -> None:
    """Serve until Ctrl-C or SIGTERM; then wait for the request being answered, and close."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopped()

    # Both set here, as the controller does: a process started with SIGINT ignored (a background job
    # of a script, a test runner's worker) gets no KeyboardInterrupt from Python, and Ctrl-C must still stop it.
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()  # returns once a Stopped ends its loop
    except Stopped:
        pass  # landed outside the loop (just before it, or in its own ending)
    finally:
        for signum in previous:  # a second signal must not cut the closing short
            signal.signal(signum, signal.SIG_IGN)
        server.close()
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        reader.lock.acquire(timeout=10)  # the views close after the request in flight
        for signum, handler in previous.items():
            signal.signal(signum, handler)
