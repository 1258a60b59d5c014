"""A home's binding to one log: the log's id, the highest position any command of the home has seen,
and the log's chain hash at that position.

The views in projections/ and the deployers in runtime/ were made from one log. Pointed at
another log, at one whose head is below a position this home has already seen (a backup put
back, a truncated or emptied log), or at one whose history up to that position is not the one
seen (a copy of the log that went another way, its chain hashes rewritten or removed), the home must
not go on as if nothing happened: commands that write or reconcile refuse, and `rollouts home
rebind` is the audited way to accept the log as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .port import StoreUnavailable

FILE = "binding.json"


class HomeBoundElsewhere(StoreUnavailable):
    """The home was made from another log, or from this log when it was longer (the CLI exits 5)."""


class UnreadableBinding(HomeBoundElsewhere):
    """binding.json cannot be read: what log the home follows is unknown until `home rebind` (exit 5)."""


@dataclass(frozen=True)
class Binding:
    log_id: str | None
    seen: int
    hash: str | None = None  # the chain's hash at `seen` (None: the log had none there, or an older binding)

    def problem(self, log_id: str | None, head: int, home: Path, hash_at: Callable[[int], str | None]) -> str | None:
        """Why this home must not act on the log (`log_id`, `head`, its chain's `hash_at` a position), or
        None when it may."""
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
        if self.hash is not None and self.seen and (found := hash_at(self.seen)) != self.hash:
            return (
                f"the log's history changed: home {home} has seen position {self.seen} of log {self.log_id} with"
                f" hash {self.hash}, but the log now has {found or 'no hash'} there (a copy of the log that went"
                " another way put back, or its chain hashes rewritten or removed?); run 'rollouts log verify',"
                " then 'rollouts home rebind' to accept the log as it is now"
            )
        return None

    def lost(self, log_id: str | None, head: int, hash_at: Callable[[int], str | None]) -> str | None:
        """What the log (`log_id`, `head`, its chain's `hash_at`) no longer holds of what this home has seen
        (the position, with its hash), when the home is bound to this log; None when it holds it all."""
        if not self.seen or (self.log_id and log_id and log_id != self.log_id):
            return None
        if head < self.seen:
            return f"the home has seen position {self.seen} of this log, but the log now ends at position {head}"
        if self.hash is not None and (found := hash_at(self.seen)) != self.hash:
            return (
                f"the home has seen position {self.seen} of this log with hash {self.hash}, but the log now has"
                f" {found or 'no hash'} there: the log was replaced by another, or its chain rewritten or removed"
            )
        return None


def path_in(runtime: Path) -> Path:
    return runtime / FILE


def load(runtime: Path) -> Binding | None:
    try:
        data = json.loads(path_in(runtime).read_text())
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        found, seen, log_id = data.get("hash"), data["seen"], data.get("log_id")
        if type(seen) is not int or seen < 0:  # (1e999, a float, true, text: not a position)
            raise ValueError(f"seen is {seen!r}, not a position")
        if not isinstance(log_id, str | None) or not isinstance(found, str | None):
            raise TypeError("log_id and hash must be text")
        return Binding(log_id, seen, found)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise UnreadableBinding(
            f"{path_in(runtime)} is unreadable ({error}); run 'rollouts home rebind' to bind the home again"
        ) from None


def record(runtime: Path, log_id: str | None, head: int, hash_: str | None, *, replace: bool = False) -> Binding:
    """Raise the seen position to `head`, whose chain hash is `hash_` (never lower it); with `replace`,
    bind anew to (log_id, head, hash_)."""
    with _locked(runtime):
        old = None if replace else load(runtime)
        if old is None or head > old.seen or (head == old.seen and old.hash is None):
            new = Binding(log_id or (old.log_id if old is not None else None), head, hash_)
        else:
            new = Binding(log_id or old.log_id, old.seen, old.hash)
        if new != old:
            tmp = path_in(runtime).with_suffix(".tmp")
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                json.dump({"log_id": new.log_id, "seen": new.seen, "hash": new.hash}, f)
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
