"""The audit as a use case: the invariants checked on the log's own fold, the home's views and runtime held
to it, and the verdict as a typed report of violations, each naming its rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...domain.audit import Violation
from ...domain.audit_rules import audit_rules
from ...projections import audit_queries
from ...projections.projection import NOT_THE_EVENTS
from ...projections.rebuild import paused_gc
from ...projections.records import UndecodableEvent
from ...projections.refold import Differing, Refold
from ..store.failures import not_utf8
from ..store.reader import RecorderSource
from ..store.snapshot_check import snapshot_breaks
from ..store.verify import seen_by_home, verify_log
from .runtime_check import runtime_breaks
from .violations import AuditReport

if TYPE_CHECKING:
    import sqlite_utils

    from .session import Session


def audit(session: Session, name: str | None) -> AuditReport:
    """Audit the log of `session` (only config `name`'s events, when given; NotFound if it has none)."""
    # The chain is walked first, by processes forked while no other thread runs (a fork copies the
    # locks other threads hold); the views' catch-up, the fold's worker process and SQLite's threads start after.
    breaks = _chain_breaks(session)
    try:
        total, violations, differing = _folded(session, name)
    except Exception as error:
        column = not_utf8(error)
        if column is None or not breaks:
            raise
        # Text that is not UTF-8 (a hand edit) stops every read of the log but the chain's walk, which
        # reports it where it is (I8): those breaks are the verdict.
        session.warn(f"the log holds text that is not UTF-8 (column {column}): only the hash chain was checked")
        return AuditReport(0, breaks, [])
    violations += breaks + [_view_violation(d) for d in differing]
    violations.sort(key=lambda v: v.position)
    return AuditReport(total, violations, differing)


def _folded(session: Session, name: str | None) -> tuple[int, list[Violation], list[Differing]]:
    """(events checked, violations of the rules and of the runtime, views that differ) on the log's own fold."""
    recorder = session.recorder
    live = session.bound_views()
    refold = Refold(RecorderSource(recorder), recorder.max_notification_id() or 0, recorder.log_id() or "")
    try:
        total, violations = _rules(refold.db("audit"), name)
        differing = [] if live is None else refold.differing(live)
        ran = runtime_breaks(session.home.runtime, recorder.log_id(), refold.db("history"), refold.db("audit"))
    finally:
        refold.close()
    return total, violations + [v for v in ran if name is None or v.config == name], differing


def _rules(db: sqlite_utils.Database, name: str | None) -> tuple[int, list[Violation]]:
    """(events checked, violations of I1-I3, I9, I10, G1 and G2) in the audit view `db`."""

    if name is not None:
        audit_queries.require_config(db, name)
    # No cycle collection meanwhile: the rules make no cycles and keep ~8 containers per deployment alive,
    # which each full collection walked again (3 of the 8.6 s of CPU at 1M events).
    events = audit_queries.rule_events(db, name)
    with paused_gc():
        try:
            found = audit_rules(events, audit_queries.upstreams(db))
        except NOT_THE_EVENTS as error:  # a document without what a rule reads: the event the rules were at
            position = audit_queries.at(events)
            what = "an event" if position is None else f"the event at position {position}"
            raise UndecodableEvent(what, error) from error
    return audit_queries.event_count(db, name), found


def _view_violation(found: Differing) -> Violation:
    """A live view that differs from the log's fold (I5), as an audit violation naming it."""
    tables = ", ".join(f"{table}: {n} row{'s' * (n != 1)}" for table, n in found.tables.items())
    message = (
        f"view {found.name} differs from the log's fold ({tables}): edited, or left by other code;"
        f" run 'rollouts projections rebuild {found.name}'"
    )
    return Violation(found.position, None, None, "I5", message, view=found.name)


def _chain_breaks(session: Session) -> list[Violation]:
    """Where the log's hash chain breaks, the head this home has seen if the log lost it, and the stored
    snapshots that are not their events' fold (I8), as audit violations."""

    recorder = session.recorder
    breaks = verify_log(recorder).breaks + seen_by_home(session.home.runtime, recorder) + snapshot_breaks(recorder)
    return [Violation(b.position, None, None, "I8", b.problem) for b in breaks]
