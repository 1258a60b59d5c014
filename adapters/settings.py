"""Settings read from the environment (`ROLLOUTS_*`), each checked here as an option is: a bad
value is a usage error (exit 2) that names the variable.

The options' own variables (ROLLOUTS_HOME, ROLLOUTS_STORE, ROLLOUTS_ACTOR) are click's to read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..domain.errors import UsageError

_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")  # ASCII digits, with an optional fraction


class BadSetting(UsageError):
    """An environment variable holds what its setting cannot be (the CLI exits 2)."""


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds."""
    text = os.environ.get(name)
    if text is None:
        return default
    if not _NUMBER.fullmatch(text) or float(text) <= 0:
        raise BadSetting(f"{name}={text!r}: expected a number of seconds above 0 (default {default:g})")
    return float(text)


def _switch(name: str) -> bool:
    """Off unless "1" ("", "0" or unset: off)."""
    text = os.environ.get(name, "")
    if text not in ("", "0", "1"):
        raise BadSetting(f"{name}={text!r}: expected 1 (on) or 0 (off)")
    return text == "1"


def lease_seconds() -> float:
    """A claimant's lease (PostgreSQL stores): other hosts end its claims once it is silent this long."""
    return _seconds("ROLLOUTS_LEASE_SECONDS", 30.0)


def notify_lease_seconds() -> float:
    """A sink's lease: how long a controller may deliver to it before renewing."""
    return _seconds("ROLLOUTS_NOTIFY_LEASE_SECONDS", 30.0)


def notify_timeout() -> float:
    """How long a sink may take to answer."""
    return _seconds("ROLLOUTS_NOTIFY_TIMEOUT", 10.0)


def freeze_projections() -> bool:
    """A fault-injection switch for tests: read models are served as they are on disk."""
    return _switch("ROLLOUTS_FREEZE_PROJECTIONS")


SETTINGS: dict[str, Callable[[], Any]] = {
    "ROLLOUTS_LEASE_SECONDS": lease_seconds,
    "ROLLOUTS_NOTIFY_LEASE_SECONDS": notify_lease_seconds,
    "ROLLOUTS_NOTIFY_TIMEOUT": notify_timeout,
    "ROLLOUTS_FREEZE_PROJECTIONS": freeze_projections,
}


def check() -> None:
    """Read every setting once (BadSetting on the first bad one), before a command does anything."""
    for read in SETTINGS.values():
        read()
