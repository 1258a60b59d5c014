"""`home rebind` as a use case: what a rebind would stop, and the rebind itself (an audited event, the views
rebuilt, the deployers no claim of this log made stopped and never adopted)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from ..runtime.local import LocalRuntime
from ..runtime.port import Observed, Runtime, claim_parts
from ..store import binding
from ..store.binding import Binding
from .application import RolloutsApp
from .moves import log_ids_by_position, rename_rewound
from .session import Session


@dataclass(frozen=True)
class Survey:
    """What a rebind starts from: the home's binding (None: none, or `unreadable`), and the running
    deployers it would stop."""

    old: Binding | None
    unreadable: bool
    foreign: list[str]


@dataclass(frozen=True)
class Rebound:
    """What a rebind did: the new id of a log that went back (None: it kept its id), the binding it
    recorded, the deployers it stopped, and how many made before claims were recorded it disowned."""

    renamed: str | None
    bound: Binding
    stopped: list[str]
    disowned: int


def survey(session: Session) -> Survey:
    """What a rebind of `session`'s home would start from, found without changing anything (no log is made).
    From here on the session acts on the store's log whatever the home is bound to."""
    session.accept_any_log = True
    try:
        old, unreadable = binding.load(session.home.runtime), False
    except binding.UnreadableBinding:  # the error that sends the user here must not stop them here too
        old, unreadable = None, True
    return Survey(old, unreadable, _foreign(session))


def target(session: Session) -> tuple[str | None, int] | None:
    """The log a rebind would bind the home to, and its head (None: a new, empty log in the store)."""
    if not session.store_has_log():
        return None
    return session.recorder.log_id(), session.recorder.max_notification_id() or 0


def rebind(session: Session, found: Survey, claimant: str) -> Rebound:
    """Bind `session`'s home (of controllers `claimant`) to the store's log as it is now, after `survey`."""
    old = found.old
    app = session.app
    renamed = None
    if old is not None and old.log_id == app.recorder.log_id() and _rewound(app, old):
        renamed = rename_rewound(app, session.meta())  # its next positions must not repeat the old log's keys
    head = app.recorder.max_notification_id() or 0
    app.rebind_home(claimant, (old.log_id, old.seen) if old else (None, None), head, session.meta())
    runtime = LocalRuntime(session.home)
    try:
        stopped = _stop_foreign(runtime, app)
        disowned = runtime.disown_unclaimed()
    finally:
        runtime.close()
    shutil.rmtree(session.home.projections, ignore_errors=True)
    session.home.ensure()
    head = app.recorder.max_notification_id() or 0
    hash_ = app.recorder.hash_at(head) if head else None
    bound = binding.record(session.home.runtime, app.recorder.log_id(), head, hash_, replace=True)
    session.read("desired", "history", "audit")
    return Rebound(renamed, bound, stopped, disowned)


def _rewound(app: RolloutsApp, old: Binding) -> bool:
    """Whether the log went back or changed under the home's binding `old` (the same log id)."""
    recorder = app.recorder
    head = recorder.max_notification_id() or 0
    return head < old.seen or (old.hash is not None and old.seen > 0 and recorder.hash_at(old.seen) != old.hash)


def _foreign(session: Session) -> list[str]:
    """The running deployers a rebind would stop, found without changing anything (no log is made)."""

    if not (session.home.runtime / "runtime.db").exists():
        return []

    app = session.app if session.store_has_log() else None
    writers = log_ids_by_position(app) if app is not None else None
    runtime: Runtime = LocalRuntime(session.home.path)
    try:
        return [row.name for row in runtime.active() if not _made_for(row, app, writers)]
    finally:
        runtime.close()


def _made_for(row: Observed, app: RolloutsApp | None, writers: Callable[[int], str] | None) -> bool:
    """Whether runtime row `row` was made for a claim of the log `app` holds (None: no log yet), by the log
    that wrote the claim's position (`writers`: this log, or the one it went on from)."""

    claim = claim_parts(row.claim)
    if app is None or writers is None or claim is None:
        return False
    return claim[0] == writers(claim[1]) and app.recorder.hash_at(claim[1]) == claim[2]


def _stop_foreign(runtime: Runtime, app: RolloutsApp) -> list[str]:
    """Stop the running deployers that no claim of this log made: they belong to a history that is gone."""

    writers = log_ids_by_position(app)
    stopped = []
    for row in runtime.active():
        if _made_for(row, app, writers):
            continue
        runtime.stop(row.name, reason="stopped by home rebind: no claim of this log made it")
        stopped.append(row.name)
    return stopped
