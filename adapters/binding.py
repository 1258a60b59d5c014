"""A home's binding to one log: the log's id, and the highest position any command of the home has seen.

The views in projections/ and the deployers in runtime/ were made from one log. Pointed at
another log, or at one whose head is below a position this home has already seen (a backup put
back, a truncated or emptied log), the home must not go on as if nothing happened: commands that
write or reconcile refuse, and `rollouts home rebind` is the audited way to accept the log as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from adapters.eventstore import StoreUnavailable

FILE = "binding.json"


class HomeBoundElsewhere(StoreUnavailable):
    """The home was made from another log, or from this log when it was longer (the CLI exits 5)."""


@dataclass(frozen=True)
class Binding:
    log_id: str | None
    seen: int

    def problem(self, log_id: str | None, head: int, home: Path) -> str | None:
        """Why this home must not act on the log (`log_id`, `head`), or None when it may."""
        if self.log_id and log_id and log_id != self.log_id:
            return (
                f"home {home} belongs to log {self.log_id} (seen up to position {self.seen}), but the store"
                f" holds log {log_id} (head {head}); point --store/--home at the right pair, or run"
                " 'rollouts home rebind' to bind this home to this log"
            )
        if head < self.seen:
            return (
                f"the log went back: home {home} has seen position {self.seen} of log {self.log_id}, but the log"
                f" now ends at position {head} (restored from an older copy, truncated or emptied?); run"
                " 'rollouts log verify', then 'rollouts home rebind' to accept the log as it is now"
            )
        return None


def path_in(runtime: Path) -> Path:
    return runtime / FILE


def load(runtime: Path) -> Binding | None:
    try:
        data = json.loads(path_in(runtime).read_text())
        return Binding(data.get("log_id"), int(data["seen"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise HomeBoundElsewhere(
            f"{path_in(runtime)} is unreadable ({error}); run 'rollouts home rebind' to bind the home again"
        ) from None


def record(runtime: Path, log_id: str | None, head: int, *, replace: bool = False) -> Binding:
    """Raise the seen position to `head` (never lower it); with `replace`, bind anew to (log_id, head)."""
    with _locked(runtime):
        old = None if replace else load(runtime)
        new = Binding(log_id or (old and old.log_id), max(head, old.seen) if old else head)
        if new != old:
            tmp = path_in(runtime).with_suffix(".tmp")
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                json.dump({"log_id": new.log_id, "seen": new.seen}, f)
            os.replace(tmp, path_in(runtime))
        return new


@contextlib.contextmanager
def _locked(runtime: Path) -> Iterator[None]:
    fd = os.open(runtime / "binding.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
