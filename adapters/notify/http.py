"""POSTing a notification with urllib3: one pooled connection per sink, a bounded timeout, and
every failure (no connection, a non-2xx answer, the timeout) as one short, stable line of our own words."""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
from urllib3.exceptions import (
    HTTPError,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    TimeoutError,
)

from .. import settings


def timeout_seconds() -> float:
    """How long a sink may take to answer (ROLLOUTS_NOTIFY_TIMEOUT, for tests; default 10 s)."""

    return settings.notify_timeout()


class Poster:
    """Sends JSON documents; retries are the caller's (urllib3's own are off: order is ours to keep)."""

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = timeout or timeout_seconds()
        self.pool = urllib3.PoolManager(num_pools=4, maxsize=1, retries=False, timeout=self.timeout)

    def post(self, url: str, document: dict[str, Any], key: str) -> str | None:
        """POST `document` to `url`; None when the sink answered 2xx, else what went wrong."""
        body = json.dumps(document, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        url, credentials = _without_credentials(url)
        if credentials is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        try:
            response = self.pool.request("POST", url, body=body, headers=headers, redirect=False)
        except (TimeoutError, MaxRetryError) as error:
            return _describe(getattr(error, "reason", None) or error, self.timeout)
        except (ProtocolError, HTTPError, OSError) as error:
            return _describe(error, self.timeout)
        if 200 <= response.status < 300:
            return None
        return status_text(response.status)

    def close(self) -> None:
        self.pool.clear()


def status_text(status: int) -> str:
    """A non-2xx answer as the log keeps it: the code and the standard phrase for it, never the sink's own
    reason text (which may echo the request's path, a token with it, or anything else for ever: 7.11)."""
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _without_credentials(url: str) -> tuple[str, str | None]:
    """The URL without its user info, and `user:password` (percent-decoded) for basic auth, if it had any
    (urllib3 sends none of it by itself: a basic-auth sink would never be let in)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    return urlunsplit(parts._replace(netloc=host)), f"{user}:{password}"


def _describe(error: BaseException, timeout: float) -> str:
    """Short and stable (a failure is recorded again only when its text changes): no addresses, no ids."""
    if isinstance(error, NameResolutionError):  # before NewConnectionError, its base
        return "cannot resolve the sink's host"
    if isinstance(error, NewConnectionError):  # before TimeoutError: urllib3 derives it from ConnectTimeoutError
        reason = str(error).rpartition("] ")[2] if "] " in str(error) else "connection failed"
        return f"cannot connect: {reason}"
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout:g} s"
    # The rest in our words only: a library's message may quote the URL or what the sink sent.
    if isinstance(error, OSError) and error.strerror:
        return f"connection failed: {error.strerror}"[:200]
    return f"connection failed ({type(error).__name__})"
