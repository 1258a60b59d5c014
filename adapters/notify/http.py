"""POSTing a notification with urllib3: one pooled connection per sink, a bounded timeout, and
every failure (no connection, a non-2xx answer, the timeout) as one short, stable line of text."""

from __future__ import annotations

import json
import os
from typing import Any

import urllib3
from urllib3.exceptions import (
    HTTPError,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    TimeoutError,
)

DEFAULT_TIMEOUT_S = 10.0


def timeout_seconds() -> float:
    """How long a sink may take to answer (ROLLOUTS_NOTIFY_TIMEOUT, for tests; default 10 s)."""
    return float(os.environ.get("ROLLOUTS_NOTIFY_TIMEOUT", DEFAULT_TIMEOUT_S))


class Poster:
    """Sends JSON documents; retries are the caller's (urllib3's own are off: order is ours to keep)."""

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = timeout or timeout_seconds()
        self.pool = urllib3.PoolManager(num_pools=4, maxsize=1, retries=False, timeout=self.timeout)

    def post(self, url: str, document: dict[str, Any], key: str) -> str | None:
        """POST `document` to `url`; None when the sink answered 2xx, else what went wrong."""
        body = json.dumps(document, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        try:
            response = self.pool.request("POST", url, body=body, headers=headers, redirect=False)
        except (TimeoutError, MaxRetryError) as error:
            return _describe(getattr(error, "reason", None) or error, self.timeout)
        except (ProtocolError, HTTPError, OSError) as error:
            return _describe(error, self.timeout)
        if 200 <= response.status < 300:
            return None
        return f"HTTP {response.status} {response.reason or ''}".strip()

    def close(self) -> None:
        self.pool.clear()


def _describe(error: BaseException, timeout: float) -> str:
    """Short and stable (a failure is recorded again only when its text changes): no addresses, no ids."""
    if isinstance(error, NameResolutionError):  # before NewConnectionError, its base
        return "cannot resolve the sink's host"
    if isinstance(error, NewConnectionError):  # before TimeoutError: urllib3 derives it from ConnectTimeoutError
        reason = str(error).rpartition("] ")[2] if "] " in str(error) else "connection failed"
        return f"cannot connect: {reason}"
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout:g} s"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:200]
